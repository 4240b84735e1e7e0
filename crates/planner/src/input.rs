//! What `vecplane plan` is told, parsed: rates with units (packets or bits per second), frame
//! mixes (IMIX, one size, sizes with weights), ratios and counts. Pure parsing; every error says
//! what was wrong and what is accepted (clap adds which flag), and nothing here panics on input.

use serde::Serialize;

/// Bytes of preamble, start-of-frame delimiter and inter-frame gap around every frame on the
/// wire (line rate counts them; so do the bench's bit rates).
pub const WIRE_OVERHEAD: usize = 20;

/// Largest frame a memory port can generate, so the largest the bench measures: a frame mix
/// goes no higher.
pub const MAX_FRAME_SIZE: usize = 9000;

/// Smallest Ethernet frame with FCS.
pub const MIN_FRAME_SIZE: usize = 64;

/// The IMIX this planner uses: 7:4:1 of 64, 576 and 1500-byte Ethernet frames (FCS included).
/// (The original "simple IMIX" counts 40, 576 and 1500-byte IP packets; as frames those are
/// 64, 594 and 1518 bytes. Traffic generators commonly use the frame sizes given here.)
pub const IMIX: [(usize, f64); 3] = [(64, 7.0), (576, 4.0), (1500, 1.0)];

/// An offered rate as given.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// Packets per second.
    PacketsPerSecond(f64),
    /// Bits per second on the wire (frame + 20 bytes of preamble and gap per frame).
    BitsPerSecond(f64),
}

impl Rate {
    /// Packets per second at `mix`.
    pub fn pps(self, mix: &FrameMix) -> f64 {
        match self {
            Rate::PacketsPerSecond(p) => p,
            Rate::BitsPerSecond(b) => b / (8.0 * mix.mean_wire_bytes()),
        }
    }
}

const RATE_ACCEPTED: &str = "accepted: a positive number with a unit: pps, kpps, Mpps, Gpps \
    (packets per second) or bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s, also written bps, Gbps, Gb/s \
    (bits on the wire: frame + 20 B of preamble and gap), e.g. 10Mpps or 25Gbit/s";

/// Parse `10Mpps`, `500 kpps`, `25Gbit/s`, `40Gbps`, `2.5e6pps`.
pub fn parse_rate(text: &str) -> Result<Rate, String> {
    let t = text.trim();
    let split = t
        .char_indices()
        .find(|&(i, c)| {
            c.is_ascii_alphabetic()
                && !(matches!(c, 'e' | 'E')
                    && t[..i].parse::<f64>().is_ok()
                    && t[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+'))
        })
        .map_or(t.len(), |(i, _)| i);
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    if unit.is_empty() {
        return Err(format!("`{text}` has no unit; {RATE_ACCEPTED}"));
    }
    if unit.contains('B') {
        return Err(format!(
            "`{unit}` counts bytes; give bits per second (e.g. Gbit/s) or packets per second; \
             {RATE_ACCEPTED}"
        ));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{num}` is not a number; {RATE_ACCEPTED}"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("`{text}` is not a positive rate; {RATE_ACCEPTED}"));
    }
    let u = unit.to_ascii_lowercase();
    let (prefix, kind) = if let Some(p) = u.strip_suffix("pps") {
        (p, 'p')
    } else if let Some(p) = u
        .strip_suffix("bit/s")
        .or_else(|| u.strip_suffix("bps"))
        .or_else(|| u.strip_suffix("b/s"))
    {
        (p, 'b')
    } else {
        return Err(format!("`{unit}` is not a rate unit; {RATE_ACCEPTED}"));
    };
    let scale = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" if kind == 'b' => 1e12,
        _ => return Err(format!("`{unit}` is not a rate unit; {RATE_ACCEPTED}")),
    };
    Ok(if kind == 'p' {
        Rate::PacketsPerSecond(value * scale)
    } else {
        Rate::BitsPerSecond(value * scale)
    })
}

/// Frame sizes and their weights (shares of packets, not of bytes).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameMix {
    /// As given (`imix`, `64`, `64,1518:3,1`).
    pub name: String,
    /// (frame size with FCS, weight), in the order given.
    pub frames: Vec<(usize, f64)>,
}

const MIX_ACCEPTED: &str = "accepted: imix (7:4:1 of 64, 576 and 1500-byte frames), one frame \
    size (64), several at equal shares (64,512,1518) or with weights (64,576,1500:7,4,1); sizes \
    are bytes with FCS";

impl FrameMix {
    /// The IMIX of [`IMIX`].
    pub fn imix() -> FrameMix {
        FrameMix {
            name: "imix".to_string(),
            frames: IMIX.to_vec(),
        }
    }

    /// (frame size, share of packets) with shares summing to 1.
    pub fn shares(&self) -> Vec<(usize, f64)> {
        let total: f64 = self.frames.iter().map(|(_, w)| w).sum();
        self.frames
            .iter()
            .map(|&(s, w)| (s, if total > 0.0 { w / total } else { 0.0 }))
            .collect()
    }

    /// Mean frame size in bytes (FCS included).
    pub fn mean_frame_bytes(&self) -> f64 {
        self.shares().iter().map(|&(s, p)| s as f64 * p).sum()
    }

    /// Mean bytes on the wire per frame (plus preamble and gap).
    pub fn mean_wire_bytes(&self) -> f64 {
        self.mean_frame_bytes() + WIRE_OVERHEAD as f64
    }
}

/// Parse a frame mix (see [`MIX_ACCEPTED`]).
pub fn parse_frame_mix(text: &str) -> Result<FrameMix, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("imix") {
        return Ok(FrameMix::imix());
    }
    let (sizes, weights) = match t.split_once(':') {
        Some((s, w)) => (s, Some(w)),
        None => (t, None),
    };
    let mut frames = Vec::new();
    for s in sizes.split(',').map(str::trim) {
        let size: usize = s
            .parse()
            .map_err(|_| format!("`{s}` is not a frame size; {MIX_ACCEPTED}"))?;
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&size) {
            return Err(format!(
                "frame size {size} is out of range; accepted: {MIN_FRAME_SIZE} to \
                 {MAX_FRAME_SIZE} bytes with FCS"
            ));
        }
        if frames.iter().any(|&(f, _)| f == size) {
            return Err(format!("frame size {size} is given twice; {MIX_ACCEPTED}"));
        }
        frames.push((size, 1.0));
    }
    if let Some(w) = weights {
        let ws: Vec<&str> = w.split(',').map(str::trim).collect();
        if ws.len() != frames.len() {
            return Err(format!(
                "{} frame size(s) but {} weight(s) in `{t}`; accepted: one weight per size, \
                 e.g. 64,576,1500:7,4,1",
                frames.len(),
                ws.len()
            ));
        }
        for (f, w) in frames.iter_mut().zip(ws) {
            let v: f64 = w
                .parse()
                .map_err(|_| format!("`{w}` is not a weight; accepted: a number of 0 or more"))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "`{w}` is not a weight; accepted: a number of 0 or more"
                ));
            }
            f.1 = v;
        }
        if frames.iter().all(|(_, w)| *w == 0.0) {
            return Err(format!(
                "every weight in `{t}` is 0; accepted: at least one weight above 0"
            ));
        }
    }
    Ok(FrameMix {
        name: t.to_string(),
        frames,
    })
}

/// Parse a share: `0.75` or `75%`, from 0 to 1.
pub fn parse_ratio(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}` is not a share; accepted: a number from 0 to 1 (0.75) or a percentage (75%)"
        )),
    }
}

/// Parse the usable share of a core: like [`parse_ratio`] but above 0.
pub fn parse_usable(text: &str) -> Result<f64, String> {
    match parse_ratio(text) {
        Ok(v) if v > 0.0 => Ok(v),
        _ => Err(format!(
            "`{text}` is not a usable share of a core; accepted: above 0 and at most 1 (0.8) or \
             a percentage (80%)"
        )),
    }
}

/// Parse a count per second: `250000`, `250k`, `1.5M`, `1e6`, `2G`, 0 or more.
pub fn parse_count(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!(
            "`{text}` is not a count; accepted: a number of 0 or more, optionally with k, M or G \
             (250000, 250k, 1.5M)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_packets_and_bits() {
        let p = |t: &str| parse_rate(t).expect(t);
        assert_eq!(p("10Mpps"), Rate::PacketsPerSecond(10e6));
        assert_eq!(p("10 mpps"), Rate::PacketsPerSecond(10e6));
        assert_eq!(p("500kpps"), Rate::PacketsPerSecond(500e3));
        assert_eq!(p("2.5e6pps"), Rate::PacketsPerSecond(2.5e6));
        assert_eq!(p("1Gpps"), Rate::PacketsPerSecond(1e9));
        assert_eq!(p("25Gbit/s"), Rate::BitsPerSecond(25e9));
        assert_eq!(p("40Gbps"), Rate::BitsPerSecond(40e9));
        assert_eq!(p("100 Mb/s"), Rate::BitsPerSecond(100e6));
        assert_eq!(p("1Tbit/s"), Rate::BitsPerSecond(1e12));
        assert_eq!(p("1e3bit/s"), Rate::BitsPerSecond(1e3));
        for bad in [
            "10",
            "10M",
            "10 furlongs",
            "Mpps",
            "-1Mpps",
            "0pps",
            "10GB/s",
            "1Tpps",
        ] {
            let e = parse_rate(bad).expect_err(bad);
            assert!(e.contains("accepted:"), "{bad}: {e}");
        }
        assert!(parse_rate("10GB/s")
            .expect_err("bytes")
            .contains("counts bytes"));
    }

    #[test]
    fn bit_rates_become_packets_with_the_mix() {
        // 10 Gbit/s of 64-byte frames is the familiar 14.88 Mpps.
        let mix = parse_frame_mix("64").expect("64");
        let pps = Rate::BitsPerSecond(10e9).pps(&mix);
        assert!((pps - 14_880_952.38).abs() < 0.01, "{pps}");
        // IMIX: (7*64 + 4*576 + 1500) / 12 = 354.33 B, 374.33 B on the wire.
        let imix = FrameMix::imix();
        assert!((imix.mean_frame_bytes() - 4252.0 / 12.0).abs() < 1e-9);
        let pps = Rate::BitsPerSecond(10e9).pps(&imix);
        assert!((pps - 10e9 / (8.0 * (4252.0 / 12.0 + 20.0))).abs() < 1e-6);
        assert_eq!(Rate::PacketsPerSecond(5.0).pps(&imix), 5.0);
    }

    #[test]
    fn frame_mixes() {
        let m = parse_frame_mix("IMIX").expect("imix");
        assert_eq!(m.frames, vec![(64, 7.0), (576, 4.0), (1500, 1.0)]);
        let m = parse_frame_mix("128,512,1518").expect("equal");
        assert_eq!(m.shares().len(), 3);
        assert!(m
            .shares()
            .iter()
            .all(|&(_, s)| (s - 1.0 / 3.0).abs() < 1e-12));
        let m = parse_frame_mix("64,1518:3,1").expect("weights");
        assert_eq!(m.shares(), vec![(64, 0.75), (1518, 0.25)]);
        assert_eq!(m.name, "64,1518:3,1");
        for (bad, says) in [
            ("63", "out of range"),
            ("9001", "out of range"),
            ("64,abc", "`abc` is not a frame size"),
            ("64,64", "given twice"),
            ("64,128:1", "2 frame size(s) but 1 weight(s)"),
            ("64,128:1,x", "`x` is not a weight"),
            ("64,128:0,0", "every weight"),
            ("64:-1", "`-1` is not a weight"),
            ("", "is not a frame size"),
        ] {
            let e = parse_frame_mix(bad).expect_err(bad);
            assert!(e.contains(says) && e.contains("accepted"), "{bad}: {e}");
        }
    }

    #[test]
    fn ratios_and_counts() {
        assert_eq!(parse_ratio("0.75"), Ok(0.75));
        assert_eq!(parse_ratio("75%"), Ok(0.75));
        assert_eq!(parse_ratio("0"), Ok(0.0));
        assert_eq!(parse_ratio("1"), Ok(1.0));
        for bad in ["1.01", "-0.1", "x", "101%", "NaN"] {
            assert!(parse_ratio(bad).expect_err(bad).contains("accepted"));
        }
        assert_eq!(parse_usable("80%"), Ok(0.8));
        assert!(parse_usable("0").is_err());
        assert_eq!(parse_count("250k"), Ok(250e3));
        assert_eq!(parse_count("1.5M"), Ok(1.5e6));
        assert_eq!(parse_count("2G"), Ok(2e9));
        assert_eq!(parse_count("1e6"), Ok(1e6));
        assert_eq!(parse_count("0"), Ok(0.0));
        for bad in ["-1", "1m", "lots", "inf"] {
            assert!(parse_count(bad).expect_err(bad).contains("accepted"));
        }
    }
}
