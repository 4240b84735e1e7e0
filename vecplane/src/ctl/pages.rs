//! Listings the daemon answers in pages (`show ip[6] fib`, `route show`): every page fetched in
//! turn by following `next`, and printed as it comes, so the client, like the daemon, holds one
//! page of a million-route table at a time. It never changes what a page holds.

use control::{http, request_at, Endpoint};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// Most routes `GET /v1/routes` returns in one page.
const ROUTE_PAGE: usize = control::routes_api::MAX_PAGE;

/// One page of a listing, or the exit code of a refusal already reported.
type Page = Result<Value, ExitCode>;

/// How to print the pages: as one JSON document, or each item as a line of text.
pub(super) enum Shape {
    /// The first page's `head` keys, then `list` with every page's items, then `"next": null`:
    /// the same text `serde_json::to_string_pretty` makes of the whole listing.
    Json {
        head: &'static [&'static str],
        list: &'static str,
    },
    /// `line` of each item of `list`.
    Text {
        list: &'static str,
        line: fn(&Value) -> String,
    },
}

/// `--json show ip[6] fib [after PREFIX]`: every entry as one document.
pub(super) fn fib(ep: &Endpoint, v6: bool, after: Option<String>) -> anyhow::Result<ExitCode> {
    let fam = if v6 { "ip6" } else { "ip" };
    let fetch = |after: Option<&str>| -> anyhow::Result<Page> {
        let line = match after {
            Some(a) => format!("show {fam} fib after {a}"),
            None => format!("show {fam} fib"),
        };
        let reply = request_at(ep, &line, true)?;
        if !reply.ok {
            return Ok(Err(super::daemon_error(&reply)));
        }
        Ok(Ok(reply.data.unwrap_or(Value::Null)))
    };
    let shape = Shape::Json {
        head: &["family", "total"],
        list: "entries",
    };
    print_pages(fetch, after, &shape)
}

/// `route show [ipv6]`: every route of the family, not just the first page.
pub(super) fn routes(ep: &Endpoint, v6: bool, shape: &Shape) -> anyhow::Result<ExitCode> {
    let family = if v6 { "ipv6" } else { "ipv4" };
    let fetch = |after: Option<&str>| -> anyhow::Result<Page> {
        let mut path = format!("/v1/routes?family={family}&limit={ROUTE_PAGE}");
        if let Some(a) = after {
            path.push_str(&format!("&after={a}"));
        }
        let reply = http(ep, "GET", &path, None)?;
        if !(200..300).contains(&reply.status) {
            eprintln!("vecplane ctl: {}", reply.error_message());
            return Ok(Err(ExitCode::FAILURE));
        }
        Ok(Ok(reply.json()))
    };
    print_pages(fetch, None, shape)
}

/// Fetch the page after `after` with `fetch`, print it in `shape`, and go on while a page
/// names a `next`.
fn print_pages(
    mut fetch: impl FnMut(Option<&str>) -> anyhow::Result<Page>,
    mut after: Option<String>,
    shape: &Shape,
) -> anyhow::Result<ExitCode> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut first = true;
    let mut printed = 0usize;
    loop {
        let data = match fetch(after.as_deref())? {
            Ok(d) => d,
            Err(code) => return Ok(code),
        };
        after = data["next"].as_str().map(str::to_string);
        let mut text = String::new();
        match shape {
            Shape::Json { head, list } => {
                if first {
                    text.push('{');
                    for key in *head {
                        text.push_str(&format!("\n  \"{key}\": "));
                        indented(&mut text, &data[*key], "  ")?;
                        text.push(',');
                    }
                    text.push_str(&format!("\n  \"{list}\": ["));
                }
                for item in data[*list].as_array().into_iter().flatten() {
                    if printed > 0 {
                        text.push(',');
                    }
                    printed += 1;
                    text.push_str("\n    ");
                    indented(&mut text, item, "    ")?;
                }
                if after.is_none() {
                    text.push_str(if printed > 0 { "\n  ],\n" } else { "],\n" });
                    text.push_str("  \"next\": null\n}\n");
                }
            }
            Shape::Text { list, line } => {
                for item in data[*list].as_array().into_iter().flatten() {
                    text.push_str(&line(item));
                }
            }
        }
        first = false;
        match out.write_all(text.as_bytes()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(anyhow::Error::new(e).context("cannot write the reply")),
        }
        if after.is_none() {
            break;
        }
    }
    match out.flush() {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write the reply")),
    }
}

/// `v` pretty-printed onto `text`, its lines after the first indented by `indent`.
fn indented(text: &mut String, v: &Value, indent: &str) -> anyhow::Result<()> {
    for (j, l) in serde_json::to_string_pretty(v)?.lines().enumerate() {
        if j > 0 {
            text.push('\n');
            text.push_str(indent);
        }
        text.push_str(l);
    }
    Ok(())
}
