//! `vecplane ctl`: a client of the daemon's HTTP API. The command language (`show runtime`,
//! `trace add in0-rx 10`...) goes to `POST /v1/command` and prints the reply's text (or its
//! JSON data with `--json`); `route`, `neighbour`, `batch` and `reload` call the REST
//! resources. It never interprets counters itself.

use anyhow::{bail, Context};
use control::{http, request_at, Endpoint, DEFAULT_SOCKET};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod pages;
mod punt;

/// Arguments of `vecplane ctl`.
#[derive(clap::Args)]
pub struct CtlArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The daemon's TCP API instead of the socket, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// File holding the bearer token the TCP API needs.
    #[arg(long, value_name = "PATH", requires = "url")]
    token_file: Option<PathBuf>,
    /// Print the reply's JSON data (pretty-printed) instead of its text.
    #[arg(long)]
    json: bool,
    /// add-flows, mod-flows: apply all the rules as one change, all or nothing.
    #[arg(long)]
    bundle: bool,
    /// mod-flows, del-flows: only rules with exactly this match and priority.
    #[arg(long)]
    strict: bool,
    /// add-flow, add-flows, mod-flows: the OpenFlow version the rules are sent as, as
    /// `ovs-ofctl -O` (OpenFlow10 accepts what only 1.0 accepts, e.g. `ip,actions=mod_tp_dst:80`).
    #[arg(short = 'O', long = "protocols", value_name = "VERSION")]
    openflow: Option<String>,
    /// punt capture: how many punted packets to write.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// punt capture: the pcap file to write them to.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// punt capture: give up after this many seconds (default: wait for the count).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// punt capture: begin with the punted packets the daemon still holds.
    #[arg(long)]
    from_start: bool,
    /// The command, e.g. `show runtime`, `trace add in0-rx 10`, `route add 198.19.0.0/16 via
    /// 198.18.2.2`, `neighbour add 198.18.2.2 02:00:00:00:02:02 out0`, `policy set poll-mode
    /// busy`, `batch changes.json`, `reload`, `lb vip 198.18.1.1/32 protocol tcp port 80 encap
    /// l3dsr dscp 23`, `lb-file lb.conf`, `show lb vips verbose`, `lb which tcp 198.19.0.7
    /// 40000 198.18.1.1 80`, `interface add name=p1 driver=af-packet interface=veth1
    /// mac=02:00:00:00:03:01 ip4=198.18.3.1/24`, `interface del p1`, `punt show`, `punt capture
    /// --count 10 --file punts.pcap`,
    /// `inject port out0 FRAME.pcap`, `inject bridge br0 1 HEX [ACTIONS]`; `help` lists the
    /// show/clear/trace/pcap commands.
    #[arg(required = true, value_name = "WORDS")]
    words: Vec<String>,
}

const REST_USAGE: &str = "accepted: route show [PREFIX] [ipv6] | route add|replace PREFIX \
    (via ADDRESS... | drop) | route del PREFIX | neighbour show [ADDRESS] | neighbour \
    add|replace ADDRESS MAC PORT | neighbour del ADDRESS | policy show | policy set KEY VALUE... \
    (poll-mode, poll-sleep-max-us, icmp-errors-per-second, icmp-errors-burst) | batch FILE.json | \
    reload | add-flow BRIDGE FLOW | add-flows BRIDGE FILE [--bundle] | mod-flows BRIDGE FLOW \
    [--strict] | del-flows BRIDGE [MATCH] [--strict] | dump-flows BRIDGE | add-group BRIDGE GROUP | \
    add-groups BRIDGE FILE | mod-group BRIDGE GROUP | del-groups BRIDGE [group_id=N] | \
    dump-groups BRIDGE | dump-megaflows BRIDGE | lb vip|as|conf|flush|set ... (one VPP `lb` \
    line) | lb-file FILE (VPP `lb` lines, all or nothing)";

/// The words that name an OpenFlow command (`ovs-ofctl`'s names).
const FLOW_COMMANDS: &[&str] = &[
    "add-flow",
    "add-flows",
    "mod-flows",
    "del-flows",
    "dump-flows",
    "add-group",
    "add-groups",
    "mod-group",
    "del-groups",
    "dump-groups",
    "dump-megaflows",
];

/// The lines of a rules or groups file (`-`: standard input), without blank lines and `#`
/// comments.
fn rule_lines(file: &str) -> anyhow::Result<Vec<String>> {
    let text = if file == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .context("cannot read the rules from standard input")?;
        t
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// `ovs-ofctl`-style commands on a flow-mode bridge, through `/v1/bridges/NAME/...`.
fn flow_request(
    words: &[&str],
    bundle: bool,
    strict: bool,
) -> anyhow::Result<(&'static str, String, Option<Value>)> {
    let path = |b: &str, what: &str| format!("/v1/bridges/{b}/{what}");
    Ok(match words {
        ["add-flow", b, flow] => (
            "POST",
            path(b, "flows"),
            Some(json!({"flows": [flow], "bundle": bundle})),
        ),
        ["add-flows", b, file] => (
            "POST",
            path(b, "flows"),
            Some(json!({"flows": rule_lines(file)?, "bundle": bundle})),
        ),
        ["mod-flows", b, flow] => (
            "PATCH",
            path(b, "flows"),
            Some(json!({"flows": [flow], "strict": strict, "bundle": bundle})),
        ),
        ["del-flows", b] => ("DELETE", path(b, "flows"), Some(json!({"strict": strict}))),
        ["del-flows", b, m] => (
            "DELETE",
            path(b, "flows"),
            Some(json!({"flows": [m], "strict": strict})),
        ),
        ["dump-flows", b] => ("GET", path(b, "flows"), None),
        ["add-group", b, g] => ("POST", path(b, "groups"), Some(json!({"groups": [g]}))),
        ["add-groups", b, file] => (
            "POST",
            path(b, "groups"),
            Some(json!({"groups": rule_lines(file)?})),
        ),
        ["mod-group", b, g] => (
            "POST",
            path(b, "groups"),
            Some(json!({"groups": [g], "modify": true})),
        ),
        ["del-groups", b] => ("DELETE", path(b, "groups"), Some(json!({}))),
        ["del-groups", b, id] => {
            let n = id
                .strip_prefix("group_id=")
                .unwrap_or(id)
                .parse::<u32>()
                .map_err(|_| {
                    anyhow::anyhow!(
                        "`{id}` is not a group id; accepted: group_id=N or N, 0..=4294967039"
                    )
                })?;
            ("DELETE", path(b, "groups"), Some(json!({"groups": [n]})))
        }
        ["dump-groups", b] => ("GET", path(b, "groups"), None),
        ["dump-megaflows", b] => ("GET", path(b, "megaflows"), None),
        _ => bail!("`{}` is not a command; {REST_USAGE}", words.join(" ")),
    })
}

fn endpoint(args: &CtlArgs) -> anyhow::Result<Endpoint> {
    let Some(url) = &args.url else {
        return Ok(Endpoint::Unix(args.socket.clone()));
    };
    let addr = url
        .strip_prefix("http://")
        .map(|r| r.trim_end_matches('/'))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .with_context(|| format!("--url {url}: accepted: http://HOST:PORT"))?;
    let token = match &args.token_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read --token-file {}", p.display()))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    Ok(Endpoint::Tcp {
        addr: addr.to_string(),
        token,
    })
}

/// Print `out`; a reader that went away (`| head`) is not an error.
fn print(out: &str) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write the reply to stdout")),
    }
}

/// Send the command; exit 1 when the daemon answers with an error.
pub fn main(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let ep = endpoint(&args)?;
    let first = args.words.first().map(String::as_str).unwrap_or("");
    if first == "punt" || first == "inject" {
        return punt::main(&ep, &args);
    }
    if args.count.is_some() || args.file.is_some() || args.timeout.is_some() || args.from_start {
        bail!("--count, --file, --timeout and --from-start apply only to `punt capture`");
    }
    let lb_change = (first == "lb" && args.words.get(1).map(String::as_str) != Some("which"))
        || first == "lb-file";
    if matches!(
        first,
        "route" | "neighbour" | "neighbor" | "batch" | "reload" | "policy" | "policies"
    ) || FLOW_COMMANDS.contains(&first)
        || (first == "interface" && args.words.len() > 2)
        || lb_change
    {
        return rest(&ep, &args, args.bundle, args.strict);
    }
    if args.openflow.is_some() {
        bail!("-O (--protocols) applies only to add-flow, add-flows and mod-flows");
    }
    if args.bundle || args.strict {
        bail!("--bundle and --strict apply only to add-flows, mod-flows and del-flows");
    }
    let command = absolute_capture_file(&args.words).join(" ");
    if args.json {
        if let Ok(control::Command::ShowFib {
            v6,
            query: control::commands::FibQuery::Page { after, .. },
        }) = control::parse_command(&command)
        {
            if !args.words.iter().any(|w| w == "limit") {
                return pages::fib(&ep, v6, after);
            }
        }
    }
    let reply = request_at(&ep, &command, args.json)?;
    if !reply.ok {
        return Ok(daemon_error(&reply));
    }
    let out = if args.json {
        let data = reply.data.unwrap_or(Value::Null);
        serde_json::to_string_pretty(&data)? + "\n"
    } else {
        reply.text.unwrap_or_default()
    };
    print(&out)
}

/// Say what the daemon refused; exit 1.
fn daemon_error(reply: &control::Reply) -> ExitCode {
    eprintln!(
        "vecplane ctl: {}",
        reply
            .error
            .as_deref()
            .unwrap_or("the daemon reported an error without a message")
    );
    ExitCode::FAILURE
}

/// A route body from `PREFIX (via A [B...] | drop)`.
fn route_body(words: &[String]) -> anyhow::Result<Value> {
    match words {
        [prefix, via, hops @ ..] if via == "via" && !hops.is_empty() => {
            Ok(json!({"prefix": prefix, "via": hops}))
        }
        [prefix, drop] if drop == "drop" => Ok(json!({"prefix": prefix, "drop": true})),
        _ => bail!("a route is PREFIX via ADDRESS [ADDRESS...] or PREFIX drop"),
    }
}

/// `ADDRESS/LENGTH` as the two path segments of `/v1/routes/{address}/{length}`.
fn route_path(prefix: &str) -> anyhow::Result<String> {
    let (a, l) = prefix
        .split_once('/')
        .with_context(|| format!("`{prefix}` is not a prefix; write ADDRESS/LENGTH"))?;
    Ok(format!("/v1/routes/{a}/{l}"))
}

fn rest(ep: &Endpoint, args: &CtlArgs, bundle: bool, strict: bool) -> anyhow::Result<ExitCode> {
    let (words, as_json) = (&args.words, args.json);
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let body = |v: Value| Some(v.to_string().into_bytes());
    let flow = w.first().is_some_and(|c| FLOW_COMMANDS.contains(c));
    if !flow && (bundle || strict) {
        bail!("--bundle and --strict apply only to add-flows, mod-flows and del-flows");
    }
    if let ["route", "show"] | ["route", "show", "ipv6"] = w.as_slice() {
        let shape = if as_json {
            pages::Shape::Json {
                head: &["version", "family", "total"],
                list: "routes",
            }
        } else {
            pages::Shape::Text {
                list: "routes",
                line: route_line,
            }
        };
        return pages::routes(ep, w.len() == 3, &shape);
    }
    let mut lb_file: Option<String> = None;
    let (method, path, payload) = match w.as_slice() {
        _ if flow => {
            let (m, p, mut v) = flow_request(&w, bundle, strict)?;
            if let Some(version) = &args.openflow {
                let takes = matches!(w.first(), Some(&"add-flow" | &"add-flows" | &"mod-flows"));
                match v.as_mut().and_then(Value::as_object_mut) {
                    Some(o) if takes => {
                        o.insert("openflow".into(), json!(version));
                    }
                    _ => {
                        bail!("-O (--protocols) applies only to add-flow, add-flows and mod-flows")
                    }
                }
            }
            (m, p, v.and_then(body))
        }
        ["reload"] => ("POST", "/v1/reload".to_string(), None),
        ["lb-file", file] => {
            let text =
                std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
            // Every line as it is (comments and blank lines too), so item i is line i + 1.
            let lines: Vec<&str> = text.lines().collect();
            lb_file = Some(file.to_string());
            (
                "POST",
                "/v1/lb/commands".to_string(),
                body(json!({ "lines": lines })),
            )
        }
        ["lb", _, ..] => (
            "POST",
            "/v1/lb/commands".to_string(),
            body(json!({ "lines": [w.join(" ")] })),
        ),
        ["batch", file] => {
            let text = std::fs::read(file).with_context(|| format!("cannot read {file}"))?;
            ("POST", "/v1/batch".to_string(), Some(text))
        }
        ["route", "show", prefix] => ("GET", route_path(prefix)?, None),
        ["route", "add", rest @ ..] => (
            "POST",
            "/v1/routes".to_string(),
            body(route_body(&words[2..2 + rest.len()])?),
        ),
        ["route", "replace", prefix, ..] => {
            ("PUT", route_path(prefix)?, body(route_body(&words[2..])?))
        }
        ["route", "del" | "delete", prefix] => ("DELETE", route_path(prefix)?, None),
        ["neighbour" | "neighbor", "show"] => ("GET", "/v1/neighbours".to_string(), None),
        ["neighbour" | "neighbor", "show", ip] => ("GET", format!("/v1/neighbours/{ip}"), None),
        ["neighbour" | "neighbor", "add", ip, mac, port] => (
            "POST",
            "/v1/neighbours".to_string(),
            body(json!({"ip": ip, "mac": mac, "port": port})),
        ),
        ["neighbour" | "neighbor", "replace", ip, mac, port] => (
            "PUT",
            format!("/v1/neighbours/{ip}"),
            body(json!({"mac": mac, "port": port})),
        ),
        ["neighbour" | "neighbor", "del" | "delete", ip] => {
            ("DELETE", format!("/v1/neighbours/{ip}"), None)
        }
        ["interface", "add", keys @ ..] => (
            "POST",
            "/v1/interfaces".to_string(),
            body(port_table(keys)?),
        ),
        ["interface", "del" | "delete", name] => ("DELETE", format!("/v1/interfaces/{name}"), None),
        ["policy" | "policies", "show"] | ["policies"] => ("GET", "/v1/policies".to_string(), None),
        ["policy" | "policies", "set", key, values @ ..] if !values.is_empty() => {
            let one = |v: &str| v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n));
            let value = match values {
                [v] => one(v),
                many => Value::Array(many.iter().map(|v| one(v)).collect()),
            };
            let mut patch = serde_json::Map::new();
            patch.insert(key.to_string(), value);
            (
                "PATCH",
                "/v1/policies".to_string(),
                body(Value::Object(patch)),
            )
        }
        _ => bail!("`{}` is not a command; {REST_USAGE}", w.join(" ")),
    };
    let reply = http(ep, method, &path, payload)?;
    if !(200..300).contains(&reply.status) {
        let v = reply.json();
        let mut msg = reply.error_message();
        if let (Some(file), Some(i)) = (&lb_file, v["error"]["item"].as_u64()) {
            // The file's line: FILE:LINE: what was wrong (without the lines[i] prefix).
            let what = msg
                .split_once("]: ")
                .map_or(msg.as_str(), |(_, m)| m)
                .to_string();
            eprintln!(
                "vecplane ctl: {file}:{}: {what}; nothing was applied",
                i + 1
            );
            return Ok(ExitCode::FAILURE);
        }
        if let Some(f) = v["error"]["field"].as_str() {
            msg.push_str(&format!(" (field {f})"));
        }
        if let Some(i) = v["error"]["item"].as_u64() {
            msg.push_str(&format!(" (item {i})"));
        }
        eprintln!("vecplane ctl: {msg}");
        return Ok(ExitCode::FAILURE);
    }
    let v = reply.json();
    let texts = |key: &str| {
        v[key].as_array().map(|items| {
            items
                .iter()
                .filter_map(|i| i["text"].as_str())
                .map(|t| format!("{t}\n"))
                .collect::<String>()
        })
    };
    let out = if as_json {
        serde_json::to_string_pretty(&v)? + "\n"
    } else if flow {
        match w.first() {
            Some(&"dump-flows") => texts("flows").unwrap_or_default(),
            Some(&"dump-groups") => texts("groups").unwrap_or_default(),
            Some(&"dump-megaflows") => texts("megaflows").unwrap_or_default(),
            _ => String::new(),
        }
    } else if !matches!(
        w.as_slice(),
        ["route", "show", ..] | ["neighbour" | "neighbor", "show", ..]
    ) {
        serde_json::to_string_pretty(&v)? + "\n"
    } else if let Some(routes) = v["routes"].as_array() {
        routes.iter().map(route_line).collect::<String>()
    } else if let Some(ns) = v["neighbours"].as_array() {
        ns.iter().map(neighbour_line).collect::<String>()
    } else if v.get("ip").is_some() {
        neighbour_line(&v)
    } else {
        route_line(&v)
    };
    print(&out)
}

/// `KEY=VALUE` words as a `[[port]]` table in JSON: `ip4`, `ip6` and `destinations` may repeat
/// (a list), numbers and `true`/`false` are typed, everything else is a string.
fn port_table(words: &[&str]) -> anyhow::Result<Value> {
    const LISTS: &[&str] = &["ip4", "ip6", "destinations"];
    let mut t = serde_json::Map::new();
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            bail!(
                "`{w}`: accepted: KEY=VALUE words with the keys of a [[port]] table, e.g. \
                 name=p1 driver=af-packet interface=veth1 mac=02:00:00:00:00:01 \
                 ip4=198.18.3.1/24"
            );
        };
        let value = match v {
            "true" => json!(true),
            "false" => json!(false),
            _ if k != "name" && k != "interface" => {
                v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n))
            }
            _ => json!(v),
        };
        if LISTS.contains(&k) {
            let list = t.entry(k).or_insert_with(|| json!([]));
            if let Some(a) = list.as_array_mut() {
                a.push(value);
            }
        } else if t.insert(k.to_string(), value).is_some() {
            bail!("`{k}` is given twice; only {} may repeat", LISTS.join(", "));
        }
    }
    Ok(Value::Object(t))
}

fn route_line(r: &Value) -> String {
    let target = match r["via"].as_array() {
        Some(h) => format!(
            "via {}",
            h.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        ),
        None => "drop".to_string(),
    };
    format!("{} {target}\n", r["prefix"].as_str().unwrap_or(""))
}

fn neighbour_line(n: &Value) -> String {
    format!(
        "{} {} {}\n",
        n["ip"].as_str().unwrap_or(""),
        n["mac"].as_str().unwrap_or(""),
        n["port"].as_str().unwrap_or("")
    )
}

/// `pcap start PORT FILE ...` with a relative FILE names it from the caller's directory (the
/// daemon has its own working directory); other commands pass unchanged.
fn absolute_capture_file(words: &[String]) -> Vec<String> {
    let mut w = words.to_vec();
    let is_start = matches!(
        (w.first().map(String::as_str), w.get(1).map(String::as_str)),
        (Some("pcap"), Some(s)) if "start".starts_with(s) && !s.is_empty()
    );
    if is_start {
        if let Some(file) = w.get_mut(3) {
            let p = std::path::Path::new(file.as_str());
            if p.is_relative() {
                if let Ok(cwd) = std::env::current_dir() {
                    *file = cwd.join(p).display().to_string();
                }
            }
        }
    }
    w
}
