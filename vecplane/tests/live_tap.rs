//! A TAP port added and removed while vecplane runs, end to end (root; A - R - B over veths with
//! `vecplane run` in R): twice, once by the API and once by a reload, port Rt is added as a TAP
//! device vecplane creates in R, the device is moved into A and addressed there, and A pings an
//! address of B that only the TAP leads to (A -> Rt -> Rb -> B and back); removing the port
//! deletes the device. A reload whose second new port cannot open takes the TAP back. Addresses are 198.18.0.0/15 only; the namespaces go also on failure (and
//! the device with vecplane).

#[path = "support/live.rs"]
mod live;

use live::call;
use netlab::{addr, Addressing, Host, Mode, Topology};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// An address of B that A reaches only through the TAP.
const TARGET: &str = "198.19.8.1";
const MAC_RT: &str = "02:00:00:00:04:01";

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "ping"]))
}

/// The config: Ra, Rb, a route to B's extra address, then `extra`.
fn config(t: &Topology, extra: &str) -> std::path::PathBuf {
    live::config(
        t,
        "live-tap.toml",
        &format!(
            "[[route]]\nprefix = \"198.19.8.0/24\"\nvia = \"{}\"\n\n{extra}",
            addr::B4
        ),
    )
}

/// Move the TAP vecplane made in R into A, address it, route B's extra address through it,
/// and ping that address from A.
fn ping_through_the_tap(t: &Topology, tap: &str, vp: &netlab::Vecplane) {
    let n = t.names();
    t.exec_ok(Host::R, &["ip", "link", "set", tap, "netns", &n.ns_a])
        .expect("TAP into A");
    for args in [
        vec!["ip", "link", "set", tap, "up"],
        vec!["ip", "addr", "add", "198.18.4.2/24", "dev", tap],
        vec![
            "ip",
            "route",
            "add",
            "198.19.8.0/24",
            "via",
            "198.18.4.1",
            "dev",
            tap,
        ],
    ] {
        t.exec_ok(Host::A, &args).expect("A's side of the TAP");
    }
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping", "-n", "-q", "-c", "5", "-i", "0.2", "-W", "2", TARGET,
            ],
            Duration::from_secs(20),
        )
        .expect("ping runs");
    // Answered at all (a loaded machine may take longer than a ping waits for one).
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", vp.log());
}

/// Whether A still has the TAP 2 s on (vecplane closes it when the port goes, and the
/// kernel then deletes it).
fn a_has(t: &Topology, tap: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let there = t
            .exec_timeout(
                Host::A,
                &["ip", "link", "show", tap],
                Duration::from_secs(5),
            )
            .is_ok_and(|o| o.status.success());
        if !there || std::time::Instant::now() > deadline {
            return there;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether R has the TAP (where vecplane creates it).
fn r_has(t: &Topology, tap: &str) -> bool {
    t.exec_timeout(
        Host::R,
        &["ip", "link", "show", tap],
        Duration::from_secs(5),
    )
    .is_ok_and(|o| o.status.success())
}

#[test]
fn a_tap_port_comes_and_goes_by_api_and_by_reload() {
    if !prerequisites() {
        return;
    }
    let t =
        Topology::build_with_prefix("vplt", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let n = t.names().clone();
    t.exec_ok(
        Host::B,
        &["ip", "addr", "add", &format!("{TARGET}/32"), "dev", &n.b0],
    )
    .expect("B's extra address");
    let tap = format!("{}t", n.prefix);
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, ""))
        .expect("vecplane run starts");
    let ep = control::Endpoint::Unix(vp.socket().to_path_buf());

    // By the API.
    let added = call(
        &ep,
        "POST",
        "/v1/interfaces",
        Some(
            json!({"name": "Rt", "driver": "tap", "interface": tap, "mac": MAC_RT,
            "ip4": ["198.18.4.1/24"]}),
        ),
    );
    assert_eq!(added["driver"], "tap", "{added}");
    ping_through_the_tap(&t, &tap, &vp);
    call(&ep, "DELETE", "/v1/interfaces/Rt", None);
    assert!(!a_has(&t, &tap), "the TAP outlived its port");

    // A reload whose second new port cannot open takes the first back: nothing applied.
    config(
        &t,
        &format!(
            "[[port]]\nname = \"Rt\"\ndriver = \"tap\"\ninterface = \"{tap}\"\n\
             mac = \"{MAC_RT}\"\nip4 = [\"198.18.4.1/24\"]\n\n\
             [[port]]\nname = \"Rz\"\ndriver = \"af-packet\"\ninterface = \"{}z\"\n\
             mac = \"02:00:00:00:05:01\"\nip4 = [\"198.18.5.1/24\"]\n",
            n.prefix
        ),
    );
    let r = control::http(&ep, "POST", "/v1/reload", None).expect("reload");
    assert_eq!(r.status, 409, "{}", r.error_message());
    assert!(
        r.error_message().contains("port `Rz`"),
        "{}",
        r.error_message()
    );
    let listed = call(&ep, "GET", "/v1/interfaces", None).to_string();
    assert!(!listed.contains("\"Rt\""), "{listed}");
    assert!(
        !a_has(&t, &tap) && !r_has(&t, &tap),
        "the TAP outlived the refusal"
    );

    // By a reload.
    config(
        &t,
        &format!(
            "[[port]]\nname = \"Rt\"\ndriver = \"tap\"\ninterface = \"{tap}\"\n\
             mac = \"{MAC_RT}\"\nip4 = [\"198.18.4.1/24\"]\n"
        ),
    );
    let r = call(&ep, "POST", "/v1/reload", None);
    assert_eq!(r["ports_added"], json!(["Rt"]), "{r}");
    ping_through_the_tap(&t, &tap, &vp);
    config(&t, "");
    let r = call(&ep, "POST", "/v1/reload", None);
    assert_eq!(r["ports_removed"], json!(["Rt"]), "{r}");
    assert!(!a_has(&t, &tap), "the TAP outlived its port");
    vp.stop().expect("vecplane stops cleanly");
}
