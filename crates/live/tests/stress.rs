//! A randomized stress test of publication and reclamation with real threads: workers read the
//! snapshot in rounds and check it is whole and not yet freed while a writer publishes and
//! reclaims. Run it under Miri or AddressSanitizer (nightly) to catch a use after free.

use live::{Domain, Publisher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A snapshot that knows whether it was freed and whose fields must agree.
struct Table {
    version: u64,
    check: u64,
    freed: Arc<AtomicU64>,
}

impl Drop for Table {
    fn drop(&mut self) {
        self.freed.fetch_add(1, Ordering::SeqCst);
        // Poison the fields: a reader that still sees them notices.
        self.version = u64::MAX;
        self.check = 0;
    }
}

#[test]
fn readers_never_see_a_freed_or_torn_snapshot() {
    let workers = 3;
    let rounds: u64 = if cfg!(miri) { 200 } else { 200_000 };
    let publications: u64 = if cfg!(miri) { 50 } else { 20_000 };
    let (domain, epochs) = Domain::new(workers);
    let freed = Arc::new(AtomicU64::new(0));
    let mut publisher = Publisher::new(
        Table {
            version: 0,
            check: !0,
            freed: freed.clone(),
        },
        &domain,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (w, mut epoch) in epochs.into_iter().enumerate() {
        let reader = publisher.reader();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut last = 0;
            for round in 0..rounds {
                if stop.load(Ordering::Relaxed) && round > 1000 {
                    break;
                }
                {
                    let t = reader.get();
                    assert_eq!(t.check, !t.version, "worker {w} read a torn or freed table");
                    assert!(t.version >= last, "versions went backwards");
                    last = t.version;
                }
                if round % 97 == 13 {
                    // SAFETY: the reference above is out of scope.
                    unsafe { epoch.offline() };
                    std::thread::yield_now();
                    epoch.online();
                } else {
                    // SAFETY: no reference from the reader is alive here.
                    unsafe { epoch.quiescent() };
                }
            }
            // SAFETY: the thread ends; it reads nothing more.
            unsafe { epoch.offline() };
        }));
    }
    for v in 1..=publications {
        publisher.publish(Table {
            version: v,
            check: !v,
            freed: freed.clone(),
        });
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a reader panicked");
    }
    let pending = publisher.reclaim();
    assert_eq!(
        pending, 0,
        "every worker is offline: all retired tables are free"
    );
    assert_eq!(freed.load(Ordering::SeqCst), publications);
    assert_eq!(publisher.current().version, publications);
}

#[test]
fn a_stalled_worker_delays_reclamation_but_not_publication() {
    let (domain, mut epochs) = Domain::new(2);
    let freed = Arc::new(AtomicU64::new(0));
    let mut publisher = Publisher::new(
        Table {
            version: 0,
            check: !0,
            freed: freed.clone(),
        },
        &domain,
    );
    // Worker 1 never announces anything (stalled): nothing retired may be freed.
    for v in 1..=10 {
        publisher.publish(Table {
            version: v,
            check: !v,
            freed: freed.clone(),
        });
        // SAFETY: this test holds no reference from a reader.
        unsafe { epochs[0].quiescent() };
    }
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    assert_eq!(publisher.reclaim(), 10);
    // It moves on: everything but nothing newer than what it saw is free.
    // SAFETY: as above.
    unsafe { epochs[1].quiescent() };
    assert_eq!(publisher.reclaim(), 0);
    assert_eq!(freed.load(Ordering::SeqCst), 10);
    assert!(
        !domain.synchronize(std::time::Duration::from_millis(5)) || domain.is_safe(domain.epoch())
    );
}
