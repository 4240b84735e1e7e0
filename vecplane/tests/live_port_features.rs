//! Features of ports added at run time, end to end (root; A - R - B over veths with
//! `vecplane run` in R, IPFIX configured, and a third veth from R to B): a reload adds port Rc
//! with `features = { output = ["ipfix"] }` and IPFIX meters the pings A sends through it; a
//! reload removes it, and the port the API adds on the same veth after the id quarantine gets
//! the same id but no feature (IPFIX meters nothing of it) until `POST /v1/features` enables
//! one. Addresses are 198.18.0.0/15 only; the namespaces (with the third veth) are deleted also
//! when the test fails.

#[path = "support/live.rs"]
mod live;

use live::{call, ipfix_metered as metered, third_link, MAC_RC};
use netlab::{Addressing, Host, Mode, Topology};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// An address of B reached only through Rc while it exists.
const RC_TARGET: &str = "198.19.7.1";
const RC_ROUTE: &str = "198.19.7.0/24";
/// Pings per check.
const PINGS: u64 = 20;

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "ping"]))
}

/// Write the config: IPFIX (its collector a closed port in R), Ra and Rb, then `extra`.
fn config(t: &Topology, extra: &str) -> std::path::PathBuf {
    live::config(
        t,
        "live-port-features.toml",
        &format!("[ipfix]\ncollectors = [\"127.0.0.1:4739\"]\n\n{extra}"),
    )
}

/// The ports IPFIX is enabled on, on the output arc (`show features`).
fn ipfix_on_output(vp: &netlab::Vecplane) -> Value {
    let v = vp
        .request("show features", true)
        .expect("show features")
        .data;
    let arcs = v.unwrap_or_default()["arcs"].clone();
    arcs.as_array()
        .into_iter()
        .flatten()
        .find(|a| a["arc"] == "output")
        .and_then(|a| a["features"].as_array().cloned())
        .into_iter()
        .flatten()
        .find(|f| f["feature"] == "ipfix")
        .map_or(Value::Null, |f| f["enabled_on"].clone())
}

/// Rc's id, if it runs.
fn rc_id(ep: &control::Endpoint) -> Option<u64> {
    let listed = call(ep, "GET", "/v1/interfaces", None);
    listed["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "Rc")
        .and_then(|p| p["index"].as_u64())
}

/// Route to B's address behind Rc, send PINGS pings from A through it, take the route away;
/// returns how many IPFIX metered meanwhile.
fn pings_through_rc(t: &Topology, vp: &netlab::Vecplane, ep: &control::Endpoint) -> u64 {
    let route = format!("/v1/routes/{RC_ROUTE}");
    call(ep, "PUT", &route, Some(json!({"via": ["198.18.3.2"]})));
    let before = metered(vp);
    let count = PINGS.to_string();
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping", "-n", "-q", "-c", &count, "-i", "0.05", "-W", "1", RC_TARGET,
            ],
            Duration::from_secs(20),
        )
        .expect("ping runs");
    assert!(
        out.status.success(),
        "no ping answered through Rc: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        vp.log()
    );
    let got = metered(vp) - before;
    call(ep, "DELETE", &route, None);
    got
}

#[test]
fn a_port_added_at_run_time_has_the_features_it_is_given_and_no_others() {
    if !prerequisites() {
        return;
    }
    let t =
        Topology::build_with_prefix("vplf", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let rc = third_link(&t, &format!("{RC_TARGET}/32"));
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, ""))
        .expect("vecplane run starts");
    let ep = control::Endpoint::Unix(vp.socket().to_path_buf());
    let rc_port = json!({"name": "Rc", "driver": "af-packet", "interface": rc, "mac": MAC_RC,
        "ip4": ["198.18.3.1/24"]});

    // A reload adds Rc with IPFIX on its output.
    config(
        &t,
        &format!(
            "[[port]]\nname = \"Rc\"\ndriver = \"af-packet\"\ninterface = \"{rc}\"\n\
             mac = \"{MAC_RC}\"\nip4 = [\"198.18.3.1/24\"]\nfeatures = {{ output = [\"ipfix\"] }}\n"
        ),
    );
    let r = call(&ep, "POST", "/v1/reload", None);
    assert_eq!(r["ports_added"], json!(["Rc"]), "{r}");
    assert!(
        r["policies_changed"].to_string().contains("port-features"),
        "{r}"
    );
    let id = rc_id(&ep).expect("Rc runs");
    assert_eq!(ipfix_on_output(&vp), json!(["Rc"]));
    let got = pings_through_rc(&t, &vp, &ep);
    assert!(got >= PINGS, "IPFIX metered {got} of {PINGS} pings on Rc");

    // A reload removes it, and its feature with it.
    config(&t, "");
    let r = call(&ep, "POST", "/v1/reload", None);
    assert_eq!(r["ports_removed"], json!(["Rc"]), "{r}");
    assert_eq!(ipfix_on_output(&vp), json!([]));

    // After the quarantine the API's Rc gets the same id, and nothing enabled.
    std::thread::sleep(Duration::from_millis(1200));
    call(&ep, "POST", "/v1/interfaces", Some(rc_port));
    assert_eq!(rc_id(&ep), Some(id), "the id is given again");
    assert_eq!(ipfix_on_output(&vp), json!([]));
    assert_eq!(pings_through_rc(&t, &vp, &ep), 0, "Rc has no feature");

    // The features API enables one on it.
    let change = json!({"changes": [{"port": "Rc", "feature": "ipfix", "arc": "output"}]});
    let r = call(&ep, "POST", "/v1/features", Some(change));
    assert_eq!(r["changed"], 1, "{r}");
    let got = pings_through_rc(&t, &vp, &ep);
    assert!(got >= PINGS, "IPFIX metered {got} of {PINGS} pings on Rc");
    call(&ep, "DELETE", "/v1/interfaces/Rc", None);
    vp.stop().expect("vecplane stops cleanly");
}
