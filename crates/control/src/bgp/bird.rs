//! A client of BIRD 2's control socket (the protocol `birdc` speaks): connect, read the greeting
//! (`0001 BIRD 2.0.12 ready.`), send one command, read its reply. A reply is a sequence of
//! lines: `NNNN-text` (more follows), ` text` (continues the previous code) and a final
//! `NNNN text`. Codes 0xxx report success, 1xxx/2xxx carry table data, 8xxx are run-time errors
//! and 9xxx parse errors. Reads are bounded (line length, line count, total bytes, a deadline)
//! and nothing BIRD sends is trusted: a garbled or truncated reply is an error, never a panic.
//! It sends only the commands of this module (no control characters, one line each); it never
//! edits BIRD's configuration files.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Longest reply line accepted (BIRD's own CLI buffer is smaller).
pub const MAX_LINE: usize = 4096;
/// Most reply lines accepted.
pub const MAX_LINES: usize = 100_000;
/// Most reply bytes accepted.
pub const MAX_BYTES: usize = 8 << 20;

/// One reply of BIRD: the code of its final line and the text of every line (codes stripped,
/// continuation lines kept), in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The final line's code (0..=9999).
    pub code: u16,
    /// Each line's text, without its code and separator.
    pub lines: Vec<String>,
}

impl Reply {
    /// The lines joined with newlines.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// Whether the final code reports success (0xxx).
    pub fn is_success(&self) -> bool {
        self.code < 1000
    }
}

/// Why a conversation with BIRD failed.
#[derive(Debug, Error)]
pub enum BirdError {
    /// The socket could not be reached.
    #[error(
        "cannot connect to BIRD's control socket {}: {source}; is BIRD running, started with \
         `-s {}` (Debian: /run/bird/bird.ctl), and may this process open it?",
        socket.display(), socket.display()
    )]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// The error of connect(2).
        source: io::Error,
    },
    /// Reading or writing the socket failed.
    #[error("BIRD's control socket {}: cannot {op}: {source}", socket.display())]
    Io {
        /// The socket.
        socket: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
    /// BIRD did not answer in time.
    #[error(
        "BIRD's control socket {}: no complete reply to `{command}` within {} ms; is BIRD \
         busy or stuck?",
        socket.display(), after.as_millis()
    )]
    Timeout {
        /// The socket.
        socket: PathBuf,
        /// The command (or "greeting").
        command: String,
        /// The time allowed.
        after: Duration,
    },
    /// BIRD's bytes are not its protocol (garbled, truncated or too long).
    #[error(
        "BIRD's control socket {}: unexpected reply to `{command}`: {detail}; is it BIRD's \
         control socket (`bird -s`)?",
        socket.display()
    )]
    Protocol {
        /// The socket.
        socket: PathBuf,
        /// The command (or "greeting").
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// BIRD answered with an error code (8xxx run-time, 9xxx parse error, or another non-0xxx
    /// final code).
    #[error(
        "BIRD refused `{command}` (code {code}): {text}{}",
        if command == "configure" {
            "; BIRD keeps its previous configuration. Check the file and line it names; \
             bird.conf must include the routes file at its top level"
        } else { "" }
    )]
    Refused {
        /// The command.
        command: String,
        /// BIRD's final code.
        code: u16,
        /// BIRD's text.
        text: String,
    },
    /// The command itself cannot be sent (empty, control characters).
    #[error("not a BIRD command: {0:?}; accepted: one line of printable characters")]
    BadCommand(String),
}

/// Ask BIRD to re-read its configuration (`configure`). Ok with BIRD's text (like "Reading
/// configuration from /etc/bird/bird.conf\nReconfigured") when the final code is 0xxx; a
/// syntax error in any included file is [`BirdError::Refused`] with BIRD's FILE:LINE message,
/// and BIRD goes on with its old configuration.
pub fn configure(socket: &Path, timeout: Duration) -> Result<String, BirdError> {
    request(socket, timeout, "configure").map(|r| r.text())
}

/// `show route [protocol NAME] all`, for tests and diagnostics: BIRD's table text, or an error
/// (an unknown protocol is [`BirdError::Refused`]). `protocol` must be a BIRD symbol.
pub fn show_route(
    socket: &Path,
    timeout: Duration,
    protocol: Option<&str>,
) -> Result<String, BirdError> {
    let command = match protocol {
        None => "show route all".to_string(),
        Some(p) if is_symbol(p) => {
            format!("show route protocol {p} all")
        }
        Some(p) => return Err(BirdError::BadCommand(format!("show route protocol {p}"))),
    };
    request(socket, timeout, &command).map(|r| r.text())
}

/// A plain BIRD symbol: a letter or `_`, then letters, digits and `_`, at most 64 characters.
fn is_symbol(p: &str) -> bool {
    let mut chars = p.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && p.len() <= 64
}

/// Send one `command` and return BIRD's reply; a final code other than 0xxx is
/// [`BirdError::Refused`]. The whole conversation (connect, greeting, reply) takes at most
/// `timeout`.
pub fn request(socket: &Path, timeout: Duration, command: &str) -> Result<Reply, BirdError> {
    if command.trim().is_empty() || command.chars().any(char::is_control) {
        return Err(BirdError::BadCommand(command.to_string()));
    }
    let deadline = Instant::now() + timeout;
    let stream = UnixStream::connect(socket).map_err(|source| BirdError::Connect {
        socket: socket.to_path_buf(),
        source,
    })?;
    let io_err = |op, source| BirdError::Io {
        socket: socket.to_path_buf(),
        op,
        source,
    };
    stream
        .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(|e| io_err("set a timeout", e))?;
    let set_read_timeout = |left: Duration| stream.set_read_timeout(Some(left));
    let mut conv = Conversation {
        reader: BufReader::new(&stream),
        socket,
        deadline,
        timeout,
        set_read_timeout: &set_read_timeout,
    };
    let greeting = conv.reply("greeting")?;
    if greeting.code != 1 {
        return Err(conv.protocol(
            "greeting",
            format!(
                "expected `0001 BIRD ... ready.`, got code {:04} {:?}",
                greeting.code,
                greeting.text()
            ),
        ));
    }
    (&stream)
        .write_all(format!("{command}\n").as_bytes())
        .map_err(|e| io_err("send the command", e))?;
    let reply = conv.reply(command)?;
    if reply.is_success() {
        Ok(reply)
    } else {
        Err(BirdError::Refused {
            command: command.to_string(),
            code: reply.code,
            text: reply.text(),
        })
    }
}

/// The reading side of one connection: `set_read_timeout` bounds each read by what is left
/// of the deadline (a no-op on in-memory readers in tests).
pub(crate) struct Conversation<'a, R> {
    pub(crate) reader: R,
    pub(crate) socket: &'a Path,
    pub(crate) deadline: Instant,
    pub(crate) timeout: Duration,
    pub(crate) set_read_timeout: &'a dyn Fn(Duration) -> io::Result<()>,
}

impl<R: BufRead> Conversation<'_, R> {
    pub(crate) fn protocol(&self, command: &str, detail: String) -> BirdError {
        BirdError::Protocol {
            socket: self.socket.to_path_buf(),
            command: command.to_string(),
            detail,
        }
    }

    /// Read one whole reply (up to its final `NNNN text` line).
    pub(crate) fn reply(&mut self, command: &str) -> Result<Reply, BirdError> {
        let mut lines = Vec::new();
        let mut bytes = 0usize;
        loop {
            let line = self.line(command)?;
            bytes += line.len() + 1;
            if bytes > MAX_BYTES || lines.len() >= MAX_LINES {
                return Err(self.protocol(
                    command,
                    format!("the reply is longer than {MAX_LINES} lines or {MAX_BYTES} bytes"),
                ));
            }
            match parse_line(&line) {
                Some(Line::More(_)) if lines.is_empty() => {
                    return Err(self.protocol(
                        command,
                        "a continuation line came before any coded line".to_string(),
                    ));
                }
                Some(Line::Continues(_, text) | Line::More(text)) => lines.push(text.to_string()),
                Some(Line::Final(code, text)) => {
                    lines.push(text.to_string());
                    return Ok(Reply { code, lines });
                }
                None => {
                    let shown = lossy(line.as_bytes());
                    return Err(self.protocol(command, format!("the line {shown:?} is not BIRD's")));
                }
            }
        }
    }

    /// One line without its newline; the deadline applies to every read.
    fn line(&mut self, command: &str) -> Result<String, BirdError> {
        let mut buf = Vec::new();
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout(command));
            }
            self.set_timeout(left)?;
            let room = (MAX_LINE + 1).saturating_sub(buf.len()) as u64;
            match (&mut self.reader).take(room).read_until(b'\n', &mut buf) {
                Ok(0) if buf.is_empty() => {
                    return Err(self.protocol(
                        command,
                        "BIRD closed the connection before the reply ended".to_string(),
                    ))
                }
                Ok(_) if buf.last() == Some(&b'\n') => break,
                Ok(_) if buf.len() > MAX_LINE => {
                    return Err(
                        self.protocol(command, format!("a line is longer than {MAX_LINE} bytes"))
                    )
                }
                Ok(0) => {
                    return Err(self.protocol(
                        command,
                        format!("the reply ends in the middle of a line: {:?}", lossy(&buf)),
                    ))
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(self.timeout(command))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(BirdError::Io {
                        socket: self.socket.to_path_buf(),
                        op: "read the reply",
                        source,
                    })
                }
            }
        }
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        String::from_utf8(buf).map_err(|e| {
            self.protocol(
                command,
                format!("a line is not UTF-8: {:?}", lossy(e.as_bytes())),
            )
        })
    }

    fn timeout(&self, command: &str) -> BirdError {
        BirdError::Timeout {
            socket: self.socket.to_path_buf(),
            command: command.to_string(),
            after: self.timeout,
        }
    }

    fn set_timeout(&mut self, left: Duration) -> Result<(), BirdError> {
        (self.set_read_timeout)(left).map_err(|source| BirdError::Io {
            socket: self.socket.to_path_buf(),
            op: "set a timeout",
            source,
        })
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned()
}

/// One line of a reply.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// `NNNN-text`: more lines follow.
    Continues(u16, &'a str),
    /// ` text`: continues the previous code.
    More(&'a str),
    /// `NNNN text` (or a bare `NNNN`): the reply's last line.
    Final(u16, &'a str),
}

/// Parse one reply line; None when it is not of BIRD's protocol.
pub(crate) fn parse_line(line: &str) -> Option<Line<'_>> {
    if let Some(text) = line.strip_prefix(' ') {
        return Some(Line::More(text));
    }
    let digits = line.get(..4)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let code: u16 = digits.parse().ok()?;
    let rest = &line[4..];
    match rest.as_bytes().first() {
        None => Some(Line::Final(code, "")),
        Some(b' ') => Some(Line::Final(code, &rest[1..])),
        Some(b'-') => Some(Line::Continues(code, &rest[1..])),
        Some(_) => None,
    }
}
