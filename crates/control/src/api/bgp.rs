//! The BGP announcer's resources: `/v1/bgp` (phase, announced VIPs, liveness, counters) and
//! `/v1/bgp/drain` (POST starts a drain, DELETE cancels it). Handlers run the announcer's work
//! off the runtime's thread and hold no lock across an await.

use super::error::ApiError;
use super::resources::{blocking, params, Params, Shared};
use crate::announcer::Announcer;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

async fn on_announcer(
    s: Shared,
    q: Params,
    f: impl FnOnce(&Announcer) -> (String, Value) + Send + 'static,
) -> Response {
    let r = blocking(move || {
        params(q, &[])?;
        match s.control.announcer() {
            Some(a) => Ok(f(a).1),
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "no VIPs are announced: add a [bgp] table to the config",
            )),
        }
    })
    .await;
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/bgp`.
pub(super) async fn get_bgp(s: Shared, q: Params) -> Response {
    on_announcer(s, q, |a| a.show()).await
}

/// `POST /v1/bgp/drain`.
pub(super) async fn post_drain(s: Shared, q: Params) -> Response {
    on_announcer(s, q, |a| a.drain()).await
}

/// `DELETE /v1/bgp/drain`.
pub(super) async fn delete_drain(s: Shared, q: Params) -> Response {
    on_announcer(s, q, |a| a.undrain()).await
}
