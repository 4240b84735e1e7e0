//! The `vecplane gen` command line and its validation: clap definitions for `gen tx` and
//! `gen sink`, parsers that say what is accepted, and the checked plans the loops run from.
//! It owns argument meaning and limits; it never opens a socket or touches an interface (the
//! interface's own MAC and MTU are passed in by the caller).

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use packet::headers::{format_mac, parse_mac, Mac};
use std::net::IpAddr;

/// Most flows: one per UDP source port.
pub const MAX_FLOWS: u32 = 65536;
/// Smallest frame size accepted (on the wire, with FCS).
pub const MIN_FRAME_SIZE: usize = 64;
/// Largest frame size accepted (on the wire, with FCS): one 2048-byte buffer plus the FCS.
pub const MAX_FRAME_SIZE: usize = 2048 + 4;
/// Largest transmit batch.
pub const MAX_BATCH: usize = 1024;

/// `vecplane gen`: an AF_XDP traffic generator and sink.
#[derive(Args, Debug, Clone)]
pub struct GenArgs {
    /// What to run.
    #[command(subcommand)]
    pub mode: GenMode,
}

/// The two sides.
#[derive(Subcommand, Debug, Clone)]
pub enum GenMode {
    /// Send UDP frames out of an interface (paced or as fast as possible).
    Tx(TxArgs),
    /// Count the frames arriving on an interface's queue.
    Sink(SinkArgs),
}

/// Where the XDP program runs.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpModeArg {
    /// Native when the driver has it (veth does), generic otherwise.
    #[default]
    Auto,
    /// Native only.
    Native,
    /// Generic only.
    Generic,
}

/// How `gen tx` puts frames on the interface.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxMethod {
    /// xdp-live (the fastest); af-xdp when live frames cannot be used here or generic XDP is
    /// asked for.
    #[default]
    Auto,
    /// An AF_XDP socket: the kernel copies each frame into a socket buffer and transmits it
    /// (copy mode on veth), completion by completion.
    AfXdp,
    /// The kernel builds frames from a template, runs vecplane's generator XDP program on each
    /// (a random flow's source port) and redirects them out of the interface in bulk
    /// (BPF_PROG_TEST_RUN live frames, kernel 5.18+); a veth's peer needs NAPI (an XDP
    /// program, or GRO on).
    XdpLive,
}

/// Options both sides take.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Interface to send on / receive from.
    #[arg(long, value_name = "IF")]
    pub interface: String,
    /// Stop after this many seconds at most.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// Pin the busy-polling thread to this CPU [default: not pinned].
    #[arg(long, value_name = "C")]
    pub cpu: Option<usize>,
    /// Queue of the interface to bind the AF_XDP socket to (sink and af-xdp; with xdp-live the
    /// driver picks the queue).
    #[arg(long, value_name = "Q", default_value_t = 0)]
    pub queue: u32,
    /// Where vecplane's XDP program runs.
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    pub xdp_mode: XdpModeArg,
    /// Print exactly one JSON object (the summary) on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress line on stderr every second.
    #[arg(long)]
    pub no_progress: bool,
}

/// `vecplane gen tx`.
#[derive(Args, Debug, Clone)]
pub struct TxArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonArgs,
    /// Destination MAC of every frame (the next hop's), e.g. 02:00:00:00:00:01.
    #[arg(long, value_name = "MAC", value_parser = parse_mac_arg)]
    pub dst_mac: Mac,
    /// Source MAC [default: the interface's].
    #[arg(long, value_name = "MAC", value_parser = parse_mac_arg)]
    pub src_mac: Option<Mac>,
    /// Source IP address (IPv4 or IPv6; the family of both addresses must match).
    #[arg(long, value_name = "IP", value_parser = parse_ip_arg)]
    pub src_ip: IpAddr,
    /// Destination IP address.
    #[arg(long, value_name = "IP", value_parser = parse_ip_arg)]
    pub dst_ip: IpAddr,
    /// Number of flows: UDP source ports 1024 .. 1024+N-1 (wrapping), addresses fixed; af-xdp
    /// sends them in turn, xdp-live picks one at random per frame.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub flows: u32,
    /// Frame size on the wire including the 4-byte FCS (so 64 sends 60 bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub frame_size: usize,
    /// Packets per second to offer; 0 sends as fast as possible.
    #[arg(long, value_name = "PPS", default_value_t = 0)]
    pub rate: u64,
    /// Stop after sending this many packets.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Frames per round: put on the tx ring per sendto (af-xdp), or per paced group (xdp-live).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub batch: usize,
    /// How frames are put on the interface.
    #[arg(long, value_enum, default_value_t = TxMethod::Auto)]
    pub method: TxMethod,
    /// Churn (xdp-live only): start N new flows per second. A frame's flow is then
    /// `floor(now * N) + random % flows`, its number's low 16 bits added to the UDP source
    /// port and the next 10 to the destination port, so about `--flows` flows are live at a
    /// time, each for `flows / N` seconds, and no 5-tuple repeats within 2^26 flows. 0: the
    /// fixed `--flows` flows.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub new_flows_per_second: u64,
}

/// `vecplane gen sink`.
#[derive(Args, Debug, Clone)]
pub struct SinkArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonArgs,
    /// Once packets arrived, stop after this many seconds without any.
    #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = parse_seconds)]
    pub idle_seconds: f64,
    /// Stop after receiving this many packets.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// Parse a MAC address `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac_arg(s: &str) -> Result<Mac, String> {
    parse_mac(s.trim()).ok_or_else(|| {
        format!("`{s}` is not a MAC address; accepted: six hex pairs like 02:00:00:00:00:01")
    })
}

/// Parse an IPv4 or IPv6 address.
pub fn parse_ip_arg(s: &str) -> Result<IpAddr, String> {
    s.trim().parse().map_err(|_| {
        format!(
            "`{s}` is not an IP address; accepted: IPv4 like 198.18.1.2 or IPv6 like 2001:db8::2"
        )
    })
}

/// Parse a positive, finite number of seconds.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v <= 1e7 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a duration; accepted: a positive number of seconds, like 10 or 0.5"
        )),
    }
}

/// Everything `gen tx` needs, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct TxPlan {
    /// Interface.
    pub interface: String,
    /// Queue.
    pub queue: u32,
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source MAC (given or the interface's).
    pub src_mac: Mac,
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// Flows (distinct UDP source ports).
    pub flows: u32,
    /// On-wire frame size with FCS.
    pub frame_size: usize,
    /// Packets per second, 0 = unlimited.
    pub rate: u64,
    /// Packets to send at most.
    pub count: Option<u64>,
    /// Seconds to run at most.
    pub seconds: f64,
    /// Frames per round.
    pub batch: usize,
    /// How frames are sent.
    pub method: TxMethod,
    /// New flows per second (0: fixed flows; xdp-live only).
    pub new_flows_per_second: u64,
}

/// Check `args` into a plan; `interface_mac` and `interface_mtu` are the interface's (the MAC
/// is used when `--src-mac` is absent).
pub fn tx_plan(args: &TxArgs, interface_mac: Mac, interface_mtu: u32) -> Result<TxPlan> {
    if args.src_ip.is_ipv4() != args.dst_ip.is_ipv4() {
        bail!(
            "--src-ip {} and --dst-ip {} are of different families; accepted: both IPv4 or both IPv6",
            args.src_ip,
            args.dst_ip
        );
    }
    if args.flows == 0 || args.flows > MAX_FLOWS {
        bail!(
            "--flows {} is out of range; accepted: 1..={MAX_FLOWS} (one per UDP source port)",
            args.flows
        );
    }
    let min = if args.src_ip.is_ipv4() {
        MIN_FRAME_SIZE
    } else {
        // Ethernet 14 + IPv6 40 + UDP 8 + FCS 4.
        66
    };
    if args.frame_size < min || args.frame_size > MAX_FRAME_SIZE {
        bail!(
            "--frame-size {} is out of range for {}; accepted: {min}..={MAX_FRAME_SIZE} bytes on \
             the wire including the 4-byte FCS",
            args.frame_size,
            if args.src_ip.is_ipv4() {
                "IPv4"
            } else {
                "IPv6"
            }
        );
    }
    // The L3 packet is the frame without the Ethernet header and the FCS.
    let l3 = args.frame_size - 14 - 4;
    if l3 > interface_mtu as usize {
        bail!(
            "--frame-size {} makes {l3}-byte IP packets, more than the MTU {interface_mtu} of {}; \
             accepted: at most {} bytes",
            args.frame_size,
            args.common.interface,
            interface_mtu as usize + 18
        );
    }
    if args.count == Some(0) {
        bail!("--count 0 sends nothing; accepted: at least 1 (or leave it out)");
    }
    if args.batch == 0 || args.batch > MAX_BATCH {
        bail!(
            "--batch {} is out of range; accepted: 1..={MAX_BATCH}",
            args.batch
        );
    }
    if args.method == TxMethod::XdpLive && args.common.xdp_mode == XdpModeArg::Generic {
        bail!(
            "--method xdp-live sends through the driver's XDP transmit, which has no generic \
             mode; accepted: --xdp-mode auto or native with xdp-live, or --method af-xdp"
        );
    }
    if args.new_flows_per_second > 0 {
        if args.method == TxMethod::AfXdp || args.common.xdp_mode == XdpModeArg::Generic {
            bail!(
                "--new-flows-per-second is done by the live-frame program; accepted: --method \
                 xdp-live or auto with it"
            );
        }
        if args.new_flows_per_second > afxdp::direct::MAX_NEW_FLOWS_PER_SECOND {
            bail!(
                "--new-flows-per-second {} is out of range; accepted: 0..={}",
                args.new_flows_per_second,
                afxdp::direct::MAX_NEW_FLOWS_PER_SECOND
            );
        }
    }
    let src_mac = args.src_mac.unwrap_or(interface_mac);
    if src_mac[0] & 1 != 0 {
        bail!(
            "source MAC {} is a multicast address; accepted: a unicast MAC (first octet even)",
            format_mac(&src_mac)
        );
    }
    Ok(TxPlan {
        interface: args.common.interface.clone(),
        queue: args.common.queue,
        dst_mac: args.dst_mac,
        src_mac,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        flows: args.flows,
        frame_size: args.frame_size,
        rate: args.rate,
        count: args.count,
        seconds: args.common.seconds,
        batch: args.batch,
        method: args.method,
        new_flows_per_second: args.new_flows_per_second,
    })
}

/// Everything `gen sink` needs, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkPlan {
    /// Interface.
    pub interface: String,
    /// Queue.
    pub queue: u32,
    /// Seconds to run at most.
    pub seconds: f64,
    /// Seconds without packets, once some arrived, that end the run.
    pub idle_seconds: f64,
    /// Packets to receive at most.
    pub count: Option<u64>,
}

/// Check `args` into a plan.
pub fn sink_plan(args: &SinkArgs) -> Result<SinkPlan> {
    if args.count == Some(0) {
        bail!("--count 0 receives nothing; accepted: at least 1 (or leave it out)");
    }
    Ok(SinkPlan {
        interface: args.common.interface.clone(),
        queue: args.common.queue,
        seconds: args.common.seconds,
        idle_seconds: args.idle_seconds,
        count: args.count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        mode: GenMode,
    }

    const IF_MAC: Mac = [0x02, 0xaa, 0, 0, 0, 7];

    fn parse(args: &[&str]) -> Result<GenMode, clap::Error> {
        Cli::try_parse_from(std::iter::once("gen").chain(args.iter().copied())).map(|c| c.mode)
    }

    fn tx(args: &[&str]) -> TxArgs {
        let mut all = vec!["tx", "--interface", "A0"];
        all.extend_from_slice(args);
        match parse(&all) {
            Ok(GenMode::Tx(t)) => t,
            other => panic!("{all:?}: {other:?}"),
        }
    }

    const V4: [&str; 6] = [
        "--dst-mac",
        "02:00:00:00:00:01",
        "--src-ip",
        "198.18.1.2",
        "--dst-ip",
        "198.18.2.2",
    ];

    #[test]
    fn tx_defaults_match_the_documented_cli() {
        let t = tx(&V4);
        assert_eq!(t.flows, 1024);
        assert_eq!(t.frame_size, 64);
        assert_eq!(t.rate, 0);
        assert_eq!(t.common.seconds, 10.0);
        assert_eq!(t.count, None);
        assert_eq!(t.common.cpu, None);
        assert_eq!(t.common.queue, 0);
        assert_eq!(t.common.xdp_mode, XdpModeArg::Auto);
        assert_eq!(t.method, TxMethod::Auto);
        assert_eq!(t.batch, 256);
        assert!(!t.common.json && !t.common.no_progress);
        let p = tx_plan(&t, IF_MAC, 1500).expect("plan");
        assert_eq!(p.src_mac, IF_MAC, "source MAC defaults to the interface's");
        assert_eq!(p.dst_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(p.dst_ip, "198.18.2.2".parse::<IpAddr>().expect("ip"));
    }

    #[test]
    fn tx_every_option_parses() {
        let mut a = V4.to_vec();
        a.extend_from_slice(&[
            "--src-mac",
            "02:BB:00:00:00:09",
            "--flows",
            "7",
            "--frame-size",
            "128",
            "--rate",
            "1000000",
            "--seconds",
            "2.5",
            "--count",
            "200000",
            "--cpu",
            "0",
            "--queue",
            "1",
            "--xdp-mode",
            "generic",
            "--json",
            "--no-progress",
            "--batch",
            "64",
            "--method",
            "af-xdp",
        ]);
        let t = tx(&a);
        let p = tx_plan(&t, IF_MAC, 1500).expect("plan");
        assert_eq!(p.src_mac, [2, 0xbb, 0, 0, 0, 9]);
        assert_eq!(
            (p.flows, p.frame_size, p.rate, p.count, p.batch),
            (7, 128, 1_000_000, Some(200_000), 64)
        );
        assert_eq!((p.seconds, p.queue), (2.5, 1));
        assert_eq!(t.common.cpu, Some(0));
        assert_eq!(t.common.xdp_mode, XdpModeArg::Generic);
        assert_eq!(p.method, TxMethod::AfXdp);
        assert!(t.common.json && t.common.no_progress);
    }

    #[test]
    fn ipv6_is_accepted() {
        let t = tx(&[
            "--dst-mac",
            "02:00:00:00:00:01",
            "--src-ip",
            "2001:db8:1::2",
            "--dst-ip",
            "2001:db8:2::2",
            "--frame-size",
            "78",
        ]);
        assert!(tx_plan(&t, IF_MAC, 1500).is_ok());
    }

    #[test]
    fn bad_values_are_refused_by_the_parser_with_what_is_accepted() {
        for (flag, value) in [
            ("--dst-mac", "02:00:00:00:00"),
            ("--dst-mac", "zz:00:00:00:00:01"),
            ("--dst-mac", "02:00:00:00:00:01:03"),
            ("--src-ip", "198.18.1"),
            ("--dst-ip", "2001:db8::g"),
            ("--seconds", "0"),
            ("--seconds", "0.0"),
            ("--seconds", "NaN"),
            ("--seconds", "inf"),
            ("--seconds", "ten"),
        ] {
            let mut a: Vec<&str> = V4.to_vec();
            match a.iter().position(|x| *x == flag) {
                Some(i) => a[i + 1] = value,
                None => a.extend_from_slice(&[flag, value]),
            }
            let mut all = vec!["tx", "--interface", "A0"];
            all.extend_from_slice(&a);
            let e = parse(&all).expect_err(&format!("{flag} {value}"));
            assert!(e.to_string().contains("accepted"), "{flag} {value}: {e}");
        }
        // Missing required options.
        assert!(parse(&["tx", "--interface", "A0"]).is_err());
        assert!(parse(&["sink"]).is_err());
        let e = parse(&["sink", "--interface", "B0", "--xdp-mode", "fast"]).expect_err("mode");
        assert!(e.to_string().contains("native"), "{e}");
    }

    #[test]
    fn plan_checks_say_what_is_accepted() {
        let check = |extra: &[&str], mtu: u32, want: &str| {
            let mut a = V4.to_vec();
            for pair in extra.chunks(2) {
                match a.iter().position(|x| *x == pair[0]) {
                    Some(i) => a[i + 1] = pair[1],
                    None => a.extend_from_slice(pair),
                }
            }
            let e = tx_plan(&tx(&a), IF_MAC, mtu).expect_err(want);
            assert!(e.to_string().contains(want), "{extra:?}: {e}");
        };
        check(&["--dst-ip", "2001:db8::2"], 1500, "different families");
        check(&["--flows", "0"], 1500, "accepted: 1..=65536");
        check(&["--flows", "65537"], 1500, "accepted: 1..=65536");
        check(&["--frame-size", "63"], 1500, "accepted: 64..=2052");
        check(&["--frame-size", "3000"], 9000, "accepted: 64..=2052");
        check(&["--frame-size", "1519"], 1500, "more than the MTU 1500");
        check(&["--count", "0"], 1500, "accepted: at least 1");
        check(&["--batch", "0"], 1500, "accepted: 1..=1024");
        check(&["--src-mac", "01:00:5e:00:00:01"], 1500, "multicast");
        check(
            &["--method", "xdp-live", "--xdp-mode", "generic"],
            1500,
            "accepted: --xdp-mode auto or native",
        );
        // IPv6 needs 66 bytes.
        check(
            &[
                "--src-ip",
                "2001:db8::1",
                "--dst-ip",
                "2001:db8::2",
                "--frame-size",
                "64",
            ],
            1500,
            "accepted: 66..=2052",
        );
        // 1518 fits a 1500-byte MTU exactly.
        let mut a = V4.to_vec();
        a.extend_from_slice(&["--frame-size", "1518"]);
        assert!(tx_plan(&tx(&a), IF_MAC, 1500).is_ok());
    }

    #[test]
    fn sink_parses_with_defaults_and_checks() {
        let s = match parse(&["sink", "--interface", "B0"]) {
            Ok(GenMode::Sink(s)) => s,
            other => panic!("{other:?}"),
        };
        let p = sink_plan(&s).expect("plan");
        assert_eq!((p.seconds, p.idle_seconds, p.count), (10.0, 2.0, None));
        let s = match parse(&[
            "sink",
            "--interface",
            "B0",
            "--seconds",
            "5",
            "--idle-seconds",
            "0.5",
            "--count",
            "10",
            "--cpu",
            "1",
            "--queue",
            "2",
            "--xdp-mode",
            "native",
            "--json",
            "--no-progress",
        ]) {
            Ok(GenMode::Sink(s)) => s,
            other => panic!("{other:?}"),
        };
        let p = sink_plan(&s).expect("plan");
        assert_eq!(
            p,
            SinkPlan {
                interface: "B0".into(),
                queue: 2,
                seconds: 5.0,
                idle_seconds: 0.5,
                count: Some(10)
            }
        );
        assert_eq!(s.common.xdp_mode, XdpModeArg::Native);
        s.count.map(|_| ()).expect("count");
        let zero = match parse(&["sink", "--interface", "B0", "--count", "0"]) {
            Ok(GenMode::Sink(s)) => s,
            other => panic!("{other:?}"),
        };
        assert!(sink_plan(&zero).is_err());
        assert!(parse(&["sink", "--interface", "B0", "--idle-seconds", "0"]).is_err());
    }
}
