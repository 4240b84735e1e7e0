//! Unique names for one topology: namespaces, interfaces, the bridge and the scratch directory,
//! built from a short prefix, this process's id and a per-process counter, so that two runs (or
//! two topologies of one run) never collide and leftovers of dead runs can be recognised. Pure
//! string work: it never creates anything.

use anyhow::{bail, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// Longest kernel interface name (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;

/// Longest accepted prefix (keeps every interface name within [`IFNAME_MAX`]).
pub const PREFIX_MAX: usize = 4;

/// The default prefix of everything netlab creates.
pub const DEFAULT_PREFIX: &str = "vnl";

/// Process ids must be below this (36^5) to fit five base-36 digits.
const PID_LIMIT: u32 = 60_466_176;

/// Topologies per process (36^3: three base-36 digits).
const SEQ_LIMIT: u32 = 46_656;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Every name of one topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// The prefix everything starts with.
    pub prefix: String,
    /// Namespace of host A.
    pub ns_a: String,
    /// Namespace of the router / bridge R.
    pub ns_r: String,
    /// Namespace of host B.
    pub ns_b: String,
    /// A's veth (peer of `ra`).
    pub a0: String,
    /// R's veth towards A.
    pub ra: String,
    /// R's veth towards B.
    pub rb: String,
    /// B's veth (peer of `rb`).
    pub b0: String,
    /// The Linux bridge in R (bridge mode only).
    pub br: String,
    /// Scratch directory (configs, sockets, logs).
    pub dir: PathBuf,
}

/// `n` in base 36, lower case.
fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `prefix` is accepted: 1..=4 of `[a-z0-9]`, starting with a letter.
pub fn valid_prefix(prefix: &str) -> bool {
    !prefix.is_empty()
        && prefix.len() <= PREFIX_MAX
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

impl Names {
    /// The names for process `pid` and sequence number `seq`.
    ///
    /// Namespaces are `<prefix>-<pid>-<seq>-{a,r,b}` (so [`owner_pid`] can tell whose they are);
    /// interfaces are `<prefix><pid base 36>-<seq base 36><role>`, at most 15 bytes (so `pid`
    /// must be below 36^5 = 60466176, above the kernel's pid_max of 2^22, and `seq` below
    /// 36^3 = 46656).
    pub fn for_ids(prefix: &str, pid: u32, seq: u32) -> Result<Names> {
        if !valid_prefix(prefix) {
            bail!(
                "netlab prefix `{prefix}`: accepted: 1 to {PREFIX_MAX} lower-case letters or \
                 digits, starting with a letter"
            );
        }
        if pid >= PID_LIMIT {
            bail!("process id {pid} is too large for netlab's interface names");
        }
        if seq >= SEQ_LIMIT {
            bail!("this process already made {SEQ_LIMIT} topologies; netlab names would repeat");
        }
        let ns = |role: &str| format!("{prefix}-{pid}-{seq}-{role}");
        let stem = format!("{prefix}{}-{}", base36(pid.into()), base36(seq.into()));
        let link = |role: &str| format!("{stem}{role}");
        let names = Names {
            prefix: prefix.to_string(),
            ns_a: ns("a"),
            ns_r: ns("r"),
            ns_b: ns("b"),
            a0: link("a0"),
            ra: link("ra"),
            rb: link("rb"),
            b0: link("b0"),
            br: link("br"),
            dir: std::env::temp_dir().join(format!("{prefix}-{pid}-{seq}")),
        };
        for n in [&names.a0, &names.ra, &names.rb, &names.b0, &names.br] {
            if n.len() > IFNAME_MAX {
                bail!("interface name {n} is longer than {IFNAME_MAX} bytes");
            }
        }
        Ok(names)
    }

    /// Fresh names for this process (the counter never repeats within a process).
    pub fn next(prefix: &str) -> Result<Names> {
        let seq = COUNTER.fetch_add(1, Ordering::Relaxed);
        Names::for_ids(prefix, std::process::id(), seq)
    }

    /// The three namespaces.
    pub fn namespaces(&self) -> [&str; 3] {
        [&self.ns_a, &self.ns_r, &self.ns_b]
    }

    /// Every interface name this topology may create.
    pub fn interfaces(&self) -> [&str; 5] {
        [&self.a0, &self.ra, &self.rb, &self.b0, &self.br]
    }
}

/// The process id encoded in a namespace name made with `prefix`, if it is one.
pub fn owner_pid(prefix: &str, namespace: &str) -> Option<u32> {
    let rest = namespace.strip_prefix(prefix)?.strip_prefix('-')?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let seq = parts.next()?;
    let role = parts.next()?;
    if parts.next().is_some() || seq.parse::<u32>().is_err() || !["a", "r", "b"].contains(&role) {
        return None;
    }
    Some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn interface_names_fit_even_for_the_largest_ids() {
        let n = Names::for_ids("abcd", PID_LIMIT - 1, SEQ_LIMIT - 1).expect("names");
        for i in n.interfaces() {
            assert!(i.len() <= IFNAME_MAX, "{i} is {} bytes", i.len());
        }
        assert!(Names::for_ids("abcd", PID_LIMIT, 0).is_err());
        assert!(Names::for_ids("abcd", 1, SEQ_LIMIT).is_err());
        // The kernel's pid_max limit (2^22) with a four-character prefix.
        let n = Names::for_ids("vnl", 4_194_304, 0).expect("names");
        assert_eq!(n.ra, format!("vnl{}-0ra", base36(4_194_304)));
        assert_eq!(base36(0), "0");
        assert_eq!(base36(36 * 36 + 35), "10z");
    }

    #[test]
    fn names_are_unique_across_calls_and_processes() {
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let n = Names::next(DEFAULT_PREFIX).expect("names");
            for s in n.namespaces().iter().chain(n.interfaces().iter()) {
                assert!(seen.insert(s.to_string()), "{s} repeated");
            }
        }
        // Two processes with the same counter value.
        let a = Names::for_ids("vnl", 12, 3).expect("names");
        let b = Names::for_ids("vnl", 123, 3).expect("names");
        let c = Names::for_ids("vnl", 1, 23).expect("names");
        let all: Vec<String> = [&a, &b, &c]
            .iter()
            .flat_map(|n| n.interfaces().map(str::to_string))
            .collect();
        let distinct: HashSet<&String> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
        assert_ne!(a.ns_a, b.ns_a);
        assert_ne!(a.dir, c.dir);
    }

    #[test]
    fn interfaces_are_distinct_within_a_topology() {
        let n = Names::for_ids("vnl", 77, 5).expect("names");
        let set: HashSet<&str> = n.interfaces().into_iter().collect();
        assert_eq!(set.len(), 5);
        let set: HashSet<&str> = n.namespaces().into_iter().collect();
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn prefixes_are_checked() {
        for bad in ["", "toolong", "Abc", "9ab", "a-b", "a b"] {
            assert!(Names::for_ids(bad, 1, 1).is_err(), "{bad:?} accepted");
        }
        for good in ["a", "vnl", "t1", "abcd"] {
            assert!(Names::for_ids(good, 1, 1).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn owner_pid_reads_back_the_pid() {
        let n = Names::for_ids("vnl", 4242, 7).expect("names");
        for ns in n.namespaces() {
            assert_eq!(owner_pid("vnl", ns), Some(4242));
        }
        assert_eq!(owner_pid("vnl", "vnlx-1-2-a"), None);
        assert_eq!(owner_pid("vnl", "other-1-2-a"), None);
        assert_eq!(owner_pid("vnl", "vnl-1-2-q"), None);
        assert_eq!(owner_pid("vnl", "vnl-1-2-a-b"), None);
        assert_eq!(owner_pid("vn", "vnl-1-2-a"), None);
    }
}
