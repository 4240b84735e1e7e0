//! The router: every served route is described, and the description lists nothing else;
//! `PATCH /v1/interfaces` refuses what the config file refuses, with the same message.

use super::openapi::ENDPOINTS;
use super::*;
use crate::testutil::{spec, view};

#[test]
fn openapi_lists_exactly_what_the_router_serves() {
    let control = Arc::new(Control::new(view(1), Arc::new(spec())));
    let r = router(Arc::new(ApiState::new(control)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for e in ENDPOINTS {
        let path = e
            .path
            .replace("{family}", "ipv4")
            .replace("{what}", "errors")
            .replace("{address}/{length}", "198.19.0.0/16")
            .replace("{ip}", "198.18.2.9")
            .replace("{name}", "no-such-bridge")
            .replace("{id}", "0")
            .replace("{address}", "198.18.2.1");
        let req = axum::http::Request::builder()
            .method(e.method.to_uppercase().as_str())
            .uri(&path)
            .body(axum::body::Body::empty())
            .expect("request");
        let status = rt.block_on(async {
            use tower::ServiceExt;
            r.clone().oneshot(req).await.map(|resp| resp.status())
        });
        let status = status.expect("served");
        // A route whose resource is missing answers 404 too; the unknown-path fallback would
        // answer for any path, so those are told apart by the method check below.
        assert!(
            status != StatusCode::NOT_FOUND
                || path.contains("198.")
                || path.contains("no-such-bridge")
                || path.starts_with("/v1/lb")
                || path.starts_with("/v1/bgp"),
            "{} {path}: {status}",
            e.method
        );
        assert_ne!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{} {path}",
            e.method
        );
    }
    let doc = openapi::document();
    assert_eq!(doc["openapi"], "3.0.3");
    assert!(doc["paths"]["/v1/batch"]["post"]["requestBody"].is_object());
}

/// The one message the config gives for `SPEC` with `from` replaced by `to`.
fn config_refusal(from: &str, to: &str) -> String {
    let text = crate::testutil::SPEC.replacen(from, to, 1);
    let e =
        crate::config::parse_config(&text, "fake.toml", std::path::Path::new("/base")).unwrap_err();
    assert_eq!(e.issues().len(), 1, "{e}");
    e.issues()[0].message.clone()
}

/// `PATCH /v1/interfaces/{port}` with `body` on the fake view: status and error message.
fn patch_interface(port: &str, body: &str) -> (StatusCode, serde_json::Value) {
    request("PATCH", &format!("/v1/interfaces/{port}"), body)
}

/// `method path` with `body` on the fake view (no port control): status and answer.
fn request(method: &str, path: &str, body: &str) -> (StatusCode, serde_json::Value) {
    let control = Arc::new(Control::new(view(1), Arc::new(spec())));
    let r = router(Arc::new(ApiState::new(control)));
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .expect("request");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use tower::ServiceExt;
        let resp = r.oneshot(req).await.expect("served");
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        (status, serde_json::from_slice(&bytes).expect("json"))
    })
}

#[test]
fn patch_interfaces_refuses_what_the_config_refuses_with_the_same_message() {
    // An empty address list under a static neighbour (198.18.1.2 on in0).
    let from = "ip4 = [\"198.18.1.1/24\"]\nip6 = [\"2001:db8:1::1/64\"]";
    let config = config_refusal(from, "ip4 = []\nip6 = [\"2001:db8:1::1/64\"]");
    assert!(
        config.contains("static neighbour 198.18.1.2 is not on a subnet of port `in0`"),
        "{config}"
    );
    let (status, body) = patch_interface("in0", r#"{"ip4": []}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["message"], config.as_str(), "{body}");
    assert_eq!(body["error"]["field"], "ip4");
    // The same address twice.
    let config = config_refusal(
        from,
        "ip4 = [\"198.18.1.1/24\", \"198.18.1.1/24\"]\nip6 = [\"2001:db8:1::1/64\"]",
    );
    assert!(config.contains("repeats 198.18.1.1/24"), "{config}");
    let (status, body) = patch_interface("in0", r#"{"ip4": ["198.18.1.1/24", "198.18.1.1/24"]}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["message"], config.as_str(), "{body}");
    assert_eq!(body["error"]["field"], "ip4[1]");
    // A list that keeps the neighbour's subnet is applied.
    let (status, body) = patch_interface("in0", r#"{"ip4": ["198.18.1.1/24", "198.18.5.1/24"]}"#);
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[test]
fn post_interfaces_checks_the_port_as_the_config_does_before_anything_else() {
    let post = |body: &str| request("POST", "/v1/interfaces", body);
    let (status, v) = post("[1]");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(v.to_string().contains("keys of a [[port]] table"), "{v}");
    let (status, v) =
        post(r#"{"name": "p1", "driver": "af-packet", "interface": "v1", "bridge": "br0"}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], "bridge", "{v}");
    let (status, v) = post(
        r#"{"name": "p1", "driver": "af-packet", "interface": "v1", "features": {"output": ["ipfix"]}}"#,
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], "features", "{v}");
    assert!(v.to_string().contains("POST /v1/features"), "{v}");
    let (status, v) = post(r#"{"name": "p1", "driver": "warp", "mac": "02:00:00:00:03:01"}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v.to_string().contains("`warp` is not a driver; accepted:"),
        "{v}"
    );
    assert_eq!(v["error"]["field"], "driver", "{v}");
    let (status, v) =
        post(r#"{"name": "p1", "driver": "af-packet", "interface": "v1", "mac": "nope"}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], "mac", "{v}");
    // A valid port, on a view that cannot change its ports (not a running data plane).
    let (status, v) = post(
        r#"{"name": "p1", "driver": "af-packet", "interface": "v1", "mac": "02:00:00:00:03:01", "ip4": ["198.18.3.1/24"]}"#,
    );
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert!(v.to_string().contains("cannot change its ports"), "{v}");
    let (status, _) = request("DELETE", "/v1/interfaces/in0", "");
    assert_eq!(status, StatusCode::CONFLICT);
}
