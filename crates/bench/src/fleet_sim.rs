//! `vecplane bench --scenario fleet-sim`: the scale-out simulation (issue 11), with no
//! namespaces and no packets. A fleet of load balancers sits behind an ECMP router; each one
//! builds its tables from the same `lb` lines given in its own order, through the product's
//! CLI parser, model, snapshot and Maglev code, and keeps its own flow table. One VIP, 1M TCP
//! flows. From the steady state it applies one change at a time (load balancers removed or
//! added, so the router spreads flows over other next hops; servers removed, failed and
//! flushed, or added) and counts the flows whose server changes, against the ideal: only the
//! flows of a removed server move. It owns the simulation, its report and its plot; it never
//! sends a packet and never touches the system.
//!
//! The router is modelled as Linux's IPv4 multipath (hash-threshold, RFC 2992): the flow hash
//! space is cut into one range per next hop, so removing one of N next hops moves flows of
//! every range, far more than 1/N. That is the worst case the Maglev tables must absorb.

use anyhow::{anyhow, bail, Context, Result};
use lb::model::{LbState, VipId};
use lb::snapshot::LbTables;
use lb::{stable_hash, FiveTuple};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::path::Path;

/// The fleet's shape.
#[derive(Clone, Copy, Debug)]
pub struct FleetConfig {
    /// Load balancers behind the router.
    pub lbs: usize,
    /// Servers behind the VIP.
    pub servers: usize,
    /// Concurrent flows.
    pub flows: usize,
    /// Seed of each load balancer's order of `lb as` lines.
    pub seed: u64,
}

impl Default for FleetConfig {
    /// The fleet: 100 load balancers, 1,000 servers, 1M flows.
    fn default() -> FleetConfig {
        FleetConfig {
            lbs: 100,
            servers: 1000,
            flows: 1_000_000,
            seed: 1,
        }
    }
}

/// The VIP (TCP port 80).
const VIP: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 1);
const VIP_PORT: u16 = 80;

/// Server `i`: 198.19.0.1 on.
fn server_addr(i: usize) -> Ipv4Addr {
    let n = i + 1;
    Ipv4Addr::new(198, 19, (n >> 8) as u8, n as u8)
}

/// The server index of an address made by `server_addr` (None for any other).
fn server_index(a: &[u8; 16]) -> Option<usize> {
    if a[12] != 198 || a[13] != 19 {
        return None;
    }
    (usize::from(a[14]) << 8 | usize::from(a[15])).checked_sub(1)
}

/// Flow `i`: a distinct client address and port (198.18.0.0/16, 16 ports per address).
fn flow(i: usize) -> FiveTuple {
    let c = i >> 4;
    FiveTuple::v4(
        [198, 18, (c >> 8) as u8, c as u8],
        VIP.octets(),
        6,
        20_000 + (i as u16 & 15) * 997,
        VIP_PORT,
    )
}

/// The router's hash of a flow (independent of the Maglev hash, as a router's is).
fn router_hash(t: &FiveTuple) -> u32 {
    let mut x = u64::from_be_bytes([
        t.src[8], t.src[9], t.src[10], t.src[11], t.src[12], t.src[13], t.src[14], t.src[15],
    ]) ^ (u64::from(t.src_port) << 16 | u64::from(t.dst_port)).rotate_left(29);
    // splitmix64's finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) as u32
}

/// Hash-threshold multipath: the next hop whose range of the hash space holds `h`.
fn next_hop(h: u32, n: usize) -> usize {
    ((u64::from(h) * n as u64) >> 32) as usize
}

/// A deterministic shuffle (Fisher-Yates over a splitmix64 stream).
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut s = seed;
    for i in (1..v.len()).rev() {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        v.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

/// The VIP's `new_len` for a fleet of `servers`: at least 100 x the servers (the rule)
/// and prime. It is configuration: it stays when servers come and go (a new size would give
/// every flow a new place in the table).
fn new_len(servers: usize) -> u32 {
    lb::maglev::next_prime((servers as u32).saturating_mul(100).max(65_537))
}

/// One load balancer's tables for a server set, its `lb as` lines in the order of `seed`.
fn build_lb(servers: &[usize], new_len: u32, seed: u64) -> Result<(LbTables, VipId)> {
    let vip = format!("{VIP}/32 protocol tcp port {VIP_PORT}");
    let mut order: Vec<usize> = servers.to_vec();
    shuffle(&mut order, seed);
    let mut lines = vec![format!(
        "lb vip {vip} encap l3dsr dscp 23 new_len {new_len}"
    )];
    for chunk in order.chunks(50) {
        let addrs: Vec<String> = chunk.iter().map(|&i| server_addr(i).to_string()).collect();
        lines.push(format!("lb as {vip} {}", addrs.join(" ")));
    }
    let cmds = lb::cli::parse_lines(&lines.join("\n")).map_err(|e| anyhow!("lb lines: {e}"))?;
    let state = LbState::new()
        .apply(&cmds)
        .map_err(|e| anyhow!("lb lines: {e}"))?;
    let tables = LbTables::build(&state, None);
    let id = tables
        .vips()
        .next()
        .map(|v| v.id)
        .context("the fleet's VIP is missing from the tables")?;
    Ok((tables, id))
}

/// The server a load balancer's Maglev table gives a flow.
fn maglev_server(lb: &(LbTables, VipId), t: &FiveTuple) -> Option<usize> {
    let slot = lb.0.choose(lb.1, stable_hash(t, false))?;
    server_index(&lb.0.as_entry(slot).addr16)
}

/// What one change did to the flows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeResult {
    /// What changed.
    pub change: String,
    /// Share of flows the router sent to another load balancer.
    pub moved_lb: f64,
    /// Share of flows whose server changed.
    pub changed_server: f64,
    /// The ideal share: the flows of removed servers (0 when none is removed).
    pub ideal: f64,
    /// Share whose server changed when no load balancer kept flow state (Maglev alone).
    pub changed_stateless: f64,
}

/// The fleet in its steady state.
pub struct Fleet {
    cfg: FleetConfig,
    /// The load balancers, by id (ids of added ones follow).
    lbs: Vec<(LbTables, VipId)>,
    /// Per flow: the router's hash, the load balancer and the server it is on.
    hash: Vec<u32>,
    on_lb: Vec<u32>,
    on_server: Vec<u32>,
}

impl Fleet {
    /// Build the fleet and settle every flow on a load balancer and a server.
    pub fn new(cfg: FleetConfig) -> Result<Fleet> {
        if !(2..=60_000).contains(&cfg.servers) {
            bail!("--servers {}: fleet-sim accepts 2..=60000", cfg.servers);
        }
        if !(1..=1 << 20).contains(&cfg.flows) {
            bail!("--flows {}: fleet-sim accepts 1..=1048576", cfg.flows);
        }
        if !(2..=10_000).contains(&cfg.lbs) {
            bail!("{} load balancers: fleet-sim accepts 2..=10000", cfg.lbs);
        }
        let all: Vec<usize> = (0..cfg.servers).collect();
        let lbs = (0..cfg.lbs)
            .map(|l| build_lb(&all, new_len(cfg.servers), cfg.seed ^ (l as u64) << 20))
            .collect::<Result<Vec<_>>>()?;
        let mut fleet = Fleet {
            cfg,
            lbs,
            hash: Vec::with_capacity(cfg.flows),
            on_lb: Vec::with_capacity(cfg.flows),
            on_server: Vec::with_capacity(cfg.flows),
        };
        for i in 0..cfg.flows {
            let t = flow(i);
            let h = router_hash(&t);
            let l = next_hop(h, cfg.lbs);
            let s = maglev_server(&fleet.lbs[l], &t).context("a flow found no server")?;
            fleet.hash.push(h);
            fleet.on_lb.push(l as u32);
            fleet.on_server.push(s as u32);
        }
        Ok(fleet)
    }

    /// Apply one change to the steady state: the router's next hops become `lbs_after` (ids;
    /// ids past the fleet are new load balancers), servers `removed` fail (their flow entries
    /// are flushed) and `added` new servers join. Each load balancer of `lbs_after` rebuilds
    /// its tables for the new server set in its own order.
    pub fn change(
        &self,
        what: &str,
        lbs_after: &[usize],
        removed: &[usize],
        added: usize,
    ) -> Result<ChangeResult> {
        if lbs_after.is_empty() {
            bail!("{what}: no load balancer left");
        }
        let servers_changed = !removed.is_empty() || added > 0;
        let mut gone = vec![false; self.cfg.servers];
        for &r in removed {
            *gone.get_mut(r).context("removed server out of range")? = true;
        }
        let after: Vec<usize> = (0..self.cfg.servers + added)
            .filter(|&i| !gone.get(i).copied().unwrap_or(false))
            .collect();
        // The tables of each load balancer of the new next-hop set.
        let mut tables: Vec<Option<(LbTables, VipId)>> = Vec::new();
        let max_id = lbs_after.iter().copied().max().unwrap_or(0);
        tables.resize_with(max_id + 1, || None);
        for &l in lbs_after {
            let seed = self.cfg.seed ^ (l as u64) << 20 ^ 0x5eed;
            tables[l] = Some(if servers_changed || l >= self.lbs.len() {
                build_lb(&after, new_len(self.cfg.servers), seed)?
            } else {
                // Unchanged server set: the load balancer keeps its tables.
                (self.lbs[l].0.clone(), self.lbs[l].1)
            });
        }
        let (mut moved, mut changed, mut ideal, mut stateless) = (0u64, 0u64, 0u64, 0u64);
        for i in 0..self.cfg.flows {
            let l = lbs_after[next_hop(self.hash[i], lbs_after.len())];
            let before_lb = self.on_lb[i] as usize;
            let before = self.on_server[i] as usize;
            let lost = gone[before];
            let t = flow(i);
            let lb = tables[l].as_ref().context("load balancer without tables")?;
            let fresh = maglev_server(lb, &t).context("a flow found no server")?;
            // The load balancer that has the flow's entry keeps its server unless the server
            // is gone; any other one (the router moved the flow) chooses by Maglev.
            let now = if l == before_lb && !lost {
                before
            } else {
                fresh
            };
            moved += u64::from(l != before_lb);
            changed += u64::from(now != before);
            ideal += u64::from(lost);
            stateless += u64::from(fresh != before);
        }
        let share = |n: u64| n as f64 / self.cfg.flows as f64;
        Ok(ChangeResult {
            change: what.to_string(),
            moved_lb: share(moved),
            changed_server: share(changed),
            ideal: share(ideal),
            changed_stateless: share(stateless),
        })
    }

    /// The ids of the steady state's load balancers without the first `k`, or with `k` new ones.
    fn lbs_without(&self, k: usize) -> Vec<usize> {
        (k..self.cfg.lbs).collect()
    }

    fn lbs_with(&self, k: usize) -> Vec<usize> {
        (0..self.cfg.lbs + k).collect()
    }

    /// `k` servers spread over the set (every `servers / k`-th).
    fn some_servers(&self, k: usize) -> Vec<usize> {
        let step = (self.cfg.servers / k.max(1)).max(1);
        (0..self.cfg.servers).step_by(step).take(k).collect()
    }
}

/// The whole report: each change, and the server-removal sweep for the plot.
#[derive(Clone, Debug, Serialize)]
pub struct FleetReport {
    /// Load balancers, servers, flows.
    pub lbs: usize,
    /// Servers behind the VIP.
    pub servers: usize,
    /// Concurrent flows.
    pub flows: usize,
    /// The changes, one at a time from the steady state.
    pub changes: Vec<ChangeResult>,
    /// Servers removed (of `servers`) and what that did, for the plot.
    pub sweep: Vec<(usize, ChangeResult)>,
}

/// Servers removed in the sweep.
pub const SWEEP: [usize; 7] = [1, 2, 5, 10, 20, 50, 100];

/// Run every change on a fleet of `cfg` (`progress` gets a line per step).
pub fn run_fleet(cfg: FleetConfig, progress: &mut dyn FnMut(&str)) -> Result<FleetReport> {
    progress(&format!(
        "fleet-sim: {} load balancers, {} servers, {} flows",
        cfg.lbs, cfg.servers, cfg.flows
    ));
    let f = Fleet::new(cfg)?;
    let all = f.lbs_with(0);
    let one_server = f.some_servers(1);
    let plans: Vec<(String, Vec<usize>, Vec<usize>, usize)> = vec![
        (
            "1 load balancer removed".into(),
            f.lbs_without(1),
            vec![],
            0,
        ),
        (
            format!("{} load balancers removed", cfg.lbs / 10),
            f.lbs_without(cfg.lbs / 10),
            vec![],
            0,
        ),
        ("1 load balancer added".into(), f.lbs_with(1), vec![], 0),
        (
            format!("{} load balancers added", cfg.lbs / 10),
            f.lbs_with(cfg.lbs / 10),
            vec![],
            0,
        ),
        (
            "1 server removed".into(),
            all.clone(),
            one_server.clone(),
            0,
        ),
        ("1 server added".into(), all.clone(), vec![], 1),
        (
            "1 server removed and 1 load balancer removed".into(),
            f.lbs_without(1),
            one_server,
            0,
        ),
    ];
    let mut changes = Vec::new();
    for (what, lbs, removed, added) in plans {
        progress(&format!("fleet-sim: {what}"));
        changes.push(f.change(&what, &lbs, &removed, added)?);
    }
    let mut sweep = Vec::new();
    for k in SWEEP.iter().copied().filter(|&k| k < cfg.servers) {
        progress(&format!("fleet-sim: {k} server(s) removed"));
        let what = if k == 1 {
            "1 server removed (sweep)".to_string()
        } else {
            format!("{k} servers removed")
        };
        let r = f.change(&what, &all, &f.some_servers(k), 0)?;
        sweep.push((k, r));
    }
    Ok(FleetReport {
        lbs: cfg.lbs,
        servers: cfg.servers,
        flows: cfg.flows,
        changes,
        sweep,
    })
}

/// `vecplane bench --scenario fleet-sim`: run the changes on the fleet (`--servers`,
/// `--flows` change its size), print the table (or the JSON report with `--json`) and write
/// the plot to `--plot`.
pub fn run(args: &crate::BenchArgs) -> Result<()> {
    let d = FleetConfig::default();
    let cfg = FleetConfig {
        servers: args.servers.map_or(d.servers, |s| s as usize),
        flows: args.flows.map_or(d.flows, |f| f as usize),
        ..d
    };
    let report = run_fleet(cfg, &mut |line| eprintln!("{line}"))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{}", table(&report));
    }
    if let Some(path) = &args.plot {
        plot(path, &report)?;
        eprintln!("fleet-sim: plot written to {}", path.display());
    }
    Ok(())
}

/// The report as a Markdown table.
pub fn table(r: &FleetReport) -> String {
    let mut o = format!(
        "fleet: {} load balancers behind hash-threshold ECMP, {} servers, {} flows\n\n\
         | change | flows moved to another LB | flows whose server changed | ideal | Maglev alone (no flow state) |\n\
         | --- | --- | --- | --- | --- |\n",
        r.lbs, r.servers, r.flows
    );
    let pct = |x: f64| format!("{:.3}%", 100.0 * x);
    for c in r.changes.iter().chain(r.sweep.iter().map(|(_, c)| c)) {
        o.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            c.change,
            pct(c.moved_lb),
            pct(c.changed_server),
            pct(c.ideal),
            pct(c.changed_stateless)
        ));
    }
    o
}

/// Which share of a change result a plotted line shows.
type Share = fn(&ChangeResult) -> f64;

/// Plot the share of flows whose server changes against the servers removed (SVG).
pub fn plot(path: &Path, r: &FleetReport) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: String| anyhow!("plotting {}: {e}", path.display());
    let xmax = r.sweep.iter().map(|(k, _)| *k).max().unwrap_or(1) as f64;
    let ymax = r
        .sweep
        .iter()
        .map(|(_, c)| c.changed_stateless.max(c.changed_server))
        .fold(0.001f64, f64::max)
        * 100.0
        * 1.1;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{} load balancers, {} servers, {} flows: flows whose server changes",
                r.lbs, r.servers, r.flows
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax * 1.05, 0f64..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(format!("servers removed (of {})", r.servers))
        .y_desc("% of flows whose server changes")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let series: [(&str, RGBColor, Share); 3] = [
        ("ideal: the removed servers' flows", BLACK, |c| c.ideal),
        ("vecplane fleet (Maglev + flow tables)", BLUE, |c| {
            c.changed_server
        }),
        ("Maglev alone (no flow state)", RED, |c| c.changed_stateless),
    ];
    for (name, color, f) in series {
        let pts: Vec<(f64, f64)> = r
            .sweep
            .iter()
            .map(|(k, c)| (*k as f64, 100.0 * f(c)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip() {
        for i in [0, 1, 254, 255, 999, 59_999] {
            let a = FiveTuple::v4([0; 4], server_addr(i).octets(), 6, 0, 0).dst;
            assert_eq!(server_index(&a), Some(i));
        }
        let distinct: std::collections::HashSet<_> = (0..1 << 20)
            .map(|i| (flow(i).src, flow(i).src_port))
            .collect();
        assert_eq!(distinct.len(), 1 << 20);
    }

    #[test]
    fn load_balancers_built_in_any_order_agree() {
        let all: Vec<usize> = (0..300).collect();
        let a = build_lb(&all, new_len(300), 1).expect("lb a");
        let b = build_lb(&all, new_len(300), 2).expect("lb b");
        for i in 0..20_000 {
            let t = flow(i);
            assert_eq!(maglev_server(&a, &t), maglev_server(&b, &t));
        }
    }

    /// The simulation: 100 load balancers, 1,000 servers, 1M flows. A load balancer
    /// change moves no flow to another server; a server change moves only the flows of the
    /// removed server.
    #[test]
    fn fleet_changes_move_only_what_they_must() {
        let f = Fleet::new(FleetConfig::default()).expect("fleet");
        for (what, lbs) in [
            ("1 LB removed", f.lbs_without(1)),
            ("10 LBs removed", f.lbs_without(10)),
            ("1 LB added", f.lbs_with(1)),
        ] {
            let r = f.change(what, &lbs, &[], 0).expect(what);
            assert!(r.moved_lb > 0.0, "{what}: the router moved no flow: {r:?}");
            assert_eq!(r.changed_server, 0.0, "{what}: {r:?}");
            assert_eq!(r.changed_stateless, 0.0, "{what}: {r:?}");
        }
        let one = f.some_servers(1);
        let r = f
            .change("1 server removed", &f.lbs_with(0), &one, 0)
            .expect("removal");
        assert_eq!(r.changed_server, r.ideal, "{r:?}");
        assert!((0.0007..0.0013).contains(&r.ideal), "about 1/1000: {r:?}");
        // Without flow state Maglev moves more than the removed server's flows (its table is
        // not minimally disruptive: 0.73% for 1 of 1,000 here), but far from all of them.
        assert!(
            r.changed_stateless >= r.ideal && r.changed_stateless < 0.02,
            "{r:?}"
        );
        let r = f
            .change("1 server added", &f.lbs_with(0), &[], 1)
            .expect("addition");
        assert_eq!(
            r.changed_server, 0.0,
            "established flows keep their server: {r:?}"
        );
        assert!(r.changed_stateless < 0.02, "{r:?}");
        let r = f
            .change("server and LB removed", &f.lbs_without(1), &one, 0)
            .expect("both");
        // The flows the router moved reach a load balancer without their entry, which asks its
        // new Maglev table: about `changed_stateless` of them change, on top of the removed
        // server's own.
        assert!(r.changed_server >= r.ideal, "{r:?}");
        assert!(
            r.changed_server <= r.ideal + 1.2 * r.moved_lb * r.changed_stateless,
            "{r:?}"
        );
    }
}
