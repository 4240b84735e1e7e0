//! The `Node` and `InputNode` traits and what a node sees while it runs (`NodeContext`).
//! A node transforms packets and names where each goes next; it never enqueues by itself and
//! never keeps references to buffers after it returns (except a port that takes ownership).
//! A node that sends more packets than it receives (flood copies) hands the extra ones to the
//! dispatcher through its `Emitter`.

use crate::counters::Counter;
use packet::BufferPool;

/// Where the packets of a processed frame go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// `nexts[i]` holds the next index of packet `i`.
    PerPacket,
    /// Every packet goes to this next index (`nexts` is not read).
    AllTo(u16),
    /// The node took ownership of every packet (freed, transmitted or queued by it).
    Consumed,
}

/// A per-packet next index (with `Dispatch::PerPacket`) saying the node took ownership of that
/// packet (freed, transmitted or queued by it): the dispatcher enqueues it nowhere.
pub const NEXT_CONSUMED: u16 = u16::MAX;

/// What a node sees while processing one frame.
pub struct NodeContext<'a> {
    /// The worker's buffer pool.
    pub pool: &'a mut BufferPool,
    /// TSC at the start of this dispatch round.
    pub now_tsc: u64,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Worker number.
    pub worker: usize,
    /// Graph-wide error id of this node's reason 0.
    pub error_base: u16,
    /// Graph-wide drop counters, by error id (counted by `error-drop`).
    pub errors: &'a [Counter],
    /// Graph-wide (node name, reason) by error id, for traces and error-drop.
    pub error_names: &'a [(String, String)],
}

impl NodeContext<'_> {
    /// The graph-wide error id of this node's drop reason `reason` (its index in `error_reasons`).
    #[inline(always)]
    pub fn error_id(&self, reason: u16) -> u16 {
        self.error_base + reason
    }
}

/// One packet a node sends besides its frame: `buffer` goes to next index `next`, enqueued right
/// after frame packet `after` (so a port sees copies and originals in the order they arrived).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Emitted {
    /// Index in the frame of the packet this one follows.
    pub after: u16,
    /// Next index (as for `nexts`).
    pub next: u16,
    /// The buffer, owned by the dispatcher once emitted.
    pub buffer: u32,
}

/// A bounded, preallocated queue of extra packets (e.g. flood copies) a node fills during
/// `process`; the dispatcher empties it right after `process` returns, merging the packets
/// into the frame's order. It never allocates after construction: when full, `emit` hands the
/// buffer back and the node frees and counts it.
#[derive(Debug)]
pub struct Emitter {
    items: Box<[Emitted]>,
    len: usize,
}

impl Emitter {
    /// An emitter holding up to `capacity` packets per `process` call.
    pub fn new(capacity: usize) -> Emitter {
        Emitter {
            items: vec![Emitted::default(); capacity].into_boxed_slice(),
            len: 0,
        }
    }

    /// Packets it can hold per call.
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.items.len()
    }

    /// Packets emitted since the dispatcher last emptied it.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is emitted.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `emit` would refuse.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len == self.items.len()
    }

    /// Send `buffer` to next index `next` after frame packet `after` (calls should come in
    /// non-decreasing `after` order). `Err(buffer)` when full: the buffer is still the node's.
    #[inline(always)]
    pub fn emit(&mut self, after: usize, next: u16, buffer: u32) -> Result<(), u32> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = Emitted {
                    after: after as u16,
                    next,
                    buffer,
                };
                self.len += 1;
                Ok(())
            }
            None => Err(buffer),
        }
    }

    /// What was emitted (read by the dispatcher).
    #[inline(always)]
    pub fn items(&self) -> &[Emitted] {
        &self.items[..self.len]
    }

    /// Forget what was emitted (the dispatcher calls this after taking the packets).
    #[inline(always)]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// A node that processes frames handed to it.
pub trait Node: Send {
    /// The node's name, e.g. `ip4-lookup`.
    fn name(&self) -> &str;
    /// Names of the nodes it may send packets to; next index `i` is entry `i`.
    fn next_nodes(&self) -> Vec<String>;
    /// Names of its drop reasons; reason `i` is entry `i`.
    fn error_reasons(&self) -> Vec<String> {
        Vec::new()
    }
    /// Process `frame` (1..=256 buffers). Write a next index per packet into `nexts` when
    /// returning `Dispatch::PerPacket`.
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch;
    /// Called once when the run ends (flush files, release resources). Cold path.
    fn finish(&mut self) {}
    /// The node's emitter, for a node that sends more packets than it receives (see `Emitter`).
    /// The graph asks once when it is built; a node answering `Some` then must answer `Some`
    /// (the same emitter) every time. After each `process` the dispatcher enqueues what was
    /// emitted, after the frame packet each follows, and clears it.
    fn emitter(&mut self) -> Option<&mut Emitter> {
        None
    }
    /// A graph edit tells every internal node of an event (a port added or removed, see
    /// `GraphEdit::with_event`), between two rounds, after the edit's nodes were appended; the
    /// node may append next arcs to nodes that exist now (`arcs.add`). Cold path.
    fn on_event(&mut self, event: &dyn std::any::Any, arcs: &mut crate::edit::NextArcs<'_>) {
        let _ = (event, arcs);
    }
    /// One line saying what this node did to a traced packet (cold path).
    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "buffer {buffer}: length {} rx_port {} tx_port {}",
            m.length, m.rx_port, m.tx_port
        )
    }
}

/// A node that brings packets into the graph (a port's receive side or a generator).
pub trait InputNode: Send {
    /// The node's name, e.g. `eth0-rx`.
    fn name(&self) -> &str;
    /// Names of the nodes it may send packets to.
    fn next_nodes(&self) -> Vec<String>;
    /// Names of its drop reasons.
    fn error_reasons(&self) -> Vec<String> {
        Vec::new()
    }
    /// Receive up to `out.len()` packets into `out`, a next index per packet into `nexts` (when
    /// returning `Dispatch::PerPacket`); returns the count and where they go.
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch);
    /// True once the input can never produce another packet (e.g. a consumed pcap file).
    fn is_finished(&self) -> bool {
        false
    }
    /// A file descriptor that becomes readable (`POLLIN`) when this input has packets, for a
    /// worker that sleeps while idle (adaptive polling); the worker adds it to its wait set
    /// once, when it starts, and it must stay open as long as the input. None:
    /// the worker cannot wait on it and sleeps at most its bounded timeout (memory ports, pcap
    /// files, timers).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// The worker is about to sleep (it already announced so to the threads that may hand it
    /// work): false when this input still has work its descriptor would not report (the sleep
    /// is skipped). Cold path.
    fn before_sleep(&self) -> bool {
        true
    }
    /// The worker woke up, or its sleep was called off. Cold path.
    fn after_sleep(&self) {}
    /// The TSC time at which this input has timer work to do in `poll` (e.g. neighbour
    /// retries), so a sleeping worker wakes for it. None: no timer. Cold path.
    fn next_timer(&self) -> Option<u64> {
        None
    }
    /// One line describing a received packet for the trace (cold path).
    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "buffer {buffer}: received {} bytes on port {}",
            m.length, m.rx_port
        )
    }
}
