//! Model-checks the worker-to-exporter ring with loom: every interleaving of a producer
//! pushing past the ring's capacity and a consumer popping, wrapping the positions, must give
//! the consumer exactly the accepted values, in order, with no slot read while written.
//! Run: RUSTFLAGS="--cfg loom" cargo test -p vecplane-ipfix --test loom --release
#![cfg(loom)]

use ipfix::ring::ring;

#[test]
fn the_consumer_sees_every_accepted_value_in_order() {
    loom::model(|| {
        let (mut p, mut c) = ring(2, 0u32);
        let producer = loom::thread::spawn(move || {
            let mut accepted = Vec::new();
            for v in 1..=4u32 {
                if p.push(v).is_ok() {
                    accepted.push(v);
                }
            }
            accepted
        });
        let mut got = Vec::new();
        for _ in 0..3 {
            if let Some(v) = c.pop() {
                got.push(v);
            }
            loom::thread::yield_now();
        }
        let accepted = producer.join().expect("producer");
        while let Some(v) = c.pop() {
            got.push(v);
        }
        assert_eq!(got, accepted);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert!(c.is_finished());
    });
}

#[test]
fn a_full_ring_refuses_until_the_consumer_frees_a_slot() {
    loom::model(|| {
        let (mut p, mut c) = ring(2, 0u8);
        assert_eq!(p.push(1), Ok(()));
        assert_eq!(p.push(2), Ok(()));
        let consumer = loom::thread::spawn(move || c.pop());
        // Either the pop happened (a slot is free) or it did not (full): never a torn value.
        let third = p.push(3);
        let popped = consumer.join().expect("consumer");
        assert_eq!(popped, Some(1));
        if third.is_err() {
            assert_eq!(p.push(3), Ok(()), "the slot is free after the pop");
        }
    });
}
