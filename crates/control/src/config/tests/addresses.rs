//! Config tests of the rules for ports' own addresses: no loopback, multicast, broadcast,
//! unspecified or IPv4-mapped address, no network/broadcast address of the subnet, one subnet per
//! port.

use super::*;

#[track_caller]
fn refused(addr: &str, needle: &str) {
    let key = if addr.contains(':') { "ip6" } else { "ip4" };
    let shown = one_error(
        &pcap_port(&format!("{key} = [\"{addr}\"]\n")),
        5,
        Some(key),
        needle,
    );
    assert!(
        shown.contains(
            "accepted: a unicast host address that is not loopback, multicast, \
                        broadcast, unspecified or IPv4-mapped"
        ),
        "{shown}"
    );
}

#[test]
fn special_addresses_are_refused() {
    refused(
        "127.0.0.1/8",
        "`127.0.0.1/8` is a loopback address (127.0.0.0/8)",
    );
    refused("127.1.2.3/32", "is a loopback address");
    refused("224.0.0.5/24", "is a multicast address (224.0.0.0/4)");
    refused("239.1.1.1/32", "is a multicast address");
    refused("255.255.255.255/32", "is the limited broadcast address");
    refused("0.0.0.0/8", "is the unspecified address");
    refused("::1/128", "is the loopback address (::1)");
    refused("::/64", "is the unspecified address (::)");
    refused("ff02::1/64", "is a multicast address (ff00::/8)");
    refused(
        "::ffff:198.18.1.1/96",
        "is an IPv4-mapped address (::ffff:0:0/96)",
    );
}

#[test]
fn network_and_broadcast_addresses_of_the_subnet_are_refused() {
    refused(
        "198.18.1.0/24",
        "`198.18.1.0/24` is the network address of 198.18.1.0/24; accepted: a unicast host \
         address that is not loopback, multicast, broadcast, unspecified or IPv4-mapped (inside \
         198.18.1.0/24: 198.18.1.1 to 198.18.1.254; /31 and /32 have no network or broadcast \
         address)",
    );
    refused(
        "198.18.1.255/24",
        "is the broadcast address of 198.18.1.0/24",
    );
    refused("198.18.5.3/30", "is the broadcast address of 198.18.5.0/30");
    // /31 (RFC 3021) and /32 have neither.
    let s = ok(&pcap_port(
        "ip4 = [\"198.18.6.0/31\", \"198.18.7.1/31\", \"198.18.8.0/32\"]\n",
    ));
    assert_eq!(s.ports[0].ip4.len(), 3);
    // IPv6 has no broadcast: the all-zero and all-one host parts are accepted.
    ok(&pcap_port(
        "ip6 = [\"2001:db8:1::/64\", \"2001:db8:2:0:ffff:ffff:ffff:ffff/64\"]\n",
    ));
}

const TWO: &str = "[[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\n\
                   ip4 = [\"198.18.1.1/24\"]\nip6 = [\"2001:db8:1::1/64\"]\n\n\
                   [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\n";

#[test]
fn a_subnet_belongs_to_one_port() {
    one_error(
        &format!("{TWO}ip4 = [\"198.18.1.2/24\"]\n"),
        12,
        Some("ip4"),
        "subnet 198.18.1.0/24 is also the subnet 198.18.1.0/24 of port `a` at line 5; accepted: \
         a subnet on one port only",
    );
    one_error(
        &format!("{TWO}ip4 = [\"198.18.1.129/25\"]\n"),
        12,
        Some("ip4"),
        "subnet 198.18.1.128/25 overlaps the subnet 198.18.1.0/24 of port `a` at line 5",
    );
    one_error(
        &format!("{TWO}ip4 = [\"198.18.0.1/16\"]\n"),
        12,
        Some("ip4"),
        "subnet 198.18.0.0/16 overlaps the subnet 198.18.1.0/24 of port `a`",
    );
    one_error(
        &format!("{TWO}ip6 = [\"2001:db8:1:0:1::1/80\"]\n"),
        12,
        Some("ip6"),
        "subnet 2001:db8:1:0:1::/80 overlaps the subnet 2001:db8:1::/64 of port `a` at line 6",
    );
    // Distinct subnets, and two addresses of one port in one subnet, are fine.
    let s = ok(&format!(
        "{TWO}ip4 = [\"198.18.2.1/24\", \"198.18.2.2/24\"]\nip6 = [\"2001:db8:2::1/64\"]\n"
    ));
    assert_eq!(s.ports[1].ip4.len(), 2);
}
