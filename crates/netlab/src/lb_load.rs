//! Load from the lab's client: bounded `wrk` runs (seconds, connections, threads; a Lua script
//! counts the answers by server name) and `curl` loops (a fixed number of requests, each on a
//! new connection), their parsed results, and the check that answers spread over the servers by
//! weight. It only sends to the lab's VIPs from the client namespace, always bounded.

use crate::cmd::{self, describe_status};
use crate::lb::{LbLab, ServerInfo, Vip};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The wrk script: count 200 answers by their first word (the server's name), others by
/// status; print the totals of every thread and the error counters at the end.
const WRK_SCRIPT: &str = r#"-- netlab: count answers by server
threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  counts = {}
  if args[1] == "close" then wrk.headers["Connection"] = "close" end
end
function response(status, headers, body)
  local k
  if status == 200 and body then k = body:match("^(%S+)") end
  if not k then k = "status-" .. status end
  counts[k] = (counts[k] or 0) + 1
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("vlb-summary requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("vlb-latency p50_us=%d p99_us=%d max_us=%d\n",
    latency:percentile(50), latency:percentile(99), latency.max))
  local total = {}
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    if c then for k, v in pairs(c) do total[k] = (total[k] or 0) + v end end
  end
  for k, v in pairs(total) do io.write("vlb-count ", k, " ", v, "\n") end
end
"#;

/// A bounded wrk run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WrkSpec {
    /// Seconds of load (1..=300).
    pub seconds: u32,
    /// Open connections (>= threads, at most 10000).
    pub connections: u32,
    /// Threads (1..=16).
    pub threads: u32,
    /// `Connection: close` on every request: each request is a new connection (a new flow for
    /// the balancer); otherwise connections are kept (one flow per connection).
    pub new_connection_per_request: bool,
    /// Seconds before wrk counts a request as timed out.
    pub timeout_seconds: u32,
}

impl Default for WrkSpec {
    fn default() -> WrkSpec {
        WrkSpec {
            seconds: 3,
            connections: 8,
            threads: 1,
            new_connection_per_request: true,
            timeout_seconds: 2,
        }
    }
}

/// What a load run got.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadResult {
    /// Completed requests (any status).
    pub requests: u64,
    /// Answers with status 200, by server name.
    pub per_server: BTreeMap<String, u64>,
    /// Failures by kind (`connect`, `read`, `write`, `timeout`, `status`, `status-NNN`,
    /// curl's `curl-NN` exit codes, ...); empty when every request completed with 200.
    pub errors: BTreeMap<String, u64>,
    /// Wall time of the load in microseconds.
    pub duration_us: u64,
    /// Median latency in microseconds (wrk only).
    pub p50_us: u64,
    /// 99th percentile latency in microseconds (wrk only).
    pub p99_us: u64,
    /// Each answer's body line (curl loops only), in order.
    pub bodies: Vec<String>,
    /// Each request's client source port as curl reported it, aligned with `bodies` (curl
    /// loops only; `None` when curl reported none).
    pub source_ports: Vec<Option<u16>>,
    /// The client's distinct TCP source ports among the answers with status 200, by server
    /// name (curl loops only). The kernel may give a later connection a port an earlier one
    /// used (the server closes first, so the client keeps no TIME_WAIT): that connection has
    /// the same 5-tuple, and a load balancer rightly keeps it on the flow it already has.
    pub ports: BTreeMap<String, BTreeSet<u16>>,
}

impl LoadResult {
    /// Failed requests, all kinds.
    pub fn failures(&self) -> u64 {
        self.errors.values().sum()
    }

    /// What was wrong when not every request completed, or not `expected` of them (0: any
    /// number); None when all is well. For tests' assertions.
    pub fn incomplete(&self, expected: u64) -> Option<String> {
        if self.failures() != 0 {
            return Some(format!(
                "failures {:?} over {} requests ({:?})",
                self.errors, self.requests, self.per_server
            ));
        }
        (expected > 0 && self.requests != expected)
            .then(|| format!("{} requests, {expected} expected: {self:?}", self.requests))
    }

    /// Requests per second.
    pub fn rate(&self) -> f64 {
        if self.duration_us == 0 {
            0.0
        } else {
            self.requests as f64 * 1e6 / self.duration_us as f64
        }
    }

    /// Answers of each server, in server order (0 for a server that answered nothing).
    pub fn counts(&self, servers: &[ServerInfo]) -> Vec<u64> {
        servers
            .iter()
            .map(|s| self.per_server.get(&s.name).copied().unwrap_or(0))
            .collect()
    }

    /// Distinct 5-tuples (client source ports) answered by each of `servers`, in their order
    /// (curl loops only): the new flows a load balancer makes for them.
    pub fn flow_counts(&self, servers: &[ServerInfo]) -> Vec<u64> {
        servers
            .iter()
            .map(|s| self.ports.get(&s.name).map_or(0, |p| p.len() as u64))
            .collect()
    }

    /// An error unless the answers of `servers` (with their weights) spread by weight: each
    /// server within `sigmas` binomial standard deviations (and at least 1% of the total) of
    /// total x weight / sum of weights, and no answer from any other server.
    pub fn check_spread(&self, servers: &[ServerInfo], sigmas: f64) -> Result<()> {
        check_spread(&self.per_server, servers, sigmas)
    }
}

/// See [`LoadResult::check_spread`].
pub fn check_spread(
    per_server: &BTreeMap<String, u64>,
    servers: &[ServerInfo],
    sigmas: f64,
) -> Result<()> {
    let total: u64 = per_server.values().sum();
    let weights: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
    if total == 0 || weights == 0 {
        bail!("no answers to check ({total}) or no weight ({weights})");
    }
    let mut bad = Vec::new();
    for k in per_server.keys() {
        if !servers.iter().any(|s| &s.name == k) {
            bad.push(format!(
                "{k} answered but is not one of the servers checked"
            ));
        }
    }
    for s in servers {
        let got = per_server.get(&s.name).copied().unwrap_or(0) as f64;
        let p = f64::from(s.weight) / weights as f64;
        let want = total as f64 * p;
        let sd = (total as f64 * p * (1.0 - p)).sqrt();
        let allowed = (sigmas * sd).max(total as f64 * 0.01);
        if (got - want).abs() > allowed {
            bad.push(format!(
                "{}: {got} answers, expected {want:.0} +- {allowed:.0} (weight {} of {weights})",
                s.name, s.weight
            ));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        bail!(
            "not spread by weight over {total} answers: {}",
            bad.join("; ")
        )
    }
}

/// Parse what the wrk script prints.
pub fn parse_wrk(stdout: &str) -> Result<LoadResult> {
    let mut r = LoadResult::default();
    let mut seen = false;
    for line in stdout.lines() {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("vlb-summary") | Some("vlb-latency") => {
                for kv in w {
                    let (k, v) = kv
                        .split_once('=')
                        .with_context(|| format!("wrk output `{line}`: `{kv}` is not KEY=N"))?;
                    let n: u64 = v
                        .parse()
                        .with_context(|| format!("wrk output `{line}`: `{v}` is not a count"))?;
                    match k {
                        "requests" => {
                            r.requests = n;
                            seen = true;
                        }
                        "duration_us" => r.duration_us = n,
                        "p50_us" => r.p50_us = n,
                        "p99_us" => r.p99_us = n,
                        "max_us" => {}
                        _ if n > 0 => {
                            r.errors.insert(k.to_string(), n);
                        }
                        _ => {}
                    }
                }
            }
            Some("vlb-count") => {
                let (Some(k), Some(v), None) = (w.next(), w.next(), w.next()) else {
                    bail!("wrk output `{line}`: accepted: vlb-count NAME N");
                };
                let n: u64 = v
                    .parse()
                    .with_context(|| format!("wrk output `{line}`: `{v}` is not a count"))?;
                if k.starts_with("status-") {
                    *r.errors.entry(k.to_string()).or_default() += n;
                } else {
                    r.per_server.insert(k.to_string(), n);
                }
            }
            _ => {}
        }
    }
    if !seen {
        bail!("wrk printed no summary (is the script's done() running?):\n{stdout}");
    }
    // wrk counts a non-2xx/3xx answer in errors.status too; keep the per-status detail only.
    if r.errors.keys().any(|k| k.starts_with("status-")) {
        r.errors.remove("status");
    }
    Ok(r)
}

/// Marker curl prints after each transfer.
const CURL_MARK: &str = "vlb-curl";

/// Parse the output of the curl loop: each transfer's body line(s) then
/// `vlb-curl HTTP_CODE EXIT_CODE`.
pub fn parse_curl(stdout: &str) -> Result<LoadResult> {
    let mut r = LoadResult::default();
    let mut body: Option<String> = None;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix(CURL_MARK) {
            let mut w = rest.split_whitespace();
            let (Some(code), Some(exit)) = (w.next(), w.next()) else {
                bail!(
                    "curl output `{line}`: accepted: {CURL_MARK} HTTP_CODE EXIT_CODE [LOCAL_PORT]"
                );
            };
            let port = w.next().and_then(|p| p.parse::<u16>().ok());
            r.requests += 1;
            let b = body.take().unwrap_or_default();
            if code == "200" && exit == "0" {
                let name = b.split_whitespace().next().unwrap_or("").to_string();
                if name.is_empty() {
                    *r.errors.entry("empty-body".to_string()).or_default() += 1;
                } else {
                    if let Some(p) = port {
                        r.ports.entry(name.clone()).or_default().insert(p);
                    }
                    *r.per_server.entry(name).or_default() += 1;
                }
            } else if exit != "0" {
                *r.errors.entry(format!("curl-{exit}")).or_default() += 1;
            } else {
                *r.errors.entry(format!("status-{code}")).or_default() += 1;
            }
            r.bodies.push(b);
            r.source_ports.push(port);
        } else if !line.trim().is_empty() {
            body = Some(line.trim().to_string());
        }
    }
    Ok(r)
}

impl LbLab {
    /// Run wrk from the client against `vip` as `spec` says (bounded: wrk's own duration, and
    /// killed 15 s after it), and parse its counts.
    pub fn run_wrk(&self, vip: &Vip, spec: &WrkSpec) -> Result<LoadResult> {
        wrk_job(
            self.client_ns(),
            &self.path("wrk-count.lua"),
            &vip.url(),
            spec,
        )?
        .run()
    }

    /// `count` sequential requests from the client to `vip` with curl, each on a new
    /// connection (`Connection: close`), each bounded by 5 s to connect and 8 s in all.
    pub fn curl_loop(&self, vip: &Vip, count: u32) -> Result<LoadResult> {
        curl_loop_in(
            self.client_ns(),
            &self.path("curl-loop.txt"),
            &vip.url(),
            count,
        )
    }
}

/// A wrk run from a client namespace, made but not started ([`wrk_job`]): it owns what it
/// needs, so it can run on another thread while the lab changes.
#[derive(Clone, Debug)]
pub struct WrkJob {
    args: Vec<String>,
    limit: Duration,
}

impl WrkJob {
    /// Run it to the end (bounded: wrk's own duration, killed 15 s after it) and parse its
    /// counts.
    pub fn run(&self) -> Result<LoadResult> {
        let out = cmd::run_bounded(&self.args, self.limit)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "wrk failed ({}): {stdout}{}",
                describe_status(out.status),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        parse_wrk(&stdout).with_context(|| self.args.join(" "))
    }
}

/// wrk from namespace `ns` against `url` as `spec` says, its counting script written to
/// `script`.
pub(crate) fn wrk_job(ns: &str, script: &Path, url: &str, spec: &WrkSpec) -> Result<WrkJob> {
    if let Some(why) = cmd::missing_prerequisite(&["wrk"]) {
        bail!("cannot run wrk: {why}");
    }
    if !(1..=300).contains(&spec.seconds)
        || !(1..=16).contains(&spec.threads)
        || spec.connections < spec.threads
        || spec.connections > 10_000
        || spec.timeout_seconds == 0
    {
        bail!(
            "WrkSpec {spec:?}; accepted: seconds 1..=300, threads 1..=16, connections \
             threads..=10000, timeout_seconds >= 1"
        );
    }
    std::fs::write(script, WRK_SCRIPT).with_context(|| format!("write {}", script.display()))?;
    let mode = if spec.new_connection_per_request {
        "close"
    } else {
        "keep"
    };
    let args: Vec<String> = vec![
        "wrk".into(),
        "-t".into(),
        spec.threads.to_string(),
        "-c".into(),
        spec.connections.to_string(),
        "-d".into(),
        format!("{}s", spec.seconds),
        "--timeout".into(),
        format!("{}s", spec.timeout_seconds),
        "-s".into(),
        script.to_string_lossy().into_owned(),
        url.to_string(),
        "--".into(),
        mode.into(),
    ];
    Ok(WrkJob {
        args: cmd::in_ns(ns, &args),
        limit: Duration::from_secs(u64::from(spec.seconds) + 15),
    })
}

/// `count` sequential curl requests from namespace `ns` to `url`, each on a new connection
/// (`Connection: close`), each bounded by 5 s to connect and 8 s in all; curl's URL list is
/// written to `config`. TCP sends a lost SYN again after 1 s and 3 s: 5 s lets a connection
/// ride out two lost SYNs, or a stall of a few seconds on a loaded test machine, as a real
/// client would (curl's own default is 300 s), where 2 s failed the request on the second
/// loss. A path that does not work still fails every request.
pub(crate) fn curl_loop_in(ns: &str, config: &Path, url: &str, count: u32) -> Result<LoadResult> {
    if !(1..=20_000).contains(&count) {
        bail!("curl loop of {count} requests; accepted: 1..=20000");
    }
    // One curl process, one URL per request (curl opens a new connection for each since the
    // server closes it); the write-out marks the end of every transfer.
    let text: String = (0..count).map(|_| format!("url = \"{url}\"\n")).collect();
    std::fs::write(config, text).with_context(|| format!("write {}", config.display()))?;
    let wout = format!("\\n{CURL_MARK} %{{http_code}} %{{exitcode}} %{{local_port}}\\n");
    let config_s = config.to_string_lossy().into_owned();
    let args = [
        "curl",
        "-g",
        "-s",
        "-H",
        "Connection: close",
        "--connect-timeout",
        "5",
        "-m",
        "8",
        "-w",
        &wout,
        "-K",
        &config_s,
    ];
    let start = Instant::now();
    let out = cmd::run_bounded(
        &cmd::in_ns(ns, &args),
        Duration::from_secs(15 + u64::from(count) * 3),
    )?;
    let mut r = parse_curl(&String::from_utf8_lossy(&out.stdout))?;
    r.duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    if r.requests != u64::from(count) {
        let missing = u64::from(count).saturating_sub(r.requests);
        *r.errors.entry("not-attempted".to_string()).or_default() += missing;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(weights: &[u32]) -> Vec<ServerInfo> {
        ServerInfo::unbuilt(weights)
    }

    #[test]
    fn wrk_output_is_parsed() {
        let out = "Running 3s test @ http://198.18.100.4:80/\n\
                   vlb-summary requests=600 duration_us=3000000 connect=0 read=2 write=0 status=1 timeout=0\n\
                   vlb-latency p50_us=900 p99_us=3000 max_us=9000\n\
                   vlb-count s0 100\nvlb-count s1 499\nvlb-count status-502 1\n";
        let r = parse_wrk(out).expect("parsed");
        assert_eq!(r.requests, 600);
        assert_eq!(r.per_server["s1"], 499);
        assert_eq!(r.errors.get("read"), Some(&2));
        assert_eq!(r.errors.get("status-502"), Some(&1));
        assert_eq!(r.errors.get("status"), None);
        assert_eq!(r.failures(), 3);
        assert!((r.rate() - 200.0).abs() < 1e-9);
        assert!(parse_wrk("nothing").is_err());
        assert!(parse_wrk("vlb-summary requests=x").is_err());
        assert!(parse_wrk("vlb-summary requests=1\nvlb-count s0").is_err());
    }

    #[test]
    fn curl_output_is_parsed() {
        let out =
            "s0 198.18.100.1 80\n\nvlb-curl 200 0 40000\ns1 198.18.100.1 80\n\nvlb-curl 200 0\n\
                   \nvlb-curl 000 28\nbad gateway\n\nvlb-curl 502 0\ns0 198.18.100.1 80\n\
                   \nvlb-curl 200 0 40000\n";
        let r = parse_curl(out).expect("parsed");
        assert_eq!(r.requests, 5);
        assert_eq!(r.per_server.len(), 2);
        // s0's two answers came over one reused source port: one flow.
        assert_eq!(r.per_server.get("s0"), Some(&2));
        assert_eq!(r.ports.get("s0").map(BTreeSet::len), Some(1));
        assert_eq!(r.ports.get("s1"), None);
        assert_eq!(r.errors.get("curl-28"), Some(&1));
        assert_eq!(r.errors.get("status-502"), Some(&1));
        assert_eq!(r.bodies[0], "s0 198.18.100.1 80");
        assert_eq!(r.bodies[2], "");
        assert_eq!(r.source_ports, [Some(40000), None, None, None, Some(40000)]);
        assert!(parse_curl("vlb-curl 200").is_err());
    }

    #[test]
    fn spread_is_checked_against_weights() {
        let s = servers(&[1, 2, 3]);
        let counts = |a: u64, b: u64, c: u64| {
            BTreeMap::from([("s0".into(), a), ("s1".into(), b), ("s2".into(), c)])
        };
        assert!(check_spread(&counts(100, 200, 300), &s, 5.0).is_ok());
        assert!(check_spread(&counts(110, 190, 300), &s, 5.0).is_ok());
        let e = check_spread(&counts(200, 200, 200), &s, 5.0).expect_err("even");
        assert!(
            e.to_string().contains("s0: 200 answers, expected 100"),
            "{e}"
        );
        let mut extra = counts(100, 200, 300);
        extra.insert("s9".into(), 1);
        assert!(check_spread(&extra, &s, 5.0).is_err());
        assert!(check_spread(&BTreeMap::new(), &s, 5.0).is_err());
        // Weight 0: nothing expected.
        let s = servers(&[1, 0]);
        assert!(check_spread(&BTreeMap::from([("s0".into(), 50)]), &s, 5.0).is_ok());
        assert!(check_spread(
            &BTreeMap::from([("s0".into(), 45), ("s1".into(), 5)]),
            &s,
            5.0
        )
        .is_err());
    }
}
