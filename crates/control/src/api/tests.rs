//! The router: every served route is described, and the description lists nothing else.

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
