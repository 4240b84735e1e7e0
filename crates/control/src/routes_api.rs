//! The API's model of routes and static neighbours: their JSON forms, the conversion of a
//! request into a `dataplane::routing::Change` batch (each error naming the item and field),
//! and the answers. Transport-free: the HTTP layer calls these with the request's parts. It
//! changes the tables only through `Routing::apply`, all or nothing.

use dataplane::routing::{BatchError, BatchErrorKind, Change, Route, Routing};
use dataplane::{NeighbourSpec, RouteTarget};
use packet::headers::{format_mac, parse_mac};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most routes one listing page returns.
pub const MAX_PAGE: usize = 10_000;

/// Most changes one request carries.
pub const MAX_BATCH: usize = 100_000;

/// An API failure: HTTP status, what was wrong, and where (field, batch item).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// HTTP status (4xx, 507).
    pub status: u16,
    /// What was wrong and what is accepted.
    pub message: String,
    /// The field at fault (`prefix`, `via`, `changes[3].route.via`...).
    pub field: Option<String>,
    /// Index of the batch item at fault.
    pub item: Option<usize>,
}

impl ModelError {
    fn bad(field: impl Into<String>, message: impl Into<String>) -> ModelError {
        ModelError {
            status: 400,
            message: message.into(),
            field: Some(field.into()),
            item: None,
        }
    }

    fn at(mut self, item: usize) -> ModelError {
        self.item = Some(item);
        self
    }

    /// The uniform error body `{"error":{"status","message","field","item"}}`.
    pub fn body(&self) -> Value {
        let mut e = Map::new();
        e.insert("status".into(), json!(self.status));
        e.insert("message".into(), json!(self.message));
        if let Some(f) = &self.field {
            e.insert("field".into(), json!(f));
        }
        if let Some(i) = self.item {
            e.insert("item".into(), json!(i));
        }
        json!({ "error": e })
    }
}

impl From<BatchError> for ModelError {
    fn from(e: BatchError) -> ModelError {
        ModelError {
            status: match e.kind {
                BatchErrorKind::Invalid => 400,
                BatchErrorKind::NotFound => 404,
                BatchErrorKind::Exists | BatchErrorKind::Conflict => 409,
                BatchErrorKind::NoRoom => 507,
            },
            message: e.message,
            field: e.field.map(str::to_string),
            item: e.item,
        }
    }
}

/// A route in a request: `{"prefix": "198.19.0.0/16", "via": ["198.18.1.2"]}` or
/// `{"prefix": "...", "drop": true}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteBody {
    /// `ADDRESS/LENGTH`.
    pub prefix: String,
    /// Next hops (1..=64; several: ECMP).
    #[serde(default)]
    pub via: Option<Vec<String>>,
    /// A blackhole instead of next hops.
    #[serde(default)]
    pub drop: Option<bool>,
}

/// A static neighbour in a request: `{"ip": "198.18.1.2", "mac": "02:..", "port": "out0"}`
/// (a delete needs only `ip`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourBody {
    /// Its address.
    pub ip: String,
    /// Its MAC.
    #[serde(default)]
    pub mac: Option<String>,
    /// The port (by name) it is reached through.
    #[serde(default)]
    pub port: Option<String>,
}

/// One change of a batch: `{"op": "add"|"replace"|"delete", "route": {...}}` or with
/// `"neighbour": {...}` (a delete needs only `prefix` / `ip`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeBody {
    /// `add`, `replace` or `delete`.
    pub op: String,
    /// A route.
    #[serde(default)]
    pub route: Option<RouteBody>,
    /// A static neighbour.
    #[serde(default)]
    pub neighbour: Option<NeighbourBody>,
}

/// A batch: `{"changes": [...]}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// The changes, applied all or nothing.
    pub changes: Vec<ChangeBody>,
}

/// Several routes to add at once: `{"routes": [...]}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesBody {
    /// The routes.
    pub routes: Vec<RouteBody>,
}

/// `ADDRESS/LENGTH` as an address and a length.
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, l) = s.split_once('/').ok_or_else(|| {
        format!("`{s}` is not a prefix; write ADDRESS/LENGTH, e.g. 198.19.0.0/16")
    })?;
    let ip: IpAddr = a
        .parse()
        .map_err(|_| format!("`{a}` is not an IPv4 or IPv6 address"))?;
    let len: u8 = l
        .parse()
        .map_err(|_| format!("`{l}` is not a prefix length (0..=32 for IPv4, 0..=128 for IPv6)"))?;
    Ok((ip, len))
}

fn parse_ip(field: &str, s: &str) -> Result<IpAddr, ModelError> {
    s.parse()
        .map_err(|_| ModelError::bad(field, format!("`{s}` is not an IPv4 or IPv6 address")))
}

/// A route body as a `Route`.
pub fn route_of(body: &RouteBody) -> Result<Route, ModelError> {
    let (prefix, len) = parse_prefix(&body.prefix).map_err(|m| ModelError::bad("prefix", m))?;
    let target = match (&body.via, body.drop) {
        (Some(v), None | Some(false)) => {
            let mut hops = Vec::with_capacity(v.len());
            for h in v {
                hops.push(parse_ip("via", h)?);
            }
            RouteTarget::Via(hops)
        }
        (None, Some(true)) => RouteTarget::Drop,
        _ => {
            return Err(ModelError::bad(
                "via",
                "give either `via` (a list of next-hop addresses) or `\"drop\": true`",
            ))
        }
    };
    Ok(Route {
        prefix,
        len,
        target,
    })
}

/// A neighbour body as a `NeighbourSpec`, with the port named among `ports`.
pub fn neighbour_of(body: &NeighbourBody, ports: &[String]) -> Result<NeighbourSpec, ModelError> {
    let ip = parse_ip("ip", &body.ip)?;
    let mac_text = body
        .mac
        .as_deref()
        .ok_or_else(|| ModelError::bad("mac", "a static neighbour needs its `mac`"))?;
    let mac = parse_mac(mac_text).ok_or_else(|| {
        ModelError::bad(
            "mac",
            format!(
                "`{mac_text}` is not a MAC address; write six hex bytes, e.g. 02:00:00:00:00:01"
            ),
        )
    })?;
    let port_name = body
        .port
        .as_deref()
        .ok_or_else(|| ModelError::bad("port", "a static neighbour needs its `port` (a name)"))?;
    let port = ports.iter().position(|p| p == port_name).ok_or_else(|| {
        ModelError::bad(
            "port",
            format!(
                "there is no port `{port_name}`; ports are {}",
                ports.join(", ")
            ),
        )
    })?;
    Ok(NeighbourSpec { ip, mac, port })
}

/// A batch body as changes, every error naming its item and field.
pub fn changes_of(body: &BatchBody, ports: &[String]) -> Result<Vec<Change>, ModelError> {
    if body.changes.len() > MAX_BATCH {
        return Err(ModelError::bad(
            "changes",
            format!(
                "{} changes in one request; at most {MAX_BATCH} (split the batch)",
                body.changes.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(body.changes.len());
    for (i, c) in body.changes.iter().enumerate() {
        let field = |f: &str| {
            if f.is_empty() {
                format!("changes[{i}]")
            } else {
                format!("changes[{i}].{f}")
            }
        };
        let err = |e: ModelError| {
            let f = e.field.clone().unwrap_or_default();
            ModelError {
                field: Some(field(&f)),
                ..e
            }
            .at(i)
        };
        let nested = |what: &str, e: ModelError| {
            let f = format!("{what}.{}", e.field.clone().unwrap_or_default());
            err(ModelError {
                field: Some(f),
                ..e
            })
        };
        let change = match (c.route.as_ref(), c.neighbour.as_ref()) {
            (Some(r), None) => match c.op.as_str() {
                "delete" => {
                    let (prefix, len) = parse_prefix(&r.prefix)
                        .map_err(|m| err(ModelError::bad("route.prefix", m)))?;
                    Change::DeleteRoute { prefix, len }
                }
                "add" => Change::AddRoute(route_of(r).map_err(|e| nested("route", e))?),
                "replace" => Change::ReplaceRoute(route_of(r).map_err(|e| nested("route", e))?),
                _ => return Err(err(bad_op(&c.op))),
            },
            (None, Some(n)) => match c.op.as_str() {
                "delete" => Change::DeleteNeighbour(
                    parse_ip("ip", &n.ip).map_err(|e| nested("neighbour", e))?,
                ),
                "add" => Change::AddNeighbour(
                    neighbour_of(n, ports).map_err(|e| nested("neighbour", e))?,
                ),
                "replace" => Change::ReplaceNeighbour(
                    neighbour_of(n, ports).map_err(|e| nested("neighbour", e))?,
                ),
                _ => return Err(err(bad_op(&c.op))),
            },
            _ => {
                return Err(err(ModelError::bad(
                    "",
                    "each change has exactly one of `route` or `neighbour`",
                )))
            }
        };
        out.push(change);
    }
    Ok(out)
}

fn bad_op(op: &str) -> ModelError {
    ModelError::bad(
        "op",
        format!("`{op}` is not an operation; use add, replace or delete"),
    )
}

/// Apply `changes` as one version. With `wait`, also wait (at most 1 s) until every worker
/// forwards by them; the answer says how long that took.
pub fn apply(
    routing: &Mutex<Routing>,
    changes: &[Change],
    wait: bool,
) -> Result<Value, ModelError> {
    let (applied, domain) = {
        let mut r = dataplane::build::lock(routing);
        let applied = r.apply(changes)?;
        (applied, r.domain().clone())
    };
    let mut answer = Map::new();
    answer.insert("version".into(), json!(applied.version));
    answer.insert("changes".into(), json!(changes.len()));
    if wait {
        let start = Instant::now();
        let deadline = Duration::from_secs(1);
        // Workers pass a quiescent point every few microseconds while they forward: yield
        // first, sleep only if that is not enough (an idle worker is offline and safe).
        while !domain.is_safe(applied.epoch) && start.elapsed() < deadline {
            if start.elapsed() < Duration::from_micros(200) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        let visible = domain.is_safe(applied.epoch);
        answer.insert("visible".into(), json!(visible));
        answer.insert(
            "visible_us".into(),
            json!(start.elapsed().as_secs_f64() * 1e6),
        );
    }
    Ok(Value::Object(answer))
}

/// A route as JSON (`{"prefix","via"}` or `{"prefix","drop":true}`).
pub fn route_json(r: &Route) -> Value {
    let prefix = format!("{}/{}", r.prefix, r.len);
    match &r.target {
        RouteTarget::Drop => json!({ "prefix": prefix, "drop": true }),
        RouteTarget::Via(v) => json!({
            "prefix": prefix,
            "via": v.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        }),
    }
}

/// A static neighbour as JSON.
pub fn neighbour_json(n: &NeighbourSpec, ports: &[String]) -> Value {
    json!({
        "ip": n.ip.to_string(),
        "mac": format_mac(&n.mac),
        "port": ports.get(n.port).cloned().unwrap_or_default(),
    })
}

/// One page of routes of a family (`ipv4` / `ipv6`) after `after` (a prefix, exclusive):
/// `{"version", "family", "routes": [...], "next": "PREFIX" | null}`.
pub fn list_routes(
    routing: &Mutex<Routing>,
    family: &str,
    after: Option<&str>,
    limit: Option<usize>,
) -> Result<Value, ModelError> {
    let v6 = match family {
        "ipv4" => false,
        "ipv6" => true,
        other => {
            return Err(ModelError::bad(
                "family",
                format!("`{other}` is not a family; use ipv4 or ipv6"),
            ))
        }
    };
    let limit = limit.unwrap_or(1000);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ModelError::bad(
            "limit",
            format!("limit {limit} is out of range; 1..={MAX_PAGE}"),
        ));
    }
    let after = match after {
        Some(a) => Some(parse_prefix(a).map_err(|m| ModelError::bad("after", m))?),
        None => None,
    };
    let r = dataplane::build::lock(routing);
    let page = r.routes(v6, after, limit);
    let next = (page.len() == limit)
        .then(|| page.last().map(|l| format!("{}/{}", l.prefix, l.len)))
        .flatten();
    let (n4, n6) = r.route_counts();
    Ok(json!({
        "version": r.version(),
        "family": family,
        "total": if v6 { n6 } else { n4 },
        "routes": page.iter().map(route_json).collect::<Vec<_>>(),
        "next": next,
    }))
}

/// One route, or 404.
pub fn get_route(routing: &Mutex<Routing>, prefix: &str) -> Result<Value, ModelError> {
    let (ip, len) = parse_prefix(prefix).map_err(|m| ModelError::bad("prefix", m))?;
    let r = dataplane::build::lock(routing);
    r.route(ip, len).map(|x| route_json(&x)).ok_or(ModelError {
        status: 404,
        message: format!("there is no route {ip}/{len}"),
        field: Some("prefix".into()),
        item: None,
    })
}

/// Every static neighbour.
pub fn list_neighbours(routing: &Mutex<Routing>, ports: &[String]) -> Value {
    let r = dataplane::build::lock(routing);
    json!({
        "version": r.version(),
        "neighbours": r.neighbours().iter().map(|n| neighbour_json(n, ports)).collect::<Vec<_>>(),
    })
}

/// One static neighbour, or 404.
pub fn get_neighbour(
    routing: &Mutex<Routing>,
    ip: &str,
    ports: &[String],
) -> Result<Value, ModelError> {
    let ip = parse_ip("ip", ip)?;
    let r = dataplane::build::lock(routing);
    r.neighbour(ip)
        .map(|n| neighbour_json(&n, ports))
        .ok_or(ModelError {
            status: 404,
            message: format!("there is no static neighbour {ip}"),
            field: Some("ip".into()),
            item: None,
        })
}

#[cfg(test)]
mod tests;
