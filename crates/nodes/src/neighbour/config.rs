//! What a worker's neighbour tables are built from: the ports (MAC, MTU, own addresses), sizes and
//! timers (`NeighbourConfig`), and the timers that change live (`NeighbourTimers`). Plain data;
//! it never touches packets.

use super::*;

/// What the neighbour nodes know about one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourPort {
    /// The port's MAC (source of requests and replies, source MAC of adjacencies).
    pub mac: Mac,
    /// Largest IP packet the port sends (the MTU of its adjacencies).
    pub mtu: u16,
    /// Own IPv4 addresses and prefix lengths (answered by ARP, sources of requests).
    pub ip4: Vec<(Ipv4Addr, u8)>,
    /// Own IPv6 addresses and prefix lengths (answered by ND, sources of solicitations).
    pub ip6: Vec<(Ipv6Addr, u8)>,
}

impl NeighbourPort {
    /// The port's EUI-64 link-local address (fe80::/64 from its MAC, RFC 4291 appendix A).
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 2,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }
}

/// Sizes and timers of the neighbour subsystem of one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourConfig {
    /// Ports by port id.
    pub ports: Vec<NeighbourPort>,
    /// Entries per family (1..=`MAX_CAPACITY`).
    pub capacity: usize,
    /// Seconds an entry stays reachable after a confirmation.
    pub reachable_seconds: u32,
    /// Seconds after its last confirmation an entry is deleted.
    pub gc_seconds: u32,
    /// Seconds an incomplete entry waits for an answer before it is deleted with its queue.
    pub incomplete_seconds: u32,
    /// Packets queued per unresolved neighbour.
    pub queue_per_neighbour: u16,
    /// Packets queued in all (both families).
    pub queue_total: usize,
    /// Requests (ARP and NS, broadcast and probes) sent per second, in all.
    pub requests_per_second: u32,
    /// Answer ND for each port's EUI-64 link-local address as well.
    pub link_local: bool,
}

/// The ports' MTUs, shared by every worker's tables and changed live (reload): a worker takes a
/// change at its next maintenance (at most a millisecond later), for new and existing entries.
#[derive(Debug)]
pub struct PortMtus {
    mtus: Box<[AtomicU16]>,
    generation: AtomicU64,
}

impl PortMtus {
    /// The MTUs of ports `0..mtus.len()`.
    pub fn new(mtus: &[u16]) -> PortMtus {
        PortMtus {
            mtus: mtus.iter().map(|&m| AtomicU16::new(m)).collect(),
            generation: AtomicU64::new(0),
        }
    }

    /// Port `port`'s MTU now (0 for a port it does not have).
    pub fn get(&self, port: usize) -> u16 {
        self.mtus.get(port).map_or(0, |m| m.load(Ordering::Relaxed))
    }

    /// Set port `port`'s MTU; returns whether it changed.
    pub fn set(&self, port: usize, mtu: u16) -> bool {
        match self.mtus.get(port) {
            Some(m) if m.swap(mtu, Ordering::Relaxed) != mtu => {
                self.generation.fetch_add(1, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// Moves on every change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Ports.
    pub fn len(&self) -> usize {
        self.mtus.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.mtus.is_empty()
    }
}

/// One port's own addresses: (IPv4 with prefix lengths, IPv6 with prefix lengths).
pub type OwnAddresses = (Vec<(Ipv4Addr, u8)>, Vec<(Ipv6Addr, u8)>);

/// The ports' own addresses, shared by every worker and changed live (reload): a worker takes
/// a change at its next maintenance (neighbour tables) or vector (ICMP error sources). Readers
/// only `try_lock` (never wait) and copy on a change of `generation`, so the fast path neither
/// locks nor allocates.
#[derive(Debug)]
pub struct PortAddresses {
    list: Mutex<Vec<OwnAddresses>>,
    generation: AtomicU64,
}

impl PortAddresses {
    /// The addresses of ports `0..list.len()`.
    pub fn new(list: Vec<OwnAddresses>) -> PortAddresses {
        PortAddresses {
            list: Mutex::new(list),
            generation: AtomicU64::new(0),
        }
    }

    /// Set port `port`'s addresses (the control thread).
    pub fn set(&self, port: usize, addrs: OwnAddresses) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = list.get_mut(port) {
            *slot = addrs;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Make room for ports `0..len`: ports past the list get no address (the control thread,
    /// before it adds a port at run time). Never shrinks; the generation moves only when the
    /// list grows.
    pub fn ensure_len(&self, len: usize) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() < len {
            list.resize_with(len, OwnAddresses::default);
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Moves on every change.
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A copy of every port's addresses, unless the control thread holds them right now.
    pub fn try_get(&self) -> Option<Vec<OwnAddresses>> {
        self.list.try_lock().ok().map(|l| l.clone())
    }
}

/// The neighbour timers shared by every worker's tables and changed live (reload, API): each
/// worker reads them at its maintenance, at most once a millisecond.
#[derive(Debug)]
pub struct NeighbourTimers {
    pub(super) reachable_seconds: AtomicU32,
    pub(super) gc_seconds: AtomicU32,
}

impl NeighbourTimers {
    /// Entries reachable `reachable_seconds` after a confirmation, deleted `gc_seconds` after.
    pub fn new(reachable_seconds: u32, gc_seconds: u32) -> NeighbourTimers {
        NeighbourTimers {
            reachable_seconds: AtomicU32::new(reachable_seconds),
            gc_seconds: AtomicU32::new(gc_seconds),
        }
    }

    /// Change both.
    pub fn set(&self, reachable_seconds: u32, gc_seconds: u32) {
        self.reachable_seconds
            .store(reachable_seconds, Ordering::Relaxed);
        self.gc_seconds.store(gc_seconds, Ordering::Relaxed);
    }

    /// (reachable seconds, gc seconds) now.
    pub fn get(&self) -> (u32, u32) {
        (
            self.reachable_seconds.load(Ordering::Relaxed),
            self.gc_seconds.load(Ordering::Relaxed),
        )
    }
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            ports: Vec::new(),
            capacity: 4096,
            reachable_seconds: 30,
            gc_seconds: 300,
            incomplete_seconds: 3,
            queue_per_neighbour: 4,
            queue_total: 256,
            requests_per_second: 1000,
            link_local: true,
        }
    }
}
