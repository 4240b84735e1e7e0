//! `vecplane bench --scenario veth-lb --encap nat4 [--reference nftables]`: vecplane as a NAT4
//! load balancer (AF_XDP ports, one pinned worker) against the kernel's nftables DNAT through a
//! `jhash` map over the same servers, both in one netlab load-balancer lab (the LB namespace
//! switched between them), driven by the same generator (`vecplane gen tx` on the router's veth
//! into the LB's uplink, fixed UDP flows to the VIP) and counted at the same point (the servers'
//! side of the LB's segment port, where only packets rewritten to a server's address and the
//! target port count), interleaved. It owns the lab, its sink and the report; it never sends
//! outside the lab's namespaces and never changes the balancers' configuration during a window.

use crate::report::median_index;
use crate::veth::{self, Plan, PpsRun, VethScenario};
use crate::veth_measure::{vecplane_figures, window_run, EdgeSample, START_TIMEOUT};
use crate::veth_report;
use crate::BenchArgs;
use anyhow::{bail, Context, Result};
use netlab::lb::addr as lbaddr;
use netlab::{
    cmd, Driver, Encap, KernelHash, LbLab, LbMode, LbSpec, ServerInfo, Spawned, Vecplane,
};
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

/// The scenario's name.
pub const NAME: &str = "veth-lb";
/// The reference's name in reports.
pub const REFERENCE_NAME: &str = "nftables";
/// Default servers behind the VIP (the lab holds at most [`netlab::lb::MAX_SERVERS`]).
pub const DEFAULT_SERVERS: u32 = 3;
/// The port the servers listen on (NAT4's `target_port`).
pub const TARGET_PORT: u16 = 8080;
/// Name prefix of the lab (not shared with the lab's tests).
const PREFIX: &str = "vlbn";
/// The bound on the generator's packets: this rate over its whole allowed time (veth carries
/// a few Mpps at most, so it never ends a run early).
const MAX_OFFERED_PPS: f64 = 20e6;

/// The generator's UDP destination port (the VIP's port).
fn vip_port() -> u16 {
    trafficgen::frames::DST_PORT
}

/// vecplane's `lb` lines: the NAT4 VIP on the generator's UDP port over every server of the
/// lab (weights as built), the NAT inside port on the servers' side.
pub fn lb_lines(servers: &[ServerInfo], vip: Ipv4Addr, flows: u32) -> Vec<String> {
    let port = vip_port();
    // Two places per flow, as the lb scenario sizes its flow table.
    let buckets = (flows.min(1 << 22) * 2).next_power_of_two().max(1024);
    let mut lines = vec![
        format!(
            "lb conf ip4-src-address {} ip6-src-address {} buckets {buckets} timeout 40",
            lbaddr::LB_DOWN4,
            lbaddr::LB_DOWN6
        ),
        format!(
            "lb vip {vip}/32 protocol udp port {port} encap nat4 type clusterip target_port \
             {TARGET_PORT}"
        ),
    ];
    // One `lb as` per server: VPP's `weight` is the whole line's.
    for s in servers {
        lines.push(format!(
            "lb as {vip}/32 protocol udp port {port} {} weight {}",
            s.ip4, s.weight
        ));
    }
    lines.push("lb set interface nat4 in down".to_string());
    lines
}

/// The kernel reference's rule for the same VIP: DNAT through a `jhash` map of the 2-tuple
/// source, one slot per unit of weight (netlab's layout), added to the lab's reference table.
pub fn nft_rule(servers: &[ServerInfo], vip: Ipv4Addr) -> String {
    let weights: Vec<u32> = servers.iter().map(|s| s.weight).collect();
    let slots = netlab::lb_kernel::weighted_slots(&weights);
    let map = slots
        .iter()
        .enumerate()
        .filter_map(|(k, &i)| {
            servers
                .get(i)
                .map(|s| format!("{k} : {} . {TARGET_PORT}", s.ip4))
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "add rule ip vlb_reference nat ip daddr {vip} udp dport {} dnat ip to jhash ip saddr . \
         udp sport mod {} map {{ {map} }}\n",
        vip_port(),
        slots.len()
    )
}

/// The sink on the servers' side of the LB's segment port (a classic BPF program at tc
/// ingress, direct action): a UDP/IPv4 frame to the servers' /24 and the target port returns
/// TC_ACT_SHOT (2), counted in the clsact qdisc's drops; anything else TC_ACT_STOLEN (4),
/// dropped uncounted. The qdisc's packets count everything that arrived. The generator's IPv4
/// headers have no options (the UDP port is read at a fixed offset).
pub fn sink_bytecode() -> String {
    let net = u32::from(lbaddr::LB_DOWN4) & 0xffff_ff00;
    let prog: [(u16, u8, u8, u32); 11] = [
        (0x28, 0, 0, 12),          // ldh [12]           ethertype
        (0x15, 0, 8, 0x0800),      // jeq IPv4 else other
        (0x30, 0, 0, 23),          // ldb [23]           protocol
        (0x15, 0, 6, 17),          // jeq UDP else other
        (0x20, 0, 0, 30),          // ld [30]            destination
        (0x54, 0, 0, 0xffff_ff00), // and /24
        (0x15, 0, 3, net),         // jeq the servers' /24 else other
        (0x28, 0, 0, 36),          // ldh [36]           UDP destination port
        (0x15, 0, 1, u32::from(TARGET_PORT)),
        (0x06, 0, 0, 2), // ret TC_ACT_SHOT   rewritten: counted
        (0x06, 0, 0, 4), // ret TC_ACT_STOLEN anything else
    ];
    let mut s = prog.len().to_string();
    for (code, jt, jf, k) in prog {
        s.push_str(&format!(",{code} {jt} {jf} {k}"));
    }
    s
}

/// The sink's counters: (frames that arrived, frames rewritten for a server), read when.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SinkCounts {
    arrived: u64,
    rewritten: u64,
}

/// Parse `tc -s -j qdisc show dev X`: the clsact qdisc's packets and drops.
fn parse_sink(json: &str) -> Result<SinkCounts> {
    let v: Value = serde_json::from_str(json).context("`tc -s -j qdisc` printed no JSON")?;
    let q = v
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|q| q.get("kind").and_then(Value::as_str) == Some("clsact"))
        })
        .context("`tc -s -j qdisc` lists no clsact qdisc")?;
    let get = |k: &str| q.get(k).and_then(Value::as_u64);
    Ok(SinkCounts {
        arrived: get("packets").context("clsact qdisc without `packets`")?,
        rewritten: get("drops").context("clsact qdisc without `drops`")?,
    })
}

/// The lab and what the runs need of it.
struct Lab {
    lab: LbLab,
    vip: Ipv4Addr,
    config: std::path::PathBuf,
    nft_rule: std::path::PathBuf,
}

impl Lab {
    fn sink(&self) -> Result<(SinkCounts, Instant)> {
        let bd = self.lab.names().bd.clone();
        let before = Instant::now();
        let out = self.lab.exec_ok(
            self.lab.router_ns(),
            &["tc", "-s", "-j", "qdisc", "show", "dev", &bd],
        )?;
        let after = Instant::now();
        let c = parse_sink(&out).with_context(|| format!("the sink on {bd}"))?;
        Ok((c, before + (after - before) / 2))
    }
}

fn build(p: &Plan, servers: u32) -> Result<Lab> {
    let weights = vec![1; servers as usize];
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        ..LbSpec::new(
            Encap::Nat4 {
                target_port: TARGET_PORT,
            },
            &weights,
        )
    }
    .with_lb(LbMode::Bare);
    let lab = LbLab::build(&spec)?;
    let vip = match lab.vip(
        Encap::Nat4 {
            target_port: TARGET_PORT,
        },
        false,
    ) {
        Some(v) => match v.addr {
            std::net::IpAddr::V4(a) => a,
            std::net::IpAddr::V6(a) => bail!("the lab's NAT4 VIP is IPv6 ({a})"),
        },
        None => bail!("the lab serves no NAT4 VIP"),
    };
    let n = lab.names().clone();
    // The sink, on the bridge port the LB's segment port faces.
    lab.exec_ok(
        lab.router_ns(),
        &["tc", "qdisc", "add", "dev", &n.bd, "clsact"],
    )?;
    lab.exec_ok(
        lab.router_ns(),
        &[
            "tc",
            "filter",
            "add",
            "dev",
            &n.bd,
            "ingress",
            "bpf",
            "da",
            "bytecode",
            &sink_bytecode(),
        ],
    )?;
    // The kernel's receive processing on the uplink goes to the forwarding CPU (RPS), as in
    // the other veth references; vecplane's XDP program takes frames before it.
    let mask = 1u64
        .checked_shl(p.fwd_cpu as u32)
        .filter(|_| p.fwd_cpu < 64)
        .context("RPS: only CPUs 0..63 are supported")?;
    lab.exec_ok(
        lab.lb_ns(),
        &[
            "sh",
            "-c",
            &format!(
                "echo {mask:x} > /sys/class/net/{}/queues/rx-0/rps_cpus",
                n.lu
            ),
        ],
    )?;
    let mut config = lab.vecplane_config(Driver::AF_XDP, Some(p.fwd_cpu))?;
    config.push_str("\n[lb]\nlines = [\n");
    for l in lb_lines(lab.servers(), vip, p.flows) {
        config.push_str(&format!("  {},\n", serde_json::to_string(&l)?));
    }
    config.push_str("]\n");
    netlab::validate_config(&config).map_err(|e| anyhow::anyhow!("{e}\n{config}"))?;
    let path = lab.path("vecplane-lb.toml");
    std::fs::write(&path, &config).with_context(|| format!("write {}", path.display()))?;
    let rule = lab.path("veth-lb-udp.nft");
    std::fs::write(&rule, nft_rule(lab.servers(), vip))
        .with_context(|| format!("write {}", rule.display()))?;
    Ok(Lab {
        lab,
        vip,
        config: path,
        nft_rule: rule,
    })
}

/// One measured run and what the sink saw besides.
#[derive(Clone, Debug, serde::Serialize)]
struct LbRun {
    #[serde(flatten)]
    run: PpsRun,
    /// Frames that reached the sink in the window, rewritten or not.
    arrived: u64,
    /// Frames that reached the sink in the window not rewritten to a server and the target port.
    not_rewritten: u64,
    /// Share of the forwarding CPU other processes spent in user space during the window (all
    /// user time in kernel runs, where the kernel forwards in softirq; user time minus
    /// vecplane's own in vecplane runs): how much the run was disturbed.
    others_cpu_share: f64,
}

/// User-mode clock ticks of process `pid` so far (`/proc/PID/stat`, field 14).
fn process_utime(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3, the state.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(11)?.parse().ok()
}

/// Run the generator on the router's veth towards the LB and measure what the sink counts.
fn measure(p: &Plan, lab: &Lab, vp: Option<&Vecplane>, label: &str) -> Result<LbRun> {
    let n = lab.lab.names().clone();
    let gen_seconds = START_TIMEOUT.as_secs_f64() + p.warmup + p.seconds + 5.0;
    let count = (gen_seconds * MAX_OFFERED_PPS).ceil() as u64;
    let args: Vec<String> = vec![
        p.exe.to_string_lossy().into_owned(),
        "gen".into(),
        "tx".into(),
        "--interface".into(),
        n.ru.clone(),
        "--dst-mac".into(),
        lbaddr::MAC_LB_UP.into(),
        "--src-mac".into(),
        lbaddr::MAC_ROUTER_U.into(),
        "--src-ip".into(),
        lbaddr::CLIENT4.to_string(),
        "--dst-ip".into(),
        lab.vip.to_string(),
        "--flows".into(),
        p.flows.to_string(),
        "--frame-size".into(),
        p.frame_size.to_string(),
        "--seconds".into(),
        format!("{gen_seconds:.0}"),
        "--count".into(),
        count.to_string(),
        "--cpu".into(),
        p.gen_cpu.to_string(),
        "--json".into(),
        "--no-progress".into(),
    ];
    let log = lab
        .lab
        .path(&format!("gen-{}.log", label.replace([' ', '/'], "-")));
    let mut gen = Spawned::start(&cmd::in_ns(lab.lab.router_ns(), &args), Some(&log))?;
    let result = window(p, lab, vp, &mut gen);
    let _ = gen.signal(libc::SIGINT);
    if gen.wait_timeout(Duration::from_secs(10))?.is_none() {
        let _ = gen.stop(Duration::from_secs(1));
    }
    let mut run =
        result.with_context(|| format!("{label}; generator output:\n{}", gen.log().trim_end()))?;
    let summary = gen.log().lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l.trim())
            .ok()
            .filter(Value::is_object)
    });
    let field = |k: &str| summary.as_ref().and_then(|v| v.get(k));
    run.run.offered_pps = field("pps").and_then(Value::as_f64).unwrap_or(0.0);
    run.run.generator = field("method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(run)
}

fn window(p: &Plan, lab: &Lab, vp: Option<&Vecplane>, gen: &mut Spawned) -> Result<LbRun> {
    let (start, _) = lab.sink()?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(s) = gen.try_wait()? {
            bail!("vecplane gen tx ended early ({})", cmd::describe_status(s));
        }
        let (now, _) = lab.sink()?;
        if now.rewritten > start.rewritten + 1000 {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "no frame rewritten for a server reached the servers' segment within {} s of \
                 starting the generator ({} arrived there unrewritten)",
                START_TIMEOUT.as_secs(),
                now.arrived.saturating_sub(start.arrived)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs_f64(p.warmup));
    if let Some(v) = vp {
        for what in ["runtime", "errors"] {
            v.request(&format!("clear {what}"), false)?;
        }
    }
    let utime = || vp.and_then(|v| process_utime(v.pid())).unwrap_or(0);
    let vp0 = utime();
    let e0 = EdgeSample::take(p);
    let (c1, t1) = lab.sink()?;
    std::thread::sleep(Duration::from_secs_f64(p.seconds));
    let (c2, t2) = lab.sink()?;
    let vp1 = utime();
    let e1 = EdgeSample::take(p);
    let figures = match vp {
        Some(v) => vecplane_figures(v)?,
        None => (Vec::new(), Vec::new(), (0, 0.0)),
    };
    if let Some(s) = gen.try_wait()? {
        bail!(
            "vecplane gen tx ended inside the measured window ({})",
            cmd::describe_status(s)
        );
    }
    let seconds = t2.duration_since(t1).as_secs_f64().max(1e-3);
    let packets = c2.rewritten.saturating_sub(c1.rewritten);
    let arrived = c2.arrived.saturating_sub(c1.arrived);
    // The forwarding CPU's user time that was not vecplane's: other processes on it.
    let others_cpu_share = match (e0.fwd(), e1.fwd()) {
        (Some(a), Some(b)) if b.total > a.total => {
            let user = b.user.saturating_sub(a.user);
            user.saturating_sub(vp1.saturating_sub(vp0)) as f64 / (b.total - a.total) as f64
        }
        _ => 0.0,
    };
    Ok(LbRun {
        run: window_run(p, packets, seconds, &e0, &e1, figures),
        arrived,
        not_rewritten: arrived.saturating_sub(packets),
        others_cpu_share,
    })
}

/// One vecplane run: start it in the LB namespace, measure, stop it (also on failure).
fn vecplane_run(p: &Plan, lab: &Lab, label: &str) -> Result<LbRun> {
    let vp = lab.lab.start_vecplane(&p.exe, &lab.config)?;
    let m = measure(p, lab, Some(&vp), label);
    let stopped = vp.stop();
    let m = m?;
    stopped?;
    Ok(m)
}

/// One kernel run: install the reference (its rules, addresses and routes, then the UDP rule;
/// GRO on the uplink so frames the generator sends with XDP get a NAPI context), measure, and
/// take it down again (also on failure) so the namespace is bare for vecplane.
fn kernel_run(p: &Plan, lab: &mut Lab, label: &str) -> Result<LbRun> {
    lab.lab.set_lb(LbMode::Kernel(KernelHash::Jhash))?;
    let result = (|| -> Result<LbRun> {
        let ns = lab.lab.lb_ns().to_string();
        let lu = lab.lab.names().lu.clone();
        let rule = lab.nft_rule.to_string_lossy().into_owned();
        lab.lab.exec_ok(&ns, &["nft", "-f", &rule])?;
        lab.lab.exec_ok(&ns, &["ethtool", "-K", &lu, "gro", "on"])?;
        measure(p, lab, None, label)
    })();
    let bare = lab.lab.set_lb(LbMode::Bare);
    let r = result?;
    bare?;
    Ok(r)
}

fn median_of(runs: &[LbRun]) -> Option<&LbRun> {
    let v: Vec<f64> = runs.iter().map(|r| r.run.pps).collect();
    runs.get(median_index(&v)?)
}

/// `vecplane bench --scenario veth-lb`: check, build, measure, print (text or one JSON line).
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.stability.is_some() {
        bail!("{NAME}: --stability is for veth-router and veth-bridge");
    }
    if args.miss {
        bail!("{NAME}: --miss is for the lb scenario; {NAME} sends --flows fixed flows");
    }
    match args.encap {
        None | Some(crate::lb::EncapArg::Nat4) => {}
        Some(e) => bail!(
            "{NAME} --encap {}: only NAT4 is measured on the veth lab for now; accepted: nat4",
            clap::ValueEnum::to_possible_value(&e)
                .map(|v| v.get_name().to_string())
                .unwrap_or_default()
        ),
    }
    if args.driver == veth::VethDriver::AfPacket {
        bail!(
            "{NAME}: vecplane uses AF_XDP ports (the generator's XDP frames need an XDP program \
             on the LB's uplink); accepted: --driver auto or af-xdp"
        );
    }
    let servers = args.servers.unwrap_or(DEFAULT_SERVERS);
    if servers == 0 || servers as usize > netlab::lb::MAX_SERVERS {
        bail!(
            "{NAME} --servers {servers}: accepted: 1..={} (server namespaces in the lab)",
            netlab::lb::MAX_SERVERS
        );
    }
    if args.flows.is_some_and(|f| f == 0 || f > 65_536) {
        bail!("{NAME} --flows: accepted: 1..=65536 (one per UDP source port)");
    }
    let p = veth::plan(args, VethScenario::Router)?;
    let reference = args.reference == Some(crate::Reference::Nftables);
    if let Some(why) =
        netlab::missing_prerequisite(&["ip", "ethtool", "tc", "nft", "nginx", "curl"])
    {
        bail!("{NAME}: {why}");
    }
    netlab::install_cleanup_handlers()?;
    let progress = |line: String| {
        if p.progress {
            eprintln!("{NAME}: {line}");
        }
    };
    progress(format!(
        "building the load-balancer lab ({servers} servers)"
    ));
    let mut lab = build(&p, servers)?;
    let namespaces: Vec<String> = lab
        .lab
        .names()
        .namespaces()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let dir = lab.lab.dir().to_path_buf();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for r in 0..p.runs {
        let label = format!("run {}/{} vecplane", r + 1, p.runs);
        let v = vecplane_run(&p, &lab, &label)?;
        progress(format!(
            "{label}: {:.1} kpps to the servers (offered {:.1} kpps, {} not rewritten), CPU {} \
             busy {:.0}%, other processes {:.0}%",
            v.run.pps / 1e3,
            v.run.offered_pps / 1e3,
            v.not_rewritten,
            p.fwd_cpu,
            v.run.fwd_cpu_busy * 100.0,
            v.others_cpu_share * 100.0
        ));
        ours.push(v);
        if reference {
            let label = format!("run {}/{} {REFERENCE_NAME}", r + 1, p.runs);
            let k = kernel_run(&p, &mut lab, &label)?;
            progress(format!(
                "{label}: {:.1} kpps to the servers (offered {:.1} kpps, {} not rewritten), CPU \
                 {} busy {:.0}%, other processes {:.0}%",
                k.run.pps / 1e3,
                k.run.offered_pps / 1e3,
                k.not_rewritten,
                p.fwd_cpu,
                k.run.fwd_cpu_busy * 100.0,
                k.others_cpu_share * 100.0
            ));
            theirs.push(k);
        }
    }
    let bd = lab.lab.names().bd.clone();
    lab.lab.delete()?;
    let (text, json) = report(&p, servers, &bd, &ours, &theirs, &namespaces, &dir)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&json).context("cannot write the JSON report")?
        );
    } else {
        print!("{text}");
    }
    Ok(())
}

/// (text, JSON) of the finished runs.
fn report(
    p: &Plan,
    servers: u32,
    bd: &str,
    ours: &[LbRun],
    theirs: &[LbRun],
    namespaces: &[String],
    dir: &Path,
) -> Result<(String, Value)> {
    let v = median_of(ours).context("no run completed")?;
    let o = median_of(theirs);
    let m = &v.run;
    let fs = p.frame_size;
    let speedup = o.filter(|o| o.run.pps > 0.0).map(|o| m.pps / o.run.pps);
    let notes = notes(p, bd, ours, theirs);
    let mut json = veth_report::with_keys(
        json!({
            "scenario": NAME,
            "encap": "nat4",
            "driver": "af-xdp",
            "forwarding": "lb nat4",
            "servers": servers,
        }),
        veth_report::run_keys(p, m),
    );
    json = veth_report::with_keys(
        json,
        json!({
            "not_rewritten": v.not_rewritten,
            "others_cpu_share": v.others_cpu_share,
            "nodes": m.nodes,
            "drops": m.drops,
            "runs": ours.iter().map(|r| r.run.pps).collect::<Vec<_>>(),
            "all_runs": ours,
            "notes": notes,
            "cleanup": { "namespaces": namespaces, "dirs": [dir] },
        }),
    );
    if let Some(r) = o {
        json["reference"] = veth_report::with_keys(
            veth_report::reference_keys(REFERENCE_NAME, &r.run, speedup),
            json!({
                "not_rewritten": r.not_rewritten,
                "others_cpu_share": r.others_cpu_share,
                "backlog_drops": r.run.backlog_drops,
                "runs": theirs.iter().map(|r| r.run.pps).collect::<Vec<_>>(),
                "all_runs": theirs,
            }),
        );
    }
    let mut text = format!(
        "{NAME} nat4 {fs} B, {} flows to 1 VIP over {servers} servers: {} interleaved run(s) of \
         {} s, forwarding on CPU {}, generator on CPU {}\n",
        p.flows, p.runs, p.seconds, p.fwd_cpu, p.gen_cpu
    );
    for n in &notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    let line = |name: &str, r: &LbRun, runs: &[LbRun]| {
        let all: Vec<String> = runs
            .iter()
            .map(|x| format!("{:.1}", x.run.pps / 1e3))
            .collect();
        format!(
            "  {name:<36} median {:>8.1} kpps (runs: {}), offered {:.1} kpps, {} not rewritten\n  \
             {:<36} forwarding CPU busy {:.0}%, {:.0} TSC cycles/packet; with the generator \
             CPU's softirq ({:.0}%): {:.0}\n",
            r.run.pps / 1e3,
            all.join(", "),
            r.run.offered_pps / 1e3,
            r.not_rewritten,
            "",
            r.run.fwd_cpu_busy * 100.0,
            r.run.cycles_per_packet,
            r.run.gen_cpu_softirq * 100.0,
            r.run.r_cycles_per_packet
        )
    };
    text.push_str(&line("vecplane (lb nat4, af-xdp)", v, ours));
    if let Some(r) = o {
        text.push_str(&line(
            &format!("nftables DNAT jhash map (RPS to CPU {})", p.fwd_cpu),
            r,
            theirs,
        ));
        if let Some(s) = speedup {
            text.push_str(&format!(
                "  speedup (vecplane pps / nftables pps): {s:.2}x\n"
            ));
        }
    }
    text.push_str(&veth_report::nodes_line(&m.nodes));
    Ok((text, json))
}

fn notes(p: &Plan, bd: &str, ours: &[LbRun], theirs: &[LbRun]) -> Vec<String> {
    let mut n = vec![
        format!(
            "generator: vecplane gen tx (xdp-live) on the router's veth into the LB's uplink, \
             CPU {}, {} UDP flows (source ports) from {} to the NAT4 VIP port {}",
            p.gen_cpu,
            p.flows,
            lbaddr::CLIENT4,
            vip_port()
        ),
        format!(
            "counted: frames arriving on {bd} (the servers' side of the LB's segment port) \
             rewritten to a server's address and port {TARGET_PORT}, dropped there at tc \
             ingress by a classic BPF sink (so the servers' stacks cost nothing)"
        ),
        "vecplane: lb nat4 VIP (protocol udp) on AF_XDP ports, one worker on the forwarding \
         CPU; nftables: DNAT in a prerouting nat chain through a jhash map of source address \
         and port, one slot per unit of weight (conntrack keeps the flows), the uplink's \
         receive processing steered to the forwarding CPU by RPS"
            .to_string(),
        "cycles_per_packet = TSC ticks of the forwarding CPU's busy time per counted packet \
         (other processes on that CPU count too: compare within one run)"
            .to_string(),
    ];
    if crate::sys::load_average().is_some_and(|l| l > 2.0) {
        n.push("warning: the load average is above the 2 CPUs: figures are disturbed".into());
    }
    let disturbed = |runs: &[LbRun]| -> Vec<String> {
        runs.iter()
            .enumerate()
            .filter(|(_, r)| r.others_cpu_share > 0.05)
            .map(|(i, r)| format!("{} ({:.0}%)", i + 1, r.others_cpu_share * 100.0))
            .collect()
    };
    for (who, runs) in [("vecplane", ours), (REFERENCE_NAME, theirs)] {
        let d = disturbed(runs);
        if !d.is_empty() {
            n.push(format!(
                "warning: other processes used CPU {} in {who} run(s) {}: those figures are \
                 disturbed",
                p.fwd_cpu,
                d.join(", ")
            ));
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_program_is_eleven_instructions_matching_the_servers() {
        let b = sink_bytecode();
        let parts: Vec<&str> = b.split(',').collect();
        assert_eq!(parts[0], "11");
        assert_eq!(parts.len(), 12);
        // 198.18.12.0 and the target port.
        assert!(b.contains(&format!(",21 0 3 {}", 0xc612_0c00u32)), "{b}");
        assert!(b.contains(",21 0 1 8080,"), "{b}");
    }

    fn servers(weights: &[u32]) -> Vec<ServerInfo> {
        ServerInfo::unbuilt(weights)
    }

    #[test]
    fn the_lb_lines_are_accepted_and_name_every_server() {
        let vip = Ipv4Addr::new(198, 18, 100, 4);
        let lines = lb_lines(&servers(&[1, 2, 1]), vip, 1024);
        let text = lines.join("\n");
        let cmds = lb::cli::parse_lines(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        lb::model::LbState::new()
            .apply(&cmds)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(text.contains(
            "lb vip 198.18.100.4/32 protocol udp port 1024 encap nat4 type clusterip \
             target_port 8080"
        ));
        // One `lb as` line per server (VPP's `weight` is the whole line's).
        for (server, weight) in [(11, 1), (12, 2), (13, 1)] {
            let line = format!(
                "lb as 198.18.100.4/32 protocol udp port 1024 198.18.12.{server} weight {weight}"
            );
            assert!(lines.contains(&line), "{line} in\n{text}");
        }
        assert!(text.contains("buckets 2048"), "{text}");
    }

    #[test]
    fn the_nft_rule_maps_one_slot_per_unit_of_weight() {
        let r = nft_rule(&servers(&[1, 2]), Ipv4Addr::new(198, 18, 100, 4));
        assert_eq!(
            r,
            "add rule ip vlb_reference nat ip daddr 198.18.100.4 udp dport 1024 dnat ip to \
             jhash ip saddr . udp sport mod 3 map { 0 : 198.18.12.11 . 8080, 1 : 198.18.12.12 \
             . 8080, 2 : 198.18.12.12 . 8080 }\n"
        );
    }

    #[test]
    fn a_process_user_time_is_read() {
        assert!(process_utime(std::process::id()).is_some());
        assert_eq!(process_utime(u32::MAX), None);
    }

    #[test]
    fn the_sink_is_read_from_tc_json() {
        let t = r#"[{"kind":"noqueue","handle":"0:","packets":0,"drops":0},
                   {"kind":"clsact","handle":"ffff:","packets":14,"drops":5}]"#;
        assert_eq!(
            parse_sink(t).expect("parsed"),
            SinkCounts {
                arrived: 14,
                rewritten: 5
            }
        );
        assert!(parse_sink(r#"[{"kind":"noqueue"}]"#).is_err());
        assert!(parse_sink("not json").is_err());
    }
}
