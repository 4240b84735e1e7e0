//! Open vSwitch as the oracle of vecplane's flow tables. The golden rule sets and random rule
//! sets are loaded into a private Open vSwitch 3.1 (netlab::ovs, netdev datapath; needs root and
//! `openvswitch-switch`, else each OVS test prints `skipped: <why>`, and fails under CI=true)
//! and every packet is traced. Module `compare` checks vecplane's tables (`flow::tables`,
//! `flow::ofctl`, with OVS's default prefix tracking) against it: for every golden packet the
//! datapath actions and the megaflow, and for random rule sets changed step by step (add,
//! mod, del) the rule dumps after each change and the actions and megaflows of random packets.
//! The rest checks the oracle itself: the rule sets load, the packets trace, OVS still answers
//! what tests/golden/rulesets/*.expected recorded (VECPLANE_BLESS=1 rewrites them), the
//! packet and action formats round-trip.
//!
//! What is normalised, all of it representation (see `dpfmt`):
//! - actions: ports in OpenFlow numbers; OVS's `LOCAL` port and its send to an absent
//!   controller (when dec_ttl runs out) dropped; header changes after the last output (they
//!   reach no port) dropped; runs of consecutive outputs sorted (OVS orders flood by a hash);
//! - megaflows: items as a set; `recirc_id=0` and `eth` dropped; the "untagged" `vlan_tci`
//!   item dropped (OVS's datapath key says "untagged" with its outer eth_type, vecplane's with
//!   the CFI bit of `vlan_tci`).
//!
//! Where vecplane deliberately differs, and how the test allows it:
//! - a select group's bucket is chosen by vecplane's own hash: its answer (actions and
//!   megaflow together) must be OVS's with one of the buckets forced (`select_alternatives`);
//! - an `ip_dscp` write: vecplane's megaflow keeps `nw_proto` (a packet with nw_proto 0 gets no
//!   IP rewrite, in both), OVS's omits it (`megaflows_agree`);
//! - `mod-flows` follows ovs-ofctl's default protocol, OpenFlow 1.0 (a modify that selects
//!   nothing adds the rule; the cookie is set), so the test sends modifies over OpenFlow 1.0;
//! - not generated, since they differ on purpose: a prerequisite OVS ignores (`tp_dst`
//!   without `tcp`: vecplane refuses the rule); a second VLAN tag (vecplane's key holds one:
//!   VLANs are pushed only onto untagged packets, and `mod_vlan_vid` only where the match says
//!   whether there is a tag, since OpenFlow 1.3 makes it a push there); ties between
//!   overlapping rules of one priority (OVS picks arbitrarily).

#[path = "oracle/dpfmt.rs"]
mod dpfmt;
#[path = "oracle/golden.rs"]
mod golden;
#[path = "oracle/packet.rs"]
mod packet;
#[path = "oracle/random.rs"]
mod random;

use dpfmt::{canonical_actions, canonical_megaflow, format_dp_actions};
use flow::{DpAction, Field, FlowKey};
use netlab::ovs::{self, Ovs};
use std::time::Instant;

/// The OpenFlow ports of the oracle's bridge (vecplane port id = OpenFlow number in these tests).
const PORTS: [u16; 4] = random::PORTS;

macro_rules! require_ovs {
    () => {
        if let Some(why) = ovs::missing_prerequisite() {
            testenv::skip(&why);
            return;
        }
    };
}

/// OVS's answer for one packet: canonical actions in OpenFlow ports, and the megaflow.
fn oracle(o: &Ovs, flow: &str) -> (String, String) {
    let t = o.trace(flow).unwrap_or_else(|e| panic!("{e:#}"));
    (
        canonical_actions(&o.openflow_actions(&t.datapath_actions)),
        t.megaflow,
    )
}

/// Load rule set text into `o` (after deleting what was there).
fn load(o: &Ovs, flows: &str, groups: &str) {
    o.del_flows().expect("del-flows");
    if !groups.trim().is_empty() {
        o.add_groups(groups).unwrap_or_else(|e| panic!("{e:#}"));
    }
    o.add_flows(flows).unwrap_or_else(|e| panic!("{e:#}"));
    let n = o.dump_flows().expect("dump-flows").len();
    assert_eq!(n, golden::rule_count(flows), "rules in OVS");
}

/// The answers (actions, megaflow) OVS gives for `flow` with each bucket of each select group
/// forced in turn (vecplane picks a select group's bucket with its own hash, so its answer is
/// right when it is one of these). The groups are restored afterwards.
fn select_alternatives(o: &Ovs, groups: &str, flow: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for g in groups.lines().map(str::trim) {
        if g.starts_with('#') || !g.contains("type=select") {
            continue;
        }
        let mut parts = g.split(",bucket=");
        let head = parts.next().unwrap_or_default();
        for b in parts {
            o.mod_group(&format!("{head},bucket={b}"))
                .unwrap_or_else(|e| panic!("{e:#}"));
            out.push(oracle(o, flow));
        }
        o.mod_group(g).unwrap_or_else(|e| panic!("{e:#}"));
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn golden_packets_parse_and_round_trip() {
    for set in golden::load_all() {
        assert!(!set.packets.is_empty(), "{}: no packets", set.name);
        for p in &set.packets {
            let k = packet::parse_packet(p).unwrap_or_else(|e| panic!("{}: {p}: {e}", set.name));
            let again = packet::parse_packet(&packet::to_ovs_flow(&k)).expect("reparse");
            assert_eq!(again, k, "{}: {p}", set.name);
        }
    }
    assert!(packet::parse_packet("in_port=1,bogus=2").is_err());
    assert!(packet::parse_packet("tcp,nw_src=198.18.1.300").is_err());
}

#[test]
fn random_packets_round_trip_through_ovs_syntax() {
    let mut rng = random::Rng::new(7);
    for _ in 0..2000 {
        let k = random::random_packet(&mut rng);
        let text = packet::to_ovs_flow(&k);
        assert_eq!(packet::parse_packet(&text), Ok(k), "{text}");
    }
}

#[test]
fn vecplane_actions_are_written_as_ovs_writes_them() {
    let id = |p: u16| Some(p);
    let k = packet::parse_packet(
        "in_port=1,tcp,nw_src=198.18.1.1,nw_dst=198.18.2.2,nw_ttl=64,tcp_src=1000,tcp_dst=80",
    )
    .expect("packet");
    let mut wc = FlowKey::ZERO;
    wc.unwildcard(Field::NwSrc);
    wc.unwildcard(Field::TpDst);
    let set = |field: Field, value: u128| DpAction::Set {
        field,
        value,
        mask: field.all_ones(),
    };
    // Rewrites wait for the next output and come out grouped by header, in OVS's order.
    let acts = [
        set(Field::TpDst, 8080),
        set(Field::NwSrc, 0xc612_0707),
        DpAction::Output(2),
        set(Field::EthDst, 0x0200_0000_0002),
        set(Field::EthSrc, 0x0200_0000_0001),
        DpAction::Output(3),
    ];
    assert_eq!(
        format_dp_actions(&k, &wc, &acts, &id, &PORTS),
        "set(ipv4(src=198.18.7.7)),set(tcp(dst=8080)),2,set(eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)),3"
    );
    // A masked rewrite shows the megaflow's mask; DSCP and ECN make one tos.
    let k = packet::parse_packet("in_port=1,udp,nw_dst=198.19.2.2,nw_ttl=64").expect("packet");
    let mut wc = FlowKey::ZERO;
    wc.set(Field::NwDst, 0xffff_0000);
    wc.unwildcard(Field::IpDscp);
    wc.unwildcard(Field::NwEcn);
    let acts = [
        DpAction::Set {
            field: Field::NwDst,
            value: 0xc612_0000,
            mask: 0xffff_0000,
        },
        set(Field::IpDscp, 8),
        set(Field::NwEcn, 1),
        DpAction::Output(2),
    ];
    assert_eq!(
        format_dp_actions(&k, &wc, &acts, &id, &PORTS),
        "set(ipv4(dst=198.18.0.0/255.255.0.0,tos=0x21)),2"
    );
    // A retag is a pop and a push; a flood is every other port; nothing is "drop".
    let k = packet::parse_packet("in_port=2,dl_vlan=10,dl_vlan_pcp=5").expect("packet");
    let acts = [
        DpAction::Set {
            field: Field::VlanVid,
            value: 20,
            mask: 0xfff,
        },
        DpAction::Output(3),
        DpAction::PopVlan,
        DpAction::Flood,
    ];
    assert_eq!(
        format_dp_actions(&k, &FlowKey::ZERO, &acts, &id, &PORTS),
        "pop_vlan,push_vlan(vid=20,pcp=5),3,pop_vlan,1,3,4"
    );
    assert_eq!(format_dp_actions(&k, &k, &[], &id, &PORTS), "drop");
    // ARP fields as OVS names them.
    let k = packet::parse_packet("in_port=2,arp,arp_op=1,arp_spa=198.18.1.1,arp_tpa=198.18.2.2")
        .expect("packet");
    let mut wc = FlowKey::ZERO;
    for f in [Field::NwDst, Field::NwProto] {
        wc.unwildcard(f);
    }
    assert_eq!(
        format_dp_actions(
            &k,
            &wc,
            &[
                set(Field::NwDst, 0xc612_0909),
                set(Field::NwProto, 2),
                set(Field::ArpSha, 0x0200_0000_000c),
                DpAction::Output(1)
            ],
            &id,
            &PORTS
        ),
        "set(arp(tip=198.18.9.9,op=2,sha=02:00:00:00:00:0c)),1"
    );
}

#[test]
fn canonical_forms() {
    assert_eq!(
        canonical_actions("LOCAL,3,1,push_vlan(vid=5,pcp=0),4,2"),
        "1,3,push_vlan(vid=5,pcp=0),2,4"
    );
    assert_eq!(canonical_actions("drop"), "drop");
    assert_eq!(canonical_actions("LOCAL"), "drop");
    assert_eq!(
        canonical_actions(
            "set(ipv4(ttl=63)),2,set(ipv4(dst=198.18.0.3)),pop_vlan,userspace(pid=0)"
        ),
        "set(ipv4(ttl=63)),2"
    );
    assert_eq!(
        canonical_actions("userspace(pid=0,controller(reason=2,dont_send=1,continuation=0,recirc_id=4,rule_cookie=0,controller_id=0,max_len=65535))"),
        "drop"
    );
    assert_eq!(
        canonical_megaflow("recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=80"),
        ["in_port=1", "nw_frag=no", "tcp", "tp_dst=80"]
    );
    for untagged in [
        "vlan_tci=0x0000",
        "vlan_tci=0x0000/0x1fff",
        "vlan_tci=0x0000/0x1000",
    ] {
        assert_eq!(
            canonical_megaflow(&format!(
                "recirc_id=0,eth,ip,in_port=1,{untagged},nw_frag=no"
            )),
            ["in_port=1", "ip", "nw_frag=no"]
        );
    }
    assert_eq!(
        canonical_megaflow("ip,vlan_tci=0x0000/0x0fff"),
        ["ip", "vlan_tci=0x0000/0x0fff"]
    );
}

/// Every golden rule set loads into Open vSwitch, every packet traces to known ports, and OVS
/// answers what was recorded (VECPLANE_BLESS=1 records instead).
#[test]
fn golden_rule_sets_against_recorded_ovs_answers() {
    require_ovs!();
    let bless = std::env::var("VECPLANE_BLESS").is_ok_and(|v| v == "1");
    let o = Ovs::start(&PORTS).expect("Open vSwitch starts");
    let t0 = Instant::now();
    let mut traces = 0;
    let mut failures = Vec::new();
    for set in golden::load_all() {
        load(&o, &set.flows, &set.groups);
        let mut rows = Vec::new();
        for p in &set.packets {
            let (actions, megaflow) = oracle(&o, p);
            traces += 1;
            assert!(!actions.contains("dp?"), "{}: {p}: {actions}", set.name);
            if !set.groups.is_empty() {
                let alts: Vec<String> = select_alternatives(&o, &set.groups, p)
                    .into_iter()
                    .map(|(a, _)| a)
                    .collect();
                traces += alts.len();
                if !alts.is_empty() && !alts.contains(&actions) {
                    failures.push(format!(
                        "{}: {p}: OVS's {actions} is none of its per-bucket answers {alts:?}",
                        set.name
                    ));
                }
            }
            rows.push((p.clone(), actions, megaflow));
        }
        if bless {
            golden::write_expected(&set.name, &rows);
        } else if set.expected != rows {
            failures.push(format!(
                "{}: OVS answers differ from {}.expected (VECPLANE_BLESS=1 rewrites it):\n{}",
                set.name,
                set.name,
                rows.iter()
                    .zip(set.expected.iter().map(Some).chain(std::iter::repeat(None)))
                    .filter(|(r, e)| Some(*r) != *e)
                    .map(|(r, e)| format!("  now {r:?}\n  was {e:?}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    println!(
        "{traces} traces of the golden rule sets in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Random rule sets load into Open vSwitch and random packets trace (the oracle half of the
/// randomized differential test; prints its cost).
#[test]
fn random_rule_sets_trace_in_ovs() {
    require_ovs!();
    let o = Ovs::start(&PORTS).expect("Open vSwitch starts");
    let seed = 0x5eed_0001;
    let mut rng = random::Rng::new(seed);
    let t0 = Instant::now();
    let (mut traces, mut drops) = (0, 0);
    for _ in 0..10 {
        let rules = random::random_ruleset(&mut rng, 40);
        load(&o, &rules, "");
        for _ in 0..100 {
            let k = random::random_packet(&mut rng);
            let (actions, _) = oracle(&o, &packet::to_ovs_flow(&k));
            traces += 1;
            drops += usize::from(actions == "drop");
            assert!(!actions.contains("dp?"), "{actions}");
        }
    }
    println!(
        "seed {seed:#x}: {traces} random traces ({drops} drops) in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        drops < traces,
        "every random packet dropped: the pools do not overlap"
    );
}

/// The differential comparison with vecplane's tables.
mod compare {
    use super::*;
    use flow::classifier::PrefixTracking;
    use flow::ofctl;
    use flow::rule::{FlowMod, Match};
    use flow::tables::{FlowTables, SwitchPorts};

    /// vecplane's tables with `flows` and `groups`, ports 1..=4 as OpenFlow ports 1..=4, with
    /// Open vSwitch's default prefix tracking (`nw_dst`, `nw_src`).
    fn tables(flows: &str, groups: &str) -> FlowTables {
        let mut ports = SwitchPorts::new();
        for &p in &PORTS {
            ports.add(p, p, false).expect("port");
        }
        let mut mods: Vec<FlowMod> = groups
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                FlowMod::AddGroup(ofctl::parse_group(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            })
            .collect();
        let rules = ofctl::parse_flows_file(flows).unwrap_or_else(|e| panic!("{e}"));
        mods.extend(rules.into_iter().map(FlowMod::Add));
        FlowTables::new(ports)
            .with_prefix_tracking(PrefixTracking::IPV4)
            .apply(&mods)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// vecplane's answer for `key`: canonical actions and the megaflow text.
    fn ours(t: &FlowTables, key: &FlowKey) -> (String, String) {
        let tr = t.translate(key);
        assert!(tr.error.is_none(), "{key:?}: {:?}", tr.error);
        let text = format_dp_actions(key, &tr.mask, tr.actions.as_slice(), &|p| Some(p), &PORTS);
        let m = Match {
            key: key.masked(&tr.mask),
            mask: tr.mask,
        };
        (canonical_actions(&text), ofctl::format_megaflow(&m))
    }

    #[test]
    fn golden_rule_sets_match_ovs() {
        require_ovs!();
        let o = Ovs::start(&PORTS).expect("Open vSwitch starts");
        let mut failures = Vec::new();
        for set in golden::load_all() {
            load(&o, &set.flows, &set.groups);
            let t = tables(&set.flows, &set.groups);
            for p in &set.packets {
                let key = packet::parse_packet(p).expect("packet");
                let (theirs, their_mf) = oracle(&o, p);
                let (mine, my_mf) = ours(&t, &key);
                let same = |(a, m): &(String, String)| {
                    *a == mine && canonical_megaflow(m) == canonical_megaflow(&my_mf)
                };
                // Deliberate difference: vecplane's select-group hash is not OVS's, so where
                // the answers differ, vecplane's must be OVS's answer with one bucket forced.
                let ok = same(&(theirs.clone(), their_mf.clone()))
                    || (!set.groups.is_empty()
                        && select_alternatives(&o, &set.groups, p).iter().any(same));
                if !ok {
                    failures.push(format!(
                        "{}: {p}\n  ovs      {theirs}\n           {their_mf}\n  vecplane {mine}\n           {my_mf}",
                        set.name
                    ));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} differences:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    /// True when the megaflows agree: equal in canonical form, or differing only by a
    /// deliberate difference: Open vSwitch 3.1 does not consult `nw_proto` when an action
    /// writes `ip_dscp` (every other L3 write does), although its commit leaves a packet with
    /// `nw_proto` 0 unrewritten, so its megaflow would rewrite such a packet; vecplane's
    /// megaflow keeps the protocol whenever it rewrites an IP header.
    fn megaflows_agree(theirs: &str, mine: &str, actions: &str) -> bool {
        let (t, m) = (canonical_megaflow(theirs), canonical_megaflow(mine));
        if t == m {
            return true;
        }
        if !(actions.contains("set(ipv4(") && actions.contains("tos=")
            || actions.contains("set(ipv6(") && actions.contains("tclass="))
        {
            return false;
        }
        let without_proto: Vec<String> = m
            .iter()
            .filter(|i| !i.starts_with("nw_proto="))
            .map(|i| match i.as_str() {
                "tcp" | "udp" | "icmp" | "sctp" => "ip".to_string(),
                "tcp6" | "udp6" | "icmp6" | "sctp6" => "ipv6".to_string(),
                _ => i.clone(),
            })
            .collect();
        let mut without_proto = without_proto;
        without_proto.sort();
        without_proto.dedup();
        without_proto == t
    }

    /// vecplane's rules as `ovs-ofctl --no-stats dump-flows` prints them, sorted.
    fn dump(t: &FlowTables) -> Vec<String> {
        let mut v: Vec<String> = t
            .rules()
            .map(|(_, r)| ofctl::format_rule(r, None))
            .collect();
        v.sort();
        v
    }

    /// The rules as `(table, priority, match text)`, for strict changes to pick from.
    fn existing(t: &FlowTables) -> Vec<(u8, u16, String)> {
        t.rules()
            .map(|(_, r)| (r.table, r.priority, ofctl::format_match(&r.m)))
            .collect()
    }

    /// Apply `change` to vecplane's tables (None: a change whose outcome OVS leaves open,
    /// skipped) and to OVS.
    fn apply_change(
        o: &Ovs,
        t: &FlowTables,
        change: &random::Change,
        used: &mut random::RuleGen,
    ) -> Option<FlowTables> {
        use ofctl::FlowModKind as K;
        use random::Change as C;
        let (kind, text) = match change {
            C::Add(text) => (K::Add, text),
            C::Modify { text, strict } => (if *strict { K::ModifyStrict } else { K::Modify }, text),
            C::Delete { text, strict } => (if *strict { K::DeleteStrict } else { K::Delete }, text),
        };
        let m = ofctl::parse_flow_mod(kind, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let new = t
            .apply(std::slice::from_ref(&m))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        if let (C::Modify { strict: false, .. }, flow::rule::FlowMod::Modify { filter, .. }) =
            (change, &m)
        {
            // A loose modify that selects nothing adds its rule at the default priority; a
            // second such rule could tie with the first, so the generator's priorities must
            // not have it yet.
            if new.len() > t.len()
                && !used.take(
                    usize::from(filter.table.unwrap_or(0)),
                    flow::rule::DEFAULT_PRIORITY,
                )
            {
                return None;
            }
        }
        let r = match change {
            C::Add(text) => o.add_flows(text),
            // OpenFlow 1.0 (as ovs-ofctl's default and vecplane): a modify that selects
            // nothing adds the rule; over 1.3 OVS would add nothing.
            C::Modify { text, strict } => o.mod_flows("OpenFlow10", text, *strict),
            C::Delete { text, strict } => o.del_flows_matching(text, *strict),
        };
        r.unwrap_or_else(|e| panic!("{e:#}"));
        Some(new)
    }

    /// Random rule sets, each then changed step by step; after every step the rule dumps and,
    /// for random packets, the datapath actions and the megaflows must be equal (megaflows
    /// as `megaflows_agree` says). A failure prints the seed (replay with
    /// VECPLANE_ORACLE_SEED=N), the rule set and the changes so far.
    #[test]
    fn random_rule_sets_and_changes_match_ovs() {
        require_ovs!();
        let o = Ovs::start(&PORTS).expect("Open vSwitch starts");
        let seed = std::env::var("VECPLANE_ORACLE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_0002_u64);
        let mut rng = random::Rng::new(seed);
        let t0 = Instant::now();
        let (mut traces, mut changes, mut mf_diffs) = (0, 0, Vec::new());
        for round in 0..20 {
            let mut used = random::RuleGen::default();
            used.groups = round % 2 == 1;
            let groups = if used.groups {
                random::random_groups(&mut rng)
            } else {
                String::new()
            };
            let rules = random::random_ruleset_in(&mut rng, 40, &mut used);
            load(&o, &rules, &groups);
            let mut t = tables(&rules, &groups);
            let mut log = vec![format!("groups:\n{groups}rules:\n{rules}")];
            for step in 0..=12 {
                if step > 0 {
                    let ex = existing(&t);
                    let change = random::random_change(&mut rng, &ex, &mut used);
                    let Some(next) = apply_change(&o, &t, &change, &mut used) else {
                        continue;
                    };
                    t = next;
                    changes += 1;
                    log.push(format!("{change:?}"));
                    let theirs = {
                        let mut v = o.dump_flows().expect("dump-flows");
                        v.sort();
                        v
                    };
                    assert_eq!(
                        dump(&t),
                        theirs,
                        "seed {seed:#x} round {round} step {step}: rules differ after\n{}",
                        log.join("\n")
                    );
                }
                for _ in 0..25 {
                    let key = random::random_packet(&mut rng);
                    let flow = packet::to_ovs_flow(&key);
                    let (theirs, their_mf) = oracle(&o, &flow);
                    let (mine, my_mf) = ours(&t, &key);
                    traces += 1;
                    assert_eq!(
                        mine,
                        theirs,
                        "seed {seed:#x} round {round} step {step}: packet {flow}\n{}",
                        log.join("\n")
                    );
                    if !megaflows_agree(&their_mf, &my_mf, &theirs) {
                        mf_diffs.push(format!(
                            "round {round} step {step}: {flow}\n  ovs      {their_mf}\n  vecplane {my_mf}\n{}",
                            log.join("\n")
                        ));
                    }
                }
            }
        }
        println!(
            "seed {seed:#x}: {traces} random traces, {changes} changes, {} megaflow differences in {:.2} s",
            mf_diffs.len(),
            t0.elapsed().as_secs_f64()
        );
        assert!(
            mf_diffs.is_empty(),
            "seed {seed:#x}: {} megaflows differ; the first:\n{}",
            mf_diffs.len(),
            mf_diffs[0]
        );
    }
}
