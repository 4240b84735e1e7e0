//! `NeighbourHandle`: a worker's `Neighbours` shared by its nodes, joined to other workers'
//! mailboxes, and the source of the neighbour nodes.

use super::*;

/// One worker's `Neighbours`, shared by its neighbour nodes and its lookup and rewrite nodes.
#[derive(Clone)]
pub struct NeighbourHandle(Arc<WorkerCell<Neighbours>>);

impl NeighbourHandle {
    /// Tables for `config` on a worker whose TSC runs at `tsc_hz`.
    pub fn new(config: &NeighbourConfig, tsc_hz: u64) -> NeighbourHandle {
        NeighbourHandle(Arc::new(WorkerCell::new(Neighbours::new(config, tsc_hz))))
    }

    /// Run `f` on the tables (one borrow per frame, not per packet).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut Neighbours) -> R) -> R {
        self.0.with(f)
    }

    /// The control plane's view.
    pub fn view(&self) -> NeighbourView {
        self.with(|n| n.view())
    }

    /// Free every queued and outboxed buffer (call at shutdown, before the pool is dropped).
    pub fn flush(&self, pool: &mut BufferPool) -> usize {
        self.with(|n| n.flush(pool))
    }

    /// Join the handles of all workers (`handles[w]` is worker `w`'s), so each merges what the
    /// others learn. Cold path (graph build), before the workers start.
    pub fn connect(handles: &[NeighbourHandle]) {
        let inboxes: Vec<_> = handles
            .iter()
            .map(|h| h.with(|n| n.inbox.clone()))
            .collect();
        for (w, h) in handles.iter().enumerate() {
            h.with(|n| {
                n.worker = w;
                n.core.share_news = handles.len() > 1;
                n.peers = inboxes
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != w)
                    .map(|(_, m)| m.clone())
                    .collect();
            });
        }
    }

    /// The five neighbour nodes over this handle: `arp-input`, `ip4-arp`, `ip6-nd`,
    /// `ip6-discover` and the input `neighbour-tx` (add it after the ports' inputs).
    pub fn nodes(&self) -> (Vec<Box<dyn Node>>, Box<dyn InputNode>) {
        (
            vec![
                Box::new(ArpInput::new(self.clone())),
                Box::new(Ip4Arp::new(self.clone())),
                Box::new(Ip6Nd::new(self.clone())),
                Box::new(Ip6Discover::new(self.clone())),
            ],
            Box::new(NeighbourTx::new(self.clone())),
        )
    }
}

/// Count drop reason `reason` of the running node for a packet it frees itself.
#[inline]
pub(super) fn count_drop(cx: &NodeContext<'_>, reason: u16) {
    if let Some(c) = cx.errors.get(cx.error_id(reason) as usize) {
        c.add(1);
    }
}
