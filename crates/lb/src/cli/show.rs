//! `show lb` and `show lb vips [verbose]` as text, from a published `LbTables` (what the workers
//! use, not the pending configuration). A server's weight is its configured one, followed by
//! `(down: health)` when a health check has it out of the Maglev table. Owns nothing; counters are added by the caller (this
//! text has none), JSON is the control plane's.

use crate::model::{AsState, LbShow, SourceAddress};
use crate::snapshot::LbTables;
use std::fmt::Write;

fn src(a: &Option<SourceAddress>) -> String {
    match a {
        None => "unset".into(),
        Some(s) if s.len == 32 || s.len == 128 => s.addr.to_string(),
        Some(s) => format!("{}/{}", s.addr, s.len),
    }
}

fn state_name(s: AsState) -> &'static str {
    match s {
        AsState::Active => "active",
        AsState::Draining => "draining",
        AsState::Removed => "removed",
        AsState::Free => "free",
    }
}

/// What follows a server's configured weight: a mark when a health check has it down (out of
/// the Maglev table whatever its weight), nothing otherwise.
fn health_note(health_down: bool) -> &'static str {
    if health_down {
        " (down: health)"
    } else {
        ""
    }
}

/// The text of `show lb` or `show lb vips [verbose]`.
pub fn format_show(t: &LbTables, show: LbShow) -> String {
    let mut o = String::new();
    match show {
        LbShow::Summary => {
            let c = t.conf();
            let _ = writeln!(
                o,
                "lb version {}: ip4-src-address {} ip6-src-address {} buckets {} \
                 timeout tcp {} udp {} other {}",
                t.version(),
                src(&c.ip4_src),
                src(&c.ip6_src),
                c.buckets,
                c.timeouts.tcp,
                c.timeouts.udp,
                c.timeouts.other
            );
            let slots = (0..t.slot_capacity())
                .filter(|&i| t.as_entry(crate::model::AsSlot(i as u32)).state != AsState::Free)
                .count();
            let _ = writeln!(
                o,
                "vips {} (ids up to {}), as slots in use {} (up to {})",
                t.vips().count(),
                t.vip_capacity(),
                slots,
                t.slot_capacity()
            );
        }
        LbShow::Vips { verbose } => {
            for v in t.vips() {
                let _ = write!(o, "[{}] {} encap {}", v.id.0, v.key, v.encap.name());
                match v.encap {
                    crate::model::Encap::L3dsr { dscp } => {
                        let _ = write!(o, " dscp {dscp}");
                    }
                    crate::model::Encap::Nat4 { target_port }
                    | crate::model::Encap::Nat6 { target_port } => {
                        let _ = write!(o, " target_port {target_port}");
                    }
                    _ => {}
                }
                if v.src_ip_sticky {
                    o.push_str(" src_ip_sticky");
                }
                let _ = writeln!(
                    o,
                    "\n  maglev {} entries (new_len {}), {} active of {} servers",
                    v.maglev_size,
                    v.new_len,
                    v.active_servers,
                    v.slots.len()
                );
                if v.maglev_too_small {
                    let _ = writeln!(
                        o,
                        "  warning: {} entries < 100 x {} servers: shares may stray beyond 1%; \
                         use new_len {} or more",
                        v.maglev_size,
                        v.active_servers,
                        100 * v.active_servers as u64
                    );
                }
                if v.active_servers == 0 {
                    o.push_str("  warning: no server with weight > 0: new flows are dropped\n");
                }
                if !verbose {
                    continue;
                }
                let counts = t.maglev(v.id).map(|m| m.counts()).unwrap_or_default();
                for &slot in &v.slots {
                    let a = t.as_entry(slot);
                    let n = counts.get(&slot).copied().unwrap_or(0);
                    let _ = writeln!(
                        o,
                        "    {} slot {} gen {} weight {}{} {} entries {} ({:.2}%)",
                        a.addr,
                        slot.0,
                        a.gen,
                        a.configured_weight,
                        health_note(a.health_down),
                        state_name(a.state),
                        n,
                        n as f64 * 100.0 / v.maglev_size.max(1) as f64
                    );
                }
            }
        }
    }
    o
}
