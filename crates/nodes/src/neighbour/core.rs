//! What both tables share (`Core`: ports, queue, outbox, limiter, timers, counters, news for
//! other workers) and the state changes: learning a MAC, resolving a packet, the aging sweep.

use super::*;

#[derive(Clone, Copy, Debug)]
pub(super) struct Ticks {
    pub(super) hz: u64,
    pub(super) reachable: u64,
    pub(super) gc: u64,
    pub(super) incomplete: u64,
    pub(super) retry: u64,
    pub(super) probe_delay: u64,
    pub(super) sweep: u64,
}

/// News one worker sends the others: (port, address) has `mac`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct News {
    pub(super) v6: bool,
    pub(super) confirm: bool,
    pub(super) port: u16,
    pub(super) ip: u128,
    pub(super) mac: Mac,
}

/// A worker's inbox of news from the others.
pub(super) struct Mailbox {
    pub(super) items: Box<[News]>,
    pub(super) len: usize,
}

/// What the tables of both families share: ports, queue, outbox, timers, counters.
pub(super) struct Core {
    pub(super) ports: Vec<PortInfo>,
    pub(super) queue: PacketQueue,
    pub(super) outbox: Outbox,
    pub(super) limiter: RateLimiter,
    pub(super) ticks: Ticks,
    pub(super) queue_per_neighbour: u16,
    pub(super) stats: NeighbourStats,
    /// Tell other workers what is learned (set by `NeighbourHandle::connect`).
    pub(super) share_news: bool,
    /// What was learned since the last `maintain`, for the other workers.
    pub(super) news: Box<[News]>,
    pub(super) news_len: usize,
    /// Queued packets freed outside a node's frame and not yet counted as `neighbour-tx`
    /// errors, by `TX_ERRORS` index.
    pub(super) unreported: [u64; TxError::COUNT as usize],
    /// True while news from other workers is merged.
    pub(super) merging: bool,
    /// Receive timestamp of the last packet queued for resolution: the timestamp of the
    /// requests it causes (so a replayed capture gives the same output file every run).
    pub(super) last_timestamp_ns: u64,
}

/// How a packet teaches the table.
#[derive(Clone, Copy, Debug)]
pub(super) struct Learn {
    /// Create the entry when it does not exist.
    pub(super) create: bool,
    /// The packet confirms reachability (a reply to us, a solicited NA).
    pub(super) confirm: bool,
    /// A different MAC replaces the known one (false: NA without the O flag).
    pub(super) replace: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Learned {
    /// No entry and none created.
    Ignored,
    /// The table is full.
    Full,
    /// The entry exists and did not change.
    Unchanged,
    /// Created, or its MAC or state changed.
    Updated,
}

impl Core {
    /// Send a request for entry `e` (broadcast, or unicast to its MAC when `unicast`) from a new
    /// buffer into the outbox. False when it could not (counted).
    pub(super) fn send_request<A: Family>(
        &mut self,
        pool: &mut BufferPool,
        e: &mut Entry<A>,
        unicast: bool,
        now: u64,
    ) -> bool {
        let Some(port) = self.ports.get(e.port as usize) else {
            return false;
        };
        let Some(source) = A::source(port, e.ip) else {
            return false;
        };
        if !self.limiter.take(now, self.ticks.hz) {
            self.stats.requests_rate_limited += 1;
            return false;
        }
        let Some(b) = pool.alloc() else {
            self.stats.request_alloc_failures += 1;
            return false;
        };
        let mut frame = [0u8; 128];
        let len = A::request(port, source, e.ip, unicast.then(|| e.mac()), &mut frame);
        pool.write_packet(b, &frame[..len]);
        let m = pool.meta_mut(b);
        m.rx_port = e.port;
        m.tx_port = e.port;
        m.l3_offset = eth::HEADER_LEN as u16;
        m.flags |= crate::FLAG_LOCAL_ORIGIN;
        m.timestamp_ns = self.last_timestamp_ns;
        if !self.outbox.push(NEXT_OUTPUT, b) {
            pool.free(b);
            self.stats.outbox_drops += 1;
            return false;
        }
        e.last_request = now;
        e.probes = e.probes.saturating_add(1);
        A::count_request(&mut self.stats);
        if unicast {
            self.stats.probes_sent += 1;
        }
        true
    }

    /// Free every buffer of `list` (counted as queue drops).
    /// Free every buffer of `list`, counted as `neighbour-tx` error `reason` (a `TX_ERRORS`
    /// index) at its next poll.
    pub(super) fn drop_queue(&mut self, pool: &mut BufferPool, mut list: QueueList, reason: usize) {
        while let Some(b) = self.queue.pop(&mut list) {
            pool.free(b);
            self.stats.queue_drops += 1;
            self.unreported[reason] += 1;
        }
    }

    /// Move every buffer of `list` to the outbox towards `next`.
    pub(super) fn release(&mut self, pool: &mut BufferPool, mut list: QueueList, next: u16) {
        while let Some(b) = self.queue.pop(&mut list) {
            if self.outbox.push(next, b) {
                self.stats.released += 1;
            } else {
                pool.free(b);
                self.stats.outbox_drops += 1;
                self.stats.queue_drops += 1;
                self.unreported[TxError::OutboxFull as usize] += 1;
            }
        }
    }

    pub(super) fn note_news(&mut self, news: News) {
        // News merged from another worker is not passed on again (it would echo forever).
        if !self.share_news || self.merging {
            return;
        }
        if let Some(slot) = self.news.get_mut(self.news_len) {
            *slot = news;
            self.news_len += 1;
        } else {
            self.stats.news_lost += 1;
        }
    }
}

/// Teach table `t` that `key` = (port, address) has `mac` (None: the packet carried no address).
pub(super) fn learn<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    key: (u16, A),
    mac: Option<Mac>,
    how: Learn,
    now: u64,
) -> Learned {
    let (port, ip) = key;
    let s = match t.find(port, ip) {
        Some(s) => s,
        None => {
            let (true, Some(_), Some(p)) = (how.create, mac, core.ports.get(port as usize)) else {
                // A confirmation for a neighbour this worker never asked for may answer another
                // worker's request (the kernel spreads flows, not conversations): pass it on.
                if let (Some(m), true) = (mac, how.confirm) {
                    core.note_news(News {
                        v6: A::V6,
                        confirm: true,
                        port,
                        ip: ip.wide(),
                        mac: m,
                    });
                }
                return Learned::Ignored;
            };
            let adj = Adjacency::new(port, p.mtu, [0; 6], p.mac);
            match t.insert(port, ip, adj, now) {
                Some(s) => s,
                None => {
                    core.stats.table_full += 1;
                    return Learned::Full;
                }
            }
        }
    };
    let Some(e) = t.entries_mut().get_mut(s as usize) else {
        return Learned::Ignored;
    };
    let known = e.state != NeighbourState::Incomplete;
    let fresh = if how.confirm {
        NeighbourState::Reachable
    } else {
        NeighbourState::Stale
    };
    let outcome = match mac {
        Some(m) if !known || (m != e.mac() && how.replace) => {
            e.adj.macs[..6].copy_from_slice(&m);
            e.state = fresh;
            e.confirmed = now;
            e.probes = 0;
            e.used = false;
            core.stats.learned += 1;
            if !known {
                let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
                core.release(pool, q, A::REWRITE);
            }
            Learned::Updated
        }
        Some(m) if m != e.mac() => {
            // RFC 4861 7.2.5: a different address without the override flag only makes a
            // reachable entry stale.
            if e.state == NeighbourState::Reachable {
                e.state = NeighbourState::Stale;
                Learned::Updated
            } else {
                Learned::Unchanged
            }
        }
        _ if known && how.confirm => {
            e.state = NeighbourState::Reachable;
            e.confirmed = now;
            e.probes = 0;
            e.used = false;
            Learned::Updated
        }
        _ => Learned::Unchanged,
    };
    if outcome == Learned::Updated && e.state != NeighbourState::Incomplete {
        core.note_news(News {
            v6: A::V6,
            confirm: e.state == NeighbourState::Reachable,
            port,
            ip: ip.wide(),
            mac: e.mac(),
        });
    }
    outcome
}

/// Whether entry `e` may be used to send now (MAC known and not expired); marks stale use.
#[inline]
pub(super) fn usable<A>(e: &mut Entry<A>, ticks: &Ticks, now: u64) -> bool {
    if e.state == NeighbourState::Incomplete {
        return false;
    }
    let age = now.wrapping_sub(e.confirmed);
    if age >= ticks.gc {
        return false;
    }
    if e.state == NeighbourState::Reachable && age >= ticks.reachable {
        e.state = NeighbourState::Stale;
    }
    if e.state == NeighbourState::Stale {
        e.used = true;
    }
    true
}

/// Queue packet `b` for resolution (the work of `ip4-arp` and `ip6-discover`); Err: drop reason.
pub(super) fn resolve_packet<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    b: u32,
    now: u64,
) -> Result<(), u16> {
    let meta = *pool.meta(b);
    core.last_timestamp_ns = meta.timestamp_ns;
    let s = if meta.next_scratch == GLEAN {
        let port = meta.tx_port;
        let Some(p) = core.ports.get(port as usize) else {
            return Err(ResolveError::UnknownPort.id());
        };
        let Some(ip) = A::destination(pool.data(b), meta.l3_offset as usize) else {
            return Err(ResolveError::Malformed.id());
        };
        if A::source(p, ip).is_none() {
            return Err(ResolveError::NoSourceAddress.id());
        }
        match t.find(port, ip) {
            Some(s) => s,
            None => {
                let adj = Adjacency::new(port, p.mtu, [0; 6], p.mac);
                match t.insert(port, ip, adj, now) {
                    Some(s) => s,
                    None => {
                        core.stats.table_full += 1;
                        return Err(ResolveError::TableFull.id());
                    }
                }
            }
        }
    } else {
        t.slot_of(meta.next_scratch)
            .ok_or(ResolveError::StaleAdjacency.id())?
    };
    let id = t.id(s);
    pool.meta_mut(b).next_scratch = id;
    let Some(e) = t.entries_mut().get_mut(s as usize) else {
        return Err(ResolveError::StaleAdjacency.id());
    };
    if usable(e, &core.ticks, now) {
        // Resolved since the lookup: straight on to rewrite.
        return if core.outbox.push(A::REWRITE, b) {
            Ok(())
        } else {
            core.stats.outbox_drops += 1;
            Err(ResolveError::OutboxFull.id())
        };
    }
    if e.state != NeighbourState::Incomplete {
        // Expired: resolve again from scratch.
        e.state = NeighbourState::Incomplete;
        e.probes = 0;
        e.used = false;
    }
    if e.queue.len == 0 && e.probes == 0 {
        // Resolution starts now (a pinned entry may have waited idle since the build).
        e.created = now;
    }
    if e.probes == 0 || now.wrapping_sub(e.last_request) >= core.ticks.retry {
        core.send_request(pool, e, false, now);
    }
    if e.queue.len >= core.queue_per_neighbour || !core.queue.push(&mut e.queue, b) {
        core.stats.queue_drops += 1;
        return Err(ResolveError::QueueFull.id());
    }
    core.stats.queued += 1;
    Ok(())
}

/// Delete every entry of `t` on `port`, pinned ones too, freeing the packets queued on them
/// (counted as `port-removed`).
pub(super) fn remove_port_entries<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    port: u16,
) {
    for s in 0..t.entries().len() {
        if t.entries().get(s).is_some_and(|e| e.live && e.port == port) {
            let q = t.remove(s as u16);
            core.drop_queue(pool, q, TxError::PortRemoved as usize);
        }
    }
}

/// Age up to `count` entries of `t` from its sweep cursor.
pub(super) fn sweep_table<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    now: u64,
    count: usize,
) {
    let ticks = core.ticks;
    let n = t.entries().len();
    for _ in 0..count.min(n) {
        let s = t.cursor;
        t.cursor = (t.cursor + 1) % n;
        let Some(e) = t.entries_mut().get_mut(s) else {
            continue;
        };
        if !e.live {
            continue;
        }
        let since_request = now.wrapping_sub(e.last_request);
        let delete = match e.state {
            NeighbourState::Incomplete => {
                if now.wrapping_sub(e.created) >= ticks.incomplete {
                    if !e.pinned || e.queue.len > 0 {
                        core.stats.resolution_failures += 1;
                    }
                    let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
                    core.drop_queue(pool, q, TxError::ResolutionFailed as usize);
                    e.created = now;
                    e.probes = 0;
                    true
                } else {
                    if e.queue.len > 0 && since_request >= ticks.retry {
                        core.send_request(pool, e, false, now);
                    }
                    false
                }
            }
            NeighbourState::Reachable | NeighbourState::Stale => {
                let age = now.wrapping_sub(e.confirmed);
                let failed = e.state == NeighbourState::Stale
                    && e.probes >= MAX_PROBES
                    && since_request >= ticks.retry;
                if age >= ticks.gc || failed {
                    core.stats.aged += 1;
                    e.state = NeighbourState::Incomplete;
                    e.created = now;
                    e.probes = 0;
                    e.used = false;
                    true
                } else {
                    if e.state == NeighbourState::Reachable && age >= ticks.reachable {
                        e.state = NeighbourState::Stale;
                    }
                    if e.state == NeighbourState::Stale
                        && e.used
                        && age >= ticks.probe_delay
                        && since_request >= ticks.retry
                        && core.send_request(pool, e, true, now)
                    {
                        e.used = false;
                    }
                    false
                }
            }
        };
        // A pinned entry (a route's next hop) stays, empty; others go.
        if delete && !e.pinned {
            let q = t.remove(s as u16);
            core.drop_queue(pool, q, TxError::ResolutionFailed as usize);
        }
    }
}
