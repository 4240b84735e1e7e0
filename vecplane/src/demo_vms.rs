//! `vecplane demo --vms`: two QEMU guests talking through vecplane. It builds (or finds cached)
//! the guest image from Debian packages (scripts/guest/build-guest.sh), runs this vecplane binary
//! with the learning bridge of examples/vm-bridge.toml (built in: two vhost-user ports), boots
//! one guest on each port under TCG, pings between them over IPv4 and IPv6 and runs a bounded
//! iperf3 TCP transfer while printing the ports' rates once a second, then prints `show
//! interfaces`, each vhost-user port's driver counters and the results. It owns only the guests,
//! the daemon and the scratch directory it creates, all deleted at the end, on an error and on
//! Ctrl-C; traffic goes only between its two guests (198.18.10.0/24, 2001:db8:10::/64).

use crate::demo::{monitor, print_results, Check};
use anyhow::{bail, Context, Result};
use netlab::vm_lab::{self, VhostLab, VM_BRIDGE_CONFIG, VM_BRIDGE_PORTS};
use netlab::{Guest, GuestImage};
use serde_json::Value;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Deadline of one guest command (a ping waits up to 10 s for its first answer).
const GUEST_COMMAND: Duration = Duration::from_secs(30);

/// `vecplane demo --vms`, the TCP transfer running `seconds` (rounded up).
pub fn main(seconds: f64, progress: bool) -> Result<ExitCode> {
    if let Some(why) = missing_requirement() {
        bail!("cannot run the VM demo: {why}");
    }
    // 1 to 3600 (the demo's --seconds parser): exact as a whole number.
    let seconds = seconds.ceil() as u32;
    let exe = std::env::current_exe().context("cannot find this vecplane binary")?;
    netlab::install_cleanup_handlers()?;
    let started = Instant::now();
    println!(
        "== guest image: the host's Debian kernel, busybox and iperf3 (scripts/guest/build-guest.sh, \
         cached in {})",
        netlab::guest::image_dir().display()
    );
    let t = Instant::now();
    let image = GuestImage::build_or_find()?;
    println!(
        "   {} and {} ({:.1} s)",
        image.vmlinux.display(),
        image.initrd.display(),
        t.elapsed().as_secs_f64()
    );
    let [p1, p2] = VM_BRIDGE_PORTS;
    println!(
        "== vecplane run: learning bridge br0 with vhost-user ports {p1} (vecplane listens) and \
         {p2} (QEMU listens, vecplane connects), the config of examples/vm-bridge.toml"
    );
    let lab = VhostLab::start(&exe, VM_BRIDGE_CONFIG)?;
    println!(
        "   control socket {}; vhost-user sockets in {}",
        lab.vecplane()?.socket().display(),
        lab.dir().display()
    );
    let mut lab = lab;
    let result = run_demo(&mut lab, &image, seconds, progress);
    let stopped = lab.stop();
    println!("== stopped the guests and vecplane, deleted the sockets and scratch files");
    let ok = result?;
    stopped?;
    println!("   demo time {:.1} s", started.elapsed().as_secs_f64());
    if ok {
        println!("demo: the two guests talked through vecplane over IPv4 and IPv6");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("vecplane demo --vms: some traffic did not get through (see above)");
        Ok(ExitCode::FAILURE)
    }
}

/// Why the demo cannot run here (not root, Debian packages missing), naming what to install.
fn missing_requirement() -> Option<String> {
    let packages = netlab::missing_guest_packages();
    let root = netlab::cmd::is_root();
    if root && packages.is_empty() {
        return None;
    }
    let mut why = Vec::new();
    if !root {
        why.push("it needs root (run it with sudo)".to_string());
    }
    if !packages.is_empty() {
        why.push(format!(
            "Debian packages are missing: {} (apt-get install {}; scripts/demo.sh --vms \
             installs them)",
            packages.join(", "),
            packages.join(" ")
        ));
    }
    Some(why.join("; "))
}

fn run_demo(lab: &mut VhostLab, image: &GuestImage, seconds: u32, progress: bool) -> Result<bool> {
    let specs = vm_lab::vm_bridge_guests(lab);
    println!(
        "== booting {} under QEMU TCG (a few seconds each)",
        specs
            .iter()
            .map(|s| format!(
                "{} ({}, {})",
                s.name,
                s.ip.as_deref().unwrap_or("-"),
                s.ip6.as_deref().unwrap_or("-")
            ))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    let mut guests = Guest::boot_all(image, specs)?;

    let mut checks: Vec<Check> = Vec::new();
    // Each guest pings the other (guest i is number i + 1), over IPv4, then over IPv6.
    for (i, to) in [
        (0, vm_lab::vm_ip4(2)),
        (1, vm_lab::vm_ip4(1)),
        (0, vm_lab::vm_ip6(2)),
        (1, vm_lab::vm_ip6(1)),
    ] {
        let from = &mut guests[i];
        println!("== ping {to} from {}", from.name());
        let what = format!("ping {to} from {}", from.name());
        checks.push(match from.pings(&to, GUEST_COMMAND) {
            Ok(rtt) => (what, true, format!("3/3 replies, {rtt}")),
            Err(e) => (what, false, first_line(&format!("{e:#}"))),
        });
    }

    let (a, b) = guests.split_at_mut(1);
    let (vm1, vm2) = (&mut a[0], &mut b[0]);
    let to = vm_lab::vm_ip4(2);
    println!("== iperf3 TCP, {seconds} s, {} -> {to}", vm1.name());
    let tcp = vm_lab::iperf3_server(vm2, &to, seconds).and_then(|()| {
        let stop = Arc::new(AtomicBool::new(false));
        let socket = lab.vecplane()?.socket().to_path_buf();
        let rates = progress.then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || monitor(&socket, &stop))
        });
        let report = vm_lab::iperf3_client(vm1, &to, "", seconds);
        stop.store(true, Ordering::SeqCst);
        if let Some(r) = rates {
            let _ = r.join();
        }
        report
    });
    checks.push(tcp_check(tcp, vm1.name(), vm2.name()));

    lab.check_running()?;
    println!("== vecplane ctl show interfaces");
    let text = lab.vecplane()?.request("show interfaces", false)?;
    print!("{}", text.text.as_deref().unwrap_or(""));
    for name in VM_BRIDGE_PORTS {
        checks.push(port_check(name, &lab.port(name)?));
    }
    let errors = lab.guest_errors();
    checks.push((
        "vecplane's log".to_string(),
        errors.is_empty(),
        if errors.is_empty() {
            "no malformed ring, no failed vhost-user request".to_string()
        } else {
            errors.join("; ")
        },
    ));
    drop(guests);
    Ok(print_results(&checks))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

fn num(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(v, |cur, p| cur.get(p))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

fn tcp_check(report: Result<Value>, from: &str, to: &str) -> Check {
    let what = format!("iperf3 TCP {from} -> {to}");
    let v = match report {
        Ok(v) => v,
        Err(e) => return (what, false, first_line(&format!("{e:#}"))),
    };
    let bytes = num(&v, &["end", "sum_received", "bytes"]);
    let bps = num(&v, &["end", "sum_received", "bits_per_second"]);
    let retr = num(&v, &["end", "sum_sent", "retransmits"]);
    let detail = format!(
        "{:.1} MB received at {:.0} Mbit/s, {retr:.0} retransmits",
        bytes / 1e6,
        bps / 1e6
    );
    println!("   {detail}");
    (what, bytes > 0.0, detail)
}

/// A vhost-user port passed when it is connected, carried packets both ways, dropped none it
/// received and saw no malformed ring, frame or offload header; the figures include the TSO
/// super-packets that crossed whole and those cut into segments on the way out.
fn port_check(name: &str, port: &Value) -> Check {
    let get = |k: &str| port[k].as_u64().unwrap_or(0);
    let drv = |k: &str| port["driver_counters"][k].as_u64().unwrap_or(0);
    let state = port["driver_state"].as_str().unwrap_or("no driver state");
    // `connected; offloads from the guest: ...` (the offloads are in `show interfaces`).
    let state = state.split(';').next().unwrap_or(state);
    let (rx, tx, rx_drops) = (get("rx_packets"), get("tx_packets"), get("rx_drops"));
    let (errors, bad_frames, bad_headers) = (
        drv("guest_errors"),
        drv("rx_bad_frames"),
        drv("rx_bad_headers"),
    );
    let passed = state == "connected"
        && rx > 0
        && tx > 0
        && rx_drops == 0
        && errors == 0
        && bad_frames == 0
        && bad_headers == 0;
    (
        format!("port {name}"),
        passed,
        format!(
            "{state}, rx {rx} tx {tx} packets, super-packets in {} out {}, segmented {}, rx drops \
             {rx_drops}, guest errors {errors}, bad frames {bad_frames}, bad headers {bad_headers}",
            drv("rx_super_packets"),
            drv("tx_super_packets"),
            drv("tx_segmented")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_checks_need_traffic_both_ways_and_no_errors() {
        let good = serde_json::json!({
            "name": "vm1", "rx_packets": 10, "tx_packets": 12, "rx_drops": 0,
            "driver_state": "connected; offloads from the guest: csum tso4",
            "driver_counters": {"guest_errors": 0, "rx_bad_frames": 0, "rx_bad_headers": 0,
                "rx_super_packets": 7, "tx_super_packets": 0, "tx_segmented": 0,
                "connections": 1}
        });
        let (_, ok, detail) = port_check("vm1", &good);
        assert!(ok, "{detail}");
        assert!(
            detail.starts_with("connected, rx 10 tx 12 packets, super-packets in 7 out 0, "),
            "{detail}"
        );
        for (k, v) in [
            ("tx_packets", serde_json::json!(0)),
            ("rx_drops", serde_json::json!(3)),
            ("driver_state", serde_json::json!("listening")),
        ] {
            let mut bad = good.clone();
            bad[k] = v;
            assert!(!port_check("vm1", &bad).1, "{k}");
        }
        for k in ["guest_errors", "rx_bad_frames", "rx_bad_headers"] {
            let mut bad = good.clone();
            bad["driver_counters"][k] = serde_json::json!(1);
            assert!(!port_check("vm1", &bad).1, "{k}");
        }
    }

    #[test]
    fn tcp_reports_are_read() {
        let v: Value = serde_json::from_str(
            r#"{"end":{"sum_sent":{"retransmits":2},"sum_received":{"bytes":5000000,
            "bits_per_second":4e7}}}"#,
        )
        .expect("json");
        let (what, ok, detail) = tcp_check(Ok(v), "vm1", "vm2");
        assert!(ok, "{detail}");
        assert_eq!(what, "iperf3 TCP vm1 -> vm2");
        assert!(
            detail.contains("5.0 MB received at 40 Mbit/s, 2 retransmits"),
            "{detail}"
        );
        assert!(!tcp_check(Err(anyhow::anyhow!("no JSON")), "a", "b").1);
    }
}
