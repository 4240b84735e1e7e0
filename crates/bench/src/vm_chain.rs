//! `vecplane bench --scenario vm-chain [--max-vnfs N] [--reference linux-bridge] [--plot F.svg]`:
//! the service-chain study. Endpoint guests A and B and N VNF guests (each bridging its two
//! NICs inside) hang off vecplane's flow-mode bridge; rules steer A's traffic through VNF 1..n
//! to B and back (netlab's [`chain`], the same chain vecplane/tests/vm_ports.rs builds), for n
//! = 0..N, and one iperf3 TCP stream A -> B measures each length. With the reference the same
//! chain runs over Linux bridges with TAP ports (VNF k's NICs on bridges k-1 and k), run for
//! run interleaved with vecplane's. Out: Gbit/s against chain length as a table, JSON, and an
//! SVG plot.
//!
//! It owns the guests, the data plane, the bridges' namespace and their files for the length of
//! the run and deletes them after, also on failure; traffic stays on the chain's own links
//! (198.18.32.0/24 and 198.18.33.0/24).

use crate::report::median;
use crate::veth::spread;
use crate::vm::{self, Offloads, TcpRun, VmSwitch};
use crate::vm_tcp::{self, Plan, Report};
use crate::{sys, BenchArgs};
use anyhow::{anyhow, bail, Result};
use netlab::{chain, Guest, GuestImage, LinuxChain};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "vm-chain";
/// Longest chain without `--max-vnfs` (the seed's study went to 4).
pub const DEFAULT_MAX_VNFS: u32 = 4;
/// The chain on vecplane: A 198.18.32.1, B .2.
const SUBNET_VECPLANE: u8 = 32;
/// The chain on Linux bridges: A 198.18.33.1, B .2.
const SUBNET_BRIDGE: u8 = 33;
/// How long a freshly wired chain may take to pass a ping.
const REACH_WITHIN: Duration = Duration::from_secs(60);

/// One chain (guests and figures) on one switch.
struct ChainSide<'a> {
    label: &'static str,
    a: Guest,
    b: Guest,
    vnfs: Vec<Guest>,
    b_ip: String,
    switch: Option<&'a VmSwitch>,
    offloads: Option<(Offloads, Offloads)>,
    /// Runs by chain length.
    points: Vec<Vec<TcpRun>>,
}

impl ChainSide<'_> {
    fn pids(&self) -> Vec<u32> {
        [&self.a, &self.b]
            .into_iter()
            .chain(self.vnfs.iter())
            .filter_map(Guest::pid)
            .collect()
    }

    fn run(&mut self, seconds: u32) -> Result<TcpRun> {
        let pids = self.pids();
        vm::tcp_run(&mut self.a, &self.b_ip, seconds, &pids, self.switch)
    }

    fn tso(&self) -> bool {
        self.offloads
            .as_ref()
            .is_some_and(|(c, s)| c.host_tso4 && s.guest_tso4)
    }

    fn points_json(&self) -> Value {
        let points: Vec<Value> = self
            .points
            .iter()
            .enumerate()
            .map(|(n, runs)| {
                let mut v = vm::series_json(runs);
                v["vnfs"] = json!(n);
                v
            })
            .collect();
        json!({
            "tso": self.tso(),
            "offloads": match &self.offloads {
                Some((c, s)) => json!({"client": c, "server": s}),
                None => Value::Null,
            },
            "gbps_by_vnfs": self.medians(),
            "points": points,
        })
    }

    fn medians(&self) -> Vec<f64> {
        self.points
            .iter()
            .map(|r| median(&r.iter().map(|x| x.gbps).collect::<Vec<_>>()).unwrap_or(0.0))
            .collect()
    }
}

/// Take A, B and `vnfs` VNF guests off `guests`.
fn side<'a>(
    guests: &mut impl Iterator<Item = Guest>,
    label: &'static str,
    vnfs: u32,
    subnet: u8,
    switch: Option<&'a VmSwitch>,
) -> Result<ChainSide<'a>> {
    let mut next = || {
        guests
            .next()
            .ok_or_else(|| anyhow!("fewer guests than booted"))
    };
    let (a, b) = (next()?, next()?);
    let vnfs = (0..vnfs).map(|_| next()).collect::<Result<Vec<_>>>()?;
    Ok(ChainSide {
        label,
        a,
        b,
        vnfs,
        b_ip: chain::endpoint_ip(subnet, 2),
        switch,
        offloads: None,
        points: Vec::new(),
    })
}

/// `vecplane bench --scenario vm-chain`: measure, print (text, or one JSON line), plot.
pub fn run(args: &BenchArgs) -> Result<()> {
    compare(args)?.print(args.json)
}

/// Boot the chains, measure every length, build the report and write the plot.
pub fn compare(args: &BenchArgs) -> Result<Report> {
    let p = vm_tcp::plan(args, NAME)?;
    let max = args.max_vnfs.unwrap_or(DEFAULT_MAX_VNFS);
    if max > chain::MAX_VNFS {
        bail!("--max-vnfs: accepted: 0 to {}", chain::MAX_VNFS);
    }
    let say = |l: String| p.say(NAME, l);
    netlab::install_cleanup_handlers()?;
    let load = sys::load_average();
    say("finding or building the guest image".into());
    let image = GuestImage::build_or_find()?;
    let config = chain::vecplane_config(max, &vm_tcp::dataplane_lines(p.cpu))?;
    let vp = VmSwitch::start(&config, args.busy_worker)?;
    let mut specs = chain::guest_specs(max, SUBNET_VECPLANE, "vp-", |port| Ok(vp.nic(port)))?;
    let mut linux = if p.reference {
        let lc = LinuxChain::build(max)?;
        let lb = chain::guest_specs(max, SUBNET_BRIDGE, "lb-", |port| lc.nic(port))?;
        specs.extend(lb.into_iter().map(|s| lc.lab().guest(s)));
        Some(lc)
    } else {
        None
    };
    say(format!("booting {} guests (QEMU, TCG)", specs.len()));
    let mut guests = vm::boot(&image, specs, &say)?.into_iter();
    let mut sides = vec![side(
        &mut guests,
        "vecplane (flow rules, vhost-user)",
        max,
        SUBNET_VECPLANE,
        Some(&vp),
    )?];
    if linux.is_some() {
        sides.push(side(
            &mut guests,
            "Linux bridges (TAP ports)",
            max,
            SUBNET_BRIDGE,
            None,
        )?);
    }
    for s in &mut sides {
        let ip = s.b_ip.clone();
        vm::start_iperf3_server(&mut s.b, &ip)?;
        s.offloads = Some((
            vm::offloads(&mut s.a, "eth0")?,
            vm::offloads(&mut s.b, "eth0")?,
        ));
    }
    for n in 0..=max {
        let mut rules = vec![chain::DEFAULT_RULE.to_string()];
        rules.extend(chain::chain_rules(n));
        vp.set_rules(chain::BRIDGE, &rules)?;
        if let Some(l) = linux.as_mut() {
            l.set_length(n)?;
        }
        for s in &mut sides {
            let ip = s.b_ip.clone();
            vm::reach(&mut s.a, &ip, REACH_WITHIN)?;
            if p.warmup > 0 {
                let r = s.run(p.warmup)?;
                say(format!(
                    "{n} VNFs, {}: warm-up {} s: {:.3} Gbit/s (not reported)",
                    s.label, p.warmup, r.gbps
                ));
            }
            s.points.push(Vec::new());
        }
        for r in 0..p.runs {
            for s in &mut sides {
                let t = s.run(p.seconds)?;
                say(format!(
                    "{n} VNFs run {}/{} {}: {:.3} Gbit/s, {} retransmits",
                    r + 1,
                    p.runs,
                    s.label,
                    t.gbps,
                    t.retransmits
                ));
                if let Some(point) = s.points.last_mut() {
                    point.push(t);
                }
            }
        }
    }
    let report = build_report(&p, max, &sides, &vp, load, args.plot.as_deref())?;
    drop(sides);
    drop(linux);
    drop(vp);
    Ok(report)
}

/// The Markdown table: one row per chain length.
fn table(sides: &[ChainSide]) -> String {
    let mut t = String::from("| VNFs | vecplane Gbit/s (median; min-max) | CV");
    if sides.len() > 1 {
        t.push_str(" | Linux bridges Gbit/s (median; min-max) | CV | vecplane / bridges");
    }
    t.push_str(" |\n|---:|---:|---:");
    if sides.len() > 1 {
        t.push_str("|---:|---:|---:");
    }
    t.push_str("|\n");
    let cell = |runs: &[TcpRun]| {
        let g: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
        let (_, min, max, _, cv) = spread(&g);
        (
            format!("{:.3} ({min:.3}-{max:.3})", median(&g).unwrap_or(0.0)),
            format!("{:.1}%", cv * 100.0),
            median(&g).unwrap_or(0.0),
        )
    };
    for n in 0..sides[0].points.len() {
        let (c, cv, m0) = cell(&sides[0].points[n]);
        t.push_str(&format!("| {n} | {c} | {cv}"));
        if let Some(r) = sides.get(1).and_then(|s| s.points.get(n)) {
            let (c, cv, m1) = cell(r);
            t.push_str(&format!(
                " | {c} | {cv} | {:.2}x",
                crate::report::ratio(m0, m1)
            ));
        }
        t.push_str(" |\n");
    }
    t
}

fn build_report(
    p: &Plan,
    max: u32,
    sides: &[ChainSide],
    vp: &VmSwitch,
    load: Option<f64>,
    plot_path: Option<&Path>,
) -> Result<Report> {
    let ours = &sides[0];
    let mut notes = vec![
        format!(
            "chain of n VNF guests for n = 0..{max}: A -> VNF 1 -> ... -> VNF n -> B, each VNF a \
             Linux bridge over its two virtio-net NICs inside the guest; on vecplane one \
             flow-mode bridge whose rules (in_port -> output) steer every hop, reloaded as one \
             change per length; on the reference, VNF k's NICs sit on Linux bridges k-1 and k"
        ),
        format!(
            "one iperf3 TCP stream A -> B per run, -t {} -i 0, {} run(s) per length per side, \
             interleaved{}; the median is plotted",
            p.seconds,
            p.runs,
            if p.warmup > 0 {
                format!(
                    ", after one unreported {} s warm-up run per length",
                    p.warmup
                )
            } else {
                String::new()
            }
        ),
        format!(
            "guests: QEMU under TCG, 1 vCPU, 256 MiB each, {} of them on each side, all booted \
             for the whole run (idle VNFs cost a little CPU too); vecplane's worker pinned to \
             CPU {}, {}, QEMU not pinned",
            2 + max,
            p.cpu,
            vm_tcp::poll_mode(p.busy_worker)
        ),
        format!(
            "TSO negotiated A -> B: vecplane {}{}",
            if ours.tso() { "yes" } else { "no" },
            match sides.get(1) {
                Some(s) => format!(", Linux bridges {}", if s.tso() { "yes" } else { "no" }),
                None => String::new(),
            }
        ),
        format!(
            "the machine is shared (2 CPUs; load average {} at the start)",
            load.map_or("unknown".into(), |l| format!("{l:.2}"))
        ),
    ];
    let ports = vp.ports_json();
    if let Some(n) = vm::drops_note(&ports) {
        notes.push(n);
    }
    let table = table(sides);
    if let Some(path) = plot_path {
        plot(path, max, sides)?;
        notes.push(format!("plot: {}", path.display()));
    }
    let mut j = ours.points_json();
    let extra = json!({
        "scenario": NAME,
        "switch": "vecplane flow-mode bridge, vhost-user ports, in the bench process",
        "max_vnfs": max,
        "seconds": p.seconds,
        "warmup_seconds": p.warmup,
        "runs": p.runs,
        "cpu": p.cpu,
        "poll_mode": vm_tcp::poll_mode(p.busy_worker),
        "table": table,
        "plot": plot_path.map(|x| x.display().to_string()),
        "ports": ports,
        "load_average": load,
        "notes": notes,
    });
    if let (Some(o), Value::Object(e)) = (j.as_object_mut(), extra) {
        o.extend(e);
    }
    if let Some(theirs) = sides.get(1) {
        let mut r = theirs.points_json();
        r["name"] = json!(vm_tcp::REFERENCE_NAME);
        r["ratio_by_vnfs"] = json!(ours
            .medians()
            .iter()
            .zip(theirs.medians())
            .map(|(a, b)| crate::report::ratio(*a, b))
            .collect::<Vec<_>>());
        j["reference"] = r;
    }
    let mut text = format!(
        "{NAME}: Gbit/s of one iperf3 TCP stream through a chain of 0 to {max} VNF guests\n"
    );
    for n in &notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    text.push('\n');
    text.push_str(&table);
    Ok(Report { text, json: j })
}

/// One line of the plot: its name and, per chain length, (median, min, max) Gbit/s.
pub(crate) type Series<'a> = (&'a str, Vec<(f64, f64, f64)>);

/// Plot the median Gbit/s (with min-max bars) against the chain length, one line per side.
pub(crate) fn plot_series(path: &Path, max: u32, series: &[Series]) -> Result<()> {
    use plotters::prelude::*;
    let ymax = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.2))
        .fold(0.1f64, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    let err = |e: String| anyhow!("plotting {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "One TCP stream through a chain of VNF guests (QEMU TCG)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(-0.3f64..(f64::from(max) + 0.3), 0f64..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("VNF guests in the chain")
        .y_desc("Gbit/s (median; bars: min-max)")
        .light_line_style(WHITE)
        .x_labels(max as usize + 1)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = if i == 0 { BLUE } else { RED };
        let line: Vec<(f64, f64)> = pts
            .iter()
            .enumerate()
            .map(|(n, p)| (n as f64, p.0))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                line.iter()
                    .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
            )
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(pts.iter().enumerate().map(|(n, p)| {
                PathElement::new(
                    vec![(n as f64, p.1), (n as f64, p.2)],
                    color.stroke_width(1),
                )
            }))
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

fn plot(path: &Path, max: u32, sides: &[ChainSide]) -> Result<()> {
    let series: Vec<Series> = sides
        .iter()
        .map(|s| {
            let pts = s
                .points
                .iter()
                .map(|runs| {
                    let g: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
                    let (_, min, max, _, _) = spread(&g);
                    (median(&g).unwrap_or(0.0), min, max)
                })
                .collect();
            (s.label, pts)
        })
        .collect();
    plot_series(path, max, &series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_is_an_svg_with_both_series() {
        let dir = crate::scratch::ScratchDir::create("vm-chain-plot").expect("dir");
        let path = dir.path().join("chain.svg");
        plot_series(
            &path,
            2,
            &[
                (
                    "vecplane",
                    vec![(1.0, 0.9, 1.1), (0.8, 0.7, 0.9), (0.5, 0.4, 0.6)],
                ),
                (
                    "Linux bridges",
                    vec![(2.0, 1.5, 2.5), (1.0, 0.9, 1.1), (0.6, 0.5, 0.7)],
                ),
            ],
        )
        .expect("plot");
        let svg = std::fs::read_to_string(&path).expect("svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.contains("vecplane") && svg.contains("Linux bridges"));
    }
}
