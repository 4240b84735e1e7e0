//! What the VM scenarios (`vm-tcp`, `vm-chain`) share: vecplane running in this process with
//! vhost-user ports for QEMU guests ([`VmSwitch`]), booting guests with progress on stderr,
//! bounded iperf3 TCP runs between guests ([`tcp_run`]), the offloads a guest's virtio-net
//! negotiated ([`Offloads`]), the CPU time QEMU and vecplane's worker spent, and the statistics
//! of a series of runs. It owns the data plane and its scratch directory (sockets, config) for
//! the length of a run; it never sends traffic anywhere but between the guests it is given.

use crate::report::{median, ratio};
use crate::sys;
use crate::veth::spread;
use anyhow::{anyhow, bail, Context, Result};
use dataplane::flows::FlowSwitch;
use dataplane::{Dataplane, PollMode, RunningDataplane, RuntimeView};
use flow::ofctl::{self, FlowModKind};
use netlab::{Guest, GuestImage, GuestSpec, NicSpec, RegisteredDir};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Deadline for a guest's ready line: generous, guests boot at once on two shared CPUs under
/// TCG (about 3 s each alone).
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(240);

/// Deadline of one short guest command (ping, cat, starting a server).
pub(crate) const SHORT: Duration = Duration::from_secs(60);

/// The name of vecplane's worker threads as /proc shows them (`comm` keeps 15 bytes of
/// `vecplane-worker-N`).
const WORKER_COMM: &str = "vecplane-worker";

/// Prefix of the scratch directories (`<tmp>/vbm-<pid>-<seq>`).
const SCRATCH_PREFIX: &str = "vbm";

/// vecplane in this process, serving vhost-user sockets in a scratch directory of its own.
pub(crate) struct VmSwitch {
    running: Option<RunningDataplane>,
    view: RuntimeView,
    scratch: RegisteredDir,
    /// The worker polls busily during measured runs (else it stays adaptive throughout).
    busy_in_runs: bool,
}

impl VmSwitch {
    /// Write `config` (sockets relative to it) to a fresh scratch directory (netlab's
    /// registry deletes it also on a signal), check it with vecplane's own parser, build the
    /// data plane and start its worker.
    pub(crate) fn start(config: &str, busy_in_runs: bool) -> Result<VmSwitch> {
        let scratch = RegisteredDir::create(SCRATCH_PREFIX)?;
        let path = scratch.path().join("vecplane.toml");
        std::fs::write(&path, config).with_context(|| format!("write {}", path.display()))?;
        let spec = control::parse_config(config, &path.display().to_string(), scratch.path())
            .map_err(|e| anyhow!("the generated config is refused: {e}\n{config}"))?;
        let dp = Dataplane::new(&spec).context("cannot build vecplane's data plane")?;
        let running = dp.start();
        let view = running.view().clone();
        Ok(VmSwitch {
            running: Some(running),
            view,
            scratch,
            busy_in_runs,
        })
    }

    /// The vhost-user socket of port `port` (`<port>.sock` beside the config).
    pub(crate) fn socket(&self, port: &str) -> PathBuf {
        self.scratch.path().join(format!("{port}.sock"))
    }

    /// The guest NIC of chain port `port`: QEMU connects to vecplane's socket for it.
    pub(crate) fn nic(&self, port: &netlab::chain::ChainPort) -> NicSpec {
        NicSpec::VhostUser {
            socket: self.socket(&port.name),
            server: false,
            mac: port.guest_mac,
            queues: 1,
        }
    }

    /// The flow-mode bridge `name`.
    pub(crate) fn flow_switch(&self, name: &str) -> Result<Arc<FlowSwitch>> {
        self.view
            .flows
            .iter()
            .find(|s| s.name() == name)
            .cloned()
            .ok_or_else(|| anyhow!("vecplane has no flow-mode bridge {name}"))
    }

    /// Replace every rule of flow-mode bridge `bridge` with `rules`, as one new version of its
    /// tables (the workers never see a half-loaded chain).
    pub(crate) fn set_rules(&self, bridge: &str, rules: &[String]) -> Result<()> {
        let sw = self.flow_switch(bridge)?;
        let mut mods =
            vec![ofctl::parse_flow_mod(FlowModKind::Delete, "").map_err(|e| anyhow!("{e}"))?];
        for r in rules {
            mods.push(
                ofctl::parse_flow_mod(FlowModKind::Add, r)
                    .map_err(|e| anyhow!("rule `{r}`: {e}"))?,
            );
        }
        sw.apply(&mods)
            .map_err(|e| anyhow!("bridge {bridge} refused the rules: {e:?}"))?;
        Ok(())
    }

    /// Switch every worker to busy polling (`true`) or back to adaptive polling, live, as a
    /// reload of `poll-mode` does; the workers adopt it within a round or a nap.
    pub(crate) fn set_busy(&self, busy: bool) {
        let mode = if busy && self.busy_in_runs {
            PollMode::Busy
        } else {
            PollMode::Adaptive
        };
        for p in &self.view.policies.poll {
            let (_, sleep_max_us) = p.get();
            p.set(mode, sleep_max_us);
        }
    }

    /// CPU seconds vecplane's workers used so far.
    pub(crate) fn worker_cpu_seconds(&self) -> Option<f64> {
        sys::threads_cpu_seconds(WORKER_COMM)
    }

    /// Every port's counters (summed over workers) and driver counters, for the report.
    pub(crate) fn ports_json(&self) -> Value {
        let ports: Vec<Value> = self
            .view
            .ports
            .get()
            .iter()
            .map(|p| {
                let sum = |f: &dyn Fn(&graph::PortStats) -> u64| -> u64 {
                    p.stats.iter().map(|s| f(s)).sum()
                };
                let mut v = json!({
                    "name": p.name,
                    "driver": p.driver,
                    "rx_packets": sum(&|s| s.rx_packets.get()),
                    "tx_packets": sum(&|s| s.tx_packets.get()),
                    "rx_drops": sum(&|s| s.rx_drops.get()),
                    "tx_drops": sum(&|s| s.tx_drops.get()),
                });
                if let Some(d) = &p.driver_counters {
                    let c: serde_json::Map<String, Value> = d
                        .counters()
                        .into_iter()
                        .map(|(k, n)| (k.to_string(), json!(n)))
                        .collect();
                    v["driver_counters"] = Value::Object(c);
                    v["driver_state"] = json!(d.state());
                }
                v
            })
            .collect();
        Value::Array(ports)
    }
}

/// A note on frames vecplane's ports dropped, from [`VmSwitch::ports_json`], if any were.
pub(crate) fn drops_note(ports: &Value) -> Option<String> {
    let sum = |k: &dyn Fn(&Value) -> &Value| -> u64 {
        ports
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| k(p).as_u64().unwrap_or(0))
            .sum()
    };
    let rx = sum(&|p| &p["rx_drops"]);
    let tx = sum(&|p| &p["tx_drops"]);
    let no_buffer = sum(&|p| &p["driver_counters"]["tx_no_buffers"]);
    (rx + tx > 0).then(|| {
        format!(
            "vecplane's ports dropped {rx} frames the guests sent and {tx} frames towards the \
             guests, {no_buffer} of those because the guest's receive ring had no free buffer \
             (the guest was behind, not the switch); per port in `ports`"
        )
    })
}

impl Drop for VmSwitch {
    fn drop(&mut self) {
        // Stop the worker before the scratch directory (its sockets) goes.
        if let Some(r) = self.running.take() {
            r.stop();
        }
    }
}

/// Start QEMU for every spec (with [`BOOT_TIMEOUT`]), then wait until all are ready; `say`
/// gets a line per guest.
pub(crate) fn boot(
    image: &GuestImage,
    specs: Vec<GuestSpec>,
    say: &dyn Fn(String),
) -> Result<Vec<Guest>> {
    let t = Instant::now();
    let mut guests = Vec::with_capacity(specs.len());
    for mut s in specs {
        s.boot_timeout = BOOT_TIMEOUT;
        guests.push(Guest::spawn(image, s)?);
    }
    for g in &mut guests {
        let b = g.wait_ready()?;
        say(format!(
            "guest {} ready after {:.1} s",
            g.name(),
            b.as_secs_f64()
        ));
    }
    say(format!(
        "{} guests ready after {:.1} s",
        guests.len(),
        t.elapsed().as_secs_f64()
    ));
    Ok(guests)
}

/// Ping `ip` from `g` until one echo comes back (a chain or a bridge may need a moment to
/// learn), at most `within`.
pub(crate) fn reach(g: &mut Guest, ip: &str, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let (status, out) = g.run(&format!("ping -c 1 -w 2 {ip}"), SHORT)?;
        if status == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "guest {} cannot reach {ip} within {:.0} s:\n{}",
                g.name(),
                within.as_secs_f64(),
                out.trim_end()
            );
        }
    }
}

/// Start an iperf3 server daemon in `g`, bound to `ip`, and wait until it listens.
pub(crate) fn start_iperf3_server(g: &mut Guest, ip: &str) -> Result<()> {
    g.run_ok(&format!("iperf3 -s -D -B {ip}"), SHORT)?;
    g.run_ok(
        "for i in $(seq 100); do netstat -ltn | grep -q :5201 && break; sleep 0.1; done; \
         netstat -ltn | grep -q :5201",
        SHORT,
    )
    .with_context(|| format!("iperf3 does not listen in guest {}", g.name()))?;
    Ok(())
}

/// The virtio-net features a guest's NIC negotiated (bits of
/// `/sys/class/net/<dev>/device/features`, bit 0 first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Offloads {
    /// VIRTIO_NET_F_CSUM (0): the device takes packets with partial checksums.
    pub csum: bool,
    /// VIRTIO_NET_F_GUEST_CSUM (1): the guest takes packets with partial checksums.
    pub guest_csum: bool,
    /// VIRTIO_NET_F_GUEST_TSO4 (7): the guest takes TCP/IPv4 super-packets.
    pub guest_tso4: bool,
    /// VIRTIO_NET_F_GUEST_TSO6 (8).
    pub guest_tso6: bool,
    /// VIRTIO_NET_F_HOST_TSO4 (11): the device takes TCP/IPv4 super-packets (the guest sends
    /// with TSO).
    pub host_tso4: bool,
    /// VIRTIO_NET_F_HOST_TSO6 (12).
    pub host_tso6: bool,
    /// VIRTIO_NET_F_MRG_RXBUF (15).
    pub mrg_rxbuf: bool,
    /// The whole bit string.
    pub features: String,
}

impl Offloads {
    /// From the sysfs bit string; None unless it is only 0s and 1s.
    pub(crate) fn parse(bits: &str) -> Option<Offloads> {
        let bits = bits.trim();
        if bits.is_empty() || !bits.chars().all(|c| c == '0' || c == '1') {
            return None;
        }
        let bit = |n: usize| bits.as_bytes().get(n) == Some(&b'1');
        Some(Offloads {
            csum: bit(0),
            guest_csum: bit(1),
            guest_tso4: bit(7),
            guest_tso6: bit(8),
            host_tso4: bit(11),
            host_tso6: bit(12),
            mrg_rxbuf: bit(15),
            features: bits.to_string(),
        })
    }
}

/// What `g`'s NIC `dev` negotiated.
pub(crate) fn offloads(g: &mut Guest, dev: &str) -> Result<Offloads> {
    let out = g.run_ok(&format!("cat /sys/class/net/{dev}/device/features"), SHORT)?;
    Offloads::parse(&out).ok_or_else(|| {
        anyhow!(
            "guest {}: unexpected virtio features of {dev}: {:?}",
            g.name(),
            out.trim()
        )
    })
}

/// One bounded iperf3 TCP run between two guests.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TcpRun {
    /// Gbit/s the server received (iperf3's `end.sum_received`).
    pub gbps: f64,
    /// Gbit/s the client sent.
    pub sender_gbps: f64,
    /// TCP retransmits the client counted.
    pub retransmits: u64,
    /// Bytes the server received.
    pub bytes: u64,
    /// Seconds the server measured.
    pub seconds: f64,
    /// Bytes per frame the client's NIC sent during the run (above the MTU: TSO at work).
    pub tx_bytes_per_frame: Option<f64>,
    /// CPU seconds of the QEMU processes given (all their threads).
    pub qemu_cpu_seconds: Option<f64>,
    /// CPU seconds of vecplane's worker (None: no vecplane in the path).
    pub worker_cpu_seconds: Option<f64>,
    /// Share of both CPUs busy during the run (everything on the machine, other users too).
    pub machine_busy: Option<f64>,
    /// Wall-clock seconds of the run, connection included.
    pub wall_seconds: f64,
}

/// The client's NIC counters (tx packets, tx bytes).
fn tx_counters(g: &mut Guest, dev: &str) -> Result<(u64, u64)> {
    let out = g.run_ok(
        &format!("cat /sys/class/net/{dev}/statistics/tx_packets /sys/class/net/{dev}/statistics/tx_bytes"),
        SHORT,
    )?;
    let v: Vec<u64> = out
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [p, b] => Ok((p, b)),
        _ => bail!("guest {}: unexpected counters of {dev}: {out:?}", g.name()),
    }
}

/// The JSON object iperf3 printed in `out` (which may carry stray lines around it).
pub(crate) fn iperf3_json(out: &str) -> Result<Value> {
    let (Some(a), Some(b)) = (out.find('{'), out.rfind('}')) else {
        bail!("iperf3 printed no JSON:\n{}", out.trim_end());
    };
    serde_json::from_str(&out[a..=b])
        .with_context(|| format!("iperf3 printed no valid JSON:\n{}", out.trim_end()))
}

/// The figures of iperf3's JSON report: (received Gbit/s, sent Gbit/s, retransmits, bytes
/// received, seconds).
pub(crate) fn iperf3_figures(v: &Value) -> Result<(f64, f64, u64, u64, f64)> {
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3: {e}");
    }
    let end = v.get("end").context("iperf3 JSON without `end`")?;
    let rx = end
        .get("sum_received")
        .context("iperf3 JSON without end.sum_received")?;
    let tx = end.get("sum_sent");
    let f = |o: Option<&Value>, k: &str| o.and_then(|o| o.get(k)).and_then(Value::as_f64);
    let bps = f(Some(rx), "bits_per_second")
        .context("iperf3 JSON without end.sum_received.bits_per_second")?;
    Ok((
        bps / 1e9,
        f(tx, "bits_per_second").unwrap_or(0.0) / 1e9,
        tx.and_then(|t| t.get("retransmits"))
            .and_then(Value::as_u64)
            .unwrap_or(0),
        rx.get("bytes").and_then(Value::as_u64).unwrap_or(0),
        f(Some(rx), "seconds").unwrap_or(0.0),
    ))
}

/// One iperf3 TCP stream of `seconds` from `client` to the server at `server_ip` (see
/// [`start_iperf3_server`]), with the CPU time of QEMU processes `pids` and, when given,
/// vecplane's worker.
pub(crate) fn tcp_run(
    client: &mut Guest,
    server_ip: &str,
    seconds: u32,
    pids: &[u32],
    switch: Option<&VmSwitch>,
) -> Result<TcpRun> {
    let qemu_cpu = || -> Option<f64> {
        pids.iter()
            .map(|&p| sys::process_cpu_seconds(p))
            .sum::<Option<f64>>()
    };
    let cmd = format!(
        "timeout {} iperf3 -c {server_ip} -t {seconds} -i 0 -J --connect-timeout 5000",
        seconds + 30
    );
    let limit = Duration::from_secs(u64::from(seconds) + 60);
    // With --busy-worker, vecplane's worker polls busily while its guests are measured and
    // naps otherwise (so it takes no CPU from the reference's runs); back to napping however
    // this ends. Without, `set_busy` leaves it adaptive.
    struct Napping<'a>(Option<&'a VmSwitch>);
    impl Drop for Napping<'_> {
        fn drop(&mut self) {
            if let Some(s) = self.0 {
                s.set_busy(false);
            }
        }
    }
    let _napping = Napping(switch);
    if let Some(s) = switch {
        s.set_busy(true);
    }
    for attempt in 0..5 {
        let counters0 = tx_counters(client, "eth0")?;
        let (q0, w0, m0) = (
            qemu_cpu(),
            switch.and_then(VmSwitch::worker_cpu_seconds),
            sys::cpu_times(),
        );
        let t = Instant::now();
        let (_, out) = client.run(&cmd, limit)?;
        let wall = t.elapsed().as_secs_f64();
        let (q1, w1, m1) = (
            qemu_cpu(),
            switch.and_then(VmSwitch::worker_cpu_seconds),
            sys::cpu_times(),
        );
        let counters1 = tx_counters(client, "eth0")?;
        let figures = iperf3_json(&out).and_then(|v| iperf3_figures(&v));
        let (gbps, sender_gbps, retransmits, bytes, secs) = match figures {
            Ok(f) => f,
            // The server takes one test at a time and needs a moment between two.
            Err(e) if attempt < 4 && is_transient(&e) => {
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
            Err(e) => return Err(e.context(format!("iperf3 in guest {}", client.name()))),
        };
        let frames = counters1.0.saturating_sub(counters0.0);
        let delta = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        return Ok(TcpRun {
            gbps,
            sender_gbps,
            retransmits,
            bytes,
            seconds: secs,
            tx_bytes_per_frame: (frames > 0)
                .then(|| counters1.1.saturating_sub(counters0.1) as f64 / frames as f64),
            qemu_cpu_seconds: delta(q0, q1),
            worker_cpu_seconds: delta(w0, w1),
            machine_busy: sys::all_busy(&m0, &m1),
            wall_seconds: wall,
        });
    }
    bail!("iperf3 in guest {} could not run its test", client.name())
}

fn is_transient(e: &anyhow::Error) -> bool {
    let s = format!("{e:#}");
    s.contains("refused") || s.contains("busy")
}

/// Statistics of a series of runs, in the keys of the veth scenarios' stability mode plus the
/// median (`gbps`) and every run.
pub(crate) fn series_json(runs: &[TcpRun]) -> Value {
    let g: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
    let (mean, min, max, sd, cv) = spread(&g);
    let med = |v: Vec<f64>| median(&v);
    json!({
        "gbps": median(&g).unwrap_or(0.0),
        "gbps_mean": mean,
        "gbps_median": median(&g).unwrap_or(0.0),
        "gbps_min": min,
        "gbps_max": max,
        "gbps_stddev": sd,
        "gbps_cv": cv,
        "runs_gbps": g,
        "retransmits": runs.iter().map(|r| r.retransmits).collect::<Vec<_>>(),
        "tx_bytes_per_frame": med(runs.iter().filter_map(|r| r.tx_bytes_per_frame).collect()),
        "qemu_cpu_seconds_per_gbit": med(runs
            .iter()
            .filter_map(|r| Some(r.qemu_cpu_seconds? / (r.gbps * r.seconds).max(1e-9)))
            .collect()),
        "worker_cpu_seconds_per_gbit": med(runs
            .iter()
            .filter_map(|r| Some(r.worker_cpu_seconds? / (r.gbps * r.seconds).max(1e-9)))
            .collect()),
        "machine_busy": med(runs.iter().filter_map(|r| r.machine_busy).collect()),
        "all_runs": runs,
    })
}

/// One text line for a series.
pub(crate) fn series_line(name: &str, runs: &[TcpRun]) -> String {
    let g: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
    let (mean, min, max, sd, cv) = spread(&g);
    let frames: Vec<f64> = runs.iter().filter_map(|r| r.tx_bytes_per_frame).collect();
    let busy: Vec<f64> = runs.iter().filter_map(|r| r.machine_busy).collect();
    format!(
        "  {name:<44} mean {mean:.3} Gbit/s, median {:.3}, min {min:.3}, max {max:.3}, stddev \
         {sd:.3}, CV {:.1}%, retransmits {}; client frames {:.0} B on average, machine {:.0}% \
         busy\n    runs: {}\n",
        median(&g).unwrap_or(0.0),
        cv * 100.0,
        runs.iter().map(|r| r.retransmits).sum::<u64>(),
        median(&frames).unwrap_or(0.0),
        median(&busy).unwrap_or(0.0) * 100.0,
        g.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `a / b` of two series' means and coefficients of variation: (throughput ratio, CV ratio).
pub(crate) fn compare_series(ours: &[TcpRun], theirs: &[TcpRun]) -> (f64, f64) {
    let g = |r: &[TcpRun]| spread(&r.iter().map(|x| x.gbps).collect::<Vec<_>>());
    let (m0, _, _, _, cv0) = g(ours);
    let (m1, _, _, _, cv1) = g(theirs);
    (ratio(m0, m1), ratio(cv0, cv1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiated_offloads_are_read_from_the_feature_bits() {
        // A tap-backed virtio-net NIC under QEMU 7.2 (from a guest of this machine).
        let o =
            Offloads::parse("1110010111111111111101010000110010000000100000000000000000000000\n")
                .expect("bits");
        assert!(o.csum && o.guest_csum && o.host_tso4 && o.guest_tso4 && o.mrg_rxbuf);
        let none = Offloads::parse("0000000000000001").expect("bits");
        assert!(!none.csum && !none.host_tso4 && none.mrg_rxbuf);
        assert_eq!(Offloads::parse("cat: no such file"), None);
        assert_eq!(Offloads::parse(""), None);
    }

    #[test]
    fn iperf3_reports_are_read() {
        let out = "warning: x\n{\"start\":{},\"end\":{\"sum_sent\":{\"bits_per_second\":2e9,\
                   \"retransmits\":3},\"sum_received\":{\"bits_per_second\":1.5e9,\"bytes\":\
                   1000,\"seconds\":2.0}}}\n";
        let v = iperf3_json(out).expect("json");
        assert_eq!(
            iperf3_figures(&v).expect("figures"),
            (1.5, 2.0, 3, 1000, 2.0)
        );
        let e = iperf3_figures(&json!({"error": "unable to connect: Connection refused"}))
            .expect_err("error");
        assert!(is_transient(&e), "{e}");
        assert!(iperf3_json("nothing").is_err());
    }

    #[test]
    fn series_statistics() {
        let run = |g: f64| TcpRun {
            gbps: g,
            sender_gbps: g,
            retransmits: 1,
            bytes: 1,
            seconds: 2.0,
            tx_bytes_per_frame: Some(1514.0),
            qemu_cpu_seconds: Some(4.0),
            worker_cpu_seconds: None,
            machine_busy: Some(0.5),
            wall_seconds: 2.5,
        };
        let runs = [run(1.0), run(2.0), run(3.0)];
        let v = series_json(&runs);
        assert_eq!(v["gbps"], 2.0);
        assert_eq!(v["gbps_mean"], 2.0);
        assert_eq!(v["runs_gbps"], json!([1.0, 2.0, 3.0]));
        assert_eq!(v["qemu_cpu_seconds_per_gbit"], 1.0);
        assert_eq!(v["worker_cpu_seconds_per_gbit"], Value::Null);
        let (r, cv) = compare_series(&runs, &[run(4.0), run(4.0)]);
        assert_eq!(r, 0.5);
        assert_eq!(cv, 0.0);
        assert!(series_line("x", &runs).contains("median 2.000"));
    }
}
