//! The API's resources: every `vecplane ctl` command as a REST resource (reads as GET, actions
//! as POST/DELETE), the command language itself (`POST /v1/command`, what `vecplane ctl`
//! sends), routes and static neighbours (create, read, update, delete, list), batches, reload
//! and the Prometheus metrics. Handlers only translate HTTP to the command engine and the
//! routing model; they never hold a lock across an await and run blocking work off the
//! runtime's thread.

use super::error::{json_error, ApiError};
use super::ApiState;
use crate::commands::Reply;
use crate::policies_api;
use crate::routes_api::{self, BatchBody, NeighbourBody, RouteBody, RoutesBody};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use dataplane::routing::Change;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

pub(super) type Shared = State<Arc<ApiState>>;
pub(super) type Params = Result<Query<HashMap<String, String>>, QueryRejection>;
pub(super) type Body = Result<Bytes, BytesRejection>;

/// Run blocking `f` off the runtime's thread.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request's task failed: {e}"),
        )
    })?
}

/// The query's parameters, refusing any not in `allowed`.
pub(super) fn params(q: Params, allowed: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let Query(map) = q.map_err(|e| ApiError::bad("query", e.body_text()))?;
    if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::bad(
            k,
            format!(
                "unknown query parameter `{k}`; accepted: {}",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        ));
    }
    Ok(map)
}

/// A yes/no query parameter.
fn flag(map: &HashMap<String, String>, key: &str) -> Result<bool, ApiError> {
    match map.get(key).map(String::as_str) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(v) => Err(ApiError::bad(
            key,
            format!("`{v}` is not a yes/no value; use true or false"),
        )),
    }
}

/// The JSON body as `T` (unknown fields refused by `T`).
pub(super) fn body<T: DeserializeOwned>(b: Body) -> Result<T, ApiError> {
    let bytes = b.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    if bytes.is_empty() {
        return Err(ApiError::bad("body", "the request needs a JSON body"));
    }
    serde_json::from_slice(&bytes).map_err(|e| json_error(&e))
}

/// Run a command of the command language; its JSON data, or its text with `format=text`.
async fn command(state: Arc<ApiState>, line: String, text: bool) -> Response {
    let result = blocking(move || Ok(state.control.execute(&line, !text))).await;
    match result {
        Ok(Reply {
            ok: true,
            text: t,
            data,
            ..
        }) => {
            if text {
                (
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    t.unwrap_or_default(),
                )
                    .into_response()
            } else {
                axum::Json(data.unwrap_or(Value::Null)).into_response()
            }
        }
        Ok(Reply { error, .. }) => ApiError::new(
            StatusCode::BAD_REQUEST,
            error.unwrap_or_else(|| "the command failed".into()),
        )
        .into_response(),
        Err(e) => e.into_response(),
    }
}

fn wants_text(map: &HashMap<String, String>) -> Result<bool, ApiError> {
    match map.get("format").map(String::as_str) {
        None | Some("json") => Ok(false),
        Some("text") => Ok(true),
        Some(v) => Err(ApiError::bad(
            "format",
            format!("`{v}` is not a format; use json or text"),
        )),
    }
}

/// `POST /v1/command`: one line of the command language (what `vecplane ctl` sends).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandBody {
    command: String,
    #[serde(default)]
    json: bool,
}

pub(crate) async fn post_command(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<CommandBody, ApiError> {
        params(q, &[])?;
        body(b)
    };
    match run() {
        Ok(c) => {
            let state = s.clone();
            let reply = blocking(move || Ok(state.control.execute(&c.command, c.json))).await;
            match reply {
                Ok(r) if r.ok => axum::Json(r).into_response(),
                Ok(r) => ApiError::new(
                    StatusCode::BAD_REQUEST,
                    r.error.unwrap_or_else(|| "the command failed".into()),
                )
                .into_response(),
                Err(e) => e.into_response(),
            }
        }
        Err(e) => e.into_response(),
    }
}

/// A read resource backed by one command (`all`, `format` as query parameters).
macro_rules! show {
    ($name:ident, $line:expr, [$($extra:literal),*]) => {
        pub(crate) async fn $name(State(s): Shared, q: Params) -> Response {
            let map = match params(q, &["format" $(, $extra)*]) {
                Ok(m) => m,
                Err(e) => return e.into_response(),
            };
            let text = match wants_text(&map) {
                Ok(t) => t,
                Err(e) => return e.into_response(),
            };
            let line: Result<String, ApiError> = $line(&map);
            match line {
                Ok(l) => command(s, l, text).await,
                Err(e) => e.into_response(),
            }
        }
    };
}

show!(
    get_runtime,
    |m: &HashMap<String, String>| Ok(if flag(m, "all")? {
        "show runtime all"
    } else {
        "show runtime"
    }
    .to_string()),
    ["all"]
);
show!(
    get_rxq,
    |_: &HashMap<String, String>| Ok("show rxq".to_string()),
    []
);
show!(
    get_features,
    |_: &HashMap<String, String>| Ok("show features".to_string()),
    []
);
/// `GET /v1/features/{name}`: `show NAME` of a registered feature.
pub(crate) async fn get_feature(
    State(s): Shared,
    axum::extract::Path(name): axum::extract::Path<String>,
    q: Params,
) -> Response {
    let run = || -> Result<(String, bool), ApiError> {
        let map = params(q, &["format"])?;
        let text = wants_text(&map)?;
        if crate::registry::find(&name).is_none() {
            return Err(ApiError::not_found(format!(
                "no feature `{name}`; registered: {}",
                crate::registry::installed()
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok((format!("show {name}"), text))
    };
    match run() {
        Ok((line, text)) => command(s, line, text).await,
        Err(e) => e.into_response(),
    }
}

show!(
    get_interfaces,
    |_: &HashMap<String, String>| Ok("show interfaces".to_string()),
    []
);
show!(
    get_errors,
    |_: &HashMap<String, String>| Ok("show errors".to_string()),
    []
);
show!(
    get_neighbour_tables,
    |_: &HashMap<String, String>| Ok("show neighbours".to_string()),
    []
);
show!(
    get_bridges,
    |_: &HashMap<String, String>| Ok("show bridge".to_string()),
    []
);
show!(
    get_trace,
    |_: &HashMap<String, String>| Ok("show trace".to_string()),
    []
);
show!(
    get_punt,
    |_: &HashMap<String, String>| Ok("show punt".to_string()),
    []
);
show!(
    get_pcap,
    |_: &HashMap<String, String>| Ok("show pcap".to_string()),
    []
);

/// `GET /v1/fib/{family}[?lookup=ADDRESS|PREFIX | ?after=PREFIX&limit=N]`.
pub(crate) async fn get_fib(State(s): Shared, Path(family): Path<String>, q: Params) -> Response {
    let run = || -> Result<(String, bool), ApiError> {
        let map = params(q, &["format", "lookup", "after", "limit"])?;
        let fam = match family.as_str() {
            "ipv4" => "ip",
            "ipv6" => "ip6",
            other => {
                return Err(ApiError::not_found(format!(
                    "there is no FIB `{other}`; use ipv4 or ipv6"
                )))
            }
        };
        let mut line = format!("show {fam} fib");
        if let Some(l) = map.get("lookup") {
            if l.split_whitespace().count() != 1 {
                return Err(ApiError::bad("lookup", "give one address or prefix"));
            }
            if map.contains_key("after") || map.contains_key("limit") {
                return Err(ApiError::bad(
                    "lookup",
                    "a lookup is one entry; give `lookup` or `after`/`limit`, not both",
                ));
            }
            line.push(' ');
            line.push_str(l);
        }
        for key in ["after", "limit"] {
            if let Some(v) = map.get(key) {
                if v.split_whitespace().count() != 1 {
                    return Err(ApiError::bad(key, format!("`{v}` is not one word")));
                }
                line.push_str(&format!(" {key} {v}"));
            }
        }
        Ok((line, wants_text(&map)?))
    };
    match run() {
        Ok((line, text)) => command(s, line, text).await,
        Err(e) => e.into_response(),
    }
}

/// An action backed by one command: its reply's data, or the error.
async fn action(s: Arc<ApiState>, line: String) -> Response {
    command(s, line, false).await
}

/// `POST /v1/clear/{runtime|interfaces|errors|trace}`.
pub(crate) async fn post_clear(State(s): Shared, Path(what): Path<String>, q: Params) -> Response {
    if let Err(e) = params(q, &[]) {
        return e.into_response();
    }
    match what.as_str() {
        "runtime" | "interfaces" | "errors" | "trace" => action(s, format!("clear {what}")).await,
        other => ApiError::not_found(format!(
            "cannot clear `{other}`; accepted: runtime, interfaces, errors, trace"
        ))
        .into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceBody {
    node: String,
    count: u32,
}

/// `POST /v1/trace {"node", "count"}`.
pub(crate) async fn post_trace(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<String, ApiError> {
        params(q, &[])?;
        let t: TraceBody = body(b)?;
        if t.node.split_whitespace().count() != 1 {
            return Err(ApiError::bad(
                "node",
                "give one input node name, e.g. in0-rx",
            ));
        }
        Ok(format!("trace add {} {}", t.node, t.count))
    };
    match run() {
        Ok(line) => action(s, line).await,
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/trace`.
pub(crate) async fn delete_trace(State(s): Shared, q: Params) -> Response {
    match params(q, &[]) {
        Ok(_) => action(s, "clear trace".into()).await,
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PcapBody {
    port: String,
    file: String,
    #[serde(default)]
    direction: Option<String>,
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    snaplen: Option<u32>,
}

/// `POST /v1/pcap {"port", "file", "direction", "count", "snaplen"}`.
pub(crate) async fn post_pcap(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<String, ApiError> {
        params(q, &[])?;
        let p: PcapBody = body(b)?;
        for (field, v) in [("port", &p.port), ("file", &p.file)] {
            if v.is_empty() || v.chars().any(char::is_whitespace) {
                return Err(ApiError::bad(
                    field,
                    format!("`{v}` is empty or has spaces"),
                ));
            }
        }
        let mut line = format!("pcap start {} {}", p.port, p.file);
        if let Some(d) = &p.direction {
            if !matches!(d.as_str(), "rx" | "tx" | "both") {
                return Err(ApiError::bad(
                    "direction",
                    format!("`{d}` is not a direction; use rx, tx or both"),
                ));
            }
            line.push(' ');
            line.push_str(d);
        }
        if let Some(c) = p.count {
            line.push_str(&format!(" count {c}"));
        }
        if let Some(n) = p.snaplen {
            line.push_str(&format!(" snaplen {n}"));
        }
        Ok(line)
    };
    match run() {
        Ok(line) => action(s, line).await,
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/pcap`.
pub(crate) async fn delete_pcap(State(s): Shared, q: Params) -> Response {
    match params(q, &[]) {
        Ok(_) => action(s, "pcap stop".into()).await,
        Err(e) => e.into_response(),
    }
}

// --- Routes, static neighbours, batches --------------------------------------------------------

/// Apply `changes` (built on the blocking pool) with status `ok`.
async fn apply(s: Arc<ApiState>, changes: Vec<Change>, wait: bool, ok: StatusCode) -> Response {
    let result = blocking(move || {
        routes_api::apply(&s.view.routing, &changes, wait).map_err(ApiError::from)
    })
    .await;
    match result {
        Ok(v) => (ok, axum::Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/routes?family=ipv4|ipv6&after=PREFIX&limit=N`.
pub(crate) async fn get_routes(State(s): Shared, q: Params) -> Response {
    let run = || -> Result<(String, Option<String>, Option<usize>), ApiError> {
        let map = params(q, &["family", "after", "limit"])?;
        let limit =
            match map.get("limit") {
                Some(l) => Some(l.parse::<usize>().map_err(|_| {
                    ApiError::bad("limit", format!("`{l}` is not a number of routes"))
                })?),
                None => None,
            };
        Ok((
            map.get("family").cloned().unwrap_or_else(|| "ipv4".into()),
            map.get("after").cloned(),
            limit,
        ))
    };
    let (family, after, limit) = match run() {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let r = blocking(move || {
        routes_api::list_routes(&s.view.routing, &family, after.as_deref(), limit)
            .map_err(ApiError::from)
    })
    .await;
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/routes`: one route (`{"prefix", "via"|"drop"}`) or several (`{"routes": [...]}`).
pub(crate) async fn post_routes(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<(Vec<Change>, bool), ApiError> {
        let map = params(q, &["wait"])?;
        let wait = map.get("wait").map(String::as_str) == Some("visible");
        let v: Value = body(b)?;
        let bodies: Vec<RouteBody> = if v.get("routes").is_some() {
            serde_json::from_value::<RoutesBody>(v)
                .map_err(|e| json_error(&e))?
                .routes
        } else {
            vec![serde_json::from_value::<RouteBody>(v).map_err(|e| json_error(&e))?]
        };
        let mut changes = Vec::with_capacity(bodies.len());
        for (i, r) in bodies.iter().enumerate() {
            let route = routes_api::route_of(r).map_err(|e| {
                let mut e = ApiError::from(e);
                e.item = Some(i);
                e
            })?;
            changes.push(Change::AddRoute(route));
        }
        Ok((changes, wait))
    };
    match run() {
        Ok((changes, wait)) => apply(s, changes, wait, StatusCode::CREATED).await,
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/routes/{address}/{length}`.
pub(crate) async fn get_route(
    State(s): Shared,
    Path((addr, len)): Path<(String, String)>,
    q: Params,
) -> Response {
    if let Err(e) = params(q, &[]) {
        return e.into_response();
    }
    let prefix = format!("{addr}/{len}");
    match routes_api::get_route(&s.view.routing, &prefix) {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// A route body whose prefix, if given, must be the path's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteUpdate {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    via: Option<Vec<String>>,
    #[serde(default)]
    drop: Option<bool>,
}

/// `PUT /v1/routes/{address}/{length}`: add or replace.
pub(crate) async fn put_route(
    State(s): Shared,
    Path((addr, len)): Path<(String, String)>,
    q: Params,
    b: Body,
) -> Response {
    let run = || -> Result<(Vec<Change>, bool), ApiError> {
        let map = params(q, &["wait"])?;
        let u: RouteUpdate = body(b)?;
        let prefix = format!("{addr}/{len}");
        if let Some(p) = &u.prefix {
            if *p != prefix {
                return Err(ApiError::bad(
                    "prefix",
                    format!("the body names {p} but the path names {prefix}"),
                ));
            }
        }
        let route = routes_api::route_of(&RouteBody {
            prefix,
            via: u.via,
            drop: u.drop,
        })?;
        Ok((
            vec![Change::ReplaceRoute(route)],
            map.get("wait").map(String::as_str) == Some("visible"),
        ))
    };
    match run() {
        Ok((c, wait)) => apply(s, c, wait, StatusCode::OK).await,
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/routes/{address}/{length}`.
pub(crate) async fn delete_route(
    State(s): Shared,
    Path((addr, len)): Path<(String, String)>,
    q: Params,
) -> Response {
    let run = || -> Result<(Vec<Change>, bool), ApiError> {
        let map = params(q, &["wait"])?;
        let (prefix, len) = routes_api::parse_prefix(&format!("{addr}/{len}"))
            .map_err(|m| ApiError::bad("prefix", m))?;
        Ok((
            vec![Change::DeleteRoute { prefix, len }],
            map.get("wait").map(String::as_str) == Some("visible"),
        ))
    };
    match run() {
        Ok((c, wait)) => apply(s, c, wait, StatusCode::OK).await,
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/neighbours`: the static neighbours.
pub(crate) async fn get_neighbours(State(s): Shared, q: Params) -> Response {
    match params(q, &[]) {
        Ok(_) => {
            axum::Json(routes_api::list_neighbours(&s.view.routing, &s.ports())).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/neighbours {"ip", "mac", "port"}`.
pub(crate) async fn post_neighbour(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<Vec<Change>, ApiError> {
        params(q, &[])?;
        let n: NeighbourBody = body(b)?;
        Ok(vec![Change::AddNeighbour(routes_api::neighbour_of(
            &n,
            &s.ports(),
        )?)])
    };
    match run() {
        Ok(c) => apply(s, c, false, StatusCode::CREATED).await,
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/neighbours/{ip}`.
pub(crate) async fn get_neighbour(State(s): Shared, Path(ip): Path<String>, q: Params) -> Response {
    if let Err(e) = params(q, &[]) {
        return e.into_response();
    }
    match routes_api::get_neighbour(&s.view.routing, &ip, &s.ports()) {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// `PUT /v1/neighbours/{ip} {"mac", "port"}`: add or replace.
pub(crate) async fn put_neighbour(
    State(s): Shared,
    Path(ip): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Update {
        #[serde(default)]
        ip: Option<String>,
        mac: String,
        port: String,
    }
    let run = || -> Result<Vec<Change>, ApiError> {
        params(q, &[])?;
        let u: Update = body(b)?;
        if let Some(other) = u.ip.as_ref().filter(|o| **o != ip) {
            return Err(ApiError::bad(
                "ip",
                format!("the body names {other} but the path names {ip}"),
            ));
        }
        let n = NeighbourBody {
            ip: ip.clone(),
            mac: Some(u.mac),
            port: Some(u.port),
        };
        Ok(vec![Change::ReplaceNeighbour(routes_api::neighbour_of(
            &n,
            &s.ports(),
        )?)])
    };
    match run() {
        Ok(c) => apply(s, c, false, StatusCode::OK).await,
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/neighbours/{ip}`.
pub(crate) async fn delete_neighbour(
    State(s): Shared,
    Path(ip): Path<String>,
    q: Params,
) -> Response {
    let run = || -> Result<Vec<Change>, ApiError> {
        params(q, &[])?;
        let addr = ip
            .parse()
            .map_err(|_| ApiError::bad("ip", format!("`{ip}` is not an IPv4 or IPv6 address")))?;
        Ok(vec![Change::DeleteNeighbour(addr)])
    };
    match run() {
        Ok(c) => apply(s, c, false, StatusCode::OK).await,
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/batch[?wait=visible] {"changes": [...]}`: all or nothing.
pub(crate) async fn post_batch(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<(Vec<Change>, bool), ApiError> {
        let map = params(q, &["wait"])?;
        let wait = match map.get("wait").map(String::as_str) {
            None => false,
            Some("visible") => true,
            Some(v) => {
                return Err(ApiError::bad(
                    "wait",
                    format!("`{v}` is not a wait; use wait=visible"),
                ))
            }
        };
        let batch: BatchBody = body(b)?;
        Ok((routes_api::changes_of(&batch, &s.ports())?, wait))
    };
    match run() {
        Ok((c, wait)) => apply(s, c, wait, StatusCode::OK).await,
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/reload`: re-read the config file and apply the difference (see `ApiState`).
pub(crate) async fn post_reload(State(s): Shared, q: Params) -> Response {
    if let Err(e) = params(q, &[]) {
        return e.into_response();
    }
    let Some(reload) = s.reload.clone() else {
        return ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "this daemon has no config file to reload",
        )
        .into_response();
    };
    match blocking(move || reload()).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /metrics`: OpenMetrics when the scraper asks for it (Prometheus does), else the
/// classic Prometheus text format.
pub(crate) async fn get_metrics(State(s): Shared, headers: axum::http::HeaderMap) -> Response {
    let open = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let text = blocking(move || {
        let health = s.control.health().map(|h| h.status());
        let bgp = s.control.announcer().map(|a| a.show().1);
        let mut t =
            crate::metrics::render_with(&s.view, health.as_ref(), bgp.as_ref(), Some(&s.counters));
        // The registered features' families, before the exposition's end marker.
        let features: String = s
            .control
            .running_features()
            .iter()
            .map(|r| r.metrics())
            .collect();
        if !features.is_empty() {
            let body = t.strip_suffix("# EOF\n").unwrap_or(&t).to_string();
            t = format!("{body}{features}# EOF\n");
        }
        Ok(if open {
            t
        } else {
            crate::metrics::to_text_format(&t)
        })
    })
    .await;
    let kind = if open {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    match text {
        Ok(t) => ([(header::CONTENT_TYPE, kind)], t).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1`: what this API is and where its description is.
pub(crate) async fn get_index() -> Response {
    axum::Json(json!({
        "name": "vecplane",
        "api": "v1",
        "version": env!("CARGO_PKG_VERSION"),
        "openapi": "/v1/openapi.json",
    }))
    .into_response()
}

/// `GET /v1/openapi.json`.
pub(crate) async fn get_openapi() -> Response {
    axum::Json(super::openapi::document()).into_response()
}

/// Unknown path.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    ApiError::not_found(format!(
        "there is no resource {}; GET /v1/openapi.json lists them",
        uri.path()
    ))
    .into_response()
}

/// Known path, other method.
pub(crate) async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} is not accepted on {}; GET /v1/openapi.json lists the methods",
            uri.path()
        ),
    )
    .into_response()
}

/// `GET /v1/policies`: the settings that change live, with the config's key names.
pub(crate) async fn get_policies(State(s): Shared, q: Params) -> Response {
    match params(q, &[]) {
        Ok(_) => axum::Json(policies_api::show(&s.view.policies)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// The body of `POST /v1/features`: changes applied together, all or none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeaturesBody {
    changes: Vec<FeatureChangeBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FeatureChangeBody {
    port: String,
    feature: String,
    arc: String,
    #[serde(default = "enabled")]
    enable: bool,
}

fn enabled() -> bool {
    true
}

/// `POST /v1/features`: enable and disable features of the arcs on ports, all or none.
pub(crate) async fn post_features(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<Value, ApiError> {
        params(q, &[])?;
        let req: FeaturesBody = body(b)?;
        let changes: Vec<crate::commands::FeatureChange> = req
            .changes
            .into_iter()
            .map(|c| crate::commands::FeatureChange {
                port: c.port,
                feature: c.feature,
                arc: c.arc,
                enable: c.enable,
            })
            .collect();
        let (_, data) = crate::commands::apply_features(&s.view, &changes)
            .map_err(|e| ApiError::bad("changes", e.0))?;
        Ok(data)
    };
    match run() {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `PATCH /v1/policies`: change some of them (checked whole first: all or nothing).
pub(crate) async fn patch_policies(State(s): Shared, q: Params, b: Body) -> Response {
    let run = || -> Result<Value, ApiError> {
        params(q, &[])?;
        let patch: policies_api::PolicyPatch = body(b)?;
        let changed = policies_api::apply(&s.view.policies, &patch)?;
        Ok(json!({
            "policies_changed": changed,
            "policies": policies_api::show(&s.view.policies),
        }))
    };
    match run() {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InterfacePatch {
    mtu: Option<i64>,
    ip4: Option<Vec<String>>,
    ip6: Option<Vec<String>>,
}

/// The port's new addresses from `patch` (each family it names replaces that family's list),
/// checked as the config checks own addresses, and against the other ports' subnets in
/// `routing` (the caller holds its lock until the addresses are applied).
fn patched_addresses(
    s: &ApiState,
    routing: &dataplane::routing::Routing,
    port: usize,
    patch: &InterfacePatch,
) -> Result<Option<nodes::neighbour::OwnAddresses>, ApiError> {
    if patch.ip4.is_none() && patch.ip6.is_none() {
        return Ok(None);
    }
    let names = s.ports();
    let port_name = names.get(port).map(String::as_str).unwrap_or("?");
    let current = routing.port_addresses(port).unwrap_or_default().to_vec();
    let mut v4: Vec<(std::net::Ipv4Addr, u8)> = Vec::new();
    let mut v6: Vec<(std::net::Ipv6Addr, u8)> = Vec::new();
    for (a, l) in &current {
        match a {
            IpAddr::V4(x) if patch.ip4.is_none() => v4.push((*x, *l)),
            IpAddr::V6(x) if patch.ip6.is_none() => v6.push((*x, *l)),
            _ => {}
        }
    }
    let lists = [("ip4", &patch.ip4, false), ("ip6", &patch.ip6, true)];
    for (field, list, want_v6) in lists {
        for (i, text) in list.iter().flatten().enumerate() {
            let f = format!("{field}[{i}]");
            let (ip, len) = crate::config::parse_prefix(text)
                .map_err(|why| ApiError::bad(&f, format!("`{text}` {why}")))?;
            if ip.is_ipv6() != want_v6 {
                return Err(ApiError::bad(
                    &f,
                    format!(
                        "`{text}` is not an {} address",
                        if want_v6 { "IPv6" } else { "IPv4" }
                    ),
                ));
            }
            if let Some(problem) = crate::config::own_address_problem(text, ip, len) {
                return Err(ApiError::bad(&f, problem));
            }
            let earlier: Vec<(IpAddr, u8)> = if want_v6 {
                v6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)).collect()
            } else {
                v4.iter().map(|(a, l)| (IpAddr::V4(*a), *l)).collect()
            };
            if let Some(problem) = crate::config::repeated_address(text, ip, &earlier, port_name) {
                return Err(ApiError::bad(&f, problem));
            }
            for (other, addrs) in (0..names.len())
                .filter(|&o| o != port)
                .filter_map(|o| routing.port_addresses(o).map(|a| (o, a)))
            {
                for &(b, bl) in addrs {
                    if crate::config::contains(b, len.min(bl), ip) {
                        return Err(ApiError::bad(
                            &f,
                            format!(
                                "`{text}` overlaps {b}/{bl} of port `{}`; accepted: a subnet \
                                 no other port has",
                                names.get(other).map(String::as_str).unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            match ip {
                IpAddr::V4(x) => v4.push((x, len)),
                IpAddr::V6(x) => v6.push((x, len)),
            }
        }
    }
    // Each static neighbour of the port stays on one of its subnets, as the config requires.
    for n in routing.neighbours().iter().filter(|n| n.port == port) {
        let (field, nets): (&str, Vec<(IpAddr, u8)>) = match n.ip {
            IpAddr::V4(_) if patch.ip4.is_some() => (
                "ip4",
                v4.iter().map(|(a, l)| (IpAddr::V4(*a), *l)).collect(),
            ),
            IpAddr::V6(_) if patch.ip6.is_some() => (
                "ip6",
                v6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)).collect(),
            ),
            _ => continue,
        };
        if let Some(problem) = crate::config::neighbour_placement_problem(n.ip, port_name, &nets) {
            return Err(ApiError::bad(field, problem));
        }
    }
    Ok(Some((v4, v6)))
}

/// `PATCH /v1/interfaces/{name} {"mtu": N, "ip4": [..], "ip6": [..]}`: a port's MTU and own
/// addresses, live (the routing tables as one version each, then every worker's neighbour
/// tables and ICMP sources); without a body key, its current settings.
pub(crate) async fn patch_interface(
    State(s): Shared,
    Path(name): Path<String>,
    q: Params,
    b: Body,
) -> Response {
    let run = move || -> Result<Value, ApiError> {
        params(q, &[])?;
        let patch: InterfacePatch = body(b)?;
        let names = s.ports();
        let Some(port) = names.iter().position(|p| *p == name) else {
            return Err(ApiError::not_found(format!(
                "there is no port `{name}`; accepted: {}",
                names.join(", ")
            )));
        };
        // Everything is checked before anything changes.
        let mtu = match patch.mtu {
            None => None,
            Some(m) => match u16::try_from(m) {
                Ok(m) if (68..=9000).contains(&m) => Some(m),
                _ => {
                    return Err(ApiError::bad(
                        "mtu",
                        format!("{m} is out of range; accepted: 68..=9000"),
                    ))
                }
            },
        };
        // One lock from the overlap check to the change: no other request slips between.
        let mut routing = dataplane::build::lock(&s.view.routing);
        let addrs = patched_addresses(&s, &routing, port, &patch)?;
        if let Some((v4, v6)) = &addrs {
            let all: Vec<(IpAddr, u8)> = v4
                .iter()
                .map(|(a, l)| (IpAddr::V4(*a), *l))
                .chain(v6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)))
                .collect();
            routing
                .set_port_addresses(&[(port, all)])
                .map_err(|e| ApiError::new(StatusCode::CONFLICT, e.0))?;
            s.view
                .policies
                .port_addrs
                .set(port, (v4.clone(), v6.clone()));
        }
        if let Some(m) = mtu {
            routing
                .set_port_mtu(port, m)
                .map_err(|e| ApiError::new(StatusCode::CONFLICT, e.0))?;
            s.view.policies.port_mtus.set(port, m);
        }
        let shown: Vec<String> = routing
            .port_addresses(port)
            .unwrap_or_default()
            .iter()
            .map(|(a, l)| format!("{a}/{l}"))
            .collect();
        let version = routing.version();
        drop(routing);
        Ok(json!({
            "name": name,
            "mtu": s.view.policies.port_mtus.get(port),
            "addresses": shown,
            "version": version,
        }))
    };
    match blocking(run).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}
