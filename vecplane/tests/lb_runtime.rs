//! The load balancer enabled at run time, end to end in the netlab load-balancer lab (needs
//! root, `ip`, `ethtool`, `nft`, `nginx`, `curl`, `wrk`, `python3`; prints `skipped: <why>`
//! and returns otherwise, and fails under CI=true): vecplane starts on AF_PACKET ports with no
//! `[lb]` at all, in front of three nginx servers with weights 1:2:3, and
//!
//! - gets its VIPs (L3DSR and NAT4, the NAT inside port included) one `vecplane ctl lb ...`
//!   line at a time: every request of a bounded curl loop completes and the answers spread by
//!   weight; `show ip fib` lists each VIP's route with source `lb`;
//! - or gets them from an `[lb]` added to its config file and `vecplane ctl reload`, with the
//!   same checks; removing `[lb]` again is refused while the VIPs exist, and traffic goes on.
//!
//! Traffic stays in the lab's namespaces (198.18.0.0/15, 2001:db8::/32), bounded.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::{Driver, Encap, LbLab, LbMode, LbSpec, Vecplane, Vip};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

/// Name prefix of this file's labs (not shared with the other lab tests).
const PREFIX: &str = "vlbr";

/// Standard deviations a server's share may stray from its weight.
const SIGMAS: f64 = 5.0;

/// Requests per VIP and check.
const REQUESTS: u32 = 300;

/// vecplane and its lab; vecplane is dropped (stopped) before the lab is deleted.
struct Bench {
    vp: Vecplane,
    lab: LbLab,
    config: PathBuf,
    base: String,
}

/// A lab serving L3DSR and NAT4, with vecplane started without `[lb]`.
fn start() -> Bench {
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        encaps: vec![Encap::L3dsr { dscp: 23 }, Encap::Nat4 { target_port: 8080 }],
        ..LbSpec::new(Encap::Gre4, &[1, 2, 3])
    };
    let lab = LbLab::build(&spec.with_lb(LbMode::Bare)).expect("lab");
    let base = lab.vecplane_config(Driver::AfPacket, None).expect("config");
    assert!(!base.contains("[lb]"), "{base}");
    let config = lab.path("vecplane-no-lb.toml");
    std::fs::write(&config, &base).expect("write config");
    let vp = lab
        .start_vecplane(Path::new(BIN), &config)
        .unwrap_or_else(|e| panic!("vecplane starts: {e:#}\n{base}"));
    Bench {
        vp,
        lab,
        config,
        base,
    }
}

/// The lab's `lb` lines and the NAT inside port (`down`, the servers' side).
fn lines(lab: &LbLab) -> Vec<String> {
    let mut l = lab.lb_cli_lines();
    l.push("lb set interface nat4 in down".to_string());
    l
}

/// `vecplane ctl <words>` on the running daemon: its stdout, or its stderr as the error.
fn ctl(b: &Bench, words: &str) -> Result<String, String> {
    let out = std::process::Command::new(BIN)
        .arg("ctl")
        .arg("--socket")
        .arg(b.vp.socket())
        .args(words.split_whitespace())
        .output()
        .expect("vecplane ctl runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every request of a curl loop to each VIP completes and the answers spread by weight.
fn balanced(b: &Bench, what: &str) {
    let servers = b.lab.servers().to_vec();
    for vip in b.lab.vips() {
        let r = b.lab.curl_loop(&vip, REQUESTS).expect("curl loop");
        let label = format!("{what}: {} {}", vip.encap.name(), vip.addr);
        println!(
            "{label}: {} requests, errors {:?}, per server {:?}",
            r.requests,
            r.errors,
            r.counts(&servers)
        );
        if let Some(why) = r.incomplete(u64::from(REQUESTS)) {
            panic!("{label}: {why}\n{}", b.vp.log());
        }
        r.check_spread(&servers, SIGMAS)
            .unwrap_or_else(|e| panic!("{label}: {e:#}"));
    }
}

/// `show ip fib <vip>` answers with the VIP's route, source `lb`.
fn routed_to_lb(b: &Bench, vip: &Vip) {
    let cmd = match vip.addr {
        IpAddr::V4(a) => format!("show ip fib {a}"),
        IpAddr::V6(a) => format!("show ip6 fib {a}"),
    };
    let r = b.vp.request(&cmd, true).expect("show ip fib");
    let d = r.data.unwrap_or_default();
    assert_eq!(d["entries"][0]["source"], "lb", "{cmd}: {d}");
}

fn finish(b: Bench) {
    let Bench { vp, lab, .. } = b;
    vp.stop().expect("vecplane stops cleanly");
    lab.delete().expect("lab deleted");
}

#[test]
fn lb_vips_by_ctl_on_a_daemon_started_without_lb_balance_real_traffic() {
    require_root!(SERIAL, netlab::LAB_TOOLS);
    let b = start();
    let text = ctl(&b, "show lb").expect("show lb without [lb]");
    assert!(text.contains("flow table per worker: none yet"), "{text}");
    for line in lines(&b.lab) {
        ctl(&b, &line).unwrap_or_else(|e| panic!("vecplane ctl {line}: {e}"));
    }
    for vip in b.lab.vips() {
        routed_to_lb(&b, &vip);
    }
    let text = ctl(&b, "show lb").expect("show lb");
    assert!(
        text.contains("flow table per worker: 1572864 entries"),
        "{text}"
    );
    balanced(&b, "VIPs by ctl");
    finish(b);
}

#[test]
fn lb_added_by_a_reload_balances_and_its_removal_waits_for_its_vips() {
    require_root!(SERIAL, netlab::LAB_TOOLS);
    let b = start();
    let mut with_lb = b.base.clone();
    with_lb.push_str("\n[lb]\nlines = [\n");
    for l in lines(&b.lab) {
        with_lb.push_str(&format!(
            "  {},\n",
            serde_json::to_string(&l).expect("a string")
        ));
    }
    with_lb.push_str("]\n");
    std::fs::write(&b.config, &with_lb).expect("write config");
    let r = ctl(&b, "reload").unwrap_or_else(|e| panic!("reload adding [lb]: {e}"));
    println!("reload: {r}");
    for vip in b.lab.vips() {
        routed_to_lb(&b, &vip);
    }
    balanced(&b, "[lb] by reload");
    // [lb] goes while its VIPs exist: refused, nothing changes.
    std::fs::write(&b.config, &b.base).expect("write config");
    let e = ctl(&b, "reload").expect_err("[lb] removed with VIPs");
    assert!(
        e.contains("[lb] is removed but the load balancer has"),
        "{e}"
    );
    let l3dsr = b.lab.vip(Encap::L3dsr { dscp: 23 }, false).expect("vip");
    let r = b.lab.curl_loop(&l3dsr, 50).expect("curl loop");
    assert!(r.incomplete(50).is_none(), "still balanced: {r:?}");
    finish(b);
}
