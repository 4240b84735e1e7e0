//! Command tests against a hand-made `RuntimeView`: parsing, tables, JSON shapes, baselines.

use super::*;
use crate::testutil::{count_error, run_node, spec, view};
use graph::TraceRecord;
use std::sync::atomic::Ordering;

fn control(workers: usize) -> Control {
    Control::new(view(workers), Arc::new(spec()))
}

fn text(c: &Control, cmd: &str) -> String {
    let r = c.execute(cmd, false);
    assert!(r.ok, "`{cmd}` failed: {:?}", r.error);
    assert!(r.data.is_none());
    r.text.unwrap()
}

fn data(c: &Control, cmd: &str) -> Value {
    let r = c.execute(cmd, true);
    assert!(r.ok, "`{cmd}` failed: {:?}", r.error);
    r.data.unwrap()
}

fn error(c: &Control, cmd: &str) -> String {
    let r = c.execute(cmd, false);
    assert!(!r.ok, "`{cmd}` should fail");
    assert!(r.text.is_none() && r.data.is_none());
    r.error.unwrap()
}

// --- parsing ---------------------------------------------------------------------------------

#[test]
fn parses_every_command() {
    let cases = [
        ("help", Command::Help),
        ("show runtime", Command::ShowRuntime { all: false }),
        ("show rxq", Command::ShowRxq),
        (
            "rxq move vm1 1 0",
            Command::RxqMove {
                port: "vm1".into(),
                pair: 1,
                worker: 0,
            },
        ),
        ("show runtime all", Command::ShowRuntime { all: true }),
        ("show interfaces", Command::ShowInterfaces),
        ("show errors", Command::ShowErrors),
        (
            "show ip fib",
            Command::ShowFib {
                v6: false,
                query: FibQuery::Page {
                    after: None,
                    limit: MAX_PAGE,
                },
            },
        ),
        (
            "show ip fib 198.18.2.0/24",
            Command::ShowFib {
                v6: false,
                query: FibQuery::Lookup("198.18.2.0/24".into()),
            },
        ),
        (
            "show ip6 fib 2001:db8::1",
            Command::ShowFib {
                v6: true,
                query: FibQuery::Lookup("2001:db8::1".into()),
            },
        ),
        (
            "show ip fib after 198.18.0.0/15 limit 2",
            Command::ShowFib {
                v6: false,
                query: FibQuery::Page {
                    after: Some("198.18.0.0/15".into()),
                    limit: 2,
                },
            },
        ),
        (
            "show ip6 fib limit 7",
            Command::ShowFib {
                v6: true,
                query: FibQuery::Page {
                    after: None,
                    limit: 7,
                },
            },
        ),
        ("show trace", Command::ShowTrace),
        (
            "trace add in0-rx 10",
            Command::TraceAdd {
                node: "in0-rx".into(),
                count: 10,
            },
        ),
        ("clear trace", Command::ClearTrace),
        ("clear runtime", Command::ClearRuntime),
        ("clear interfaces", Command::ClearInterfaces),
        ("clear errors", Command::ClearErrors),
    ];
    for (line, want) in cases {
        assert_eq!(parse_command(line), Ok(want), "{line}");
    }
}

#[test]
fn accepts_unique_prefixes_and_blanks() {
    assert_eq!(parse_command("  sh   int "), Ok(Command::ShowInterfaces));
    assert_eq!(
        parse_command("sh run a"),
        Ok(Command::ShowRuntime { all: true })
    );
    assert_eq!(parse_command("cl er"), Ok(Command::ClearErrors));
    assert_eq!(parse_command("SHOW ERRORS"), Ok(Command::ShowErrors));
    assert_eq!(
        parse_command("sh ip f"),
        Ok(Command::ShowFib {
            v6: false,
            query: FibQuery::Page {
                after: None,
                limit: MAX_PAGE
            }
        })
    );
}

#[test]
fn unknown_words_list_the_accepted_commands() {
    let e = parse_command("show foo").unwrap_err().0;
    assert!(
        e.starts_with("unknown command `show foo`: `foo` is not one of: runtime, rxq, interfaces"),
        "{e}"
    );
    assert!(
        e.contains("accepted commands: help, show runtime [all], show rxq, rxq move PORT PAIR WORKER, show interfaces"),
        "{e}"
    );
    let e = parse_command("reboot now").unwrap_err().0;
    assert!(
        e.contains("`reboot` is not one of: help, show, trace, clear"),
        "{e}"
    );
    let e = parse_command("show i").unwrap_err().0;
    assert!(e.contains("`i` is ambiguous: interfaces, ip, ip6"), "{e}");
    let e = parse_command("").unwrap_err().0;
    assert!(e.starts_with("empty command; accepted commands:"), "{e}");
    let e = parse_command("show").unwrap_err().0;
    assert!(e.contains("`show` needs what to show"), "{e}");
}

#[test]
fn extra_words_are_errors() {
    let e = parse_command("show interfaces now").unwrap_err().0;
    assert!(
        e.starts_with("unexpected `now` after `show interfaces`"),
        "{e}"
    );
    let e = parse_command("show ip fib 198.18.0.0/16 x").unwrap_err().0;
    assert!(e.contains("unexpected `x`"), "{e}");
    let e = parse_command("trace add in0-rx 5 6").unwrap_err().0;
    assert!(e.contains("unexpected `6`"), "{e}");
}

#[test]
fn trace_add_needs_a_count() {
    let e = parse_command("trace add in0-rx").unwrap_err().0;
    assert!(e.contains("needs NODE and N"), "{e}");
    let e = parse_command("trace add in0-rx 0").unwrap_err().0;
    assert!(e.contains("accepted: 1..=4096"), "{e}");
    let e = parse_command("trace add in0-rx ten").unwrap_err().0;
    assert!(e.contains("N `ten` is not a packet count"), "{e}");
}

#[test]
fn execute_reports_errors_as_replies() {
    let c = control(1);
    let e = error(&c, "show bogus");
    assert!(e.contains("accepted commands"), "{e}");
    let r = c.execute("show bogus", true);
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"ok": false, "error": r.error.clone().unwrap()})
    );
}

#[test]
fn help_lists_commands() {
    let c = control(1);
    let t = text(&c, "help");
    for (cmd, _) in COMMANDS {
        assert!(t.contains(cmd), "{cmd} missing from help");
    }
    let d = data(&c, "help");
    assert_eq!(d["commands"].as_array().unwrap().len(), COMMANDS.len());
    assert_eq!(d["commands"][1]["command"], "show runtime [all]");
}

// --- show runtime ----------------------------------------------------------------------------

#[test]
fn show_runtime_counts_sleeps_since_the_last_clear() {
    let c = control(1);
    let idle = c.view().workers[0].idle.clone();
    idle.sleeps.add(3);
    idle.slept_ns.add(2_500_000_000);
    c.view().workers[0]
        .pool_free
        .store(8000, std::sync::atomic::Ordering::Relaxed);
    let t = text(&c, "show runtime");
    assert!(
        t.contains(
            "Worker 0 (cpu 1, adaptive polling: 3 sleeps, 2.500 s asleep; 8000 buffers free):"
        ),
        "{t}"
    );
    let d = data(&c, "show runtime");
    let w = &d["workers"][0];
    assert_eq!(
        (&w["poll_mode"], &w["sleeps"], &w["slept_seconds"]),
        (&json!("adaptive"), &json!(3), &json!(2.5))
    );
    text(&c, "clear runtime");
    idle.sleeps.add(1);
    let d = data(&c, "show runtime");
    assert_eq!(d["workers"][0]["sleeps"], 1);
    assert_eq!(d["workers"][0]["slept_seconds"], 0.0);
}

#[test]
fn show_rxq_weighs_each_receive_queue_by_what_its_packets_cost() {
    let c = control(1);
    let v = c.view().clone();
    run_node(&v, 0, "in0-rx", 100, 10, 2560, 256_000);
    run_node(&v, 0, "out0-rx", 100, 5, 1000, 10_000);
    let g = v.workers[0].graph.get();
    let carried = |name: &str, n: u64| {
        let i = g.node_names.iter().position(|x| x == name).expect("node");
        g.nodes[i].carried_clocks.add(n);
    };
    carried("in0-rx", 768_000);
    carried("out0-rx", 256_000);
    let t = text(&c, "show rxq");
    assert!(t.contains("Worker 0 (cpu 1): "), "{t}");
    let rows: Vec<&str> = t.lines().filter(|l| l.contains("-rx")).collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(
        rows[0].starts_with("in0-rx") && rows[0].contains("75.0%"),
        "{t}"
    );
    assert!(
        rows[1].starts_with("out0-rx") && rows[1].contains("25.0%"),
        "{t}"
    );
    let d = data(&c, "show rxq");
    let q = &d["workers"][0]["queues"];
    assert_eq!(q[0]["name"], "in0-rx");
    assert_eq!(q[0]["cycles_per_packet"], 300.0);
    assert_eq!(q[1]["share_percent"], 25.0);
    assert_eq!(d["placement"], Value::Null, "no queue may move here");
    let e = c.execute("rxq move vm1 1 0", false);
    let why = e.error.unwrap_or_default();
    assert!(why.contains("takes a vhost-user port"), "{why}");
    let why = c
        .execute("rxq move vm1 x 0", false)
        .error
        .unwrap_or_default();
    assert!(why.contains("PAIR `x` is not a number"), "{why}");
    // `clear runtime` starts the measurement again.
    text(&c, "clear runtime");
    let d = data(&c, "show rxq");
    assert_eq!(d["workers"][0]["queues"], json!([]));
}

#[test]
fn show_runtime_table_hides_idle_nodes() {
    let c = control(1);
    let v = c.view().clone();
    run_node(&v, 0, "in0-rx", 100, 10, 2560, 256_000);
    run_node(&v, 0, "ip4-lookup", 10, 10, 2560, 51_200);
    let t = text(&c, "show runtime");
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("Time "), "{t}");
    assert!(lines[0].contains("s since start") && lines[0].contains("since last clear"));
    assert_eq!(
        lines[1],
        "Worker 0 (cpu 1, adaptive polling: 0 sleeps, 0.000 s asleep; 0 buffers free):"
    );
    assert_eq!(
        lines[2],
        "Name        Calls  Vectors  Packets  Clocks/Pkt  Vectors/Call"
    );
    assert_eq!(
        lines[3],
        "in0-rx        100       10     2560      100.00         25.60"
    );
    assert_eq!(
        lines[4],
        "ip4-lookup     10       10     2560       20.00        256.00"
    );
    assert_eq!(lines.len(), 5, "{t}");
    assert!(!t.contains("unused"));
    let all = text(&c, "show runtime all");
    assert!(all.contains("unused"), "{all}");
    assert!(all.contains("out0-tx"));
    // A node with calls and no packets shows "-" for clocks/packet.
    run_node(&v, 0, "out0-rx", 5, 0, 0, 500);
    let t = text(&c, "show runtime");
    let l = t.lines().find(|l| l.starts_with("out0-rx")).unwrap();
    assert!(l.contains(" - ") || l.contains("  -  "), "{l}");
}

#[test]
fn show_runtime_json_shape() {
    let c = control(2);
    let v = c.view().clone();
    run_node(&v, 0, "in0-rx", 100, 10, 2560, 256_000);
    run_node(&v, 1, "in0-rx", 50, 5, 1000, 100_000);
    let d = data(&c, "show runtime");
    assert!(d["time_since_start"].as_f64().unwrap() >= 0.0);
    assert!(d["time_since_clear"].as_f64().is_some());
    assert_eq!(d["tsc_hz"], 2_000_000_000u64);
    assert_eq!(d["workers"].as_array().unwrap().len(), 2);
    assert_eq!(d["workers"][1]["worker"], 1);
    assert_eq!(d["workers"][1]["cpu"], 2);
    let n = &d["workers"][0]["nodes"][0];
    assert_eq!(
        *n,
        json!({"name": "in0-rx", "calls": 100, "vectors": 10, "packets": 2560, "clocks": 256000,
               "clocks_per_packet": 100.0, "vectors_per_call": 25.6})
    );
    assert_eq!(d["workers"][0]["nodes"].as_array().unwrap().len(), 1);
    let total = &d["total"][0];
    assert_eq!(total["calls"], 150);
    assert_eq!(total["packets"], 3560);
    assert_eq!(total["clocks"], 356_000);
    assert_eq!(d["total"].as_array().unwrap().len(), 1);
    let all = data(&c, "show runtime all");
    assert_eq!(
        all["total"].as_array().unwrap().len(),
        crate::testutil::NODES.len()
    );
    // The text has a total section when there are several workers.
    let t = text(&c, "show runtime");
    assert!(
        t.contains("Worker 1 (cpu 2, adaptive polling: ") && t.contains("Total (2 workers):"),
        "{t}"
    );
}

#[test]
fn clear_runtime_subtracts_a_baseline() {
    let c = control(1);
    let v = c.view().clone();
    run_node(&v, 0, "in0-rx", 100, 10, 2560, 256_000);
    text(&c, "clear runtime");
    let d = data(&c, "show runtime");
    assert_eq!(d["workers"][0]["nodes"].as_array().unwrap().len(), 0, "{d}");
    let t = text(&c, "show runtime");
    assert!(t.contains("no node has run yet"), "{t}");
    run_node(&v, 0, "in0-rx", 3, 1, 7, 70);
    let d = data(&c, "show runtime");
    assert_eq!(
        d["workers"][0]["nodes"][0],
        json!({"name": "in0-rx", "calls": 3, "vectors": 1, "packets": 7, "clocks": 70,
               "clocks_per_packet": 10.0, "vectors_per_call": 7.0 / 3.0})
    );
    assert_eq!(d["total"][0]["packets"], 7);
    // The data plane's counters are untouched.
    assert_eq!(v.workers[0].graph.get().nodes[0].packets.get(), 2567);
    assert_eq!(data(&c, "clear runtime"), json!({"cleared": "runtime"}));
}

// --- show interfaces -------------------------------------------------------------------------

/// A driver with counters of its own, as a vhost-user port has.
#[derive(Debug)]
struct FakeDriver;

impl graph::DriverCounters for FakeDriver {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("guest_errors", 2), ("connections", 3)]
    }

    fn state(&self) -> Option<String> {
        Some("connected".into())
    }
}

#[test]
fn a_drivers_own_counters_show_in_text_json_and_metrics() {
    let v = view(1);
    let mut ports = (*v.ports.get()).clone();
    ports[0].driver_counters = Some(Arc::new(FakeDriver));
    v.ports.set(Arc::new(ports));
    let c = Control::new(v.clone(), Arc::new(spec()));
    let t = text(&c, "show interfaces");
    assert!(
        t.contains("in0 (pcap): connected; guest_errors 2, connections 3 (since start)\n"),
        "{t}"
    );
    let d = data(&c, "show interfaces");
    assert_eq!(
        d["interfaces"][0]["driver_counters"],
        json!({"guest_errors": 2, "connections": 3})
    );
    assert_eq!(d["interfaces"][0]["driver_state"], "connected");
    let m = crate::metrics::render(&v);
    assert!(
        m.contains("vecplane_port_driver_events_total{port=\"in0\",driver=\"pcap\",counter=\"guest_errors\"} 2"),
        "{m}"
    );
}

#[test]
fn show_interfaces_text_and_json() {
    let c = control(1);
    let v = c.view().clone();
    let s = &v.ports.get()[0].stats[0];
    s.rx_packets.add(10);
    s.rx_bytes.add(640);
    s.rx_drops.add(1);
    let o = &v.ports.get()[1].stats[0];
    o.tx_packets.add(9);
    o.tx_bytes.add(576);
    o.tx_drops.add(2);
    let t = text(&c, "show interfaces");
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines,
        vec![
            "Name  Driver  MAC                Rx packets  Rx bytes  Tx packets  Tx bytes  Rx drops  Tx drops",
            "in0   pcap    02:00:00:00:01:01          10       640           0         0         1         0",
            "out0  pcap    02:00:00:00:01:02           0         0           9       576         0         2",
        ]
    );
    let d = data(&c, "show interfaces");
    assert!(d["time_since_clear"].as_f64().is_some());
    assert_eq!(
        d["interfaces"][1],
        json!({"index": 1, "name": "out0", "driver": "pcap", "detail": "", "mac": "02:00:00:00:01:02",
               "mtu": 9000, "ip4": ["198.18.3.1/24"], "ip6": ["2001:db8:3::1/64"],
               "rx_packets": 0, "rx_bytes": 0, "rx_drops": 0,
               "tx_packets": 9, "tx_bytes": 576, "tx_drops": 2, "failure": null,
               "driver_counters": null, "driver_state": null})
    );
    // A port that stopped early says why, in both forms.
    v.ports.get()[0].stats[0].fail("in.pcap: record 3: too large".into());
    let t = text(&c, "show interfaces");
    assert!(
        t.ends_with("in0 stopped: in.pcap: record 3: too large\n"),
        "{t}"
    );
    let d = data(&c, "show interfaces");
    assert_eq!(
        d["interfaces"][0]["failure"],
        "in.pcap: record 3: too large"
    );
}

#[test]
fn interfaces_sum_workers_and_clear() {
    let c = control(2);
    let v = c.view().clone();
    v.ports.get()[0].stats[0].rx_packets.add(10);
    v.ports.get()[0].stats[1].rx_packets.add(5);
    assert_eq!(
        data(&c, "show interfaces")["interfaces"][0]["rx_packets"],
        15
    );
    text(&c, "clear interfaces");
    assert_eq!(
        data(&c, "show interfaces")["interfaces"][0]["rx_packets"],
        0
    );
    v.ports.get()[0].stats[1].rx_packets.add(4);
    assert_eq!(
        data(&c, "show interfaces")["interfaces"][0]["rx_packets"],
        4
    );
    assert_eq!(v.ports.get()[0].stats[0].rx_packets.get(), 10);
}

// --- show errors -----------------------------------------------------------------------------

#[test]
fn show_errors_lists_non_zero_counters() {
    let c = control(2);
    let v = c.view().clone();
    assert_eq!(text(&c, "show errors"), "No errors.\n");
    count_error(&v, 0, "ip4-lookup", "no-route", 7);
    count_error(&v, 1, "ip4-lookup", "no-route", 3);
    count_error(&v, 1, "ip4-input", "ttl-expired", 120);
    let t = text(&c, "show errors");
    assert_eq!(
        t.lines().collect::<Vec<_>>(),
        vec![
            "Count  Node        Reason",
            "  120  ip4-input   ttl-expired",
            "   10  ip4-lookup  no-route",
        ]
    );
    let d = data(&c, "show errors");
    assert_eq!(
        d["errors"],
        json!([{"node": "ip4-input", "reason": "ttl-expired", "count": 120},
               {"node": "ip4-lookup", "reason": "no-route", "count": 10}])
    );
    assert_eq!(d["total"], 130);
    text(&c, "clear errors");
    assert_eq!(text(&c, "show errors"), "No errors.\n");
    count_error(&v, 0, "ip4-lookup", "no-route", 2);
    let d = data(&c, "show errors");
    assert_eq!(
        d["errors"],
        json!([{"node": "ip4-lookup", "reason": "no-route", "count": 2}])
    );
}

// --- show ip fib -----------------------------------------------------------------------------

#[test]
fn show_ip_fib_lists_routes_and_connected() {
    let c = control(1);
    let t = text(&c, "show ip fib");
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines,
        vec![
            "IPv4 FIB: 5 entries (3 routes, 2 connected)",
            "Prefix           Next hop        Port  MAC",
            "198.18.0.0/15    via 198.18.1.2  in0   02:00:00:00:02:02",
            "198.18.1.0/24    connected       in0",
            "198.18.2.0/24    via 198.18.1.2  in0   02:00:00:00:02:02",
            "                 via 198.18.3.2  out0  02:00:00:00:03:02",
            "198.18.2.128/25  drop",
            "198.18.3.0/24    connected       out0",
        ]
    );
    let d = data(&c, "show ip fib");
    assert_eq!(d["family"], "ip4");
    assert_eq!(d["total"], 5);
    assert_eq!(
        d["entries"][2],
        json!({"prefix": "198.18.2.0/24", "type": "via", "next_hops": [
            {"ip": "198.18.1.2", "port": "in0", "mac": "02:00:00:00:02:02"},
            {"ip": "198.18.3.2", "port": "out0", "mac": "02:00:00:00:03:02"}]})
    );
    assert_eq!(
        d["entries"][1],
        json!({"prefix": "198.18.1.0/24", "type": "connected", "port": "in0", "next_hops": []})
    );
    assert_eq!(
        d["entries"][3],
        json!({"prefix": "198.18.2.128/25", "type": "drop", "next_hops": []})
    );
}

#[test]
fn show_ip_fib_longest_match() {
    let c = control(1);
    let q = |arg: &str| data(&c, &format!("show ip fib {arg}"))["entries"].clone();
    assert_eq!(q("198.18.2.200")[0]["prefix"], "198.18.2.128/25");
    assert_eq!(q("198.18.2.10")[0]["prefix"], "198.18.2.0/24");
    assert_eq!(q("198.18.1.77")[0]["prefix"], "198.18.1.0/24");
    assert_eq!(q("198.19.9.9")[0]["prefix"], "198.18.0.0/15");
    assert_eq!(q("198.18.2.0/24")[0]["prefix"], "198.18.2.0/24");
    assert_eq!(q("198.18.4.0/23")[0]["prefix"], "198.18.0.0/15");
    assert_eq!(q("203.0.113.1"), json!([]));
    assert_eq!(
        text(&c, "show ip fib 203.0.113.1"),
        "no route matches 203.0.113.1\n"
    );
    let t = text(&c, "show ip fib 198.18.2.10");
    assert!(
        t.contains("198.18.2.0/24") && t.contains("via 198.18.3.2"),
        "{t}"
    );
    let d = data(&c, "show ip fib 198.18.2.10");
    assert_eq!(d["query"], "198.18.2.10");
}

#[test]
fn show_ip6_fib() {
    let c = control(1);
    let d = data(&c, "show ip6 fib");
    assert_eq!(d["family"], "ip6");
    assert_eq!(d["total"], 3);
    let d = data(&c, "show ip6 fib 2001:db8:2::10");
    assert_eq!(
        d["entries"][0],
        json!({"prefix": "2001:db8:2::/48", "type": "via", "next_hops": [
            {"ip": "2001:db8:3::2", "port": "out0", "mac": "02:00:00:00:03:03"}]})
    );
}

#[test]
fn show_ip_fib_pages_in_prefix_order() {
    let c = control(1);
    let all = data(&c, "show ip fib");
    assert_eq!(all["next"], Value::Null);
    let mut got = Vec::new();
    let mut line = "show ip fib limit 2".to_string();
    loop {
        let page = data(&c, &line);
        assert_eq!(page["total"], 5);
        let entries = page["entries"].as_array().expect("entries").clone();
        assert!(entries.len() <= 2, "{page}");
        got.extend(entries);
        match page["next"].as_str() {
            Some(next) => line = format!("show ip fib after {next} limit 2"),
            None => break,
        }
    }
    assert_eq!(Value::Array(got), all["entries"]);
    // Text after a prefix: no header, the rest of the table.
    let t = text(&c, "show ip fib after 198.18.2.0/24");
    assert_eq!(
        t.lines().collect::<Vec<_>>(),
        vec![
            "Prefix           Next hop   Port  MAC",
            "198.18.2.128/25  drop",
            "198.18.3.0/24    connected  out0",
        ]
    );
    let t = text(&c, "show ip fib limit 1");
    assert!(
        t.contains("... 4 more entries") && t.contains("`show ip fib after 198.18.0.0/15` goes on"),
        "{t}"
    );
    for bad in [
        "show ip fib limit 0",
        "show ip fib limit 10001",
        "show ip fib limit x",
        "show ip fib after 198.18.0.0/15 x",
        "show ip fib 198.18.0.0/15 after",
    ] {
        let e = parse_command(bad).expect_err(bad).0;
        assert!(e.contains("accepted: `show ip fib`"), "{bad}: {e}");
    }
    let e = error(&c, "show ip fib after 2001:db8::/32");
    assert!(e.contains("is not an IPv4 prefix"), "{e}");
    let e = error(&c, "show ip6 fib after banana");
    assert!(e.contains("accepted: an IPv6 prefix like"), "{e}");
}

#[test]
fn show_fib_argument_errors() {
    let c = control(1);
    let e = error(&c, "show ip fib 198.18.2.1/24");
    assert!(e.contains("did you mean 198.18.2.0/24?"), "{e}");
    let e = error(&c, "show ip fib 2001:db8::1");
    assert!(e.contains("use `show ip6 fib 2001:db8::1`"), "{e}");
    let e = error(&c, "show ip6 fib 198.18.1.1");
    assert!(e.contains("use `show ip fib 198.18.1.1`"), "{e}");
    let e = error(&c, "show ip fib banana");
    assert!(
        e.contains("`banana` is not an address or prefix; accepted:"),
        "{e}"
    );
}

#[test]
fn show_fib_caps_text_and_pages_json() {
    let mut s = spec();
    for i in 0..1500u32 {
        s.routes4.push(dataplane::RouteSpec {
            prefix: std::net::Ipv4Addr::from(0xc613_0000 + (i << 8)),
            len: 24,
            target: dataplane::RouteTarget::Drop,
        });
    }
    let c = Control::new(crate::testutil::view_with(1, &s), Arc::new(s));
    let t = text(&c, "show ip fib");
    let lines = t.lines().count();
    assert!(lines <= crate::fibview::MAX_TEXT_LINES + 3, "{lines}");
    let last = t.lines().last().unwrap();
    assert!(
        last.contains("more entries (`vecplane ctl --json"),
        "{last}"
    );
    let d = data(&c, "show ip fib");
    assert_eq!(d["entries"].as_array().unwrap().len(), 1505);
    assert_eq!(d["total"], 1505);
    assert_eq!(d["next"], Value::Null);
    // A page of 1000: `next` is its last prefix.
    let d = data(&c, "show ip fib limit 1000");
    assert_eq!(d["entries"].as_array().unwrap().len(), 1000);
    assert_eq!(d["next"], d["entries"][999]["prefix"]);
}

// --- trace -----------------------------------------------------------------------------------

#[test]
fn trace_add_arms_input_nodes_only() {
    let c = control(2);
    let v = c.view().clone();
    let e = error(&c, "trace add ip4-lookup 5");
    assert_eq!(
        e,
        "`trace add ip4-lookup 5`: `ip4-lookup` is not an input node; accepted: in0-rx, out0-rx"
    );
    assert!(!v.workers[0].trace.get().active.load(Ordering::Acquire));
    let t = text(&c, "trace add in0-rx 10");
    assert_eq!(
        t,
        "tracing the next 10 packets received by in0-rx (on 2 workers)\n"
    );
    for w in &v.workers {
        assert_eq!(w.trace.get().budget[0].load(Ordering::Relaxed), 10);
        assert!(w.trace.get().active.load(Ordering::Acquire));
    }
    assert_eq!(
        data(&c, "trace add out0-rx 1"),
        json!({"node": "out0-rx", "count": 1, "workers": 2})
    );
}

fn record(packet: u32, node: &str, text: &str, next: &str) -> TraceRecord {
    TraceRecord {
        packet,
        node: node.into(),
        text: text.into(),
        next: next.into(),
    }
}

#[test]
fn show_trace_groups_records_per_packet() {
    let c = control(1);
    let v = c.view().clone();
    assert!(text(&c, "show trace").starts_with("No packets traced."));
    {
        let trace = v.workers[0].trace.get();
        let mut r = trace.records.lock().unwrap();
        r.push(record(1, "in0-rx", "60 bytes", "ethernet-input"));
        r.push(record(2, "in0-rx", "60 bytes", "ethernet-input"));
        r.push(record(1, "ethernet-input", "ipv4", "ip4-input"));
        r.push(record(2, "ethernet-input", "arp", "error-drop"));
        r.push(record(1, "out0-tx", "sent", ""));
    }
    let t = text(&c, "show trace");
    assert_eq!(
        t.lines().collect::<Vec<_>>(),
        vec![
            "Worker 0:",
            "Packet 1",
            "  in0-rx          60 bytes -> ethernet-input",
            "  ethernet-input  ipv4 -> ip4-input",
            "  out0-tx         sent",
            "Packet 2",
            "  in0-rx          60 bytes -> ethernet-input",
            "  ethernet-input  arp -> error-drop",
        ]
    );
    let d = data(&c, "show trace");
    assert_eq!(d["workers"][0]["worker"], 0);
    assert_eq!(d["workers"][0]["packets"][1]["packet"], 2);
    assert_eq!(
        d["workers"][0]["packets"][0]["steps"][2],
        json!({"node": "out0-tx", "text": "sent", "next": ""})
    );
    text(&c, "trace add in0-rx 3");
    assert_eq!(
        text(&c, "clear trace"),
        "trace records cleared, tracing stopped\n"
    );
    assert!(v.workers[0].trace.get().snapshot().is_empty());
    assert_eq!(
        v.workers[0].trace.get().budget[0].load(Ordering::Relaxed),
        0
    );
    assert!(text(&c, "show trace").starts_with("No packets traced."));
}

// --- final stats -----------------------------------------------------------------------------

#[test]
fn final_stats_json_shape() {
    let v = view(2);
    let s = spec();
    run_node(&v, 0, "in0-rx", 10, 2, 300, 3000);
    run_node(&v, 1, "in0-rx", 10, 1, 100, 1000);
    count_error(&v, 0, "ip4-lookup", "no-route", 4);
    count_error(&v, 1, "ip4-input", "ttl-expired", 1);
    v.ports.get()[0].stats[1].rx_packets.add(400);
    v.ports.get()[0].stats[1].rx_bytes.add(25600);
    let j = crate::final_stats_json(&v, &s);
    assert_eq!(
        j["ports"][0],
        json!({"name": "in0", "driver": "pcap", "rx_packets": 400, "rx_bytes": 25600,
               "rx_drops": 0, "tx_packets": 0, "tx_bytes": 0, "tx_drops": 0, "failure": null})
    );
    assert_eq!(
        j["nodes"][0],
        json!({"name": "in0-rx", "calls": 20, "vectors": 3, "packets": 400, "clocks": 4000,
               "clocks_per_packet": 10.0})
    );
    assert_eq!(
        j["nodes"].as_array().unwrap().len(),
        crate::testutil::NODES.len()
    );
    assert_eq!(
        j["errors"].as_array().unwrap().len(),
        crate::testutil::ERRORS.len()
    );
    assert_eq!(
        j["errors"][1],
        json!({"node": "ip4-lookup", "reason": "no-route", "count": 4})
    );
    assert_eq!(j["drops_total"], 5);
    assert_eq!(
        j["pool"],
        json!({"backing": "normal pages", "buffers": 16384, "data_size": 2048})
    );
    assert_eq!(j["workers"], 2);
}

#[test]
fn show_neighbours_lists_entries_and_counters() {
    use nodes::neighbour::{NeighbourRow, NeighbourSnapshot, NeighbourState, NeighbourStats};
    let mut v = view(1);
    let snap = NeighbourSnapshot {
        worker: 0,
        taken_tsc: 0,
        rows: vec![NeighbourRow {
            port: 1,
            ip: "198.18.3.2".parse().unwrap(),
            mac: Some([2, 0, 0, 0, 3, 2]),
            state: NeighbourState::Reachable,
            age_ms: 1500,
            pinned: true,
            queued: 0,
        }],
        stats: NeighbourStats {
            arp_requests_sent: 3,
            learned: 1,
            ..NeighbourStats::default()
        },
    };
    v.neighbours = vec![Arc::new(Mutex::new(snap))];
    let c = Control::new(v, Arc::new(spec()));
    let t = text(&c, "show neighbours");
    assert!(
        t.contains("out0  198.18.3.2  02:00:00:00:03:02  reachable  1.500  yes"),
        "{t}"
    );
    assert!(t.contains("requests sent: 3 ARP"), "{t}");
    assert_eq!(
        text(&c, "sh neighbors"),
        t,
        "the US spelling and prefixes work"
    );
    let d = data(&c, "show neighbours");
    assert_eq!(d["workers"][0]["entries"][0]["mac"], "02:00:00:00:03:02");
    assert_eq!(d["workers"][0]["entries"][0]["state"], "reachable");
    assert_eq!(d["workers"][0]["counters"]["arp_requests_sent"], 3);
    assert!(
        d["workers"][0]["age_ms"].is_null(),
        "never published by a worker"
    );
}

#[test]
fn show_bridge_without_and_with_domains() {
    let c = control(1);
    assert_eq!(
        text(&c, "show bridge"),
        "no bridge domains are configured\n"
    );
    assert_eq!(data(&c, "show bridge")["domains"], json!([]));
    let mut v = view(1);
    v.bridge_names = vec!["br0".into()];
    let stats = Arc::new(nodes::bridge::BridgeStats::default());
    stats.learned.add(2);
    stats.flooded.add(5);
    v.bridges = vec![stats];
    let c = Control::new(v, Arc::new(spec()));
    let t = text(&c, "show bridge");
    assert!(
        t.contains("learned 2, aged 0, moved 0, refused (table full) 0, flooded 5"),
        "{t}"
    );
    let d = data(&c, "show bridge");
    assert_eq!(d["domains"], json!([{"id": 1, "name": "br0"}]));
    assert_eq!(d["workers"][0]["counters"]["flooded"], 5);
}
