//! Service chains of VNF guests: endpoint guests A and B and VNF guests 1..n (two NICs each,
//! bridged inside the guest), and the two ways of chaining them that vecplane's tests and
//! benchmarks use: a vecplane flow-mode bridge whose rules steer A -> VNF 1 -> ... -> VNF n -> B
//! and back ([`chain_rules`], [`vecplane_config`]), and Linux bridges with TAP ports, VNF k
//! between bridge k-1 and bridge k ([`LinuxChain`]). It owns the numbering (OpenFlow ports,
//! MACs, addresses), the rule text and the TAP wiring; it never starts vecplane or a guest.

use crate::guest_spec::{guest_mac, GuestSpec, Mac, NicSpec};
use crate::tap_bridge::TapBridges;
use anyhow::{anyhow, bail, Result};

/// The flow-mode bridge of [`vecplane_config`].
pub const BRIDGE: &str = "br0";

/// The rule that drops what no chain rule matches (nothing passes before a chain is loaded).
pub const DEFAULT_RULE: &str = "priority=0,actions=drop";

/// OpenFlow port of endpoint A.
pub const A_OFPORT: u32 = 1;

/// OpenFlow port of endpoint B.
pub const B_OFPORT: u32 = 2;

/// Most VNFs a chain may have (ports, MACs and guest numbers are built for up to 9).
pub const MAX_VNFS: u32 = 9;

/// OpenFlow ports of VNF `k` (1-based): its first NIC is `10k+1`, its second `10k+2`.
pub fn vnf_ofports(k: u32) -> (u32, u32) {
    (10 * k + 1, 10 * k + 2)
}

/// The rules steering A -> VNF 1 -> ... -> VNF `n` -> B and back, as `ovs-ofctl` takes them
/// (without [`DEFAULT_RULE`]). `n` = 0 joins A and B directly.
pub fn chain_rules(n: u32) -> Vec<String> {
    let mut r = Vec::new();
    // Forward: each hop's egress is the next hop's ingress.
    let mut from = A_OFPORT;
    for k in 1..=n {
        let (first, second) = vnf_ofports(k);
        r.push(format!(
            "priority=100,in_port={from},actions=output:{first}"
        ));
        from = second;
    }
    r.push(format!(
        "priority=100,in_port={from},actions=output:{B_OFPORT}"
    ));
    // Back: B into the last VNF's second NIC, out of its first NIC into the previous one's
    // second, ..., into A.
    let mut from = B_OFPORT;
    for k in (1..=n).rev() {
        let (first, second) = vnf_ofports(k);
        r.push(format!(
            "priority=100,in_port={from},actions=output:{second}"
        ));
        from = first;
    }
    r.push(format!(
        "priority=100,in_port={from},actions=output:{A_OFPORT}"
    ));
    r
}

/// One guest NIC of a chain: the vecplane port (or TAP role) it plugs into, and its MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainPort {
    /// `a`, `b`, `vnf<k>a` (VNF k's eth0) or `vnf<k>b` (its eth1).
    pub name: String,
    /// The OpenFlow port number on vecplane's bridge.
    pub ofport: u32,
    /// The MAC of vecplane's port.
    pub port_mac: String,
    /// The MAC of the guest's NIC.
    pub guest_mac: Mac,
}

/// Every port of a chain with up to `vnfs` VNFs: A, B, then each VNF's two.
pub fn ports(vnfs: u32) -> Result<Vec<ChainPort>> {
    if vnfs > MAX_VNFS {
        bail!("a chain has at most {MAX_VNFS} VNFs, not {vnfs}");
    }
    let mut v = vec![
        ChainPort {
            name: "a".into(),
            ofport: A_OFPORT,
            port_mac: "02:00:00:00:20:01".into(),
            guest_mac: guest_mac(1, 0),
        },
        ChainPort {
            name: "b".into(),
            ofport: B_OFPORT,
            port_mac: "02:00:00:00:20:02".into(),
            guest_mac: guest_mac(2, 0),
        },
    ];
    for k in 1..=vnfs {
        let (first, second) = vnf_ofports(k);
        // Guest number 10 + k (at most 19: fits a MAC byte).
        let g = 10 + k as u8;
        for (nic, side, ofport) in [(0u8, 'a', first), (1, 'b', second)] {
            v.push(ChainPort {
                name: format!("vnf{k}{side}"),
                ofport,
                port_mac: format!("02:00:00:00:2{k}:0{}", nic + 1),
                guest_mac: guest_mac(g, nic),
            });
        }
    }
    Ok(v)
}

/// A `[[port]]` of driver vhost-user on socket `<name>.sock` (relative to the config's
/// directory) in [`BRIDGE`]; `extra` adds lines (e.g. `ofport = 1`).
pub fn vhost_user_port(name: &str, mac: &str, socket_mode: &str, extra: &str) -> String {
    format!(
        "[[port]]\nname = \"{name}\"\ndriver = \"vhost-user\"\nmac = \"{mac}\"\n\
         socket = \"{name}.sock\"\nsocket-mode = \"{socket_mode}\"\nbridge = \"{BRIDGE}\"\n\
         {extra}\n"
    )
}

/// vecplane's config for a chain of up to `vnfs` VNFs: `[dataplane]` with `dataplane` (lines
/// such as `buffers = 8192`), the flow-mode [`BRIDGE`] with only [`DEFAULT_RULE`], and a
/// vhost-user port in server mode for every NIC of [`ports`] (socket `<port>.sock` beside the
/// config). Load [`chain_rules`] to steer traffic.
pub fn vecplane_config(vnfs: u32, dataplane: &str) -> Result<String> {
    let mut c = format!(
        "[dataplane]\n{}\n\n[[bridge]]\nname = \"{BRIDGE}\"\nmode = \"flow\"\n\
         flows = [\"{DEFAULT_RULE}\"]\n\n",
        dataplane.trim_end()
    );
    for p in ports(vnfs)? {
        c.push_str(&vhost_user_port(
            &p.name,
            &p.port_mac,
            "server",
            &format!("ofport = {}", p.ofport),
        ));
    }
    Ok(c)
}

/// The guests of a chain with `vnfs` VNFs: `<prefix>a` (198.18.`subnet`.1/24,
/// 2001:db8:`subnet`::1/64), `<prefix>b` (.2, ::2) and `<prefix>vnf1..` in VNF mode; `nic`
/// gives each NIC for its [`ChainPort`].
pub fn guest_specs(
    vnfs: u32,
    subnet: u8,
    prefix: &str,
    mut nic: impl FnMut(&ChainPort) -> Result<NicSpec>,
) -> Result<Vec<GuestSpec>> {
    let ports = ports(vnfs)?;
    let find = |name: &str| {
        ports
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| anyhow!("no chain port {name}"))
    };
    let mut specs = Vec::new();
    for (host, n) in [("a", 1), ("b", 2)] {
        specs.push(
            GuestSpec::new(&format!("{prefix}{host}"))
                .nic(nic(find(host)?)?)
                .addresses(
                    &format!("198.18.{subnet}.{n}/24"),
                    &format!("2001:db8:{subnet}::{n}/64"),
                ),
        );
    }
    for k in 1..=vnfs {
        specs.push(
            GuestSpec::new(&format!("{prefix}vnf{k}"))
                .nic(nic(find(&format!("vnf{k}a"))?)?)
                .nic(nic(find(&format!("vnf{k}b"))?)?)
                .bridged(),
        );
    }
    Ok(specs)
}

/// The address of endpoint `host` (1: A, 2: B) of [`guest_specs`] with `subnet`.
pub fn endpoint_ip(subnet: u8, host: u8) -> String {
    format!("198.18.{subnet}.{host}")
}

/// The same chain over Linux bridges: bridge `k` joins VNF k's second NIC and VNF k+1's first
/// (A on bridge 0, B on bridge n); the TAPs of VNFs beyond the chain's length are on no bridge.
pub struct LinuxChain {
    lab: TapBridges,
    /// (chain port name, TAP).
    taps: Vec<(String, String)>,
    vnfs: u32,
    length: Option<u32>,
}

impl LinuxChain {
    /// Bridges and TAPs for up to `vnfs` VNFs, in a namespace of their own; no chain wired yet.
    pub fn build(vnfs: u32) -> Result<LinuxChain> {
        let mut lab = TapBridges::create()?;
        for _ in 0..=vnfs {
            lab.add_bridge()?;
        }
        let mut taps = Vec::new();
        for p in ports(vnfs)? {
            let tap = lab.add_tap(None)?;
            taps.push((p.name, tap));
        }
        Ok(LinuxChain {
            lab,
            taps,
            vnfs,
            length: None,
        })
    }

    /// The TAP of chain port `port`.
    pub fn tap(&self, port: &str) -> Result<&str> {
        self.taps
            .iter()
            .find(|(p, _)| p == port)
            .map(|(_, t)| t.as_str())
            .ok_or_else(|| anyhow!("no chain port {port}"))
    }

    /// The guest NIC for chain port `p`.
    pub fn nic(&self, p: &ChainPort) -> Result<NicSpec> {
        Ok(self.lab.nic(self.tap(&p.name)?, p.guest_mac))
    }

    /// The bridges and TAPs (and the namespace guests start in).
    pub fn lab(&self) -> &TapBridges {
        &self.lab
    }

    /// Wire a chain of `n` VNFs: every TAP leaves its bridge first (so no two bridges are ever
    /// joined by an unused VNF), then A goes on bridge 0, VNF k between bridges k-1 and k, B on
    /// bridge n.
    pub fn set_length(&mut self, n: u32) -> Result<()> {
        if n > self.vnfs {
            bail!(
                "this chain was built for at most {} VNFs, not {n}",
                self.vnfs
            );
        }
        for (_, tap) in &self.taps {
            self.lab.attach(tap, None)?;
        }
        let bridge = |i: u32| -> Result<String> {
            self.lab
                .bridges()
                .get(i as usize)
                .cloned()
                .ok_or_else(|| anyhow!("no bridge {i}"))
        };
        self.lab.attach(self.tap("a")?, Some(&bridge(0)?))?;
        for k in 1..=n {
            self.lab
                .attach(self.tap(&format!("vnf{k}a"))?, Some(&bridge(k - 1)?))?;
            self.lab
                .attach(self.tap(&format!("vnf{k}b"))?, Some(&bridge(k)?))?;
        }
        self.lab.attach(self.tap("b")?, Some(&bridge(n)?))?;
        self.length = Some(n);
        Ok(())
    }

    /// The length wired last.
    pub fn length(&self) -> Option<u32> {
        self.length
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_go_through_every_vnf_both_ways() {
        assert_eq!(
            chain_rules(0),
            vec![
                "priority=100,in_port=1,actions=output:2",
                "priority=100,in_port=2,actions=output:1"
            ]
        );
        assert_eq!(
            chain_rules(2),
            vec![
                "priority=100,in_port=1,actions=output:11",
                "priority=100,in_port=12,actions=output:21",
                "priority=100,in_port=22,actions=output:2",
                "priority=100,in_port=2,actions=output:22",
                "priority=100,in_port=21,actions=output:12",
                "priority=100,in_port=11,actions=output:1",
            ]
        );
    }

    #[test]
    fn the_config_has_a_port_per_nic_and_is_accepted() {
        let text = vecplane_config(3, "buffers = 8192").expect("config");
        let spec = control::parse_config(&text, "chain.toml", std::path::Path::new("/tmp"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.ports.len(), 8);
        assert!(text.contains("name = \"vnf3b\""), "{text}");
        assert!(text.contains("ofport = 32"), "{text}");
        assert!(vecplane_config(MAX_VNFS + 1, "").is_err());
        let macs: std::collections::HashSet<String> = ports(MAX_VNFS)
            .expect("ports")
            .iter()
            .flat_map(|p| [p.port_mac.clone(), format!("{:?}", p.guest_mac)])
            .collect();
        assert_eq!(macs.len(), 2 * (2 + 2 * MAX_VNFS as usize));
    }

    #[test]
    fn guests_are_two_endpoints_and_the_vnfs() {
        let specs = guest_specs(2, 20, "x", |p| {
            Ok(NicSpec::Tap {
                ifname: format!("t{}", p.name),
                mac: p.guest_mac,
            })
        })
        .expect("specs");
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["xa", "xb", "xvnf1", "xvnf2"]);
        for s in &specs {
            s.validate().expect("valid");
        }
        assert_eq!(specs[1].ip.as_deref(), Some("198.18.20.2/24"));
        assert!(specs[3].bridge && specs[3].nics.len() == 2);
        assert_eq!(endpoint_ip(20, 2), "198.18.20.2");
    }
}
