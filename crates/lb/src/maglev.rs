//! Weighted Maglev tables (Eisenbud et al., NSDI 2016): which AS slot each of M entries sends
//! new flows to. Built on the control side only (milliseconds for 65537 entries and 100 servers);
//! never built or resized on a worker, never keyed by anything but the servers' addresses and
//! weights, so every node with the same VIP builds the identical table.
//!
//! The construction, pinned (changing any of it moves flows between nodes of a fleet):
//! - size M: the smallest prime >= `new_len` (VPP's `new_len`, default 65537);
//! - servers with weight > 0, sorted by address (IPv4 as IPv4-mapped IPv6, then IPv6 order);
//! - server i's preference list: `offset = h(addr, 0) % M`, `skip = h(addr, 1) % (M - 1) + 1`,
//!   entry j = `(offset + j * skip) % M` (a permutation of 0..M since M is prime), `h` the fixed
//!   unkeyed `addr_hash` below;
//! - weights: server i gets exactly `q_i` entries, `q_i = floor(M * w_i / W)` plus one for the
//!   `M - sum(q)` largest remainders (ties: lower index), so every share is within 1/M of
//!   `w_i / W`; the fill takes turns in "virtual time": server i's k-th claim (k from 0) happens
//!   at `(k + 1) / q_i` (ties: lower index), and each claim takes the server's next preferred
//!   free entry. With equal weights this is classic Maglev's round robin.
//! - a packet's entry: `(stable_hash * M) >> 32` (no division on the data path).

use crate::model::AsSlot;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::IpAddr;

/// A server as the Maglev build sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaglevServer {
    /// Its address (seeds its preference list).
    pub addr: IpAddr,
    /// Its weight (0: left out).
    pub weight: u32,
    /// What the table entries hold for it.
    pub slot: AsSlot,
}

/// A built table: `entries[i]` is an AS slot; empty when no server has weight > 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaglevTable {
    entries: Box<[u32]>,
    size: u32,
    new_len: u32,
    servers: u32,
}

/// The allocator refused a Maglev table's entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot allocate a Maglev table of {entries} entries ({bytes} bytes): out of memory; use a \
     smaller new_len, fewer VIPs or a lower [lb] memory-limit"
)]
pub struct MaglevAllocError {
    /// Entries asked for.
    pub entries: u32,
    /// Bytes asked for.
    pub bytes: u64,
}

#[cfg(test)]
thread_local! {
    /// Tests: tables larger than this many entries fail to allocate on this thread.
    pub(crate) static FAIL_ABOVE: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
}

/// `size` empty entries, or the allocator's refusal as an error.
fn alloc_entries(size: u32, empty: u32) -> Result<Vec<u32>, MaglevAllocError> {
    let err = MaglevAllocError {
        entries: size,
        bytes: size as u64 * 4,
    };
    #[cfg(test)]
    if size > FAIL_ABOVE.with(|f| f.get()) {
        return Err(err);
    }
    let mut v: Vec<u32> = Vec::new();
    v.try_reserve_exact(size as usize).map_err(|_| err)?;
    v.resize(size as usize, empty);
    Ok(v)
}

impl MaglevTable {
    /// Builds the table of `new_len` (rounded up to a prime) entries over `servers` (any order;
    /// weight 0 ones are left out). Two servers with the same address: the first in address
    /// order wins and the other is left out (the model never does this). Aborts as `vec!`
    /// does when the allocator refuses; the control plane uses `try_build`.
    pub fn build(new_len: u32, servers: &[MaglevServer]) -> MaglevTable {
        match Self::try_build(new_len, servers) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// `build`, with the allocator's refusal of the entries as an error.
    pub fn try_build(
        new_len: u32,
        servers: &[MaglevServer],
    ) -> Result<MaglevTable, MaglevAllocError> {
        let size = next_prime(new_len.clamp(2, crate::model::MAX_NEW_LEN));
        let mut srv: Vec<MaglevServer> = servers.iter().copied().filter(|s| s.weight > 0).collect();
        srv.sort_by_key(|s| (addr_bytes(s.addr), s.weight, s.slot));
        srv.dedup_by_key(|s| addr_bytes(s.addr));
        let n = srv.len() as u32;
        if srv.is_empty() {
            return Ok(MaglevTable {
                entries: Box::new([]),
                size,
                new_len,
                servers: 0,
            });
        }
        let quota = quotas(size, &srv);
        let m = size as u64;
        // (next position, skip) per server.
        let mut walk: Vec<(u64, u64)> = srv
            .iter()
            .map(|s| {
                let b = addr_bytes(s.addr);
                (addr_hash(&b, 0) % m, addr_hash(&b, 1) % (m - 1) + 1)
            })
            .collect();
        const EMPTY: u32 = u32::MAX;
        let mut entries = alloc_entries(size, EMPTY)?;
        let mut heap: BinaryHeap<Turn> = (0..srv.len())
            .filter(|&i| quota[i] > 0)
            .map(|i| Turn {
                k: 1,
                q: quota[i],
                server: i as u32,
            })
            .collect();
        while let Some(t) = heap.pop() {
            let i = t.server as usize;
            let (mut pos, skip) = walk[i];
            while entries[pos as usize] != EMPTY {
                pos += skip;
                if pos >= m {
                    pos -= m;
                }
            }
            entries[pos as usize] = srv[i].slot.0;
            pos += skip;
            if pos >= m {
                pos -= m;
            }
            walk[i].0 = pos;
            if t.k < t.q {
                heap.push(Turn { k: t.k + 1, ..t });
            }
        }
        Ok(MaglevTable {
            entries: entries.into_boxed_slice(),
            size,
            new_len,
            servers: n,
        })
    }

    /// The AS slot for a flow's `stable_hash`; `None` when the table is empty.
    #[inline(always)]
    pub fn choose(&self, hash: u32) -> Option<AsSlot> {
        let i = ((hash as u64 * self.entries.len() as u64) >> 32) as usize;
        self.entries.get(i).map(|&s| AsSlot(s))
    }

    /// The entries (empty when no server has weight > 0).
    pub fn entries(&self) -> &[u32] {
        &self.entries
    }

    /// The table size M (a prime), also when empty.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The `new_len` it was asked for.
    pub fn new_len(&self) -> u32 {
        self.new_len
    }

    /// Servers in the table (weight > 0).
    pub fn servers(&self) -> u32 {
        self.servers
    }

    /// True when M < 100 x servers: shares may then stray beyond 1% and a server change
    /// moves more flows than it must. Shown by `show lb vips`.
    pub fn too_small(&self) -> bool {
        (self.size as u64) < 100 * self.servers as u64
    }

    /// How many entries each slot holds.
    pub fn counts(&self) -> std::collections::BTreeMap<AsSlot, u32> {
        let mut c = std::collections::BTreeMap::new();
        for &s in self.entries.iter() {
            *c.entry(AsSlot(s)).or_insert(0) += 1;
        }
        c
    }
}

/// One server's next claim, at virtual time `k / q`; the heap pops the earliest (ties: lower
/// server index).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Turn {
    k: u32,
    q: u32,
    server: u32,
}

impl Ord for Turn {
    fn cmp(&self, o: &Self) -> Ordering {
        // k1/q1 < k2/q2  <=>  k1*q2 < k2*q1; reversed: BinaryHeap is a max-heap.
        let a = self.k as u64 * o.q as u64;
        let b = o.k as u64 * self.q as u64;
        b.cmp(&a).then(o.server.cmp(&self.server))
    }
}

impl PartialOrd for Turn {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Exact entry counts per server: largest-remainder apportionment of `m` by weight.
fn quotas(m: u32, srv: &[MaglevServer]) -> Vec<u32> {
    let total: u128 = srv.iter().map(|s| s.weight as u128).sum();
    let mut q: Vec<u32> = Vec::with_capacity(srv.len());
    let mut rem: Vec<(u128, usize)> = Vec::with_capacity(srv.len());
    for (i, s) in srv.iter().enumerate() {
        let x = m as u128 * s.weight as u128;
        q.push((x / total) as u32);
        rem.push((x % total, i));
    }
    let given: u64 = q.iter().map(|&x| x as u64).sum();
    let left = (m as u64 - given) as usize;
    rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rem.iter().take(left) {
        q[i] += 1;
    }
    q
}

/// 16 bytes naming an address: IPv4 as IPv4-mapped IPv6 (so sorting puts IPv4 first).
pub fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The fixed, unkeyed hash that seeds a server's preference list (`seed` 0: offset, 1: skip).
/// Pinned by a test: it must never change.
pub fn addr_hash(b: &[u8; 16], seed: u64) -> u64 {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&b[..8]);
    hi.copy_from_slice(&b[8..]);
    let mut h = 0x243f_6a88_85a3_08d3u64 ^ seed.wrapping_mul(0x1319_8a2e_0370_7344);
    for w in [u64::from_le_bytes(lo), u64::from_le_bytes(hi)] {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ h >> 32
}

/// The smallest prime >= n (n >= 2).
pub fn next_prime(n: u32) -> u32 {
    let mut p = n.max(2);
    while !is_prime(p) {
        p += 1;
    }
    p
}

fn is_prime(n: u32) -> bool {
    if n < 4 {
        return n >= 2;
    }
    if n.is_multiple_of(2) {
        return false;
    }
    let mut d = 3u32;
    while (d as u64) * (d as u64) <= n as u64 {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 2;
    }
    true
}

#[cfg(test)]
#[path = "maglev_tests.rs"]
mod tests;
