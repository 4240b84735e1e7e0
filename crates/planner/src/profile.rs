//! The bench profile: what `vecplane bench` measured on this host (TSC rate, CPU model, cycles per
//! packet by path, protocol and frame size), kept as one JSON file that `vecplane plan` reads.
//! It owns the file format, its default place and the merge of new measurements; it never
//! measures anything and never keeps a cost it cannot tie to a path, a protocol and a frame size.
//!
//! A cost is the TSC ticks per packet of a whole bench run (receive to transmit, dispatch
//! included) in which every packet took that path, e.g. `miss` = the run where every packet was a
//! new flow. The VXLAN paths are add-ons: the extra ticks per packet over the same run without
//! the tunnel. The flow costs come from `vecplane bench --scenario flows --churn`, which measures
//! them in the churn's conditions (a full table of exact megaflows: `megaflow-hit` on cold
//! entries after a failed EMC probe, `miss` with an eviction per install, `emc-hit` with the EMC
//! full, and `pollution`, what the misses add to the hits beside them, solved from three churn
//! runs) and calls [`record`]; `--frame-size` gives one cost per frame size and the planner
//! interpolates between them. Profiles written before `pollution` existed load unchanged (the
//! planner then takes it as 0 and says so).
//!
//! A host that has no profile yet gets the built-in one ([`BUILT_IN`], [`read_or_built_in`]):
//! the IPv4 flow-switch costs the churn bench measured on the project's reference host
//! (BENCHMARKS.md, 2026-11-25), so `vecplane plan` answers on a fresh machine and says whose
//! figures they are.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The format tag every profile carries; a file with another tag is refused.
pub const FORMAT: &str = "vecplane-profile/1";

/// File name inside the state directory.
pub const FILE_NAME: &str = "profile.json";

/// Which part of the data path a cost belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostPath {
    /// Flow switch: the exact-match cache answered.
    EmcHit,
    /// Flow switch: the megaflow cache answered (EMC missed or off).
    MegaflowHit,
    /// Flow switch: both caches missed: classify, install the megaflow, run the actions.
    Miss,
    /// Flow switch: what misses add to the hits around them (installs and evictions push the
    /// hits' entries out of the CPU caches): the planner adds `h (1 - h) x` this per packet.
    /// Not a path of its own, so 0 is a valid cost; a profile without it means 0.
    Pollution,
    /// Add-on: VXLAN encapsulation on output through a tunnel port.
    VxlanEncap,
    /// Add-on: VXLAN decapsulation on input from a tunnel port.
    VxlanDecap,
    /// The `l2xc` scenario (cross-connect, the I/O floor).
    L2xc,
    /// The `ip4` scenario (IPv4 router with a large FIB).
    Ip4Router,
    /// The `ip6` scenario (IPv6 router with a large FIB).
    Ip6Router,
}

impl CostPath {
    /// Every path, in report order.
    pub const ALL: [CostPath; 9] = [
        CostPath::EmcHit,
        CostPath::MegaflowHit,
        CostPath::Miss,
        CostPath::Pollution,
        CostPath::VxlanEncap,
        CostPath::VxlanDecap,
        CostPath::L2xc,
        CostPath::Ip4Router,
        CostPath::Ip6Router,
    ];

    /// Its name in the file and in reports (`emc-hit`, `miss`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CostPath::EmcHit => "emc-hit",
            CostPath::MegaflowHit => "megaflow-hit",
            CostPath::Miss => "miss",
            CostPath::Pollution => "pollution",
            CostPath::VxlanEncap => "vxlan-encap",
            CostPath::VxlanDecap => "vxlan-decap",
            CostPath::L2xc => "l2xc",
            CostPath::Ip4Router => "ip4-router",
            CostPath::Ip6Router => "ip6-router",
        }
    }

    /// Whether the cost is added to another path's (VXLAN) rather than a whole packet's.
    pub fn is_add_on(self) -> bool {
        matches!(self, CostPath::VxlanEncap | CostPath::VxlanDecap)
    }

    /// Whether 0 is a valid cost (the add-ons and the pollution term: "measured, none").
    pub fn may_be_zero(self) -> bool {
        self.is_add_on() || self == CostPath::Pollution
    }
}

/// The packets' network protocol (inside the tunnel for the VXLAN add-ons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// IPv4 (UDP).
    Ipv4,
    /// IPv6 (UDP).
    Ipv6,
}

impl Protocol {
    /// `ipv4` or `ipv6`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ipv4 => "ipv4",
            Protocol::Ipv6 => "ipv6",
        }
    }
}

/// How `path` for `protocol` gets measured (what a missing cost's error tells the user). Kept
/// here, in one place, in step with the bench's flags. IPv6 flow costs and the VXLAN add-ons have
/// no bench run yet: the answer says so instead of naming a flag that does not exist.
pub fn bench_command(path: CostPath, protocol: Protocol) -> String {
    let v6 = protocol == Protocol::Ipv6;
    match path {
        CostPath::EmcHit | CostPath::MegaflowHit | CostPath::Miss | CostPath::Pollution if !v6 => {
            "`vecplane bench --scenario flows --churn`".to_string()
        }
        CostPath::EmcHit | CostPath::MegaflowHit | CostPath::Miss | CostPath::Pollution => {
            "no bench run measures IPv6 flow-switch costs yet (a profile written by hand or by a \
             later vecplane can carry them)"
                .to_string()
        }
        CostPath::VxlanEncap | CostPath::VxlanDecap => {
            "no bench run measures the VXLAN add-ons yet (a profile written by hand or by a later \
             vecplane can carry them)"
                .to_string()
        }
        CostPath::L2xc => "`vecplane bench --scenario l2xc --sweep`".to_string(),
        CostPath::Ip4Router => "`vecplane bench --scenario ip4 --sweep`".to_string(),
        CostPath::Ip6Router => "`vecplane bench --scenario ip6 --sweep`".to_string(),
    }
}

/// Facts about the host a profile was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// TSC ticks per second (what every cost is counted in).
    pub tsc_hz: u64,
    /// `model name` from /proc/cpuinfo (`unknown` if not found).
    pub cpu_model: String,
    /// When the newest measurement was merged (RFC 3339, UTC).
    pub date: String,
    /// vecplane's git commit, when known (`VECPLANE_COMMIT` at build or run time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl HostFacts {
    /// This host now, with the TSC rate the bench measured.
    pub fn current(tsc_hz: u64) -> HostFacts {
        HostFacts {
            tsc_hz,
            cpu_model: cpu_model(),
            date: now(),
            commit: option_env!("VECPLANE_COMMIT")
                .map(str::to_string)
                .or_else(|| std::env::var("VECPLANE_COMMIT").ok())
                .filter(|c| !c.trim().is_empty()),
        }
    }
}

/// The current time as RFC 3339 (UTC, seconds).
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// This host's CPU model from /proc/cpuinfo (`unknown` if it says none).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpu_model(&t))
        .unwrap_or_else(|| "unknown".to_string())
}

/// The first `model name` (x86) or `Model`/`Hardware` (Arm) line of a /proc/cpuinfo text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "Model", "Hardware"] {
        for line in cpuinfo.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            if k.trim() == key && !v.trim().is_empty() {
                return Some(v.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    None
}

/// One measured cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Which path every packet of the run took.
    pub path: CostPath,
    /// The packets' protocol.
    pub protocol: Protocol,
    /// Frame size with FCS, in bytes.
    pub frame_size: usize,
    /// TSC ticks per packet (the median run's), or the add-on's extra ticks for VXLAN.
    pub cycles_per_packet: f64,
    /// The bench scenario that measured it (e.g. `flows`).
    #[serde(default)]
    pub scenario: String,
    /// Distinct flows in the run, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// When it was measured (RFC 3339, UTC).
    #[serde(default)]
    pub date: String,
}

impl Cost {
    fn same_slot(&self, other: &Cost) -> bool {
        self.path == other.path
            && self.protocol == other.protocol
            && self.frame_size == other.frame_size
    }
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`FORMAT`].
    pub format: String,
    /// The host the costs were measured on.
    pub host: HostFacts,
    /// Costs, sorted by path, protocol and frame size; one per (path, protocol, frame size).
    pub costs: Vec<Cost>,
}

/// What a merge changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    /// Costs that were new.
    pub added: usize,
    /// Costs that replaced an older one of the same path, protocol and frame size.
    pub replaced: usize,
    /// Older costs dropped because they came from another CPU model or TSC rate.
    pub dropped_other_host: usize,
}

/// TSC rates closer than this share are the same host's (the measurement wobbles a little).
const SAME_TSC: f64 = 0.02;

impl Profile {
    /// An empty profile of `host`.
    pub fn new(host: HostFacts) -> Profile {
        Profile {
            format: FORMAT.to_string(),
            host,
            costs: Vec::new(),
        }
    }

    /// Merge `costs` measured on `host`: a cost replaces the one of the same path, protocol and
    /// frame size; if `host` has another CPU model or TSC rate than the profile, every older cost
    /// is dropped first (ticks of two hosts do not add up). The host facts become `host`'s.
    pub fn merge(&mut self, host: HostFacts, costs: &[Cost]) -> MergeOutcome {
        let mut out = MergeOutcome::default();
        let old = &self.host;
        let rel = (old.tsc_hz as f64 - host.tsc_hz as f64).abs() / (host.tsc_hz.max(1) as f64);
        if old.cpu_model != host.cpu_model || rel > SAME_TSC {
            out.dropped_other_host = self.costs.len();
            self.costs.clear();
        }
        self.host = host;
        for c in costs {
            match self.costs.iter_mut().find(|o| o.same_slot(c)) {
                Some(o) => {
                    *o = c.clone();
                    out.replaced += 1;
                }
                None => {
                    self.costs.push(c.clone());
                    out.added += 1;
                }
            }
        }
        self.costs.sort_by(|a, b| {
            (a.path, a.protocol, a.frame_size).cmp(&(b.path, b.protocol, b.frame_size))
        });
        out
    }

    /// The costs of `path` for `protocol`, by ascending frame size.
    pub fn costs_of(&self, path: CostPath, protocol: Protocol) -> Vec<&Cost> {
        let mut v: Vec<&Cost> = self
            .costs
            .iter()
            .filter(|c| c.path == path && c.protocol == protocol)
            .collect();
        v.sort_by_key(|c| c.frame_size);
        v
    }

    /// Check what serde cannot: the format tag, a positive TSC rate, positive finite costs,
    /// sizes, one cost per slot.
    fn validate(&self, file: &Path) -> Result<(), ProfileError> {
        let bad = |what: String| ProfileError::Invalid {
            path: file.to_path_buf(),
            what,
        };
        if self.format != FORMAT {
            return Err(ProfileError::Format {
                path: file.to_path_buf(),
                found: self.format.clone(),
            });
        }
        if self.host.tsc_hz == 0 {
            return Err(bad(
                "host.tsc_hz: 0 is not a TSC rate; accepted: ticks per second, above 0".into(),
            ));
        }
        for (i, c) in self.costs.iter().enumerate() {
            if !(c.cycles_per_packet.is_finite() && c.cycles_per_packet >= 0.0)
                || (!c.path.may_be_zero() && c.cycles_per_packet == 0.0)
            {
                return Err(bad(format!(
                    "costs[{i}].cycles_per_packet: {} is not a cost; accepted: a finite number \
                     above 0 (0 allowed for the vxlan add-ons and pollution)",
                    c.cycles_per_packet
                )));
            }
            if c.frame_size == 0 {
                return Err(bad(format!(
                    "costs[{i}].frame_size: 0 is not a frame size; accepted: bytes with FCS, above 0"
                )));
            }
            if let Some(j) = self.costs[..i].iter().position(|o| o.same_slot(c)) {
                return Err(bad(format!(
                    "costs[{i}] repeats costs[{j}] ({} {} {} B); accepted: one cost per path, \
                     protocol and frame size",
                    c.path.name(),
                    c.protocol.name(),
                    c.frame_size
                )));
            }
        }
        Ok(())
    }
}

/// What can go wrong with a profile file.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// No place for the default profile.
    #[error(
        "cannot place the bench profile: neither XDG_STATE_HOME nor HOME is set; give --profile FILE"
    )]
    NoHome,
    /// The file does not exist.
    #[error(
        "{}: no bench profile here; measure this host first: {} (hit and miss costs) writes \
         it, or give --profile FILE",
        path.display(),
        bench_command(CostPath::MegaflowHit, Protocol::Ipv4)
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// Reading failed.
    #[error("{}: cannot read the bench profile: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON of the expected shape.
    #[error(
        "{}:{line}:{column}: not a bench profile ({msg}); accepted: the JSON `vecplane bench` \
         writes (format {FORMAT})",
        path.display()
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line of the problem.
        line: usize,
        /// Column of the problem.
        column: usize,
        /// serde's words.
        msg: String,
    },
    /// Another format version.
    #[error("{}: profile format `{found}` is not known; accepted: {FORMAT}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What it said.
        found: String,
    },
    /// A value out of range.
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which field and why.
        what: String,
    },
    /// Writing failed.
    #[error("{}: cannot write the bench profile: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The built-in profile (JSON): `vecplane bench --scenario flows --churn --runs 3 --seconds 2`
/// on the project's reference host (an Intel Xeon VM, TSC 2.600 GHz, commit 34a8268; raw
/// output in `docs/bench/flows-2026-11-25/churn-planner-pollution-15h48.json`): IPv4 EMC hit,
/// megaflow hit, miss and pollution at 64 B.
pub const BUILT_IN: &str = include_str!("default_profile.json");

/// What [`BUILT_IN`] is called where a file name would be shown.
pub const BUILT_IN_NAME: &str = "built-in";

/// The built-in profile, checked as a file is.
pub fn built_in() -> Result<Profile, ProfileError> {
    parse(BUILT_IN, Path::new(BUILT_IN_NAME))
}

/// Where a profile came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileSource {
    /// This file.
    File(PathBuf),
    /// [`BUILT_IN`], because the default place (this path) has no file yet.
    BuiltIn {
        /// Where this host's own profile will go once measured.
        missing: PathBuf,
    },
}

/// The profile `vecplane plan` uses: `explicit` if given (it must exist), else the one at the
/// default place, else (none measured on this host yet) the built-in one.
pub fn read_or_built_in(explicit: Option<&Path>) -> Result<(Profile, ProfileSource), ProfileError> {
    let file = resolve(explicit)?;
    match read(&file) {
        Ok(p) => Ok((p, ProfileSource::File(file))),
        Err(ProfileError::Missing { path }) if explicit.is_none() => {
            Ok((built_in()?, ProfileSource::BuiltIn { missing: path }))
        }
        Err(e) => Err(e),
    }
}

/// The default profile file: `$XDG_STATE_HOME/vecplane/profile.json`, else
/// `$HOME/.local/state/vecplane/profile.json`.
pub fn default_path() -> Result<PathBuf, ProfileError> {
    default_path_from(
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn default_path_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Result<PathBuf, ProfileError> {
    // The XDG spec says a relative value is to be ignored.
    let state = match (xdg.filter(|p| p.is_absolute()), home) {
        (Some(x), _) => x,
        (None, Some(h)) if !h.as_os_str().is_empty() => h.join(".local").join("state"),
        _ => return Err(ProfileError::NoHome),
    };
    Ok(state.join("vecplane").join(FILE_NAME))
}

/// The file to use: `explicit` if given, else [`default_path`].
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, ProfileError> {
    match explicit {
        Some(p) => Ok(p.to_path_buf()),
        None => default_path(),
    }
}

/// Read and check the profile at `path`.
pub fn read(path: &Path) -> Result<Profile, ProfileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::Missing {
                path: path.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(ProfileError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse(&text, path)
}

/// Parse and check a profile's text (`path` names it in errors).
fn parse(text: &str, path: &Path) -> Result<Profile, ProfileError> {
    let profile: Profile = serde_json::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        msg: e.to_string(),
    })?;
    profile.validate(path)?;
    Ok(profile)
}

/// Write `profile` to `path` (pretty JSON), creating the directory; written to a temporary file
/// beside it and renamed, so a reader never sees half a profile.
pub fn write(path: &Path, profile: &Profile) -> Result<(), ProfileError> {
    let werr = |source| ProfileError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(werr)?;
    }
    let mut text = serde_json::to_string_pretty(profile)
        .map_err(|e| werr(std::io::Error::other(e.to_string())))?;
    text.push('\n');
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(werr(e));
    }
    Ok(())
}

/// What the bench calls after measuring: merge `costs` measured on `host` into the profile at
/// `path` (default place when None; a new one if there is none yet) and write it back. Returns
/// the file and what changed. A file that exists but cannot be read as a profile is an error
/// (it is not overwritten).
pub fn record(
    path: Option<&Path>,
    host: HostFacts,
    costs: &[Cost],
) -> Result<(PathBuf, MergeOutcome), ProfileError> {
    let file = resolve(path)?;
    let mut profile = match read(&file) {
        Ok(p) => p,
        Err(ProfileError::Missing { .. }) => Profile::new(host.clone()),
        Err(e) => return Err(e),
    };
    let outcome = profile.merge(host, costs);
    write(&file, &profile)?;
    Ok((file, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(model: &str, tsc_hz: u64) -> HostFacts {
        HostFacts {
            tsc_hz,
            cpu_model: model.into(),
            date: "2026-11-01T10:00:00Z".into(),
            commit: None,
        }
    }

    fn cost(path: CostPath, size: usize, cpp: f64) -> Cost {
        Cost {
            path,
            protocol: Protocol::Ipv4,
            frame_size: size,
            cycles_per_packet: cpp,
            scenario: "flows".into(),
            flows: Some(1000),
            date: "2026-11-01T10:00:00Z".into(),
        }
    }

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            let p =
                std::env::temp_dir().join(format!("vecplane-profile-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn record_merges_by_path_protocol_and_size() {
        let d = Dir::new("merge");
        let f = d.0.join("state/vecplane/profile.json");
        let h = host("Test CPU", 2_600_000_000);
        let (at, o) = record(
            Some(&f),
            h.clone(),
            &[
                cost(CostPath::Miss, 64, 2000.0),
                cost(CostPath::MegaflowHit, 64, 120.0),
            ],
        )
        .expect("first record");
        assert_eq!(at, f);
        assert_eq!(
            o,
            MergeOutcome {
                added: 2,
                ..Default::default()
            }
        );
        // The flows bench again, a new miss figure and another size; the hit cost stays.
        let (_, o) = record(
            Some(&f),
            host("Test CPU", 2_601_000_000),
            &[
                cost(CostPath::Miss, 64, 1900.0),
                cost(CostPath::Miss, 1518, 2100.0),
            ],
        )
        .expect("second record");
        assert_eq!((o.added, o.replaced, o.dropped_other_host), (1, 1, 0));
        let p = read(&f).expect("read back");
        assert_eq!(p.format, FORMAT);
        assert_eq!(p.host.tsc_hz, 2_601_000_000);
        let miss: Vec<(usize, f64)> = p
            .costs_of(CostPath::Miss, Protocol::Ipv4)
            .iter()
            .map(|c| (c.frame_size, c.cycles_per_packet))
            .collect();
        assert_eq!(miss, vec![(64, 1900.0), (1518, 2100.0)]);
        assert_eq!(p.costs_of(CostPath::MegaflowHit, Protocol::Ipv4).len(), 1);
        assert!(p.costs_of(CostPath::Miss, Protocol::Ipv6).is_empty());
        // Another machine's figures do not mix with these.
        let (_, o) = record(
            Some(&f),
            host("Other CPU", 2_601_000_000),
            &[cost(CostPath::EmcHit, 64, 80.0)],
        )
        .expect("third record");
        assert_eq!((o.added, o.dropped_other_host), (1, 3));
        assert_eq!(read(&f).expect("read").costs.len(), 1);
        // No temporary file is left beside it.
        let names: Vec<String> = std::fs::read_dir(f.parent().expect("dir"))
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert_eq!(names, vec!["profile.json".to_string()]);
    }

    #[test]
    fn the_file_is_plain_json_with_named_paths() {
        let mut p = Profile::new(host("Test CPU", 3_000_000_000));
        p.merge(
            host("Test CPU", 3_000_000_000),
            &[cost(CostPath::VxlanDecap, 128, 35.5)],
        );
        let v = serde_json::to_value(&p).expect("json");
        assert_eq!(v["format"], "vecplane-profile/1");
        assert_eq!(v["host"]["tsc_hz"], 3_000_000_000u64);
        assert_eq!(v["host"]["cpu_model"], "Test CPU");
        assert!(v["host"].get("commit").is_none());
        assert_eq!(v["costs"][0]["path"], "vxlan-decap");
        assert_eq!(v["costs"][0]["protocol"], "ipv4");
        assert_eq!(v["costs"][0]["frame_size"], 128);
        assert_eq!(v["costs"][0]["cycles_per_packet"], 35.5);
        for path in CostPath::ALL {
            let s = serde_json::to_value(path).expect("path");
            assert_eq!(s, path.name());
        }
    }

    #[test]
    fn bad_files_say_where_and_what_is_accepted() {
        let d = Dir::new("bad");
        std::fs::create_dir_all(&d.0).expect("dir");
        let f = d.0.join("p.json");
        let e = read(&f).expect_err("missing").to_string();
        assert!(
            e.contains("no bench profile here") && e.contains("vecplane bench --scenario flows"),
            "{e}"
        );
        std::fs::write(
            &f,
            "{\n  \"format\": \"vecplane-profile/1\",\n  \"host\": 3\n}",
        )
        .expect("w");
        let e = read(&f).expect_err("shape").to_string();
        assert!(
            e.starts_with(&format!("{}:3:", f.display())) && e.contains("accepted"),
            "{e}"
        );
        let mut p = Profile::new(host("Test CPU", 1));
        p.format = "vecplane-profile/9".into();
        write(&f, &p).expect("write");
        let e = read(&f).expect_err("format").to_string();
        assert!(e.contains("`vecplane-profile/9` is not known; accepted: vecplane-profile/1"));
        let mut p = Profile::new(host("Test CPU", 1));
        p.costs.push(cost(CostPath::Miss, 64, -3.0));
        write(&f, &p).expect("write");
        let e = read(&f).expect_err("negative").to_string();
        assert!(
            e.contains("costs[0].cycles_per_packet: -3 is not a cost"),
            "{e}"
        );
        let mut p = Profile::new(host("Test CPU", 1));
        p.costs.push(cost(CostPath::Miss, 64, 3.0));
        p.costs.push(cost(CostPath::Miss, 64, 4.0));
        write(&f, &p).expect("write");
        let e = read(&f).expect_err("twice").to_string();
        assert!(
            e.contains("costs[1] repeats costs[0] (miss ipv4 64 B)"),
            "{e}"
        );
        // Pollution 0 is a measurement ("none"); a miss of 0 is not a cost.
        let mut p = Profile::new(host("Test CPU", 1));
        p.costs.push(cost(CostPath::Pollution, 64, 0.0));
        write(&f, &p).expect("write");
        assert_eq!(
            read(&f)
                .expect("pollution 0")
                .costs_of(CostPath::Pollution, Protocol::Ipv4)[0]
                .cycles_per_packet,
            0.0
        );
        let mut p = Profile::new(host("Test CPU", 1));
        p.costs.push(cost(CostPath::Miss, 64, 0.0));
        write(&f, &p).expect("write");
        let e = read(&f).expect_err("miss 0").to_string();
        assert!(
            e.contains("0 allowed for the vxlan add-ons and pollution"),
            "{e}"
        );
        // A broken file is not overwritten by the next bench.
        std::fs::write(&f, "not json").expect("w");
        assert!(record(Some(&f), host("Test CPU", 1), &[]).is_err());
        assert_eq!(std::fs::read_to_string(&f).expect("r"), "not json");
    }

    #[test]
    fn the_built_in_profile_is_valid_and_used_only_without_a_file() {
        let p = built_in().expect("the built-in profile parses and validates");
        for path in [
            CostPath::EmcHit,
            CostPath::MegaflowHit,
            CostPath::Miss,
            CostPath::Pollution,
        ] {
            assert_eq!(p.costs_of(path, Protocol::Ipv4).len(), 1, "{path:?}");
        }
        let d = Dir::new("builtin");
        let file = d.0.join("none.json");
        // An explicit file must exist: no fallback.
        assert!(matches!(
            read_or_built_in(Some(&file)),
            Err(ProfileError::Missing { .. })
        ));
    }

    #[test]
    fn default_place_follows_xdg_then_home() {
        let p = default_path_from(Some("/xdg".into()), Some("/home/u".into())).expect("xdg");
        assert_eq!(p, PathBuf::from("/xdg/vecplane/profile.json"));
        let p = default_path_from(Some("relative".into()), Some("/home/u".into())).expect("home");
        assert_eq!(
            p,
            PathBuf::from("/home/u/.local/state/vecplane/profile.json")
        );
        let p = default_path_from(None, Some("/home/u".into())).expect("home");
        assert_eq!(
            p,
            PathBuf::from("/home/u/.local/state/vecplane/profile.json")
        );
        assert!(matches!(
            default_path_from(None, None),
            Err(ProfileError::NoHome)
        ));
    }

    #[test]
    fn cpu_model_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)   CPU @ 2.60GHz\n";
        assert_eq!(
            parse_cpu_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.60GHz")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nModel\t\t: Raspberry Pi 4 Model B\n";
        assert_eq!(
            parse_cpu_model(arm).as_deref(),
            Some("Raspberry Pi 4 Model B")
        );
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
        assert!(!cpu_model().is_empty());
        let h = HostFacts::current(5);
        assert_eq!(h.tsc_hz, 5);
        assert!(h.date.ends_with('Z') && h.date.len() == 20, "{}", h.date);
    }
}
