//! The channels' resources: the punted packets (`GET /v1/punt/packets`, a long poll) and
//! injection (`POST /v1/inject`). Handlers translate HTTP to `punt_api` and run its blocking
//! work (waiting for packets, translating a packet-out) off the runtime's thread.

use super::error::ApiError;
use super::resources::{blocking, body, params, Body, Params, Shared};
use crate::punt_api::{self, InjectBody, MAX_PACKETS, MAX_WAIT_MS};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

fn answer(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

fn number(map: &HashMap<String, String>, key: &str, max: u64) -> Result<Option<u64>, ApiError> {
    map.get(key)
        .map(|v| {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| ApiError::bad(key, format!("`{v}` is not a number 0..={max}")))
        })
        .transpose()
}

/// `GET /v1/punt/packets?after=SEQ&count=N&wait_ms=MS`. The wait is a sleep on the runtime
/// (a look at the log every 10 ms), not a blocked thread: long polls cannot use up the
/// threads other requests need.
pub(super) async fn get_packets(State(s): Shared, q: Params) -> Response {
    let asked = (|| {
        let map = params(q, &["after", "count", "wait_ms"])?;
        let after = number(&map, "after", u64::MAX)?;
        let count = number(&map, "count", MAX_PACKETS as u64)?.unwrap_or(100) as usize;
        let wait = number(&map, "wait_ms", MAX_WAIT_MS)?.unwrap_or(0);
        Ok::<_, ApiError>((after, count, wait))
    })();
    let (after, count, wait) = match asked {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let log = s.view.channels.punt.log().clone();
    // "From now": the cursor is the last packet at the request's arrival.
    let after = after.unwrap_or_else(|| log.last());
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
    while log.last() <= after && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    answer(
        blocking(move || {
            Ok(punt_api::packets(
                &s.view,
                Some(after),
                count,
                Duration::ZERO,
            ))
        })
        .await,
    )
}

/// `POST /v1/inject`.
pub(super) async fn post_inject(State(s): Shared, q: Params, b: Body) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: InjectBody = body(b)?;
            punt_api::inject(&s.view, &req)
        })
        .await,
    )
}
