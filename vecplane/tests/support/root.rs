//! The guard of the end-to-end tests whose real part needs root and tools (namespaces, nginx,
//! BIRD, wrk, ...): `require_root!(SERIAL, TOOLS)` prints `skipped: <why>` and returns on a
//! developer's machine without them, fails in CI (`testenv::skip`), and otherwise holds the
//! file's `SERIAL` lock for the rest of the test, so one file's labs run one at a time.

/// Skip (failing in CI) unless `$tools` are there and we are root; then hold `$serial`'s lock
/// until the end of the calling block.
macro_rules! require_root {
    ($serial:expr, $tools:expr) => {
        if let Some(why) = netlab::missing_prerequisite($tools) {
            testenv::skip(&why);
            return;
        }
        let _serial = $serial.lock().unwrap_or_else(|e| e.into_inner());
    };
}
