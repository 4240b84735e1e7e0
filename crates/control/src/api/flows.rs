//! The flow-mode bridges' resources: rules, groups and megaflows of `/v1/bridges/{name}/...` and
//! the flow caches' counters (`/v1/flow-cache`). Handlers translate HTTP to `flows_api` and run
//! its blocking work off the runtime's thread; they hold no lock across an await.

use super::error::ApiError;
use super::resources::{blocking, body, params, Body, Params, Shared};
use crate::flows_api;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

fn answer(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A body that may be absent (then `T::default()`).
fn optional_body<T: serde::de::DeserializeOwned + Default>(b: Body) -> Result<T, ApiError> {
    match &b {
        Ok(bytes) if bytes.is_empty() => Ok(T::default()),
        _ => body(b),
    }
}

/// `GET /v1/bridges/{name}/flows`.
pub(super) async fn get_flows(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            Ok(flows_api::dump_flows(&*flows_api::find(&s.view, &name)?))
        })
        .await,
    )
}

/// `POST /v1/bridges/{name}/flows`.
pub(super) async fn post_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: flows_api::AddFlows = body(b)?;
            flows_api::add_flows(&*flows_api::find(&s.view, &name)?, &req)
        })
        .await,
    )
}

/// `PATCH /v1/bridges/{name}/flows`.
pub(super) async fn patch_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: flows_api::ModFlows = body(b)?;
            flows_api::mod_flows(&*flows_api::find(&s.view, &name)?, &req)
        })
        .await,
    )
}

/// `DELETE /v1/bridges/{name}/flows`.
pub(super) async fn delete_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: flows_api::DelFlows = optional_body(b)?;
            flows_api::del_flows(&*flows_api::find(&s.view, &name)?, &req)
        })
        .await,
    )
}

/// `GET /v1/bridges/{name}/groups`.
pub(super) async fn get_groups(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            Ok(flows_api::dump_groups(&*flows_api::find(&s.view, &name)?))
        })
        .await,
    )
}

/// `POST /v1/bridges/{name}/groups`.
pub(super) async fn post_groups(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: flows_api::AddGroups = body(b)?;
            flows_api::add_groups(&*flows_api::find(&s.view, &name)?, &req)
        })
        .await,
    )
}

/// `DELETE /v1/bridges/{name}/groups`.
pub(super) async fn delete_groups(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let req: flows_api::DelGroups = optional_body(b)?;
            flows_api::del_groups(&*flows_api::find(&s.view, &name)?, &req)
        })
        .await,
    )
}

/// `GET /v1/bridges/{name}/megaflows`.
pub(super) async fn get_megaflows(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            Ok(flows_api::dump_megaflows(&*flows_api::find(
                &s.view, &name,
            )?))
        })
        .await,
    )
}

/// `GET /v1/flow-cache`.
pub(super) async fn get_flow_cache(s: Shared, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            Ok(flows_api::flow_cache(&s.view))
        })
        .await,
    )
}
