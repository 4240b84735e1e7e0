//! Metering: counts packets into flows (one `FlowTable` per family) and decides when a flow is
//! reported — idle timeout (shorter once TCP FIN or RST was seen), active timeout (a delta,
//! the flow goes on), eviction from a full bucket, or a forced flush — turning entries into
//! `FlowRecord`s pushed to the worker's ring. Time is a caller's argument (wall ms, read once
//! per vector), so tests drive it with a fake clock. It never allocates, locks or blocks on
//! the per-packet path; a full ring drops the record and counts it (`ring_drops`), except
//! that timeouts keep the flow and retry on the next sweep.

use crate::key::{FlowKey, Key4, Key6, Observation};
use crate::record::{Annotation, EndReason, FlowRecord};
use crate::ring::Producer;
use crate::table::{Entry, FlowTable, Placed};
use graph::Counter;
use packet::headers::tcp;
use std::sync::atomic::{AtomicU64, Ordering};

/// Idle time after which a flow that saw FIN or RST ends (or the idle timeout, if shorter).
pub const TCP_END_MS: u64 = 2_000;

/// Counters of one worker's metering, read by the control plane.
#[derive(Debug, Default)]
pub struct MeterCounters {
    /// Packets counted into flows.
    pub packets: Counter,
    /// Packets passed over by sampling.
    pub skipped: Counter,
    /// Packets that were not IPv4/IPv6 or too short to read (forwarded, not counted).
    pub unreadable: Counter,
    /// Flows created.
    pub flows: Counter,
    /// Flows evicted from a full bucket (reported as `lackOfResources`).
    pub evicted: Counter,
    /// Records handed to the exporter.
    pub records: Counter,
    /// Records lost because the ring to the exporter was full.
    pub ring_drops: Counter,
    /// Flows in the tables (a gauge, updated by the sweep).
    pub live: AtomicU64,
}

/// The timeouts, in ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Idle timeout.
    pub idle_ms: u64,
    /// Active timeout.
    pub active_ms: u64,
}

/// What the sweep decides for one live entry.
enum Due {
    /// Nothing yet.
    No,
    /// Report and remove.
    End(EndReason),
    /// Report the delta and keep metering.
    Delta,
    /// Remove without a report (nothing counted since the last one).
    Silent,
}

fn due<K>(e: &Entry<K>, now: u64, t: Timeouts) -> Due {
    let idle = now.saturating_sub(e.last_ms);
    let closing = e.life_flags & (tcp::FIN | tcp::RST) != 0;
    let idle_limit = if closing {
        t.idle_ms.min(TCP_END_MS)
    } else {
        t.idle_ms
    };
    if idle >= idle_limit {
        if e.packets == 0 {
            Due::Silent
        } else if closing {
            Due::End(EndReason::EndOfFlow)
        } else {
            Due::End(EndReason::Idle)
        }
    } else if e.packets != 0 && now.saturating_sub(e.first_ms) >= t.active_ms {
        Due::Delta
    } else {
        Due::No
    }
}

/// The record of entry `e` (annotation `a`) ending for `reason`.
fn record<K: FlowKey>(e: &Entry<K>, a: Annotation, reason: EndReason) -> FlowRecord {
    let (src, dst, src_port, dst_port, protocol, in_port) = e.key.fields();
    FlowRecord {
        src,
        dst,
        src_port,
        dst_port,
        protocol,
        tcp_flags: e.tcp_flags,
        ingress: u32::from(in_port) + 1,
        egress: e.egress,
        packets: e.packets,
        octets: e.octets,
        start_ms: e.first_ms,
        end_ms: e.last_ms,
        reason,
        annotation: a,
        sampling: e.sampling.max(1),
    }
}

/// One packet staged for counting: its flow's key and hash (its bucket already prefetched),
/// what it adds, and its sending port + 1 (0: unknown).
#[derive(Clone, Copy, Debug, Default)]
pub struct Staged<K> {
    /// The flow.
    pub key: K,
    /// Its hash in the table it goes to.
    pub hash: u64,
    /// What the packet adds.
    pub obs: Observation,
    /// Sending port + 1, or 0.
    pub egress: u32,
}

/// Count one staged packet into `t`; a flow evicted for it is reported (or its record dropped
/// and counted when the ring is full).
#[inline(always)]
pub(crate) fn account<K: FlowKey>(
    t: &mut FlowTable<K>,
    c: &MeterCounters,
    out: &mut Producer<FlowRecord>,
    p: &Staged<K>,
    sampling: u32,
    now: u64,
    annotation: Option<Annotation>,
) {
    let (key, o, egress) = (&p.key, p.obs, p.egress);
    let i = match t.place(key, p.hash, now) {
        Placed::Found(i) => i,
        Placed::New(i) => {
            c.flows.add(1);
            i
        }
        Placed::Evicted(i, old) => {
            c.flows.add(1);
            c.evicted.add(1);
            if old.packets != 0 {
                let r = record(&old, t.annotation(i), EndReason::LackOfResources);
                if out.push(r).is_ok() {
                    c.records.add(1);
                } else {
                    c.ring_drops.add(1);
                }
            }
            if let Some(a) = t.annotation_mut(i) {
                *a = Annotation::default();
            }
            i
        }
    };
    let e = t.entry_mut(i);
    if e.packets == 0 {
        e.first_ms = now;
        e.sampling = sampling;
    }
    e.packets += 1;
    e.octets += u64::from(o.octets);
    e.last_ms = now;
    e.tcp_flags |= o.tcp_flags;
    e.life_flags |= o.tcp_flags;
    if egress != 0 {
        e.egress = egress;
    }
    if let Some(a) = annotation {
        if let Some(slot) = t.annotation_mut(i) {
            if a.server.is_some() {
                slot.server = a.server;
            }
            if a.cookie.is_some() {
                slot.cookie = a.cookie;
            }
        }
    }
}

/// Visit up to `buckets` buckets of `t`, reporting what is due (all of it with
/// `EndReason::Forced` when `force`). Returns false when the ring filled up (the rest waits).
fn sweep_table<K: FlowKey>(
    t: &mut FlowTable<K>,
    c: &MeterCounters,
    out: &mut Producer<FlowRecord>,
    buckets: usize,
    now: u64,
    timeouts: Timeouts,
    force: bool,
) -> (usize, bool) {
    let mut ring_full = false;
    let done = t.sweep(buckets, |t, i| {
        let e = *t.entry_mut(i);
        let verdict = if force {
            if e.packets == 0 {
                Due::Silent
            } else {
                Due::End(EndReason::Forced)
            }
        } else {
            due(&e, now, timeouts)
        };
        let reason = match verdict {
            Due::No => return true,
            Due::Silent => {
                t.remove(i);
                return true;
            }
            Due::End(r) => r,
            Due::Delta => EndReason::Active,
        };
        if out.push(record(&e, t.annotation(i), reason)).is_err() {
            ring_full = true;
            return false;
        }
        c.records.add(1);
        if matches!(verdict, Due::Delta) {
            let e = t.entry_mut(i);
            e.packets = 0;
            e.octets = 0;
            e.tcp_flags = 0;
        } else {
            t.remove(i);
        }
        true
    });
    (done, !ring_full)
}

/// One metering place of one worker (input arcs, or output): an IPv4 and an IPv6 table.
pub struct Meter {
    /// IPv4 flows.
    pub v4: FlowTable<Key4>,
    /// IPv6 flows.
    pub v6: FlowTable<Key6>,
    /// Sweep progress carried between calls (fractions of a bucket, x 1000).
    carry_milli: u64,
    last_sweep_ms: u64,
    /// Buckets still to visit in a forced flush (both tables), 0 when none is under way.
    flush_left: (usize, usize),
}

/// Why a meter could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the allocator refused {bytes} bytes for an IPFIX flow table")]
pub struct AllocError {
    /// Bytes asked for.
    pub bytes: u64,
}

impl Meter {
    /// Tables for `flows` flows of each family.
    pub fn new(flows: usize) -> Result<Meter, AllocError> {
        let v4 = FlowTable::new(flows).ok_or(AllocError {
            bytes: packet::huge::allocation_bytes::<Entry<Key4>>(flows),
        })?;
        let v6 = FlowTable::new(flows).ok_or(AllocError {
            bytes: packet::huge::allocation_bytes::<Entry<Key6>>(flows),
        })?;
        Ok(Meter {
            v4,
            v6,
            carry_milli: 0,
            last_sweep_ms: 0,
            flush_left: (0, 0),
        })
    }

    /// Stage an IPv4 packet: hash its key and start loading its bucket.
    #[inline(always)]
    pub fn stage4(&self, key: Key4, obs: Observation, egress: u32) -> Staged<Key4> {
        let hash = self.v4.hash(&key);
        self.v4.prefetch(hash);
        Staged {
            key,
            hash,
            obs,
            egress,
        }
    }

    /// Stage an IPv6 packet.
    #[inline(always)]
    pub fn stage6(&self, key: Key6, obs: Observation, egress: u32) -> Staged<Key6> {
        let hash = self.v6.hash(&key);
        self.v6.prefetch(hash);
        Staged {
            key,
            hash,
            obs,
            egress,
        }
    }

    /// Count a staged IPv4 packet (metered under one-in-`sampling`, at wall ms `now`).
    #[inline(always)]
    pub fn account4(
        &mut self,
        c: &MeterCounters,
        out: &mut Producer<FlowRecord>,
        p: &Staged<Key4>,
        sampling: u32,
        now: u64,
        annotation: Option<Annotation>,
    ) {
        account(&mut self.v4, c, out, p, sampling, now, annotation);
    }

    /// Count a staged IPv6 packet.
    #[inline(always)]
    pub fn account6(
        &mut self,
        c: &MeterCounters,
        out: &mut Producer<FlowRecord>,
        p: &Staged<Key6>,
        sampling: u32,
        now: u64,
        annotation: Option<Annotation>,
    ) {
        account(&mut self.v6, c, out, p, sampling, now, annotation);
    }

    /// Report what is due at `now`: each table is swept at a pace that visits every bucket
    /// once per `round_ms` (at most `max_buckets` a call; the rest carries over), so the cost
    /// follows time, not packets. A flush under way (`flush`) goes first, as fast as the ring
    /// allows. Returns true when no flush is left.
    pub fn sweep(
        &mut self,
        c: &MeterCounters,
        out: &mut Producer<FlowRecord>,
        now: u64,
        timeouts: Timeouts,
        max_buckets: usize,
    ) -> bool {
        let round_ms = (timeouts.idle_ms / 2).clamp(10, 1000);
        if self.last_sweep_ms == 0 || now < self.last_sweep_ms {
            self.last_sweep_ms = now;
        }
        let elapsed = (now - self.last_sweep_ms).min(round_ms);
        self.last_sweep_ms = now;
        let buckets = self.v4.buckets().max(self.v6.buckets()) as u64;
        self.carry_milli =
            (self.carry_milli + buckets * elapsed * 1000 / round_ms).min(buckets * 1000);
        if self.flush_left != (0, 0) {
            // A flush is one full round of each table from its cursor; the timeout sweep
            // waits (it would move the cursors).
            let (l4, l6) = self.flush_left;
            let (n4, ok4) = sweep_table(
                &mut self.v4,
                c,
                out,
                l4.min(max_buckets),
                now,
                timeouts,
                true,
            );
            let n6 = if ok4 {
                sweep_table(
                    &mut self.v6,
                    c,
                    out,
                    l6.min(max_buckets),
                    now,
                    timeouts,
                    true,
                )
                .0
            } else {
                0
            };
            self.flush_left = (l4 - n4, l6 - n6);
        } else {
            let want = ((self.carry_milli / 1000) as usize).min(max_buckets);
            if want > 0 {
                let (n4, _) = sweep_table(&mut self.v4, c, out, want, now, timeouts, false);
                let (n6, _) = sweep_table(&mut self.v6, c, out, want, now, timeouts, false);
                self.carry_milli = self.carry_milli.saturating_sub(n4.min(n6) as u64 * 1000);
            }
        }
        c.live.store(self.live() as u64, Ordering::Relaxed);
        self.flush_left == (0, 0)
    }

    /// Start a forced flush: every flow is reported (`forcedEnd`) over the next sweeps.
    pub fn flush(&mut self) {
        self.flush_left = (self.v4.buckets(), self.v6.buckets());
    }

    /// Flows in both tables.
    pub fn live(&self) -> usize {
        self.v4.live() + self.v6.live()
    }
}

#[cfg(test)]
#[path = "meter_tests.rs"]
mod tests;
