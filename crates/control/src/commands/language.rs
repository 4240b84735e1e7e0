//! The command language of `vecplane ctl` as text: the request and reply on the control
//! socket, the `Command`s, and `parse_command`, which turns a line into one or says what is
//! accepted. It never answers a command (`Control` in the parent module does).

use super::*;

/// A request on the control socket: one JSON object per line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The command words, e.g. `show runtime`.
    pub command: String,
    /// Whether the reply should carry `data` (JSON) besides `text`.
    #[serde(default)]
    pub json: bool,
}

/// A reply: `{"ok":true,"text":"...","data":{...}}` or `{"ok":false,"error":"..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the command succeeded.
    pub ok: bool,
    /// Human-readable output (on success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Machine-readable output (on success, when JSON was asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What went wrong (on failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    /// A success.
    pub fn success(text: String, data: Option<Value>) -> Reply {
        Reply {
            ok: true,
            text: Some(text),
            data,
            error: None,
        }
    }

    /// A failure.
    pub fn failure(error: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            text: None,
            data: None,
            error: Some(error.into()),
        }
    }
}

/// A parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `help`
    Help,
    /// `show rxq`
    ShowRxq,
    /// `show features`
    ShowFeatures,
    /// `show NAME` of a registered feature (`crate::registry`)
    ShowFeature(String),
    /// `set interface feature PORT FEATURE arc ARC [disable]`
    SetFeature(super::features::FeatureChange),
    /// `rxq move PORT PAIR WORKER`
    RxqMove {
        /// Port name.
        port: String,
        /// Queue pair.
        pair: usize,
        /// The worker to receive from it.
        worker: usize,
    },
    /// `show runtime [all]`
    ShowRuntime {
        /// Also nodes with 0 calls.
        all: bool,
    },
    /// `show interfaces`
    ShowInterfaces,
    /// `show errors`
    ShowErrors,
    /// `show ip fib [PREFIX|ADDRESS | [after PREFIX] [limit N]]` (`ip6` for IPv6)
    ShowFib {
        /// IPv6 (`ip6`) rather than IPv4 (`ip`).
        v6: bool,
        /// A page of the listing, or a lookup.
        query: FibQuery,
    },
    /// `show trace`
    ShowTrace,
    /// `show neighbours`
    ShowNeighbours,
    /// `show bridge`
    ShowBridge,
    /// `show flow-cache`
    ShowFlowCache,
    /// `show pcap`
    ShowPcap,
    /// `show punt`
    ShowPunt,
    /// `show lb [vips [verbose]]`
    ShowLb(lb::model::LbShow),
    /// `show lb health`
    ShowLbHealth,
    /// `show bgp`
    ShowBgp,
    /// `drain`: withdraw every VIP, then wait for the traffic to stop
    Drain,
    /// `drain cancel`: announce again
    DrainCancel,
    /// `lb which PROTO SRC SPORT DST DPORT`
    LbWhich(lb::tuple::FiveTuple),
    /// `pcap start PORT FILE [rx|tx|both] [count N] [snaplen N]`
    PcapStart(CaptureRequest),
    /// `pcap stop`
    PcapStop,
    /// `trace add NODE N`
    TraceAdd {
        /// Input node name.
        node: String,
        /// Packets to trace.
        count: u32,
    },
    /// `clear trace`
    ClearTrace,
    /// `clear runtime`
    ClearRuntime,
    /// `clear interfaces`
    ClearInterfaces,
    /// `clear errors`
    ClearErrors,
}

/// The commands and what they do (also the text of `help`).
pub const COMMANDS: &[(&str, &str)] = &[
    ("help", "list these commands"),
    (
        "show runtime [all]",
        "per node and worker: calls, vectors, packets, clocks/packet, vectors/call (`all`: also \
         nodes never called)",
    ),
    (
        "show rxq",
        "per worker: each receive queue (input node) with its packets, what they cost in every \
         node (cycles/packet), its share of the worker's time (load) and of its work",
    ),
    (
        "rxq move PORT PAIR WORKER",
        "receive from queue pair PAIR of vhost-user port PORT on worker WORKER (the guest's \
         frames wait in its ring meanwhile; the rebalancer may move it again)",
    ),
    (
        "show interfaces",
        "per port: driver, MAC, rx/tx packets and bytes, rx/tx drops",
    ),
    ("show errors", "non-zero drop counters per node and reason"),
    (
        "show neighbours",
        "per worker: ARP/ND entries (port, address, MAC, state, age, queued) and counters",
    ),
    (
        "show bridge",
        "per bridge domain: learned MACs (VLAN, MAC, port, age) and learning/flooding counters",
    ),
    (
        "show flow-cache",
        "per flow-mode bridge and worker: EMC and megaflow hits, misses, subtables visited per \
         hit, megaflows installed, revalidated, evicted, expired, cycles per miss",
    ),
    (
        "show lb [vips [verbose]]",
        "the load balancer: lb conf and node counters; per VIP: encap, Maglev size, warnings, \
         packets, bytes, new/live flows, non-SYN misses, no-server drops, table-full \
         (`verbose`: per server: weight, state, Maglev share and counters)",
    ),
    (
        "show lb health",
        "the health checks: per server of a checked VIP: check, state (up, down, unprobed), \
         successful/finished probes, the last result, state changes; the recent transitions",
    ),
    (
        "show bgp",
        "the VIP announcements through BIRD: phase (waiting, serving, draining, ready), what is \
         announced, the liveness device, configures, errors, stalls",
    ),
    (
        "drain [cancel]",
        "withdraw every VIP from BGP, then wait until their traffic stopped (`show bgp` says \
         ready); `cancel` announces again",
    ),
    (
        "lb which PROTO SRC SPORT DST DPORT",
        "which VIP and which server (by Maglev) a new flow of this 5-tuple gets, and why",
    ),
    (
        "show ip fib [PREFIX|ADDRESS | after PREFIX | limit N]",
        "IPv4 routes (the first 1,000 lines; JSON: pages of up to 10,000 entries, `after` the \
         previous page's `next`); with an address or prefix, the longest matching route",
    ),
    (
        "show ip6 fib [PREFIX|ADDRESS | after PREFIX | limit N]",
        "IPv6 routes, as `show ip fib`",
    ),
    (
        "pcap start PORT FILE [rx|tx|both] [count N] [snaplen N]",
        "capture the next N (default 1000) packets received on and/or sent to PORT into the \
         pcap file FILE (an absolute path; tcpdump and wireshark read it)",
    ),
    ("pcap stop", "end the running capture and close its file"),
    (
        "show punt",
        "the channels to the control plane: per worker and reason, packets punted and copies \
         lost (ring full, rate limit); packets delivered; injected packets and refusals",
    ),
    (
        "show pcap",
        "the running or last capture: file, packets written, lost",
    ),
    (
        "trace add NODE N",
        "trace the next N packets (1..=4096) received by input node NODE, e.g. in0-rx",
    ),
    ("show trace", "the traced packets, one line per node"),
    ("clear trace", "forget traced packets and stop tracing"),
    ("clear runtime", "restart the runtime counters from zero"),
    (
        "clear interfaces",
        "restart the interface counters from zero",
    ),
    ("clear errors", "restart the error counters from zero"),
    (
        "show features",
        "the feature arcs, their features in the order packets visit them, and the ports each \
         is enabled on",
    ),
    (
        "set interface feature PORT FEATURE arc ARC [disable]",
        "enable (or disable) FEATURE of arc ARC on port PORT while the data plane runs (VPP's \
         spelling; the input arcs take the receive port, `output` the transmit port)",
    ),
];

/// A command that could not be parsed or executed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CommandError(pub String);

fn accepted_commands() -> String {
    COMMANDS
        .iter()
        .map(|(c, _)| *c)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Match `word` against `options`: exact, else a unique prefix (VPP style: `sh int`).
/// The words after `show ip fib`: nothing, `after PREFIX`, `limit N` (both in that order), or
/// one address or prefix to look up.
fn fib_query(fam: &str, words: &[&str]) -> Result<FibQuery, CommandError> {
    let cmd = format!("show {fam} fib");
    let usage = || {
        format!(
            "accepted: `{cmd}`, `{cmd} PREFIX|ADDRESS`, `{cmd} [after PREFIX] [limit N]` \
             (N from 1 to {MAX_PAGE})"
        )
    };
    let mut after = None;
    let mut limit = MAX_PAGE;
    let mut rest = words;
    match rest {
        [] => {}
        ["after" | "limit", ..] => {}
        [arg] => return Ok(FibQuery::Lookup(arg.to_string())),
        [arg, more, ..] => {
            return Err(CommandError(format!(
                "unexpected `{more}` after `{cmd} {arg}`; {}",
                usage()
            )))
        }
    }
    if let ["after", p, tail @ ..] = rest {
        after = Some(p.to_string());
        rest = tail;
    }
    if let ["limit", n, tail @ ..] = rest {
        limit = match n.parse::<usize>() {
            Ok(v) if (1..=MAX_PAGE).contains(&v) => v,
            _ => {
                return Err(CommandError(format!(
                    "`{cmd} limit {n}`: `{n}` is not a number of entries; {}",
                    usage()
                )))
            }
        };
        rest = tail;
    }
    match rest {
        [] => Ok(FibQuery::Page { after, limit }),
        [w, ..] => Err(CommandError(format!(
            "`{cmd} {}`: unexpected `{w}`; {}",
            words.join(" "),
            usage()
        ))),
    }
}

fn pick<'o>(word: &str, options: &[&'o str]) -> Result<&'o str, String> {
    let w = word.to_ascii_lowercase();
    if let Some(o) = options.iter().find(|o| **o == w) {
        return Ok(o);
    }
    let m: Vec<&&str> = options.iter().filter(|o| o.starts_with(&w)).collect();
    match m.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("`{word}` is not one of: {}", options.join(", "))),
        many => Err(format!(
            "`{word}` is ambiguous: {}",
            many.iter().map(|s| **s).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Parse a command line (words separated by blanks; unique prefixes of keywords are accepted).
pub fn parse_command(line: &str) -> Result<Command, CommandError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let bad = |detail: String| {
        CommandError(format!(
            "unknown command `{}`: {detail}; accepted commands: {}",
            words.join(" "),
            accepted_commands()
        ))
    };
    let extra = |at: usize, cmd: &str| -> Result<(), CommandError> {
        match words.get(at) {
            None => Ok(()),
            Some(w) => Err(CommandError(format!(
                "unexpected `{w}` after `{cmd}`; accepted commands: {}",
                accepted_commands()
            ))),
        }
    };
    let Some(first) = words.first() else {
        return Err(CommandError(format!(
            "empty command; accepted commands: {}",
            accepted_commands()
        )));
    };
    match pick(
        first,
        &[
            "help", "show", "trace", "clear", "pcap", "lb", "drain", "rxq", "set",
        ],
    )
    .map_err(bad)?
    {
        "drain" => match words.get(1) {
            None => Ok(Command::Drain),
            Some(w) if pick(w, &["cancel"]).is_ok() => {
                extra(2, "drain cancel")?;
                Ok(Command::DrainCancel)
            }
            Some(w) => Err(bad(format!(
                "`drain {w}`: accepted: `drain`, `drain cancel`"
            ))),
        },
        "lb" => match words.get(1) {
            Some(&"which") => crate::lb_show::parse_which(&words[2..]).map(Command::LbWhich),
            _ => Err(CommandError(format!(
                "`{}`: the command language has only `lb which ...` and `show lb ...`; \
                 changes go to POST /v1/lb/commands (`vecplane ctl lb ...`)",
                words.join(" ")
            ))),
        },
        "pcap" => {
            let Some(w) = words.get(1) else {
                return Err(bad("`pcap` needs `start ...` or `stop`".into()));
            };
            match pick(w, &["start", "stop"]).map_err(bad)? {
                "start" => parse_start(&words[2..])
                    .map(Command::PcapStart)
                    .map_err(CommandError),
                _ => {
                    extra(2, "pcap stop")?;
                    Ok(Command::PcapStop)
                }
            }
        }
        "help" => {
            extra(1, "help")?;
            Ok(Command::Help)
        }
        "show" => {
            let Some(w) = words.get(1) else {
                return Err(bad("`show` needs what to show".into()));
            };
            // The core's `show` words, then one per registered feature (`show NAME`).
            let mut shows = vec![
                "runtime",
                "rxq",
                "interfaces",
                "errors",
                "ip",
                "ip6",
                "trace",
                "neighbours",
                "neighbors",
                "bridge",
                "flow-cache",
                "pcap",
                "punt",
                "lb",
                "bgp",
                "features",
            ];
            shows.extend(crate::registry::installed().iter().map(|f| f.name()));
            match pick(w, &shows).map_err(bad)? {
                "runtime" => match words.get(2) {
                    None => Ok(Command::ShowRuntime { all: false }),
                    Some(a) => {
                        pick(a, &["all"]).map_err(bad)?;
                        extra(3, "show runtime all")?;
                        Ok(Command::ShowRuntime { all: true })
                    }
                },
                "rxq" => {
                    extra(2, "show rxq")?;
                    Ok(Command::ShowRxq)
                }
                "features" => {
                    extra(2, "show features")?;
                    Ok(Command::ShowFeatures)
                }
                "interfaces" => {
                    extra(2, "show interfaces")?;
                    Ok(Command::ShowInterfaces)
                }
                "errors" => {
                    extra(2, "show errors")?;
                    Ok(Command::ShowErrors)
                }
                "trace" => {
                    extra(2, "show trace")?;
                    Ok(Command::ShowTrace)
                }
                "neighbours" | "neighbors" => {
                    extra(2, "show neighbours")?;
                    Ok(Command::ShowNeighbours)
                }
                "punt" => {
                    extra(2, "show punt")?;
                    Ok(Command::ShowPunt)
                }
                "bridge" => {
                    extra(2, "show bridge")?;
                    Ok(Command::ShowBridge)
                }
                "flow-cache" => {
                    extra(2, "show flow-cache")?;
                    Ok(Command::ShowFlowCache)
                }
                "pcap" => {
                    extra(2, "show pcap")?;
                    Ok(Command::ShowPcap)
                }
                "bgp" => {
                    extra(2, "show bgp")?;
                    Ok(Command::ShowBgp)
                }
                name if crate::registry::find(name).is_some() => {
                    extra(2, &format!("show {name}"))?;
                    Ok(Command::ShowFeature(name.to_string()))
                }
                "lb" => {
                    if words.get(2).is_some_and(|w| pick(w, &["health"]).is_ok()) {
                        extra(3, "show lb health")?;
                        return Ok(Command::ShowLbHealth);
                    }
                    let verbose = match (words.get(2), words.get(3)) {
                        (None, _) => return Ok(Command::ShowLb(lb::model::LbShow::Summary)),
                        (Some(v), None) if pick(v, &["vips"]).is_ok() => false,
                        (Some(v), Some(x))
                            if pick(v, &["vips"]).is_ok() && pick(x, &["verbose"]).is_ok() =>
                        {
                            true
                        }
                        _ => {
                            return Err(bad(
                                "accepted: `show lb`, `show lb vips`, `show lb vips verbose`, \
                                 `show lb health`"
                                    .into(),
                            ))
                        }
                    };
                    extra(if verbose { 4 } else { 3 }, "show lb vips")?;
                    Ok(Command::ShowLb(lb::model::LbShow::Vips { verbose }))
                }
                fam => {
                    let v6 = fam == "ip6";
                    let Some(f) = words.get(2) else {
                        return Err(bad(format!("`show {fam}` needs `fib`")));
                    };
                    pick(f, &["fib"]).map_err(bad)?;
                    let query = fib_query(fam, &words[3..])?;
                    Ok(Command::ShowFib { v6, query })
                }
            }
        }
        "set" => {
            if words.get(1..3) != Some(&["interface", "feature"][..]) {
                return Err(bad(
                    "`set` takes `set interface feature PORT FEATURE arc ARC [disable]`".into(),
                ));
            }
            super::features::parse(&words[3..]).map(Command::SetFeature)
        }
        "rxq" => {
            let usage = "`rxq move PORT PAIR WORKER`, e.g. `rxq move vm1 1 0`";
            let Some(w) = words.get(1) else {
                return Err(bad(format!("`rxq` needs {usage}")));
            };
            pick(w, &["move"]).map_err(bad)?;
            let (Some(port), Some(pair), Some(worker)) = (words.get(2), words.get(3), words.get(4))
            else {
                return Err(CommandError(format!("`rxq move` needs {usage}")));
            };
            let number = |what: &str, v: &str| {
                v.parse::<usize>().map_err(|_| {
                    CommandError(format!(
                        "`rxq move {port} {pair} {worker}`: {what} `{v}` is not a number; \
                         accepted: {usage}"
                    ))
                })
            };
            let (pair, worker) = (number("PAIR", pair)?, number("WORKER", worker)?);
            extra(5, &format!("rxq move {port} {pair} {worker}"))?;
            Ok(Command::RxqMove {
                port: port.to_string(),
                pair,
                worker,
            })
        }
        "trace" => {
            let Some(w) = words.get(1) else {
                return Err(bad("`trace` needs `add NODE N`".into()));
            };
            pick(w, &["add"]).map_err(bad)?;
            let (Some(node), Some(n)) = (words.get(2), words.get(3)) else {
                return Err(CommandError(
                    "`trace add` needs NODE and N, e.g. `trace add in0-rx 10`".into(),
                ));
            };
            let count = match n.parse::<u32>() {
                Ok(c) if (1..=MAX_TRACE_RECORDS as u32).contains(&c) => c,
                _ => {
                    return Err(CommandError(format!(
                        "`trace add {node} {n}`: N `{n}` is not a packet count; accepted: \
                         1..={MAX_TRACE_RECORDS}"
                    )))
                }
            };
            extra(4, &format!("trace add {node} {n}"))?;
            Ok(Command::TraceAdd {
                node: node.to_string(),
                count,
            })
        }
        _ => {
            let Some(w) = words.get(1) else {
                return Err(bad("`clear` needs what to clear".into()));
            };
            let what = pick(w, &["runtime", "interfaces", "errors", "trace"]).map_err(bad)?;
            extra(2, &format!("clear {what}"))?;
            Ok(match what {
                "runtime" => Command::ClearRuntime,
                "interfaces" => Command::ClearInterfaces,
                "errors" => Command::ClearErrors,
                _ => Command::ClearTrace,
            })
        }
    }
}
