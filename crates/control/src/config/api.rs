//! The `[api]` table: the HTTP API's optional TCP listener and the bearer-token file it requires.
//! Only checks and records the values (relative paths against the config's directory); it never
//! opens a socket or reads the token.

use super::ctx::{Ctx, Field};
use super::value::Node;
use super::{FileKind, FileRef};
use crate::api_config::ApiConfig;
use std::net::SocketAddr;
use std::path::Path;

pub(super) const API_KEYS: &[&str] = &["tcp", "token-file", "allow-remote"];

impl Ctx<'_> {
    /// `[api]`: `tcp = "ADDRESS:PORT"` needs `token-file`, and `allow-remote = true` unless the
    /// address is a loopback one; the token file is checked to exist by `check_files`, like the
    /// pcap files.
    pub(super) fn api(
        &mut self,
        node: &Node,
        base_dir: &Path,
        files: &mut Vec<FileRef>,
    ) -> ApiConfig {
        let mut api = ApiConfig::default();
        let Some(f) = self.fields("[api]".to_string(), Some("api"), node, API_KEYS) else {
            return api;
        };
        self.remember_lines(&f);
        let tcp = match self.string(&f, "tcp") {
            Field::Ok(s, span) => match s.parse::<SocketAddr>() {
                // Port 0: any free port; `vecplane run` prints the one it got.
                Ok(a) => Some((a, span)),
                Err(_) => {
                    self.error(
                        &span,
                        "[api]",
                        Some("tcp"),
                        format!(
                            "`{s}` is not a socket address; accepted: ADDRESS:PORT like \
                             127.0.0.1:8080 or [::1]:8080"
                        ),
                    );
                    None
                }
            },
            Field::Missing | Field::Bad => None,
        };
        let token = match self.string(&f, "token-file") {
            Field::Ok("", span) => {
                self.error(
                    &span,
                    "[api]",
                    Some("token-file"),
                    "empty path; accepted: the path of a file holding the bearer token \
                     (relative to the config file's directory)",
                );
                None
            }
            Field::Ok(s, span) => {
                let path = base_dir.join(s);
                files.push(FileRef {
                    section: "[api]".to_string(),
                    field: "token-file",
                    line: self.line_of(span.start),
                    path: path.clone(),
                    kind: FileKind::Token,
                });
                Some((path, span))
            }
            Field::Missing | Field::Bad => None,
        };
        let allow_remote = match self.boolean(&f, "allow-remote") {
            Field::Ok(b, span) => Some((b, span)),
            Field::Missing | Field::Bad => None,
        };
        if let Some((a, span)) = &tcp {
            if !a.ip().is_loopback() && !allow_remote.as_ref().is_some_and(|(b, _)| *b) {
                let what = if a.ip().is_unspecified() {
                    "every address of this host"
                } else {
                    "a non-loopback address"
                };
                self.error(
                    span,
                    "[api]",
                    Some("tcp"),
                    format!(
                        "`{a}` is {what}: other hosts could reach the API; accepted: a loopback \
                         address like 127.0.0.1:8080 or [::1]:8080, or add allow-remote = true \
                         to [api] to serve other hosts on purpose"
                    ),
                );
            }
        }
        if let (Some((true, span)), None) = (&allow_remote, &tcp) {
            if f.get("tcp").is_none() {
                self.error(
                    span,
                    "[api]",
                    Some("allow-remote"),
                    "allow-remote applies to the TCP listener and there is none; accepted: add \
                     tcp = \"ADDRESS:PORT\", or remove allow-remote",
                );
            }
        }
        match (&tcp, &token) {
            (Some((_, span)), None) if f.get("token-file").is_none() => {
                self.error(
                    span,
                    "[api]",
                    Some("tcp"),
                    "a TCP listener needs a bearer token; accepted: add token-file = \"PATH\" \
                     naming a file that holds the token",
                );
            }
            (None, Some((_, span))) if f.get("tcp").is_none() => {
                self.error(
                    span,
                    "[api]",
                    Some("token-file"),
                    "the token guards the TCP listener and there is none; accepted: add \
                     tcp = \"ADDRESS:PORT\" (like 127.0.0.1:8080), or remove token-file",
                );
            }
            _ => {}
        }
        api.tcp = tcp.map(|(a, _)| a);
        api.allow_remote = allow_remote.is_some_and(|(b, _)| b);
        api.token_file = token.map(|(p, _)| p);
        api
    }
}
