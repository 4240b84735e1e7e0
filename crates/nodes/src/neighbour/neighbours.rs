//! `Neighbours`: one worker's two tables and their core, the API the lookup, rewrite and
//! neighbour nodes call (lookup, adjacency, pin, ARP/ND input, maintenance, publication), and
//! the worker calls between two rounds when a port is added or removed at run time.

use super::*;

/// The neighbour state of one worker: both tables, the queue, the outbox, counters.
pub struct Neighbours {
    pub(super) v4: Table<u32>,
    pub(super) v6: Table<u128>,
    pub(super) core: Core,
    pub(super) last_sweep: u64,
    pub(super) last_publish: u64,
    pub(super) worker: usize,
    pub(super) view: NeighbourView,
    pub(super) inbox: Arc<Mutex<Mailbox>>,
    pub(super) peers: Vec<Arc<Mutex<Mailbox>>>,
    /// Live timers (None: those of the config, fixed).
    pub(super) timers: Option<Arc<NeighbourTimers>>,
    /// Live port MTUs and the generation last applied.
    pub(super) mtus: Option<(Arc<PortMtus>, u64)>,
    /// Live own addresses and the generation last applied.
    pub(super) addrs: Option<(Arc<PortAddresses>, u64)>,
    /// Answer ND for link-local addresses too (kept for rebuilding ports).
    pub(super) link_local: bool,
}

impl Neighbours {
    /// Tables for `config` on a worker whose TSC runs at `tsc_hz`.
    pub fn new(config: &NeighbourConfig, tsc_hz: u64) -> Neighbours {
        let hz = tsc_hz.max(1);
        let secs = |s: u32| hz.saturating_mul(s as u64);
        let capacity = config.capacity.clamp(1, MAX_CAPACITY);
        let view = NeighbourSnapshot {
            rows: Vec::with_capacity(capacity * 2),
            ..NeighbourSnapshot::default()
        };
        Neighbours {
            v4: Table::new(capacity),
            v6: Table::new(capacity),
            core: Core {
                ports: config
                    .ports
                    .iter()
                    .map(|p| PortInfo::new(p, config.link_local))
                    .collect(),
                queue: PacketQueue::new(config.queue_total),
                outbox: Outbox::new(OUTBOX_CAPACITY),
                limiter: RateLimiter::new(
                    config.requests_per_second,
                    (config.requests_per_second / 10).max(1),
                ),
                ticks: Ticks {
                    hz,
                    reachable: secs(config.reachable_seconds),
                    gc: secs(config.gc_seconds),
                    incomplete: secs(config.incomplete_seconds.max(1)),
                    retry: hz,
                    probe_delay: secs(5), // RFC 4861 DELAY_FIRST_PROBE_TIME
                    sweep: (hz / 1000).max(1),
                },
                queue_per_neighbour: config.queue_per_neighbour.max(1),
                stats: NeighbourStats::default(),
                share_news: false,
                news: vec![News::default(); MAILBOX_CAPACITY].into_boxed_slice(),
                news_len: 0,
                unreported: [0; TxError::COUNT as usize],
                last_timestamp_ns: 0,
                merging: false,
            },
            last_sweep: 0,
            last_publish: 0,
            worker: 0,
            view: Arc::new(Mutex::new(view)),
            inbox: Arc::new(Mutex::new(Mailbox {
                items: vec![News::default(); MAILBOX_CAPACITY].into_boxed_slice(),
                len: 0,
            })),
            peers: Vec::new(),
            timers: None,
            mtus: None,
            addrs: None,
            link_local: config.link_local,
        }
    }

    /// Take the ports' own addresses from `addrs` from now on (applied at each maintenance).
    pub fn set_port_addresses(&mut self, addrs: Arc<PortAddresses>) {
        self.addrs = Some((addrs, u64::MAX));
        self.refresh_addresses();
    }

    /// Apply changed own addresses (which answer ARP/ND and source requests).
    fn refresh_addresses(&mut self) {
        let Some((addrs, seen)) = &mut self.addrs else {
            return;
        };
        let generation = addrs.generation();
        if generation == *seen {
            return;
        }
        // Never wait for the control thread: try again at the next maintenance.
        let Some(list) = addrs.try_get() else {
            return;
        };
        *seen = generation;
        // The list may be longer than the ports (ids this worker is not told of yet) or
        // shorter (ports added by `set_port` before it grew): each side's extra are left be.
        for (info, (ip4, ip6)) in self.core.ports.iter_mut().zip(list) {
            if info.removed {
                // Removed or never given: no address until `set_port` gives the id again.
                continue;
            }
            let rebuilt = PortInfo::new(
                &NeighbourPort {
                    mac: info.mac,
                    mtu: info.mtu,
                    ip4,
                    ip6,
                },
                self.link_local,
            );
            info.ip4 = rebuilt.ip4;
            info.ip6 = rebuilt.ip6;
        }
    }

    /// Take the ports' MTUs from `mtus` from now on (applied at each maintenance).
    pub fn set_port_mtus(&mut self, mtus: Arc<PortMtus>) {
        self.mtus = Some((mtus, u64::MAX));
        self.refresh_mtus();
    }

    /// Apply changed MTUs to the ports and to the entries on them (only when they changed).
    fn refresh_mtus(&mut self) {
        let Some((mtus, seen)) = &mut self.mtus else {
            return;
        };
        let generation = mtus.generation();
        if generation == *seen {
            return;
        }
        *seen = generation;
        // `mtus.get` is 0 for a port past the list: such a port keeps its MTU.
        for (p, info) in self.core.ports.iter_mut().enumerate() {
            let mtu = mtus.get(p);
            if mtu == 0 || info.mtu == mtu {
                continue;
            }
            info.mtu = mtu;
            let port = p as u16;
            for e in self
                .v4
                .entries_mut()
                .iter_mut()
                .filter(|e| e.live && e.port == port)
            {
                e.adj.mtu = mtu;
            }
            for e in self
                .v6
                .entries_mut()
                .iter_mut()
                .filter(|e| e.live && e.port == port)
            {
                e.adj.mtu = mtu;
            }
        }
    }

    /// Take the reachable and gc timers from `timers` from now on (read at each maintenance).
    pub fn set_timers(&mut self, timers: Arc<NeighbourTimers>) {
        self.timers = Some(timers);
        self.refresh_timers();
    }

    pub(super) fn refresh_timers(&mut self) {
        if let Some(t) = &self.timers {
            let (reachable, gc) = t.get();
            let hz = self.core.ticks.hz;
            self.core.ticks.reachable = hz.saturating_mul(u64::from(reachable));
            self.core.ticks.gc = hz.saturating_mul(u64::from(gc));
        }
    }

    // --- Ports added and removed at run time ----------------------------------------------------

    /// Port `port` is `p` from now on: a port added at run time, or a new port taking a removed
    /// port's id. Its MAC, MTU and own addresses answer ARP/ND and source requests; ids skipped
    /// on the way stand for ports with no address. The live lists, when given
    /// (`set_port_addresses`, `set_port_mtus`), stay the authority: they are applied again at
    /// the next maintenance, over `p` for whatever they hold for `port`. Cold path: the worker
    /// calls it between two rounds.
    pub fn set_port(&mut self, port: u16, p: &NeighbourPort) {
        let i = usize::from(port);
        if i >= self.core.ports.len() {
            self.core.ports.resize_with(i + 1, PortInfo::absent);
        }
        self.core.ports[i] = PortInfo::new(p, self.link_local);
        if let Some((_, seen)) = &mut self.addrs {
            *seen = u64::MAX;
        }
        if let Some((_, seen)) = &mut self.mtus {
            *seen = u64::MAX;
        }
    }

    /// Port `port` is removed: free every packet queued for resolution on it (counted as
    /// `neighbour-tx` `port-removed`, like other packets freed between frames), delete every
    /// IPv4 and IPv6 entry on it, pinned ones included (an adjacency id of one is stale from
    /// now on), and leave the port with no address, so it answers no ARP or ND and sources no
    /// request, whatever the live address list says, until `set_port` gives the id again.
    /// Returns the packets freed. Packets already in the outbox are sent on as they are (the
    /// port's transmit side drops them). Cold path: the worker calls it between two rounds.
    pub fn remove_port(&mut self, port: u16, pool: &mut BufferPool) -> usize {
        let before = self.core.stats.queue_drops;
        remove_port_entries(&mut self.v4, &mut self.core, pool, port);
        remove_port_entries(&mut self.v6, &mut self.core, pool, port);
        if let Some(info) = self.core.ports.get_mut(usize::from(port)) {
            info.ip4.clear();
            info.ip6.clear();
            info.removed = true;
        }
        (self.core.stats.queue_drops - before) as usize
    }

    // --- For ip4-lookup / ip6-lookup and the rewrite nodes -------------------------------------

    /// The adjacency id of `ip` on `port` when its MAC is known and fresh enough to use; None:
    /// send the packet to `ip4-arp` with `next_scratch = GLEAN` and `tx_port = port`.
    #[inline]
    pub fn lookup4(&mut self, port: u16, ip: u32, now: u64) -> Option<u32> {
        lookup(&mut self.v4, &self.core.ticks, port, ip, now)
    }

    /// As `lookup4`, for IPv6 (a miss goes to `ip6-discover`).
    #[inline]
    pub fn lookup6(&mut self, port: u16, ip: u128, now: u64) -> Option<u32> {
        lookup(&mut self.v6, &self.core.ticks, port, ip, now)
    }

    /// The adjacency of a neighbour adjacency id (bit 31 set) when usable; None: send the
    /// packet to `ip4-arp` with `next_scratch` unchanged (it queues it or drops it as
    /// `stale-adjacency`).
    #[inline]
    pub fn adjacency4(&mut self, id: u32, now: u64) -> Option<Adjacency> {
        adjacency(&mut self.v4, &self.core.ticks, id, now)
    }

    /// As `adjacency4`, for IPv6 (None: to `ip6-discover`).
    #[inline]
    pub fn adjacency6(&mut self, id: u32, now: u64) -> Option<Adjacency> {
        adjacency(&mut self.v6, &self.core.ticks, id, now)
    }

    /// A permanent (never deleted) entry for a route's next hop `ip` on `port`, created
    /// incomplete; its adjacency id can stand in a `NextHopTable` group like any adjacency.
    /// None when the table is full or the port is unknown. Cold path (graph build).
    pub fn pin4(&mut self, port: u16, ip: Ipv4Addr) -> Option<u32> {
        pin(&mut self.v4, &self.core, port, u32::from(ip))
    }

    /// As `pin4`, for IPv6.
    pub fn pin6(&mut self, port: u16, ip: Ipv6Addr) -> Option<u32> {
        pin(&mut self.v6, &self.core, port, u128::from(ip))
    }

    /// Let the IPv4 entry of adjacency id `id` age out again (a gateway no route uses now).
    pub fn unpin4(&mut self, id: u32) {
        unpin(&mut self.v4, id);
    }

    /// As `unpin4`, for IPv6.
    pub fn unpin6(&mut self, id: u32) {
        unpin(&mut self.v6, id);
    }

    // --- Outbox, timers, publication -----------------------------------------------------------

    /// Hand the outbox to `emit(next, buffer)` in order until it refuses (returns false); a
    /// refused buffer stays first in the outbox. Returns how many were taken.
    pub fn drain_outbox(&mut self, emit: &mut impl FnMut(u16, u32) -> bool) -> usize {
        let mut n = 0;
        while let Some((next, b)) = self.core.outbox.front() {
            if !emit(next, b) {
                break;
            }
            self.core.outbox.pop();
            n += 1;
        }
        n
    }

    /// Buffers waiting in the outbox.
    pub fn outbox_len(&self) -> usize {
        self.core.outbox.len
    }

    /// Timer work, at most once a millisecond: merge news from other workers, sweep
    /// `SWEEP_BATCH` entries of each family per millisecond since the last sweep (a worker
    /// that slept catches up), publish the snapshot once a second.
    pub fn maintain(&mut self, pool: &mut BufferPool, now: u64) {
        let since = now.wrapping_sub(self.last_sweep);
        if since < self.core.ticks.sweep {
            return;
        }
        self.last_sweep = now;
        self.refresh_timers();
        self.refresh_mtus();
        self.refresh_addresses();
        self.send_news();
        self.merge_news(pool, now);
        let batches = (since / self.core.ticks.sweep).min(MAX_CAPACITY as u64) as usize;
        self.sweep(pool, now, SWEEP_BATCH.saturating_mul(batches));
        if self.last_publish == 0 || now.wrapping_sub(self.last_publish) >= self.core.ticks.hz {
            self.publish(now);
        }
    }

    /// When `maintain` next has work that should not wait for traffic (TSC), for a worker
    /// that sleeps while idle: the next sweep while packets wait in the outbox, for news or
    /// for resolution; else the next publication of the snapshot (entries age by a sweep
    /// that catches up whenever it runs).
    pub fn next_timer(&self) -> u64 {
        if self.core.outbox.len > 0 || self.core.news_len > 0 || self.core.queue.used > 0 {
            return self.last_sweep.wrapping_add(self.core.ticks.sweep);
        }
        self.last_publish.wrapping_add(self.core.ticks.hz)
    }

    /// Age the next `count` entries of each family now (deletes, retries, probes).
    pub fn sweep(&mut self, pool: &mut BufferPool, now: u64, count: usize) {
        sweep_table(&mut self.v4, &mut self.core, pool, now, count);
        sweep_table(&mut self.v6, &mut self.core, pool, now, count);
    }

    /// Copy entries and counters into the view (skipped when the control plane holds it).
    pub fn publish(&mut self, now: u64) {
        let Ok(mut s) = self.view.try_lock() else {
            return;
        };
        self.last_publish = now;
        s.worker = self.worker;
        s.taken_tsc = now;
        s.stats = self.core.stats;
        s.rows.clear();
        push_rows(&self.v4, &mut s.rows, now, &self.core.ticks);
        push_rows(&self.v6, &mut s.rows, now, &self.core.ticks);
    }

    /// The control plane's view (filled by `publish`).
    pub fn view(&self) -> NeighbourView {
        self.view.clone()
    }

    /// Counters now.
    pub fn stats(&self) -> NeighbourStats {
        self.core.stats
    }

    /// Entries in use: (IPv4, IPv6).
    pub fn len(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// Packets queued for resolution.
    pub fn queued(&self) -> usize {
        self.core.queue.used
    }

    /// Every entry now, as `show neighbours` would list it (cold path).
    pub fn rows(&self, now: u64) -> Vec<NeighbourRow> {
        let mut rows = Vec::with_capacity(self.v4.len() + self.v6.len());
        push_rows(&self.v4, &mut rows, now, &self.core.ticks);
        push_rows(&self.v6, &mut rows, now, &self.core.ticks);
        rows
    }

    /// Free every queued and outboxed buffer (at shutdown, before the pool goes); returns how
    /// many. The entries stay.
    pub fn flush(&mut self, pool: &mut BufferPool) -> usize {
        let before = self.core.stats.queue_drops;
        for e in self.v4.entries_mut().iter_mut() {
            let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
            self.core
                .drop_queue(pool, q, TxError::FlushedAtStop as usize);
        }
        for e in self.v6.entries_mut().iter_mut() {
            let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
            self.core
                .drop_queue(pool, q, TxError::FlushedAtStop as usize);
        }
        let mut n = (self.core.stats.queue_drops - before) as usize;
        while let Some((_, b)) = self.core.outbox.front() {
            self.core.outbox.pop();
            pool.free(b);
            self.core.unreported[TxError::FlushedAtStop as usize] += 1;
            n += 1;
        }
        n
    }

    /// Packets freed outside a node's frame since the last call, by `TX_ERRORS` index (counted
    /// by `neighbour-tx`; the worker counts what `flush` freed at stop itself).
    pub fn take_unreported(&mut self) -> [u64; TxError::COUNT as usize] {
        std::mem::take(&mut self.core.unreported)
    }

    // --- Other workers ---------------------------------------------------------------------------

    pub(super) fn send_news(&mut self) {
        for i in 0..self.core.news_len {
            let news = self.core.news[i];
            for peer in &self.peers {
                let delivered = match peer.try_lock() {
                    Ok(mut m) => {
                        let at = m.len;
                        match m.items.get_mut(at) {
                            Some(slot) => {
                                *slot = news;
                                m.len += 1;
                                true
                            }
                            None => false,
                        }
                    }
                    Err(_) => false,
                };
                if !delivered {
                    self.core.stats.news_lost += 1;
                }
            }
        }
        self.core.news_len = 0;
    }

    pub(super) fn merge_news(&mut self, pool: &mut BufferPool, now: u64) {
        if self.peers.is_empty() {
            return;
        }
        let Ok(mut inbox) = self.inbox.try_lock() else {
            return;
        };
        self.core.merging = true;
        for i in 0..inbox.len {
            let n = inbox.items[i];
            let how = Learn {
                create: false,
                confirm: n.confirm,
                replace: true,
            };
            let r = if n.v6 {
                learn(
                    &mut self.v6,
                    &mut self.core,
                    pool,
                    (n.port, n.ip),
                    Some(n.mac),
                    how,
                    now,
                )
            } else {
                let ip = n.ip as u32;
                learn(
                    &mut self.v4,
                    &mut self.core,
                    pool,
                    (n.port, ip),
                    Some(n.mac),
                    how,
                    now,
                )
            };
            if r != Learned::Ignored {
                self.core.stats.news_merged += 1;
            }
        }
        self.core.merging = false;
        inbox.len = 0;
        // What this worker learned from news is not news for the others (`send_news` ran
        // just before, so only that is dropped).
        self.core.news_len = 0;
    }

    // --- The nodes' work ---------------------------------------------------------------------------

    /// `arp-input` for one packet: Ok(next) or Err(drop reason).
    pub(super) fn arp_packet(
        &mut self,
        pool: &mut BufferPool,
        b: u32,
        now: u64,
    ) -> Result<u16, u16> {
        let meta = *pool.meta(b);
        let port = meta.rx_port;
        let Some(p) = self.core.ports.get(port as usize) else {
            return Err(ArpError::UnknownPort.id());
        };
        let our_mac = p.mac;
        let l3 = meta.l3_offset as usize;
        let Some(a) = pool.data(b).get(l3..l3 + ARP_LEN) else {
            return Err(ArpError::Malformed.id());
        };
        if be16(a, 0) != ARP_HTYPE_ETHERNET
            || be16(a, 2) != eth::TYPE_IPV4
            || a[4] != 6
            || a[5] != 4
        {
            return Err(ArpError::Malformed.id());
        }
        let op = be16(a, 6);
        if op != ARP_OP_REQUEST && op != ARP_OP_REPLY {
            return Err(ArpError::UnsupportedOp.id());
        }
        let mut sha: Mac = [0; 6];
        sha.copy_from_slice(&a[8..14]);
        let spa = be32(a, 14);
        let tpa = be32(a, 24);
        if sha[0] & 1 != 0 || sha == [0; 6] {
            return Err(ArpError::BadSender.id());
        }
        if p.is_own4(spa) {
            return Err(ArpError::AddressConflict.id());
        }
        let for_us = p.is_own4(tpa);
        // 0.0.0.0 (an RFC 5227 probe), loopback, multicast and broadcast senders teach nothing.
        let top = spa >> 24;
        let sender_ok = spa != 0 && top != 127 && top < 224;
        // RFC 826 merge: update an existing entry whoever the target; create one when the
        // packet is for us. A reply to us confirms reachability.
        let learned = if sender_ok {
            let how = Learn {
                create: for_us,
                confirm: for_us && op == ARP_OP_REPLY,
                replace: true,
            };
            learn(
                &mut self.v4,
                &mut self.core,
                pool,
                (port, spa),
                Some(sha),
                how,
                now,
            )
        } else {
            Learned::Ignored
        };
        if !for_us {
            return Err(match learned {
                Learned::Updated | Learned::Unchanged => ArpError::Learned.id(),
                _ => ArpError::NotForUs.id(),
            });
        }
        if op == ARP_OP_REPLY {
            return Err(match learned {
                Learned::Full => ArpError::TableFull.id(),
                Learned::Ignored => ArpError::BadSender.id(),
                _ => ArpError::Learned.id(),
            });
        }
        // A request for one of our addresses: answer in the same buffer.
        let (m, slot) = pool.slot_mut(b);
        let start = m.data_offset as usize;
        let len = (l3 + ARP_LEN).max(eth::MIN_FRAME);
        let Some(f) = slot.get_mut(start..start + len) else {
            return Err(ArpError::Malformed.id());
        };
        f[eth::DST..eth::DST + 6].copy_from_slice(&sha);
        f[eth::SRC..eth::SRC + 6].copy_from_slice(&our_mac);
        let a = &mut f[l3..l3 + ARP_LEN];
        put16(a, 6, ARP_OP_REPLY);
        a[8..14].copy_from_slice(&our_mac);
        a[14..18].copy_from_slice(&tpa.to_be_bytes());
        a[18..24].copy_from_slice(&sha);
        a[24..28].copy_from_slice(&spa.to_be_bytes());
        f[l3 + ARP_LEN..].fill(0);
        m.length = len as u16;
        m.tx_port = port;
        self.core.stats.arp_replies_sent += 1;
        Ok(NEXT_OUTPUT)
    }

    /// `ip6-nd` for one packet: Ok(next) or Err(drop reason).
    pub(super) fn nd_packet(
        &mut self,
        pool: &mut BufferPool,
        b: u32,
        now: u64,
    ) -> Result<u16, u16> {
        let meta = *pool.meta(b);
        let port = meta.rx_port;
        let Some(p) = self.core.ports.get(port as usize) else {
            return Err(NdError::UnknownPort.id());
        };
        let our_mac = p.mac;
        let l3 = meta.l3_offset as usize;
        let d = pool.data(b);
        let Some(h) = d.get(l3..) else {
            return Err(NdError::Malformed.id());
        };
        if h.len() < ip6::HEADER_LEN + 24 || h[0] >> 4 != 6 || h[ip6::NEXT_HEADER] != proto::ICMP6 {
            return Err(NdError::Malformed.id());
        }
        let payload = be16(h, ip6::PAYLOAD_LEN) as usize;
        if payload < 24 || ip6::HEADER_LEN + payload > h.len() {
            return Err(NdError::Malformed.id());
        }
        let icmp = &h[ip6::HEADER_LEN..ip6::HEADER_LEN + payload];
        let kind = icmp[0];
        if kind != ND_NS && kind != ND_NA {
            return Err(NdError::UnsupportedType.id());
        }
        // RFC 4861 7.1: only a packet no router forwarded may change the cache.
        if h[ip6::HOP_LIMIT] != 255 {
            return Err(NdError::BadHopLimit.id());
        }
        if icmp[1] != 0 {
            return Err(NdError::Malformed.id());
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&h[ip6::SRC..ip6::SRC + 16]);
        dst.copy_from_slice(&h[ip6::DST..ip6::DST + 16]);
        let pseudo = checksum::pseudo_header_v6(src, dst, proto::ICMP6, payload as u32);
        if checksum::fold(checksum::sum(pseudo, icmp)) != 0xffff {
            return Err(NdError::BadChecksum.id());
        }
        let (src, dst) = (u128::from_be_bytes(src), u128::from_be_bytes(dst));
        let target = be128(icmp, 8);
        if is_multicast6(target) || is_multicast6(src) {
            return Err(NdError::Malformed.id());
        }
        let want = if kind == ND_NS {
            ND_OPT_SLLA
        } else {
            ND_OPT_TLLA
        };
        let lla = link_layer_option(&icmp[24..], want).ok_or(NdError::Malformed.id())?;
        if lla.is_some_and(|m| m[0] & 1 != 0) {
            return Err(NdError::Malformed.id());
        }
        let mut eth_src: Mac = [0; 6];
        eth_src.copy_from_slice(&d[eth::SRC..eth::SRC + 6]);
        if kind == ND_NA {
            let flags = icmp[4];
            if is_multicast6(dst) && flags & NA_SOLICITED != 0 {
                return Err(NdError::Malformed.id());
            }
            if !is_multicast6(dst) && !p.is_own6(dst) {
                return Err(NdError::NotForUs.id());
            }
            if p.is_own6(target) {
                return Err(NdError::AddressConflict.id());
            }
            // RFC 4861 7.2.5: an advertisement updates an entry, never creates one.
            let how = Learn {
                create: false,
                confirm: flags & NA_SOLICITED != 0,
                replace: flags & NA_OVERRIDE != 0,
            };
            return Err(
                match learn(
                    &mut self.v6,
                    &mut self.core,
                    pool,
                    (port, target),
                    lla,
                    how,
                    now,
                ) {
                    Learned::Ignored => NdError::Unsolicited.id(),
                    _ => NdError::Learned.id(),
                },
            );
        }
        // A solicitation (RFC 4861 7.1.1 and 7.2.3).
        let unspecified = src == 0;
        if unspecified && (dst != solicited_node(target) || lla.is_some()) {
            return Err(NdError::Malformed.id());
        }
        if !p.is_own6(target) {
            return Err(NdError::NotForUs.id());
        }
        if dst != target && dst != solicited_node(target) && !p.is_own6(dst) {
            return Err(NdError::NotForUs.id());
        }
        if p.is_own6(src) {
            return Err(NdError::AddressConflict.id());
        }
        if let (false, Some(m)) = (unspecified, lla) {
            let how = Learn {
                create: true,
                confirm: false,
                replace: true,
            };
            learn(
                &mut self.v6,
                &mut self.core,
                pool,
                (port, src),
                Some(m),
                how,
                now,
            );
        }
        // Answer in the same buffer: to the solicitor, or to all nodes for a DAD probe.
        let (reply_dst, eth_dst, flags) = if unspecified {
            (
                ALL_NODES,
                multicast_mac6(ALL_NODES),
                NA_ROUTER | NA_OVERRIDE,
            )
        } else {
            (
                src,
                lla.unwrap_or(eth_src),
                NA_ROUTER | NA_SOLICITED | NA_OVERRIDE,
            )
        };
        let (m, slot) = pool.slot_mut(b);
        let start = m.data_offset as usize;
        let len = l3 + ip6::HEADER_LEN + ND_LEN;
        let Some(f) = slot.get_mut(start..start + len) else {
            return Err(NdError::Malformed.id());
        };
        f[eth::DST..eth::DST + 6].copy_from_slice(&eth_dst);
        f[eth::SRC..eth::SRC + 6].copy_from_slice(&our_mac);
        write_nd(
            &mut f[l3..],
            NdMessage {
                kind: ND_NA,
                flags,
                src: target,
                dst: reply_dst,
                target,
                option: ND_OPT_TLLA,
                mac: our_mac,
            },
        );
        m.length = len as u16;
        m.l4_offset = (l3 + ip6::HEADER_LEN) as u16;
        m.tx_port = port;
        self.core.stats.na_sent += 1;
        Ok(NEXT_OUTPUT)
    }
}

/// The link-layer address in option `want` of ND options `opts`; None (outer) when the options
/// are malformed (RFC 4861 4.6: a zero length is invalid).
pub(super) fn link_layer_option(mut opts: &[u8], want: u8) -> Option<Option<Mac>> {
    let mut found = None;
    while !opts.is_empty() {
        if opts.len() < 2 {
            return None;
        }
        let len = opts[1] as usize * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == want && found.is_none() {
            let mut m: Mac = [0; 6];
            m.copy_from_slice(&opts[2..8]);
            found = Some(m);
        }
        opts = &opts[len..];
    }
    Some(found)
}
