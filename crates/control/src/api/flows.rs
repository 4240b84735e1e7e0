//! The flow-mode bridges' resources: rules, groups and megaflows of `/v1/bridges/{name}/...` and
//! the flow caches' counters (`/v1/flow-cache`). Handlers translate HTTP to `flows_api` and run
//! its blocking work off the runtime's thread; they hold no lock across an await.

use super::error::ApiError;
use super::resources::{blocking, body, params, Body, Params, Shared};
use crate::flows_api;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use dataplane::flows::FlowSwitch;
use serde_json::Value;

fn answer(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Run `f` on the flow bridge `name` off the runtime's thread (the query takes no parameters).
async fn on_switch(
    s: Shared,
    name: String,
    q: Params,
    f: impl FnOnce(&FlowSwitch) -> Result<Value, ApiError> + Send + 'static,
) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            f(&*flows_api::find(&s.view, &name)?)
        })
        .await,
    )
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
    on_switch(s, name, q, |sw| Ok(flows_api::dump_flows(sw))).await
}

/// `POST /v1/bridges/{name}/flows`.
pub(super) async fn post_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_switch(s, name, q, move |sw| flows_api::add_flows(sw, &body(b)?)).await
}

/// `PATCH /v1/bridges/{name}/flows`.
pub(super) async fn patch_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_switch(s, name, q, move |sw| flows_api::mod_flows(sw, &body(b)?)).await
}

/// `DELETE /v1/bridges/{name}/flows`.
pub(super) async fn delete_flows(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_switch(s, name, q, move |sw| {
        flows_api::del_flows(sw, &optional_body(b)?)
    })
    .await
}

/// `GET /v1/bridges/{name}/groups`.
pub(super) async fn get_groups(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    on_switch(s, name, q, |sw| Ok(flows_api::dump_groups(sw))).await
}

/// `POST /v1/bridges/{name}/groups`.
pub(super) async fn post_groups(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_switch(s, name, q, move |sw| flows_api::add_groups(sw, &body(b)?)).await
}

/// `DELETE /v1/bridges/{name}/groups`.
pub(super) async fn delete_groups(
    s: Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_switch(s, name, q, move |sw| {
        flows_api::del_groups(sw, &optional_body(b)?)
    })
    .await
}

/// `GET /v1/bridges/{name}/megaflows`.
pub(super) async fn get_megaflows(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    on_switch(s, name, q, |sw| Ok(flows_api::dump_megaflows(sw))).await
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
