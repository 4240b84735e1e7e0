//! The LB API through the router: create, read, list, change and delete VIPs, servers and the
//! conf; batches of lines all or nothing; errors naming the field; `show lb`, `lb which`,
//! metrics and the stats JSON.

use crate::api::{router, ApiState};
use crate::commands::Control;
use crate::testutil::{spec, view};
use axum::http::StatusCode;
use dataplane::lb::LbControl;
use dataplane::RuntimeView;
use lb::model::{AsSlot, LbState, VipId};
use serde_json::{json, Value};
use std::sync::Arc;

fn lb_view(workers: usize) -> (RuntimeView, Arc<LbControl>) {
    let mut v = view(workers);
    let lb = Arc::new(LbControl::without_workers(
        LbState::new(),
        vec!["in0".into(), "out0".into()],
        workers,
    ));
    v.lb = lb.clone();
    (v, lb)
}

struct Api {
    router: axum::Router,
    rt: tokio::runtime::Runtime,
}

impl Api {
    fn new(v: RuntimeView) -> Api {
        let control = Arc::new(Control::new(v, Arc::new(spec())));
        Api {
            router: router(Arc::new(ApiState::new(control))),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(match body {
                Some(b) => axum::body::Body::from(b.to_string()),
                None => axum::body::Body::empty(),
            })
            .expect("request");
        self.rt.block_on(async {
            use tower::ServiceExt;
            let resp = self.router.clone().oneshot(req).await.expect("served");
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
                .await
                .expect("body");
            (
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            )
        })
    }
}

#[track_caller]
fn field_error(r: (StatusCode, Value), status: StatusCode, field: &str, needle: &str) {
    assert_eq!(r.0, status, "{}", r.1);
    if field.is_empty() {
        assert!(r.1["error"]["field"].is_null(), "{}", r.1);
    } else {
        assert_eq!(r.1["error"]["field"], field, "{}", r.1);
    }
    let msg = r.1["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(needle), "`{needle}` not in {msg}");
}

#[test]
fn vips_and_servers_are_created_read_listed_changed_and_deleted() {
    let (v, lb) = lb_view(2);
    let api = Api::new(v);
    let (s, r) = api.call(
        "POST",
        "/v1/lb/vips",
        Some(json!({"prefix": "198.18.1.1/32", "protocol": "tcp", "port": 80,
                    "encap": "l3dsr", "dscp": 23, "new_len": 100,
                    "servers": [{"address": "198.18.2.1"}, {"address": "198.18.2.2", "weight": 3}]})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let id = r["id"].as_u64().expect("id");
    let (s, r) = api.call("GET", &format!("/v1/lb/vips/{id}"), None);
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["vip"], "198.18.1.1/32 protocol tcp port 80");
    assert_eq!(r["encap"], "l3dsr");
    assert_eq!(r["dscp"], 23);
    assert_eq!(r["maglev_size"], 101);
    assert_eq!(r["servers"].as_array().map(Vec::len), Some(2));
    assert_eq!(r["servers"][1]["weight"], 3);
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap_or("")
            .contains("< 100 x 2"),
        "{r}"
    );
    // Counters of both workers, per VIP and server.
    for w in 0..2 {
        let c = lb.counters(w).expect("worker");
        c.vip(VipId(id as u32)).expect("vip").packets.add(4);
        c.slot(AsSlot(0)).expect("slot").new_flows.add(1);
    }
    let (_, r) = api.call("GET", "/v1/lb/vips", None);
    assert_eq!(r["vips"][0]["counters"]["packets"], 8, "{r}");
    assert_eq!(
        r["vips"][0]["servers"][0]["counters"]["new_flows"], 2,
        "{r}"
    );
    // Servers: add, read, drain, delete with flush.
    let base = format!("/v1/lb/vips/{id}/servers");
    let (s, r) = api.call(
        "POST",
        &base,
        Some(json!({"servers": [{"address": "198.18.2.3"}]})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, r) = api.call("GET", &base, None);
    assert_eq!(r["servers"].as_array().map(Vec::len), Some(3), "{r}");
    let (s, r) = api.call(
        "PATCH",
        &format!("{base}/198.18.2.3"),
        Some(json!({"weight": 0})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, r) = api.call("GET", &format!("{base}/198.18.2.3"), None);
    assert_eq!(r["state"], "draining", "{r}");
    let (s, _) = api.call("DELETE", &format!("{base}/198.18.2.1"), None);
    assert_eq!(s, StatusCode::OK);
    let (_, r) = api.call("GET", &format!("{base}/198.18.2.1"), None);
    assert_eq!(r["state"], "removed", "without flush its flows finish: {r}");
    let (s, _) = api.call("DELETE", &format!("{base}/198.18.2.2?flush=true"), None);
    assert_eq!(s, StatusCode::OK);
    let (s, _) = api.call("GET", &format!("{base}/198.18.2.2"), None);
    assert_eq!(s, StatusCode::NOT_FOUND, "flushed servers are gone");
    // The VIP: change, then delete.
    let (s, r) = api.call(
        "PATCH",
        &format!("/v1/lb/vips/{id}"),
        Some(json!({"new_len": 65537, "src_ip_sticky": true})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, r) = api.call("GET", "/v1/lb", None);
    assert_eq!(r["vips"][0]["maglev_size"], 65537, "{r}");
    assert_eq!(r["vips"][0]["src_ip_sticky"], true, "{r}");
    assert_eq!(r["vips"][0]["dscp"], 23, "kept: {r}");
    let (s, _) = api.call("DELETE", &format!("/v1/lb/vips/{id}"), None);
    assert_eq!(s, StatusCode::OK);
    let (_, r) = api.call("GET", "/v1/lb/vips", None);
    assert_eq!(r["vips"], json!([]));
}

#[test]
fn errors_name_the_field() {
    let (v, _) = lb_view(1);
    let api = Api::new(v);
    let vip = |extra: Value| {
        let mut b = json!({"prefix": "198.18.1.1/32", "protocol": "tcp", "port": 80});
        if let (Some(m), Some(e)) = (b.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        api.call("POST", "/v1/lb/vips", Some(b))
    };
    field_error(
        vip(json!({"encap": "l3dsr"})),
        StatusCode::BAD_REQUEST,
        "dscp",
        "needs `dscp`",
    );
    field_error(
        vip(json!({"encap": "l3dsr", "dscp": 64})),
        StatusCode::BAD_REQUEST,
        "dscp",
        "0..=63",
    );
    field_error(
        vip(json!({"encap": "ipip"})),
        StatusCode::BAD_REQUEST,
        "encap",
        "accepted: gre4",
    );
    field_error(
        vip(json!({"encap": "gre4"})),
        StatusCode::BAD_REQUEST,
        "encap",
        "ip4-src-address",
    );
    field_error(
        vip(json!({"encap": "nat4"})),
        StatusCode::BAD_REQUEST,
        "target_port",
        "target_port",
    );
    field_error(
        vip(json!({"prefix": "198.18.1.1/33", "encap": "l3dsr", "dscp": 1})),
        StatusCode::BAD_REQUEST,
        "prefix",
        "0..=32",
    );
    field_error(
        vip(json!({"protocol": "sctp"})),
        StatusCode::BAD_REQUEST,
        "protocol",
        "tcp, udp, any",
    );
    field_error(
        vip(json!({"encap": "l3dsr", "dscp": 1, "servers": [{"address": "2001:db8::1"}]})),
        StatusCode::BAD_REQUEST,
        "address",
        "IPv4 servers",
    );
    field_error(
        vip(json!({"colour": 1})),
        StatusCode::BAD_REQUEST,
        "body",
        "colour",
    );
    // Nothing of the refused requests exists.
    let (_, r) = api.call("GET", "/v1/lb/vips", None);
    assert_eq!(r["vips"], json!([]));
    let (s, r) = vip(json!({"encap": "l3dsr", "dscp": 1}));
    assert_eq!(s, StatusCode::OK, "{r}");
    field_error(
        vip(json!({"encap": "l3dsr", "dscp": 1})),
        StatusCode::CONFLICT,
        "prefix",
        "exists",
    );
    field_error(
        api.call("GET", "/v1/lb/vips/x", None),
        StatusCode::BAD_REQUEST,
        "id",
        "not a VIP id",
    );
    let (s, _) = api.call("GET", "/v1/lb/vips/9", None);
    assert_eq!(s, StatusCode::NOT_FOUND);
    field_error(
        api.call(
            "PATCH",
            "/v1/lb/vips/0/servers/198.18.2.77",
            Some(json!({"weight": 2})),
        ),
        StatusCode::NOT_FOUND,
        "",
        "not on VIP",
    );
    field_error(
        api.call("PATCH", "/v1/lb/vips/0", Some(json!({"port": 81}))),
        StatusCode::BAD_REQUEST,
        "port",
        "cannot change",
    );
    field_error(
        api.call("DELETE", "/v1/lb/vips/0/servers/nope", None),
        StatusCode::BAD_REQUEST,
        "address",
        "not an IPv4 or IPv6 address",
    );
    field_error(
        api.call("PATCH", "/v1/lb/conf", Some(json!({"timeout-tcp": 0}))),
        StatusCode::BAD_REQUEST,
        "timeout-tcp",
        "`0`",
    );
    let (s, r) = api.call(
        "PATCH",
        "/v1/lb/conf",
        Some(json!({"timeout": 30, "ip4-src-address": "198.18.0.254"})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, r) = api.call("GET", "/v1/lb/conf", None);
    assert_eq!(r["timeout-udp"], 30, "{r}");
    assert_eq!(r["ip4-src-address"], "198.18.0.254", "{r}");
}

#[test]
fn command_batches_are_all_or_nothing() {
    let (v, lb) = lb_view(1);
    let api = Api::new(v);
    let (s, r) = api.call(
        "POST",
        "/v1/lb/commands",
        Some(json!({"lines": [
            "# a file's comment line",
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23",
            "lb as 198.18.1.9/32 protocol tcp port 80 198.18.2.1",
        ]})),
    );
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["error"]["item"], 2, "{r}");
    assert_eq!(r["error"]["field"], "lines", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("lines[2]: no VIP"),
        "{r}"
    );
    assert_eq!(lb.version(), 0, "nothing applied");
    let (s, r) = api.call(
        "POST",
        "/v1/lb/commands",
        Some(
            json!({"lines": ["lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23",
                              "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 wieght 2"]}),
        ),
    );
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(r["error"]["item"], 1, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("`wieght`"),
        "{r}"
    );
    let (s, r) = api.call(
        "POST",
        "/v1/lb/commands",
        Some(
            json!({"lines": ["lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23",
                              "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2",
                              "lb set interface nat4 in in0"]}),
        ),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["applied"], 3);
    assert_eq!(lb.version(), 1);
    let (s, r) = api.call(
        "POST",
        "/v1/lb/commands",
        Some(json!({"lines": ["lb set interface nat6 in eth7"]})),
    );
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("accepted: in0, out0"),
        "{r}"
    );
    let (_, r) = api.call("GET", "/v1/lb", None);
    assert_eq!(r["nat4_inside"], json!(["in0"]), "{r}");
}

/// A data plane started without `[lb]` takes VIPs at run time, as VPP's `lb` does: the
/// resources answer, a batch of lines adds a VIP, and the stats JSON and metrics show the LB
/// once it is in use (not before).
#[test]
fn without_lb_the_resources_take_vips_at_run_time() {
    let v = view(1);
    let lb = v.lb.clone();
    let api = Api::new(v.clone());
    let (s, r) = api.call("GET", "/v1/lb", None);
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["vips"], json!([]), "{r}");
    assert!(!lb.in_use());
    let vv = v.clone();
    let control = Control::new(v, Arc::new(spec()));
    let stats = crate::stats::final_stats_json(&vv, &spec());
    assert_eq!(stats["lb"], Value::Null, "not in use: {stats}");
    let (s, r) = api.call(
        "POST",
        "/v1/lb/commands",
        Some(json!({"lines": [
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23",
            "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.10",
        ]})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    assert!(lb.in_use());
    let (_, r) = api.call("GET", "/v1/lb", None);
    assert_eq!(
        r["vips"][0]["vip"], "198.18.1.1/32 protocol tcp port 80",
        "{r}"
    );
    let text = control.execute("show lb", false);
    assert!(text.ok, "{:?}", text.error);
    let stats = crate::stats::final_stats_json(&vv, &spec());
    assert!(stats["lb"]["vips"].is_array(), "in use: {stats}");
}

#[test]
fn show_lb_and_which_in_the_command_language() {
    let (v, lb) = lb_view(1);
    lb.apply(
        &lb::cli::parse_lines(
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 0\n\
             lb vip 198.18.1.1/32 protocol udp port 53 encap l3dsr dscp 24\n",
        )
        .expect("lines"),
    )
    .expect("applied");
    lb.counters(0)
        .expect("w0")
        .vip(VipId(0))
        .expect("vip")
        .nonsyn_misses
        .add(7);
    let control = Control::new(v.clone(), Arc::new(spec()));
    let r = control.execute("show lb vips verbose", true);
    assert!(r.ok, "{r:?}");
    let text = r.text.unwrap_or_default();
    assert!(
        text.contains("[0] 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23"),
        "{text}"
    );
    assert!(text.contains("nonsyn-misses 7"), "{text}");
    assert!(
        text.contains("198.18.2.2 slot 1 gen 0 weight 0 draining entries 0"),
        "{text}"
    );
    assert!(
        text.contains("warning: no server with weight > 0"),
        "{text}"
    );
    assert_eq!(
        r.data.expect("json")["vips"][0]["counters"]["nonsyn_misses"],
        7
    );
    let r = control.execute("show lb", false);
    assert!(r.text.unwrap_or_default().contains("vips 2"));
    let r = control.execute("lb which tcp 198.19.0.7 40000 198.18.1.1 80", true);
    assert!(r.ok, "{r:?}");
    let d = r.data.expect("json");
    assert_eq!(d["server"], "198.18.2.1", "the only active server: {d}");
    assert_eq!(d["reason"], "maglev");
    assert!(r
        .text
        .unwrap_or_default()
        .contains("exact protocol and port"));
    let r = control.execute("lb which udp 198.19.0.7 40000 198.18.1.1 53", true);
    assert_eq!(r.data.expect("json")["reason"], "no_server");
    let r = control.execute("lb which tcp 198.19.0.7 40000 198.18.1.1 81", true);
    assert_eq!(r.data.expect("json")["reason"], "no_vip_for_port");
    let r = control.execute("lb which tcp 198.19.0.7 40000 198.18.9.9 80", true);
    assert_eq!(r.data.expect("json")["reason"], "not_a_vip");
    let r = control.execute("lb which tcp 198.19.0.7 x 198.18.1.1 80", false);
    assert!(r.error.unwrap_or_default().contains("`x` is not a port"));
    let r = control.execute("show lb vipz", false);
    assert!(!r.ok);
    let r = Control::new(view(1), Arc::new(spec())).execute("show lb", false);
    assert!(
        r.ok,
        "a data plane without [lb] has an empty one: {:?}",
        r.error
    );
}

#[test]
fn metrics_and_stats_carry_the_lb() {
    let (v, lb) = lb_view(1);
    lb.apply(
        &lb::cli::parse_lines(
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1\n",
        )
        .expect("lines"),
    )
    .expect("applied");
    let c = lb.counters(0).expect("w0");
    c.vip(VipId(0)).expect("vip").packets.add(5);
    c.vip(VipId(0)).expect("vip").live_flows.set(2);
    c.slot(AsSlot(0)).expect("slot").bytes.add(300);
    c.malformed.add(1);
    let text = crate::metrics::render(&v);
    for needle in [
        "vecplane_lb_vip_packets_total{vip=\"198.18.1.1/32 protocol tcp port 80\",id=\"0\",encap=\"l3dsr\"} 5",
        "vecplane_lb_vip_live_flows{vip=\"198.18.1.1/32 protocol tcp port 80\",id=\"0\",encap=\"l3dsr\"} 2",
        "# TYPE vecplane_lb_vip_nonsyn_misses counter",
        "# TYPE vecplane_lb_vip_no_server counter",
        "# TYPE vecplane_lb_vip_table_full counter",
        "vecplane_lb_as_bytes_total{vip=\"198.18.1.1/32 protocol tcp port 80\",id=\"0\",server=\"198.18.2.1\"} 300",
        "vecplane_lb_as_weight{vip=\"198.18.1.1/32 protocol tcp port 80\",id=\"0\",server=\"198.18.2.1\",state=\"active\"} 1",
        "vecplane_lb_node_packets_total{reason=\"malformed\"} 1",
        "vecplane_lb_version 1",
    ] {
        assert!(text.contains(needle), "`{needle}` not in\n{text}");
    }
    let stats = crate::stats::final_stats_json(&v, &spec());
    assert_eq!(stats["lb"]["vips"][0]["counters"]["packets"], 5, "{stats}");
    assert!(crate::stats::final_stats_json(&view(1), &spec())["lb"].is_null());
}

#[test]
fn a_server_down_by_health_shows_its_configured_weight_and_health() {
    let (v, lb) = lb_view(1);
    lb.apply(
        &lb::cli::parse_lines(
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 weight 1\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 3\n",
        )
        .expect("lines"),
    )
    .expect("applied");
    let key = lb.state().vips().next().expect("vip").spec.key;
    lb.apply(&[lb::model::LbCommand::SetHealth {
        vip: key,
        servers: vec!["198.18.2.2".parse().expect("addr")],
        down: true,
        flush: false,
    }])
    .expect("marked down");
    let api = Api::new(v.clone());
    let (s, r) = api.call("GET", "/v1/lb/vips/0/servers/198.18.2.2", None);
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (
            &r["weight"],
            &r["effective_weight"],
            &r["health"],
            &r["state"]
        ),
        (&json!(3), &json!(0), &json!("down"), &json!("draining")),
        "{r}"
    );
    assert_eq!(r["maglev_entries"], 0, "{r}");
    let (_, r) = api.call("GET", "/v1/lb/vips/0/servers/198.18.2.1", None);
    assert_eq!(
        (&r["weight"], &r["effective_weight"], &r["health"]),
        (&json!(1), &json!(1), &json!("up")),
        "{r}"
    );
    // A weight change through the API while down: configured weight changes, still down.
    let (s, r) = api.call(
        "PATCH",
        "/v1/lb/vips/0/servers/198.18.2.2",
        Some(json!({"weight": 5})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, r) = api.call("GET", "/v1/lb/vips/0/servers/198.18.2.2", None);
    assert_eq!(
        (&r["weight"], &r["effective_weight"], &r["health"]),
        (&json!(5), &json!(0), &json!("down")),
        "{r}"
    );
    let control = Control::new(v, Arc::new(spec()));
    let text = control
        .execute("show lb vips verbose", true)
        .text
        .unwrap_or_default();
    assert!(
        text.contains("198.18.2.2 slot 1 gen 0 weight 5 (down: health) draining entries 0"),
        "{text}"
    );
    assert!(
        text.contains("198.18.2.1 slot 0 gen 0 weight 1 active entries"),
        "{text}"
    );
}

/// The memory cap holds for the API too (409 naming the cap and how to raise it, nothing
/// applied); `GET /v1/lb` and `show lb` show the budget; host bits are cleared as VPP's API
/// does; weights past 100 are refused naming `weight`; `flush` on a weight change evicts.
#[test]
fn the_api_keeps_the_memory_limit_and_vpps_rules() {
    let mut v = view(1);
    let state = LbState::new().with_memory_budget(lb::model::MemoryBudget {
        limit: 80 << 20,
        workers: 1,
    });
    let lb = Arc::new(LbControl::without_workers(state, vec!["in0".into()], 1));
    v.lb = lb.clone();
    let api = Api::new(v.clone());
    let big = |p: &str| json!({"prefix": p, "encap": "l3dsr", "dscp": 1, "new_len": 4194304});
    let (s, r) = api.call("POST", "/v1/lb/vips", Some(big("198.18.1.1/24")));
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["vip"], "198.18.1.0/24", "host bits cleared: {r}");
    let (s, r) = api.call("POST", "/v1/lb/vips", Some(big("198.18.2.0/24")));
    assert_eq!(s, StatusCode::CONFLICT, "{r}");
    let m = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("memory limit of 80 MiB") && m.contains("memory-limit"),
        "{r}"
    );
    assert_eq!(lb.state().vips().count(), 1, "nothing applied");
    let (_, r) = api.call("GET", "/v1/lb", None);
    assert_eq!(r["memory"]["limit_bytes"], 80u64 << 20, "{r}");
    assert!(
        r["memory"]["used_bytes"].as_u64().unwrap_or(0) > 64 << 20,
        "{r}"
    );
    let control = Control::new(v.clone(), Arc::new(spec()));
    let text = control.execute("show lb", false).text.unwrap_or_default();
    assert!(
        text.contains("memory: 64 MiB of 80 MiB ([lb] memory-limit)"),
        "{text}"
    );
    let (s, r) = api.call(
        "POST",
        "/v1/lb/vips/0/servers",
        Some(json!({"servers": [{"address": "198.18.3.1", "weight": 101}]})),
    );
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["error"]["field"], "weight", "{r}");
    let (s, r) = api.call(
        "POST",
        "/v1/lb/vips/0/servers",
        Some(json!({"servers": [{"address": "198.18.3.1"}]})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    let gen = |lb: &LbControl| {
        let st = lb.state();
        let v = st.vips().next().expect("vip").clone();
        let slot = v.servers[&"198.18.3.1".parse().expect("addr")];
        (st.slot(slot).weight, st.slot(slot).gen)
    };
    assert_eq!(gen(&lb), (100, 0), "VPP's default weight");
    let (s, r) = api.call(
        "PATCH",
        "/v1/lb/vips/0/servers/198.18.3.1",
        Some(json!({"weight": 0, "flush": true})),
    );
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(gen(&lb), (0, 1), "hard drain: weight 0 and flows evicted");
}
