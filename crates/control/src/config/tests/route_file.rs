//! Config tests of the route file (`route-file`), of the bounded reads of the config and route
//! files, and a measurement of a one-million-line route file (ignored by default).

use super::*;
use std::io::Write;

/// A config with one port (198.18.1.1/24, 2001:db8:1::1/64), a v4 neighbour and `extra`, written
/// with `routes` as routes.txt beside it; returns the directory and the config path.
fn setup(extra: &str, routes: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    let config = format!(
        "route-file = \"routes.txt\"\n\
         [[port]]\nname = \"p0\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\n\
         ip4 = [\"198.18.1.1/24\"]\nip6 = [\"2001:db8:1::1/64\"]\ngenerate = false\n\n\
         [[neighbour]]\nip = \"198.18.1.9\"\nmac = \"02:00:00:00:02:02\"\nport = \"p0\"\n{extra}"
    );
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).unwrap();
    std::fs::write(dir.path().join("routes.txt"), routes).unwrap();
    (dir, path)
}

fn load_issues(path: &Path) -> Vec<Issue> {
    match Config::load(path) {
        Err(ConfigError::Invalid(v)) => v,
        Err(e) => panic!("unexpected error {e}"),
        Ok(c) => panic!("expected errors, got {:?}", c.spec),
    }
}

/// The single problem of a route file holding `routes`: its line and rendering.
#[track_caller]
fn route_error(routes: &str, line: usize, needle: &str) {
    let (dir, path) = setup("", routes);
    let v = load_issues(&path);
    assert_eq!(v.len(), 1, "expected one error, got {v:#?}");
    let label = dir.path().join("routes.txt").display().to_string();
    let shown = v[0].to_string();
    assert!(
        shown.starts_with(&format!("{label}:{line}: ")),
        "not at {label}:{line}: {shown}"
    );
    assert!(shown.contains(needle), "`{needle}` not in {shown}");
}

#[test]
fn route_file_good() {
    let routes = "# routes\n\n198.18.2.0/24 via 198.18.1.2\n\
                  2001:db8:9::/48 via 2001:db8:1::2 2001:db8:1::3  # ECMP\n\
                  \t198.18.3.0/24   drop\r\n0.0.0.0/0 via 198.18.1.9\n::/0 drop";
    let (_dir, path) = setup("", routes);
    let spec = Config::load(&path).unwrap().spec;
    let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    assert_eq!(
        spec.routes4,
        vec![
            RouteSpec {
                prefix: v4("198.18.2.0"),
                len: 24,
                target: RouteTarget::Via(vec![v4("198.18.1.2")]),
            },
            RouteSpec {
                prefix: v4("198.18.3.0"),
                len: 24,
                target: RouteTarget::Drop,
            },
            RouteSpec {
                prefix: v4("0.0.0.0"),
                len: 0,
                target: RouteTarget::Via(vec![v4("198.18.1.9")]),
            },
        ]
    );
    assert_eq!(
        spec.routes6,
        vec![
            RouteSpec {
                prefix: v6("2001:db8:9::"),
                len: 48,
                target: RouteTarget::Via(vec![v6("2001:db8:1::2"), v6("2001:db8:1::3")]),
            },
            RouteSpec {
                prefix: v6("::"),
                len: 0,
                target: RouteTarget::Drop,
            },
        ]
    );
}

#[test]
fn route_file_and_tables_add_up() {
    let (_dir, path) = setup(
        "\n[[route]]\nprefix = \"198.18.7.0/24\"\naction = \"drop\"\n",
        "198.18.8.0/24 drop\n",
    );
    let spec = Config::load(&path).unwrap().spec;
    let prefixes: Vec<String> = spec.routes4.iter().map(|r| r.prefix.to_string()).collect();
    assert_eq!(prefixes, vec!["198.18.7.0", "198.18.8.0"]);
}

#[test]
fn route_file_line_errors() {
    route_error(
        "198.18.2.0/24 drop\n198.18.2.0 drop\n",
        2,
        "`198.18.2.0` has no prefix length",
    );
    route_error(
        "198.18.2.1/24 drop\n",
        1,
        "has host bits set (did you mean 198.18.2.0/24?)",
    );
    route_error(
        "1.2.3.0/33 drop\n",
        1,
        "invalid prefix length `33` (0..=32)",
    );
    route_error(
        "\n\n198.18.2.0/24\n",
        3,
        "a prefix without `via` or `drop`; accepted: PREFIX via",
    );
    route_error(
        "198.18.2.0/24 dorp\n",
        1,
        "`dorp` after the prefix is not `via` or `drop`",
    );
    route_error(
        "198.18.2.0/24 drop now\n",
        1,
        "unexpected `now` after `drop`",
    );
    route_error("198.18.2.0/24 via\n", 1, "`via` without a next hop");
    route_error("198.18.2.0/24 via x\n", 1, "`x` is not an IP address");
    route_error(
        "198.18.2.0/24 via 198.18.5.5\n",
        1,
        "next hop 198.18.5.5 is neither a [[neighbour]] nor on a port's subnet",
    );
    route_error(
        "198.18.2.0/24 via 198.18.1.1\n",
        1,
        "next hop 198.18.1.1 is neither",
    );
    route_error(
        "198.18.2.0/24 via 2001:db8:1::2\n",
        1,
        "next hop 2001:db8:1::2 is IPv6 but the route is IPv4",
    );
    route_error(
        "2001:db8:9::/48 via 2001:db8:1::2 2001:db8:1::2\n",
        1,
        "next hop 2001:db8:1::2 is listed twice",
    );
    route_error(
        "198.18.2.0/24 drop\n# again\n198.18.2.0/24 via 198.18.1.2\n",
        3,
        "duplicate route 198.18.2.0/24: also at line 1; accepted: one route per prefix",
    );
    route_error(
        "2001:db8:9::/48 drop\n2001:db8:9::/48 drop\n2001:db8:9::/64 drop\n",
        2,
        "duplicate route 2001:db8:9::/48: also at line 1",
    );
    route_error(
        "198.18.2.0/24 drop\n\u{ff}\n",
        2,
        "`\u{ff}` has no prefix length",
    );
}

#[test]
fn route_file_not_utf8() {
    let (dir, path) = setup("", "");
    std::fs::write(
        dir.path().join("routes.txt"),
        b"198.18.2.0/24 drop\n\xff\xfe\n",
    )
    .unwrap();
    let v = load_issues(&path);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].line, 2);
    assert!(v[0].message.contains("not UTF-8"), "{}", v[0]);
}

#[test]
fn route_file_duplicate_of_a_table_route() {
    let (_dir, path) = setup(
        "\n[[route]]\nprefix = \"198.18.7.0/24\"\naction = \"drop\"\n",
        "198.18.6.0/24 drop\n198.18.7.0/24 drop\n",
    );
    let v = load_issues(&path);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].line, 2);
    let shown = v[0].to_string();
    assert!(
        shown.contains("duplicate route 198.18.7.0/24: also a [[route]] at ")
            && shown.contains("c.toml:16"),
        "{shown}"
    );
}

#[test]
fn route_file_problems_are_bounded_and_follow_the_config_ones() {
    let routes: String = (0..1000)
        .map(|i| format!("10.{i}.0.0/16 via nowhere\n"))
        .collect();
    let (dir, path) = setup(
        "\n[[route]]\nprefix = \"1.2.3.4/8\"\naction = \"drop\"\n",
        &routes,
    );
    let v = load_issues(&path);
    assert_eq!(v.len(), 1 + 100 + 1, "{:#?}", &v[..3]);
    assert!(v[0].file.ends_with("c.toml") && v[0].line == 16, "{}", v[0]);
    assert_eq!(v[1].line, 1);
    assert_eq!(v[100].line, 100);
    assert!(v[101]
        .message
        .starts_with("900 more problems in this file not shown"));
    assert_eq!(
        v[101].file,
        dir.path().join("routes.txt").display().to_string()
    );
}

#[test]
fn route_file_key_errors() {
    let (dir, path) = setup("", "");
    std::fs::remove_file(dir.path().join("routes.txt")).unwrap();
    let v = load_issues(&path);
    assert_eq!(v.len(), 1, "{v:#?}");
    check_in(&v[0], "c.toml", 1, Some("route-file"), "cannot read");
    assert!(v[0].message.contains("No such file"), "{}", v[0]);
    std::fs::create_dir(dir.path().join("routes.txt")).unwrap();
    let v = load_issues(&path);
    check_in(
        &v[0],
        "c.toml",
        1,
        Some("route-file"),
        "it is a directory; accepted: a regular file of at most 1 GiB",
    );
    one_error("route-file = \"\"\n", 1, Some("route-file"), "empty path");
    one_error(
        "route-file = 3\n",
        1,
        Some("route-file"),
        "expected a string",
    );
    one_error(
        "[dataplane]\nroute-file = \"r.txt\"\n",
        2,
        None,
        "unknown key `route-file` (`route-file` is a top-level key: put it before the first [table])",
    );
}

/// Like `check`, for a file other than FILE.
#[track_caller]
fn check_in(i: &Issue, file_end: &str, line: usize, field: Option<&str>, needle: &str) {
    let shown = i.to_string();
    assert!(i.file.ends_with(file_end), "wrong file in {shown}");
    assert_eq!(i.line, line, "wrong line in {shown}");
    assert_eq!(i.field.as_deref(), field, "wrong field in {shown}");
    assert!(shown.contains(needle), "`{needle}` not in {shown}");
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let (dir, path) = setup("", "");
    let fifo = dir.path().join("routes.txt");
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let v = load_issues(&path);
    check_in(
        &v[0],
        "c.toml",
        1,
        Some("route-file"),
        "it is a FIFO; accepted: a regular file",
    );
    // The config file itself.
    let cfg = dir.path().join("fifo.toml");
    mkfifo(&cfg);
    let e = Config::load(&cfg).unwrap_err().to_string();
    assert!(
        e.contains(
            "fifo.toml: cannot read the config file: it is a FIFO; accepted: a regular \
                    file of at most 64 MiB"
        ),
        "{e}"
    );
    let e = Config::load(Path::new("/dev/null"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("it is a character device"), "{e}");
}

#[test]
fn config_file_size_is_bounded() {
    let dir = TempDir::new();
    let path = dir.path().join("big.toml");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(CONFIG_MAX_BYTES + 1).unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "it has {} bytes; accepted: a regular file of at most 64 MiB",
            CONFIG_MAX_BYTES + 1
        )),
        "{e}"
    );
}

/// Load a route file of one million lines (90% IPv4 /24s, 10% IPv6 /64s) and print the time and
/// the peak RSS. Run: cargo test --release -p vecplane-control -- --ignored million --nocapture
#[test]
#[ignore]
fn route_file_million_lines() {
    let (dir, path) = setup("", "");
    {
        let f = std::fs::File::create(dir.path().join("routes.txt")).unwrap();
        let mut w = std::io::BufWriter::new(f);
        for i in 0u32..1_000_000 {
            if i % 10 == 9 {
                writeln!(
                    w,
                    "2001:db8:{:x}:{:x}::/64 via 2001:db8:1::2",
                    i >> 16,
                    i & 0xffff
                )
                .unwrap();
            } else {
                let a = Ipv4Addr::from((16u32 << 24) + (i << 8));
                writeln!(w, "{a}/24 via 198.18.1.2").unwrap();
            }
        }
    }
    let rss = || {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes one rusage into the buffer it is given.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        // SAFETY: zero-initialised and filled by getrusage.
        unsafe { ru.assume_init() }.ru_maxrss
    };
    let before = rss();
    let t = std::time::Instant::now();
    let c = Config::load(&path).unwrap();
    let took = t.elapsed();
    assert_eq!(c.spec.routes4.len() + c.spec.routes6.len(), 1_000_000);
    let size = std::fs::metadata(dir.path().join("routes.txt"))
        .unwrap()
        .len();
    println!(
        "1M-line route file ({size} bytes): loaded in {took:?}; peak RSS {} MiB (before: {} MiB)",
        rss() / 1024,
        before / 1024
    );
}
