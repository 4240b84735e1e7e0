//! What a reload would change: `live_diff(old, new)` compares two validated configs and lists the
//! changes the data plane can apply while running (routes, static neighbours, ICMP rate,
//! neighbour timers, bridge aging, poll modes), or refuses with every key that needs a restart,
//! naming its line in the new file. It compares only; it never applies anything.

use super::{Config, Issue};
use dataplane::ports_live::live_driver;
use dataplane::{
    BridgePolicy, DataplaneSpec, IpPolicy, NeighbourPolicy, NeighbourSpec, PollPolicy, PortDriver,
    PortSpec, RouteSpec,
};
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The changes of one route table, by prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteChanges<A> {
    /// Prefixes only the new config has (in its order).
    pub added: Vec<RouteSpec<A>>,
    /// Prefixes only the old config has (their old routes, in the old order).
    pub removed: Vec<RouteSpec<A>>,
    /// Prefixes in both whose target differs (their new routes, in the new order).
    pub changed: Vec<RouteSpec<A>>,
}

impl<A> Default for RouteChanges<A> {
    fn default() -> Self {
        RouteChanges {
            added: Vec::new(),
            removed: Vec::new(),
            changed: Vec::new(),
        }
    }
}

impl<A> RouteChanges<A> {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The changes of the static neighbours, by address. A neighbour's `port` is an index into the
/// ports of the config it comes from (the new one for `added` and `changed`); ports are
/// compared by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeighbourChanges {
    /// Addresses only the new config has.
    pub added: Vec<NeighbourSpec>,
    /// Addresses only the old config has (their old entries).
    pub removed: Vec<NeighbourSpec>,
    /// Addresses in both whose MAC or port differs (their new entries).
    pub changed: Vec<NeighbourSpec>,
}

impl NeighbourChanges {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// What a reload changes, all of it applicable while running. A policy is `Some(new)` only when
/// it differs from the old one (the whole new policy, so it can be published as one value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveDiff {
    /// IPv4 routes.
    pub routes4: RouteChanges<Ipv4Addr>,
    /// IPv6 routes.
    pub routes6: RouteChanges<Ipv6Addr>,
    /// Static neighbours.
    pub neighbours: NeighbourChanges,
    /// The ICMP error rate and burst and the IPv4 options policy.
    pub ip: Option<IpPolicy>,
    /// Neighbour timers (`capacity` and `queue_per_neighbour` are equal: they are not live).
    pub neighbour: Option<NeighbourPolicy>,
    /// Bridge MAC aging (`max_macs` is equal: it is not live).
    pub bridge: Option<BridgePolicy>,
    /// Poll modes and the adaptive sleep bound.
    pub poll: Option<PollPolicy>,
    /// Ports only the new config has (by name), in its order: added while running.
    pub ports_added: Vec<PortSpec>,
    /// Names of the ports only the old config has: removed while running.
    pub ports_removed: Vec<String>,
    /// Ports in both whose `mtu` changed: (port name, new MTU).
    pub mtus: Vec<(String, u16)>,
    /// Ports in both whose own addresses changed: (port name, all new IPv4 and IPv6
    /// addresses).
    pub addrs: Vec<(String, nodes::neighbour::OwnAddresses)>,
    /// Flow-mode bridges whose rules or groups changed: (bridge name, all new groups, all new
    /// rules), each replacing the bridge's tables as one change.
    pub flows: Vec<(String, Vec<flow::Group>, Vec<flow::Rule>)>,
    /// What happens to the load balancer when `[lb]` changed, was added or was removed.
    pub lb: Option<LbChange>,
}

/// What a reload does to the load balancer.
#[derive(Clone, Debug, PartialEq)]
pub enum LbChange {
    /// `[lb]` was added or changed: the running load balancer is made equal to this
    /// configuration as one change (VIPs the API added and the file lacks go).
    Set(Box<lb::model::LbState>),
    /// `[lb]` was removed: refused while VIPs exist (they are not deleted behind the
    /// operator's back), else the load balancer's configuration is emptied.
    Remove,
}

impl LiveDiff {
    /// The reload changes nothing.
    pub fn is_empty(&self) -> bool {
        self.routes4.is_empty()
            && self.routes6.is_empty()
            && self.neighbours.is_empty()
            && self.ip.is_none()
            && self.neighbour.is_none()
            && self.bridge.is_none()
            && self.poll.is_none()
            && self.ports_added.is_empty()
            && self.ports_removed.is_empty()
            && self.mtus.is_empty()
            && self.addrs.is_empty()
            && self.flows.is_empty()
            && self.lb.is_none()
    }
}

/// A reload that cannot be applied while running: every difference that needs a restart, each
/// naming its key and, where the new file has it, its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotLive(pub Vec<Issue>);

impl fmt::Display for NotLive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NotLive {}

/// What every refusal says can change live.
const LIVE: &str = "changes that need a restart of vecplane; live: routes (and the route file), \
                    [[neighbour]], icmp-errors-per-second, icmp-errors-burst, \
                    neighbour-reachable-seconds, neighbour-gc-seconds, bridge-age-seconds, \
                    poll-mode, poll-sleep-max-us, [lb] and its contents but its health checks \
                    and probe sources, ports' ip4, ip6 and mtu, ports added or removed (af-packet, \
                    memory, af-xdp, tap with one worker; in no bridge or cross-connect)";

/// Compare two validated configs: what a reload from `old` to `new` changes, or why it cannot
/// be applied while running (then nothing of it may be applied).
pub fn live_diff(old: &Config, new: &Config) -> Result<LiveDiff, NotLive> {
    let mut refusals = Refusals {
        new,
        issues: Vec::new(),
    };
    let DataplaneSpec {
        buffers,
        data_size,
        worker_cpu,
        workers,
        worker_cpus,
        ports,
        routes4,
        routes6,
        neighbours,
        xconnects,
        bridges,
        bridge,
        ip,
        neighbour,
        poll,
        rxq,
        punt,
        lb,
    } = &new.spec;
    let o = &old.spec;
    let dp = "[dataplane]";
    refusals.value(dp, "buffers", &o.buffers, buffers);
    refusals.value(dp, "data-size", &o.data_size, data_size);
    refusals.value(dp, "worker-cpu", &o.worker_cpu, worker_cpu);
    refusals.value(dp, "workers", &o.workers, workers);
    refusals.value(dp, "worker-cpus", &o.worker_cpus, worker_cpus);
    refusals.value(
        dp,
        "neighbour-capacity",
        &o.neighbour.capacity,
        &neighbour.capacity,
    );
    refusals.value(
        dp,
        "neighbour-queue",
        &o.neighbour.queue_per_neighbour,
        &neighbour.queue_per_neighbour,
    );
    refusals.value(dp, "bridge-max-macs", &o.bridge.max_macs, &bridge.max_macs);
    refusals.value(
        dp,
        "rxq-rebalance-seconds",
        &o.rxq.rebalance_seconds,
        &rxq.rebalance_seconds,
    );
    refusals.value(
        dp,
        "rxq-rebalance-busy-percent",
        &o.rxq.busy_percent,
        &rxq.busy_percent,
    );
    // The punt and inject rings and their token buckets are made with the workers.
    for (key, a, b) in [
        ("punt-ring-slots", o.punt.slots, punt.slots),
        ("punt-snap-bytes", o.punt.snap_bytes, punt.snap_bytes),
        ("punt-per-second", o.punt.per_second, punt.per_second),
        ("punt-burst", o.punt.burst, punt.burst),
        (
            "inject-per-second",
            o.punt.inject_per_second,
            punt.inject_per_second,
        ),
        ("inject-burst", o.punt.inject_burst, punt.inject_burst),
    ] {
        refusals.value(dp, key, &a, &b);
    }
    refusals.ports(&o.ports, ports);
    // Ports are matched by name: a port added or removed before another moves its index.
    let names = PortNames::new(&o.ports, ports);
    refusals.list(
        "[[xconnect]]",
        "xconnect",
        &names.xconnects(&o.xconnects, true),
        &names.xconnects(xconnects, false),
    );
    // A flow bridge's rules and groups change live; anything else about a bridge does not.
    let without_rules = |bs: &[dataplane::BridgeSpec]| -> Vec<dataplane::BridgeSpec> {
        bs.iter()
            .cloned()
            .map(|mut b| {
                if let Some(f) = &mut b.flow {
                    f.rules.clear();
                    f.groups.clear();
                }
                b
            })
            .collect()
    };
    refusals.list(
        "[[bridge]]",
        "bridge",
        &names.bridges(&without_rules(&o.bridges), true),
        &names.bridges(&without_rules(bridges), false),
    );
    // The LB's VIPs, servers and settings change live, and `[lb]` may come or go (the `lb`
    // node is in every graph). Health checks run in a thread started with vecplane (with
    // their probe host port), and the BGP announcer owns its liveness device: both change at
    // a restart; an absent `[lb]` has none.
    let health = |l: &Option<dataplane::LbSpec>| l.as_ref().map(|l| l.health.clone());
    if health(&o.lb).unwrap_or_default() != health(lb).unwrap_or_default() {
        refusals.refuse(
            "[lb]",
            Some("health-check"),
            "the health checks or probe sources changed".to_string(),
        );
    }
    if old.bgp != new.bgp {
        let what = match (&old.bgp, &new.bgp) {
            (None, Some(_)) => "[bgp] is added",
            (Some(_), None) => "[bgp] is removed",
            _ => "[bgp] changed",
        };
        refusals.refuse("[bgp]", None, what.to_string());
    }
    refusals.value("[api]", "tcp", &old.api.tcp, &new.api.tcp);
    refusals.value(
        "[api]",
        "token-file",
        &old.api.token_file,
        &new.api.token_file,
    );
    refusals.value(
        "[api]",
        "allow-remote",
        &old.api.allow_remote,
        &new.api.allow_remote,
    );
    if !refusals.issues.is_empty() {
        return Err(NotLive(refusals.issues));
    }

    let live_ip = *ip;
    let live_neighbour = NeighbourPolicy {
        capacity: o.neighbour.capacity,
        queue_per_neighbour: o.neighbour.queue_per_neighbour,
        ..*neighbour
    };
    let live_bridge = BridgePolicy {
        max_macs: o.bridge.max_macs,
        ..*bridge
    };
    Ok(LiveDiff {
        routes4: route_changes(&o.routes4, routes4),
        routes6: route_changes(&o.routes6, routes6),
        neighbours: names.neighbour_changes(&o.neighbours, neighbours),
        ip: (live_ip != o.ip).then_some(live_ip),
        neighbour: (live_neighbour != o.neighbour).then_some(live_neighbour),
        bridge: (live_bridge != o.bridge).then_some(live_bridge),
        poll: (*poll != o.poll).then(|| poll.clone()),
        ports_added: ports
            .iter()
            .filter(|p| !o.ports.iter().any(|q| q.name == p.name))
            .cloned()
            .collect(),
        ports_removed: o
            .ports
            .iter()
            .filter(|p| !ports.iter().any(|q| q.name == p.name))
            .map(|p| p.name.clone())
            .collect(),
        addrs: names
            .kept(&o.ports, ports)
            .filter(|(a, b)| a.ip4 != b.ip4 || a.ip6 != b.ip6)
            .map(|(_, b)| (b.name.clone(), (b.ip4.clone(), b.ip6.clone())))
            .collect(),
        flows: o
            .bridges
            .iter()
            .zip(bridges)
            .filter_map(|(a, b)| match (&a.flow, &b.flow) {
                (Some(fa), Some(fb)) if fa.rules != fb.rules || fa.groups != fb.groups => {
                    Some((b.name.clone(), fb.groups.clone(), fb.rules.clone()))
                }
                _ => None,
            })
            .collect(),
        lb: match (&o.lb, lb) {
            (Some(a), Some(b)) if a.state != b.state => {
                Some(LbChange::Set(Box::new(b.state.clone())))
            }
            (None, Some(b)) => Some(LbChange::Set(Box::new(b.state.clone()))),
            (Some(_), None) => Some(LbChange::Remove),
            _ => None,
        },
        mtus: names
            .kept(&o.ports, ports)
            .filter(|(a, b)| a.mtu != b.mtu)
            .map(|(_, b)| (b.name.clone(), b.mtu))
            .collect(),
    })
}

/// Collects the differences that are not live, with lines from the new config.
struct Refusals<'c> {
    new: &'c Config,
    issues: Vec<Issue>,
}

impl Refusals<'_> {
    /// The line of `section.key` in the new file, else of `section`, else 0.
    fn line(&self, section: &str, key: Option<&str>) -> usize {
        key.and_then(|k| self.new.lines.get(&format!("{section}.{k}")))
            .or_else(|| self.new.lines.get(section))
            .copied()
            .unwrap_or(0)
    }

    fn refuse(&mut self, section: &str, key: Option<&str>, what: String) {
        self.issues.push(Issue {
            file: self.new.label.clone(),
            line: self.line(section, key),
            section: section.to_string(),
            field: key.map(str::to_string),
            message: format!("{what}; not applied: {LIVE}"),
        });
    }

    fn value<T: PartialEq + fmt::Debug>(&mut self, section: &str, key: &str, old: &T, new: &T) {
        if old != new {
            self.refuse(
                section,
                Some(key),
                format!("changed from {} to {}", show(old), show(new)),
            );
        }
    }

    /// Ports are matched by name. One in both keeps its MAC and driver settings; one added or
    /// removed has a driver a running data plane can add and remove.
    fn ports(&mut self, old: &[PortSpec], new: &[PortSpec]) {
        for (i, n) in new.iter().enumerate() {
            let section = format!("[[port]] #{}", i + 1);
            let port = |what: &str| format!("port `{}`: {what}", n.name);
            let Some(o) = old.iter().find(|o| o.name == n.name) else {
                if !live_driver(&n.driver, self.new.spec.workers) {
                    let key = if matches!(n.driver, PortDriver::Pcap { .. }) {
                        "rx"
                    } else {
                        "driver"
                    };
                    self.refuse(
                        &section,
                        Some(key),
                        port(&format!(
                            "is added, and its driver cannot be added while running \
                             (accepted then: {})",
                            dataplane::ports_live::LIVE_DRIVERS
                        )),
                    );
                }
                continue;
            };
            if o.mac != n.mac {
                self.refuse(&section, Some("mac"), port("its mac changed"));
            }
            if o.driver != n.driver {
                let key = driver_key(&o.driver, &n.driver);
                self.refuse(&section, Some(key), port(&format!("its `{key}` changed")));
            }
        }
        for o in old.iter().filter(|o| !new.iter().any(|n| n.name == o.name)) {
            if !live_driver(&o.driver, self.new.spec.workers) {
                self.issues.push(Issue {
                    file: self.new.label.clone(),
                    line: 0,
                    section: String::new(),
                    field: None,
                    message: format!(
                        "port `{}` is removed, and its driver cannot be removed while running \
                         (accepted then: {}); not applied: {LIVE}",
                        o.name,
                        dataplane::ports_live::LIVE_DRIVERS
                    ),
                });
            }
        }
    }

    /// Xconnects and bridges: any difference (added, removed, other members) needs a restart.
    fn list<T: PartialEq>(&mut self, header: &str, what: &str, old: &[T], new: &[T]) {
        if old == new {
            return;
        }
        let first = old
            .iter()
            .zip(new)
            .position(|(o, n)| o != n)
            .unwrap_or(old.len().min(new.len()));
        let section = format!("{header} #{}", first + 1);
        let message = if new.len() > old.len() && first == old.len() {
            format!("{what} {} is added", first + 1)
        } else if new.len() < old.len() && first == new.len() {
            format!("{what} {} is removed", first + 1)
        } else {
            format!("{what} {} changed (its name, ports or settings)", first + 1)
        };
        if first < new.len() {
            self.refuse(&section, None, message);
        } else {
            self.issues.push(Issue {
                file: self.new.label.clone(),
                line: 0,
                section: String::new(),
                field: None,
                message: format!("{message}; not applied: {LIVE}"),
            });
        }
    }
}

/// A value as messages show it: strings and lists as written, options without `Some`.
fn show<T: fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    if s == "None" {
        "(unset)".to_string()
    } else if let Some(inner) = s.strip_prefix("Some(").and_then(|r| r.strip_suffix(')')) {
        inner.to_string()
    } else {
        s
    }
}

/// The config key of the first driver setting that differs.
fn driver_key(old: &PortDriver, new: &PortDriver) -> &'static str {
    match (old, new) {
        (PortDriver::Pcap { rx: a, .. }, PortDriver::Pcap { rx: b, .. }) if a != b => "rx",
        (PortDriver::Pcap { .. }, PortDriver::Pcap { .. }) => "tx",
        (PortDriver::AfPacket { interface: a, .. }, PortDriver::AfPacket { interface: b, .. })
            if a != b =>
        {
            "interface"
        }
        (PortDriver::AfPacket { .. }, PortDriver::AfPacket { .. }) => "fanout",
        (PortDriver::AfXdp { interface: a, .. }, PortDriver::AfXdp { interface: b, .. })
            if a != b =>
        {
            "interface"
        }
        (PortDriver::AfXdp { queues: a, .. }, PortDriver::AfXdp { queues: b, .. }) if a != b => {
            "queues"
        }
        (PortDriver::AfXdp { .. }, PortDriver::AfXdp { .. }) => "xdp-mode",
        (PortDriver::Tap { name: a, .. }, PortDriver::Tap { name: b, .. }) if a != b => "interface",
        (PortDriver::Tap { vnet_hdr: a, .. }, PortDriver::Tap { vnet_hdr: b, .. }) if a != b => {
            "vnet-hdr"
        }
        (PortDriver::Tap { .. }, PortDriver::Tap { .. }) => "offloads",
        (PortDriver::VhostUser { socket: a, .. }, PortDriver::VhostUser { socket: b, .. })
            if a != b =>
        {
            "socket"
        }
        (PortDriver::VhostUser { queues: a, .. }, PortDriver::VhostUser { queues: b, .. })
            if a != b =>
        {
            "queues"
        }
        (PortDriver::VhostUser { mode: a, .. }, PortDriver::VhostUser { mode: b, .. })
            if a != b =>
        {
            "socket-mode"
        }
        (PortDriver::VhostUser { access: a, .. }, PortDriver::VhostUser { access: b, .. })
            if a.permissions != b.permissions =>
        {
            "socket-permissions"
        }
        (PortDriver::VhostUser { .. }, PortDriver::VhostUser { .. }) => "socket-group",
        (PortDriver::Vxlan(a), PortDriver::Vxlan(b)) => {
            if a.local != b.local {
                "local"
            } else if a.remote != b.remote {
                "remote"
            } else if a.vni != b.vni {
                "vni"
            } else if a.dst_port != b.dst_port {
                "dst-port"
            } else {
                "udp-checksum"
            }
        }
        (PortDriver::Memory(a), PortDriver::Memory(b)) => {
            if a.frame_size != b.frame_size {
                "frame-size"
            } else if a.flows != b.flows {
                "flows"
            } else if a.dst_mac != b.dst_mac {
                "dst-mac"
            } else if a.src_mac != b.src_mac {
                "src-mac"
            } else if a.vlan != b.vlan {
                "vlan"
            } else if a.src_ip != b.src_ip {
                "src-ip"
            } else if a.destinations != b.destinations {
                "destinations"
            } else if a.limit != b.limit {
                "limit"
            } else {
                "generate"
            }
        }
        _ => "driver",
    }
}

/// Routes added, removed and changed, by (prefix, length).
fn route_changes<A: Copy + Eq + Hash>(
    old: &[RouteSpec<A>],
    new: &[RouteSpec<A>],
) -> RouteChanges<A> {
    let mut out = RouteChanges::default();
    if old == new {
        return out;
    }
    let index: HashMap<(A, u8), usize> = old
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.prefix, r.len), i))
        .collect();
    let mut kept = vec![false; old.len()];
    for r in new {
        match index.get(&(r.prefix, r.len)) {
            Some(&i) => {
                kept[i] = true;
                if old[i].target != r.target {
                    out.changed.push(r.clone());
                }
            }
            None => out.added.push(r.clone()),
        }
    }
    out.removed = old
        .iter()
        .zip(&kept)
        .filter(|(_, k)| !**k)
        .map(|(r, _)| r.clone())
        .collect();
    out
}

/// The ports of two configs numbered by name: the old ports keep their indices, and a port
/// only the new config has gets the next one. References to ports (neighbours, cross-connects,
/// bridge members) compare equal in this numbering when they name the same port, although a
/// port added or removed before it moved its index.
struct PortNames {
    /// By new index: the port's number here.
    new: Vec<usize>,
}

impl PortNames {
    fn new(old: &[PortSpec], new: &[PortSpec]) -> PortNames {
        let mut next = old.len();
        let numbers = new
            .iter()
            .map(|n| {
                old.iter()
                    .position(|o| o.name == n.name)
                    .unwrap_or_else(|| {
                        next += 1;
                        next - 1
                    })
            })
            .collect();
        PortNames { new: numbers }
    }

    /// Port `i` of the old (`old`) or new config, numbered.
    fn number(&self, i: usize, old: bool) -> usize {
        if old {
            i
        } else {
            self.new.get(i).copied().unwrap_or(usize::MAX)
        }
    }

    /// The ports in both configs: (old, new).
    fn kept<'a>(
        &self,
        old: &'a [PortSpec],
        new: &'a [PortSpec],
    ) -> impl Iterator<Item = (&'a PortSpec, &'a PortSpec)> + 'a {
        old.iter()
            .filter_map(move |o| new.iter().find(|n| n.name == o.name).map(|n| (o, n)))
    }

    fn xconnects(&self, xs: &[dataplane::XconnectSpec], old: bool) -> Vec<dataplane::XconnectSpec> {
        xs.iter()
            .map(|x| dataplane::XconnectSpec {
                from: self.number(x.from, old),
                to: self.number(x.to, old),
                dst_mac: x.dst_mac,
            })
            .collect()
    }

    fn bridges(&self, bs: &[dataplane::BridgeSpec], old: bool) -> Vec<dataplane::BridgeSpec> {
        bs.iter()
            .cloned()
            .map(|mut b| {
                for m in &mut b.ports {
                    m.port = self.number(m.port, old);
                }
                if let Some(f) = &mut b.flow {
                    for m in &mut f.ports {
                        m.port = self.number(m.port, old);
                    }
                }
                b
            })
            .collect()
    }

    /// Static neighbours added, removed and changed, by address (`added` and `changed` with
    /// their ports as the new config numbers them, `removed` as the old one does).
    fn neighbour_changes(&self, old: &[NeighbourSpec], new: &[NeighbourSpec]) -> NeighbourChanges {
        let mut out = NeighbourChanges::default();
        let index: HashMap<IpAddr, &NeighbourSpec> = old.iter().map(|n| (n.ip, n)).collect();
        for n in new {
            match index.get(&n.ip) {
                Some(o) if o.mac != n.mac || o.port != self.number(n.port, false) => {
                    out.changed.push(n.clone())
                }
                Some(_) => {}
                None => out.added.push(n.clone()),
            }
        }
        let now: HashMap<IpAddr, ()> = new.iter().map(|n| (n.ip, ())).collect();
        out.removed = old
            .iter()
            .filter(|o| !now.contains_key(&o.ip))
            .cloned()
            .collect();
        out
    }
}
