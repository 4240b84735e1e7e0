//! The A - R - B topology: three network namespaces joined by two veth pairs (A0 <-> Ra and
//! Rb <-> B0), with R as a kernel IPv4/IPv6 router, a Linux bridge, or left to a data plane (Ra
//! and Rb up without addresses). It owns building, configuring and deleting one topology and
//! running commands inside it; it never touches anything outside its own namespaces except the
//! scratch directory it creates, and everything it made is deleted on drop (or by the signal
//! handlers of [`crate::cleanup`]).

use crate::cleanup;
use crate::cmd::{self, in_ns, run_bounded, run_ok, Spawned, DEFAULT_TIMEOUT};
use crate::names::{Names, DEFAULT_PREFIX};
use anyhow::{bail, Context, Result};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// Fixed addresses of the topology (all from 198.18.0.0/15 and 2001:db8::/32).
pub mod addr {
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// A's IPv4 address (prefix length 24).
    pub const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
    /// R's IPv4 address towards A (A's gateway).
    pub const RA4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
    /// R's IPv4 address towards B (B's gateway).
    pub const RB4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
    /// B's IPv4 address when R routes.
    pub const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
    /// B's IPv4 address when R bridges (A's subnet).
    pub const B4_BRIDGED: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 3);
    /// IPv4 prefix length of every subnet.
    pub const LEN4: u8 = 24;

    /// A's IPv6 address (prefix length 64).
    pub const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
    /// R's IPv6 address towards A.
    pub const RA6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
    /// R's IPv6 address towards B.
    pub const RB6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);
    /// B's IPv6 address when R routes.
    pub const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);
    /// B's IPv6 address when R bridges.
    pub const B6_BRIDGED: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 3);
    /// IPv6 prefix length of every subnet.
    pub const LEN6: u8 = 64;

    /// MAC of A0.
    pub const MAC_A0: &str = "02:00:00:00:01:02";
    /// MAC of Ra (and of the data plane's port on it).
    pub const MAC_RA: &str = "02:00:00:00:01:01";
    /// MAC of Rb (and of the data plane's port on it).
    pub const MAC_RB: &str = "02:00:00:00:02:01";
    /// MAC of B0.
    pub const MAC_B0: &str = "02:00:00:00:02:02";
}

/// How A and B are addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// Two subnets joined by a router: A 198.18.1.2/24 via 198.18.1.1, B 198.18.2.2/24 via
    /// 198.18.2.1 (and the same in 2001:db8:1::/64, 2001:db8:2::/64).
    Routed,
    /// One subnet across a bridge: A 198.18.1.2/24, B 198.18.1.3/24 (2001:db8:1::2, ::3).
    Bridged,
}

/// What R is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The kernel forwards IPv4 and IPv6 between Ra (198.18.1.1) and Rb (198.18.2.1).
    KernelRouter,
    /// A Linux bridge in R holds Ra and Rb.
    KernelBridge,
    /// Ra and Rb are up with no addresses (IPv6 off on them, so the kernel stays silent) for a
    /// data plane to own; A and B are addressed for a router or a bridge. A0 and B0 compute
    /// their checksums and segment in software (tx offloads off) so every frame a packet
    /// socket sees is complete and at most MTU-sized; GRO is off on Ra and Rb.
    Dataplane(Addressing),
}

impl Mode {
    /// How A and B are addressed in this mode.
    pub fn addressing(self) -> Addressing {
        match self {
            Mode::KernelRouter => Addressing::Routed,
            Mode::KernelBridge => Addressing::Bridged,
            Mode::Dataplane(a) => a,
        }
    }
}

/// One of the three hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// Host A (sender side).
    A,
    /// The router / bridge.
    R,
    /// Host B (receiver side).
    B,
}

/// Interface counters (from `ip -s -j link`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmit drops.
    pub tx_dropped: u64,
}

/// Parse the output of `ip -s -j link show dev X` (a one-element JSON array).
pub fn parse_link_stats(json: &str) -> Result<LinkStats> {
    let v: serde_json::Value =
        serde_json::from_str(json).context("`ip -j -s link` printed something that is not JSON")?;
    let link = v
        .as_array()
        .and_then(|a| a.first())
        .context("`ip -j -s link` listed no interface")?;
    let stats = link
        .get("stats64")
        .or_else(|| link.get("stats"))
        .context("`ip -j -s link` printed no statistics")?;
    let get = |dir: &str, key: &str| -> Result<u64> {
        stats
            .get(dir)
            .and_then(|d| d.get(key))
            .and_then(|x| x.as_u64())
            .with_context(|| format!("`ip -j -s link`: no {dir}.{key}"))
    };
    Ok(LinkStats {
        rx_packets: get("rx", "packets")?,
        rx_bytes: get("rx", "bytes")?,
        rx_dropped: get("rx", "dropped")?,
        tx_packets: get("tx", "packets")?,
        tx_bytes: get("tx", "bytes")?,
        tx_dropped: get("tx", "dropped")?,
    })
}

/// One A - R - B topology; dropping it deletes it.
#[derive(Debug)]
pub struct Topology {
    names: Names,
    mode: Mode,
    deleted: bool,
}

impl Topology {
    /// Build a topology in `mode` with the default prefix (deleting leftovers of dead runs with
    /// that prefix first).
    pub fn build(mode: Mode) -> Result<Topology> {
        Topology::build_with_prefix(DEFAULT_PREFIX, mode)
    }

    /// Build a topology whose names start with `prefix` (1..=4 of `[a-z0-9]`).
    pub fn build_with_prefix(prefix: &str, mode: Mode) -> Result<Topology> {
        if let Some(why) = cmd::missing_prerequisite(&["ip", "ethtool"]) {
            bail!("cannot build a network topology: {why}");
        }
        cleanup::install_cleanup_handlers()?;
        cleanup::delete_leftovers(prefix);
        let names = Names::next(prefix)?;
        // From here on, Drop deletes whatever was made, also when a step fails.
        let t = Topology {
            names,
            mode,
            deleted: false,
        };
        t.setup()
            .with_context(|| format!("cannot build the {mode:?} topology"))?;
        Ok(t)
    }

    fn setup(&self) -> Result<()> {
        let n = &self.names;
        cleanup::create_dir(&n.dir)?;
        for ns in n.namespaces() {
            cleanup::create_namespace(ns)?;
            // Addresses must be usable at once: no duplicate address detection.
            for conf in ["all", "default"] {
                cmd::write_sysctl(ns, &format!("net/ipv6/conf/{conf}/accept_dad"), "0")?;
                cmd::write_sysctl(ns, &format!("net/ipv6/conf/{conf}/dad_transmits"), "0")?;
            }
            self.ip(ns, &["link", "set", "lo", "up"])?;
        }
        let (a, r, b) = (&n.ns_a, &n.ns_r, &n.ns_b);
        for (x, x_ns, x_mac, y, y_ns, y_mac) in [
            (&n.a0, a, addr::MAC_A0, &n.ra, r, addr::MAC_RA),
            (&n.b0, b, addr::MAC_B0, &n.rb, r, addr::MAC_RB),
        ] {
            run_ok(&[
                "ip", "link", "add", x, "address", x_mac, "netns", x_ns, "type", "veth", "peer",
                "name", y, "address", y_mac, "netns", y_ns,
            ])?;
        }
        let addressing = self.mode.addressing();
        // Hosts: addresses (no DAD), routes, static neighbours for whoever they talk to.
        let (b4, b6) = match addressing {
            Addressing::Routed => (addr::B4, addr::B6),
            Addressing::Bridged => (addr::B4_BRIDGED, addr::B6_BRIDGED),
        };
        for (ns, dev, ip4, ip6) in [(a, &n.a0, addr::A4, addr::A6), (b, &n.b0, b4, b6)] {
            self.ip(
                ns,
                &["addr", "add", &format!("{ip4}/{}", addr::LEN4), "dev", dev],
            )?;
            self.ip(
                ns,
                &[
                    "-6",
                    "addr",
                    "add",
                    &format!("{ip6}/{}", addr::LEN6),
                    "dev",
                    dev,
                    "nodad",
                ],
            )?;
            self.ip(ns, &["link", "set", dev, "up"])?;
        }
        match addressing {
            Addressing::Routed => {
                for (ns, dev, gw4, gw6, mac) in [
                    (a, &n.a0, addr::RA4, addr::RA6, addr::MAC_RA),
                    (b, &n.b0, addr::RB4, addr::RB6, addr::MAC_RB),
                ] {
                    self.neigh(ns, &gw4.to_string(), mac, dev)?;
                    self.neigh(ns, &gw6.to_string(), mac, dev)?;
                    self.ip(ns, &["route", "add", "default", "via", &gw4.to_string()])?;
                    self.ip(
                        ns,
                        &["-6", "route", "add", "default", "via", &gw6.to_string()],
                    )?;
                }
            }
            Addressing::Bridged => {
                self.neigh(a, &b4.to_string(), addr::MAC_B0, &n.a0)?;
                self.neigh(a, &b6.to_string(), addr::MAC_B0, &n.a0)?;
                self.neigh(b, &addr::A4.to_string(), addr::MAC_A0, &n.b0)?;
                self.neigh(b, &addr::A6.to_string(), addr::MAC_A0, &n.b0)?;
            }
        }
        match self.mode {
            Mode::KernelRouter => {
                for (dev, ip4, ip6) in
                    [(&n.ra, addr::RA4, addr::RA6), (&n.rb, addr::RB4, addr::RB6)]
                {
                    self.ip(
                        r,
                        &["addr", "add", &format!("{ip4}/{}", addr::LEN4), "dev", dev],
                    )?;
                    self.ip(
                        r,
                        &[
                            "-6",
                            "addr",
                            "add",
                            &format!("{ip6}/{}", addr::LEN6),
                            "dev",
                            dev,
                            "nodad",
                        ],
                    )?;
                    self.ip(r, &["link", "set", dev, "up"])?;
                }
                self.neigh(r, &addr::A4.to_string(), addr::MAC_A0, &n.ra)?;
                self.neigh(r, &addr::A6.to_string(), addr::MAC_A0, &n.ra)?;
                self.neigh(r, &addr::B4.to_string(), addr::MAC_B0, &n.rb)?;
                self.neigh(r, &addr::B6.to_string(), addr::MAC_B0, &n.rb)?;
                cmd::write_sysctl(r, "net/ipv4/ip_forward", "1")?;
                cmd::write_sysctl(r, "net/ipv6/conf/all/forwarding", "1")?;
            }
            Mode::KernelBridge => {
                self.ip(
                    r,
                    &[
                        "link",
                        "add",
                        "name",
                        &n.br,
                        "type",
                        "bridge",
                        "stp_state",
                        "0",
                        "forward_delay",
                        "0",
                    ],
                )?;
                for dev in [&n.ra, &n.rb] {
                    self.ip(r, &["link", "set", dev, "master", &n.br])?;
                    self.ip(r, &["link", "set", dev, "up"])?;
                }
                self.ip(r, &["link", "set", &n.br, "up"])?;
            }
            Mode::Dataplane(_) => {
                for dev in [&n.ra, &n.rb] {
                    cmd::write_sysctl(r, &format!("net/ipv6/conf/{dev}/disable_ipv6"), "1")?;
                    self.ip(r, &["link", "set", dev, "up"])?;
                    self.ethtool_k(Host::R, dev, &[("gro", false)])?;
                }
                for (host, dev) in [(Host::A, &n.a0), (Host::B, &n.b0)] {
                    // Local senders on veth leave L4 checksums to "hardware" and hand over 64 KB
                    // TSO/GSO super-frames; a data plane reading frames needs real ones.
                    self.ethtool_k(host, dev, &[("tx", false), ("tso", false), ("gso", false)])?;
                }
            }
        }
        Ok(())
    }

    fn ip(&self, ns: &str, args: &[&str]) -> Result<()> {
        let mut v = vec!["ip", "-n", ns];
        v.extend_from_slice(args);
        run_ok(&v).map(|_| ())
    }

    fn neigh(&self, ns: &str, ip: &str, mac: &str, dev: &str) -> Result<()> {
        self.ip(
            ns,
            &[
                "neigh",
                "replace",
                ip,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ],
        )
    }

    /// The names of everything this topology made.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Its mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The namespace of `host`.
    pub fn ns(&self, host: Host) -> &str {
        match host {
            Host::A => &self.names.ns_a,
            Host::R => &self.names.ns_r,
            Host::B => &self.names.ns_b,
        }
    }

    /// The scratch directory (configs, sockets, logs), deleted with the topology.
    pub fn dir(&self) -> &Path {
        &self.names.dir
    }

    /// A's IPv4 address.
    pub fn a_ip4(&self) -> Ipv4Addr {
        addr::A4
    }

    /// A's IPv6 address.
    pub fn a_ip6(&self) -> Ipv6Addr {
        addr::A6
    }

    /// B's IPv4 address (depends on the addressing).
    pub fn b_ip4(&self) -> Ipv4Addr {
        match self.mode.addressing() {
            Addressing::Routed => addr::B4,
            Addressing::Bridged => addr::B4_BRIDGED,
        }
    }

    /// B's IPv6 address (depends on the addressing).
    pub fn b_ip6(&self) -> Ipv6Addr {
        match self.mode.addressing() {
            Addressing::Routed => addr::B6,
            Addressing::Bridged => addr::B6_BRIDGED,
        }
    }

    /// The MAC A sends B-bound frames to: R's (Ra) when routed, B0's when bridged.
    pub fn a_next_hop_mac(&self) -> &'static str {
        match self.mode.addressing() {
            Addressing::Routed => addr::MAC_RA,
            Addressing::Bridged => addr::MAC_B0,
        }
    }

    /// Run `args` inside `host`'s namespace, bounded by `timeout`; a non-zero exit is returned,
    /// not an error.
    pub fn exec_timeout(&self, host: Host, args: &[&str], timeout: Duration) -> Result<Output> {
        run_bounded(&in_ns(self.ns(host), args), timeout)
    }

    /// Run `args` inside `host`'s namespace (bounded by 30 s); it must exit 0; returns stdout.
    pub fn exec_ok(&self, host: Host, args: &[&str]) -> Result<String> {
        run_ok(&in_ns(self.ns(host), args))
    }

    /// Start a long-running `args` inside `host`'s namespace, its output going to
    /// `<dir>/<log_name>.log`; it is stopped when the returned value is dropped, and killed with
    /// everything else in the namespace when the topology goes.
    pub fn spawn(&self, host: Host, args: &[&str], log_name: &str) -> Result<Spawned> {
        let log = self.dir().join(format!("{log_name}.log"));
        Spawned::start(&in_ns(self.ns(host), args), Some(&log))
    }

    /// The counters of interface `dev` in `host`'s namespace.
    pub fn link_stats(&self, host: Host, dev: &str) -> Result<LinkStats> {
        let out = run_ok(&[
            "ip",
            "-n",
            self.ns(host),
            "-s",
            "-j",
            "link",
            "show",
            "dev",
            dev,
        ])?;
        parse_link_stats(&out).with_context(|| format!("counters of {dev} in {}", self.ns(host)))
    }

    /// `ethtool -K dev feature on|off ...` inside `host`'s namespace.
    pub fn ethtool_k(&self, host: Host, dev: &str, features: &[(&str, bool)]) -> Result<()> {
        let mut args = vec!["ethtool", "-K", dev];
        for (f, on) in features {
            args.push(f);
            args.push(if *on { "on" } else { "off" });
        }
        self.exec_ok(host, &args).map(|_| ())
    }

    /// Steer receive processing of `dev` (RPS, queue rx-0) to `cpus` (empty: off).
    pub fn set_rps(&self, host: Host, dev: &str, cpus: &[usize]) -> Result<()> {
        let mut mask: u64 = 0;
        for &c in cpus {
            if c >= 64 {
                bail!("RPS to CPU {c}: only CPUs 0..63 are supported");
            }
            mask |= 1 << c;
        }
        let path = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
        self.exec_ok(host, &["sh", "-c", &format!("echo {mask:x} > {path}")])
            .map(|_| ())
    }

    /// Write sysctl `key` (slash-separated, e.g. `net/ipv4/ip_forward`) in `host`'s namespace.
    pub fn sysctl(&self, host: Host, key: &str, value: &str) -> Result<()> {
        cmd::write_sysctl(self.ns(host), key, value)
    }

    /// A file path in the scratch directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir().join(file)
    }

    /// Delete everything now, reporting what could not be deleted.
    pub fn delete(mut self) -> Result<()> {
        self.delete_inner()
    }

    fn delete_inner(&mut self) -> Result<()> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        let ns = self.names.namespaces();
        let failed = cleanup::release(&ns, &[self.names.dir.as_path()]);
        if failed.is_empty() {
            Ok(())
        } else {
            bail!("could not delete: {}", failed.join("; "))
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.delete_inner() {
            eprintln!("netlab: {e:#}");
        }
    }
}

/// Timeout for traffic commands that carry their own bounds (the bound plus a margin).
pub fn traffic_timeout(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0) + 15.0)
}

/// Default deadline of setup commands, re-exported for callers.
pub const SETUP_TIMEOUT: Duration = DEFAULT_TIMEOUT;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_stats_are_parsed() {
        let json = r#"[{"ifindex":2,"ifname":"x","stats64":{"rx":{"bytes":100,"packets":2,
            "errors":0,"dropped":1,"over_errors":0,"multicast":0},"tx":{"bytes":50,"packets":1,
            "errors":0,"dropped":0,"carrier_errors":0,"collisions":0}}}]"#;
        let s = parse_link_stats(json).expect("parsed");
        assert_eq!(
            s,
            LinkStats {
                rx_packets: 2,
                rx_bytes: 100,
                rx_dropped: 1,
                tx_packets: 1,
                tx_bytes: 50,
                tx_dropped: 0
            }
        );
        assert!(parse_link_stats("[]").is_err());
        assert!(parse_link_stats("not json").is_err());
        assert!(parse_link_stats(r#"[{"ifname":"x"}]"#).is_err());
    }

    #[test]
    fn addresses_stay_in_the_test_ranges() {
        for a in [addr::A4, addr::RA4, addr::RB4, addr::B4, addr::B4_BRIDGED] {
            let o = a.octets();
            assert!(o[0] == 198 && (o[1] & 0xfe) == 18, "{a}");
        }
        for a in [addr::A6, addr::RA6, addr::RB6, addr::B6, addr::B6_BRIDGED] {
            let s = a.segments();
            assert_eq!((s[0], s[1]), (0x2001, 0xdb8), "{a}");
        }
        assert_eq!(Mode::KernelBridge.addressing(), Addressing::Bridged);
        assert_eq!(
            Mode::Dataplane(Addressing::Routed).addressing(),
            Addressing::Routed
        );
    }
}
