//! Config tests of `[[neighbour]]`, `[[route]]` and `[[xconnect]]`.

use super::*;

// --- [[neighbour]] ---------------------------------------------------------------------------

#[test]
fn neighbour_good() {
    let s = ok(BASE);
    assert_eq!(
        s.neighbours[2],
        NeighbourSpec {
            ip: "2001:db8:3::2".parse().unwrap(),
            mac: mac("02:00:00:00:03:03"),
            port: 1
        }
    );
}

#[test]
fn neighbour_port_must_exist() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in9\"\n",
        ),
        B + 5,
        Some("port"),
        "no port is named `in9`; accepted: the name of a [[port]]: `in0`, `out0`",
    );
}

#[test]
fn neighbour_must_be_on_a_port_subnet() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.9.3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "static neighbour 198.18.9.3 is not on a subnet of port `in0` (its IPv4 subnets: \
         198.18.1.0/24); accepted: each static neighbour of a port on one of the port's subnets",
    );
    one_error(
        &with("\n[[neighbour]]\nip = \"2001:db8:9::3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n"),
        B + 3,
        Some("ip"),
        "(its IPv6 subnets: 2001:db8:1::/64)",
    );
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.1\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "port `in0`'s own address",
    );
}

#[test]
fn neighbours_are_unique() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.2\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "duplicate neighbour 198.18.1.2: also defined at line 18",
    );
}

#[test]
fn neighbour_fields() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.3\"\nmac = \"ff:ff:ff:ff:ff:ff\"\nport = \"in0\"\n",
        ),
        B + 4,
        Some("mac"),
        "not a unicast MAC",
    );
    one_error(
        &with("\n[[neighbour]]\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n"),
        B + 2,
        Some("ip"),
        "missing required field",
    );
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.300\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "is not an IP address",
    );
}

// --- [[route]] -------------------------------------------------------------------------------

#[test]
fn route_good() {
    let s = ok(&with(
        "[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\n\
         [[route]]\nprefix = \"0.0.0.0/0\"\nvia = [\"198.18.1.2\", \"198.18.3.2\"]\n\
         [[route]]\nprefix = \"198.19.0.0/16\"\naction = \"drop\"\n\
         [[route]]\nprefix = \"2001:db8:2::/48\"\nvia = [\"2001:db8:3::2\"]\n",
    ));
    assert_eq!(
        s.routes4,
        vec![
            RouteSpec {
                prefix: "198.18.2.0".parse().unwrap(),
                len: 24,
                target: RouteTarget::Via(vec!["198.18.1.2".parse().unwrap()])
            },
            RouteSpec {
                prefix: "0.0.0.0".parse().unwrap(),
                len: 0,
                target: RouteTarget::Via(vec![
                    "198.18.1.2".parse().unwrap(),
                    "198.18.3.2".parse().unwrap()
                ])
            },
            RouteSpec {
                prefix: "198.19.0.0".parse().unwrap(),
                len: 16,
                target: RouteTarget::Drop
            },
        ]
    );
    assert_eq!(
        s.routes6,
        vec![RouteSpec {
            prefix: "2001:db8:2::".parse().unwrap(),
            len: 48,
            target: RouteTarget::Via(vec!["2001:db8:3::2".parse().unwrap()])
        }]
    );
}

#[test]
fn route_host_bits() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.1/24\"\nvia = \"198.18.1.2\"\n"),
        B + 2,
        Some("prefix"),
        "`198.18.2.1/24` has host bits set (did you mean 198.18.2.0/24?)",
    );
    one_error(
        &with("[[route]]\nprefix = \"2001:db8:2::1/48\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "did you mean 2001:db8:2::/48?",
    );
}

#[test]
fn route_prefix_syntax() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "has no prefix length",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/40\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "invalid prefix length `40`",
    );
    one_error(
        &with("[[route]]\naction = \"drop\"\n"),
        B + 1,
        Some("prefix"),
        "missing required field",
    );
}

#[test]
fn route_prefixes_are_unique() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\naction = \"drop\"\n\n[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\n"),
        B + 6,
        Some("prefix"),
        "duplicate route 198.18.2.0/24: also defined at line 32",
    );
}

#[test]
fn route_via_must_be_a_neighbour_or_on_link_of_the_family() {
    // A host on a port's subnet is resolved by ARP: accepted without a [[neighbour]].
    let spec = ok(&with(
        "[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.9\"\n",
    ));
    assert_eq!(
        spec.routes4[0].target,
        RouteTarget::Via(vec!["198.18.1.9".parse().unwrap()])
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.9.9\"\n"),
        B + 3,
        Some("via"),
        "next hop 198.18.9.9 is neither a [[neighbour]] nor on a port's subnet; accepted: an address inside a port's `ip4` prefix (resolved by ARP), or the ip of a [[neighbour]]: 198.18.1.2, 198.18.3.2",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.1\"\n"),
        B + 3,
        Some("via"),
        "next hop 198.18.1.1 is neither",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = [\"198.18.1.2\", \"2001:db8:3::2\"]\n"),
        B + 3,
        Some("via"),
        "next hop 2001:db8:3::2 is IPv6 but the route is IPv4",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = []\n"),
        B + 3,
        Some("via"),
        "empty list",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = [\"198.18.1.2\", \"198.18.1.2\"]\n"),
        B + 3,
        Some("via"),
        "listed twice",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = 5\n"),
        B + 3,
        Some("via"),
        "expected a string or an array of strings",
    );
}

#[test]
fn route_via_or_action() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\naction = \"drop\"\n"),
        B + 4,
        Some("action"),
        "either `via` or `action`, not both",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\n"),
        B + 1,
        Some("via"),
        "missing required field; accepted: via = ",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\naction = \"reject\"\n"),
        B + 3,
        Some("action"),
        "`reject` is not a route action; accepted: \"drop\"",
    );
}

// --- [[xconnect]] ----------------------------------------------------------------------------

#[test]
fn xconnect_good() {
    let s = ok(&with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\ndst-mac = \"02:00:00:00:02:02\"\n[[xconnect]]\nfrom = \"out0\"\nto = \"in0\"\n"));
    assert_eq!(
        s.xconnects,
        vec![
            XconnectSpec {
                from: 0,
                to: 1,
                dst_mac: Some(mac("02:00:00:00:02:02"))
            },
            XconnectSpec {
                from: 1,
                to: 0,
                dst_mac: None
            }
        ]
    );
}

#[test]
fn xconnect_ports_must_exist() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"eth9\"\n"),
        B + 3,
        Some("to"),
        "no port is named `eth9`",
    );
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\n"),
        B + 1,
        Some("to"),
        "missing required field",
    );
}

#[test]
fn xconnect_from_at_most_once() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\n[[xconnect]]\nfrom = \"in0\"\nto = \"in0\"\n"),
        B + 5,
        Some("from"),
        "port `in0` is already the `from` of the [[xconnect]] at line 32",
    );
}

#[test]
fn xconnect_dst_mac() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\ndst-mac = \"02:00\"\n"),
        B + 4,
        Some("dst-mac"),
        "`02:00` is not a MAC address",
    );
}
