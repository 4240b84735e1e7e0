//! Every spelling of issue 32 item 12 (syntax Open vSwitch accepts that vecplane refused), one
//! table: each case's rules (and groups) must parse, print back as `ovs-ofctl -O OpenFlow13
//! dump-flows` (`-O OpenFlow15 dump-groups`) prints them (the text recorded here from
//! `ovs-ofctl parse-flow`/`parse-group` 3.1), parse again to the same rule, and behave as in Open
//! vSwitch: every packet of the case traced through a private Open vSwitch (netlab::ovs,
//! `ofproto/trace`) gives the datapath actions vecplane's translation gives (so the same bytes
//! leave the same ports). Needs root and `openvswitch-switch` for the second half (skipped on a
//! dev machine without them, a failure under CI=true).
//!
//! Normalised besides what `dpfmt` normalises: `set(skb_priority(..))` (`set_queue`) and
//! `set(skb_mark(..))` (`pkt_mark`) change nothing on the wire, and vecplane has no datapath
//! metadata to carry them, so OVS's are dropped; a select group is compared bucket by bucket
//! (vecplane's hash is its own: its answer must be OVS's with one of the buckets forced).

// Shared with ovs_oracle.rs, which uses the rest of them.
#[allow(dead_code)]
#[path = "oracle/dpfmt.rs"]
mod dpfmt;
#[allow(dead_code)]
#[path = "oracle/packet.rs"]
mod packet;

use dpfmt::{canonical_actions, format_dp_actions};
use flow::classifier::PrefixTracking;
use flow::ofctl::{self, OpenFlowVersion};
use flow::rule::FlowMod;
use flow::tables::{FlowTables, SwitchPorts};
use flow::FlowKey;
use netlab::ovs::{self, Ovs};

/// The OpenFlow ports of both switches (vecplane port id = OpenFlow number).
const PORTS: [u16; 4] = [1, 2, 3, 4];

/// One spelling: rules, groups, the dump of each as vecplane prints it (None: as written), and
/// packets (OVS flow syntax) to trace.
struct Case {
    name: &'static str,
    flows: &'static [(&'static str, Option<&'static str>)],
    groups: &'static [(&'static str, Option<&'static str>)],
    packets: &'static [&'static str],
}

const UDP: &str = "in_port=1,udp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,\
    nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=64,ip_dscp=0,nw_ecn=1,udp_src=1000,udp_dst=53";
const TCP: &str = "in_port=1,tcp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,\
    nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=64,ip_dscp=46,nw_ecn=1,tcp_src=1000,tcp_dst=80";
const TCP_TTL1: &str = "in_port=1,tcp,nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=1,tcp_src=1,\
    tcp_dst=80";
const TCP_OTHER_HOST: &str = "in_port=1,tcp,nw_src=198.18.0.1,nw_dst=198.18.1.77,nw_ttl=64,\
    tcp_src=1000,tcp_dst=80";
const TCP_OTHER_NET: &str = "in_port=1,tcp,nw_src=198.18.0.1,nw_dst=198.18.7.2,nw_ttl=64,\
    tcp_src=1000,tcp_dst=80";
const ARP: &str = "in_port=1,arp,dl_src=02:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,\
    arp_spa=198.18.0.1,arp_tpa=198.18.0.2";
const VLAN10: &str = "in_port=1,dl_vlan=10,dl_vlan_pcp=3,ip,nw_src=198.18.0.1,nw_dst=198.18.1.2";
const VLAN11: &str = "in_port=1,dl_vlan=11,dl_vlan_pcp=0,ip,nw_src=198.18.0.1,nw_dst=198.18.1.2";
const UNTAGGED: &str = "in_port=1,ip,nw_src=198.18.0.1,nw_dst=198.18.1.2";
const FROM2: &str = "in_port=2,udp,nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=64,udp_src=1,\
    udp_dst=2";

const CASES: &[Case] = &[
    Case {
        name: "mod_nw_ttl",
        // OVS prints `mod_nw_ttl:9` over 1.3, and the same action over 1.5 as vecplane does.
        flows: &[(
            "ip,in_port=1,actions=mod_nw_ttl:9,output:2",
            Some("ip,in_port=1 actions=set_field:9->nw_ttl,output:2"),
        )],
        groups: &[],
        packets: &[UDP, ARP],
    },
    Case {
        name: "set_field nw_tos",
        flows: &[(
            "ip,in_port=1,actions=set_field:32->nw_tos,output:2",
            Some("ip,in_port=1 actions=set_field:8->ip_dscp,output:2"),
        )],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "load NXM_OF_IP_TOS",
        flows: &[
            (
                "udp,in_port=1,actions=load:0x3->NXM_OF_IP_TOS[2..7],output:2",
                Some("udp,in_port=1 actions=set_field:3->ip_dscp,output:2"),
            ),
            (
                "tcp,in_port=1,actions=load:0xff->NXM_OF_IP_TOS[],load:0x1->NXM_OF_IP_TOS[0],\
                 output:3",
                Some("tcp,in_port=1 actions=set_field:63->ip_dscp,output:3"),
            ),
        ],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "nw_tos with ECN bits",
        flows: &[
            ("ip,nw_tos=0xb9,actions=output:2", Some("ip,nw_tos=184 actions=output:2")),
            ("priority=0,actions=output:3", Some("priority=0 actions=output:3")),
        ],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "vlan_vid and vlan_pcp",
        flows: &[
            ("vlan_vid=0x100a,actions=output:2", Some("dl_vlan=10 actions=output:2")),
            (
                "priority=10,vlan_vid=0x1000/0x1000,vlan_pcp=0,actions=output:3",
                Some("priority=10,dl_vlan_pcp=0 actions=output:3"),
            ),
            (
                "priority=5,vlan_vid=0,actions=output:4",
                Some("priority=5,vlan_tci=0x0000/0x1fff actions=output:4"),
            ),
        ],
        groups: &[],
        packets: &[VLAN10, VLAN11, UNTAGGED],
    },
    Case {
        name: "pkt_mark",
        flows: &[
            (
                "pkt_mark=0,actions=set_field:7->pkt_mark,resubmit(,1)",
                Some("pkt_mark=0 actions=set_field:0x7->pkt_mark,resubmit(,1)"),
            ),
            (
                "table=1,pkt_mark=0x7/0xf,actions=load:0x3->NXM_NX_PKT_MARK[4..5],resubmit(,2)",
                Some("table=1, pkt_mark=0x7/0xf actions=load:0x3->NXM_NX_PKT_MARK[4..5],resubmit(,2)"),
            ),
            ("table=1,priority=0,actions=output:4", Some("table=1, priority=0 actions=output:4")),
            ("table=2,pkt_mark=0x37,actions=output:2", Some("table=2, pkt_mark=0x37 actions=output:2")),
            ("table=2,priority=0,actions=output:3", Some("table=2, priority=0 actions=output:3")),
        ],
        groups: &[],
        packets: &[UDP, ARP],
    },
    Case {
        name: "output max_len",
        flows: &[(
            "in_port=1,actions=output(port=2,max_len=60),output(max_len=100,port=4),output:3",
            Some("in_port=1 actions=output(port=2,max_len=60),output(port=4,max_len=100),output:3"),
        )],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "output LOCAL",
        flows: &[("actions=output:LOCAL,output:2", Some("actions=LOCAL,output:2"))],
        groups: &[],
        packets: &[UDP],
    },
    Case {
        name: "note",
        flows: &[
            ("actions=note:01.02.aa,output:2", Some("actions=note:01.02.aa.00.00.00,output:2")),
            (
                "in_port=2,actions=note:0102030405060708,output:3",
                Some("in_port=2 actions=note:01.02.03.04.05.06.07.08.00.00.00.00.00.00,output:3"),
            ),
        ],
        groups: &[],
        packets: &[UDP, FROM2],
    },
    Case {
        name: "clone",
        flows: &[(
            "ip,actions=clone(set_field:198.18.9.9->ip_dst,mod_dl_dst:02:00:00:00:00:09,output:2),\
             output:3",
            Some(
                "ip actions=clone(set_field:198.18.9.9->ip_dst,set_field:02:00:00:00:00:09->eth_dst,\
                 output:2),output:3",
            ),
        )],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "write_actions and clear_actions",
        flows: &[
            (
                "ip,actions=write_actions(output:4,set_field:02:00:00:00:00:09->eth_dst,output:2),\
                 goto_table:1",
                Some(
                    "ip actions=write_actions(output:4,set_field:02:00:00:00:00:09->eth_dst,\
                     output:2),goto_table:1",
                ),
            ),
            (
                "table=1,udp,actions=mod_nw_ttl:5,write_actions(dec_ttl,set_field:7->ip_dscp)",
                Some(
                    "table=1, udp actions=set_field:5->nw_ttl,write_actions(dec_ttl,\
                     set_field:7->ip_dscp)",
                ),
            ),
            (
                "table=1,tcp,actions=output:3,clear_actions,write_actions(set_field:9->ip_dscp)",
                Some("table=1, tcp actions=output:3,clear_actions,write_actions(set_field:9->ip_dscp)"),
            ),
            (
                "arp,actions=write_actions(group:1,output:3)",
                Some("arp actions=write_actions(group:1,output:3)"),
            ),
        ],
        groups: &[(
            "group_id=1,type=all,bucket=output:2,bucket=output:4",
            Some("group_id=1,type=all,bucket=bucket_id:0,actions=output:2,bucket=bucket_id:1,actions=output:4"),
        )],
        packets: &[UDP, TCP, ARP],
    },
    Case {
        name: "exit",
        flows: &[
            ("udp,actions=output:2,exit,output:3", Some("udp actions=output:2,exit,output:3")),
            ("tcp,actions=resubmit(,1),output:4", Some("tcp actions=resubmit(,1),output:4")),
            (
                "table=1,actions=output:2,exit,output:3,write_actions(output:3)",
                Some("table=1, actions=output:2,exit,output:3,write_actions(output:3)"),
            ),
        ],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "move",
        flows: &[
            (
                "tcp,actions=move:NXM_OF_TCP_SRC[]->NXM_OF_TCP_DST[],\
                 move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],move:NXM_OF_ETH_SRC[0..23]->NXM_OF_ETH_DST[24..47],\
                 output:2",
                Some(
                    "tcp actions=move:NXM_OF_TCP_SRC[]->NXM_OF_TCP_DST[],\
                     move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],\
                     move:NXM_OF_ETH_SRC[0..23]->NXM_OF_ETH_DST[24..47],output:2",
                ),
            ),
            (
                "udp,actions=load:0x1f90->NXM_NX_REG0[0..15],move:reg0[0..15]->udp_dst[],\
                 move:NXM_OF_IP_PROTO[]->NXM_NX_REG1[0..7],resubmit(,1)",
                Some(
                    "udp actions=load:0x1f90->NXM_NX_REG0[0..15],\
                     move:NXM_NX_REG0[0..15]->NXM_OF_UDP_DST[],\
                     move:NXM_OF_IP_PROTO[]->NXM_NX_REG1[0..7],resubmit(,1)",
                ),
            ),
            ("table=1,reg1=17,actions=output:3", Some("table=1, reg1=0x11 actions=output:3")),
        ],
        groups: &[],
        packets: &[UDP, TCP],
    },
    Case {
        name: "dec_ttl with controller ids",
        flows: &[(
            "tcp,actions=dec_ttl(1,2),output:2",
            Some("tcp actions=dec_ttl(1,2),output:2"),
        )],
        groups: &[],
        packets: &[TCP, TCP_TTL1],
    },
    Case {
        name: "set_queue",
        flows: &[(
            "actions=set_queue:3,output:2,set_queue:0x10,output:3",
            Some("actions=set_queue:3,output:2,set_queue:16,output:3"),
        )],
        groups: &[],
        packets: &[UDP],
    },
    Case {
        name: "fast failover group",
        flows: &[
            ("udp,actions=group:1", Some("udp actions=group:1")),
            ("tcp,actions=group:2", Some("tcp actions=group:2")),
        ],
        groups: &[
            (
                "group_id=1,type=ff,bucket=watch_port:9,actions=output:2,\
                 bucket=watch_port:3,actions=output:3,bucket=watch_port:4,actions=output:4",
                Some(
                    "group_id=1,type=ff,bucket=bucket_id:0,watch_port:9,actions=output:2,\
                     bucket=bucket_id:1,watch_port:3,actions=output:3,\
                     bucket=bucket_id:2,watch_port:4,actions=output:4",
                ),
            ),
            (
                "group_id=2,type=fast_failover,bucket=watch_group:1,actions=output:4,\
                 bucket=watch_port:2,output:2",
                Some(
                    "group_id=2,type=ff,bucket=bucket_id:0,watch_group:1,actions=output:4,\
                     bucket=bucket_id:1,watch_port:2,actions=output:2",
                ),
            ),
        ],
        packets: &[UDP, TCP],
    },
    Case {
        name: "select group dp_hash",
        flows: &[("actions=group:5", None)],
        groups: &[(
            "group_id=5,type=select,selection_method=dp_hash,bucket=output:2,bucket=output:3",
            Some(
                "group_id=5,type=select,selection_method=dp_hash,bucket=bucket_id:0,\
                 actions=output:2,bucket=bucket_id:1,actions=output:3",
            ),
        )],
        packets: &[UDP, TCP],
    },
    Case {
        name: "select group selection_method_param",
        flows: &[("actions=group:6", None)],
        groups: &[(
            "group_id=6,type=select,selection_method=dp_hash,selection_method_param=7,\
             bucket=output:2,bucket=output:3",
            Some(
                "group_id=6,type=select,selection_method=dp_hash,selection_method_param=7,\
                 bucket=bucket_id:0,actions=output:2,bucket=bucket_id:1,actions=output:3",
            ),
        )],
        packets: &[UDP, TCP],
    },
    Case {
        name: "select group fields with a mask",
        flows: &[("actions=group:7", None)],
        groups: &[(
            "group_id=7,type=select,selection_method=hash,fields(ip_dst=255.255.255.0,tcp_dst),\
             bucket=output:2,bucket=output:3,bucket=output:4",
            Some(
                "group_id=7,type=select,selection_method=hash,fields(ip_dst=255.255.255.0,tcp_dst),\
                 bucket=bucket_id:0,actions=output:2,bucket=bucket_id:1,actions=output:3,\
                 bucket=bucket_id:2,actions=output:4",
            ),
        )],
        packets: &[TCP, TCP_OTHER_HOST, TCP_OTHER_NET],
    },
];

const ICMP: &str = "in_port=1,icmp,nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=64,icmp_type=8,\
    icmp_code=0";
const GRE: &str = "in_port=1,ip,nw_proto=47,nw_src=198.18.0.1,nw_dst=198.18.1.2,nw_ttl=64";

/// Rules that are rules only over OpenFlow 1.0 (`ovs-ofctl -O OpenFlow10`, vecplane's
/// `ctl -O OpenFlow10` and the API's `"openflow": "OpenFlow10"`): `mod_tp_*` and `mod_nw_tos`
/// are not checked against the match there.
const CASES_OF10: &[Case] = &[Case {
    name: "OpenFlow 1.0 mod_tp without an L4 match",
    flows: &[
        (
            "ip,actions=mod_tp_dst:80,mod_tp_src:7,output:2",
            Some("ip actions=mod_tp_dst:80,mod_tp_src:7,output:2"),
        ),
        (
            "arp,actions=mod_nw_tos:4,output:3",
            Some("arp actions=mod_nw_tos:4,output:3"),
        ),
    ],
    groups: &[],
    packets: &[UDP, TCP, ICMP, GRE, ARP],
}];

fn flows_text(c: &Case) -> String {
    c.flows.iter().map(|(f, _)| format!("{f}\n")).collect()
}

fn groups_text(c: &Case) -> String {
    c.groups.iter().map(|(g, _)| format!("{g}\n")).collect()
}

/// vecplane's tables for a case.
fn tables(c: &Case, version: OpenFlowVersion) -> FlowTables {
    let mut ports = SwitchPorts::new();
    for &p in &PORTS {
        ports.add(p, p, false).expect("port");
    }
    let mut mods: Vec<FlowMod> = c
        .groups
        .iter()
        .map(|(g, _)| {
            FlowMod::AddGroup(ofctl::parse_group(g).unwrap_or_else(|e| panic!("{g}: {e}")))
        })
        .collect();
    for (f, _) in c.flows {
        mods.push(FlowMod::Add(
            ofctl::parse_flow_as(f, version).unwrap_or_else(|e| panic!("{f}: {e}")),
        ));
    }
    FlowTables::new(ports)
        .with_prefix_tracking(PrefixTracking::IPV4)
        .apply(&mods)
        .unwrap_or_else(|e| panic!("{}: {e}", c.name))
}

/// Drop what changes nothing on the wire and that vecplane's datapath does not carry.
fn without_metadata(actions: &str) -> String {
    let kept: Vec<&str> = netlab::ovs::split_top_level(actions)
        .into_iter()
        .filter(|a| !a.starts_with("set(skb_priority(") && !a.starts_with("set(skb_mark("))
        .collect();
    kept.join(",")
}

/// OVS's canonical answers for `packet`: one, or, where a `dp_hash` select group makes OVS
/// recirculate with a datapath hash (which `ofproto/trace` cannot know), the answers of the
/// recirculated packet for dp_hash values 1..=64 (vecplane's hash is its own: any will do).
fn theirs(o: &Ovs, packet: &str) -> Vec<String> {
    let trace = |flow: &str| {
        let t = o.trace(flow).unwrap_or_else(|e| panic!("{e:#}"));
        if std::env::var("VECPLANE_TRACE").is_ok() {
            println!("{}", t.text);
        }
        o.openflow_actions(&t.datapath_actions)
    };
    let first = trace(packet);
    let recirc = first
        .split("recirc(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .filter(|_| first.starts_with("hash("));
    let Some(id) = recirc else {
        return vec![canonical_actions(&without_metadata(&first))];
    };
    let mut answers: Vec<String> = (1..=64)
        .map(|h| {
            let again = trace(&format!("recirc_id={id},dp_hash={h:#x},{packet}"));
            canonical_actions(&without_metadata(&again))
        })
        .collect();
    answers.sort();
    answers.dedup();
    answers
}

fn ours(t: &FlowTables, key: &FlowKey) -> String {
    let tr = t.translate(key);
    assert!(tr.error.is_none(), "{key:?}: {:?}", tr.error);
    canonical_actions(&format_dp_actions(
        key,
        &tr.mask,
        tr.actions.as_slice(),
        &|p| Some(p),
        &PORTS,
    ))
}

#[test]
fn every_spelling_parses_prints_as_ovs_and_round_trips() {
    let mut bad = Vec::new();
    for c in CASES {
        for (text, dump) in c.flows {
            let r = match ofctl::parse_flow(text) {
                Ok(r) => r,
                Err(e) => {
                    bad.push(format!("{}: `{text}` refused: {e}", c.name));
                    continue;
                }
            };
            let printed = ofctl::format_rule(&r, None);
            let want = dump.map_or_else(
                || text.to_string(),
                |d| d.split_whitespace().collect::<Vec<_>>().join(" "),
            );
            if printed != want {
                bad.push(format!(
                    "{}: `{text}` prints `{printed}`, want `{want}`",
                    c.name
                ));
            }
            let flat = printed.replacen(' ', ",", 1);
            match ofctl::parse_flow(&printed).or_else(|_| ofctl::parse_flow(&flat)) {
                Ok(again) if again == r => {}
                Ok(again) => bad.push(format!(
                    "{}: `{printed}` parses to {again:?}, not {r:?}",
                    c.name
                )),
                Err(e) => bad.push(format!("{}: `{printed}` does not parse again: {e}", c.name)),
            }
        }
        for (text, dump) in c.groups {
            let g = match ofctl::parse_group(text) {
                Ok(g) => g,
                Err(e) => {
                    bad.push(format!("{}: `{text}` refused: {e}", c.name));
                    continue;
                }
            };
            let printed = ofctl::format_group(&g);
            let want = dump.unwrap_or(text);
            if printed != want {
                bad.push(format!(
                    "{}: `{text}` prints `{printed}`, want `{want}`",
                    c.name
                ));
            }
            match ofctl::parse_group(&printed) {
                Ok(again) if again == g => {}
                Ok(again) => bad.push(format!("{}: `{printed}` parses to {again:?}", c.name)),
                Err(e) => bad.push(format!("{}: `{printed}` does not parse again: {e}", c.name)),
            }
        }
        // The rules are accepted by the tables too (ports, groups, writable fields).
        if bad.is_empty() {
            tables(c, OpenFlowVersion::default());
        }
    }
    for c in CASES_OF10 {
        for (text, dump) in c.flows {
            if ofctl::parse_flow(text).is_ok() {
                bad.push(format!("{}: `{text}` accepted as OpenFlow 1.3", c.name));
            }
            match ofctl::parse_flow_as(text, OpenFlowVersion::OpenFlow10) {
                Ok(r) => {
                    let printed = ofctl::format_rule(&r, None);
                    if Some(printed.as_str()) != *dump {
                        bad.push(format!("{}: `{text}` prints `{printed}`", c.name));
                    }
                    let again = ofctl::parse_flow_as(&printed, OpenFlowVersion::OpenFlow10);
                    if again.as_ref().ok() != Some(&r) {
                        bad.push(format!("{}: `{printed}` parses to {again:?}", c.name));
                    }
                }
                Err(e) => bad.push(format!("{}: `{text}` refused as OpenFlow 1.0: {e}", c.name)),
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The fuzz seed list (golden/ofctl/spellings.txt, which scripts/fuzz_seeds.py feeds to the
/// ofctl_parse target) holds every rule and group of the table.
#[test]
fn the_fuzz_seed_list_holds_every_spelling() {
    let seeds = include_str!("golden/ofctl/spellings.txt");
    let lines: Vec<&str> = seeds.lines().collect();
    let missing: Vec<&str> = CASES
        .iter()
        .chain(CASES_OF10)
        .flat_map(|c| c.flows.iter().chain(c.groups.iter()).map(|(t, _)| *t))
        .filter(|t| !lines.contains(t))
        .collect();
    assert!(
        missing.is_empty(),
        "add to golden/ofctl/spellings.txt: {missing:#?}"
    );
}

/// Bring the bridge's ports up and wait until Open vSwitch sees them live (a fast failover
/// bucket watching a port that is down is not live; vecplane's ports are up unless marked).
fn ports_up(o: &Ovs) {
    for p in PORTS {
        let dev = format!("p{p}");
        let st = std::process::Command::new("ip")
            .args(["-n", o.namespace(), "link", "set", &dev, "up"])
            .status()
            .expect("ip link");
        assert!(st.success(), "ip -n {} link set {dev} up", o.namespace());
    }
    let mgmt = format!(
        "unix:{}",
        o.dir().join(format!("{}.mgmt", ovs::BRIDGE)).display()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = std::process::Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "dump-ports-desc", &mgmt])
            .output()
            .expect("ovs-ofctl dump-ports-desc");
        let text = String::from_utf8_lossy(&out.stdout);
        let live = text.matches("LIVE").count();
        if live >= PORTS.len() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ports not live in Open vSwitch after 20 s:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The same rules and packets through Open vSwitch and vecplane give the same datapath actions.
#[test]
fn every_spelling_behaves_as_in_ovs() {
    if let Some(why) = ovs::missing_prerequisite() {
        testenv::skip(&why);
        return;
    }
    let o = Ovs::start(&PORTS).expect("Open vSwitch starts");
    ports_up(&o);
    let mut bad = Vec::new();
    let all = CASES
        .iter()
        .map(|c| (c, OpenFlowVersion::OpenFlow13))
        .chain(CASES_OF10.iter().map(|c| (c, OpenFlowVersion::OpenFlow10)));
    for (c, version) in all {
        o.del_flows().expect("del-flows");
        if !c.groups.is_empty() {
            o.add_groups(&groups_text(c))
                .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
        }
        if version == OpenFlowVersion::OpenFlow10 {
            // Over OpenFlow 1.0 a mod-flows that selects nothing adds the rule.
            for (f, _) in c.flows {
                o.mod_flows("OpenFlow10", f, true)
                    .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
            }
        } else {
            o.add_flows(&flows_text(c))
                .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
        }
        let t = tables(c, version);
        for p in c.packets {
            let key = packet::parse_packet(p).expect("packet");
            let mine = ours(&t, &key);
            let mut answers = theirs(&o, p);
            // A select group: OVS's answers with each bucket forced in turn.
            for (g, _) in c.groups.iter().filter(|(g, _)| g.contains("type=select")) {
                let mut parts = g.split(",bucket=");
                let head = parts.next().unwrap_or_default();
                for b in parts {
                    o.mod_group(&format!("{head},bucket={b}"))
                        .expect("mod-group");
                    answers.extend(theirs(&o, p));
                }
                o.mod_group(g).expect("mod-group");
            }
            if !answers.contains(&mine) {
                bad.push(format!(
                    "{}: {p}:\n  vecplane {mine}\n  OVS      {answers:?}",
                    c.name
                ));
            } else if std::env::var("VECPLANE_SHOW").is_ok() {
                println!("{}: {p}: {mine}", c.name);
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// vecplane alone, what the OVS comparison cannot show: a fast failover group skips a bucket
/// whose port is marked down (and one watching a group with no live bucket), and a select group
/// hashing `ip_dst=255.255.255.0` consults only those bits (two hosts of one /24 go the same
/// way).
#[test]
fn fast_failover_follows_port_liveness_and_hash_masks_are_honoured() {
    let ff = &CASES
        .iter()
        .find(|c| c.name == "fast failover group")
        .expect("case");
    let mut ports = SwitchPorts::new();
    for &p in &PORTS {
        ports.add(p, p, false).expect("port");
    }
    ports.set_live(3, false);
    let mods: Vec<FlowMod> = ff
        .groups
        .iter()
        .map(|(g, _)| FlowMod::AddGroup(ofctl::parse_group(g).expect("group")))
        .chain(
            ff.flows
                .iter()
                .map(|(f, _)| FlowMod::Add(ofctl::parse_flow(f).expect("flow"))),
        )
        .collect();
    let t = FlowTables::new(ports.clone()).apply(&mods).expect("tables");
    let udp = packet::parse_packet(UDP).expect("packet");
    assert_eq!(ours(&t, &udp), "4", "port 3 is down: the next live bucket");
    ports.set_live(4, false);
    let t = FlowTables::new(ports).apply(&mods).expect("tables");
    assert_eq!(ours(&t, &udp), "drop", "no live bucket");
    let tcp = packet::parse_packet(TCP).expect("packet");
    assert_eq!(
        ours(&t, &tcp),
        "2",
        "group 1 is dead: group 2 takes its second bucket"
    );

    let sel = CASES
        .iter()
        .find(|c| c.name == "select group fields with a mask")
        .expect("case");
    let t = tables(sel, OpenFlowVersion::default());
    let a = packet::parse_packet(TCP).expect("packet");
    let b = packet::parse_packet(TCP_OTHER_HOST).expect("packet");
    assert_eq!(ours(&t, &a), ours(&t, &b));
    let mask = t.translate(&a).mask;
    assert_eq!(mask.get(flow::Field::NwDst), 0xffff_ff00);
}
