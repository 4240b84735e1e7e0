//! Tests of the BIRD control-socket client: reply parsing against crafted replies, and whole
//! conversations with a fake BIRD on a Unix socket in a temporary directory.

use super::bird::{
    configure, parse_line, request, show_route, BirdError, Conversation, Line, Reply, MAX_LINE,
};
use crate::testutil::TempDir;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn read(bytes: &[u8]) -> Result<Reply, BirdError> {
    let noop = |_: Duration| Ok(());
    let mut c = Conversation {
        reader: BufReader::new(bytes),
        socket: Path::new("/test/bird.ctl"),
        deadline: Instant::now() + Duration::from_secs(5),
        timeout: Duration::from_secs(5),
        set_read_timeout: &noop,
    };
    c.reply("configure")
}

#[test]
fn lines() {
    assert_eq!(
        parse_line("0001 BIRD 2.0.12 ready."),
        Some(Line::Final(1, "BIRD 2.0.12 ready."))
    );
    assert_eq!(
        parse_line("1007-Table master4:"),
        Some(Line::Continues(1007, "Table master4:"))
    );
    assert_eq!(
        parse_line(" \tdev vplbgp0"),
        Some(Line::More("\tdev vplbgp0"))
    );
    assert_eq!(parse_line("0000 "), Some(Line::Final(0, "")));
    assert_eq!(parse_line("0000"), Some(Line::Final(0, "")));
    for bad in ["", "abc", "12 x", "00a1 x", "0001x", "+001 x", "١٢٣٤ x"] {
        assert_eq!(parse_line(bad), None, "{bad:?}");
    }
}

#[test]
fn success_reply() {
    let r =
        read(b"0002-Reading configuration from /etc/bird/bird.conf\n0003 Reconfigured\n").unwrap();
    assert_eq!(r.code, 3);
    assert!(r.is_success());
    assert_eq!(
        r.text(),
        "Reading configuration from /etc/bird/bird.conf\nReconfigured"
    );
}

#[test]
fn multi_line_reply() {
    let r = read(
        b"1007-Table master4:\n 198.18.100.1/32      unicast [vecplane4 02:13:07.466] * (200)\n \
          \tdev vplbgp0\n1008-\tType: static univ\n1012-\tBGP.med: 10\n \tBGP.community: \
          (65000,100)\n0000 \n",
    )
    .unwrap();
    assert_eq!(r.code, 0);
    assert_eq!(r.lines.len(), 7);
    assert_eq!(
        r.lines[1],
        "198.18.100.1/32      unicast [vecplane4 02:13:07.466] * (200)"
    );
    assert!(r.text().contains("BGP.community: (65000,100)"));
}

#[test]
fn syntax_error_reply() {
    let r = read(
        b"0002-Reading configuration from /etc/bird/bird.conf\n8002 /etc/bird/vecplane.conf:1:72 \
          syntax error, unexpected ';'\n",
    )
    .unwrap();
    assert_eq!(r.code, 8002);
    assert!(!r.is_success());
    assert!(r
        .text()
        .ends_with("vecplane.conf:1:72 syntax error, unexpected ';'"));
}

#[test]
fn truncated_and_garbage_replies() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"0002-Reading configuration\n",
            "closed the connection before the reply ended",
        ),
        (b"", "closed the connection"),
        (
            b"0002-Reading\n0003 Reconfig",
            "ends in the middle of a line",
        ),
        (b"HTTP/1.1 200 OK\r\n", "is not BIRD's"),
        (
            b" orphan continuation\n0000 \n",
            "continuation line came before any coded line",
        ),
        (b"0003 \xff\xfe\n", "not UTF-8"),
    ];
    for (bytes, needle) in cases {
        let e = read(bytes).unwrap_err();
        assert!(matches!(e, BirdError::Protocol { .. }), "{e:?}");
        let shown = e.to_string();
        assert!(shown.contains(needle), "`{needle}` not in {shown}");
        assert!(shown.contains("/test/bird.ctl"), "{shown}");
    }
    let long = format!("0000 {}\n", "x".repeat(MAX_LINE));
    let e = read(long.as_bytes()).unwrap_err();
    assert!(e.to_string().contains("longer than 4096 bytes"), "{e}");
    // A line of exactly MAX_LINE bytes is fine.
    let fits = format!("0000 {}\n", "x".repeat(MAX_LINE - 5));
    assert_eq!(read(fits.as_bytes()).unwrap().code, 0);
}

/// A fake BIRD: serves each connection by sending `greeting`, reading one command line and
/// answering `reply(command)`; returns the commands it got.
struct Fake {
    _dir: TempDir,
    socket: PathBuf,
    thread: Option<JoinHandle<Vec<String>>>,
}

impl Fake {
    fn new(
        connections: usize,
        greeting: &'static [u8],
        reply: impl Fn(&str) -> Vec<u8> + Send + 'static,
    ) -> Fake {
        let dir = TempDir::new();
        let socket = dir.path().join("bird.ctl");
        let listener = UnixListener::bind(&socket).unwrap();
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..connections {
                let (mut s, _) = listener.accept().unwrap();
                s.write_all(greeting).unwrap();
                let mut line = String::new();
                let mut r = BufReader::new(s.try_clone().unwrap());
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let cmd = line.trim_end().to_string();
                let _ = s.write_all(&reply(&cmd));
                got.push(cmd);
                // Let the client close first, as BIRD keeps the connection open.
                let mut rest = Vec::new();
                let _ = r.read_to_end(&mut rest);
            }
            got
        });
        Fake {
            _dir: dir,
            socket,
            thread: Some(thread),
        }
    }

    fn commands(mut self) -> Vec<String> {
        self.thread.take().unwrap().join().unwrap()
    }
}

const GREETING: &[u8] = b"0001 BIRD 2.0.12 ready.\n";
const T: Duration = Duration::from_secs(5);

#[test]
fn configure_against_a_fake_bird() {
    let fake = Fake::new(2, GREETING, |cmd| match cmd {
        "configure" => {
            b"0002-Reading configuration from /etc/bird/bird.conf\n0003 Reconfigured\n".to_vec()
        }
        _ => b"1007-Table master4:\n 198.18.100.1/32 unicast [vecplane4] * (200)\n0000 \n".to_vec(),
    });
    let text = configure(&fake.socket, T).unwrap();
    assert!(text.ends_with("Reconfigured"), "{text}");
    let routes = show_route(&fake.socket, T, Some("vecplane4")).unwrap();
    assert!(routes.contains("198.18.100.1/32"), "{routes}");
    assert_eq!(
        fake.commands(),
        ["configure", "show route protocol vecplane4 all"]
    );
}

#[test]
fn refused_configure_carries_birds_text() {
    let fake = Fake::new(1, GREETING, |_| {
        b"0002-Reading configuration from /etc/bird/bird.conf\n8002 /etc/bird/vecplane.conf:3:9 \
          syntax error, unexpected '{'\n"
            .to_vec()
    });
    let e = configure(&fake.socket, T).unwrap_err();
    let shown = e.to_string();
    assert!(matches!(e, BirdError::Refused { code: 8002, .. }), "{e:?}");
    assert!(shown.contains("vecplane.conf:3:9 syntax error"), "{shown}");
    assert!(
        shown.contains("keeps its previous configuration"),
        "{shown}"
    );
    fake.commands();
}

#[test]
fn bad_greeting_and_no_bird() {
    let fake = Fake::new(1, b"0013 Daemon is up and running\n", |_| Vec::new());
    let e = configure(&fake.socket, T).unwrap_err();
    assert!(
        e.to_string().contains("expected `0001 BIRD ... ready.`"),
        "{e}"
    );
    drop(fake);
    let dir = TempDir::new();
    let e = configure(&dir.path().join("none.ctl"), T).unwrap_err();
    assert!(matches!(e, BirdError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("is BIRD running"), "{e}");
}

#[test]
fn a_silent_bird_times_out() {
    let dir = TempDir::new();
    let socket = dir.path().join("bird.ctl");
    let _listener = UnixListener::bind(&socket).unwrap();
    // The kernel accepts the connection into the backlog; nobody ever writes.
    let start = Instant::now();
    let e = configure(&socket, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(e, BirdError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("within 200 ms"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn commands_are_one_clean_line() {
    let p = Path::new("/nonexistent/bird.ctl");
    for bad in ["", "  ", "configure\nshutdown", "show\0route"] {
        assert!(
            matches!(request(p, T, bad), Err(BirdError::BadCommand(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(
        show_route(p, T, Some("x; shutdown")),
        Err(BirdError::BadCommand(_))
    ));
}
