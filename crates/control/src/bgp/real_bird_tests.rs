//! The routes file and the control-socket client against the real BIRD 2 (`/usr/sbin/bird`,
//! Debian `bird2`), in a private network namespace with a TAP as the liveness device: routes
//! appear after `configure`, go when the file drops them, survive a broken file (BIRD keeps its
//! old configuration) and are withdrawn when the TAP closes. Needs root; skipped elsewhere,
//! failed in CI (see `testenv`). BIRD is always killed and its directory removed, also on panic.

use super::bird::{configure, show_route, BirdError};
use super::routes::{render, write_atomically};
use super::BgpConfig;
use crate::testutil::TempDir;
use lb::model::Prefix;
use ports::netns::{self, Netns};
use ports::{TapConfig, TapDevice};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const BIRD: &str = "/usr/sbin/bird";
const T: Duration = Duration::from_secs(5);

pub(crate) fn missing() -> Option<String> {
    if !netns::may_create() {
        return Some("the real-BIRD test needs root (a network namespace, a TAP)".into());
    }
    if !Path::new(BIRD).is_file() {
        return Some(format!(
            "the real-BIRD test needs {BIRD} (Debian package bird2)"
        ));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("the real-BIRD test needs /dev/net/tun".into());
    }
    None
}

/// BIRD running in its own namespace; killed (and its directory removed) on drop.
pub(crate) struct Bird {
    child: Child,
    socket: PathBuf,
    dir: TempDir,
    tap: Option<Arc<TapDevice>>,
    /// The namespace BIRD runs in.
    pub(crate) ns: Netns,
}

impl Drop for Bird {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ip(ns: &Netns, args: &[&str]) {
    let status = netns::run_in(ns, || Command::new("ip").args(args).status())
        .expect("enter the namespace")
        .expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

impl Bird {
    /// Start BIRD with `cfg`'s routes file (empty) included, and `cfg`'s TAP up.
    fn start(cfg: &mut BgpConfig) -> Bird {
        Bird::start_with(cfg, true)
    }

    /// `start`; with `tap` false, no TAP is made (the caller's announcer makes it).
    pub(crate) fn start_with(cfg: &mut BgpConfig, tap: bool) -> Bird {
        let ns = netns::create_private().expect("create a network namespace");
        ip(&ns, &["link", "set", "lo", "up"]);
        let tap = tap.then(|| {
            let mut tap_cfg = TapConfig::new(cfg.interface.clone());
            tap_cfg.netns = Some(ns.clone());
            let tap = TapDevice::open(&tap_cfg).expect("open the TAP");
            ip(&ns, &["link", "set", &cfg.interface, "up"]);
            tap
        });
        let dir = TempDir::new();
        cfg.routes_file = dir.path().join("vecplane.conf");
        cfg.control_socket = dir.path().join("bird.ctl");
        write_atomically(&cfg.routes_file, &render(cfg, &[], SystemTime::now())).unwrap();
        let conf = dir.path().join("bird.conf");
        let text = format!(
            "log \"{}\" all;\nrouter id 198.18.0.1;\nprotocol device {{}}\ninclude \"{}\";\n",
            dir.path().join("bird.log").display(),
            cfg.routes_file.display()
        );
        std::fs::write(&conf, text).unwrap();
        let child = netns::run_in(&ns, || {
            Command::new(BIRD)
                .arg("-f")
                .arg("-c")
                .arg(&conf)
                .arg("-s")
                .arg(&cfg.control_socket)
                .arg("-P")
                .arg(dir.path().join("bird.pid"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        })
        .expect("enter the namespace")
        .expect("start bird");
        let mut bird = Bird {
            child,
            socket: cfg.control_socket.clone(),
            dir,
            tap,
            ns,
        };
        bird.wait_ready();
        bird
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("bird exited with {status}; log:\n{}", self.log());
            }
            match show_route(&self.socket, T, None) {
                Ok(_) => return,
                Err(e) if Instant::now() > deadline => {
                    panic!("bird did not answer within 10 s: {e}; log:\n{}", self.log())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("bird.log")).unwrap_or_default()
    }

    /// Poll `show route protocol NAME all` until `ok` holds (at most 5 s); its last text.
    pub(crate) fn routes_until(&self, protocol: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + T;
        loop {
            let text = show_route(&self.socket, T, Some(protocol)).expect("show route");
            if ok(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{protocol}: unexpected routes after 5 s:\n{text}\nlog:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub(crate) fn prefix(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').expect("a prefix");
    Prefix::new(
        a.parse::<IpAddr>().expect("an address"),
        l.parse().expect("a length"),
    )
    .expect("a canonical prefix")
}

#[test]
fn real_bird_announces_withdraws_and_keeps_old_routes_on_error() {
    if !testenv::can_run(missing()) {
        return;
    }
    let mut cfg = BgpConfig::new("", "");
    cfg.med = Some(10);
    cfg.communities = vec![(65000, 100)];
    cfg.large_communities = vec![(65000, 1, 2)];
    cfg.next_hop4 = Some("198.18.11.2".parse().unwrap());
    cfg.next_hop6 = Some("2001:db8:11::2".parse().unwrap());
    let mut bird = Bird::start(&mut cfg);
    let (a, b, c) = ("198.18.100.1/32", "198.18.100.2/32", "2001:db8:100::2/128");

    // Two IPv4 VIPs and one IPv6 VIP.
    let text = render(&cfg, &[prefix(a), prefix(b), prefix(c)], SystemTime::now());
    write_atomically(&cfg.routes_file, &text).unwrap();
    let reply = configure(&cfg.control_socket, T).unwrap();
    assert!(reply.contains("Reconfigured"), "{reply}");
    let v4 = bird.routes_until("vecplane4", |t| t.contains(a) && t.contains(b));
    for attr in [
        "dev vplbgp0",
        "BGP.med: 10",
        "BGP.community: (65000,100)",
        "BGP.large_community: (65000, 1, 2)",
        "BGP.next_hop: 198.18.11.2",
    ] {
        assert!(v4.contains(attr), "`{attr}` not in\n{v4}");
    }
    let v6 = bird.routes_until("vecplane6", |t| t.contains(c));
    assert!(v6.contains("BGP.next_hop: 2001:db8:11::2"), "{v6}");

    // One VIP left.
    write_atomically(
        &cfg.routes_file,
        &render(&cfg, &[prefix(b)], SystemTime::now()),
    )
    .unwrap();
    configure(&cfg.control_socket, T).unwrap();
    bird.routes_until("vecplane4", |t| !t.contains(a) && t.contains(b));
    bird.routes_until("vecplane6", |t| !t.contains(c));

    // A broken file: BIRD's error comes back and the old routes stay.
    write_atomically(
        &cfg.routes_file,
        "protocol static vecplane4 { ipv4; route ;\n",
    )
    .unwrap();
    let e = configure(&cfg.control_socket, T).unwrap_err();
    match &e {
        BirdError::Refused { code, text, .. } => {
            assert!((8000..10000).contains(code), "{e}");
            assert!(text.contains("vecplane.conf:"), "{e}");
        }
        other => panic!("expected BIRD's refusal, got {other}"),
    }
    std::thread::sleep(Duration::from_millis(200));
    bird.routes_until("vecplane4", |t| t.contains(b));

    // The liveness device closes (as when vecplane dies): BIRD withdraws at once.
    write_atomically(
        &cfg.routes_file,
        &render(&cfg, &[prefix(b)], SystemTime::now()),
    )
    .unwrap();
    configure(&cfg.control_socket, T).unwrap();
    bird.tap = None;
    bird.routes_until("vecplane4", |t| !t.contains(b));
}
