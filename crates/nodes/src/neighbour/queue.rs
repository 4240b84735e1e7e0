//! The packets waiting for a neighbour (`PacketQueue`, bounded per neighbour and in all) and the
//! outbox of frames the nodes hand to `neighbour-tx`. Fixed capacity; never allocates per packet.

pub(super) const NIL: u16 = u16::MAX;

/// The packets queued on one entry: a linked list through `PacketQueue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct QueueList {
    pub(super) head: u16,
    pub(super) tail: u16,
    pub(super) len: u16,
}

impl QueueList {
    pub(super) const EMPTY: QueueList = QueueList {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// A fixed pool of queue cells shared by all entries of both families.
pub(super) struct PacketQueue {
    pub(super) buffers: Box<[u32]>,
    pub(super) links: Box<[u16]>,
    pub(super) free: u16,
    pub(super) used: usize,
}

impl PacketQueue {
    pub(super) fn new(capacity: usize) -> PacketQueue {
        let n = capacity.clamp(1, NIL as usize - 1);
        let links: Box<[u16]> = (0..n)
            .map(|i| if i + 1 < n { i as u16 + 1 } else { NIL })
            .collect();
        PacketQueue {
            buffers: vec![0; n].into_boxed_slice(),
            links,
            free: 0,
            used: 0,
        }
    }

    pub(super) fn push(&mut self, list: &mut QueueList, buffer: u32) -> bool {
        let i = self.free;
        if i == NIL {
            return false;
        }
        self.free = self.links[i as usize];
        self.buffers[i as usize] = buffer;
        self.links[i as usize] = NIL;
        if list.tail == NIL {
            list.head = i;
        } else {
            self.links[list.tail as usize] = i;
        }
        list.tail = i;
        list.len += 1;
        self.used += 1;
        true
    }

    pub(super) fn pop(&mut self, list: &mut QueueList) -> Option<u32> {
        let i = list.head;
        if i == NIL {
            return None;
        }
        list.head = self.links[i as usize];
        if list.head == NIL {
            list.tail = NIL;
        }
        list.len -= 1;
        self.links[i as usize] = self.free;
        self.free = i;
        self.used -= 1;
        Some(self.buffers[i as usize])
    }
}

/// Buffers waiting to be sent by `neighbour-tx` (or a node's emitter): (next index, buffer).
pub(super) struct Outbox {
    pub(super) ring: Box<[(u16, u32)]>,
    pub(super) head: usize,
    pub(super) len: usize,
}

impl Outbox {
    pub(super) fn new(capacity: usize) -> Outbox {
        Outbox {
            ring: vec![(0, 0); capacity.max(1)].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, next: u16, buffer: u32) -> bool {
        if self.len == self.ring.len() {
            return false;
        }
        let at = (self.head + self.len) % self.ring.len();
        self.ring[at] = (next, buffer);
        self.len += 1;
        true
    }

    #[inline]
    pub(super) fn front(&self) -> Option<(u16, u32)> {
        (self.len > 0).then(|| self.ring[self.head])
    }

    #[inline]
    pub(super) fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.ring.len();
            self.len -= 1;
        }
    }
}
