//! The load balancer's resources: `/v1/lb` (everything), `/v1/lb/commands` (VPP `lb` lines,
//! all or nothing), `/v1/lb/conf`, `/v1/lb/health`, `/v1/lb/vips[/{id}[/servers[/{address}]]]`. Handlers
//! translate HTTP to `lb_api` and run its work off the runtime's thread; they hold no lock
//! across an await.

use super::error::ApiError;
use super::resources::{blocking, body, params, Body, Params, Shared};
use crate::lb_api;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use dataplane::lb::LbControl;
use serde_json::Value;
use std::collections::HashMap;

fn answer(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Run `f` on the load balancer off the runtime's thread; the query may hold `allowed`.
async fn on_lb(
    s: Shared,
    q: Params,
    allowed: &'static [&'static str],
    f: impl FnOnce(&LbControl, HashMap<String, String>) -> Result<Value, ApiError> + Send + 'static,
) -> Response {
    answer(
        blocking(move || {
            let map = params(q, allowed)?;
            f(&lb_api::find(&s.view), map)
        })
        .await,
    )
}

/// `GET /v1/lb`.
pub(super) async fn get_lb(s: Shared, q: Params) -> Response {
    on_lb(s, q, &[], |lb, _| Ok(lb_api::overview(lb))).await
}

/// `POST /v1/lb/commands`.
pub(super) async fn post_commands(s: Shared, q: Params, b: Body) -> Response {
    on_lb(s, q, &[], move |lb, _| lb_api::commands(lb, &body(b)?)).await
}

/// `GET /v1/lb/health`: the health checks' status (404 when none run).
pub(super) async fn get_health(s: Shared, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            match s.control.health() {
                Some(h) => Ok(crate::health::json::status_json(&h.status())),
                None => Err(ApiError::new(
                    axum::http::StatusCode::NOT_FOUND,
                    "no health checks run: add [[lb.health-check]] tables to the config"
                        .to_string(),
                )),
            }
        })
        .await,
    )
}

/// `GET /v1/lb/conf`.
pub(super) async fn get_conf(s: Shared, q: Params) -> Response {
    on_lb(s, q, &[], |lb, _| Ok(lb_api::conf_json(&lb.state()))).await
}

/// `PATCH /v1/lb/conf`.
pub(super) async fn patch_conf(s: Shared, q: Params, b: Body) -> Response {
    on_lb(s, q, &[], move |lb, _| lb_api::change_conf(lb, &body(b)?)).await
}

/// `GET /v1/lb/vips`.
pub(super) async fn get_vips(s: Shared, q: Params) -> Response {
    on_lb(s, q, &[], |lb, _| Ok(lb_api::list_vips(lb))).await
}

/// `POST /v1/lb/vips`.
pub(super) async fn post_vip(s: Shared, q: Params, b: Body) -> Response {
    on_lb(s, q, &[], move |lb, _| lb_api::create_vip(lb, &body(b)?)).await
}

/// `GET /v1/lb/vips/{id}`.
pub(super) async fn get_vip(s: Shared, Path(id): Path<String>, q: Params) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::get_vip(lb, lb_api::parse_id(&id)?)
    })
    .await
}

/// `PATCH /v1/lb/vips/{id}`.
pub(super) async fn patch_vip(s: Shared, Path(id): Path<String>, q: Params, b: Body) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::change_vip(lb, lb_api::parse_id(&id)?, &body(b)?)
    })
    .await
}

/// `DELETE /v1/lb/vips/{id}`.
pub(super) async fn delete_vip(s: Shared, Path(id): Path<String>, q: Params) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::delete_vip(lb, lb_api::parse_id(&id)?)
    })
    .await
}

/// `GET /v1/lb/vips/{id}/servers`.
pub(super) async fn get_servers(s: Shared, Path(id): Path<String>, q: Params) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::list_servers(lb, lb_api::parse_id(&id)?)
    })
    .await
}

/// `POST /v1/lb/vips/{id}/servers`.
pub(super) async fn post_servers(
    s: Shared,
    Path(id): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::add_servers(lb, lb_api::parse_id(&id)?, &body(b)?)
    })
    .await
}

/// `GET /v1/lb/vips/{id}/servers/{address}`.
pub(super) async fn get_server(
    s: Shared,
    Path((id, address)): Path<(String, String)>,
    q: Params,
) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::get_server(lb, lb_api::parse_id(&id)?, &address)
    })
    .await
}

/// `PATCH /v1/lb/vips/{id}/servers/{address}`.
pub(super) async fn patch_server(
    s: Shared,
    Path((id, address)): Path<(String, String)>,
    q: Params,
    b: Body,
) -> Response {
    on_lb(s, q, &[], move |lb, _| {
        lb_api::set_weight(lb, lb_api::parse_id(&id)?, &address, &body(b)?)
    })
    .await
}

/// `DELETE /v1/lb/vips/{id}/servers/{address}[?flush=true]`.
pub(super) async fn delete_server(
    s: Shared,
    Path((id, address)): Path<(String, String)>,
    q: Params,
) -> Response {
    on_lb(s, q, &["flush"], move |lb, map| {
        let flush = match map.get("flush").map(String::as_str) {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") | Some("") => true,
            Some(v) => {
                return Err(ApiError::bad(
                    "flush",
                    format!("`{v}` is not a yes/no value; use true or false"),
                ))
            }
        };
        lb_api::delete_server(lb, lb_api::parse_id(&id)?, &address, flush)
    })
    .await
}
