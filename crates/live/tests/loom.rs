//! Model-checks the publication protocol with loom: every interleaving of a writer publishing
//! twice and a worker reading, announcing quiescent points and going offline and online again.
//! Run: RUSTFLAGS="--cfg loom" cargo test -p vecplane-live --test loom --release
#![cfg(loom)]

use live::{Domain, Publisher};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;

struct Table {
    value: usize,
    freed: Arc<AtomicBool>,
}

impl Drop for Table {
    fn drop(&mut self) {
        self.freed.store(true, Ordering::SeqCst);
    }
}

fn table(value: usize) -> (Table, Arc<AtomicBool>) {
    let freed = Arc::new(AtomicBool::new(false));
    (
        Table {
            value,
            freed: freed.clone(),
        },
        freed,
    )
}

#[test]
fn no_snapshot_is_freed_while_a_worker_can_read_it() {
    loom::model(|| {
        let (domain, mut epochs) = Domain::new(1);
        let (t0, _) = table(0);
        let mut publisher = Publisher::new(t0, &domain);
        let reader = publisher.reader();
        let mut epoch = epochs.remove(0);
        let worker = loom::thread::spawn(move || {
            for step in 0..2 {
                {
                    let t = reader.get();
                    assert!(!t.freed.load(Ordering::SeqCst), "read a freed snapshot");
                    assert!(t.value <= 2);
                }
                if step == 0 {
                    // SAFETY: the reference is out of scope.
                    unsafe { epoch.offline() };
                    epoch.online();
                } else {
                    // SAFETY: as above.
                    unsafe { epoch.quiescent() };
                }
            }
        });
        let (t1, _) = table(1);
        publisher.publish(t1);
        let (t2, _) = table(2);
        publisher.publish(t2);
        worker.join().expect("worker panicked");
        assert_eq!(publisher.current().value, 2);
    });
}
