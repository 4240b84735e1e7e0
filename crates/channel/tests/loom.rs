//! Model-checks the punt path's concurrency protocols with loom: every interleaving of a
//! producer and a consumer on a small ring (FIFO, no slot read while written, nothing lost or
//! seen twice, full refused), and the bell (a consumer that parks after its last look is always
//! woken by a push it did not see).
//! Run: RUSTFLAGS="--cfg loom" cargo test -p vecplane-channel --test loom --release
#![cfg(loom)]

use channel::punt::{punt_channel, Bell, PuntConfig, PuntMeta};
use channel::ring;
use loom::sync::Arc;

#[test]
fn spsc_ring_is_fifo_and_never_shares_a_slot() {
    loom::model(|| {
        let (mut p, mut c) = ring(2, || (0u32, 0u32));
        let producer = loom::thread::spawn(move || {
            let mut sent = 0u32;
            let mut refused = 0;
            while sent < 3 {
                // Two fields written apart: a torn read would see them differ.
                if p.try_push(|s| *s = (sent, sent)) {
                    sent += 1;
                } else {
                    refused += 1;
                    loom::thread::yield_now();
                }
            }
            refused
        });
        let mut next = 0u32;
        while next < 3 {
            match c.pop(|s| *s) {
                Some((a, b)) => {
                    assert_eq!(a, b, "a slot read while written");
                    assert_eq!(a, next, "out of order, lost or repeated");
                    next += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        producer.join().expect("producer");
        assert!(c.pop(|_| ()).is_none());
    });
}

#[test]
fn bell_never_loses_a_wake_up() {
    loom::model(|| {
        let bell = Arc::new(Bell::new());
        let config = PuntConfig {
            slots: 2,
            snap_bytes: 4,
            per_second: 1000,
            burst: 10,
        };
        let (mut p, mut c) = punt_channel(&config, 0, 1000, bell.clone());
        bell.attach();
        let producer = loom::thread::spawn(move || {
            let meta = PuntMeta {
                max_len: u16::MAX,
                ..PuntMeta::default()
            };
            p.punt(1, &meta, &[7; 4]).expect("room");
            p.flush();
        });
        // The consumer: look, then sleep unless its last look after the announcement finds
        // the packet. Under loom the sleep has no timeout: a lost wake-up is a deadlock.
        let mut got = c.pop(|s| s.bytes()[0]);
        while got.is_none() {
            bell.wait(std::time::Duration::from_secs(1), || !c.is_empty());
            got = c.pop(|s| s.bytes()[0]);
        }
        assert_eq!(got, Some(7));
        producer.join().expect("producer");
    });
}
