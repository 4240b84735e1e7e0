//! Buffers lent to the kernel, so that a port removed from a running worker gives them back:
//! each half of a socket marks in a bitset (one bit per pool buffer) what it put on the fill or
//! transmit ring and clears what came back on the receive or completion ring. What is still
//! marked when the socket closes — on the fill ring, in a zero-copy driver's hardware ring, on
//! the receive ring unread, on the transmit ring unsent — the kernel no longer uses once the
//! last half is dropped: `LentReturn` then hands those buffers to the UMEM, where the worker
//! that owns the pool takes them back (`Umem::take_returned`) between rounds, once they have
//! rested `RETURN_DELAY` (a zero-copy driver releases its ring in deferred work). It owns the
//! bookkeeping; it never touches the pool (another thread may drop the nodes) and costs a bit
//! operation per buffer on the fast path.

use crate::umem::Umem;
use std::sync::Mutex;

/// One bit per pool buffer: set while the kernel holds it.
pub(crate) struct Lent {
    bits: Box<[u64]>,
}

impl Lent {
    /// For a pool of `buffers` buffers, nothing lent.
    pub(crate) fn new(buffers: usize) -> Lent {
        Lent {
            bits: vec![0; buffers.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Buffer `b` goes to the kernel.
    #[inline(always)]
    pub(crate) fn set(&mut self, b: u32) {
        if let Some(w) = self.bits.get_mut((b >> 6) as usize) {
            *w |= 1 << (b & 63);
        }
    }

    /// Buffer `b` came back.
    #[inline(always)]
    pub(crate) fn clear(&mut self, b: u32) {
        if let Some(w) = self.bits.get_mut((b >> 6) as usize) {
            *w &= !(1 << (b & 63));
        }
    }

    /// Every buffer still lent, appended to `out`; nothing is lent afterwards.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u32>) {
        for (i, w) in self.bits.iter_mut().enumerate() {
            let mut bits = std::mem::take(w);
            while bits != 0 {
                out.push((i as u32) << 6 | bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }
}

/// What both halves of one socket lent, handed to the UMEM when the last half is dropped. Each
/// half holds it as its last field, after the socket: the last half's socket closes (the kernel
/// lets go of every buffer) before this is dropped.
pub(crate) struct LentReturn {
    umem: Umem,
    pending: Mutex<Vec<u32>>,
}

impl LentReturn {
    pub(crate) fn new(umem: Umem) -> LentReturn {
        LentReturn {
            umem,
            pending: Mutex::new(Vec::new()),
        }
    }

    /// A half is going: what it still has lent waits for the other half.
    pub(crate) fn deposit(&self, lent: &mut Lent) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        lent.drain_into(&mut pending);
    }
}

impl Drop for LentReturn {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        self.umem.give_back(pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_still_lent_is_drained_once_in_order() {
        let mut l = Lent::new(130);
        for b in [0, 5, 63, 64, 129] {
            l.set(b);
        }
        l.clear(5);
        l.set(500); // beyond the pool: ignored
        let mut out = Vec::new();
        l.drain_into(&mut out);
        assert_eq!(out, vec![0, 63, 64, 129]);
        out.clear();
        l.drain_into(&mut out);
        assert!(out.is_empty());
    }
}
