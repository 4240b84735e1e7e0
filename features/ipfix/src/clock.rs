//! Wall time from the TSC: a worker reads the TSC once per vector (the dispatcher's
//! `now_tsc`) and turns it into ms since the Unix epoch with one multiply, against an anchor
//! (TSC, wall ms) that the worker's timer node takes again about once a second. It never
//! reads the system clock on the per-packet path, and its readings never go backwards.

use std::time::{SystemTime, UNIX_EPOCH};

/// How often the anchor is taken again, in ms.
pub const REANCHOR_MS: u64 = 1_000;

/// Wall ms since the Unix epoch now, from the system clock (cold path).
pub fn system_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(1)
        .max(1)
}

/// TSC -> wall ms.
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock {
    anchor_tsc: u64,
    anchor_ms: u64,
    /// ms per TSC tick, x 2^48 (0: not anchored yet).
    ms_per_tick: u64,
    /// Last value returned (readings never go backwards).
    last_ms: u64,
}

impl WallClock {
    /// Anchor: TSC `tsc` (ticking `tsc_hz` per second) is wall time `wall_ms`.
    pub fn anchor(&mut self, tsc: u64, tsc_hz: u64, wall_ms: u64) {
        let hz = tsc_hz.max(1);
        self.ms_per_tick = ((1000u128 << 48) / u128::from(hz)) as u64;
        self.anchor_tsc = tsc;
        // Never step back: a reading already handed out stays the floor.
        self.anchor_ms = wall_ms.max(self.last_ms).max(1);
    }

    /// True once anchored.
    pub fn is_anchored(&self) -> bool {
        self.ms_per_tick != 0
    }

    /// Wall ms at TSC `tsc` (anchoring against the system clock first if never anchored).
    #[inline]
    pub fn now_ms(&mut self, tsc: u64, tsc_hz: u64) -> u64 {
        if !self.is_anchored() {
            self.anchor(tsc, tsc_hz, system_ms());
        }
        let ticks = tsc.saturating_sub(self.anchor_tsc);
        let scaled = u128::from(ticks) * u128::from(self.ms_per_tick) + (1 << 47);
        let ms = self.anchor_ms + (scaled >> 48) as u64;
        self.last_ms = self.last_ms.max(ms);
        self.last_ms
    }

    /// Take the anchor again when the last one is `REANCHOR_MS` old (cold; reads the system
    /// clock).
    pub fn maybe_reanchor(&mut self, tsc: u64, tsc_hz: u64) {
        let now = self.now_ms(tsc, tsc_hz);
        if now.saturating_sub(self.anchor_ms) >= REANCHOR_MS {
            self.anchor(tsc, tsc_hz, system_ms());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_ms_and_never_go_back() {
        let mut c = WallClock::default();
        c.anchor(1_000, 2_000_000_000, 5_000);
        assert_eq!(c.now_ms(1_000, 2_000_000_000), 5_000);
        assert_eq!(c.now_ms(1_000 + 2_000_000_000, 2_000_000_000), 6_000);
        assert_eq!(
            c.now_ms(1_000 + 3_000_000, 2_000_000_000),
            6_000,
            "no step back"
        );
        // A new anchor behind what was handed out does not move time back either.
        c.anchor(5_000_000_000, 2_000_000_000, 4_000);
        assert_eq!(c.now_ms(5_000_000_000, 2_000_000_000), 6_000);
        assert!(c.now_ms(7_000_000_000, 2_000_000_000) >= 7_000);
    }

    #[test]
    fn an_unanchored_clock_reads_the_system_clock_once() {
        let mut c = WallClock::default();
        let before = system_ms();
        let t = c.now_ms(123, 1_000_000_000);
        assert!(t >= before && t < before + 60_000);
        assert!(c.is_anchored());
    }
}
