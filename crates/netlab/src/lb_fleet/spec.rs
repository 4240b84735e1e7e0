//! What a fleet is made of: its addresses, MACs and AS numbers, the build spec and its checks,
//! the names of everything it creates (unique per run, recognised as leftovers of dead runs),
//! and reading the router's next hops from `ip -j route`. Plain data: it never creates
//! anything.

use crate::lb;
use crate::names::Names;
use crate::vecplane::Driver;
use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// Addresses, MACs and AS numbers of the fleet (on top of [`crate::lb::addr`]'s client, router
/// and server addresses, which it shares).
pub mod addr {
    use std::net::Ipv4Addr;

    /// The router on the management segment (BGP sessions, BIRD router id).
    pub const ROUTER_M4: Ipv4Addr = Ipv4Addr::new(198, 18, 13, 1);
    /// The router's AS.
    pub const ROUTER_AS: u32 = 65000;
    /// The L3DSR VIP every LB serves.
    pub const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 100, 1);
    /// The DSCP of the VIP.
    pub const VIP_DSCP: u8 = 23;

    fn octet(base: usize, i: usize) -> u8 {
        u8::try_from(base + i).unwrap_or(u8::MAX)
    }

    /// LB `i`'s data uplink (vecplane's `up` port; the BGP next hop): 198.18.11.2+i.
    pub fn lb_up4(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 11, octet(2, i))
    }

    /// LB `i`'s port on the servers' segment (vecplane's `down`; its probe source):
    /// 198.18.12.1+i.
    pub fn lb_down4(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 12, octet(1, i))
    }

    /// LB `i`'s kernel address on the management segment (its BGP session): 198.18.13.2+i.
    pub fn lb_mgmt4(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 13, octet(2, i))
    }

    /// LB `i`'s AS: 65001+i.
    pub fn lb_as(i: usize) -> u32 {
        65001 + u32::from(octet(0, i))
    }

    /// MAC of LB `i`'s uplink (LB 0 has [`crate::lb::addr::MAC_LB_UP`]).
    pub fn lb_up_mac(i: usize) -> String {
        format!("02:00:00:11:00:{:02x}", octet(2, i))
    }

    /// MAC of LB `i`'s port on the servers' segment (LB 0 has [`crate::lb::addr::MAC_LB_DOWN`]).
    pub fn lb_down_mac(i: usize) -> String {
        format!("02:00:00:12:00:{:02x}", octet(1, i))
    }

    /// MAC of LB `i`'s management port.
    pub fn lb_mgmt_mac(i: usize) -> String {
        format!("02:00:00:13:00:{:02x}", octet(2, i))
    }

    /// Prefix length of the management segment.
    pub const MGMT_LEN: u8 = 24;
}

/// Most load balancers in a fleet.
pub const MAX_LBS: usize = 4;

/// Most servers in a fleet.
pub const MAX_FLEET_SERVERS: usize = 8;

/// The default prefix of the fleet's names.
pub const FLEET_PREFIX: &str = "vlbf";

/// The programs a test needs to build a fleet (for `missing_prerequisite`): namespaces, links
/// and bridge entries, nftables, the servers, the client's curl, BIRD 2 and its client.
pub const FLEET_TOOLS: &[&str] = &[
    "ip", "bridge", "ethtool", "nft", "nginx", "curl", "bird", "birdc",
];

/// What to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSpec {
    /// Name prefix (1..=4 of `[a-z0-9]`, starting with a letter).
    pub prefix: String,
    /// Load balancers (1..=[`MAX_LBS`]).
    pub lbs: usize,
    /// One weight per server (1..=[`MAX_FLEET_SERVERS`] servers).
    pub weights: Vec<u32>,
    /// vecplane's port driver.
    pub driver: Driver,
    /// More VPP `lb` lines after the fleet's own (`lb conf`, the VIP and its servers).
    pub lb_lines: Vec<String>,
    /// TOML key lines inside `[lb]` after `lines` and `probe-source4` (e.g. `probe-source6`).
    pub lb_keys: String,
    /// TOML key lines inside `[bgp]` after the fleet's own (e.g. `drain-quiet-ms = 500`).
    pub bgp_keys: String,
    /// TOML appended at the end of every LB's config (e.g. `[[lb.health-check]]` tables).
    pub extra_toml: String,
}

impl FleetSpec {
    /// `lbs` load balancers and servers with `weights`, AF_PACKET, nothing extra.
    pub fn new(lbs: usize, weights: &[u32]) -> FleetSpec {
        FleetSpec {
            prefix: FLEET_PREFIX.to_string(),
            lbs,
            weights: weights.to_vec(),
            driver: Driver::AfPacket,
            lb_lines: Vec::new(),
            lb_keys: String::new(),
            bgp_keys: String::new(),
            extra_toml: String::new(),
        }
    }

    /// An error naming the field and what is accepted, if the spec cannot be built.
    pub fn check(&self) -> Result<()> {
        if !(1..=MAX_LBS).contains(&self.lbs) {
            bail!("FleetSpec.lbs: {}; accepted: 1 to {MAX_LBS}", self.lbs);
        }
        if !(1..=MAX_FLEET_SERVERS).contains(&self.weights.len()) {
            bail!(
                "FleetSpec.weights: {} servers; accepted: 1 to {MAX_FLEET_SERVERS}",
                self.weights.len()
            );
        }
        Ok(())
    }
}

impl Default for FleetSpec {
    /// Three load balancers, three servers of weight 1.
    fn default() -> FleetSpec {
        FleetSpec::new(3, &[1, 1, 1])
    }
}

/// Every name of one fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetNames {
    /// Client namespace.
    pub ns_client: String,
    /// Router namespace (holds the three bridges).
    pub ns_router: String,
    /// Load balancer namespaces.
    pub ns_lbs: Vec<String>,
    /// Server namespaces.
    pub ns_servers: Vec<String>,
    /// Client veth (peer of `rc`).
    pub c0: String,
    /// Router veth towards the client.
    pub rc: String,
    /// The router's bridge of the LBs' uplinks.
    pub br_up: String,
    /// The router's bridge of the management segment.
    pub br_mgmt: String,
    /// The router's bridge of the servers' segment.
    pub br_servers: String,
    /// Each LB's uplink (vecplane's `up`).
    pub lb_up: Vec<String>,
    /// Bridge port of each LB's uplink.
    pub up_ports: Vec<String>,
    /// Each LB's port on the servers' segment (vecplane's `down`).
    pub lb_down: Vec<String>,
    /// Bridge port of each LB's `down`.
    pub down_ports: Vec<String>,
    /// Each LB's management veth (kernel address, BGP).
    pub lb_mgmt: Vec<String>,
    /// Bridge port of each LB's management veth.
    pub mgmt_ports: Vec<String>,
    /// Each LB's liveness device (`[bgp] interface`; the VIP routes go via it).
    pub liveness: Vec<String>,
    /// Server interfaces.
    pub servers: Vec<String>,
    /// Bridge ports of the servers.
    pub ports: Vec<String>,
    /// Scratch directory.
    pub dir: PathBuf,
}

impl FleetNames {
    /// Names for `lbs` load balancers and `servers` servers from one fresh [`Names`].
    pub fn from_names(n: &Names, lbs: usize, servers: usize) -> Result<FleetNames> {
        if lbs > MAX_LBS || servers > MAX_FLEET_SERVERS {
            bail!(
                "{lbs} LBs, {servers} servers; accepted: at most {MAX_LBS} and {MAX_FLEET_SERVERS}"
            );
        }
        let base = n
            .ns_a
            .strip_suffix("-a")
            .context("netlab names: namespace A does not end in -a")?;
        let stem =
            n.a0.strip_suffix("a0")
                .context("netlab names: A0 does not end in a0")?;
        let each = |role: char, count: usize| -> Vec<String> {
            (0..count).map(|i| format!("{stem}{role}{i}")).collect()
        };
        Ok(FleetNames {
            ns_client: format!("{base}-c"),
            ns_router: format!("{base}-rt"),
            ns_lbs: (0..lbs).map(|i| format!("{base}-lb{i}")).collect(),
            ns_servers: (0..servers).map(|i| format!("{base}-s{i}")).collect(),
            c0: format!("{stem}c0"),
            rc: format!("{stem}rc"),
            br_up: format!("{stem}bu"),
            br_mgmt: format!("{stem}bm"),
            br_servers: format!("{stem}bs"),
            lb_up: each('u', lbs),
            up_ports: each('v', lbs),
            lb_down: each('d', lbs),
            down_ports: each('e', lbs),
            lb_mgmt: each('m', lbs),
            mgmt_ports: each('n', lbs),
            liveness: each('g', lbs),
            servers: each('s', servers),
            ports: each('p', servers),
            dir: n.dir.clone(),
        })
    }

    /// Every namespace.
    pub fn namespaces(&self) -> Vec<&str> {
        let mut v = vec![self.ns_client.as_str(), self.ns_router.as_str()];
        v.extend(self.ns_lbs.iter().map(String::as_str));
        v.extend(self.ns_servers.iter().map(String::as_str));
        v
    }

    /// Every interface name the fleet creates (vecplane creates the liveness devices).
    pub fn interfaces(&self) -> Vec<&str> {
        let mut v = vec![
            self.c0.as_str(),
            self.rc.as_str(),
            self.br_up.as_str(),
            self.br_mgmt.as_str(),
            self.br_servers.as_str(),
        ];
        for list in [
            &self.lb_up,
            &self.up_ports,
            &self.lb_down,
            &self.down_ports,
            &self.lb_mgmt,
            &self.mgmt_ports,
            &self.liveness,
            &self.servers,
            &self.ports,
        ] {
            v.extend(list.iter().map(String::as_str));
        }
        v
    }
}

/// Delete fleets (and load-balancer labs) named `<prefix>-<pid>-...` whose process is gone,
/// with their scratch directories; BIRD, vecplane and nginx inside them end with their
/// namespaces. Returns the namespaces deleted.
pub fn delete_fleet_leftovers(prefix: &str) -> Vec<String> {
    lb::delete_lb_leftovers(prefix)
}

/// The next hops in `ip -j route show PREFIX` output, sorted.
pub fn parse_nexthops(json: &str) -> Result<Vec<Ipv4Addr>> {
    let json = json.trim();
    if json.is_empty() {
        return Ok(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_str(json).context("not JSON")?;
    let routes = v.as_array().context("not a JSON list of routes")?;
    let gateway = |x: &serde_json::Value| -> Result<Option<Ipv4Addr>> {
        match x.get("gateway").and_then(|g| g.as_str()) {
            Some(g) => {
                Ok(Some(g.parse().with_context(|| {
                    format!("gateway `{g}` is not an IPv4 address")
                })?))
            }
            None => Ok(None),
        }
    };
    let mut out = Vec::new();
    for r in routes {
        if let Some(hops) = r.get("nexthops").and_then(|h| h.as_array()) {
            for h in hops {
                out.extend(gateway(h)?);
            }
        } else {
            out.extend(gateway(r)?);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_are_distinct_and_are_recognised_as_leftovers() {
        let n = Names::for_ids("abcd", 60_466_175, 46_655).expect("names");
        let f = FleetNames::from_names(&n, MAX_LBS, MAX_FLEET_SERVERS).expect("fleet names");
        let ifs = f.interfaces();
        for i in &ifs {
            assert!(i.len() <= crate::names::IFNAME_MAX, "{i}");
        }
        let set: std::collections::HashSet<&&str> = ifs.iter().collect();
        assert_eq!(set.len(), ifs.len());
        for ns in f.namespaces() {
            assert_eq!(lb::lb_owner_pid("abcd", ns), Some(60_466_175), "{ns}");
            assert_eq!(crate::names::owner_pid("abcd", ns), None, "{ns}");
        }
        assert!(FleetNames::from_names(&n, MAX_LBS + 1, 1).is_err());
        assert!(FleetNames::from_names(&n, 1, MAX_FLEET_SERVERS + 1).is_err());
    }

    #[test]
    fn addresses_stay_in_the_test_range_and_specs_are_checked() {
        for i in 0..MAX_LBS {
            for a in [addr::lb_up4(i), addr::lb_down4(i), addr::lb_mgmt4(i)] {
                let o = a.octets();
                assert!(o[0] == 198 && (o[1] & 0xfe) == 18, "{a}");
            }
            // The LBs' down ports never collide with the servers or the router.
            assert!(addr::lb_down4(i) < lb::addr::server4(0));
        }
        assert_eq!(addr::lb_up_mac(0), lb::addr::MAC_LB_UP);
        assert_eq!(addr::lb_down_mac(0), lb::addr::MAC_LB_DOWN);
        assert_eq!(addr::lb_as(2), 65003);
        assert!(FleetSpec::default().check().is_ok());
        assert!(FleetSpec::new(0, &[1]).check().is_err());
        assert!(FleetSpec::new(5, &[1]).check().is_err());
        assert!(FleetSpec::new(1, &[]).check().is_err());
        assert!(FleetSpec::new(1, &[1; 9]).check().is_err());
    }

    #[test]
    fn nexthops_are_parsed_from_single_and_multipath_routes() {
        let single = r#"[{"dst":"198.18.100.1","gateway":"198.18.11.2","dev":"x","protocol":"bird","metric":32,"flags":[]}]"#;
        assert_eq!(
            parse_nexthops(single).expect("single"),
            vec![Ipv4Addr::new(198, 18, 11, 2)]
        );
        let multi = r#"[{"dst":"198.18.100.1","protocol":"bird","metric":32,"flags":[],
            "nexthops":[{"gateway":"198.18.11.3","dev":"x","weight":1,"flags":[]},
                        {"gateway":"198.18.11.2","dev":"x","weight":1,"flags":[]}]}]"#;
        assert_eq!(
            parse_nexthops(multi).expect("multi"),
            vec![Ipv4Addr::new(198, 18, 11, 2), Ipv4Addr::new(198, 18, 11, 3)]
        );
        assert!(parse_nexthops("[]\n").expect("none").is_empty());
        assert!(parse_nexthops("").expect("none").is_empty());
        assert!(parse_nexthops("{").is_err());
        assert!(parse_nexthops(r#"[{"gateway":"x"}]"#).is_err());
    }
}
