//! The routes and neighbours model: parsing with item and field in errors, paging, batches.

use super::*;
use dataplane::{DataplaneSpec, PortDriver, PortSpec};
use std::net::Ipv4Addr;

fn routing() -> Mutex<Routing> {
    let port = |i: u8| PortSpec {
        name: format!("p{i}"),
        mac: [2, 0, 0, 0, 0, i + 1],
        mtu: 1500,
        ip4: vec![(Ipv4Addr::new(198, 18, i, 1), 24)],
        ip6: Vec::new(),
        driver: PortDriver::Pcap { rx: None, tx: None },
    };
    let spec = DataplaneSpec {
        ports: vec![port(0), port(1)],
        ..DataplaneSpec::default()
    };
    Mutex::new(Routing::without_workers(&spec).expect("routing"))
}

fn ports() -> Vec<String> {
    vec!["p0".into(), "p1".into()]
}

fn batch(v: Value) -> Result<Vec<Change>, ModelError> {
    let body: BatchBody = serde_json::from_value(v).expect("batch shape");
    changes_of(&body, &ports())
}

#[test]
fn unknown_fields_are_refused_by_the_parser() {
    let bad = json!({"changes": [{"op": "add", "route": {"prefix": "198.19.0.0/16", "via": [], "colour": 1}}]});
    let e = serde_json::from_value::<BatchBody>(bad).expect_err("unknown field");
    assert!(e.to_string().contains("colour"), "{e}");
}

#[test]
fn a_batch_applies_and_pages() {
    let r = routing();
    let changes: Vec<Value> = (0..25)
        .map(|i| json!({"op": "add", "route": {"prefix": format!("198.19.{i}.0/24"), "via": ["198.18.1.2"]}}))
        .collect();
    let c = batch(json!({ "changes": changes })).expect("valid");
    let answer = apply(&r, &c, true).expect("applied");
    assert_eq!(answer["version"], 1);
    assert_eq!(answer["visible"], true);
    let page = list_routes(&r, "ipv4", None, Some(10)).expect("page");
    assert_eq!(page["routes"].as_array().map(Vec::len), Some(10));
    assert_eq!(page["total"], 25);
    let next = page["next"].as_str().expect("next").to_string();
    let mut seen = 10;
    let mut after = Some(next);
    while let Some(a) = after {
        let p = list_routes(&r, "ipv4", Some(&a), Some(10)).expect("page");
        seen += p["routes"].as_array().map_or(0, Vec::len);
        after = p["next"].as_str().map(str::to_string);
    }
    assert_eq!(seen, 25);
    assert_eq!(
        get_route(&r, "198.19.3.0/24").expect("route"),
        json!({"prefix": "198.19.3.0/24", "via": ["198.18.1.2"]})
    );
    assert_eq!(
        get_route(&r, "198.19.99.0/24").expect_err("none").status,
        404
    );
}

#[test]
fn errors_name_the_item_and_the_field() {
    let r = routing();
    let bad = [
        (
            json!({"op": "add", "route": {"prefix": "198.19.0.0", "via": ["198.18.1.2"]}}),
            400,
            "changes[1].route.prefix",
        ),
        (
            json!({"op": "add", "route": {"prefix": "198.19.0.0/16", "via": ["nope"]}}),
            400,
            "changes[1].route.via",
        ),
        (
            json!({"op": "add", "route": {"prefix": "198.19.0.0/16"}}),
            400,
            "changes[1].route.via",
        ),
        (
            json!({"op": "frob", "route": {"prefix": "198.19.0.0/16", "drop": true}}),
            400,
            "changes[1].op",
        ),
        (
            json!({"op": "add", "neighbour": {"ip": "198.18.1.9", "mac": "zz", "port": "p1"}}),
            400,
            "changes[1].neighbour.mac",
        ),
        (
            json!({"op": "add", "neighbour": {"ip": "198.18.1.9", "mac": "02:00:00:00:00:09", "port": "eth9"}}),
            400,
            "changes[1].neighbour.port",
        ),
    ];
    for (item, status, field) in bad {
        let good = json!({"op": "add", "route": {"prefix": "198.19.0.0/16", "drop": true}});
        let e = batch(json!({ "changes": [good, item] })).expect_err("refused");
        assert_eq!(
            (e.status, e.field.as_deref(), e.item),
            (status, Some(field), Some(1)),
            "{e:?}"
        );
    }
    // Refused by the tables: the whole batch changes nothing.
    let c = batch(json!({"changes": [
        {"op": "add", "route": {"prefix": "198.19.0.0/16", "drop": true}},
        {"op": "add", "route": {"prefix": "198.20.0.0/16", "via": ["203.0.113.1"]}},
    ]}))
    .expect("parses");
    let e = apply(&r, &c, false).expect_err("unreachable next hop");
    assert_eq!((e.status, e.item), (409, Some(1)));
    assert_eq!(e.body()["error"]["item"], 1);
    assert_eq!(
        list_routes(&r, "ipv4", None, None).expect("list")["total"],
        0
    );
    assert_eq!(
        list_routes(&r, "ipv5", None, None)
            .expect_err("family")
            .status,
        400
    );
    assert_eq!(
        list_routes(&r, "ipv4", None, Some(0))
            .expect_err("limit")
            .status,
        400
    );
}

#[test]
fn neighbours_round_trip() {
    let r = routing();
    let c = batch(json!({"changes": [
        {"op": "add", "neighbour": {"ip": "198.18.1.9", "mac": "02:00:00:00:00:09", "port": "p1"}},
    ]}))
    .expect("parses");
    apply(&r, &c, false).expect("applied");
    assert_eq!(
        get_neighbour(&r, "198.18.1.9", &ports()).expect("there"),
        json!({"ip": "198.18.1.9", "mac": "02:00:00:00:00:09", "port": "p1"})
    );
    assert_eq!(
        list_neighbours(&r, &ports())["neighbours"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let c = batch(json!({"changes": [{"op": "delete", "neighbour": {"ip": "198.18.1.9"}}]}))
        .expect("parses");
    apply(&r, &c, false).expect("deleted");
    assert_eq!(
        get_neighbour(&r, "198.18.1.9", &ports())
            .expect_err("gone")
            .status,
        404
    );
}
