//! `vecplane bench --scenario fib --reference dpdk-fib`: vecplane's updatable FIB against DPDK's
//! `rte_fib` (DIR-24-8 for IPv4, trie for IPv6) through `dpdk-test-fib`, on the same routes and
//! the same lookup addresses written to files, on the same core, runs interleaved. Both sides
//! time bursts of 64 lookups with a fenced TSC read around each. It owns the route and address
//! files of a run and their report; it never changes either FIB's code.

use crate::BenchArgs;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Default path of DPDK's FIB benchmark (Debian `dpdk-dev`).
pub const DEFAULT_PATH: &str = "/usr/bin/dpdk-test-fib";

/// Lookups per burst, as `dpdk-test-fib` does.
const BURST: usize = 64;

/// Addresses looked up per run (one pass each, like `dpdk-test-fib`).
const LOOKUPS: usize = 1 << 20;

/// One side's figures of one run.
#[derive(Clone, Copy, Debug)]
struct Side {
    cycles_per_lookup: f64,
}

/// The routes, addresses and files of one family's comparison.
struct Workload {
    v6: bool,
    routes4: Vec<(u32, u8, u32)>,
    routes6: Vec<(u128, u8, u32)>,
    addrs4: Vec<u32>,
    addrs6: Vec<u128>,
    dir: PathBuf,
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// tbl8 groups of DPDK's IPv6 trie (allocated up front; 100k random routes of BGP-like lengths
/// need more than its default 100000, as each route longer than /24 needs one per 8 bits).
const TRIE_GROUPS: usize = 400_000;

/// Next hops the routes point at (fits both sides' 15-bit entries).
const NEXT_HOPS: u32 = 1000;

impl Workload {
    fn new(v6: bool, routes: usize, seed: u64) -> Result<Workload> {
        let dir = std::env::temp_dir().join(format!("vecplane-fibref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).context("cannot create the work directory")?;
        let mut w = Workload {
            v6,
            routes4: Vec::new(),
            routes6: Vec::new(),
            addrs4: Vec::new(),
            addrs6: Vec::new(),
            dir,
        };
        let mut rng = fib::SplitMix64::new(seed ^ 0x6669_6272_6566);
        if v6 {
            w.routes6 = fib::random_ip6_routes(routes, seed, NEXT_HOPS);
            if w.routes6.is_empty() {
                bail!("--routes must be at least 1");
            }
            w.addrs6 = (0..LOOKUPS)
                .map(|_| {
                    let (p, l, _) = w.routes6[rng.below(w.routes6.len() as u64) as usize];
                    fib::ip6_address_in(p, l, rng.next())
                })
                .collect();
        } else {
            w.routes4 = fib::random_ip4_routes(routes, seed, NEXT_HOPS);
            if w.routes4.is_empty() {
                bail!("--routes must be at least 1");
            }
            w.addrs4 = (0..LOOKUPS)
                .map(|_| {
                    let (p, l, _) = w.routes4[rng.below(w.routes4.len() as u64) as usize];
                    fib::ip4_address_in(p, l, rng.next())
                })
                .collect();
        }
        w.write_files()?;
        Ok(w)
    }

    fn routes_file(&self) -> PathBuf {
        self.dir.join("routes.txt")
    }

    fn addrs_file(&self) -> PathBuf {
        self.dir.join("addresses.txt")
    }

    fn write_files(&self) -> Result<()> {
        let mut r = std::io::BufWriter::new(std::fs::File::create(self.routes_file())?);
        let mut a = std::io::BufWriter::new(std::fs::File::create(self.addrs_file())?);
        if self.v6 {
            for &(p, l, nh) in &self.routes6 {
                writeln!(r, "{}/{l} {nh}", Ipv6Addr::from(p))?;
            }
            for &x in &self.addrs6 {
                writeln!(a, "{}", Ipv6Addr::from(x))?;
            }
        } else {
            for &(p, l, nh) in &self.routes4 {
                writeln!(r, "{}/{l} {nh}", Ipv4Addr::from(p))?;
            }
            for &x in &self.addrs4 {
                writeln!(a, "{}", Ipv4Addr::from(x))?;
            }
        }
        r.flush()?;
        a.flush()?;
        Ok(())
    }
}

/// A fenced TSC read (as `rte_rdtsc_precise`).
fn rdtsc_fenced() -> u64 {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    graph::rdtsc()
}

/// vecplane's tables of the workload, and their bytes.
enum Ours {
    V4(fib::Ip4Fib),
    V6(fib::Ip6Fib),
}

impl Ours {
    fn build(w: &Workload) -> Result<Ours> {
        Ok(if w.v6 {
            Ours::V6(fib::Ip6Fib::build(&w.routes6)?)
        } else {
            Ours::V4(fib::Ip4Fib::build(&w.routes4)?)
        })
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Ours::V4(f) => f.memory_bytes(),
            Ours::V6(f) => f.memory_bytes(),
        }
    }

    fn tbl8_groups(&self) -> usize {
        match self {
            Ours::V4(f) => f.tbl8_groups(),
            Ours::V6(_) => 0,
        }
    }

    /// One pass over the addresses in bursts of 64: average cycles per lookup.
    fn run(&self, w: &Workload) -> Side {
        let mut out = [0u32; BURST];
        let mut acc = 0u64;
        let mut n = 0usize;
        match self {
            Ours::V4(f) => {
                for chunk in w.addrs4.chunks_exact(BURST) {
                    let t = rdtsc_fenced();
                    f.lookup_batch(chunk, &mut out);
                    acc += rdtsc_fenced().wrapping_sub(t);
                    n += BURST;
                    std::hint::black_box(&out);
                }
            }
            Ours::V6(f) => {
                for chunk in w.addrs6.chunks_exact(BURST) {
                    let t = rdtsc_fenced();
                    f.lookup_batch(chunk, &mut out);
                    acc += rdtsc_fenced().wrapping_sub(t);
                    n += BURST;
                    std::hint::black_box(&out);
                }
            }
        }
        Side {
            cycles_per_lookup: acc as f64 / n.max(1) as f64,
        }
    }
}

/// DPDK's side of one run: `dpdk-test-fib` on `cpu`; IPv4 with 2-byte entries (vecplane's hold
/// 15 bits too) and as many tbl8 groups as vecplane uses (`groups`); IPv6 the trie with 4-byte
/// entries and `TRIE_GROUPS` groups.
fn run_dpdk(path: &Path, w: &Workload, cpu: usize, groups: usize, n: usize) -> Result<Side> {
    let prefix = format!("{}{}-fib{n}", crate::testpmd::PREFIX, std::process::id());
    let mut cmd = Command::new(path);
    cmd.args([
        "--no-huge",
        "-m",
        "2048",
        "--no-pci",
        "--no-telemetry",
        "--no-shconf",
        "--log-level=lib.eal:error",
    ])
    .arg(format!("--file-prefix={prefix}"))
    .arg(format!("-l{cpu}"))
    .arg("--")
    .arg("-f")
    .arg(w.routes_file())
    .arg("-t")
    .arg(w.addrs_file());
    if w.v6 {
        // 2-byte trie entries cap the tbl8 groups at 32767, too few for 100k random routes.
        cmd.args([
            "-6",
            "-b",
            "trie",
            "-e",
            "4",
            "-g",
            &TRIE_GROUPS.to_string(),
        ]);
    } else {
        cmd.args(["-b", "dir", "-e", "2", "-g", &groups.max(1).to_string()]);
    }
    let out = netlab::cmd::run_bounded(
        &std::iter::once(cmd.get_program().to_os_string())
            .chain(cmd.get_args().map(|a| a.to_os_string()))
            .collect::<Vec<_>>(),
        Duration::from_secs(600),
    );
    crate::testpmd::clean_stale(&crate::testpmd::runtime_dir());
    let _ = std::fs::remove_dir_all(crate::testpmd::runtime_dir().join(&prefix));
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!(
            "dpdk-test-fib failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .chain(text.lines())
                .last()
                .unwrap_or("")
        );
    }
    let cycles = text
        .lines()
        .find_map(|l| l.strip_prefix("AVG FIB lookup "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("dpdk-test-fib printed no `AVG FIB lookup` line")?;
    Ok(Side {
        cycles_per_lookup: cycles,
    })
}

/// Bytes of DPDK's lookup tables as `run_dpdk` configures them: IPv4 tbl24 (2^24 2-byte
/// entries) plus the configured tbl8 groups (256 entries each); IPv6 the trie's tbl24 and the
/// `TRIE_GROUPS` tbl8 groups, 4-byte entries (allocated up front). The RIB both sides keep
/// beside the table is not counted on either side.
fn dpdk_memory(v6: bool, groups: usize) -> usize {
    if v6 {
        (1usize << 24) * 4 + TRIE_GROUPS * 256 * 4
    } else {
        (1usize << 24) * 2 + groups.max(1) * 256 * 2
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

/// Run the comparison for one family; the JSON report.
pub fn compare(args: &BenchArgs, v6: bool, progress: &mut dyn FnMut(&str)) -> Result<Value> {
    let path = &args.dpdk_fib_path;
    if !path.exists() {
        bail!(
            "{} is not there; install Debian's dpdk-dev (apt-get install dpdk-dev) or give \
             --dpdk-fib-path",
            path.display()
        );
    }
    // --routes sets the IPv4 table; IPv6 gets a tenth of it (as the ip4/ip6 scenarios).
    let v4_routes = args.routes.unwrap_or(1_000_000);
    let routes = if v6 {
        (v4_routes / 10).max(1)
    } else {
        v4_routes
    };
    let cpu = match args.cpu {
        Some(c) => c,
        None => crate::sys::last_cpu().context("no CPU to run on")?,
    };
    if !crate::sys::pin_current_thread_to(&[cpu]) {
        bail!("cannot pin the bench to CPU {cpu}");
    }
    let tsc_hz = graph::measure_tsc_hz(100);
    progress(&format!(
        "writing {routes} {} routes and {LOOKUPS} addresses",
        if v6 { "IPv6" } else { "IPv4" }
    ));
    let w = Workload::new(v6, routes, args.seed)?;
    let ours = Ours::build(&w)?;
    let groups = ours.tbl8_groups();
    let mut mine = Vec::new();
    let mut theirs = Vec::new();
    for run in 0..args.runs.max(1) {
        mine.push(ours.run(&w).cycles_per_lookup);
        theirs.push(run_dpdk(path, &w, cpu, groups, run)?.cycles_per_lookup);
        progress(&format!(
            "run {}: vecplane {:.1} cycles/lookup, rte_fib {:.1}",
            run + 1,
            mine.last().copied().unwrap_or(0.0),
            theirs.last().copied().unwrap_or(0.0)
        ));
    }
    let (m, t) = (median(&mine), median(&theirs));
    let rate = |c: f64| tsc_hz as f64 / c.max(1e-9);
    let ours_bytes = ours.memory_bytes();
    let theirs_bytes = dpdk_memory(v6, groups);
    Ok(json!({
        "scenario": "fib",
        "family": if v6 { "ipv6" } else { "ipv4" },
        "routes": routes,
        "lookups": LOOKUPS,
        "runs": args.runs.max(1),
        "cpu": cpu,
        "tsc_hz": tsc_hz,
        "cycles_per_lookup": m,
        "lookups_per_second": rate(m),
        "fib_memory_bytes": ours_bytes,
        "reference": {
            "name": if v6 { "dpdk-rte_fib6-trie" } else { "dpdk-rte_fib-dir24_8" },
            "cycles_per_lookup": t,
            "lookups_per_second": rate(t),
            "memory_bytes": theirs_bytes,
            "ratio": rate(m) / rate(t),
            "memory_ratio": ours_bytes as f64 / theirs_bytes as f64,
        },
    }))
}

/// `vecplane bench --scenario fib --reference dpdk-fib`: IPv4, then IPv6, against DPDK.
pub fn run(args: &BenchArgs) -> Result<()> {
    let quiet = args.no_progress;
    let mut progress = |m: &str| {
        if !quiet {
            eprintln!("fib: {m}");
        }
    };
    let reports = [
        compare(args, false, &mut progress)?,
        compare(args, true, &mut progress)?,
    ];
    for r in reports {
        if args.json {
            println!("{r}");
        } else {
            let f = |v: &Value| v.as_f64().unwrap_or(0.0);
            println!(
                "fib {}: {} routes, {} lookups: vecplane {:.1} cycles/lookup ({:.1} M/s, {:.1} \
                 MiB) vs {} {:.1} ({:.1} M/s, {:.1} MiB): rate ratio {:.2}, memory ratio {:.2}",
                r["family"].as_str().unwrap_or(""),
                r["routes"],
                r["lookups"],
                f(&r["cycles_per_lookup"]),
                f(&r["lookups_per_second"]) / 1e6,
                f(&r["fib_memory_bytes"]) / 1048576.0,
                r["reference"]["name"].as_str().unwrap_or(""),
                f(&r["reference"]["cycles_per_lookup"]),
                f(&r["reference"]["lookups_per_second"]) / 1e6,
                f(&r["reference"]["memory_bytes"]) / 1048576.0,
                f(&r["reference"]["ratio"]),
                f(&r["reference"]["memory_ratio"]),
            );
        }
    }
    Ok(())
}
