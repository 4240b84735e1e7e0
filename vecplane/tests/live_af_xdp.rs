//! An AF_XDP port added and removed while vecplane runs, end to end (root; A - R - B over veths
//! with `vecplane run` in R, and a third veth from R to B): four times, port Rx is added as
//! AF_XDP on the third veth, A pings an address of B routed through it (its transmit ring
//! carries the pings, its receive ring B's ARP answers), and it is removed. What the socket
//! lent the kernel (its fill ring: thousands of buffers) comes back each time: the worker's free
//! buffers return to where they were, so the pool (8,192 buffers) never runs dry. Addresses
//! are 198.18.0.0/15 only; the namespaces go also on failure.

#[path = "support/live.rs"]
mod live;

use live::{call, third_link, MAC_RC};
use netlab::{Addressing, Host, Mode, Topology};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// An address of B reached only through Rx while it exists.
const TARGET: &str = "198.19.6.1";
const ROUTE: &str = "198.19.6.0/24";
const ROUNDS: usize = 4;

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "ping"]))
}

/// Free buffers in worker 0's pool (`show runtime`).
fn pool_free(vp: &netlab::Vecplane) -> u64 {
    let v = vp.request("show runtime", true).expect("show runtime").data;
    v.unwrap_or_default()["workers"][0]["pool_free"]
        .as_u64()
        .unwrap_or(0)
}

/// The free buffers once they stop changing (the worker counts them every few rounds).
fn settled_pool_free(vp: &netlab::Vecplane, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = pool_free(vp);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = pool_free(vp);
        if (now == last && now >= at_least) || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[test]
fn an_af_xdp_port_comes_and_goes_and_gives_its_buffers_back() {
    if !prerequisites() {
        return;
    }
    let t =
        Topology::build_with_prefix("vplx", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let rc = third_link(&t, &format!("{TARGET}/32"));
    let vp = t
        .start_vecplane(Path::new(BIN), &live::config(&t, "live-af-xdp.toml", ""))
        .expect("vecplane run starts");
    let ep = control::Endpoint::Unix(vp.socket().to_path_buf());
    let before = settled_pool_free(&vp, 0);
    assert!(before > 4096, "free buffers at start: {before}");
    for round in 0..ROUNDS {
        let added = call(
            &ep,
            "POST",
            "/v1/interfaces",
            Some(
                json!({"name": "Rx", "driver": "af-xdp", "interface": rc, "mac": MAC_RC,
                "ip4": ["198.18.3.1/24"]}),
            ),
        );
        assert_eq!(added["driver"], "af-xdp", "{added}");
        let lent = before.saturating_sub(settled_pool_free(&vp, 0));
        call(
            &ep,
            "PUT",
            &format!("/v1/routes/{ROUTE}"),
            Some(json!({"via": ["198.18.3.2"]})),
        );
        let out = t
            .exec_timeout(
                Host::A,
                &[
                    "ping", "-n", "-q", "-c", "5", "-i", "0.2", "-W", "2", TARGET,
                ],
                Duration::from_secs(20),
            )
            .expect("ping runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // Answered at all (a loaded machine may take longer than a ping waits for one).
        assert!(out.status.success(), "round {round}: {text}\n{}", vp.log());
        call(&ep, "DELETE", &format!("/v1/routes/{ROUTE}"), None);
        call(&ep, "DELETE", "/v1/interfaces/Rx", None);
        let after = settled_pool_free(&vp, before);
        assert!(
            after >= before,
            "round {round}: {after} buffers free after the port went, {before} before it came \
             ({lent} lent to the kernel while it ran)"
        );
        assert!(lent > 0, "round {round}: the socket lent nothing");
    }
    vp.stop().expect("vecplane stops cleanly");
}
