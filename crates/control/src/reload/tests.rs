//! Reload: a changed file applied as one version; a bad line or a non-live change applies
//! nothing and says where or what.

use super::*;
use crate::testutil::TempDir;

const BASE: &str = r#"
[dataplane]
buffers = 4096

[[port]]
name = "in0"
driver = "pcap"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]

[[port]]
name = "out0"
driver = "pcap"
mac = "02:00:00:00:02:01"
ip4 = ["198.18.2.1/24"]

[[neighbour]]
ip = "198.18.2.2"
mac = "02:00:00:00:02:02"
port = "out0"
"#;

/// Write the config: BASE with `buffers` and `routes`.
fn write(dir: &TempDir, routes: &str, buffers: &str) -> PathBuf {
    let p = dir.path().join("vp.toml");
    let base = if buffers.is_empty() {
        BASE.to_string()
    } else {
        BASE.replace("buffers = 4096", &format!("buffers = {buffers}"))
    };
    std::fs::write(&p, format!("{base}{routes}")).expect("write config");
    p
}

fn route(prefix: &str, via: &str) -> String {
    format!("\n[[route]]\nprefix = \"{prefix}\"\nvia = \"{via}\"\n")
}

fn start(path: &Path) -> (Reloader, Arc<Mutex<Routing>>) {
    let c = Config::load(path).expect("valid");
    let routing = Arc::new(Mutex::new(
        Routing::without_workers(&c.spec).expect("routing"),
    ));
    (
        Reloader::new(path, c.clone(), routing.clone(), LivePolicies::new(&c.spec)),
        routing,
    )
}

fn has(r: &Arc<Mutex<Routing>>, prefix: &str) -> bool {
    let (ip, len) = crate::routes_api::parse_prefix(prefix).expect("prefix");
    dataplane::build::lock(r).route(ip, len).is_some()
}

#[test]
fn a_changed_file_is_applied_as_one_version() {
    let d = TempDir::new();
    let p = write(
        &d,
        &(route("198.19.1.0/24", "198.18.2.2") + &route("198.19.2.0/24", "198.18.2.2")),
        "",
    );
    let (reloader, routing) = start(&p);
    write(
        &d,
        &(route("198.19.2.0/24", "198.18.2.9") + &route("198.19.3.0/24", "198.18.2.2")),
        "",
    );
    let answer = reloader.reload().expect("reloaded");
    assert_eq!(answer["version"], 1, "{answer}");
    assert_eq!(answer["routes_set"], 2, "{answer}");
    assert_eq!(answer["routes_deleted"], 1, "{answer}");
    assert!(!has(&routing, "198.19.1.0/24"));
    assert!(has(&routing, "198.19.3.0/24"));
    // Unchanged file: nothing to do, same version.
    assert_eq!(reloader.reload().expect("again")["changes"], 0);
}

#[test]
fn a_bad_line_or_a_non_live_change_applies_nothing() {
    let d = TempDir::new();
    let p = write(&d, &route("198.19.1.0/24", "198.18.2.2"), "");
    let (reloader, routing) = start(&p);
    write(
        &d,
        &(route("198.19.5.0/24", "198.18.2.2")
            + "\n[[route]]\nprefix = \"198.19.6.0/33\"\nvia = \"198.18.2.2\"\n"),
        "",
    );
    let e = reloader.reload().expect_err("bad line").to_string();
    assert!(e.contains("vp.toml:") && e.contains("198.19.6.0/33"), "{e}");
    assert!(!has(&routing, "198.19.5.0/24") && has(&routing, "198.19.1.0/24"));
    write(&d, &route("198.19.5.0/24", "198.18.2.2"), "8192");
    let e = reloader.reload().expect_err("not live");
    assert!(
        matches!(e, ReloadError::NotLive { .. }) && e.to_string().contains("buffers"),
        "{e}"
    );
    // A next hop no port reaches: refused by the tables, nothing applied.
    write(
        &d,
        &(route("198.19.5.0/24", "198.18.2.2") + &route("198.19.7.0/24", "203.0.113.1")),
        "",
    );
    let e = reloader.reload();
    assert!(e.is_err(), "{e:?}");
    assert!(!has(&routing, "198.19.5.0/24"));
    assert_eq!(dataplane::build::lock(&routing).version(), 0);
}

/// A port added with routes in the same reload is refused (make before break), and so is
/// any port change where no port control runs (tools, tests); nothing is applied.
#[test]
fn ports_change_alone_and_only_where_they_can() {
    let d = TempDir::new();
    let p = write(&d, "", "");
    let (reloader, routing) = start(&p);
    let port = "\n[[port]]\nname = \"m0\"\ndriver = \"memory\"\nmac = \"02:00:00:00:03:01\"\n\
                generate = false\nip4 = [\"198.18.3.1/24\"]\n";
    write(
        &d,
        &format!("{port}{}", route("198.19.5.0/24", "198.18.3.2")),
        "",
    );
    let e = reloader.reload().expect_err("ports and routes together");
    assert!(
        matches!(e, ReloadError::NotLive { .. })
            && e.to_string()
                .contains("change the ports in one reload and the routes in another"),
        "{e}"
    );
    write(&d, port, "");
    let e = reloader.reload().expect_err("no port control");
    assert!(
        e.to_string()
            .contains("this data plane cannot change its ports while it runs"),
        "{e}"
    );
    assert_eq!(dataplane::build::lock(&routing).version(), 0);
}

#[test]
fn policies_change_live_and_only_with_the_rest() {
    let d = TempDir::new();
    let p = write(&d, &route("198.19.1.0/24", "198.18.2.2"), "");
    let c = Config::load(&p).expect("valid");
    let routing = Arc::new(Mutex::new(
        Routing::without_workers(&c.spec).expect("routing"),
    ));
    let settings: Vec<_> = (0..2)
        .map(|_| {
            Arc::new(dataplane::idle::PollSetting::new(
                dataplane::PollMode::Adaptive,
                1000,
            ))
        })
        .collect();
    let policies = LivePolicies {
        poll: settings.clone(),
        ..LivePolicies::new(&c.spec)
    };
    let icmp = policies.icmp.clone();
    let neighbour = policies.neighbour.clone();
    let age = policies.bridge_age_seconds.clone();
    let reloader = Reloader::new(&p, c, routing.clone(), policies);
    let with_poll = |poll: &str, routes: &str| {
        let text = write(&d, routes, "").display().to_string();
        let body = std::fs::read_to_string(&text).expect("read");
        std::fs::write(
            &text,
            body.replace("buffers = 4096", &format!("buffers = 4096\n{poll}")),
        )
        .expect("write");
    };
    // One bad route and a poll change: nothing applied, the workers keep adaptive.
    with_poll(
        "poll-mode = \"busy\"",
        &route("198.19.7.0/24", "203.0.113.1"),
    );
    assert!(reloader.reload().is_err());
    assert!(settings
        .iter()
        .all(|s| s.get() == (dataplane::PollMode::Adaptive, 1000)));
    // Good: both workers busy, and the answer says so.
    with_poll(
        "poll-mode = \"busy\"\npoll-sleep-max-us = 200\nicmp-errors-per-second = 7\n\
         icmp-errors-burst = 3\nneighbour-gc-seconds = 45\nbridge-age-seconds = 9",
        &route("198.19.1.0/24", "198.18.2.2"),
    );
    let answer = reloader.reload().expect("reloaded");
    assert_eq!(
        answer["policies_changed"],
        json!([
            "poll-mode",
            "neighbour-timers",
            "bridge-age-seconds",
            "icmp-errors"
        ]),
        "{answer}"
    );
    assert_eq!(icmp.get(), (7, 3));
    assert_eq!(neighbour.get().1, 45);
    assert_eq!(age.load(std::sync::atomic::Ordering::Relaxed), 9);
    assert_eq!(settings[0].get(), (dataplane::PollMode::Busy, 200));
    assert_eq!(settings[1].get(), (dataplane::PollMode::Busy, 200));
}

#[test]
fn a_port_mtu_changes_live() {
    let d = TempDir::new();
    let p = write(&d, &route("198.19.1.0/24", "198.18.2.2"), "");
    let c = Config::load(&p).expect("valid");
    let routing = Arc::new(Mutex::new(
        Routing::without_workers(&c.spec).expect("routing"),
    ));
    let policies = LivePolicies::new(&c.spec);
    let mtus = policies.port_mtus.clone();
    let reloader = Reloader::new(&p, c, routing.clone(), policies);
    let text = std::fs::read_to_string(&p).expect("read");
    std::fs::write(
        &p,
        text.replace(
            "ip4 = [\"198.18.2.1/24\"]",
            "ip4 = [\"198.18.2.1/24\"]\nmtu = 1280",
        ),
    )
    .expect("write");
    let answer = reloader.reload().expect("reloaded");
    assert_eq!(answer["policies_changed"], json!(["mtu"]), "{answer}");
    assert_eq!((mtus.get(0), mtus.get(1)), (1500, 1280));
    // The static neighbour on out0 was republished with it.
    assert!(answer["version"].as_u64().unwrap_or(0) >= 1, "{answer}");
}

#[test]
fn port_addresses_change_live_alone_and_keep_next_hops_reachable() {
    let d = TempDir::new();
    let p = write(&d, &route("198.19.1.0/24", "198.18.2.9"), "");
    let c = Config::load(&p).expect("valid");
    let routing = Arc::new(Mutex::new(
        Routing::without_workers(&c.spec).expect("routing"),
    ));
    let policies = LivePolicies::new(&c.spec);
    let addrs = policies.port_addrs.clone();
    let reloader = Reloader::new(&p, c, routing.clone(), policies);
    let base = std::fs::read_to_string(&p).expect("read");
    let out0 = "ip4 = [\"198.18.2.1/24\"]";
    // A second prefix on out0: live.
    let two = base.replace(out0, "ip4 = [\"198.18.2.1/24\", \"198.18.5.1/24\"]");
    std::fs::write(&p, &two).expect("write");
    let answer = reloader.reload().expect("reloaded");
    assert_eq!(answer["policies_changed"], json!(["addresses"]), "{answer}");
    assert_eq!(
        dataplane::build::lock(&routing)
            .port_addresses(1)
            .map(<[_]>::len),
        Some(2)
    );
    let g = addrs.generation();
    assert!(g > 0);
    // Addresses and routes in one reload: refused, nothing applied.
    let three = base.replace(
        out0,
        "ip4 = [\"198.18.2.1/24\", \"198.18.5.1/24\", \"198.18.6.1/24\"]",
    );
    std::fs::write(
        &p,
        format!("{three}{}", route("198.19.2.0/24", "198.18.6.9")),
    )
    .expect("write");
    let e = reloader.reload().expect_err("together");
    assert!(e.to_string().contains("in one reload"), "{e}");
    assert!(!has(&routing, "198.19.2.0/24"));
    assert_eq!(addrs.generation(), g);
    // Dropping the prefix a route's next hop (198.18.2.9) lives in: the file is refused (the
    // routing tables refuse the same for routes added through the API).
    std::fs::write(&p, base.replace(out0, "ip4 = [\"198.18.5.1/24\"]")).expect("write");
    let e = reloader.reload().expect_err("stranded next hop");
    assert!(e.to_string().contains("198.18.2.9"), "{e}");
    assert_eq!(
        dataplane::build::lock(&routing)
            .port_addresses(1)
            .map(<[_]>::len),
        Some(2),
        "nothing changed"
    );
}

#[test]
fn reload_replaces_the_lb_state_and_a_refusal_applies_nothing() {
    let dir = TempDir::new();
    let lb = |servers: &str, extra: &str| {
        format!(
            "\n[lb]\nlines = [\"lb vip 198.18.9.1/32 protocol tcp port 80 encap l3dsr dscp 23\", \
             \"lb as 198.18.9.1/32 protocol tcp port 80 {servers}\"{extra}]\n"
        )
    };
    let p = write(&dir, &lb("198.18.2.5 198.18.2.6", ""), "");
    let c = Config::load(&p).expect("valid");
    let control = Arc::new(dataplane::lb::LbControl::without_workers(
        c.spec.lb.clone().expect("lb").state,
        vec!["in0".into(), "out0".into()],
        1,
    ));
    let (reloader, routing) = start(&p);
    let reloader = reloader.with_lb(control.clone());
    // A server added through the API meanwhile is removed by the reload (the file rules).
    control
        .apply(
            &lb::cli::parse_lines("lb as 198.18.9.1/32 protocol tcp port 80 198.18.2.8")
                .expect("line"),
        )
        .expect("api change");
    std::fs::write(
        &p,
        format!(
            "{BASE}{}{}",
            route("198.19.0.0/16", "198.18.2.2"),
            lb("198.18.2.6 weight 4 198.18.2.7", "")
        ),
    )
    .expect("write");
    let a = reloader.reload().expect("reloaded");
    assert!(
        a["policies_changed"]
            .as_array()
            .expect("list")
            .iter()
            .any(|p| p == "lb"),
        "{a}"
    );
    assert!(has(&routing, "198.19.0.0/16"));
    let st = control.state();
    let v = st.vips().next().expect("VIP");
    let w = |a: &str| st.slot(v.servers[&a.parse().expect("ip")]);
    assert_eq!(w("198.18.2.6").weight, 4);
    assert_eq!(w("198.18.2.7").state, lb::model::AsState::Active);
    assert_eq!(w("198.18.2.5").state, lb::model::AsState::Removed);
    assert_eq!(w("198.18.2.8").state, lb::model::AsState::Removed);
    // A file with a bad route and an LB change: nothing applied, the LB neither.
    let version = control.version();
    std::fs::write(
        &p,
        format!(
            "{BASE}{}{}",
            route("198.19.0.0/16", "198.18.7.7"),
            lb("198.18.2.6 weight 9", "")
        ),
    )
    .expect("write");
    reloader.reload().expect_err("bad route");
    assert_eq!(control.version(), version);
    assert_eq!(control.state(), st);
}

/// `[lb]` added by a reload takes over the load balancer (a VIP the API added and the file
/// lacks goes; the file's VIP is routed to `lb`); removing `[lb]` is refused while a VIP
/// exists, applying nothing, and accepted once none does.
#[test]
fn lb_is_added_by_a_reload_and_removed_once_it_has_no_vip() {
    let dir = TempDir::new();
    let p = write(&dir, "", "");
    let (reloader, routing) = start(&p);
    let spec = Config::load(&p).expect("valid").spec;
    let domain = dataplane::build::lock(&routing).domain().clone();
    let lb = dataplane::lb::lb_control(&spec, &domain, Some(routing.clone())).expect("an empty LB");
    let reloader = reloader.with_lb(lb.clone());
    assert!(!lb.configured() && !lb.in_use());
    let line = |l: &str| lb::cli::parse_lines(l).expect("line");
    lb.apply(&line("lb vip 198.18.9.2/32 encap l3dsr dscp 2"))
        .expect("a VIP without [lb]");
    let routed = |p: &str| {
        dataplane::build::lock(&routing)
            .node_route(p.parse().expect("ip"), 32)
            .is_some()
    };
    assert!(routed("198.18.9.2"));
    // [lb] comes.
    let with_lb = format!(
        "{BASE}\n[lb]\nlines = [\"lb vip 198.18.9.1/32 protocol tcp port 80 encap l3dsr dscp 23\"]\n"
    );
    std::fs::write(&p, &with_lb).expect("write");
    let a = reloader.reload().expect("[lb] added live");
    assert!(a["policies_changed"].to_string().contains("lb"), "{a}");
    assert!(lb.configured());
    let keys: Vec<String> = lb.state().vips().map(|v| v.spec.key.to_string()).collect();
    assert_eq!(keys, ["198.18.9.1/32 protocol tcp port 80"]);
    assert!(routed("198.18.9.1") && !routed("198.18.9.2"));
    // [lb] goes while its VIP exists: refused, nothing applied.
    std::fs::write(&p, BASE).expect("write");
    let e = reloader.reload().expect_err("a VIP exists");
    assert!(
        e.to_string()
            .contains("[lb] is removed but the load balancer has 1 VIP(s)"),
        "{e}"
    );
    assert!(lb.configured() && routed("198.18.9.1"));
    // Once the VIP is gone (the API), the same reload is accepted.
    lb.apply(&line("lb vip 198.18.9.1/32 protocol tcp port 80 del"))
        .expect("deleted");
    reloader.reload().expect("[lb] removed live");
    assert!(!lb.configured() && !lb.in_use());
    assert!(!routed("198.18.9.1"));
}
