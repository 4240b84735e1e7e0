//! The load balancer as the API presents it: the whole picture (`GET /v1/lb`: conf, VIPs with
//! servers, weights, states, Maglev sizes and warnings, counters), batches of VPP `lb` lines
//! (all or nothing), and JSON resources for the conf, VIPs and servers, each turned into
//! `LbCommand`s and applied through `dataplane::lb::LbControl` with errors naming the field.
//! Owns the JSON model only; it never touches a worker.

use crate::api::ApiError;
use axum::http::StatusCode;
use dataplane::lb::{AsTotals, LbApplyError, LbControl, VipTotals};
use dataplane::RuntimeView;
use lb::cli::{conf_command, format_command};
use lb::model::{
    AsSpec, AsState, Encap, LbCommand, LbErrorKind, LbState, Prefix, SourceAddress, VipId, VipKey,
    VipProtocol, VipSpec, DEFAULT_NEW_LEN,
};
use lb::snapshot::LbTables;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::net::IpAddr;
use std::sync::Arc;

/// The load balancer of `view`: every data plane has one, taking VIPs with or without `[lb]`.
pub fn find(view: &RuntimeView) -> Arc<LbControl> {
    view.lb.clone()
}

/// A state name as shown.
pub fn state_name(s: AsState) -> &'static str {
    match s {
        AsState::Active => "active",
        AsState::Draining => "draining",
        AsState::Removed => "removed",
        AsState::Free => "free",
    }
}

fn protocol_name(p: VipProtocol) -> &'static str {
    match p {
        VipProtocol::Any => "any",
        VipProtocol::Tcp => "tcp",
        VipProtocol::Udp => "udp",
    }
}

fn source(s: &Option<SourceAddress>) -> Value {
    match s {
        None => Value::Null,
        Some(a) if a.len == 32 || a.len == 128 => json!(a.addr.to_string()),
        Some(a) => json!(format!("{}/{}", a.addr, a.len)),
    }
}

fn counters<const N: usize>(names: [&str; N], values: [u64; N]) -> Value {
    let mut m = Map::new();
    for (n, v) in names.iter().zip(values) {
        m.insert(n.to_string(), json!(v));
    }
    Value::Object(m)
}

/// `lb conf` as JSON.
pub fn conf_json(state: &LbState) -> Value {
    let c = state.conf();
    json!({
        "ip4-src-address": source(&c.ip4_src),
        "ip6-src-address": source(&c.ip6_src),
        "buckets": c.buckets,
        "timeout-tcp": c.timeouts.tcp,
        "timeout-udp": c.timeouts.udp,
        "timeout-other": c.timeouts.other,
        "line": format_command(&conf_command(state)),
    })
}

/// One server of VIP `id` as JSON (from the published tables, with its counters): `weight` is
/// the configured weight, `effective_weight` what the Maglev table uses (0 when draining,
/// removed or down), `health` "down" when a health check has it out of the table.
fn server_json(lb: &LbControl, t: &LbTables, slot: lb::model::AsSlot, entries: u32) -> Value {
    let a = t.as_entry(slot);
    let size = t.vip(a.vip).map_or(1, |v| v.maglev_size.max(1));
    json!({
        "address": a.addr.to_string(),
        "slot": slot.0,
        "gen": a.gen,
        "weight": a.configured_weight,
        "effective_weight": a.weight,
        "health": if a.health_down { "down" } else { "up" },
        "state": state_name(a.state),
        "maglev_entries": entries,
        "share_percent": entries as f64 * 100.0 / size as f64,
        "counters": counters(AsTotals::NAMES, lb.slot_totals(slot).values()),
    })
}

/// One VIP as JSON: settings, Maglev size and warnings, counters, and its servers.
pub fn vip_json(lb: &LbControl, t: &LbTables, id: VipId) -> Option<Value> {
    let v = t.vip(id)?;
    let counts = t.maglev(id).map(|m| m.counts()).unwrap_or_default();
    let servers: Vec<Value> = v
        .slots
        .iter()
        .map(|s| server_json(lb, t, *s, counts.get(s).copied().unwrap_or(0)))
        .collect();
    let mut warnings = Vec::new();
    if v.maglev_too_small {
        warnings.push(format!(
            "{} Maglev entries < 100 x {} servers: shares may stray beyond 1%; use new_len {} \
             or more",
            v.maglev_size,
            v.active_servers,
            100 * v.active_servers as u64
        ));
    }
    if v.active_servers == 0 {
        warnings.push("no server with weight > 0: new flows are dropped".to_string());
    }
    let (dscp, target_port) = match v.encap {
        Encap::L3dsr { dscp } => (Some(dscp), None),
        Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => (None, Some(target_port)),
        _ => (None, None),
    };
    let node_port = v.nodeport.map(|k| k.port);
    let spec = VipSpec {
        key: v.key,
        encap: v.encap,
        new_len: v.new_len,
        src_ip_sticky: v.src_ip_sticky,
        node_port,
    };
    Some(json!({
        "id": id.0,
        "vip": v.key.to_string(),
        "prefix": v.key.prefix.to_string(),
        "protocol": protocol_name(v.key.protocol),
        "port": v.key.port,
        "encap": v.encap.name(),
        "dscp": dscp,
        "target_port": target_port,
        "type": target_port.map(|_| if node_port.is_some() { "nodeport" } else { "clusterip" }),
        "node_port": node_port,
        "node_key": v.nodeport.map(|k| k.to_string()),
        "new_len": v.new_len,
        "maglev_size": v.maglev_size,
        "src_ip_sticky": v.src_ip_sticky,
        "active_servers": v.active_servers,
        "warnings": warnings,
        "line": format_command(&LbCommand::AddVip(spec)),
        "counters": counters(VipTotals::NAMES, lb.vip_totals(id).values()),
        "servers": servers,
    }))
}

/// The LB memory budget as JSON: what the tables take (counted as they are allocated) and the
/// cap (`[lb] memory-limit`).
pub fn memory_json(state: &LbState) -> Value {
    let u = state.memory_use();
    let b = state.memory_budget();
    json!({
        "used_bytes": u.total(),
        "limit_bytes": b.limit,
        "maglev_bytes": u.maglev_bytes,
        "vips": u.vips,
        "flow_bytes_per_worker": u.flow_bytes_per_worker,
        "workers": u.workers,
    })
}

/// `GET /v1/lb`: everything.
pub fn overview(lb: &LbControl) -> Value {
    let state = lb.state();
    lb.with_tables(|t| {
        let vips: Vec<Value> = t.vips().filter_map(|v| vip_json(lb, t, v.id)).collect();
        json!({
            "version": t.version(),
            "conf": conf_json(&state),
            "flow_table_entries_per_worker": lb.flow_table_entries(),
            "memory": memory_json(&state),
            "nat4_inside": state.nat_inside(false),
            "nat6_inside": state.nat_inside(true),
            "vips": vips,
            "node": counters(
                dataplane::lb::NodeTotals::NAMES,
                lb.node_totals().values()
            ),
        })
    })
}

/// The field a model error is about.
fn field_of(kind: &LbErrorKind) -> &'static str {
    match kind {
        LbErrorKind::NoSuchVip(_) => "vip",
        LbErrorKind::NoSuchServer { .. } => "address",
        LbErrorKind::DuplicateServer(_) | LbErrorKind::BadServer(_) => "servers",
        LbErrorKind::ServerFamily { .. } => "address",
        LbErrorKind::BadVip { reason, .. } => {
            if reason.contains("dscp") {
                "dscp"
            } else if reason.contains("target_port") {
                "target_port"
            } else if reason.contains("new_len") {
                "new_len"
            } else if reason.contains("prefix") || reason.contains("/32") {
                "prefix"
            } else if reason.contains("port") {
                "port"
            } else {
                "encap"
            }
        }
        LbErrorKind::DscpClash { .. } => "dscp",
        LbErrorKind::NoSource { .. } => "encap",
        LbErrorKind::Full { .. } => "servers",
        LbErrorKind::NoSuchNatPort(_) => "ports",
        LbErrorKind::BadWeight { .. } => "weight",
        LbErrorKind::MemoryLimit { .. } => "new_len",
        LbErrorKind::NodePort { .. } => "node_port",
    }
}

/// An apply error of a JSON resource, naming the field.
fn refused(e: LbApplyError) -> ApiError {
    match &e {
        LbApplyError::Model(m) => {
            let status = match m.kind {
                LbErrorKind::NoSuchVip(_) | LbErrorKind::NoSuchServer { .. } => {
                    StatusCode::NOT_FOUND
                }
                LbErrorKind::Full { .. } | LbErrorKind::MemoryLimit { .. } => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            ApiError {
                field: Some(field_of(&m.kind).to_string()),
                ..ApiError::new(status, m.kind.to_string())
            }
        }
        LbApplyError::UnknownPort { .. } => ApiError::bad("ports", e.reason()),
        LbApplyError::Alloc { .. } => ApiError {
            field: Some("new_len".into()),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.reason())
        },
        LbApplyError::FlowTables { .. } => ApiError {
            field: Some("buckets".into()),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.reason())
        },
        LbApplyError::Route { .. } => ApiError {
            field: Some("prefix".into()),
            ..ApiError::new(StatusCode::CONFLICT, e.reason())
        },
        LbApplyError::InUse { .. } => ApiError::new(StatusCode::CONFLICT, e.reason()),
    }
}

/// `POST /v1/lb/commands`: VPP `lb` lines.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandsBody {
    /// The lines, applied in order as one change; blank lines and `#` comments are skipped
    /// (so a file's lines can be sent as they are: item i is line i + 1).
    pub lines: Vec<String>,
}

/// Apply VPP `lb` lines as one change, all or nothing; errors name `lines` and the item.
pub fn commands(lb: &LbControl, body: &CommandsBody) -> Result<Value, ApiError> {
    let mut cmds = Vec::new();
    let mut items = Vec::new();
    for (i, text) in body.lines.iter().enumerate() {
        let line = text.split('#').next().unwrap_or("");
        if line.trim().is_empty() {
            continue;
        }
        let c = lb::cli::parse_line(line).map_err(|e| {
            let mut err = ApiError::bad("lines", format!("lines[{i}]: {e}"));
            err.item = Some(i);
            err
        })?;
        if matches!(c, LbCommand::Show(_)) {
            let mut err = ApiError::bad(
                "lines",
                format!(
                    "lines[{i}]: `show lb` changes nothing; read GET /v1/lb (or `vecplane ctl \
                     show lb`) instead"
                ),
            );
            err.item = Some(i);
            return Err(err);
        }
        cmds.push(c);
        items.push(i);
    }
    if cmds.is_empty() {
        return Err(ApiError::bad(
            "lines",
            "no command given; accepted: a non-empty array of VPP `lb` lines, e.g. \
             \"lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\"",
        ));
    }
    let version = lb.apply(&cmds).map_err(|e| {
        let i = items.get(e.index()).copied().unwrap_or(0);
        let mut err = ApiError::bad("lines", format!("lines[{i}]: {}", e.reason()));
        err.item = Some(i);
        err
    })?;
    Ok(json!({"applied": cmds.len(), "version": version}))
}

/// A server in a request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerBody {
    /// Its address.
    pub address: String,
    /// Its weight, 0..=100 (new servers: 100 when absent, as VPP; 0 drains).
    #[serde(default)]
    pub weight: Option<u32>,
}

/// `POST /v1/lb/vips` (and `PATCH /v1/lb/vips/{id}`, where every field is optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VipBody {
    /// ADDRESS/LENGTH (or an address: a host prefix). Create only.
    #[serde(default)]
    pub prefix: Option<String>,
    /// tcp, udp or any (default any). Create only.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Destination port, 0 or absent: all ports. Create only.
    #[serde(default)]
    pub port: Option<u16>,
    /// gre4, gre6, l3dsr, nat4, nat6 (default gre4, as VPP).
    #[serde(default)]
    pub encap: Option<String>,
    /// l3dsr: the DSCP (0..=63).
    #[serde(default)]
    pub dscp: Option<u8>,
    /// nat4/nat6: the servers' port.
    #[serde(default)]
    pub target_port: Option<u16>,
    /// nat4/nat6, VPP's `type nodeport`: the node port (packets to the node's address, `lb
    /// conf ip4-src-address`/`ip6-src-address`, on it go to the VIP's servers too). 0 on PATCH:
    /// back to `type clusterip`.
    #[serde(default)]
    pub node_port: Option<u16>,
    /// Maglev size asked for (the next prime >= it is used).
    #[serde(default)]
    pub new_len: Option<u32>,
    /// Hash on addresses only.
    #[serde(default)]
    pub src_ip_sticky: Option<bool>,
    /// Servers to add with the VIP. Create only.
    #[serde(default)]
    pub servers: Option<Vec<ServerBody>>,
}

fn parse_addr(field: &str, s: &str) -> Result<IpAddr, ApiError> {
    s.parse().map_err(|_| {
        ApiError::bad(
            field,
            format!(
                "`{s}` is not an IPv4 or IPv6 address; accepted: e.g. 198.18.2.1 or 2001:db8::1"
            ),
        )
    })
}

fn parse_vip_prefix(s: &str) -> Result<Prefix, ApiError> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr = parse_addr("prefix", a)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        None => max,
        Some(l) => l.parse::<u8>().ok().filter(|n| *n <= max).ok_or_else(|| {
            ApiError::bad(
                "prefix",
                format!("`{l}` is not a prefix length; accepted: 0..={max}"),
            )
        })?,
    };
    // As VPP's API: host bits are cleared.
    Prefix::new(lb::model::mask_addr(addr, len), len).ok_or_else(|| {
        ApiError::bad(
            "prefix",
            format!("`{s}` is not a prefix; accepted: ADDRESS/LENGTH"),
        )
    })
}

/// The encap of `body` (falling back to `old`'s values for what it does not give).
fn encap_of(body: &VipBody, old: Option<Encap>) -> Result<Encap, ApiError> {
    let name = match (&body.encap, old) {
        (Some(n), _) => n.as_str(),
        (None, Some(e)) => e.name(),
        (None, None) => "gre4",
    };
    let old_dscp = match old {
        Some(Encap::L3dsr { dscp }) => Some(dscp),
        _ => None,
    };
    let old_port = match old {
        Some(Encap::Nat4 { target_port }) | Some(Encap::Nat6 { target_port }) => Some(target_port),
        _ => None,
    };
    let need_port = |kind: &str| {
        body.target_port.or(old_port).ok_or_else(|| {
            ApiError::bad(
                "target_port",
                format!("encap {kind} needs `target_port` (1..=65535)"),
            )
        })
    };
    let e = match name {
        "gre4" => Encap::Gre4,
        "gre6" => Encap::Gre6,
        "l3dsr" => Encap::L3dsr {
            dscp: body
                .dscp
                .or(old_dscp)
                .ok_or_else(|| ApiError::bad("dscp", "encap l3dsr needs `dscp` (0..=63)"))?,
        },
        "nat4" => Encap::Nat4 {
            target_port: need_port("nat4")?,
        },
        "nat6" => Encap::Nat6 {
            target_port: need_port("nat6")?,
        },
        other => {
            return Err(ApiError::bad(
                "encap",
                format!("`{other}` is not an encap; accepted: gre4, gre6, l3dsr, nat4, nat6"),
            ))
        }
    };
    if body.dscp.is_some() && !matches!(e, Encap::L3dsr { .. }) {
        return Err(ApiError::bad("dscp", "`dscp` applies only to encap l3dsr"));
    }
    if body.target_port.is_some() && !matches!(e, Encap::Nat4 { .. } | Encap::Nat6 { .. }) {
        return Err(ApiError::bad(
            "target_port",
            "`target_port` applies only to encap nat4 or nat6",
        ));
    }
    Ok(e)
}

fn servers_of(list: &[ServerBody]) -> Result<Vec<AsSpec>, ApiError> {
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            let addr = parse_addr("address", &s.address).map_err(|mut e| {
                e.item = Some(i);
                e
            })?;
            Ok(AsSpec {
                addr,
                weight: s.weight,
            })
        })
        .collect()
}

/// The VIP of an id, or 404.
fn vip_key(lb: &LbControl, id: u32) -> Result<VipKey, ApiError> {
    lb.state()
        .vip(VipId(id))
        .map(|v| v.spec.key)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no VIP has id {id}; GET /v1/lb/vips lists the VIPs with their ids"
            ))
        })
}

/// Parse a VIP id path segment.
pub fn parse_id(s: &str) -> Result<u32, ApiError> {
    s.parse().map_err(|_| {
        ApiError::bad(
            "id",
            format!("`{s}` is not a VIP id; accepted: the `id` GET /v1/lb/vips shows"),
        )
    })
}

/// `POST /v1/lb/vips`: a new VIP (409 when its prefix, protocol and port exist).
pub fn create_vip(lb: &LbControl, body: &VipBody) -> Result<Value, ApiError> {
    let prefix = parse_vip_prefix(
        body.prefix
            .as_deref()
            .ok_or_else(|| ApiError::bad("prefix", "a VIP needs `prefix` (ADDRESS/LENGTH)"))?,
    )?;
    let protocol = match body.protocol.as_deref() {
        None | Some("any") => VipProtocol::Any,
        Some("tcp") => VipProtocol::Tcp,
        Some("udp") => VipProtocol::Udp,
        Some(p) => {
            return Err(ApiError::bad(
                "protocol",
                format!("`{p}` is not a VIP protocol; accepted: tcp, udp, any"),
            ))
        }
    };
    // As VPP: without a port the VIP takes every protocol.
    let key = VipKey {
        prefix,
        protocol,
        port: body.port.unwrap_or(0),
    }
    .canonical();
    if let Some(v) = lb.state().vip_by_key(&key) {
        return Err(ApiError {
            field: Some("prefix".into()),
            ..ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "VIP {key} exists with id {}; change it with PATCH /v1/lb/vips/{}",
                    v.id.0, v.id.0
                ),
            )
        });
    }
    let spec = VipSpec {
        key,
        encap: encap_of(body, None)?,
        new_len: body.new_len.unwrap_or(DEFAULT_NEW_LEN),
        src_ip_sticky: body.src_ip_sticky.unwrap_or(false),
        node_port: body.node_port.filter(|p| *p != 0),
    };
    let mut cmds = vec![LbCommand::AddVip(spec)];
    if let Some(list) = &body.servers {
        if !list.is_empty() {
            cmds.push(LbCommand::AddAs {
                vip: key,
                servers: servers_of(list)?,
                flush: false,
            });
        }
    }
    let version = lb.apply(&cmds).map_err(refused)?;
    let id = lb.state().vip_by_key(&key).map(|v| v.id.0);
    Ok(json!({"id": id, "vip": key.to_string(), "version": version}))
}

/// `GET /v1/lb/vips/{id}`.
pub fn get_vip(lb: &LbControl, id: u32) -> Result<Value, ApiError> {
    vip_key(lb, id)?;
    lb.with_tables(|t| vip_json(lb, t, VipId(id)))
        .ok_or_else(|| ApiError::not_found(format!("no VIP has id {id}")))
}

/// `GET /v1/lb/vips`.
pub fn list_vips(lb: &LbControl) -> Value {
    lb.with_tables(|t| {
        let vips: Vec<Value> = t.vips().filter_map(|v| vip_json(lb, t, v.id)).collect();
        json!({"version": t.version(), "vips": vips})
    })
}

/// `PATCH /v1/lb/vips/{id}`: change the encap, DSCP, target port, `new_len` or stickiness.
pub fn change_vip(lb: &LbControl, id: u32, body: &VipBody) -> Result<Value, ApiError> {
    let key = vip_key(lb, id)?;
    for (given, field) in [
        (body.prefix.is_some(), "prefix"),
        (body.protocol.is_some(), "protocol"),
        (body.port.is_some(), "port"),
        (body.servers.is_some(), "servers"),
    ] {
        if given {
            return Err(ApiError::bad(
                field,
                format!(
                    "`{field}` cannot change on an existing VIP (it is what identifies it, or \
                     has its own resource); accepted: encap, dscp, target_port, new_len, \
                     src_ip_sticky"
                ),
            ));
        }
    }
    let old = lb
        .state()
        .vip(VipId(id))
        .map(|v| v.spec)
        .ok_or_else(|| ApiError::not_found(format!("no VIP has id {id}")))?;
    let spec = VipSpec {
        key,
        encap: encap_of(body, Some(old.encap))?,
        new_len: body.new_len.unwrap_or(old.new_len),
        src_ip_sticky: body.src_ip_sticky.unwrap_or(old.src_ip_sticky),
        node_port: match body.node_port {
            Some(0) => None,
            Some(p) => Some(p),
            None => old.node_port,
        },
    };
    let version = lb.apply(&[LbCommand::AddVip(spec)]).map_err(refused)?;
    Ok(json!({"id": id, "version": version}))
}

/// `DELETE /v1/lb/vips/{id}`: the VIP and its flows.
pub fn delete_vip(lb: &LbControl, id: u32) -> Result<Value, ApiError> {
    let key = vip_key(lb, id)?;
    let version = lb.apply(&[LbCommand::DelVip(key)]).map_err(refused)?;
    Ok(json!({"deleted": key.to_string(), "version": version}))
}

/// `GET /v1/lb/vips/{id}/servers`.
pub fn list_servers(lb: &LbControl, id: u32) -> Result<Value, ApiError> {
    let v = get_vip(lb, id)?;
    Ok(json!({"id": id, "vip": v["vip"], "servers": v["servers"]}))
}

/// `GET /v1/lb/vips/{id}/servers/{address}`.
pub fn get_server(lb: &LbControl, id: u32, address: &str) -> Result<Value, ApiError> {
    let addr = parse_addr("address", address)?;
    let v = get_vip(lb, id)?;
    v["servers"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["address"] == addr.to_string()))
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("server {addr} is not on VIP {}", v["vip"])))
}

/// `POST /v1/lb/vips/{id}/servers`: add servers (or change their weights).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServersBody {
    /// The servers.
    pub servers: Vec<ServerBody>,
}

/// Add servers to VIP `id`, all or nothing.
pub fn add_servers(lb: &LbControl, id: u32, body: &ServersBody) -> Result<Value, ApiError> {
    let key = vip_key(lb, id)?;
    if body.servers.is_empty() {
        return Err(ApiError::bad(
            "servers",
            "no server given; accepted: [{\"address\": \"198.18.2.1\", \"weight\": 100}, ...]",
        ));
    }
    let servers = servers_of(&body.servers)?;
    let version = lb
        .apply(&[LbCommand::AddAs {
            vip: key,
            servers,
            flush: false,
        }])
        .map_err(refused)?;
    Ok(json!({"added": body.servers.len(), "version": version}))
}

/// `PATCH /v1/lb/vips/{id}/servers/{address}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightBody {
    /// The new weight, 0..=100 (0 drains).
    pub weight: u32,
    /// Also evict the server's flows (VPP's `is_flush`; with weight 0: hard drain).
    #[serde(default)]
    pub flush: bool,
}

/// Change one server's weight (0 drains; with `flush` its flows go too).
pub fn set_weight(
    lb: &LbControl,
    id: u32,
    address: &str,
    body: &WeightBody,
) -> Result<Value, ApiError> {
    let key = vip_key(lb, id)?;
    let addr = parse_addr("address", address)?;
    get_server(lb, id, address)?;
    let version = lb
        .apply(&[LbCommand::AddAs {
            vip: key,
            servers: vec![AsSpec {
                addr,
                weight: Some(body.weight),
            }],
            flush: body.flush,
        }])
        .map_err(refused)?;
    Ok(
        json!({"address": addr.to_string(), "weight": body.weight, "flush": body.flush,
              "version": version}),
    )
}

/// Remove one server; with `flush` its flows go at once, without they finish.
pub fn delete_server(
    lb: &LbControl,
    id: u32,
    address: &str,
    flush: bool,
) -> Result<Value, ApiError> {
    let key = vip_key(lb, id)?;
    let addr = parse_addr("address", address)?;
    let version = lb
        .apply(&[LbCommand::DelAs {
            vip: key,
            servers: vec![addr],
            flush,
        }])
        .map_err(refused)?;
    Ok(json!({"deleted": addr.to_string(), "flush": flush, "version": version}))
}

/// `PATCH /v1/lb/conf`: the values to change.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfBody {
    /// Outer IPv4 source (an address or a prefix) for GRE4.
    #[serde(default)]
    pub ip4_src_address: Option<String>,
    /// Outer IPv6 source for GRE6.
    #[serde(default)]
    pub ip6_src_address: Option<String>,
    /// Flow-table entries per worker.
    #[serde(default)]
    pub buckets: Option<u32>,
    /// Every protocol's flow timeout, seconds.
    #[serde(default)]
    pub timeout: Option<u32>,
    /// TCP flow timeout.
    #[serde(default)]
    pub timeout_tcp: Option<u32>,
    /// UDP flow timeout.
    #[serde(default)]
    pub timeout_udp: Option<u32>,
    /// Other protocols' flow timeout.
    #[serde(default)]
    pub timeout_other: Option<u32>,
}

/// Change `lb conf` (checked by the `lb conf` parser, so the rules are the CLI's).
pub fn change_conf(lb: &LbControl, body: &ConfBody) -> Result<Value, ApiError> {
    let mut words: Vec<(String, &str)> = Vec::new();
    if let Some(a) = &body.ip4_src_address {
        words.push((format!("ip4-src-address {a}"), "ip4-src-address"));
    }
    if let Some(a) = &body.ip6_src_address {
        words.push((format!("ip6-src-address {a}"), "ip6-src-address"));
    }
    if let Some(b) = body.buckets {
        words.push((format!("buckets {b}"), "buckets"));
    }
    if let Some(t) = body.timeout {
        words.push((format!("timeout {t}"), "timeout"));
    }
    for (v, name, field) in [
        (body.timeout_tcp, "tcp", "timeout-tcp"),
        (body.timeout_udp, "udp", "timeout-udp"),
        (body.timeout_other, "other", "timeout-other"),
    ] {
        if let Some(t) = v {
            words.push((format!("timeout {name} {t}"), field));
        }
    }
    if words.is_empty() {
        return Err(ApiError::bad(
            "body",
            "nothing to change; accepted: ip4-src-address, ip6-src-address, buckets, timeout, \
             timeout-tcp, timeout-udp, timeout-other",
        ));
    }
    // Each value alone first, so an error names its field.
    for (w, field) in &words {
        lb::cli::parse_line(&format!("lb conf {w}"))
            .map_err(|e| ApiError::bad(field, e.to_string()))?;
    }
    let line = format!(
        "lb conf {}",
        words
            .iter()
            .map(|(w, _)| w.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let cmd = lb::cli::parse_line(&line).map_err(|e| ApiError::bad("body", e.to_string()))?;
    let version = lb.apply(&[cmd]).map_err(refused)?;
    Ok(json!({"conf": conf_json(&lb.state()), "version": version}))
}

#[cfg(test)]
#[path = "lb_api_tests.rs"]
mod tests;
