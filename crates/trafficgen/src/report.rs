//! What `vecplane gen` prints: a progress line on stderr once a second, and the final summary
//! as text or as exactly one JSON object. Byte counts are frame bytes without the FCS (as the
//! kernel's interface counters count them). It formats numbers; it never measures anything.

use serde_json::{json, Value};
use std::io::Write;

/// Why a loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `--count` packets done.
    Count,
    /// `--seconds` elapsed.
    Seconds,
    /// `--idle-seconds` without packets (sink).
    Idle,
    /// SIGINT or SIGTERM.
    Signal,
}

impl StopReason {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Count => "count",
            StopReason::Seconds => "seconds",
            StopReason::Idle => "idle",
            StopReason::Signal => "signal",
        }
    }
}

/// `packets / seconds`, 0 when no time passed.
pub fn rate(packets: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        packets as f64 / seconds
    } else {
        0.0
    }
}

/// Mbit/s of `bytes` over `seconds`.
pub fn mbits(bytes: u64, seconds: f64) -> f64 {
    rate(bytes, seconds) * 8.0 / 1e6
}

/// The outcome of `gen tx`.
#[derive(Clone, Debug, PartialEq)]
pub struct TxSummary {
    /// Interface.
    pub interface: String,
    /// Queue.
    pub queue: u32,
    /// `"af-xdp"` or `"xdp-live"`.
    pub method: &'static str,
    /// `"native"` or `"generic"`.
    pub xdp_mode: &'static str,
    /// On-wire frame size with FCS.
    pub frame_size: usize,
    /// Flows.
    pub flows: u32,
    /// Asked rate, 0 = unlimited.
    pub rate: u64,
    /// Frames generated: af-xdp: transmissions the kernel completed; xdp-live: program runs.
    pub offered: u64,
    /// Frames the interface accepted: `offered` minus what it refused, when that is known.
    pub sent: u64,
    /// Bytes of the sent frames (without FCS).
    pub bytes: u64,
    /// From the start of sending to the last completion (af-xdp) or the last group (xdp-live).
    pub seconds: f64,
    /// `sent / seconds`.
    pub pps: f64,
    /// `offered / seconds`.
    pub offered_pps: f64,
    /// af-xdp: rounds that found every buffer in flight (tx ring full) while the pacer allowed
    /// more; xdp-live: frames the device refused because its ring was full.
    pub tx_ring_full: u64,
    /// af-xdp: descriptors the kernel rejected (tx_invalid_descs) plus failed sendto calls;
    /// xdp-live: groups interrupted by a signal (not counted as offered).
    pub completion_errors: u64,
    /// Frames the interface refused during the run (af-xdp: growth of its tx_dropped counter;
    /// xdp-live: of its xdp_xmit_errors counters), when readable.
    pub interface_dropped: Option<u64>,
    /// Syscalls made (sendto for af-xdp, BPF_PROG_TEST_RUN for xdp-live).
    pub kicks: u64,
    /// TSC ticks of the sending thread per sent packet over the run.
    pub cycles_per_packet: f64,
    /// Of those, ticks spent inside sendto (af-xdp: the kernel's copy-mode transmit).
    pub kick_cycles_per_packet: f64,
    /// CPU time the sending thread got during the run; less than `seconds` when other tasks
    /// shared its core.
    pub cpu_seconds: f64,
    /// TSC cycles per offered packet over the CPU time the thread got (the cost per packet,
    /// whatever else ran on the core).
    pub cpu_cycles_per_packet: f64,
    /// Why it stopped.
    pub stopped_by: StopReason,
}

impl TxSummary {
    /// The JSON object.
    pub fn json(&self) -> Value {
        json!({
            "mode": "tx",
            "interface": self.interface,
            "queue": self.queue,
            "sent": self.sent,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "pps": self.pps,
            "tx_ring_full": self.tx_ring_full,
            "completion_errors": self.completion_errors,
            "xdp_mode": self.xdp_mode,
            "method": self.method,
            "offered": self.offered,
            "offered_pps": self.offered_pps,
            "interface_dropped": self.interface_dropped,
            "frame_size": self.frame_size,
            "flows": self.flows,
            "rate": self.rate,
            "kicks": self.kicks,
            "cycles_per_packet": self.cycles_per_packet,
            "kick_cycles_per_packet": self.kick_cycles_per_packet,
            "cpu_seconds": self.cpu_seconds,
            "cpu_cycles_per_packet": self.cpu_cycles_per_packet,
            "stopped_by": self.stopped_by.as_str(),
        })
    }

    /// The text summary.
    pub fn text(&self) -> String {
        let dropped = match self.interface_dropped {
            Some(d) => d.to_string(),
            None => "unknown".into(),
        };
        format!(
            "gen tx {} queue {} ({}, {} XDP): sent {} packets, {} bytes of {}-byte frames in \
             {:.3} s: {:.0} pps, {:.1} Mbit/s ({} flows, rate {})\n\
             offered {} packets ({:.0} pps), interface refused {}, tx ring full {}, completion \
             errors {}, {} syscalls\n\
             {:.0} TSC cycles per offered packet on the sending core ({:.0} inside sendto); the \
             thread got {:.2} s of CPU: {:.0} cycles per packet of its own time; stopped by {}",
            self.interface,
            self.queue,
            self.method,
            self.xdp_mode,
            self.sent,
            self.bytes,
            self.frame_size,
            self.seconds,
            self.pps,
            mbits(self.bytes, self.seconds),
            self.flows,
            if self.rate == 0 {
                "unlimited".to_string()
            } else {
                format!("{} pps", self.rate)
            },
            self.offered,
            self.offered_pps,
            dropped,
            self.tx_ring_full,
            self.completion_errors,
            self.kicks,
            self.cycles_per_packet,
            self.kick_cycles_per_packet,
            self.cpu_seconds,
            self.cpu_cycles_per_packet,
            self.stopped_by.as_str()
        )
    }
}

/// The outcome of `gen sink`.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkSummary {
    /// Interface.
    pub interface: String,
    /// Queue.
    pub queue: u32,
    /// `"native"` or `"generic"`.
    pub xdp_mode: &'static str,
    /// Frames received.
    pub received: u64,
    /// Their bytes (without FCS).
    pub bytes: u64,
    /// From the first to the last received frame.
    pub seconds: f64,
    /// `received / seconds`.
    pub pps: f64,
    /// Frames the kernel dropped for this socket (no free buffer, rx ring full).
    pub kernel_rx_dropped: u64,
    /// Of those, frames dropped because the rx ring was full (the sink did not keep up; the
    /// rest found no free buffer on the fill ring).
    pub kernel_rx_ring_full: u64,
    /// Descriptors that named no valid buffer.
    pub invalid: u64,
    /// CPU time the receiving thread got during the run.
    pub cpu_seconds: f64,
    /// Why it stopped.
    pub stopped_by: StopReason,
}

impl SinkSummary {
    /// The JSON object.
    pub fn json(&self) -> Value {
        json!({
            "mode": "sink",
            "interface": self.interface,
            "queue": self.queue,
            "received": self.received,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "pps": self.pps,
            "xdp_mode": self.xdp_mode,
            "kernel_rx_dropped": self.kernel_rx_dropped,
            "kernel_rx_ring_full": self.kernel_rx_ring_full,
            "invalid": self.invalid,
            "cpu_seconds": self.cpu_seconds,
            "stopped_by": self.stopped_by.as_str(),
        })
    }

    /// The text summary.
    pub fn text(&self) -> String {
        format!(
            "gen sink {} queue {} ({} XDP): received {} packets, {} bytes in {:.3} s (first to \
             last): {:.0} pps, {:.1} Mbit/s\nkernel drops {}, invalid descriptors {}; stopped by {}",
            self.interface,
            self.queue,
            self.xdp_mode,
            self.received,
            self.bytes,
            self.seconds,
            self.pps,
            mbits(self.bytes, self.seconds),
            self.kernel_rx_dropped,
            self.invalid,
            self.stopped_by.as_str()
        )
    }
}

/// A progress line on stderr at most once per second of TSC time.
#[derive(Debug)]
pub struct Progress {
    label: String,
    enabled: bool,
    tsc_hz: u64,
    last_tsc: u64,
    last_packets: u64,
    last_bytes: u64,
}

impl Progress {
    /// Start counting at `now_tsc`; `enabled` false prints nothing.
    pub fn new(label: String, enabled: bool, tsc_hz: u64, now_tsc: u64) -> Progress {
        Progress {
            label,
            enabled,
            tsc_hz: tsc_hz.max(1),
            last_tsc: now_tsc,
            last_packets: 0,
            last_bytes: 0,
        }
    }

    /// Print a line if a second passed since the last one (`packets`/`bytes` are totals).
    #[inline]
    pub fn tick(&mut self, now_tsc: u64, packets: u64, bytes: u64) {
        let elapsed = now_tsc.wrapping_sub(self.last_tsc);
        if !self.enabled || elapsed < self.tsc_hz {
            return;
        }
        self.print(elapsed, packets, bytes);
        self.last_tsc = now_tsc;
        self.last_packets = packets;
        self.last_bytes = bytes;
    }

    #[cold]
    fn print(&self, elapsed: u64, packets: u64, bytes: u64) {
        let s = elapsed as f64 / self.tsc_hz as f64;
        let line = progress_line(
            &self.label,
            rate(packets - self.last_packets.min(packets), s),
            mbits(bytes - self.last_bytes.min(bytes), s),
            packets,
            bytes,
        );
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// One progress line.
pub fn progress_line(label: &str, pps: f64, mbit: f64, packets: u64, bytes: u64) -> String {
    format!("{label}: {pps:.0} pps, {mbit:.1} Mbit/s; total {packets} packets, {bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_json_has_the_documented_fields() {
        let s = TxSummary {
            interface: "A0".into(),
            queue: 0,
            method: "af-xdp",
            xdp_mode: "native",
            frame_size: 64,
            flows: 1024,
            rate: 0,
            offered: 2_000_000,
            sent: 2_000_000,
            bytes: 120_000_000,
            seconds: 2.0,
            pps: 1_000_000.0,
            offered_pps: 1_000_000.0,
            tx_ring_full: 3,
            completion_errors: 0,
            interface_dropped: Some(0),
            kicks: 7813,
            cycles_per_packet: 2596.0,
            kick_cycles_per_packet: 2000.0,
            cpu_seconds: 2.0,
            cpu_cycles_per_packet: 2596.0,
            stopped_by: StopReason::Count,
        };
        let v = s.json();
        let text = v.to_string();
        assert!(!text.contains('\n'), "one line");
        assert_eq!(v["mode"], "tx");
        assert_eq!(v["interface"], "A0");
        assert_eq!(v["sent"], 2_000_000);
        assert_eq!(v["bytes"], 120_000_000);
        assert_eq!(v["seconds"], 2.0);
        assert_eq!(v["pps"], 1_000_000.0);
        assert_eq!(v["tx_ring_full"], 3);
        assert_eq!(v["completion_errors"], 0);
        assert_eq!(v["xdp_mode"], "native");
        assert_eq!(v["stopped_by"], "count");
        assert!(
            s.text().contains("1000000 pps, 480.0 Mbit/s"),
            "{}",
            s.text()
        );
    }

    #[test]
    fn sink_json_has_the_documented_fields() {
        let s = SinkSummary {
            interface: "B0".into(),
            queue: 0,
            xdp_mode: "generic",
            received: 10,
            bytes: 600,
            seconds: 0.0,
            pps: rate(10, 0.0),
            kernel_rx_dropped: 0,
            kernel_rx_ring_full: 0,
            invalid: 0,
            cpu_seconds: 0.1,
            stopped_by: StopReason::Idle,
        };
        let v = s.json();
        assert_eq!(v["mode"], "sink");
        assert_eq!(v["interface"], "B0");
        assert_eq!(v["received"], 10);
        assert_eq!(v["bytes"], 600);
        assert_eq!(v["seconds"], 0.0);
        assert_eq!(v["pps"], 0.0, "no NaN when first and last packet coincide");
        assert_eq!(v["xdp_mode"], "generic");
        assert!(s.text().contains("received 10 packets"));
    }

    #[test]
    fn progress_line_reads_well() {
        assert_eq!(
            progress_line("gen tx A0", 1234567.4, 592.6, 10, 600),
            "gen tx A0: 1234567 pps, 592.6 Mbit/s; total 10 packets, 600 bytes"
        );
    }
}
