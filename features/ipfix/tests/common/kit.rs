//! Test graph parts shared by the unit and integration tests: `Inject` (an input turning queued
//! frames into buffers with the receive port and L3 offset `ethernet-input` would set), `Sink`
//! (a node recording what reaches it) and frame builders for IPv4/IPv6 UDP and TCP.
//! Test-only; never part of a data plane.
#![allow(dead_code)]

use graph::{Dispatch, InputNode, Node, NodeContext};
use packet::meta::FLAG_IP6;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Frames to inject: (receive port, bytes).
pub type Queue = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;
/// What a sink saw: (receive port, bytes).
pub type Seen = Arc<Mutex<Vec<(u16, Vec<u8>)>>>;

/// An input (`inject-<next>`) sending queued frames to `next`, with `tx_port` set.
pub struct Inject {
    name: String,
    next: String,
    queue: Queue,
    tx_port: u16,
}

impl Inject {
    pub fn new(next: &str, queue: Queue, tx_port: u16) -> Inject {
        Inject {
            name: format!("inject-{next}"),
            next: next.into(),
            queue,
            tx_port,
        }
    }
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
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
            let m = cx.pool.meta_mut(b);
            m.rx_port = port;
            m.tx_port = self.tx_port;
            m.l3_offset = 14;
            if f.get(12..14) == Some(&[0x86, 0xdd]) {
                m.flags |= FLAG_IP6;
            }
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }
}

/// A node named `name` recording every packet and freeing it.
pub struct Sink {
    pub name: String,
    pub seen: Seen,
}

impl Node for Sink {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut seen = self.seen.lock().expect("lock");
        for &b in frame {
            seen.push((cx.pool.meta(b).rx_port, cx.pool.data(b).to_vec()));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

fn ethernet(ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An Ethernet frame with an IPv4 UDP datagram of `payload` bytes (IP length 28 + payload).
pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut f = ethernet(0x0800);
    let total = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0xab, payload));
    f
}

/// An Ethernet frame with an IPv6 TCP segment with `flags` and `payload` bytes (IP length
/// 40 + 20 + payload).
pub fn tcp6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    flags: u8,
    payload: usize,
) -> Vec<u8> {
    let mut f = ethernet(0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[6, 64]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend(std::iter::repeat_n(0xcd, payload));
    f
}
