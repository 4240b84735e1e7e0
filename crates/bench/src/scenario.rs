//! Scenarios: the addressing plan and traffic mix of each benchmark, turned into a
//! `DataplaneSpec` with two memory ports (`rx0` generates, `tx0` is a sink). It owns the choice of
//! routes, flows and frame sizes; it never runs the data plane and never measures anything.

use anyhow::{bail, Context, Result};
use dataplane::{
    DataplaneSpec, MemoryPortSpec, NeighbourSpec, PortDriver, PortSpec, RouteSpec, RouteTarget,
    XconnectSpec,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What is benchmarked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Cross-connect rx0 -> tx0 rewriting the destination MAC (like testpmd's mac mode).
    L2xc,
    /// IPv4 forwarding through a large random FIB.
    Ip4,
    /// IPv6 forwarding through a large random FIB.
    Ip6,
}

impl Scenario {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::L2xc => "l2xc",
            Scenario::Ip4 => "ip4",
            Scenario::Ip6 => "ip6",
        }
    }

    /// Routes when `--routes` is not given.
    pub fn default_routes(self) -> usize {
        match self {
            Scenario::L2xc => 0,
            Scenario::Ip4 => 1_000_000,
            Scenario::Ip6 => 100_000,
        }
    }

    /// Flows when `--flows` is not given.
    pub fn default_flows(self) -> u32 {
        match self {
            Scenario::L2xc => 1,
            Scenario::Ip4 | Scenario::Ip6 => 65_536,
        }
    }

    /// Smallest frame (with FCS) that holds this scenario's UDP packet.
    pub fn min_frame_size(self) -> usize {
        match self {
            Scenario::L2xc | Scenario::Ip4 => 64,
            // 14 + 40 + 8 = 62 bytes + FCS do not fit in 64; RFC 5180 uses 78 as the smallest
            // IPv6 test frame.
            Scenario::Ip6 => 78,
        }
    }

    /// Whether it has a FIB worth reporting.
    pub fn has_fib(self) -> bool {
        !matches!(self, Scenario::L2xc)
    }
}

/// Frame sizes of `--sweep` (64 is replaced by the scenario's minimum when larger).
pub const SWEEP_SIZES: [usize; 8] = [64, 128, 256, 512, 768, 1024, 1280, 1518];

pub use planner::input::MAX_FRAME_SIZE;

/// MAC of port rx0.
pub const RX0_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// MAC of port tx0.
pub const TX0_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// MAC of the (simulated) host that sends into rx0.
pub const SENDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
/// MAC of the neighbour behind tx0 (the next hop of every route, the l2xc destination).
pub const NEIGHBOUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x02];

const RX0_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SENDER_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const TX0_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
/// The next hop of every IPv4 route (the neighbour behind tx0).
pub const NEIGHBOUR_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
/// RFC 5180's benchmarking prefix 2001:2::/48 holds the bench's own IPv6 subnets.
const RX0_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const SENDER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
const TX0_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 1);
const NEIGHBOUR_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 2);

/// The frame size actually used for `requested`, and a note when it had to be raised.
pub fn effective_frame_size(scenario: Scenario, requested: usize) -> (usize, Option<String>) {
    let min = scenario.min_frame_size();
    if requested < min {
        let note = format!(
            "{}: a {requested}-byte frame cannot hold the scenario's UDP packet; using {min} bytes \
             (RFC 5180's smallest IPv6 test frame)",
            scenario.name()
        );
        (min, Some(note))
    } else {
        (requested, None)
    }
}

/// Check a requested frame size against what memory ports can generate.
pub fn check_frame_size(size: usize) -> Result<()> {
    if !(64..=MAX_FRAME_SIZE).contains(&size) {
        bail!("frame size {size} is outside 64..={MAX_FRAME_SIZE} bytes (sizes include the FCS)");
    }
    Ok(())
}

/// A scenario's data plane, independent of frame size: build it once, then derive one spec per
/// frame size with [`ScenarioSpec::with_frame_size`].
#[derive(Clone, Debug)]
pub struct ScenarioSpec {
    /// The scenario.
    pub scenario: Scenario,
    /// Routes installed (beyond connected, host and local ones).
    pub routes: usize,
    /// Distinct flows generated.
    pub flows: u32,
    /// The spec, with frame size 64 until [`ScenarioSpec::with_frame_size`] sets it.
    pub spec: DataplaneSpec,
}

pub(crate) fn memory_port(
    name: &str,
    mac: [u8; 6],
    generate: bool,
    src_ip: IpAddr,
    destinations: Vec<IpAddr>,
    flows: u32,
) -> PortSpec {
    PortSpec {
        name: name.to_string(),
        mac,
        mtu: 1500,
        ip4: Vec::new(),
        ip6: Vec::new(),
        driver: PortDriver::Memory(MemoryPortSpec {
            frame_size: 64,
            flows,
            dst_mac: RX0_MAC,
            src_mac: SENDER_MAC,
            vlan: None,
            src_ip,
            destinations,
            limit: None,
            generate,
        }),
    }
}

/// Seed of the flow destinations, derived from the route seed so both change together.
fn flow_seed(seed: u64) -> u64 {
    seed ^ 0x666c_6f77_7365_6564
}

/// `flows` IPv4 destinations inside randomly chosen routes, outside 198.18.0.0/15 (the bench's
/// own subnets, where a connected route would win).
fn ip4_destinations(routes: &[(u32, u8, u32)], flows: u32, seed: u64) -> Vec<IpAddr> {
    if routes.is_empty() {
        return vec![IpAddr::V4(NEIGHBOUR_IP4)];
    }
    let mut rng = fib::SplitMix64::new(flow_seed(seed));
    let own = |a: u32| a >> 17 == u32::from(Ipv4Addr::new(198, 18, 0, 0)) >> 17;
    let mut out = Vec::with_capacity(flows as usize);
    for _ in 0..flows {
        let mut addr = u32::from(NEIGHBOUR_IP4);
        for _ in 0..64 {
            let (prefix, len, _) = routes[rng.below(routes.len() as u64) as usize];
            let a = fib::ip4_address_in(prefix, len, rng.next());
            if !own(a) {
                addr = a;
                break;
            }
        }
        out.push(IpAddr::V4(Ipv4Addr::from(addr)));
    }
    out
}

/// `flows` IPv6 destinations inside randomly chosen routes, outside 2001:2::/48.
fn ip6_destinations(routes: &[(u128, u8, u32)], flows: u32, seed: u64) -> Vec<IpAddr> {
    if routes.is_empty() {
        return vec![IpAddr::V6(NEIGHBOUR_IP6)];
    }
    let mut rng = fib::SplitMix64::new(flow_seed(seed));
    let own = |a: u128| a >> 80 == u128::from(RX0_IP6) >> 80;
    let mut out = Vec::with_capacity(flows as usize);
    for _ in 0..flows {
        let mut addr = u128::from(NEIGHBOUR_IP6);
        for _ in 0..64 {
            let (prefix, len, _) = routes[rng.below(routes.len() as u64) as usize];
            let a = fib::ip6_address_in(prefix, len, rng.next());
            if !own(a) {
                addr = a;
                break;
            }
        }
        out.push(IpAddr::V6(Ipv6Addr::from(addr)));
    }
    out
}

impl ScenarioSpec {
    /// Build the data plane of `scenario` with `routes` random routes (seeded by `seed`) and
    /// `flows` flows, its worker pinned to `cpu`.
    pub fn build(
        scenario: Scenario,
        routes: usize,
        flows: u32,
        cpu: usize,
        seed: u64,
    ) -> Result<ScenarioSpec> {
        if flows == 0 {
            bail!("--flows must be at least 1");
        }
        let mut spec = DataplaneSpec {
            buffers: 16384,
            worker_cpu: Some(cpu),
            ..DataplaneSpec::default()
        };
        let routes = if scenario == Scenario::L2xc {
            0
        } else {
            routes
        };
        match scenario {
            Scenario::L2xc => {
                let dst = vec![IpAddr::V4(NEIGHBOUR_IP4)];
                spec.ports = vec![
                    memory_port("rx0", RX0_MAC, true, IpAddr::V4(SENDER_IP4), dst, flows),
                    memory_port("tx0", TX0_MAC, false, IpAddr::V4(TX0_IP4), vec![], 1),
                ];
                spec.xconnects = vec![XconnectSpec {
                    from: 0,
                    to: 1,
                    dst_mac: Some(NEIGHBOUR_MAC),
                }];
            }
            Scenario::Ip4 => {
                let table = fib::random_ip4_routes(routes, seed, 1);
                let dst = ip4_destinations(&table, flows, seed);
                let nh = vec![NEIGHBOUR_IP4];
                spec.routes4 = table
                    .iter()
                    .map(|&(prefix, len, _)| RouteSpec {
                        prefix: Ipv4Addr::from(prefix),
                        len,
                        target: RouteTarget::Via(nh.clone()),
                    })
                    .collect();
                spec.ports = vec![
                    memory_port("rx0", RX0_MAC, true, IpAddr::V4(SENDER_IP4), dst, flows),
                    memory_port("tx0", TX0_MAC, false, IpAddr::V4(TX0_IP4), vec![], 1),
                ];
                spec.ports[0].ip4 = vec![(RX0_IP4, 24)];
                spec.ports[1].ip4 = vec![(TX0_IP4, 24)];
                spec.neighbours = vec![NeighbourSpec {
                    ip: IpAddr::V4(NEIGHBOUR_IP4),
                    mac: NEIGHBOUR_MAC,
                    port: 1,
                }];
            }
            Scenario::Ip6 => {
                let table = fib::random_ip6_routes(routes, seed, 1);
                let dst = ip6_destinations(&table, flows, seed);
                let nh = vec![NEIGHBOUR_IP6];
                spec.routes6 = table
                    .iter()
                    .map(|&(prefix, len, _)| RouteSpec {
                        prefix: Ipv6Addr::from(prefix),
                        len,
                        target: RouteTarget::Via(nh.clone()),
                    })
                    .collect();
                spec.ports = vec![
                    memory_port("rx0", RX0_MAC, true, IpAddr::V6(SENDER_IP6), dst, flows),
                    memory_port("tx0", TX0_MAC, false, IpAddr::V6(TX0_IP6), vec![], 1),
                ];
                spec.ports[0].ip6 = vec![(RX0_IP6, 64)];
                spec.ports[1].ip6 = vec![(TX0_IP6, 64)];
                spec.neighbours = vec![NeighbourSpec {
                    ip: IpAddr::V6(NEIGHBOUR_IP6),
                    mac: NEIGHBOUR_MAC,
                    port: 1,
                }];
            }
        }
        // The sink generates nothing, but its (unused) generator settings must still be valid.
        if let Some(PortDriver::Memory(m)) = spec.ports.get_mut(1).map(|p| &mut p.driver) {
            m.destinations = vec![m.src_ip];
        }
        Ok(ScenarioSpec {
            scenario,
            routes,
            flows,
            spec,
        })
    }

    /// The spec for frames of `frame_size` bytes (with FCS): generator frame size, buffer data
    /// size and port MTUs large enough for it.
    pub fn with_frame_size(&self, frame_size: usize) -> Result<DataplaneSpec> {
        check_frame_size(frame_size)?;
        let mut spec = self.spec.clone();
        let data = frame_size.div_ceil(64) * 64;
        spec.data_size = u16::try_from(data.max(2048)).context("frame size too large")?;
        // Ethernet header + FCS = 18 bytes beyond the IP packet.
        let mtu = u16::try_from((frame_size - 18).max(1500)).context("frame size too large")?;
        for p in &mut spec.ports {
            p.mtu = mtu;
            if let PortDriver::Memory(m) = &mut p.driver {
                m.frame_size = frame_size;
            }
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip6_frames_are_raised_to_78() {
        assert_eq!(effective_frame_size(Scenario::Ip6, 64).0, 78);
        assert!(effective_frame_size(Scenario::Ip6, 64).1.is_some());
        assert_eq!(effective_frame_size(Scenario::Ip6, 128), (128, None));
        assert_eq!(effective_frame_size(Scenario::Ip4, 64), (64, None));
    }

    #[test]
    fn destinations_avoid_own_subnets_and_are_deterministic() {
        let routes = fib::random_ip4_routes(1000, 7, 1);
        let a = ip4_destinations(&routes, 500, 7);
        assert_eq!(a, ip4_destinations(&routes, 500, 7));
        assert_eq!(a.len(), 500);
        for d in &a {
            let IpAddr::V4(v) = d else { panic!("family") };
            assert!(!(v.octets()[0] == 198 && (v.octets()[1] & 0xfe) == 18));
        }
        let routes6 = fib::random_ip6_routes(1000, 7, 1);
        assert_eq!(ip6_destinations(&routes6, 100, 7).len(), 100);
    }

    #[test]
    fn frame_size_sets_buffers_and_mtu() {
        let s = ScenarioSpec::build(Scenario::L2xc, 0, 1, 0, 1).expect("spec");
        let spec = s.with_frame_size(9000).expect("9000");
        assert!(usize::from(spec.data_size) >= 9000);
        assert_eq!(spec.ports[1].mtu, 8982);
        assert!(s.with_frame_size(60).is_err());
        assert_eq!(s.with_frame_size(64).expect("64").data_size, 2048);
    }
}
