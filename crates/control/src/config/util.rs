//! Small pure helpers shared by the config sections and the command language: names, prefix
//! parsing and masking, short lists and key suggestions. No state, no I/O (but `online_cpus`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(super) fn valid_name(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
}

pub(super) fn name_list(names: &[Option<String>]) -> String {
    let mut v: Vec<String> = Vec::new();
    for n in names.iter().flatten() {
        let n = format!("`{n}`");
        if !v.contains(&n) {
            v.push(n);
        }
    }
    if v.is_empty() {
        "the name of a [[port]] (none is defined)".to_string()
    } else {
        format!("the name of a [[port]]: {}", v.join(", "))
    }
}

pub(super) fn short_list(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.len() > 8 {
        format!("{}, ... ({} in all)", v[..8].join(", "), v.len())
    } else {
        v.join(", ")
    }
}

pub(super) fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        "IPv6"
    } else {
        "IPv4"
    }
}

pub(super) fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// Parse `ADDRESS/LENGTH`; the error text completes "`X` ...".
pub(crate) fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let Some((a, l)) = s.split_once('/') else {
        return Err("has no prefix length".to_string());
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| format!("does not start with an IP address (`{a}`)"))?;
    let max = if ip.is_ipv6() { 128 } else { 32 };
    match l.parse::<u8>() {
        Ok(len) if len <= max => Ok((ip, len)),
        _ => Err(format!("has an invalid prefix length `{l}` (0..={max})")),
    }
}

/// The network address of `ip/len`.
pub(crate) fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// Whether `ip` lies inside `net/len` (families must match).
pub(crate) fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    net.is_ipv6() == ip.is_ipv6() && mask(net, len) == mask(ip, len)
}

/// The accepted word closest to `key`, if it is close (a typo or `_` for `-`).
pub(crate) fn suggest<'k>(key: &str, accepted: &[&'k str]) -> Option<&'k str> {
    let norm = key.replace('_', "-").to_ascii_lowercase();
    accepted
        .iter()
        .map(|a| (edit_distance(&norm, a), *a))
        .filter(|(d, a)| *d <= 2.min(a.len() / 2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
