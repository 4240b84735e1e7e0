//! vecplane's datapath actions written the way Open vSwitch's `ofproto/trace` prints its
//! "Datapath actions:" line (in OpenFlow port numbers, see `netlab::ovs::datapath_to_openflow`),
//! and the canonical forms both sides are compared in. Owns only text; it never runs actions.
//!
//! Open vSwitch does not emit a header rewrite where the OpenFlow action is: it "commits" the
//! pending changes just before each output, grouped by header in a fixed order (Ethernet,
//! IPv4/IPv6/ARP, transport, VLAN), each group listing only the fields that changed, with the megaflow's
//! mask of that field when it is not exact (vecplane's translation does not emit an IP or
//! transport rewrite for a packet whose `nw_proto` is 0 either, as OVS; the formatter prints
//! what it is given). The formatter does the same from the input key and the megaflow mask.

use flow::key::VLAN_CFI;
use flow::{DpAction, Field, FlowKey, TPID_AS_RECEIVED};
use std::net::{Ipv4Addr, Ipv6Addr};

fn mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// One changed field of a set action: `name=value[/mask]`.
fn field_text(f: Field, value: u128, mask: u128, arp: bool) -> String {
    let full = f.all_ones();
    let mask = if mask == 0 { full } else { mask };
    let show = |v: u128| match f {
        Field::EthSrc | Field::EthDst => mac(v),
        Field::NwSrc | Field::NwDst => Ipv4Addr::from(v as u32).to_string(),
        Field::Ipv6Src | Field::Ipv6Dst => Ipv6Addr::from(v).to_string(),
        Field::Ipv6Label => format!("{v:#x}"),
        _ => v.to_string(),
    };
    let name = match f {
        Field::EthSrc | Field::NwSrc | Field::Ipv6Src | Field::TpSrc => "src",
        Field::EthDst | Field::NwDst | Field::Ipv6Dst | Field::TpDst => "dst",
        Field::Ipv6Label => "label",
        _ => "?",
    };
    let (name, show): (&str, &dyn Fn(u128) -> String) = if arp {
        match f {
            Field::NwSrc => ("sip", &show),
            Field::NwDst => ("tip", &show),
            Field::NwProto => ("op", &|v: u128| v.to_string()),
            Field::ArpSha => ("sha", &|v| mac(v)),
            Field::ArpTha => ("tha", &|v| mac(v)),
            _ => (name, &show),
        }
    } else {
        (name, &show)
    };
    if mask == full {
        format!("{name}={}", show(value))
    } else {
        format!("{name}={}/{}", show(value & mask), show(mask))
    }
}

/// The commit of pending header changes (`cur` against what the datapath packet is, `base`).
fn commit(base: &mut FlowKey, cur: &FlowKey, wc: &FlowKey, tpid: u16, out: &mut Vec<String>) {
    let changed = |f: Field| base.get(f) != cur.get(f);
    let eth_type = cur.get(Field::EthType);
    let item = |f: Field| field_text(f, cur.get(f), wc.get(f), eth_type == 0x0806);
    // Ethernet.
    let eth: Vec<String> = [Field::EthSrc, Field::EthDst]
        .into_iter()
        .filter(|&f| changed(f))
        .map(item)
        .collect();
    if !eth.is_empty() {
        out.push(format!("set(eth({}))", eth.join(",")));
    }
    let proto = cur.get(Field::NwProto);
    if eth_type == 0x0806 {
        let arp: Vec<String> = [
            Field::NwSrc,
            Field::NwDst,
            Field::NwProto,
            Field::ArpSha,
            Field::ArpTha,
        ]
        .into_iter()
        .filter(|&f| changed(f))
        .map(item)
        .collect();
        if !arp.is_empty() {
            out.push(format!("set(arp({}))", arp.join(",")));
        }
    }
    if eth_type == 0x0800 || eth_type == 0x86dd {
        let tos_changed = changed(Field::IpDscp) || changed(Field::NwEcn);
        let tos = (cur.get(Field::IpDscp) << 2) | cur.get(Field::NwEcn);
        let tos_mask = match (wc.get(Field::IpDscp) << 2) | wc.get(Field::NwEcn) {
            0 => 0xff,
            m => m,
        };
        let tos_text = |name: &str| {
            if tos_mask == 0xff {
                format!("{name}={tos:#x}")
            } else {
                format!("{name}={:#x}/{tos_mask:#x}", tos & tos_mask)
            }
        };
        let ttl = |name: &str| {
            let m = wc.get(Field::NwTtl);
            if m == 0 || m == 0xff {
                format!("{name}={}", cur.get(Field::NwTtl))
            } else {
                format!("{name}={}/{m:#x}", cur.get(Field::NwTtl) & m)
            }
        };
        let mut ip = Vec::new();
        if eth_type == 0x0800 {
            for f in [Field::NwSrc, Field::NwDst] {
                if changed(f) {
                    ip.push(item(f));
                }
            }
            if tos_changed {
                ip.push(tos_text("tos"));
            }
            if changed(Field::NwTtl) {
                ip.push(ttl("ttl"));
            }
            if !ip.is_empty() {
                out.push(format!("set(ipv4({}))", ip.join(",")));
            }
        } else {
            for f in [Field::Ipv6Src, Field::Ipv6Dst, Field::Ipv6Label] {
                if changed(f) {
                    ip.push(item(f));
                }
            }
            if tos_changed {
                ip.push(tos_text("tclass"));
            }
            if changed(Field::NwTtl) {
                ip.push(ttl("hlimit"));
            }
            if !ip.is_empty() {
                out.push(format!("set(ipv6({}))", ip.join(",")));
            }
        }
        let l4 = match proto {
            6 => Some("tcp"),
            17 => Some("udp"),
            132 => Some("sctp"),
            _ => None,
        };
        if let Some(l4) = l4 {
            let ports: Vec<String> = [Field::TpSrc, Field::TpDst]
                .into_iter()
                .filter(|&f| changed(f))
                .map(item)
                .collect();
            if !ports.is_empty() {
                out.push(format!("set({l4}({}))", ports.join(",")));
            }
        }
        // ICMP type and code live in the transport ports (8 bits each).
        let icmp = match (eth_type, proto) {
            (0x0800, 1) => Some("icmp"),
            (0x86dd, 58) => Some("icmpv6"),
            _ => None,
        };
        if let Some(icmp) = icmp {
            let parts: Vec<String> = [(Field::TpSrc, "type"), (Field::TpDst, "code")]
                .into_iter()
                .filter(|&(f, _)| changed(f))
                .map(|(f, n)| format!("{n}={}", cur.get(f) & 0xff))
                .collect();
            if !parts.is_empty() {
                out.push(format!("set({icmp}({}))", parts.join(",")));
            }
        }
    }
    // VLAN, last (Open vSwitch commits it after L3 and L4): a changed tag is popped and pushed again.
    if changed(Field::VlanTci) {
        let cfi = u128::from(VLAN_CFI);
        if base.get(Field::VlanTci) & cfi != 0 {
            out.push("pop_vlan".to_string());
        }
        if cur.get(Field::VlanTci) & cfi != 0 {
            let tp = if tpid != 0x8100 {
                format!("tpid={tpid:#x},")
            } else {
                String::new()
            };
            out.push(format!(
                "push_vlan({tp}vid={},pcp={})",
                cur.get(Field::VlanVid),
                cur.get(Field::VlanPcp)
            ));
        }
    }
    *base = *cur;
}

/// vecplane's actions for a packet with key `input` and megaflow mask `wc`, as OVS would print
/// them with ports in OpenFlow numbers: `of_port` maps a vecplane port id to its OpenFlow
/// number, `switch_ports` are the switch's OpenFlow ports (what `Flood` sends to, minus the
/// input port). "drop" for no output.
pub fn format_dp_actions(
    input: &FlowKey,
    wc: &FlowKey,
    actions: &[DpAction],
    of_port: &dyn Fn(u16) -> Option<u16>,
    switch_ports: &[u16],
) -> String {
    let mut base = *input;
    let mut cur = *input;
    let mut tpid = 0x8100;
    let mut out = Vec::new();
    let in_port = input.get(Field::InPort) as u16;
    let port = |p: u16| of_port(p).map_or_else(|| format!("vp?{p}"), |o| o.to_string());
    for a in actions {
        match *a {
            DpAction::Set { field, value, mask } => cur.set_masked(field, value, mask),
            DpAction::PushVlan { tpid: t, tci } => {
                // The oracle's packets are 802.1Q-tagged or untagged: their own TPID is 0x8100.
                tpid = if t == TPID_AS_RECEIVED { 0x8100 } else { t };
                cur.set(Field::VlanTci, u128::from(tci | VLAN_CFI));
            }
            DpAction::PopVlan => cur.set(Field::VlanTci, 0),
            DpAction::Output(p) => {
                commit(&mut base, &cur, wc, tpid, &mut out);
                out.push(port(p));
            }
            DpAction::Flood => {
                commit(&mut base, &cur, wc, tpid, &mut out);
                out.extend(
                    switch_ports
                        .iter()
                        .filter(|&&p| p != in_port)
                        .map(u16::to_string),
                );
            }
            DpAction::Normal => {
                commit(&mut base, &cur, wc, tpid, &mut out);
                out.push("NORMAL".to_string());
            }
            DpAction::TunnelOutput { port: p, tun_id } => {
                commit(&mut base, &cur, wc, tpid, &mut out);
                out.push(format!("tnl(tun_id={tun_id:#x},{})", port(p)));
            }
            DpAction::Truncate(n) => out.push(format!("trunc({n})")),
            // OVS commits the changes so far and sends `userspace(...controller(...))`, which
            // the canonical form below drops.
            DpAction::Controller { .. } => commit(&mut base, &cur, wc, tpid, &mut out),
            DpAction::Nop => {}
        }
    }
    if out.is_empty() {
        "drop".to_string()
    } else {
        out.join(",")
    }
}

/// The canonical form of "Datapath actions:" text (either side's) for comparison: OVS's
/// bridge-local port (`LOCAL`, which vecplane does not have) and a send to an absent
/// controller (`userspace(...controller(...))`, what OVS does when `dec_ttl` runs out) are
/// dropped; header changes after the last output, which reach no port (OVS commits them before
/// such a controller send), are dropped; runs of consecutive outputs, which send the same
/// packet and whose order OVS takes from a hash map for `flood`/`all`, are sorted; nothing
/// left is "drop".
pub fn canonical_actions(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<u32> = Vec::new();
    let flush = |run: &mut Vec<u32>, out: &mut Vec<String>| {
        run.sort_unstable();
        out.extend(run.drain(..).map(|p| p.to_string()));
    };
    for a in netlab::ovs::split_top_level(text.trim()) {
        if a == "LOCAL" || a == "drop" || a.is_empty() || a.starts_with("userspace(") {
            continue;
        }
        match a.parse::<u32>() {
            Ok(p) => run.push(p),
            Err(_) => {
                flush(&mut run, &mut out);
                out.push(a.to_string());
            }
        }
    }
    flush(&mut run, &mut out);
    while out
        .last()
        .is_some_and(|a| a.starts_with("set(") || a.starts_with("push_vlan(") || a == "pop_vlan")
    {
        out.pop();
    }
    if out.is_empty() {
        "drop".to_string()
    } else {
        out.join(",")
    }
}

/// True for a megaflow item that says "no VLAN tag": `vlan_tci=0x0000`, or
/// `vlan_tci=0x0000/MASK` with the CFI ("tag present") bit 0x1000 in MASK.
fn says_untagged(item: &str) -> bool {
    let Some(v) = item.strip_prefix("vlan_tci=0x0000") else {
        return false;
    };
    match v.strip_prefix("/0x") {
        None => v.is_empty(),
        Some(m) => u16::from_str_radix(m, 16).is_ok_and(|m| m & 0x1000 != 0),
    }
}

/// The canonical form of megaflow text: its `field=value` items as a sorted set. Dropped, as
/// representation only:
/// - `recirc_id=0` and `eth`: every vecplane megaflow is a first pass over an Ethernet frame;
/// - "no VLAN tag" (`vlan_tci=0x0000[/MASK with 0x1000]`): Open vSwitch's datapath key of an
///   untagged frame has no VLAN attribute and its `eth_type` is the frame's outer type, so an
///   untagged megaflow cannot match a tagged frame and OVS prints no `vlan_tci` for it; vecplane's
///   key holds the type after the tag, so it says "untagged" with the CFI bit of `vlan_tci`.
pub fn canonical_megaflow(text: &str) -> Vec<String> {
    let mut items: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty() && *t != "recirc_id=0" && *t != "eth" && !says_untagged(t))
        .map(str::to_string)
        .collect();
    items.sort();
    items.dedup();
    items
}
