//! `vecplane bench --scenario vm-tcp [--reference linux-bridge]`: one iperf3 TCP stream between
//! two QEMU guests, run after run, through vecplane (a MAC-learning bridge with two vhost-user
//! ports, in this process) and, with the reference, through a Linux bridge with two TAP ports
//! (QEMU's tap backend, offloads negotiated with the TAP). Both pairs of guests boot once and
//! stay up; the runs alternate between them (vecplane, bridge, vecplane, ...) so that noise on
//! the shared machine hits both, and the report gives each side's mean, median and coefficient
//! of variation, every run, whether the sender negotiated TSO, and the ratios.
//!
//! It owns the guests, the data plane, the bridge's namespace and their scratch files for the
//! length of the run and deletes them after, also on failure; traffic never leaves the guests'
//! own links (198.18.30.0/24 and 198.18.31.0/24).

use crate::vm::{self, Offloads, TcpRun, VmSwitch};
use crate::{sys, BenchArgs, Reference};
use anyhow::{bail, Context, Result};
use netlab::{chain, Guest, GuestImage, TapBridges};
use serde_json::{json, Value};

/// The scenario's name.
pub const NAME: &str = "vm-tcp";
/// The reference's name in reports.
pub const REFERENCE_NAME: &str = "linux-bridge";
/// Guests on vecplane: 198.18.30.1 -> .2.
const SUBNET_VECPLANE: u8 = 30;
/// Guests on the Linux bridge: 198.18.31.1 -> .2.
const SUBNET_BRIDGE: u8 = 31;

/// A finished report: text for people, JSON for machines.
pub struct Report {
    /// The text report.
    pub text: String,
    /// The JSON report.
    pub json: Value,
}

impl Report {
    /// Print it: the text, or one JSON line.
    pub fn print(&self, json: bool) -> Result<()> {
        if json {
            println!("{}", serde_json::to_string(&self.json)?);
        } else {
            print!("{}", self.text);
        }
        Ok(())
    }
}

/// The run's settings, checked.
pub(crate) struct Plan {
    pub(crate) seconds: u32,
    pub(crate) warmup: u32,
    pub(crate) runs: usize,
    pub(crate) cpu: usize,
    pub(crate) reference: bool,
    pub(crate) progress: bool,
    /// `--busy-worker`.
    pub(crate) busy_worker: bool,
}

/// Check the arguments shared by the VM scenarios (`name` for messages).
pub(crate) fn plan(args: &BenchArgs, name: &str) -> Result<Plan> {
    if args.sweep {
        bail!("{name}: --sweep is for the engine scenarios");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(args.seconds >= 1.0 && args.seconds <= 3600.0) {
        bail!("{name}: --seconds must be 1 to 3600 (iperf3 counts whole seconds)");
    }
    if !(args.warmup >= 0.0 && args.warmup <= 600.0) {
        bail!("--warmup must be 0 to 600 seconds");
    }
    let cpu = match args.cpu {
        Some(c) => c,
        None => sys::last_cpu().context("cannot read this process's CPU affinity")?,
    };
    if !sys::allowed_cpus().contains(&cpu) {
        bail!("CPU {cpu} is not available to this process");
    }
    let reference = args.reference == Some(Reference::LinuxBridge);
    if let Some(why) = netlab::missing_guest_prerequisite() {
        bail!("{name}: {why}");
    }
    if reference && !netlab::cmd::is_root() {
        bail!("{name}: --reference linux-bridge needs root (a namespace, a bridge, TAP devices)");
    }
    Ok(Plan {
        seconds: args.seconds.ceil() as u32,
        warmup: args.warmup.ceil() as u32,
        runs: args.runs,
        cpu,
        reference,
        progress: !args.no_progress,
        busy_worker: args.busy_worker,
    })
}

impl Plan {
    pub(crate) fn say(&self, name: &str, line: String) {
        if self.progress {
            eprintln!("{name}: {line}");
        }
    }
}

/// How vecplane's worker polls in the VM scenarios: adaptive, as vecplane's default config
/// (it sleeps when idle, so it leaves the CPUs to the guests, and a guest's kick wakes it at
/// once); with `--busy-worker`, busy during its own measured runs ([`VmSwitch::set_busy`]) and
/// adaptive otherwise (so it takes no CPU from the reference's runs).
pub(crate) fn poll_mode(busy_worker: bool) -> &'static str {
    if busy_worker {
        "polling busily during vecplane's runs and adaptively (napping) otherwise"
    } else {
        "polling adaptively throughout (it sleeps when idle; a guest's kick wakes it)"
    }
}

/// vecplane's `[dataplane]` lines for the VM scenarios.
pub(crate) fn dataplane_lines(cpu: usize) -> String {
    format!("buffers = 8192\nworker-cpu = {cpu}\npoll-mode = \"adaptive\"")
}

/// vecplane's config: a MAC-learning bridge with the vhost-user ports of guests A and B.
pub fn vecplane_config(cpu: usize) -> Result<String> {
    let mut c = format!(
        "# vecplane bench --scenario {NAME}\n[dataplane]\n{}\n\n[[bridge]]\nname = \"{}\"\n\n",
        dataplane_lines(cpu),
        chain::BRIDGE
    );
    for p in chain::ports(0)? {
        c.push_str(&chain::vhost_user_port(&p.name, &p.port_mac, "server", ""));
    }
    Ok(c)
}

/// One pair of guests and what it measured.
struct Side<'a> {
    label: String,
    client: Guest,
    server: Guest,
    server_ip: String,
    switch: Option<&'a VmSwitch>,
    offloads: Option<(Offloads, Offloads)>,
    runs: Vec<TcpRun>,
}

impl Side<'_> {
    fn pids(&self) -> Vec<u32> {
        [self.client.pid(), self.server.pid()]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Connectivity, the server, the offloads.
    fn prepare(&mut self) -> Result<()> {
        vm::reach(&mut self.client, &self.server_ip, vm::SHORT)?;
        vm::start_iperf3_server(&mut self.server, &self.server_ip)?;
        self.offloads = Some((
            vm::offloads(&mut self.client, "eth0")?,
            vm::offloads(&mut self.server, "eth0")?,
        ));
        Ok(())
    }

    fn run(&mut self, seconds: u32) -> Result<TcpRun> {
        let pids = self.pids();
        vm::tcp_run(
            &mut self.client,
            &self.server_ip,
            seconds,
            &pids,
            self.switch,
        )
        .with_context(|| format!("{}: iperf3 run", self.label))
    }

    fn tso(&self) -> bool {
        self.offloads
            .as_ref()
            .is_some_and(|(c, s)| c.host_tso4 && s.guest_tso4)
    }

    fn offloads_json(&self) -> Value {
        match &self.offloads {
            Some((c, s)) => json!({"client": c, "server": s}),
            None => Value::Null,
        }
    }
}

/// The next two guests as a client and a server on `subnet`.
fn pair<'a>(
    guests: &mut impl Iterator<Item = Guest>,
    label: &str,
    subnet: u8,
    switch: Option<&'a VmSwitch>,
) -> Result<Side<'a>> {
    let (Some(client), Some(server)) = (guests.next(), guests.next()) else {
        bail!("fewer guests than were booted");
    };
    Ok(Side {
        label: label.to_string(),
        client,
        server,
        server_ip: chain::endpoint_ip(subnet, 2),
        switch,
        offloads: None,
        runs: Vec::new(),
    })
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// `vecplane bench --scenario vm-tcp`: measure and print (text, or one JSON line).
pub fn run(args: &BenchArgs) -> Result<()> {
    compare(args)?.print(args.json)
}

/// Boot both pairs, run the interleaved series, and build the report.
pub fn compare(args: &BenchArgs) -> Result<Report> {
    let p = plan(args, NAME)?;
    let say = |l: String| p.say(NAME, l);
    netlab::install_cleanup_handlers()?;
    let load = sys::load_average();
    say("finding or building the guest image".into());
    let image = GuestImage::build_or_find()?;
    let vp = VmSwitch::start(&vecplane_config(p.cpu)?, args.busy_worker)?;
    let mut specs = chain::guest_specs(0, SUBNET_VECPLANE, "vp-", |port| Ok(vp.nic(port)))?;
    let lab = if p.reference {
        let mut lab = TapBridges::create()?;
        let br = lab.add_bridge()?;
        let taps = [lab.add_tap(Some(&br))?, lab.add_tap(Some(&br))?];
        let lb = chain::guest_specs(0, SUBNET_BRIDGE, "lb-", |port| {
            let tap = if port.name == "a" { &taps[0] } else { &taps[1] };
            Ok(lab.nic(tap, port.guest_mac))
        })?;
        specs.extend(lb.into_iter().map(|s| lab.guest(s)));
        Some(lab)
    } else {
        None
    };
    say(format!("booting {} guests (QEMU, TCG)", specs.len()));
    let mut guests = vm::boot(&image, specs, &say)?.into_iter();
    let mut sides = vec![pair(
        &mut guests,
        "vecplane (learning bridge, vhost-user)",
        SUBNET_VECPLANE,
        Some(&vp),
    )?];
    if lab.is_some() {
        sides.push(pair(
            &mut guests,
            "Linux bridge (TAP ports)",
            SUBNET_BRIDGE,
            None,
        )?);
    }
    for s in &mut sides {
        s.prepare()?;
        say(format!(
            "{}: ready; TSO negotiated A -> B: {}",
            s.label,
            yes(s.tso())
        ));
    }
    if p.warmup > 0 {
        for s in &mut sides {
            let r = s.run(p.warmup)?;
            say(format!(
                "{}: warm-up {} s: {:.3} Gbit/s (not reported)",
                s.label, p.warmup, r.gbps
            ));
        }
    }
    for r in 0..p.runs {
        for s in &mut sides {
            let t = s.run(p.seconds)?;
            say(format!(
                "run {}/{} {}: {:.3} Gbit/s, {} retransmits, {:.0} B per sent frame",
                r + 1,
                p.runs,
                s.label,
                t.gbps,
                t.retransmits,
                t.tx_bytes_per_frame.unwrap_or(0.0)
            ));
            s.runs.push(t);
        }
    }
    let nf = lab
        .as_ref()
        .and_then(|l| l.sysctl("net/bridge/bridge-nf-call-iptables"));
    let report = build_report(&p, &sides, &vp, nf, load);
    drop(sides);
    drop(lab);
    drop(vp);
    Ok(report)
}

fn build_report(
    p: &Plan,
    sides: &[Side],
    vp: &VmSwitch,
    bridge_nf: Option<String>,
    load: Option<f64>,
) -> Report {
    let ours = &sides[0];
    let mut notes = vec![
        format!(
            "one iperf3 TCP stream per run, -t {} -i 0, guest A (client) -> guest B (server \
             daemon); the figure is what B received; runs alternate between the sides{}",
            p.seconds,
            if p.warmup > 0 {
                format!(", after one unreported {} s warm-up run per side", p.warmup)
            } else {
                String::new()
            }
        ),
        "guests: QEMU under TCG (no usable KVM here), 1 vCPU, 256 MiB, virtio-net-pci with \
         vectors=0 on both sides (vhost-user needs it under TCG; the TAP NICs get the same \
         device): the emulator limits the rate as much as the switch does"
            .to_string(),
        format!(
            "CPUs: vecplane's worker is pinned to CPU {}, {}; the QEMU processes are not \
             pinned. The worker's CPU time is CPU the two guests would otherwise share; the \
             Linux bridge has no thread of its own, it forwards inside the sending QEMU's write \
             to its TAP. Per run, all_runs has the CPU seconds of the QEMUs and of the worker \
             and how busy the whole machine was",
            p.cpu,
            poll_mode(p.busy_worker)
        ),
        format!(
            "TSO (sender's HOST_TSO4 and receiver's GUEST_TSO4 in the virtio features the \
             guests negotiated): vecplane {}{}",
            yes(ours.tso()),
            match sides.get(1) {
                Some(s) => format!(", Linux bridge {}", yes(s.tso())),
                None => String::new(),
            }
        ),
    ];
    if sides.len() > 1 {
        notes.push(format!(
            "the Linux bridge is in a namespace of its own, STP off, no address; QEMU's tap \
             backend (vhost=off: no vhost-net here) negotiates checksum and TSO offloads with \
             the TAPs; bridge-nf-call-iptables = {} there (no rules)",
            bridge_nf.as_deref().unwrap_or("absent")
        ));
    }
    notes.push(format!(
        "the machine is shared (2 CPUs; load average {} at the start): figures are disturbed \
         by whatever else runs",
        load.map_or("unknown".into(), |l| format!("{l:.2}"))
    ));
    let ports = vp.ports_json();
    if let Some(n) = vm::drops_note(&ports) {
        notes.push(n);
    }
    let mut j = vm::series_json(&ours.runs);
    let extra = json!({
        "scenario": NAME,
        "switch": "vecplane bridge (MAC learning), two vhost-user ports, in the bench process",
        "seconds": p.seconds,
        "warmup_seconds": p.warmup,
        "runs": p.runs,
        "cpu": p.cpu,
        "poll_mode": poll_mode(p.busy_worker),
        "tso": ours.tso(),
        "offloads": ours.offloads_json(),
        "ports": ports,
        "load_average": load,
        "notes": notes,
    });
    if let (Some(o), Value::Object(e)) = (j.as_object_mut(), extra) {
        o.extend(e);
    }
    let mut text = format!(
        "{NAME}: {} interleaved iperf3 TCP runs of {} s between two QEMU guests\n",
        p.runs, p.seconds
    );
    for n in &notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    text.push_str(&vm::series_line(&ours.label, &ours.runs));
    if let Some(theirs) = sides.get(1) {
        let (tr, cvr) = vm::compare_series(&ours.runs, &theirs.runs);
        let (t_ok, cv_ok) = (tr >= 1.0, cvr <= 1.0 / 3.0);
        let mut r = vm::series_json(&theirs.runs);
        let extra = json!({
            "name": REFERENCE_NAME,
            "tso": theirs.tso(),
            "offloads": theirs.offloads_json(),
            "bridge_nf_call_iptables": bridge_nf,
            "throughput_ratio": tr,
            "cv_ratio": cvr,
            "goal": {
                "throughput_at_least_the_bridge": t_ok,
                "cv_at_most_a_third_of_the_bridge": cv_ok,
                "met": t_ok && cv_ok,
            },
        });
        if let (Some(o), Value::Object(e)) = (r.as_object_mut(), extra) {
            o.extend(e);
        }
        j["reference"] = r;
        text.push_str(&vm::series_line(&theirs.label, &theirs.runs));
        text.push_str(&format!(
            "  vecplane / Linux bridge: {tr:.2}x the mean throughput, {cvr:.2}x the coefficient \
             of variation (goal: >= 1x and <= 0.33x: {})\n",
            if t_ok && cv_ok { "met" } else { "not met" }
        ));
    }
    Report { text, json: j }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_accepted_by_vecplanes_parser() {
        let text = vecplane_config(1).expect("config");
        let spec = control::parse_config(&text, "vm-tcp.toml", std::path::Path::new("/tmp"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.ports.len(), 2);
        assert_eq!(spec.bridges.len(), 1);
        assert_eq!(spec.worker_cpu, Some(1));
    }
}
