//! `vecplane ctl punt show|capture` and `vecplane ctl inject port|bridge ...`: the channels
//! between the workers and the control plane, through the daemon's API. `punt capture` reads
//! the punted packets (`GET /v1/punt/packets`, a long poll) and writes them to a pcap file
//! here, on the caller's side; `inject` reads hex or a pcap file and posts the packets as one
//! request (all of them are injected, or none). It never interprets a packet.

use super::{daemon_error, print, CtlArgs};
use anyhow::{bail, Context};
use control::{http, request_at, Endpoint};
use ports::pcapfile::{PcapReader, PcapWriter};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "accepted: punt show | punt capture --count N --file FILE.pcap [--timeout \
    SECONDS] [--from-start] | inject port PORT HEX|FILE.pcap | inject bridge BRIDGE IN_PORT \
    HEX|FILE.pcap [ACTIONS] (IN_PORT a port number or CONTROLLER; ACTIONS in ovs-ofctl syntax, \
    default `table`: through the bridge's tables)";

/// Most packets one inject request carries.
const MAX_INJECT: usize = 4096;

/// Run a `punt` or `inject` command.
pub fn main(ep: &Endpoint, args: &CtlArgs) -> anyhow::Result<ExitCode> {
    let w: Vec<&str> = args.words.iter().map(String::as_str).collect();
    let capture = matches!(w.as_slice(), ["punt", "capture"]);
    if !capture && (args.count.is_some() || args.file.is_some() || args.timeout.is_some()) {
        bail!("--count, --file and --timeout apply only to `punt capture`");
    }
    match w.as_slice() {
        ["punt", "show"] => show(ep, args.json),
        ["punt", "capture"] => {
            let (Some(count), Some(file)) = (args.count, &args.file) else {
                bail!("`punt capture` needs --count N and --file FILE.pcap; {USAGE}");
            };
            if count == 0 {
                bail!("--count 0 captures nothing; accepted: 1 or more");
            }
            capture_to(ep, count, file, args.timeout, args.from_start)
        }
        ["inject", "port", port, data] => inject(ep, json!({"port": port}), data),
        ["inject", "bridge", bridge, in_port, data, actions @ ..] => {
            let in_port = in_port
                .parse::<u16>()
                .map_or_else(|_| json!(in_port), |n| json!(n));
            let mut target = json!({"bridge": bridge, "in_port": in_port});
            if !actions.is_empty() {
                target["actions"] = json!(actions.join(","));
            }
            inject(ep, target, data)
        }
        _ => bail!("`{}` is not a command; {USAGE}", w.join(" ")),
    }
}

fn show(ep: &Endpoint, json: bool) -> anyhow::Result<ExitCode> {
    let reply = request_at(ep, "show punt", json)?;
    if !reply.ok {
        return Ok(daemon_error(&reply));
    }
    let out = if json {
        serde_json::to_string_pretty(&reply.data.unwrap_or(Value::Null))? + "\n"
    } else {
        reply.text.unwrap_or_default()
    };
    print(&out)
}

/// GET `path`; the reply's JSON, or the daemon's error.
fn get(ep: &Endpoint, path: &str) -> anyhow::Result<Result<Value, String>> {
    let reply = http(ep, "GET", path, None)?;
    if !(200..300).contains(&reply.status) {
        return Ok(Err(reply.error_message()));
    }
    Ok(Ok(reply.json()))
}

/// Write the next `count` punted packets (or, `from_start`, those the daemon still holds
/// first) to the pcap file `file`, waiting at most `timeout` seconds.
fn capture_to(
    ep: &Endpoint,
    count: u64,
    file: &Path,
    timeout: Option<u64>,
    from_start: bool,
) -> anyhow::Result<ExitCode> {
    let mut writer = PcapWriter::create(file)
        .with_context(|| format!("cannot create the pcap file {}", file.display()))?;
    let deadline = timeout.map(|s| Instant::now() + Duration::from_secs(s));
    let mut after: Option<u64> = from_start.then_some(0);
    let mut written = 0u64;
    while written < count {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            break;
        }
        let wait = left.map_or(1000, |l| l.as_millis().min(1000) as u64);
        let n = (count - written).min(1000);
        let path = match after {
            Some(a) => format!("/v1/punt/packets?after={a}&count={n}&wait_ms={wait}"),
            None => format!("/v1/punt/packets?count={n}&wait_ms={wait}"),
        };
        let v = match get(ep, &path)? {
            Ok(v) => v,
            Err(e) => {
                eprintln!("vecplane ctl: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        if after.is_none() {
            after = v["after"].as_u64();
        }
        for p in v["packets"].as_array().into_iter().flatten() {
            let bytes =
                control::punt_api::unhex(p["hex"].as_str().unwrap_or("")).unwrap_or_default();
            let length = p["length"].as_u64().unwrap_or(bytes.len() as u64) as u32;
            writer
                .write_record(p["unix_ns"].as_u64().unwrap_or(0), &bytes, length)
                .with_context(|| format!("cannot write {}", file.display()))?;
            written += 1;
            after = p["seq"].as_u64().or(after);
        }
        writer
            .flush()
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    let msg = format!("{written} punted packets written to {}\n", file.display());
    if written < count {
        eprint!("vecplane ctl: timed out: {msg}");
        return Ok(ExitCode::FAILURE);
    }
    print(&msg)
}

/// The packets of `data`: a pcap file when one exists at that path, else hex.
fn packets(data: &str) -> anyhow::Result<Vec<String>> {
    let path = Path::new(data);
    if !path.is_file() {
        return match control::punt_api::unhex(data) {
            Some(_) => Ok(vec![data.to_string()]),
            None => bail!(
                "`{data}` is neither a file nor hex; accepted: a pcap file or the frame's bytes \
                 as hex digits"
            ),
        };
    }
    let mut reader =
        PcapReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::new();
    while let Some(r) = reader
        .next_record(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?
    {
        if out.len() == MAX_INJECT {
            bail!(
                "{} holds more than {MAX_INJECT} packets; inject fewer at once",
                path.display()
            );
        }
        out.push(control::punt_api::hex(&buf[..r.caplen]));
    }
    if out.is_empty() {
        bail!("{} holds no packet", path.display());
    }
    Ok(out)
}

fn inject(ep: &Endpoint, mut target: Value, data: &str) -> anyhow::Result<ExitCode> {
    target["packets"] = json!(packets(data)?);
    let reply = http(
        ep,
        "POST",
        "/v1/inject",
        Some(target.to_string().into_bytes()),
    )?;
    if !(200..300).contains(&reply.status) {
        let v = reply.json();
        let mut msg = reply.error_message();
        if let Some(f) = v["error"]["field"].as_str() {
            msg.push_str(&format!(" (field {f})"));
        }
        eprintln!("vecplane ctl: {msg}; nothing was injected");
        return Ok(ExitCode::FAILURE);
    }
    let v = reply.json();
    print(&format!(
        "injected {} packets into worker {}\n",
        v["injected"].as_u64().unwrap_or(0),
        v["worker"].as_u64().unwrap_or(0)
    ))
}
