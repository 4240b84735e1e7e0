//! Pacing by the TSC: how many packets a rate allows by a given TSC reading (a token bucket
//! whose tokens are computed from elapsed ticks, so no timer, sleep or syscall is needed). A
//! backlog (after the thread was preempted) is made up, but only up to ten milliseconds of
//! traffic (or one group), so a longer stall is not followed by a longer burst. Packets are
//! released in groups of a given duration of traffic (at most one batch) so that a fast poll
//! loop does not make one syscall per packet. It owns the arithmetic only; it never reads a
//! clock.

/// Packets a rate allows, from TSC readings.
#[derive(Clone, Debug)]
pub struct Pacer {
    /// Packets per second; 0 means unlimited.
    rate: u64,
    tsc_hz: u64,
    start_tsc: u64,
    /// Packets the rate allowed so far that were either used or dropped as excess backlog.
    released: u64,
    max_backlog: u64,
    min_release: u64,
}

impl Pacer {
    /// A pacer for `rate` packets per second (0: unlimited) starting at `start_tsc`, releasing
    /// packets in groups of `group_seconds` of traffic, but at least 1 and at most `batch`.
    pub fn new(rate: u64, tsc_hz: u64, start_tsc: u64, group_seconds: f64, batch: u64) -> Pacer {
        let min_release = ((rate as f64 * group_seconds) as u64).clamp(1, batch.max(1));
        Pacer {
            rate,
            tsc_hz: tsc_hz.max(1),
            start_tsc,
            released: 0,
            max_backlog: (rate / 100).max(min_release),
            min_release,
        }
    }

    /// True when there is no rate limit.
    pub fn unlimited(&self) -> bool {
        self.rate == 0
    }

    /// Packets that may be sent now (`u64::MAX` when unlimited; 0 until a group is due).
    #[inline]
    pub fn allowed(&mut self, now_tsc: u64) -> u64 {
        if self.rate == 0 {
            return u64::MAX;
        }
        let elapsed = now_tsc.saturating_sub(self.start_tsc) as u128;
        let due = (elapsed * self.rate as u128 / self.tsc_hz as u128) as u64;
        if due > self.released.saturating_add(self.max_backlog) {
            self.released = due - self.max_backlog;
        }
        let allowed = due.saturating_sub(self.released);
        if allowed < self.min_release {
            0
        } else {
            allowed
        }
    }

    /// Record that `packets` were sent.
    #[inline]
    pub fn sent(&mut self, packets: u64) {
        if self.rate != 0 {
            self.released = self.released.saturating_add(packets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000_000_000;

    #[test]
    fn unlimited_allows_everything() {
        let mut p = Pacer::new(0, HZ, 0, 50e-6, 64);
        assert!(p.unlimited());
        assert_eq!(p.allowed(0), u64::MAX);
        p.sent(1_000_000);
        assert_eq!(p.allowed(1), u64::MAX);
    }

    #[test]
    fn rate_is_followed_exactly_when_polled_often() {
        let mut p = Pacer::new(1_000_000, HZ, 1000, 50e-6, 256);
        assert_eq!(p.allowed(1000), 0);
        let mut total = 0;
        // Poll every 10 us for one second, sending all that is allowed: groups of 50 (50 us).
        for step in 1..=100_000u64 {
            let n = p.allowed(1000 + step * 10_000);
            assert!(n == 0 || n == 50, "step {step}: {n}");
            p.sent(n);
            total += n;
        }
        assert_eq!(total, 1_000_000);
        // A slow rate releases packets one by one.
        let mut slow = Pacer::new(1000, HZ, 0, 50e-6, 256);
        assert_eq!(slow.allowed(HZ / 1000), 1);
    }

    #[test]
    fn partial_sends_keep_the_rest_for_later() {
        let mut p = Pacer::new(10_000, HZ, 0, 50e-6, 1);
        assert_eq!(p.allowed(HZ / 1000), 10);
        p.sent(4);
        assert_eq!(p.allowed(HZ / 1000), 6);
        p.sent(6);
        assert_eq!(p.allowed(HZ / 1000), 0);
    }

    #[test]
    fn a_stall_is_not_followed_by_more_than_ten_milliseconds_of_burst() {
        let mut p = Pacer::new(2_000_000, HZ, 0, 50e-6, 256);
        // One second without polling: 2M packets were due, only 20000 (10 ms) may follow.
        assert_eq!(p.allowed(HZ), 20_000);
        p.sent(20_000);
        assert_eq!(p.allowed(HZ), 0);
        // Then the rate continues from there.
        assert_eq!(p.allowed(HZ + HZ / 1000), 2000);
        // A stall shorter than 10 ms is made up in full.
        let mut q = Pacer::new(1_000_000, HZ, 0, 50e-6, 256);
        assert_eq!(q.allowed(HZ / 200), 5000);
        // Slow rates release one packet after a stall.
        let mut slow = Pacer::new(10, HZ, 0, 50e-6, 256);
        assert_eq!(slow.allowed(100 * HZ), 1);
        // Fast rates never hold back more than a batch between groups.
        let fast = Pacer::new(100_000_000, HZ, 0, 50e-6, 256);
        assert_eq!(fast.min_release, 256);
        // Millisecond groups: 1000 packets at 1 Mpps, and the backlog holds one group.
        let mut ms = Pacer::new(1_000_000, HZ, 0, 1e-3, 65536);
        assert_eq!(ms.allowed(HZ / 2000), 0);
        assert_eq!(ms.allowed(HZ / 1000), 1000);
        assert_eq!(ms.allowed(HZ), 10_000);
    }

    #[test]
    fn a_clock_before_the_start_allows_nothing() {
        let mut p = Pacer::new(1000, HZ, 5 * HZ, 50e-6, 1);
        assert_eq!(p.allowed(HZ), 0);
    }
}
