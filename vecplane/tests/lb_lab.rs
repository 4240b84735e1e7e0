//! vecplane in the load-balancer lab's LB namespace (needs root, `ip`, `ethtool`, `nft`,
//! `nginx`, `curl`, `ping`; each test prints `skipped: <why>` and returns otherwise, and fails
//! under CI=true): a lab built with `LbMode::Bare`, the generated config's ports on the LB's veth
//! ends (AF_PACKET and AF_XDP), and packets from a server's own address reach the client through
//! vecplane (the path NAT replies take), IPv4 and IPv6. The `lb` lines are not applied yet: this
//! proves where vecplane attaches. Bounded pings only, to the lab's own hosts.

use netlab::{Driver, LbLab, LbMode, LbSpec};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

fn attach(driver: Driver) {
    if let Some(why) =
        netlab::missing_prerequisite(&["ip", "ethtool", "nft", "nginx", "curl", "ping"])
    {
        testenv::skip(&why);
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = LbSpec {
        prefix: "vlbv".to_string(),
        ..LbSpec::all(&[1, 1, 1])
    }
    .with_lb(LbMode::Bare);
    let lab = LbLab::build(&spec).expect("lab");
    let config = lab.vecplane_config(driver, None).expect("config");
    let path = lab.path(&format!("vecplane-{}.toml", driver.name()));
    std::fs::write(&path, &config).expect("write config");
    let vp = lab
        .start_vecplane(Path::new(BIN), &path)
        .unwrap_or_else(|e| panic!("vecplane starts: {e:#}\n{config}"));
    let s = &lab.servers()[0];
    for target in [
        netlab::lb::addr::CLIENT4.to_string(),
        netlab::lb::addr::CLIENT6.to_string(),
    ] {
        let out = lab
            .exec_timeout(
                &s.ns,
                &[
                    "ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "2", "-w", "8", &target,
                ],
                Duration::from_secs(20),
            )
            .expect("ping runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(" 0% packet loss"),
            "{} -> {target} through vecplane ({}): {text}\n{}",
            s.name,
            driver.name(),
            vp.log()
        );
    }
    let ports = vp.interfaces().expect("show interfaces");
    let down = ports.iter().find(|p| p.name == "down").expect("port down");
    let up = ports.iter().find(|p| p.name == "up").expect("port up");
    assert!(down.rx_packets >= 6 && up.tx_packets >= 6, "{ports:?}");
    vp.stop().expect("vecplane stops cleanly");
}

#[test]
fn vecplane_attaches_to_the_lb_ports_over_af_packet() {
    attach(Driver::AfPacket);
}

#[test]
fn vecplane_attaches_to_the_lb_ports_over_af_xdp() {
    attach(Driver::AF_XDP);
}
