//! `vecplane bench --scenario lb`: the load balancer on memory ports. rx0 sends UDP flows to one
//! VIP with `--servers` servers (each flow a distinct 5-tuple); the `lb` node gives each flow its
//! server, encapsulates it (`--encap`) and the lookup sends it out of tx0 toward the servers'
//! route. The ip4 scenario (1M routes, the engine's reference) runs interleaved in the same
//! session, and the report gives the ratio. `--miss` makes every packet a new flow (16,777,216
//! distinct flows, a 1-second flow timeout: an entry is reused before its flow comes round
//! again). It owns this scenario's spec and report; it measures the real graph and never
//! shortens it.

use crate::measure;
use crate::report::{self, Summary};
use crate::scenario::{memory_port, Scenario, ScenarioSpec, NEIGHBOUR_MAC, RX0_MAC, TX0_MAC};
use crate::{flows::Common, BenchArgs};
use anyhow::{bail, Context, Result};
use dataplane::{DataplaneSpec, LbSpec, NeighbourSpec, PortDriver, RouteSpec, RouteTarget};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The encapsulation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EncapArg {
    /// L3DSR: destination rewritten to the server, DSCP set (IPv4).
    L3dsr,
    /// IPv4 in GRE over IPv4.
    Gre4,
    /// IPv4 in GRE over IPv6.
    Gre6,
    /// Destination address and port rewritten (IPv4).
    Nat4,
    /// Destination address and port rewritten (IPv6).
    Nat6,
}

impl EncapArg {
    fn name(self) -> &'static str {
        match self {
            EncapArg::L3dsr => "l3dsr",
            EncapArg::Gre4 => "gre4",
            EncapArg::Gre6 => "gre6",
            EncapArg::Nat4 => "nat4",
            EncapArg::Nat6 => "nat6",
        }
    }

    fn ip6_clients(self) -> bool {
        self == EncapArg::Nat6
    }

    fn ip6_servers(self) -> bool {
        matches!(self, EncapArg::Gre6 | EncapArg::Nat6)
    }
}

/// Default flows (the "1M concurrent flows").
pub const DEFAULT_FLOWS: u32 = 1 << 20;
/// Default servers behind the VIP.
pub const DEFAULT_SERVERS: u32 = 100;
/// Flows generated with `--miss`.
pub const MISS_FLOWS: u32 = ports::flows::MAX_FLOWS;

const SENDER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const RX0_4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const TX0_4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
const NEIGHBOUR4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 100, 1);
const SENDER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const RX0_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const TX0_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);
const NEIGHBOUR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 100, 0, 0, 0, 0, 1);

/// Server `i`: 198.19.x.y (IPv4) or 2001:db8:200::x:y (IPv6).
fn server(i: u32, ip6: bool) -> IpAddr {
    let (hi, lo) = ((i + 1) >> 8, (i + 1) & 0xff);
    if ip6 {
        IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0x200, 0, 0, 0, hi as u16, lo as u16,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::new(198, 19, hi as u8, lo as u8))
    }
}

/// The `lb` lines of the scenario (VPP CLI syntax, as an operator would write them).
pub fn lb_lines(encap: EncapArg, servers: u32, buckets: u32, timeout: u32) -> Vec<String> {
    let dport = packet::headers::UdpFrameSpec::default().dst_port;
    let vip = if encap.ip6_clients() {
        format!("{VIP6}/128")
    } else {
        format!("{VIP4}/32")
    };
    let encap_words = match encap {
        EncapArg::L3dsr => "encap l3dsr dscp 23".to_string(),
        EncapArg::Gre4 => "encap gre4".to_string(),
        EncapArg::Gre6 => "encap gre6".to_string(),
        EncapArg::Nat4 | EncapArg::Nat6 => {
            format!("encap {} type clusterip target_port 8080", encap.name())
        }
    };
    let mut lines = vec![
        format!("lb conf ip4-src-address {TX0_4} ip6-src-address {TX0_6} buckets {buckets} timeout {timeout}"),
        format!("lb vip {vip} protocol udp port {dport} {encap_words}"),
    ];
    let addrs: Vec<String> = (0..servers)
        .map(|i| server(i, encap.ip6_servers()).to_string())
        .collect();
    for chunk in addrs.chunks(50) {
        lines.push(format!(
            "lb as {vip} protocol udp port {dport} {}",
            chunk.join(" ")
        ));
    }
    lines
}

/// The `[lb]` of `vecplane bench --scenario ip4 --vips N`: `n` VIPs (UDP port 80, L3DSR, a
/// small Maglev table, no servers) at 198.19.x.y/32, where the ip4 scenario sends nothing (its
/// destinations avoid 198.18.0.0/15), so every packet measures what VIPs cost the rest.
pub fn idle_vips(n: u32) -> Result<LbSpec> {
    if n == 0 || n as usize > lb::model::MAX_VIPS {
        bail!("--vips {n}: accepted 1..={}", lb::model::MAX_VIPS);
    }
    let text: Vec<String> = (0..n)
        .map(|i| {
            let (hi, lo) = (i / 250, i % 250 + 1);
            format!(
                "lb vip 198.19.{hi}.{lo}/32 protocol udp port 80 encap l3dsr dscp 23 new_len 1024"
            )
        })
        .collect();
    let cmds =
        lb::cli::parse_lines(&text.join("\n")).map_err(|e| anyhow::anyhow!("lb lines: {e}"))?;
    let state = lb::model::LbState::new()
        .apply(&cmds)
        .map_err(|e| anyhow::anyhow!("lb lines: {e}"))?;
    Ok(LbSpec {
        state,
        health: Default::default(),
    })
}

/// The data plane of the scenario.
pub fn spec(
    encap: EncapArg,
    flows: u32,
    servers: u32,
    miss: bool,
    cpu: usize,
) -> Result<DataplaneSpec> {
    if servers == 0 || servers > 60_000 {
        bail!("--servers {servers}: accepted 1..=60000");
    }
    let ip6c = encap.ip6_clients();
    let (sender, vip) = if ip6c {
        (IpAddr::V6(SENDER6), IpAddr::V6(VIP6))
    } else {
        (IpAddr::V4(SENDER4), IpAddr::V4(VIP4))
    };
    let mut spec = DataplaneSpec {
        buffers: 16384,
        worker_cpu: Some(cpu),
        ..DataplaneSpec::default()
    };
    spec.ports = vec![
        memory_port("rx0", RX0_MAC, true, sender, vec![vip], flows),
        memory_port("tx0", TX0_MAC, false, sender, vec![], 1),
    ];
    if let Some(PortDriver::Memory(m)) = spec.ports.get_mut(1).map(|p| &mut p.driver) {
        m.destinations = vec![m.src_ip];
    }
    spec.ports[0].ip4 = vec![(RX0_4, 24)];
    spec.ports[1].ip4 = vec![(TX0_4, 24)];
    spec.ports[0].ip6 = vec![(RX0_6, 64)];
    spec.ports[1].ip6 = vec![(TX0_6, 64)];
    spec.routes4 = vec![RouteSpec {
        prefix: Ipv4Addr::new(198, 19, 0, 0),
        len: 16,
        target: RouteTarget::Via(vec![NEIGHBOUR4]),
    }];
    spec.routes6 = vec![RouteSpec {
        prefix: Ipv6Addr::new(0x2001, 0xdb8, 0x200, 0, 0, 0, 0, 0),
        len: 48,
        target: RouteTarget::Via(vec![NEIGHBOUR6]),
    }];
    spec.neighbours = vec![
        NeighbourSpec {
            ip: IpAddr::V4(NEIGHBOUR4),
            mac: NEIGHBOUR_MAC,
            port: 1,
        },
        NeighbourSpec {
            ip: IpAddr::V6(NEIGHBOUR6),
            mac: NEIGHBOUR_MAC,
            port: 1,
        },
    ];
    // Existing flows: one entry per flow, rounded up to a power of two: the table then has
    // 1.5-3x that many places (3 ways a bucket), a load of at most 2/3, which its cuckoo moves
    // fill without refusing. 1M flows get the product's default size. New flows (`--miss`):
    // twice that, as the flows of the last second (the timeout) are all live.
    let per_flow = if miss { 2 } else { 1 };
    let buckets = (flows.min(1 << 22) * per_flow)
        .next_power_of_two()
        .max(1024);
    let timeout = if miss { 1 } else { 40 };
    let text = lb_lines(encap, servers, buckets, timeout).join("\n");
    let cmds = lb::cli::parse_lines(&text).map_err(|e| anyhow::anyhow!("lb lines: {e}"))?;
    let state = lb::model::LbState::new()
        .apply(&cmds)
        .map_err(|e| anyhow::anyhow!("lb lines: {e}"))?;
    spec.lb = Some(LbSpec {
        state,
        health: Default::default(),
    });
    Ok(spec)
}

/// The lb scenario's report: the engine bench's keys plus the LB figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LbSummary {
    /// The engine bench's summary (its keys appear at the top level).
    #[serde(flatten)]
    pub summary: Summary,
    /// The encapsulation.
    pub encap: EncapArg,
    /// Servers behind the VIP.
    pub servers: u32,
    /// `existing` (every flow in the flow table) or `new` (every packet a new flow).
    pub mode: String,
    /// Median run: new flows per second (with `--miss`, every packet).
    pub new_flows_per_second: f64,
    /// The ip4 scenario measured in the same session, when it ran.
    pub ip4: Option<Beside>,
}

/// A reference scenario measured in the same session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Beside {
    /// Its median cycles per packet.
    pub cycles_per_packet: f64,
    /// Its median Mpps.
    pub mpps: f64,
    /// lb / reference cycles per packet.
    pub ratio: f64,
}

impl LbSummary {
    /// The text report.
    pub fn human(&self) -> String {
        let mut s = report::human(&self.summary);
        s.push_str(&format!(
            "\n  lb ({} flows, {}, {} servers): {:.1} cycles/packet, {:.2} Mpps",
            self.mode,
            self.encap.name(),
            self.servers,
            self.summary.cycles_per_packet,
            self.summary.mpps,
        ));
        if self.mode == "new" {
            s.push_str(&format!(", {:.0} new flows/s", self.new_flows_per_second));
        }
        if let Some(b) = &self.ip4 {
            s.push_str(&format!(
                "\n  ip4 in the same session: {:.1} cycles/packet ({:.2} Mpps); lb / ip4 = {:.2}",
                b.cycles_per_packet, b.mpps, b.ratio
            ));
        }
        s
    }
}

/// `vecplane bench --scenario lb`.
pub fn run(args: &BenchArgs) -> Result<()> {
    let c = Common::new(args)?;
    let encap = args.encap.unwrap_or(EncapArg::L3dsr);
    let servers = args.servers.unwrap_or(DEFAULT_SERVERS);
    let flows = if args.miss {
        if args.flows.is_some() {
            bail!("--miss sends {MISS_FLOWS} distinct flows; leave out --flows");
        }
        MISS_FLOWS
    } else {
        args.flows.unwrap_or(DEFAULT_FLOWS)
    };
    let mode = if args.miss { "new" } else { "existing" };
    if c.progress {
        eprintln!(
            "lb: {} flows to one VIP, {servers} servers, encap {}",
            flows,
            encap.name()
        );
    }
    let base = spec(encap, flows, servers, args.miss, c.cpu)?;
    let ip4 = ScenarioSpec::build(
        Scenario::Ip4,
        args.routes.unwrap_or(Scenario::Ip4.default_routes()),
        Scenario::Ip4.default_flows(),
        c.cpu,
        args.seed,
    )?;
    let scenario = if encap.ip6_clients() {
        Scenario::Ip6
    } else {
        Scenario::Ip4
    };
    // The frame-size derivation (buffer size, MTUs, generator) of the engine scenarios.
    let sized = ScenarioSpec {
        scenario,
        routes: 1,
        flows,
        spec: base,
    };
    let mut failed = None;
    for (requested, frame_size, note) in crate::frame_sizes(args, scenario)? {
        let dp = sized.with_frame_size(frame_size)?;
        let ip4dp = ip4.with_frame_size(frame_size.max(64))?;
        let (mut runs, mut refs) = (Vec::new(), Vec::new());
        for r in 0..args.runs {
            let label = format!(
                "lb {} {frame_size} B run {}/{}",
                encap.name(),
                r + 1,
                args.runs
            );
            let res = measure::run_once(&dp, scenario, &c.settings(args, args.seconds, label))?;
            runs.push(res);
            let label = format!("ip4 {frame_size} B run {}/{}", r + 1, args.runs);
            refs.push(measure::run_once(
                &ip4dp,
                Scenario::Ip4,
                &c.settings(args, args.seconds, label),
            )?);
        }
        let cpp: Vec<f64> = refs.iter().map(|r| r.cycles_per_packet).collect();
        let beside = report::median_index(&cpp).and_then(|i| refs.get(i));
        let notes: Vec<String> = note.into_iter().collect();
        let s = report::summarize(
            c.input(args, "lb", (requested, frame_size), flows, notes),
            runs,
            vec![],
        )
        .context("no run completed")?;
        let ip4 = beside.map(|m| Beside {
            cycles_per_packet: m.cycles_per_packet,
            mpps: m.mpps,
            ratio: crate::report::ratio(s.cycles_per_packet, m.cycles_per_packet),
        });
        let out = LbSummary {
            new_flows_per_second: if args.miss { s.mpps * 1e6 } else { 0.0 },
            summary: s,
            encap,
            servers,
            mode: mode.to_string(),
            ip4,
        };
        if args.json {
            match serde_json::to_string(&out) {
                Ok(line) => println!("{line}"),
                Err(e) => failed = Some(e),
            }
        } else {
            println!("{}", out.human());
        }
    }
    if let Some(e) = failed {
        return Err(e).context("cannot write the JSON report");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encapsulation_builds_a_valid_lb_state() {
        for e in [
            EncapArg::L3dsr,
            EncapArg::Gre4,
            EncapArg::Gre6,
            EncapArg::Nat4,
            EncapArg::Nat6,
        ] {
            let s = spec(e, 1000, 100, false, 0).unwrap_or_else(|err| panic!("{e:?}: {err:#}"));
            let lb = s.lb.expect("lb");
            assert_eq!(lb.state.vips().count(), 1, "{e:?}");
        }
        assert!(spec(EncapArg::L3dsr, 10, 0, false, 0).is_err());
    }

    #[test]
    fn idle_vips_are_where_the_ip4_scenario_sends_nothing() {
        let lb = idle_vips(1000).expect("1000 VIPs");
        assert_eq!(lb.state.vips().count(), 1000);
        let ip4 = ScenarioSpec::build(Scenario::Ip4, 1000, 4096, 0, 1).expect("ip4");
        let Some(PortDriver::Memory(m)) = ip4.spec.ports.first().map(|p| &p.driver) else {
            panic!("rx0 is a memory port");
        };
        for v in lb.state.vips() {
            let p = v.spec.key.prefix;
            assert!(m.destinations.iter().all(|d| !p.contains(*d)), "{p:?}");
        }
        assert!(idle_vips(0).is_err() && idle_vips(5000).is_err());
    }
}
