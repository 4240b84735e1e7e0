//! `vecplane bench --scenario veth-switch [--reference ovs] [--churn]`: vecplane as a flow-mode
//! bridge (OpenFlow rules, EMC + megaflow cache, AF_XDP ports) against Open vSwitch's userspace
//! datapath with `afxdp` ports, both on netlab's A - R - B veth topology (one topology each),
//! loaded with the same rules and groups (one flow file: `ovs-ofctl add-flows` and vecplane's
//! `flow-file`), driven by the same generator (`vecplane gen tx`, fixed flows or, with
//! `--churn`, new flows at a fixed rate) and measured the same way (B0's receive counter),
//! interleaved. Each run starts its data plane and stops it after, so the idle one never polls
//! the forwarding CPU. It owns both topologies, the private Open vSwitch (its directory and
//! daemons) and the report; it never sends outside its namespaces and never touches another
//! Open vSwitch.

use crate::report::median_index;
use crate::veth::{self, PpsRun, VethScenario};
use crate::veth_measure::measure_with;
use crate::veth_report;
use crate::BenchArgs;
use anyhow::{bail, Context, Result};
use netlab::{addr, Addressing, Driver, Forwarding, Host, Mode, Ovs, Topology, VecplaneConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The scenario's name.
pub const NAME: &str = "veth-switch";
/// The reference's name in reports.
pub const REFERENCE_NAME: &str = "ovs-afxdp";
/// Default new flows per second with `--churn`.
pub const DEFAULT_NEW_FLOWS_PER_SECOND: u64 = 100_000;

/// Namespace prefixes of the vecplane and Open vSwitch topologies, and of OVS's directory.
const PREFIX_VECPLANE: &str = "vsv";
const PREFIX_OVS: &str = "vso";
const PREFIX_OVS_DIR: &str = "vsod";

/// OpenFlow port numbers of Ra and Rb on both switches.
const OFPORT_A: u16 = 1;
const OFPORT_B: u16 = 2;

/// The rule set both switches run: an L3/L4 ACL in table 0 (drops by source prefix and by
/// port, direction by input port and destination), then table 1 choosing by protocol and port,
/// UDP towards B through a select group hashing the 5-tuple (L4 load balancing: every new
/// 5-tuple is a new megaflow in both switches, so churn reaches their slow paths).
pub fn flows_text() -> String {
    let (a, b) = (addr::A4, addr::B4_BRIDGED);
    format!(
        "# veth-switch rule set (ovs-ofctl add-flows syntax), loaded into both switches\n\
         table=0,priority=500,arp,in_port={OFPORT_A},actions=output:{OFPORT_B}\n\
         table=0,priority=500,arp,in_port={OFPORT_B},actions=output:{OFPORT_A}\n\
         table=0,priority=400,ip,nw_src=198.19.200.0/24,actions=drop\n\
         table=0,priority=400,udp,tp_dst=53,actions=drop\n\
         table=0,priority=400,tcp,tp_dst=23,actions=drop\n\
         table=0,priority=400,udp,nw_dst=198.19.0.0/16,tp_src=5000/0xfff8,actions=drop\n\
         table=0,priority=300,ip,in_port={OFPORT_A},nw_dst={b},actions=goto_table:1\n\
         table=0,priority=300,ip,in_port={OFPORT_B},nw_dst={a},actions=output:{OFPORT_A}\n\
         table=0,priority=0,actions=drop\n\
         table=1,priority=200,udp,nw_dst=198.18.1.0/24,tp_dst=1024/0xfc00,actions=group:1\n\
         table=1,priority=100,tcp,tp_dst=80,actions=output:{OFPORT_B}\n\
         table=1,priority=100,tcp,tp_dst=443,actions=output:{OFPORT_B}\n\
         table=1,priority=10,ip,actions=output:{OFPORT_B}\n"
    )
}

/// The groups both switches run (OpenFlow 1.5 syntax).
pub fn groups_text() -> String {
    format!(
        "group_id=1,type=select,selection_method=hash,fields(ip_src,ip_dst,udp_src,udp_dst),\
         bucket=weight:50,actions=output:{OFPORT_B},\
         bucket=weight:50,actions=mod_dl_src:02:00:00:00:01:09,output:{OFPORT_B}\n"
    )
}

/// Render vecplane's config: a flow-mode bridge over Ra (ofport 1) and Rb (ofport 2), AF_XDP,
/// the worker on `cpu`, the rules from `flow_file` and the groups of [`groups_text`].
pub fn vecplane_config(ra: &str, rb: &str, cpu: usize, flow_file: &Path) -> Result<String> {
    let base = netlab::render_config(
        ra,
        rb,
        &VecplaneConfig {
            driver: Driver::AF_XDP,
            forwarding: Forwarding::Bridge,
            worker_cpu: Some(cpu),
            buffers: None,
        },
    );
    let head = "[[bridge]]\nname = \"br0\"\n";
    if !base.contains(head) {
        bail!("netlab's bridge config has no `{}` table", head.trim());
    }
    let groups: Vec<String> = groups_text()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("\"{l}\""))
        .collect();
    let mut text = base.replacen(
        head,
        &format!(
            "{head}mode = \"flow\"\nflow-file = \"{}\"\ngroups = [{}]\n",
            flow_file.display(),
            groups.join(", ")
        ),
        1,
    );
    // Ports are rendered in order (Ra, then Rb): give each its number.
    let at = "bridge = \"br0\"\n";
    let mut from = 0;
    for ofport in [OFPORT_A, OFPORT_B] {
        let Some(pos) = text[from..].find(at).map(|i| i + from) else {
            bail!("netlab's bridge config has fewer ports than expected");
        };
        let with = format!("{at}ofport = {ofport}\n");
        text.replace_range(pos..pos + at.len(), &with);
        from = pos + with.len();
    }
    Ok(text)
}

/// One side's topology.
fn topology(prefix: &str) -> Result<Topology> {
    let t = Topology::build_with_prefix(prefix, Mode::Dataplane(Addressing::Bridged))?;
    let n = t.names().clone();
    // Open vSwitch's AF_XDP ports want tx offloads off on the veths it sends on; both sides
    // get the same settings.
    for dev in [&n.ra, &n.rb] {
        t.ethtool_k(
            Host::R,
            dev,
            &[("tx", false), ("tso", false), ("gso", false)],
        )?;
    }
    veth::prepare_pps(&t)?;
    Ok(t)
}

/// Open vSwitch's per-window figures.
#[derive(Clone, Debug, Default, serde::Serialize)]
struct OvsFigures {
    /// `dpif-netdev/pmd-stats-show` after the window (counters cleared at its start).
    pmd_stats: Value,
    /// `dpif-netdev/pmd-perf-show` after the window.
    pmd_perf_show: String,
}

/// Parse `dpif-netdev/pmd-stats-show`: `name: value` lines of the PMD thread (the numbers).
fn parse_pmd_stats(text: &str) -> Value {
    let mut map = serde_json::Map::new();
    let mut in_pmd = false;
    for line in text.lines() {
        if line.starts_with("pmd thread") {
            in_pmd = true;
            continue;
        }
        if line.starts_with("main thread") {
            in_pmd = false;
            continue;
        }
        if !in_pmd {
            continue;
        }
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        let num = v
            .split_whitespace()
            .next()
            .and_then(|x| x.parse::<f64>().ok());
        if let Some(x) = num {
            let key = k.trim().replace([' ', '-'], "_");
            map.insert(key, json!(x));
        }
    }
    Value::Object(map)
}

/// vecplane's flow-cache counters summed over bridges and workers, from `show flow-cache`.
fn cache_totals(vp: &netlab::Vecplane) -> Result<Value> {
    let r = vp.request("show flow-cache", true)?;
    let data = r.data.context("`show flow-cache` answered without data")?;
    let bridge = data
        .get("bridges")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .cloned()
        .context("`show flow-cache` lists no flow bridge")?;
    Ok(bridge)
}

/// The window's difference of two `show flow-cache` bridge objects: counters and cycles/miss.
fn cache_window(before: &Value, after: &Value, seconds: f64) -> Value {
    let get = |v: &Value, k: &str| {
        v.get("total")
            .and_then(|t| t.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let mut out = serde_json::Map::new();
    if let Some(t) = after.get("total").and_then(Value::as_object) {
        for k in t.keys() {
            out.insert(
                k.clone(),
                json!(get(after, k).saturating_sub(get(before, k))),
            );
        }
    }
    let hist = |v: &Value| {
        let h = v.get("cycles_per_miss");
        let c = h
            .and_then(|h| h.get("count"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let m = h
            .and_then(|h| h.get("mean"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        (c, c * m)
    };
    let ((c0, s0), (c1, s1)) = (hist(before), hist(after));
    let misses = get(after, "misses").saturating_sub(get(before, "misses"));
    out.insert(
        "cycles_per_miss".into(),
        json!(if c1 > c0 { (s1 - s0) / (c1 - c0) } else { 0.0 }),
    );
    out.insert(
        "misses_per_second".into(),
        json!(misses as f64 / seconds.max(1e-9)),
    );
    Value::Object(out)
}

/// One vecplane run: its measurement and its cache figures over the window.
struct VecplaneRun {
    run: PpsRun,
    cache: Value,
    show_flow_cache: String,
}

fn vecplane_run(
    p: &veth::Plan,
    topo: &Topology,
    config: &Path,
    label: &str,
) -> Result<VecplaneRun> {
    let vp = topo.start_vecplane(&p.exe, config)?;
    let before = std::cell::RefCell::new(Value::Null);
    let m = measure_with(p, topo, Some(&vp), label, &|| {
        *before.borrow_mut() = cache_totals(&vp)?;
        Ok(())
    });
    let after = m.as_ref().ok().map(|_| cache_totals(&vp));
    let text = m
        .as_ref()
        .ok()
        .map(|_| vp.request("show flow-cache", false));
    let stopped = vp.stop();
    let run = m?;
    stopped?;
    let after = after.context("no cache figures")??;
    let text = text.context("no cache text")??.text.unwrap_or_default();
    let before = before.into_inner();
    Ok(VecplaneRun {
        cache: cache_window(&before, &after, run.seconds),
        run,
        show_flow_cache: text,
    })
}

/// One Open vSwitch run: start it in `topo`'s R, load the rules, measure, read its figures,
/// stop it (also on failure).
fn ovs_run(
    p: &veth::Plan,
    topo: &Topology,
    label: &str,
    cleanup: &mut Cleanup,
) -> Result<(PpsRun, OvsFigures)> {
    let n = topo.names().clone();
    let ovs = Ovs::start_afxdp(
        PREFIX_OVS_DIR,
        &netlab::AfxdpSwitch {
            namespace: topo.ns(Host::R),
            ports: &[(n.ra.as_str(), OFPORT_A), (n.rb.as_str(), OFPORT_B)],
            pmd_cpu: p.fwd_cpu,
            // All of Open vSwitch on the forwarding CPU (BASELINE.md's recipe): its handler and
            // revalidator threads work under churn, as vecplane's worker does its own aging.
            main_cpu: Some(p.fwd_cpu),
            xdp_mode: "native",
        },
    )?;
    cleanup.dirs.push(ovs.dir().to_path_buf());
    cleanup.pids.extend(ovs.pids());
    let result = (|| -> Result<(PpsRun, OvsFigures)> {
        ovs.add_groups(&groups_text())?;
        ovs.add_flows(&flows_text())?;
        let m = measure_with(p, topo, None, label, &|| {
            ovs.appctl(&["dpif-netdev/pmd-stats-clear"]).map(|_| ())
        })?;
        let stats = ovs.appctl(&["dpif-netdev/pmd-stats-show"])?;
        let perf = ovs.appctl(&["dpif-netdev/pmd-perf-show"])?;
        Ok((
            m,
            OvsFigures {
                pmd_stats: parse_pmd_stats(&stats),
                pmd_perf_show: perf,
            },
        ))
    })();
    let stopped = ovs.stop();
    let r = result?;
    stopped?;
    Ok(r)
}

/// What the run created and must be gone after it (reported for the end-to-end test).
#[derive(Default)]
struct Cleanup {
    namespaces: Vec<String>,
    dirs: Vec<PathBuf>,
    pids: Vec<u32>,
}

fn median_of<T>(runs: &[T], pps: impl Fn(&T) -> f64) -> Option<&T> {
    let v: Vec<f64> = runs.iter().map(pps).collect();
    runs.get(median_index(&v)?)
}

/// `vecplane bench --scenario veth-switch`: build, measure, print (text or one JSON line).
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.stability.is_some() {
        bail!("{NAME}: --stability is for veth-router and veth-bridge");
    }
    if args.driver == veth::VethDriver::AfPacket {
        bail!("{NAME}: both switches use AF_XDP ports; accepted: --driver auto or af-xdp");
    }
    let mut p = veth::plan(args, VethScenario::Bridge)?;
    let churn = args.churn;
    if churn {
        p.new_flows_per_second = args
            .new_flows_per_second
            .unwrap_or(DEFAULT_NEW_FLOWS_PER_SECOND);
        if p.new_flows_per_second == 0 {
            bail!("--new-flows-per-second: accepted: at least 1 with --churn");
        }
    } else if args.new_flows_per_second.is_some() {
        bail!("--new-flows-per-second goes with --churn");
    }
    let reference = args.reference == Some(crate::Reference::Ovs);
    if reference {
        if let Some(why) = netlab::ovs::missing_prerequisite() {
            bail!("{NAME} --reference ovs: {why}");
        }
    }
    netlab::install_cleanup_handlers()?;
    let progress = |line: String| {
        if p.progress {
            eprintln!("{NAME}: {line}");
        }
    };
    let mut cleanup = Cleanup::default();
    progress("building the vecplane topology".into());
    let vt = topology(PREFIX_VECPLANE)?;
    cleanup.namespaces.extend(
        [Host::A, Host::R, Host::B]
            .iter()
            .map(|h| vt.ns(*h).to_string()),
    );
    cleanup.dirs.push(vt.dir().to_path_buf());
    let flow_file = vt.path("switch.flows");
    std::fs::write(&flow_file, flows_text())
        .with_context(|| format!("write {}", flow_file.display()))?;
    let n = vt.names().clone();
    let text = vecplane_config(&n.ra, &n.rb, p.fwd_cpu, &flow_file)?;
    netlab::validate_config(&text).map_err(|e| anyhow::anyhow!("{e}\n{text}"))?;
    let config = vt.path("vecplane-switch.toml");
    std::fs::write(&config, &text).with_context(|| format!("write {}", config.display()))?;
    let ot = if reference {
        progress("building the Open vSwitch topology".into());
        let t = topology(PREFIX_OVS)?;
        cleanup.namespaces.extend(
            [Host::A, Host::R, Host::B]
                .iter()
                .map(|h| t.ns(*h).to_string()),
        );
        cleanup.dirs.push(t.dir().to_path_buf());
        Some(t)
    } else {
        None
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for r in 0..p.runs {
        let label = format!("run {}/{} vecplane", r + 1, p.runs);
        let v = vecplane_run(&p, &vt, &config, &label)?;
        progress(format!(
            "{label}: {:.1} kpps (offered {:.1} kpps), misses/s {:.0}",
            v.run.pps / 1e3,
            v.run.offered_pps / 1e3,
            v.cache
                .get("misses_per_second")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        ));
        ours.push(v);
        if let Some(t) = &ot {
            let label = format!("run {}/{} {REFERENCE_NAME}", r + 1, p.runs);
            let (m, f) = ovs_run(&p, t, &label, &mut cleanup)?;
            progress(format!(
                "{label}: {:.1} kpps (offered {:.1} kpps), upcalls {}",
                m.pps / 1e3,
                m.offered_pps / 1e3,
                f.pmd_stats
                    .get("miss_with_success_upcall")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
            ));
            theirs.push((m, f));
        }
    }
    drop(ot);
    drop(vt);
    let report = report(&p, churn, &ours, &theirs, &cleanup)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report.1).context("cannot write the JSON report")?
        );
    } else {
        print!("{}", report.0);
    }
    Ok(())
}

/// (text, JSON) of the finished runs.
fn report(
    p: &veth::Plan,
    churn: bool,
    ours: &[VecplaneRun],
    theirs: &[(PpsRun, OvsFigures)],
    cleanup: &Cleanup,
) -> Result<(String, Value)> {
    let v = median_of(ours, |r| r.run.pps).context("no run completed")?;
    let o = median_of(theirs, |r| r.0.pps);
    let m = &v.run;
    let fs = p.frame_size;
    let speedup = o.filter(|o| o.0.pps > 0.0).map(|o| m.pps / o.0.pps);
    let cache = |k: &str| v.cache.get(k).cloned().unwrap_or(json!(0));
    let mut json = veth_report::with_keys(
        json!({
            "scenario": NAME,
            "driver": "af-xdp",
            "forwarding": "flow bridge",
            "churn": churn,
            "new_flows_per_second": p.new_flows_per_second,
            "rules": flows_text().lines().filter(|l| !l.starts_with('#')).count(),
        }),
        veth_report::run_keys(p, m),
    );
    json = veth_report::with_keys(
        json,
        json!({
            "worker_cpu_share": m.fwd_cpu_busy,
            "notes": notes(p),
            "cleanup": {
                "namespaces": cleanup.namespaces,
                "dirs": cleanup.dirs,
                "ovs_pids": cleanup.pids,
            },
            "emc_hits": cache("emc_hits"),
            "megaflow_hits": cache("megaflow_hits"),
            "misses": cache("misses"),
            "misses_per_second": cache("misses_per_second"),
            "cycles_per_miss": cache("cycles_per_miss"),
            "flow_cache": v.cache,
            "show_flow_cache": v.show_flow_cache,
            "nodes": m.nodes,
            "drops": m.drops,
            "runs": ours.iter().map(|r| r.run.pps).collect::<Vec<_>>(),
            "all_runs": ours.iter().map(|r| json!({"run": r.run, "flow_cache": r.cache})).collect::<Vec<_>>(),
        }),
    );
    if let Some((r, f)) = o {
        json["reference"] = veth_report::with_keys(
            veth_report::reference_keys(REFERENCE_NAME, r, speedup),
            json!({
                "pmd_stats": f.pmd_stats,
                "pmd_perf_show": f.pmd_perf_show,
                "runs": theirs.iter().map(|r| r.0.pps).collect::<Vec<_>>(),
                "all_runs": theirs.iter().map(|(r, f)| json!({"run": r, "pmd_stats": f.pmd_stats})).collect::<Vec<_>>(),
            }),
        );
    }
    let mut text = format!(
        "{NAME} {fs} B, {} flows{}: {} interleaved run(s) of {} s, forwarding on CPU {}, \
         generator on CPU {}\n",
        p.flows,
        if churn {
            format!(" live at a time, {} new flows/s", p.new_flows_per_second)
        } else {
            String::new()
        },
        p.runs,
        p.seconds,
        p.fwd_cpu,
        p.gen_cpu
    );
    let runs = |v: Vec<f64>| {
        v.iter()
            .map(|x| format!("{:.1}", x / 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    };
    text.push_str(&format!(
        "  vecplane (flow bridge, af-xdp)   median {:>8.1} kpps (runs: {}), offered {:.1} kpps, \
         {:.0} cycles/packet\n    cache over the window: EMC hits {}, megaflow hits {}, misses {} \
         ({:.0}/s), {:.0} cycles/miss\n",
        m.pps / 1e3,
        runs(ours.iter().map(|r| r.run.pps).collect()),
        m.offered_pps / 1e3,
        m.cycles_per_packet,
        cache("emc_hits"),
        cache("megaflow_hits"),
        cache("misses"),
        cache("misses_per_second").as_f64().unwrap_or(0.0),
        cache("cycles_per_miss").as_f64().unwrap_or(0.0),
    ));
    text.push_str(&format!(
        "    show flow-cache:\n{}",
        indent(&v.show_flow_cache)
    ));
    if let Some((r, f)) = o {
        text.push_str(&format!(
            "  Open vSwitch (netdev, afxdp)     median {:>8.1} kpps (runs: {}), offered {:.1} kpps, \
             {:.0} cycles/packet\n",
            r.pps / 1e3,
            runs(theirs.iter().map(|r| r.0.pps).collect()),
            r.offered_pps / 1e3,
            r.cycles_per_packet
        ));
        text.push_str(&format!(
            "    dpif-netdev/pmd-perf-show:\n{}",
            indent(&f.pmd_perf_show)
        ));
        if let Some(s) = speedup {
            text.push_str(&format!(
                "  speedup (vecplane pps / Open vSwitch pps): {s:.2}x\n"
            ));
        }
    }
    Ok((text, json))
}

fn notes(p: &veth::Plan) -> Vec<String> {
    let mut n = vec![
        format!(
            "generator: vecplane gen tx (xdp-live) in A on CPU {}, {} flows{}; sink: B0's \
             receive counter, frames dropped at B0's tc ingress",
            p.gen_cpu,
            p.flows,
            if p.new_flows_per_second > 0 {
                format!(
                    " live at a time, {} new flows per second (UDP ports from the clock)",
                    p.new_flows_per_second
                )
            } else {
                String::new()
            }
        ),
        "both switches: the same 13 rules in 2 tables and a select group hashing the 5-tuple \
         (so each new 5-tuple is a new megaflow in both), AF_XDP on Ra and Rb (native mode), \
         one polling thread on the forwarding CPU (all of Open vSwitch's threads pinned there), \
         tx offloads off on the veths"
            .to_string(),
        "cycles_per_packet = TSC ticks of the forwarding CPU's busy time per forwarded packet \
         (other processes on that CPU count too: compare within one run)"
            .to_string(),
    ];
    if crate::sys::load_average().is_some_and(|l| l > 2.0) {
        n.push("warning: the load average is above the 2 CPUs: figures are disturbed".into());
    }
    n
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("      {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_set_parses_in_vecplane_and_the_config_is_valid() {
        let rules = flow::ofctl::parse_flows_file(&flows_text()).expect("flows");
        assert_eq!(rules.len(), 13);
        for g in groups_text().lines() {
            flow::ofctl::parse_group(g).expect("group");
        }
        let dir = std::env::temp_dir().join(format!("vsw-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("switch.flows");
        std::fs::write(&file, flows_text()).expect("write");
        let text = vecplane_config("ra0", "rb0", 1, &file).expect("config");
        let r = netlab::validate_config(&text);
        let _ = std::fs::remove_dir_all(&dir);
        r.unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(text.contains("mode = \"flow\""), "{text}");
        assert!(
            text.contains("ofport = 1\n") && text.contains("ofport = 2\n"),
            "{text}"
        );
    }

    #[test]
    fn pmd_stats_are_parsed() {
        let t = "pmd thread numa_id 0 core_id 1:\n  packets received: 1000\n  packet recirculations: 0\n  \
                 avg. datapath passes per packet: 1.00\n  emc hits: 900\n  smc hits: 0\n  megaflow hits: 90\n  \
                 avg. subtable lookups per megaflow hit: 1.00\n  miss with success upcall: 10\n  \
                 miss with failed upcall: 0\n  avg. packets per output batch: 30.00\n  idle cycles: 5 (1.00%)\n  \
                 processing cycles: 100 (99.00%)\n  avg cycles per packet: 9900.00 (9900000/1000)\n\
                 main thread:\n  emc hits: 7\n";
        let v = parse_pmd_stats(t);
        assert_eq!(v["emc_hits"], json!(900.0));
        assert_eq!(v["miss_with_success_upcall"], json!(10.0));
        assert_eq!(v["avg_cycles_per_packet"], json!(9900.0));
        assert_eq!(v["avg._datapath_passes_per_packet"], json!(1.0));
    }

    #[test]
    fn cache_window_takes_differences() {
        let b = json!({"total": {"misses": 10, "emc_hits": 5}, "cycles_per_miss": {"count": 10, "mean": 1000.0}});
        let a = json!({"total": {"misses": 30, "emc_hits": 9}, "cycles_per_miss": {"count": 30, "mean": 2000.0}});
        let w = cache_window(&b, &a, 2.0);
        assert_eq!(w["misses"], json!(20));
        assert_eq!(w["emc_hits"], json!(4));
        assert_eq!(w["misses_per_second"], json!(10.0));
        assert_eq!(w["cycles_per_miss"], json!(2500.0));
    }
}
