//! A token bucket on the TSC: `per_second` tokens a second, at most `burst` saved up. Owns only
//! its level; it reads no clock (the caller passes the TSC it already has, e.g. the vector's
//! start) and divides only when it is made.

/// A token bucket (one per producer: it is not shared).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// TSC ticks one token costs (0: the bucket passes nothing).
    ticks_per_token: u64,
    /// Most ticks saved up (`burst` tokens).
    capacity: u64,
    /// Ticks saved up.
    level: u64,
    /// TSC of the last refill.
    last: u64,
}

impl TokenBucket {
    /// `per_second` tokens a second (0: none ever), `burst` at most saved up (at least 1), on a
    /// TSC running at `tsc_hz`. It starts full.
    pub fn new(per_second: u32, burst: u32, tsc_hz: u64) -> TokenBucket {
        let ticks_per_token = if per_second == 0 {
            0
        } else {
            (tsc_hz / u64::from(per_second)).max(1)
        };
        let capacity = ticks_per_token.saturating_mul(u64::from(burst.max(1)));
        TokenBucket {
            ticks_per_token,
            capacity,
            level: capacity,
            last: 0,
        }
    }

    /// Take one token at TSC `now`; false when none is left (or the rate is 0).
    #[inline]
    pub fn take(&mut self, now: u64) -> bool {
        self.take_n(now, 1)
    }

    /// Take `n` tokens at TSC `now`, all or none; false when fewer are left (or the rate is
    /// 0, or `n` is more than the burst).
    #[inline]
    pub fn take_n(&mut self, now: u64, n: u64) -> bool {
        if self.ticks_per_token == 0 {
            return false;
        }
        // A TSC read on another core may be a little behind: time never runs backwards here.
        if now > self.last {
            self.level = self
                .level
                .saturating_add(now - self.last)
                .min(self.capacity);
            self.last = now;
        }
        let cost = self.ticks_per_token.saturating_mul(n);
        if self.level >= cost {
            self.level -= cost;
            true
        } else {
            false
        }
    }

    /// Tokens saved up now (as of the last `take`).
    pub fn tokens(&self) -> u64 {
        self.level.checked_div(self.ticks_per_token).unwrap_or(0)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const HZ: u64 = 1_000_000; // one tick a microsecond

    #[test]
    fn burst_then_rate() {
        let mut b = TokenBucket::new(1000, 5, HZ); // a token every 1000 ticks
        let t0 = 10_000;
        let passed = (0..10).filter(|_| b.take(t0)).count();
        assert_eq!(passed, 5, "the burst, then nothing at the same instant");
        assert!(!b.take(t0 + 999), "not a whole token later");
        assert!(b.take(t0 + 1000), "one token a millisecond");
        assert!(!b.take(t0 + 1000));
        // A long pause saves up no more than the burst.
        let later = t0 + 1_000_000;
        assert_eq!((0..10).filter(|_| b.take(later)).count(), 5);
    }

    #[test]
    fn zero_rate_passes_nothing_and_a_clock_going_back_adds_nothing() {
        let mut off = TokenBucket::new(0, 100, HZ);
        assert!(!off.take(1) && !off.take(u64::MAX));
        let mut b = TokenBucket::new(1000, 1, HZ);
        assert!(b.take(5_000));
        assert!(!b.take(4_000), "an earlier TSC refills nothing");
        assert!(!b.take(5_500));
        assert!(b.take(6_000));
    }

    #[test]
    fn take_n_is_all_or_nothing() {
        let mut b = TokenBucket::new(1000, 5, HZ);
        assert!(b.take_n(1, 3));
        assert!(!b.take_n(1, 3), "two left");
        assert!(b.take_n(1, 2));
        assert!(!b.take_n(10_000_000, 6), "more than the burst never passes");
        assert_eq!(b.tokens(), 5);
    }

    #[test]
    fn rates_above_the_clock_pass_everything() {
        let mut b = TokenBucket::new(u32::MAX, 1, 1000);
        assert!((0..100u64).all(|i| b.take(i + 1)));
    }
}
