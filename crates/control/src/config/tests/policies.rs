//! Config tests of the poll keys of `[dataplane]` and of the `[api]` table.

use super::*;
use dataplane::{PollMode, PollPolicy};
use std::net::SocketAddr;

#[test]
fn poll_mode_default_is_adaptive() {
    let spec = ok("");
    assert_eq!(spec.poll, PollPolicy::default());
    assert_eq!(spec.poll.mode_of(0), PollMode::Adaptive);
}

#[test]
fn poll_mode_one_for_all_or_one_per_worker() {
    let spec = ok("[dataplane]\npoll-mode = \"busy\"\npoll-sleep-max-us = 500\n");
    assert_eq!(spec.poll.default, PollMode::Busy);
    assert!(spec.poll.modes.is_empty());
    assert_eq!(spec.poll.sleep_max_us, 500);
    let spec = ok("[dataplane]\nworkers = 2\npoll-mode = [\"busy\", \"adaptive\"]\n");
    assert_eq!(spec.poll.modes, vec![PollMode::Busy, PollMode::Adaptive]);
    assert_eq!(spec.poll.mode_of(0), PollMode::Busy);
    assert_eq!(spec.poll.mode_of(1), PollMode::Adaptive);
    // The order of the keys does not matter.
    let spec = ok("[dataplane]\npoll-mode = [\"adaptive\", \"busy\"]\nworkers = 2\n");
    assert_eq!(spec.poll.mode_of(1), PollMode::Busy);
}

#[test]
fn poll_mode_errors() {
    one_error(
        "[dataplane]\npoll-mode = \"lazy\"\n",
        2,
        Some("poll-mode"),
        "`lazy` is not a poll mode; accepted: \"busy\", \"adaptive\", or an array",
    );
    one_error(
        "[dataplane]\npoll-mode = 1\n",
        2,
        Some("poll-mode"),
        "an integer `1` is not a poll mode",
    );
    one_error(
        "[dataplane]\nworkers = 2\npoll-mode = [\"busy\"]\n",
        3,
        Some("poll-mode"),
        "1 poll modes for 2 workers; accepted: one mode per worker",
    );
    one_error(
        "[dataplane]\nworkers = 2\npoll-mode = [\n  \"busy\",\n  \"spin\",\n]\n",
        5,
        Some("poll-mode"),
        "a string `spin` is not a poll mode; accepted: \"busy\", \"adaptive\"",
    );
    one_error(
        "[dataplane]\npoll-sleep-max-us = 5\n",
        2,
        Some("poll-sleep-max-us"),
        "`5` is out of range; accepted: 10..=100000",
    );
    one_error(
        "[dataplane]\npoll-sleep-max-us = 100001\n",
        2,
        Some("poll-sleep-max-us"),
        "accepted: 10..=100000",
    );
}

#[test]
fn rxq_rebalancing_keys() {
    assert_eq!(ok("").rxq, dataplane::RxqPolicy::default());
    let spec = ok("[dataplane]\nrxq-rebalance-seconds = 0\nrxq-rebalance-busy-percent = 50\n");
    assert_eq!(
        spec.rxq,
        dataplane::RxqPolicy {
            rebalance_seconds: 0,
            busy_percent: 50
        }
    );
    one_error(
        "[dataplane]\nrxq-rebalance-seconds = -1\n",
        2,
        Some("rxq-rebalance-seconds"),
        "accepted: 0..=3600",
    );
    one_error(
        "[dataplane]\nrxq-rebalance-busy-percent = 0\n",
        2,
        Some("rxq-rebalance-busy-percent"),
        "`0` is out of range; accepted: 1..=100",
    );
}

#[test]
fn api_tcp_and_token() {
    let c = Config::parse(
        "[api]\ntcp = \"127.0.0.1:8080\"\ntoken-file = \"token\"\n",
        FILE,
        Path::new("/base"),
    )
    .unwrap();
    assert_eq!(
        c.api.tcp,
        Some("127.0.0.1:8080".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(c.api.token_file, Some(PathBuf::from("/base/token")));
    let c = Config::parse(
        "[api]\ntcp = \"[::1]:9000\"\ntoken-file = \"/etc/vecplane/token\"\n",
        FILE,
        Path::new("/base"),
    )
    .unwrap();
    assert_eq!(c.api.tcp, Some("[::1]:9000".parse::<SocketAddr>().unwrap()));
    assert_eq!(c.api.token_file, Some(PathBuf::from("/etc/vecplane/token")));
    // No [api]: the Unix socket only.
    let c = Config::parse("", FILE, Path::new("/base")).unwrap();
    assert_eq!(c.api, crate::ApiConfig::default());
}

#[test]
fn api_errors() {
    one_error(
        "[api]\ntcp = \"127.0.0.1:8080\"\n",
        2,
        Some("tcp"),
        "a TCP listener needs a bearer token; accepted: add token-file",
    );
    one_error(
        "[api]\ntoken-file = \"t\"\n",
        2,
        Some("token-file"),
        "accepted: add tcp = \"ADDRESS:PORT\"",
    );
    one_error(
        "[api]\ntcp = \"localhost:8080\"\ntoken-file = \"t\"\n",
        2,
        Some("tcp"),
        "`localhost:8080` is not a socket address; accepted: ADDRESS:PORT like 127.0.0.1:8080",
    );
    one_error(
        "[api]\ntcp = \"127.0.0.1:1\"\ntoken-file = \"\"\n",
        3,
        Some("token-file"),
        "empty path",
    );
    one_error(
        "[api]\ntcp = \"127.0.0.1:1\"\ntoken-file = \"t\"\nport = 1\n",
        4,
        None,
        "[api]: unknown key `port`; accepted: tcp, token-file, allow-remote",
    );
}

#[test]
fn api_token_file_is_checked_with_the_pcap_files() {
    let dir = TempDir::new();
    let text = "[api]\ntcp = \"127.0.0.1:8080\"\ntoken-file = \"token\"\n";
    let c = Config::parse(text, FILE, &dir.0).unwrap();
    let e = c.check_files().unwrap_err();
    check(&e.issues()[0], 3, Some("token-file"), "cannot open");
    std::fs::create_dir(dir.0.join("token")).unwrap();
    let e = c.check_files().unwrap_err();
    check(
        &e.issues()[0],
        3,
        Some("token-file"),
        "is not a regular file",
    );
    std::fs::remove_dir(dir.0.join("token")).unwrap();
    std::fs::write(dir.0.join("token"), "secret\n").unwrap();
    c.check_files().unwrap();
}

#[test]
fn api_on_an_address_other_hosts_reach_needs_allow_remote() {
    let all = "[api]\ntcp = \"0.0.0.0:8080\"\ntoken-file = \"t\"\n";
    let e = one_error(
        all,
        2,
        Some("tcp"),
        "`0.0.0.0:8080` is every address of this host: other hosts could reach the API; \
         accepted: a loopback address like 127.0.0.1:8080 or [::1]:8080, or add \
         allow-remote = true to [api]",
    );
    assert!(e.to_string().contains(&format!("{FILE}:2")), "{e}");
    one_error(
        "[api]\ntcp = \"[::]:8080\"\ntoken-file = \"t\"\n",
        2,
        Some("tcp"),
        "`[::]:8080` is every address of this host",
    );
    one_error(
        "[api]\ntcp = \"198.18.0.1:8080\"\ntoken-file = \"t\"\nallow-remote = false\n",
        2,
        Some("tcp"),
        "`198.18.0.1:8080` is a non-loopback address",
    );
    one_error(
        "[api]\nallow-remote = true\n",
        2,
        Some("allow-remote"),
        "allow-remote applies to the TCP listener and there is none",
    );
    let c = Config::parse(
        &format!("{all}allow-remote = true\n"),
        FILE,
        Path::new("/base"),
    )
    .unwrap();
    assert!(c.api.allow_remote);
    assert_eq!(c.api.remote_tcp(), c.api.tcp);
    // Loopback needs nothing more.
    let c = Config::parse(
        "[api]\ntcp = \"[::1]:9000\"\ntoken-file = \"t\"\n",
        FILE,
        Path::new("/base"),
    )
    .unwrap();
    assert!(!c.api.allow_remote && c.api.remote_tcp().is_none());
}
