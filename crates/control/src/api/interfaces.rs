//! Ports added and removed by the API while the data plane runs: `POST /v1/interfaces` takes a
//! JSON object with the keys of a config file's `[[port]]` table, checked by the config's own
//! validation, and `DELETE /v1/interfaces/{name}` removes a port. It owns the translation
//! between HTTP and `dataplane::ports_live::PortControl`; it never touches the graph.

use super::error::ApiError;
use super::resources::{blocking, params, Body, Params, Shared};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The keys a runtime port may not have yet (they name bridges and flow bridges, which the
/// running data plane fixed at start).
const NOT_AT_RUN_TIME: &[&str] = &[
    "bridge",
    "access-vlan",
    "trunk-vlans",
    "native-vlan",
    "ofport",
    "emc",
    "megaflow",
];

fn answer(r: Result<(StatusCode, Value), ApiError>) -> Response {
    match r {
        Ok((status, v)) => (status, axum::Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}

fn conflict(message: String) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, message)
}

/// The `[[port]]` table of a JSON object, validated as the config validates one.
pub(crate) fn port_of_json(v: &Value) -> Result<dataplane::PortSpec, ApiError> {
    let Some(obj) = v.as_object() else {
        return Err(ApiError::bad(
            "body",
            "accepted: a JSON object with the keys of a [[port]] table, e.g. {\"name\": \"p1\", \
             \"driver\": \"af-packet\", \"interface\": \"veth1\", \"mac\": \"02:00:00:00:00:01\", \
             \"ip4\": [\"198.18.3.1/24\"]}",
        ));
    };
    if obj.contains_key("features") {
        return Err(ApiError::bad(
            "features",
            "`features` is not taken here; add the port, then enable its features with POST \
             /v1/features (or `vecplane ctl set interface feature PORT FEATURE arc ARC`)",
        ));
    }
    if let Some(k) = obj.keys().find(|k| NOT_AT_RUN_TIME.contains(&k.as_str())) {
        return Err(ApiError::bad(
            k,
            format!(
                "`{k}` cannot be given to a port added at run time yet (bridges and flow \
                 bridges are fixed at start); add the port in the config file and restart"
            ),
        ));
    }
    let table = toml::Value::try_from(v).map_err(|e| {
        ApiError::bad(
            "body",
            format!("{e}; accepted: strings, integers, booleans and arrays of them"),
        )
    })?;
    let mut doc = toml::Table::new();
    doc.insert("port".into(), toml::Value::Array(vec![table]));
    let text = toml::to_string(&doc)
        .map_err(|e| ApiError::bad("body", format!("cannot be a [[port]] table: {e}")))?;
    let base = std::env::current_dir().unwrap_or_else(|_| "/".into());
    match crate::config::Config::parse(&text, "POST /v1/interfaces", &base) {
        Ok(c) => c.spec.ports.into_iter().next().ok_or_else(|| {
            ApiError::bad("body", "no port in the body; accepted: one [[port]] table")
        }),
        Err(crate::config::ConfigError::Invalid(issues)) => {
            let first = issues.first();
            let field = first.and_then(|i| i.field.clone()).unwrap_or_default();
            let message = issues
                .iter()
                .map(|i| match &i.field {
                    Some(f) => format!("`{f}`: {}", i.message),
                    None => i.message.clone(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            Err(ApiError::bad(
                if field.is_empty() { "body" } else { &field },
                message,
            ))
        }
        Err(e) => Err(ApiError::bad("body", e.to_string())),
    }
}

/// `POST /v1/interfaces`: add a port; 201 with its id.
pub(super) async fn post_interface(s: Shared, q: Params, b: Body) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let v: Value = super::resources::body(b)?;
            let port = port_of_json(&v)?;
            let pc = s.view.port_control.clone().ok_or_else(|| {
                conflict("this data plane cannot change its ports while it runs".into())
            })?;
            let name = port.name.clone();
            let id = pc.add(port).map_err(|e| conflict(e.0))?;
            // The driver as `show interfaces` names it.
            let ports = s.view.ports.get();
            let driver = ports.get(usize::from(id)).map_or("", |p| p.driver.as_str());
            Ok((
                StatusCode::CREATED,
                json!({"index": id, "name": name, "driver": driver}),
            ))
        })
        .await,
    )
}

/// `DELETE /v1/interfaces/{name}`: remove a port; its id and the packets freed.
pub(super) async fn delete_interface(s: Shared, Path(name): Path<String>, q: Params) -> Response {
    answer(
        blocking(move || {
            params(q, &[])?;
            let pc = s.view.port_control.clone().ok_or_else(|| {
                conflict("this data plane cannot change its ports while it runs".into())
            })?;
            let ports = pc.ports();
            if !ports.iter().any(|(_, p)| p.name == name) {
                let names: Vec<&str> = ports.iter().map(|(_, p)| p.name.as_str()).collect();
                return Err(ApiError::not_found(format!(
                    "there is no port `{name}`; accepted: {}",
                    names.join(", ")
                )));
            }
            let r = pc.remove(&name).map_err(|e| conflict(e.0))?;
            Ok((
                StatusCode::OK,
                json!({"index": r.id, "name": name, "freed_packets": r.freed_packets}),
            ))
        })
        .await,
    )
}
