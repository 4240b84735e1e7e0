//! Config tests of `check_files` and of the example configs under examples/.

use super::*;

// --- check_files and the examples ------------------------------------------------------------

#[test]
fn check_files_reports_missing_rx_and_tx_dir() {
    let d = TempDir::new();
    let text = pcap_port("rx = \"in.pcap\"\ntx = \"nodir/out.pcap\"\n");
    let c = Config::parse(&text, FILE, &d.0).unwrap();
    let e = c.check_files().unwrap_err();
    let v = e.issues();
    assert_eq!(v.len(), 2, "{e}");
    check(&v[0], 5, Some("rx"), "cannot open");
    check(&v[1], 6, Some("tx"), "does not exist");
    std::fs::write(d.0.join("in.pcap"), b"").unwrap();
    std::fs::create_dir(d.0.join("nodir")).unwrap();
    c.check_files().unwrap();
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn router_example_round_trips() {
    let dir = examples_dir();
    let spec = load_config(&dir.join("router.toml")).unwrap();
    let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let expected = DataplaneSpec {
        buffers: 16384,
        data_size: 2048,
        worker_cpu: None,
        ports: vec![
            PortSpec {
                name: "in0".into(),
                mac: mac("02:00:00:00:01:01"),
                mtu: 1500,
                ip4: vec![(v4("198.18.1.1"), 24)],
                ip6: vec![(v6("2001:db8:1::1"), 64)],
                driver: PortDriver::Tap {
                    name: "vp-in0".into(),
                    vnet_hdr: false,
                    offloads: false,
                },
            },
            PortSpec {
                name: "out0".into(),
                mac: mac("02:00:00:00:02:01"),
                mtu: 1500,
                ip4: vec![(v4("198.18.2.1"), 24)],
                ip6: vec![(v6("2001:db8:2::1"), 64)],
                driver: PortDriver::Tap {
                    name: "vp-out0".into(),
                    vnet_hdr: false,
                    offloads: false,
                },
            },
        ],
        routes4: vec![
            RouteSpec {
                prefix: v4("198.18.100.0"),
                len: 24,
                target: RouteTarget::Via(vec![v4("198.18.2.2")]),
            },
            RouteSpec {
                prefix: v4("198.18.200.0"),
                len: 24,
                target: RouteTarget::Via(vec![v4("198.18.1.2"), v4("198.18.2.2")]),
            },
            RouteSpec {
                prefix: v4("198.19.255.0"),
                len: 24,
                target: RouteTarget::Drop,
            },
        ],
        routes6: vec![
            RouteSpec {
                prefix: v6("2001:db8:100::"),
                len: 48,
                target: RouteTarget::Via(vec![v6("2001:db8:2::2")]),
            },
            RouteSpec {
                prefix: v6("2001:db8:200::"),
                len: 48,
                target: RouteTarget::Via(vec![v6("2001:db8:1::2"), v6("2001:db8:2::2")]),
            },
        ],
        neighbours: vec![
            NeighbourSpec {
                ip: "198.18.1.2".parse().unwrap(),
                mac: mac("02:00:00:00:01:02"),
                port: 0,
            },
            NeighbourSpec {
                ip: "198.18.2.2".parse().unwrap(),
                mac: mac("02:00:00:00:02:02"),
                port: 1,
            },
            NeighbourSpec {
                ip: "2001:db8:1::2".parse().unwrap(),
                mac: mac("02:00:00:00:01:02"),
                port: 0,
            },
            NeighbourSpec {
                ip: "2001:db8:2::2".parse().unwrap(),
                mac: mac("02:00:00:00:02:02"),
                port: 1,
            },
        ],
        xconnects: vec![],
        ip: IpPolicy {
            ip4_options: OptionsPolicy::Forward,
            icmp_errors_per_second: 1000,
            icmp_errors_burst: 100,
        },
        ..DataplaneSpec::default()
    };
    assert_eq!(spec, expected);
}

#[test]
fn l2xc_example_loads() {
    let dir = examples_dir();
    let spec = load_config(&dir.join("l2xc.toml")).unwrap();
    assert_eq!(spec.ports.len(), 2);
    assert_eq!(
        spec.xconnects,
        vec![XconnectSpec {
            from: 0,
            to: 1,
            dst_mac: Some(mac("02:00:00:00:02:02"))
        }]
    );
}

#[test]
fn examples_pass_check_files_as_shipped() {
    // Every file an example names (l2xc's capture) is shipped beside it.
    for name in [
        "router.toml",
        "l2xc.toml",
        "flow-switch.toml",
        "vm-bridge.toml",
    ] {
        let c = Config::load(&examples_dir().join(name)).unwrap();
        c.check_files()
            .unwrap_or_else(|e| panic!("{name} as shipped: {e}"));
    }
}
