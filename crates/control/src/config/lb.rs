//! The `[lb]` table: the load balancer's configuration as FD.io VPP `lb` CLI lines, given in
//! `lines` and/or a `file`, parsed with `lb::cli` and applied with `LbState::apply` as one batch.
//! Every malformed line is reported at its FILE:LINE (or at the `lines` item), a batch the model
//! refuses at the line of the refused command, and `lb set interface` port names are checked
//! against the config's ports. The health checks (`probe-source4`, `probe-source6`,
//! `[[lb.health-check]]`) are read by the `health` submodule against the applied state. It never
//! publishes anything; `dataplane::lb` does.

mod health;

use super::ctx::{Ctx, Field, Fields};
use super::read::{included_file, read_text};
use super::value::Node;
use super::value::Val;
use super::Issue;
use dataplane::{LbSpec, PortSpec};
use lb::model::{LbCommand, LbState, MemoryBudget, DEFAULT_MEMORY_LIMIT, MIN_MEMORY_LIMIT};
use std::ops::Range;
use std::path::Path;

/// The keys of `[lb]`.
pub(super) const LB_KEYS: &[&str] = &[
    "lines",
    "file",
    "probe-source4",
    "probe-source6",
    "health-check",
    "memory-limit",
];

/// What `memory-limit` accepts, for messages.
const MEMORY_LIMIT_ACCEPTED: &str = "a size such as \"2GiB\", \"512MiB\" or a number of bytes, \
    64MiB..=1TiB (default 2GiB)";

/// Largest `[lb] file`.
pub(super) const LB_FILE_MAX_BYTES: u64 = 64 << 20;

/// Where a command came from, to point at it when the batch is refused.
enum Origin {
    /// Item `index` of `lines`, at `span` in the config.
    Line { index: usize, span: Range<usize> },
    /// Line `line` of the file `label`.
    File { label: String, line: usize },
}

impl Ctx<'_> {
    /// `[lb]`: the lines, then the file's lines, applied to an empty state as one batch; None
    /// (with issues) when anything is wrong. `port_names` are the config's ports, `ports` their
    /// specs (the probe sources must be their addresses).
    pub(super) fn lb(
        &mut self,
        node: &Node,
        base_dir: &Path,
        port_names: &[Option<String>],
        ports: &[Option<PortSpec>],
        workers: usize,
    ) -> Option<LbSpec> {
        let f = self.fields("[lb]".to_string(), Some("lb"), node, LB_KEYS)?;
        self.remember_lines(&f);
        let before = self.issues.len();
        let budget = MemoryBudget {
            limit: self.memory_limit(&f),
            workers: workers.clamp(1, u32::MAX as usize) as u32,
        };
        let mut cmds: Vec<(LbCommand, Origin)> = Vec::new();
        if let Field::Ok(items, _) = self.strings(&f, "lines", false) {
            for (index, (text, span)) in items.into_iter().enumerate() {
                let line = text.split('#').next().unwrap_or("");
                if line.trim().is_empty() {
                    continue;
                }
                match lb::cli::parse_line(line) {
                    Ok(c) => cmds.push((c, Origin::Line { index, span })),
                    Err(e) => self.error(
                        &span,
                        "[lb]",
                        Some("lines"),
                        format!("lb.lines[{index}]: {e}"),
                    ),
                }
            }
        }
        if let Field::Ok(name, span) = self.string(&f, "file") {
            self.lb_file(&f, name, span, base_dir, &mut cmds);
        }
        // Refuse what only makes sense at run time, and NAT ports the config does not have.
        let names: Vec<&str> = port_names.iter().flatten().map(String::as_str).collect();
        for (c, origin) in &cmds {
            let problem = match c {
                LbCommand::Show(_) => Some(
                    "`show lb` is a query, not configuration; accepted in [lb]: lb vip, lb as, \
                     lb conf, lb flush vip, lb set interface"
                        .to_string(),
                ),
                LbCommand::NatInterface { ports, .. } => ports
                    .iter()
                    .find(|p| !names.contains(&p.as_str()))
                    .map(|p| {
                        format!(
                            "`{p}` is not a port of this config; accepted: {}",
                            if names.is_empty() {
                                "(no [[port]] defined)".to_string()
                            } else {
                                names.join(", ")
                            }
                        )
                    }),
                _ => None,
            };
            if let Some(message) = problem {
                self.lb_issue(origin, message);
            }
        }
        let state = if self.issues.len() > before {
            None
        } else {
            let batch: Vec<LbCommand> = cmds.iter().map(|(c, _)| c.clone()).collect();
            match LbState::new().with_memory_budget(budget).apply(&batch) {
                Ok(state) => Some(state),
                Err(e) => {
                    match cmds.get(e.index) {
                        Some((_, origin)) => self.lb_issue(origin, e.kind.to_string()),
                        None => self.error(&f.span, "[lb]", None, e.kind.to_string()),
                    }
                    None
                }
            }
        };
        // The health checks are read even when the lines are refused, so that every problem is
        // reported at once (their VIPs are only looked up in a state that was built).
        let health = self.lb_health(&f, state.as_ref(), ports);
        if self.issues.len() > before {
            return None;
        }
        Some(LbSpec {
            state: state?,
            health: health?,
        })
    }

    /// `memory-limit`: a size with a unit (KiB, MiB, GiB, TiB; K/M/G/T and KB/MB/GB/TB read as
    /// the same powers of two) or an integer of bytes; the default when absent or bad (a bad
    /// one is reported).
    fn memory_limit(&mut self, f: &Fields<'_>) -> u64 {
        let Some(n) = f.get("memory-limit") else {
            return DEFAULT_MEMORY_LIMIT;
        };
        let parsed = match n.get_ref() {
            Val::Int(i) => u64::try_from(*i).ok(),
            Val::Str(t) => parse_size(t),
            _ => None,
        };
        match parsed {
            Some(v) if (MIN_MEMORY_LIMIT..=MAX_MEMORY_LIMIT).contains(&v) => v,
            _ => {
                self.bad(
                    f,
                    "memory-limit",
                    n,
                    format!("not a memory limit; accepted: {MEMORY_LIMIT_ACCEPTED}"),
                );
                DEFAULT_MEMORY_LIMIT
            }
        }
    }

    fn lb_issue(&mut self, origin: &Origin, message: String) {
        match origin {
            Origin::Line { index, span } => self.error(
                span,
                "[lb]",
                Some("lines"),
                format!("lb.lines[{index}]: {message}"),
            ),
            Origin::File { label, line } => self.issues.push(Issue {
                file: label.clone(),
                line: *line,
                section: String::new(),
                field: None,
                message,
            }),
        }
    }

    /// The lines of `[lb] file`: VPP `lb` CLI lines, `#` comments and blank lines skipped,
    /// every bad line reported at LB-FILE:LINE.
    fn lb_file(
        &mut self,
        f: &Fields<'_>,
        name: &str,
        span: Range<usize>,
        base_dir: &Path,
        out: &mut Vec<(LbCommand, Origin)>,
    ) {
        let (path, label) = included_file(base_dir, name);
        let text = match read_text(&path, LB_FILE_MAX_BYTES) {
            Ok(text) => text,
            Err(why) => {
                self.error(
                    &span,
                    &f.section,
                    Some("file"),
                    format!(
                    "cannot read {}: {why}; accepted: a file of VPP `lb` lines (lb vip, lb as, \
                     lb conf, ...), one per line, relative to the config file's directory",
                    path.display()
                ),
                );
                return;
            }
        };
        for (c, line) in self.file_lines(&text, &label, lb_line_content, lb::cli::parse_line) {
            let label = label.clone();
            out.push((c, Origin::File { label, line }));
        }
    }
}

/// What of an `[lb] file` line is read: all before a `#` (a comment anywhere), None when blank.
fn lb_line_content(line: &str) -> Option<&str> {
    let body = line.split('#').next().unwrap_or("");
    (!body.trim().is_empty()).then_some(body)
}

/// The largest `memory-limit` accepted (1 TiB).
const MAX_MEMORY_LIMIT: u64 = 1 << 40;

/// "2GiB", "512 MiB", "64M", "1073741824": bytes (`None` when not a size or too large).
fn parse_size(t: &str) -> Option<u64> {
    let t = t.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KB" | "KiB" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        "T" | "TB" | "TiB" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}
