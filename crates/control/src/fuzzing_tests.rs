//! Property tests on stable (`cargo test`): the inputs of `fuzzing` from generators that start
//! near valid text (the fake view's config, route lines, command words, BIRD lines, JSON with
//! the API's field names) and break it, plus arbitrary text. The fuzz targets in fuzz/ run the
//! same checks for longer, guided by coverage.

use super::*;
use proptest::prelude::*;

/// A value as a config might hold one, valid or not.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"\"".to_string()),
        Just("\"198.18.1.1/24\"".to_string()),
        Just("[\"2001:db8:1::1/64\", \"198.18.9.1/33\"]".to_string()),
        Just("\"02:00:00:00:01:01\"".to_string()),
        Just("{ a = 1 }".to_string()),
        Just("1979-05-27T07:32:00Z".to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "[ -~]{0,12}".prop_map(|s| format!("{s:?}")),
        Just("[]".to_string()),
        Just("nan".to_string()),
    ]
}

/// A config key, known or not.
fn toml_key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "name",
            "driver",
            "mac",
            "mtu",
            "ip4",
            "ip6",
            "rx",
            "tx",
            "prefix",
            "via",
            "action",
            "ip",
            "port",
            "workers",
            "route-file",
            "socket",
            "socket-mode",
            "socket-permissions",
            "socket-group",
            "queues",
            "bridge",
            "interface",
            "local",
            "remote",
            "vni",
            "tcp",
        ])
        .prop_map(str::to_string),
        "[a-z-]{1,10}",
    ]
}

/// The fake view's config with lines dropped, doubled, and keys or values replaced.
fn config_like() -> impl Strategy<Value = String> {
    let lines: Vec<String> = crate::testutil::SPEC.lines().map(str::to_string).collect();
    let n = lines.len();
    let edit = prop_oneof![
        (0..n).prop_map(|i| (i, 0u8, String::new())),
        (0..n).prop_map(|i| (i, 1u8, String::new())),
        (0..n, toml_value()).prop_map(|(i, v)| (i, 2u8, v)),
        (0..n, toml_key(), toml_value()).prop_map(|(i, k, v)| (i, 3u8, format!("{k} = {v}"))),
        (0..n).prop_map(|i| (i, 3u8, "[[port]]".to_string())),
        (0..n).prop_map(|i| (i, 3u8, "[bgp]".to_string())),
    ];
    prop::collection::vec(edit, 0..8).prop_map(move |edits| {
        let mut out = lines.clone();
        for (i, how, text) in edits {
            let i = i.min(out.len().saturating_sub(1));
            if out.is_empty() {
                break;
            }
            match how {
                0 => {
                    out.remove(i);
                }
                1 => {
                    let l = out[i].clone();
                    out.insert(i, l);
                }
                2 => {
                    if let Some((k, _)) = out[i].split_once(" = ") {
                        out[i] = format!("{k} = {text}");
                    }
                }
                _ => out.insert(i, text),
            }
        }
        out.join("\n")
    })
}

/// An address, prefix or word as a route line might hold one.
fn route_word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("via".to_string()),
        Just("drop".to_string()),
        Just("#".to_string()),
        (any::<[u8; 4]>(), 0u8..40)
            .prop_map(|(a, l)| format!("{}.{}.{}.{}/{l}", a[0], a[1], a[2], a[3])),
        (any::<u16>(), 0u8..140).prop_map(|(a, l)| format!("2001:db8:{a:x}::/{l}")),
        prop::sample::select(vec![
            "198.18.1.2",
            "198.18.3.2",
            "2001:db8:3::2",
            "198.18.9.9",
            "::",
            "0.0.0.0/0",
            "198.18.2.0/24",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,8}",
    ]
}

fn command_word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "show",
            "clear",
            "ip",
            "ip6",
            "fib",
            "route",
            "add",
            "del",
            "trace",
            "rxq",
            "move",
            "lb",
            "vips",
            "which",
            "bgp",
            "drain",
            "cancel",
            "pcap",
            "start",
            "stop",
            "runtime",
            "errors",
            "interfaces",
            "neighbours",
            "bridge",
            "flow-cache",
            "health",
            "help",
            "limit",
            "verbose",
            "after",
            "all",
            "198.18.2.1",
            "2001:db8::1",
            "0",
            "-1",
            "99999",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,6}",
    ]
}

fn bird_line() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u16..10000, "[ -~]{0,20}").prop_map(|(c, t)| format!("{c:04} {t}")),
        (0u16..10000, "[ -~]{0,20}").prop_map(|(c, t)| format!("{c:04}-{t}")),
        "[ -~]{0,20}".prop_map(|t| format!(" {t}")),
        (0u16..10000).prop_map(|c| format!("{c:04}")),
        "[ -~]{0,8}",
        Just("\u{fffd}\r".to_string()),
    ]
}

/// JSON with the API's field names and values near theirs.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "198.18.2.0/24",
            "198.18.1.2",
            "2001:db8:3::2",
            "in0",
            "out0",
            "02:00:00:00:02:02",
            "drop",
            "tcp",
            "gre4",
            "l3dsr",
            "lb vip 198.18.100.1/32 protocol tcp port 80 encap gre4",
            "",
        ])
        .prop_map(|s| json!(s)),
        "[ -~]{0,10}".prop_map(|s| json!(s)),
    ];
    let keys = prop::sample::select(vec![
        "prefix",
        "via",
        "action",
        "ip",
        "mac",
        "port",
        "routes",
        "add",
        "del",
        "replace",
        "neighbours",
        "ip4",
        "ip6",
        "mtu",
        "policies",
        "items",
        "op",
        "address",
        "addresses",
        "weight",
        "flush",
        "servers",
        "vip",
        "protocol",
        "encap",
        "new_len",
        "lines",
        "commands",
        "flows",
        "groups",
        "node",
        "count",
        "verbose",
        "what",
        "x",
    ]);
    leaf.prop_recursive(4, 24, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.into(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn configs_near_valid_ones_are_taken_or_refused_at_a_line(text in config_like()) {
        config_text(&text);
    }

    #[test]
    fn any_config_text_is_refused_at_a_line(text in "[ -~\n\t\"=\\[\\]]{0,200}") {
        config_text(&text);
    }

    #[test]
    fn route_files_are_taken_or_refused_at_a_line(
        lines in prop::collection::vec(prop::collection::vec(route_word(), 0..5), 0..12),
        raw in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut text: Vec<u8> = lines.iter().map(|l| l.join(" ")).collect::<Vec<_>>().join("\n").into_bytes();
        route_file(&text);
        text.extend_from_slice(&raw);
        route_file(&text);
    }

    #[test]
    fn command_lines_parse_or_say_what_is_accepted(
        words in prop::collection::vec(command_word(), 0..6),
        raw in "\\PC{0,30}",
    ) {
        command_line(&words.join(" "));
        command_line(&raw);
    }

    #[test]
    fn bird_replies_are_read_or_refused(
        lines in prop::collection::vec(bird_line(), 0..10),
        raw in prop::collection::vec(any::<u8>(), 0..60),
        newline_at_end in any::<bool>(),
    ) {
        let mut text = lines.join("\n");
        if newline_at_end {
            text.push('\n');
        }
        bird_reply(text.as_bytes());
        bird_reply(&raw);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn api_bodies_succeed_or_are_refused_naming_what_was_wrong(
        which in any::<usize>(),
        body in json_value(),
        raw in prop::collection::vec(any::<u8>(), 0..20),
    ) {
        api_body(which, body.to_string().as_bytes());
        api_body(which, &raw);
    }
}

/// Every endpoint that takes a body is reached (the generators pick one by index).
#[test]
fn the_api_body_endpoints_include_routes_batch_and_the_load_balancer() {
    let e = api_body_endpoints();
    for want in ["/v1/routes", "/v1/batch", "/v1/lb/vips", "/v1/policies"] {
        assert!(e.iter().any(|(_, p)| *p == want), "{want} in {e:?}");
    }
    for (i, _) in e.iter().enumerate() {
        api_body(i, b"{}");
    }
}
