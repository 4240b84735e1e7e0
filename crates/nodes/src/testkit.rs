//! Test graph parts shared by the nodes' crafted-packet tests: `Inject`, an input that turns
//! queued frames into buffers (setting the receive port, then whatever else the test's `setup`
//! says, e.g. what `ethernet-input` would have learned, and, when asked, a feature line), and
//! `Sink`, a next node that records what reaches it (checking any feature line it carries).
//! Test-only; never part of a data plane.

use graph::{Dispatch, InputNode, Node, NodeContext};
use packet::meta::{FeatureMeta, CT_NEW, CT_TRACKED, FM_CT, FM_MARK};
use packet::{BufferMeta, BufferPool};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Frames to inject: (receive port, bytes).
pub(crate) type Queue = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;
/// What sinks saw: (sink name, metadata, bytes).
pub(crate) type Seen = Arc<Mutex<Vec<(String, BufferMeta, Vec<u8>)>>>;

/// An input node sending the frames of `queue` to its one next node `next`.
pub(crate) struct Inject {
    pub next: &'static str,
    pub queue: Queue,
    /// Called on each buffer after its bytes and receive port are set.
    pub setup: fn(&mut BufferMeta, &[u8]),
    /// Give every buffer `TEST_FEATURE_LINE`.
    pub feature_line: bool,
}

/// The feature line `Inject` gives every frame when asked, and the only one a test graph may
/// show: sinks and captures check (`check_feature_line`) that a packet carrying a line carries
/// this one, so a copy, segment or fragment that took another packet's line, or a stale one,
/// fails the test.
pub(crate) const TEST_FEATURE_LINE: FeatureMeta = FeatureMeta {
    valid: FM_CT | FM_MARK,
    ct_state: CT_TRACKED | CT_NEW,
    zone: 9,
    opaque_owner: 0,
    session: 77,
    mark: 0x5e55_1011,
    tun6_src: [0; 16],
    tun6_dst: [0; 16],
    opaque: [0; 16],
};

/// Whether buffer `b` carries a feature line; panics when it carries one other than
/// `TEST_FEATURE_LINE`.
pub(crate) fn check_feature_line(pool: &BufferPool, b: u32) -> bool {
    match pool.feature_meta(b) {
        Some(f) => {
            assert_eq!(*f, TEST_FEATURE_LINE, "buffer {b}: a foreign feature line");
            true
        }
        None => false,
    }
}

impl Inject {
    /// An injector into `next` that sets nothing beyond the receive port.
    pub(crate) fn new(next: &'static str, queue: Queue) -> Inject {
        Inject {
            next,
            queue,
            setup: |_, _| {},
            feature_line: false,
        }
    }
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        "inject"
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.into()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut q = self.queue.lock().expect("lock");
        let mut n = 0;
        while n < out.len() {
            let Some((port, f)) = q.pop_front() else {
                break;
            };
            let b = cx
                .pool
                .alloc()
                .expect("the test pool has a buffer per frame");
            assert!(cx.pool.write_packet(b, &f));
            let (m, d) = cx.pool.packet_mut(b);
            m.rx_port = port;
            (self.setup)(m, d);
            if self.feature_line {
                *cx.pool.feature_meta_mut(b) = TEST_FEATURE_LINE;
            }
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }
}

/// A next node named `.0` recording every packet into `.1` and freeing it.
pub(crate) struct Sink(pub &'static str, pub Seen);

impl Node for Sink {
    fn name(&self) -> &str {
        self.0
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![]
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut seen = self.1.lock().expect("lock");
        for &b in frame {
            check_feature_line(cx.pool, b);
            seen.push((
                self.0.to_string(),
                *cx.pool.meta(b),
                cx.pool.data(b).to_vec(),
            ));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}
