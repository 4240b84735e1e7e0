//! The validation context: the issue list with FILE:LINE positions, and readers for one table's
//! keys (strings, ranged integers, MACs, addresses, lists) that report every bad value. It never
//! decides what a section means; the section modules do.

use super::util::suggest;
use super::value::{kind, show, Node, Val};
use super::Issue;
use packet::headers::{parse_mac, Mac};
use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::{Range, RangeInclusive};

// ---------------------------------------------------------------------------------------------
// Validation context and field helpers.

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) line_starts: Vec<usize>,
    pub(super) issues: Vec<Issue>,
    /// Lines of sections and keys that `live_diff` may name: "SECTION" and "SECTION.KEY".
    pub(super) lines: HashMap<String, usize>,
}

/// Outcome of reading one field: absent, present but invalid (already reported), or a value
/// with the span of what was read.
pub(super) enum Field<T> {
    Missing,
    Bad,
    Ok(T, Range<usize>),
}

impl<T> Field<T> {
    pub(super) fn ok(self) -> Option<T> {
        match self {
            Field::Ok(v, _) => Some(v),
            _ => None,
        }
    }
}

/// The keys of one table, checked against the accepted ones.
pub(super) struct Fields<'t> {
    pub(super) section: String,
    pub(super) span: Range<usize>,
    pub(super) entries: Vec<(&'t str, &'t Node)>,
}

impl<'t> Fields<'t> {
    pub(super) fn get(&self, key: &str) -> Option<&'t Node> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

pub(super) const MAC_ACCEPTED: &str = "six hex octets like 02:00:00:00:00:01";
pub(super) const NAME_ACCEPTED: &str = "1 to 32 characters from a-z A-Z 0-9 _ . -";

pub(super) fn first_line_break_positions(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    v
}

impl<'a> Ctx<'a> {
    pub(super) fn new(text: &'a str, file: &'a str) -> Ctx<'a> {
        Ctx {
            file,
            line_starts: first_line_break_positions(text),
            issues: Vec::new(),
            lines: HashMap::new(),
        }
    }

    /// Parse the lines of an included file (`label` in messages): `content` gives what of a
    /// line counts (None for a comment or blank line, skipped), `parse` reads it, and each bad
    /// line is an issue at LABEL:LINE. The items read, with their 1-based lines.
    pub(super) fn file_lines<'t, T, E: std::fmt::Display>(
        &mut self,
        text: &'t str,
        label: &str,
        content: impl Fn(&'t str) -> Option<&'t str>,
        parse: impl Fn(&'t str) -> Result<T, E>,
    ) -> Vec<(T, usize)> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let Some(body) = content(line) else {
                continue;
            };
            match parse(body) {
                Ok(item) => out.push((item, i + 1)),
                Err(e) => self.issues.push(Issue {
                    file: label.to_string(),
                    line: i + 1,
                    section: String::new(),
                    field: None,
                    message: e.to_string(),
                }),
            }
        }
        out
    }

    pub(super) fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// Remember the lines of table `f` and of its keys, for messages about a later reload.
    pub(super) fn remember_lines(&mut self, f: &Fields<'_>) {
        let line = self.line_of(f.span.start);
        self.lines.insert(f.section.clone(), line);
        for (k, n) in &f.entries {
            let line = self.line_of(n.span().start);
            self.lines.insert(format!("{}.{k}", f.section), line);
        }
    }

    pub(super) fn error(
        &mut self,
        span: &Range<usize>,
        section: &str,
        field: Option<&str>,
        message: impl Into<String>,
    ) {
        let line = self.line_of(span.start);
        self.issues.push(Issue {
            file: self.file.to_string(),
            line,
            section: section.to_string(),
            field: field.map(str::to_string),
            message: message.into(),
        });
    }

    /// Check that `node` is a table and that its keys are accepted.
    pub(super) fn fields<'t>(
        &mut self,
        section: String,
        field: Option<&str>,
        node: &'t Node,
        accepted: &[&str],
    ) -> Option<Fields<'t>> {
        let Val::Table(entries) = node.get_ref() else {
            self.error(
                &node.span(),
                &section,
                field,
                format!("expected a table, found {}", kind(node.get_ref())),
            );
            return None;
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let key = k.get_ref().as_str();
            if accepted.contains(&key) {
                out.push((key, v));
            } else {
                let hint = if key == "route-file" && !section.is_empty() {
                    " (`route-file` is a top-level key: put it before the first [table])"
                        .to_string()
                } else {
                    suggest(key, accepted)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default()
                };
                self.error(
                    &k.span(),
                    &section,
                    None,
                    format!(
                        "unknown key `{key}`{hint}; accepted: {}",
                        accepted.join(", ")
                    ),
                );
            }
        }
        Some(Fields {
            section,
            span: node.span(),
            entries: out,
        })
    }

    pub(super) fn bad(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        node: &Node,
        message: impl Into<String>,
    ) {
        let section = f.section.clone();
        self.error(&node.span(), &section, Some(key), message);
    }

    pub(super) fn missing(&mut self, f: &Fields<'_>, key: &str, accepted: &str) {
        let section = f.section.clone();
        let span = f.span.clone();
        self.error(
            &span,
            &section,
            Some(key),
            format!("missing required field; accepted: {accepted}"),
        );
    }

    pub(super) fn string<'t>(&mut self, f: &Fields<'t>, key: &str) -> Field<&'t str> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Str(s) => Field::Ok(s.as_str(), n.span()),
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!("expected a string, found {}", kind(other)),
                    );
                    Field::Bad
                }
            },
        }
    }

    pub(super) fn int(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        range: RangeInclusive<i64>,
    ) -> Field<i64> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Int(i) if range.contains(i) => Field::Ok(*i, n.span()),
                Val::Int(i) => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "`{i}` is out of range; accepted: {}..={}",
                            range.start(),
                            range.end()
                        ),
                    );
                    Field::Bad
                }
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "expected an integer, found {} {}; accepted: {}..={}",
                            kind(other),
                            show(other),
                            range.start(),
                            range.end()
                        ),
                    );
                    Field::Bad
                }
            },
        }
    }

    pub(super) fn boolean(&mut self, f: &Fields<'_>, key: &str) -> Field<bool> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Bool(b) => Field::Ok(*b, n.span()),
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "expected a boolean, found {} {}; accepted: true, false",
                            kind(other),
                            show(other)
                        ),
                    );
                    Field::Bad
                }
            },
        }
    }

    /// A non-empty array of distinct integers in `range` (`one`/`many`: what an item is, e.g.
    /// "VLAN id" / "VLAN ids"; `accepted`: what errors say is accepted), every bad item reported.
    pub(super) fn distinct_ints(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        range: RangeInclusive<i64>,
        (one, many): (&str, &str),
        accepted: &str,
    ) -> Field<Vec<i64>> {
        let Some(n) = f.get(key) else {
            return Field::Missing;
        };
        let items = match n.get_ref() {
            Val::Array(items) if !items.is_empty() => items,
            Val::Array(_) => {
                let msg =
                    format!("expected a non-empty array of {many}, found []; accepted: {accepted}");
                self.bad(f, key, n, msg);
                return Field::Bad;
            }
            other => {
                self.bad(
                    f,
                    key,
                    n,
                    format!(
                        "expected a non-empty array of {many}, found {} {}; accepted: {accepted}",
                        kind(other),
                        show(other)
                    ),
                );
                return Field::Bad;
            }
        };
        let mut out = Vec::new();
        let mut ok = true;
        for item in items {
            match item.get_ref() {
                Val::Int(v) if range.contains(v) && !out.contains(v) => out.push(*v),
                other => {
                    self.bad(
                        f,
                        key,
                        item,
                        format!(
                            "{} {} is not a new {one}; accepted: {accepted}",
                            kind(other),
                            show(other)
                        ),
                    );
                    ok = false;
                }
            }
        }
        if ok {
            Field::Ok(out, n.span())
        } else {
            Field::Bad
        }
    }

    /// A MAC address; `unicast` additionally rejects group and all-zero addresses.
    pub(super) fn mac(&mut self, f: &Fields<'_>, key: &str, unicast: bool) -> Field<Mac> {
        let (s, span) = match self.string(f, key) {
            Field::Ok(s, span) => (s, span),
            Field::Missing => return Field::Missing,
            Field::Bad => return Field::Bad,
        };
        let section = f.section.clone();
        match parse_mac(s) {
            None => {
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!("`{s}` is not a MAC address; accepted: {MAC_ACCEPTED}"),
                );
                Field::Bad
            }
            Some(m) if unicast && (m[0] & 1 == 1 || m == [0; 6]) => {
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!(
                        "`{s}` is not a unicast MAC address; accepted: {MAC_ACCEPTED} with the \
                         lowest bit of the first octet clear, not all zero"
                    ),
                );
                Field::Bad
            }
            Some(m) => Field::Ok(m, span),
        }
    }

    /// An array of strings (each with its span); `one_or_many` also accepts a single string.
    pub(super) fn strings<'t>(
        &mut self,
        f: &Fields<'t>,
        key: &str,
        one_or_many: bool,
    ) -> Field<Vec<(&'t str, Range<usize>)>> {
        let Some(n) = f.get(key) else {
            return Field::Missing;
        };
        match n.get_ref() {
            Val::Str(s) if one_or_many => Field::Ok(vec![(s.as_str(), n.span())], n.span()),
            Val::Array(items) => {
                let mut out = Vec::new();
                let mut ok = true;
                for item in items {
                    match item.get_ref() {
                        Val::Str(s) => out.push((s.as_str(), item.span())),
                        other => {
                            self.bad(
                                f,
                                key,
                                item,
                                format!(
                                    "expected a string in the array, found {} {}",
                                    kind(other),
                                    show(other)
                                ),
                            );
                            ok = false;
                        }
                    }
                }
                if ok {
                    Field::Ok(out, n.span())
                } else {
                    Field::Bad
                }
            }
            other => {
                let what = if one_or_many {
                    "a string or an array of strings"
                } else {
                    "an array of strings"
                };
                self.bad(
                    f,
                    key,
                    n,
                    format!("expected {what}, found {} {}", kind(other), show(other)),
                );
                Field::Bad
            }
        }
    }

    /// An IP address (no prefix length).
    pub(super) fn ip(&mut self, f: &Fields<'_>, key: &str) -> Field<IpAddr> {
        let (s, span) = match self.string(f, key) {
            Field::Ok(s, span) => (s, span),
            Field::Missing => return Field::Missing,
            Field::Bad => return Field::Bad,
        };
        match s.parse::<IpAddr>() {
            Ok(ip) => Field::Ok(ip, span),
            Err(_) => {
                let section = f.section.clone();
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!(
                        "`{s}` is not an IP address; accepted: an IPv4 or IPv6 address like \
                         198.18.1.2 or 2001:db8:1::2"
                    ),
                );
                Field::Bad
            }
        }
    }
}
