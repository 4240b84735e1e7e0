//! The API's OpenAPI 3 description, generated from `ENDPOINTS` — the same table the router is
//! checked against in tests, so the description cannot drift from what is served. It never
//! serves anything itself.

use serde_json::{json, Map, Value};

/// One served method and path.
pub struct Endpoint {
    /// HTTP method, lower case.
    pub method: &'static str,
    /// Path with `{parameters}`.
    pub path: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Query parameters it accepts.
    pub query: &'static [&'static str],
    /// Schema name of its JSON body, if it takes one.
    pub body: Option<&'static str>,
}

const fn ep(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: &'static [&'static str],
    body: Option<&'static str>,
) -> Endpoint {
    Endpoint {
        method,
        path,
        summary,
        query,
        body,
    }
}

/// Every endpoint the API serves.
pub const ENDPOINTS: &[Endpoint] = &[
    ep("get", "/v1", "What this API is", &[], None),
    ep("get", "/v1/openapi.json", "This description", &[], None),
    ep(
        "post",
        "/v1/command",
        "Run one line of the `vecplane ctl` command language",
        &[],
        Some("Command"),
    ),
    ep(
        "get",
        "/v1/runtime",
        "Per node and worker: calls, vectors, packets, clocks",
        &["all", "format"],
        None,
    ),
    ep(
        "get",
        "/v1/rxq",
        "Per worker and receive queue: packets, cycles per packet through the graph, load",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/features",
        "The feature arcs, their features in order, and the ports each is enabled on",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/features/{name}",
        "A registered feature's state and counters (`show NAME`)",
        &["format"],
        None,
    ),
    ep(
        "post",
        "/v1/features",
        "Enable and disable features of the arcs on ports, all or none",
        &[],
        Some("FeatureChanges"),
    ),
    ep(
        "get",
        "/v1/interfaces",
        "Per port: driver, MAC, packets, bytes, drops",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/errors",
        "Non-zero drop counters per node and reason",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/neighbour-tables",
        "Per worker ARP/ND entries and counters",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/bridges",
        "Bridge domains: learned MACs and counters",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/fib/{family}",
        "The FIB of ipv4 or ipv6, one page of at most `limit` (10,000) entries `after` a prefix \
         (the previous page's `next`); `lookup` finds the longest match",
        &["format", "lookup", "after", "limit"],
        None,
    ),
    ep("get", "/v1/trace", "Traced packets", &["format"], None),
    ep(
        "post",
        "/v1/trace",
        "Trace the next packets of an input node",
        &[],
        Some("Trace"),
    ),
    ep(
        "delete",
        "/v1/trace",
        "Forget traced packets and stop tracing",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/pcap",
        "The running or last capture",
        &["format"],
        None,
    ),
    ep(
        "post",
        "/v1/pcap",
        "Start a capture into a pcap file",
        &[],
        Some("Pcap"),
    ),
    ep("delete", "/v1/pcap", "Stop the capture", &[], None),
    ep(
        "get",
        "/v1/punt",
        "Per worker and reason: packets punted to the control plane, copies lost; injections",
        &["format"],
        None,
    ),
    ep(
        "get",
        "/v1/punt/packets",
        "Punted packets (hex, with reason, port, bridge, table, cookie) numbered after `after` \
         (absent: from now), waiting up to `wait_ms` for the first",
        &["after", "count", "wait_ms"],
        None,
    ),
    ep(
        "post",
        "/v1/inject",
        "Inject packets: out of a port as they are, or through a flow-mode bridge from an \
         in_port (an OpenFlow packet-out); all or nothing",
        &[],
        Some("Inject"),
    ),
    ep(
        "post",
        "/v1/clear/{what}",
        "Restart runtime, interfaces or errors counters, or clear the trace",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/routes",
        "Configured routes of a family, in prefix order, paged",
        &["family", "after", "limit"],
        None,
    ),
    ep(
        "post",
        "/v1/routes",
        "Add one route or several (all or nothing)",
        &["wait"],
        Some("Routes"),
    ),
    ep(
        "get",
        "/v1/routes/{address}/{length}",
        "One route",
        &[],
        None,
    ),
    ep(
        "put",
        "/v1/routes/{address}/{length}",
        "Add or replace one route",
        &["wait"],
        Some("Route"),
    ),
    ep(
        "delete",
        "/v1/routes/{address}/{length}",
        "Delete one route",
        &["wait"],
        None,
    ),
    ep("get", "/v1/neighbours", "Static neighbours", &[], None),
    ep(
        "post",
        "/v1/neighbours",
        "Add a static neighbour",
        &[],
        Some("Neighbour"),
    ),
    ep(
        "get",
        "/v1/neighbours/{ip}",
        "One static neighbour",
        &[],
        None,
    ),
    ep(
        "put",
        "/v1/neighbours/{ip}",
        "Add or replace a static neighbour",
        &[],
        Some("Neighbour"),
    ),
    ep(
        "delete",
        "/v1/neighbours/{ip}",
        "Delete a static neighbour",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/batch",
        "Apply route and neighbour changes as one version, all or nothing",
        &["wait"],
        Some("Batch"),
    ),
    ep(
        "post",
        "/v1/reload",
        "Re-read the config file and apply what changed",
        &[],
        None,
    ),
    ep(
        "patch",
        "/v1/interfaces/{name}",
        "Change a port's MTU or own addresses live (all of a family's addresses at once)",
        &[],
        Some("Interface"),
    ),
    ep(
        "post",
        "/v1/interfaces",
        "Add a port while the data plane runs (the keys of a [[port]] table, without `features`: \
         POST /v1/features enables them; af-packet, memory, af-xdp with as many queues as \
         workers, tap with one worker); 201 with its index, 409 when refused",
        &[],
        Some("NewInterface"),
    ),
    ep(
        "delete",
        "/v1/interfaces/{name}",
        "Remove a port while the data plane runs: routes through it must go first; its inputs \
         are drained, then its nodes retired; 409 when refused",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/policies",
        "The settings that change live (poll modes, ICMP errors, IPv4 options, neighbour and bridge timers)",
        &[],
        None,
    ),
    ep(
        "patch",
        "/v1/policies",
        "Change some live settings, checked whole first (all or nothing)",
        &[],
        Some("Policies"),
    ),
    ep(
        "get",
        "/v1/bridges/{name}/flows",
        "A flow-mode bridge's OpenFlow rules with their counters, as ovs-ofctl dump-flows",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/bridges/{name}/flows",
        "Add rules in ovs-ofctl syntax (bundle: all or nothing)",
        &[],
        Some("AddFlows"),
    ),
    ep(
        "patch",
        "/v1/bridges/{name}/flows",
        "Replace the actions of the rules a match selects (ovs-ofctl mod-flows)",
        &[],
        Some("ModFlows"),
    ),
    ep(
        "delete",
        "/v1/bridges/{name}/flows",
        "Delete the rules matches select, or all (ovs-ofctl del-flows)",
        &[],
        Some("DelFlows"),
    ),
    ep(
        "get",
        "/v1/bridges/{name}/groups",
        "A flow-mode bridge's groups, as ovs-ofctl dump-groups",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/bridges/{name}/groups",
        "Add (or with modify, replace) groups in ovs-ofctl add-group syntax",
        &[],
        Some("AddGroups"),
    ),
    ep(
        "delete",
        "/v1/bridges/{name}/groups",
        "Delete groups, or all, and the rules that use them",
        &[],
        Some("DelGroups"),
    ),
    ep(
        "get",
        "/v1/bridges/{name}/megaflows",
        "The megaflows every worker installed, as ovs-appctl dpctl/dump-flows",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/flow-cache",
        "Flow cache counters per bridge and worker: EMC and megaflow hits, misses, installs",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/lb",
        "The load balancer: lb conf, VIPs with servers, weights, states, Maglev sizes and \
         warnings, counters per VIP and server",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/lb/commands",
        "Apply VPP `lb` CLI lines as one change, all or nothing",
        &[],
        Some("LbCommands"),
    ),
    ep("get", "/v1/lb/conf", "lb conf: GRE sources, buckets, timeouts", &[], None),
    ep(
        "get",
        "/v1/bgp",
        "BGP announcements: phase, announced VIPs, liveness device, counters",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/bgp/drain",
        "Withdraw every VIP, then wait until their traffic stopped (GET /v1/bgp: ready)",
        &[],
        None,
    ),
    ep("delete", "/v1/bgp/drain", "Cancel a drain: announce again", &[], None),
    ep(
        "get",
        "/v1/lb/health",
        "Health checks: every checked server's state, probes and the recent transitions",
        &[],
        None,
    ),
    ep(
        "patch",
        "/v1/lb/conf",
        "Change some lb conf values",
        &[],
        Some("LbConf"),
    ),
    ep("get", "/v1/lb/vips", "Every VIP with its servers and counters", &[], None),
    ep(
        "post",
        "/v1/lb/vips",
        "Create a VIP (and its first servers)",
        &[],
        Some("LbVip"),
    ),
    ep("get", "/v1/lb/vips/{id}", "One VIP", &[], None),
    ep(
        "patch",
        "/v1/lb/vips/{id}",
        "Change a VIP's encap, dscp, target_port, new_len or src_ip_sticky",
        &[],
        Some("LbVip"),
    ),
    ep(
        "delete",
        "/v1/lb/vips/{id}",
        "Delete a VIP and its flows",
        &[],
        None,
    ),
    ep(
        "get",
        "/v1/lb/vips/{id}/servers",
        "A VIP's servers",
        &[],
        None,
    ),
    ep(
        "post",
        "/v1/lb/vips/{id}/servers",
        "Add servers (or change their weights), all or nothing",
        &[],
        Some("LbServers"),
    ),
    ep(
        "get",
        "/v1/lb/vips/{id}/servers/{address}",
        "One server",
        &[],
        None,
    ),
    ep(
        "patch",
        "/v1/lb/vips/{id}/servers/{address}",
        "Change a server's weight (0 drains: existing flows stay)",
        &[],
        Some("LbWeight"),
    ),
    ep(
        "delete",
        "/v1/lb/vips/{id}/servers/{address}",
        "Remove a server: its flows finish, or with flush=true go at once",
        &["flush"],
        None,
    ),
    ep(
        "get",
        "/metrics",
        "Prometheus text exposition of every counter",
        &[],
        None,
    ),
];

fn schemas() -> Value {
    let route = json!({
        "type": "object", "additionalProperties": false, "required": ["prefix"],
        "properties": {
            "prefix": {"type": "string", "example": "198.19.0.0/16"},
            "via": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 64},
            "drop": {"type": "boolean"}
        }
    });
    let neighbour = json!({
        "type": "object", "additionalProperties": false, "required": ["ip"],
        "properties": {
            "ip": {"type": "string", "example": "198.18.1.2"},
            "mac": {"type": "string", "example": "02:00:00:00:00:01"},
            "port": {"type": "string", "example": "out0"}
        }
    });
    json!({
        "Route": route,
        "Routes": {"oneOf": [
            {"$ref": "#/components/schemas/Route"},
            {"type": "object", "additionalProperties": false, "required": ["routes"],
             "properties": {"routes": {"type": "array", "items": {"$ref": "#/components/schemas/Route"}}}}
        ]},
        "Neighbour": neighbour,
        "Change": {
            "type": "object", "additionalProperties": false, "required": ["op"],
            "properties": {
                "op": {"type": "string", "enum": ["add", "replace", "delete"]},
                "route": {"$ref": "#/components/schemas/Route"},
                "neighbour": {"$ref": "#/components/schemas/Neighbour"}
            }
        },
        "Batch": {
            "type": "object", "additionalProperties": false, "required": ["changes"],
            "properties": {"changes": {"type": "array", "items": {"$ref": "#/components/schemas/Change"}}}
        },
        "FeatureChanges": {
            "type": "object", "additionalProperties": false, "required": ["changes"],
            "properties": {"changes": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["port", "feature", "arc"],
                "properties": {
                    "port": {"type": "string", "example": "eth0"},
                    "feature": {"type": "string", "example": "ipfix-ip4"},
                    "arc": {"type": "string", "enum": ["ip4-unicast", "ip6-unicast", "output"]},
                    "enable": {"type": "boolean", "default": true}
                }
            }}}
        },
        "Command": {
            "type": "object", "additionalProperties": false, "required": ["command"],
            "properties": {"command": {"type": "string", "example": "show runtime"}, "json": {"type": "boolean"}}
        },
        "Interface": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "mtu": {"type": "integer", "minimum": 68, "maximum": 9000},
                "ip4": {"type": "array", "items": {"type": "string", "example": "198.18.2.1/24"}},
                "ip6": {"type": "array", "items": {"type": "string", "example": "2001:db8:2::1/64"}}
            }
        },
        "NewInterface": {
            "type": "object", "required": ["name", "driver"],
            "description": "The keys of a config file's [[port]] table",
            "properties": {
                "name": {"type": "string", "example": "p1"},
                "driver": {"type": "string", "enum": ["af-packet", "memory"]},
                "interface": {"type": "string", "example": "veth1"},
                "mac": {"type": "string", "example": "02:00:00:00:03:01"},
                "mtu": {"type": "integer", "minimum": 68, "maximum": 9000},
                "ip4": {"type": "array", "items": {"type": "string", "example": "198.18.3.1/24"}},
                "ip6": {"type": "array", "items": {"type": "string", "example": "2001:db8:3::1/64"}}
            }
        },
        "AddFlows": {
            "type": "object", "additionalProperties": false, "required": ["flows"],
            "properties": {
                "flows": {"type": "array", "minItems": 1, "items": {"type": "string",
                    "example": "table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:2"}},
                "bundle": {"type": "boolean"},
                "openflow": {"type": "string", "enum": ["OpenFlow10", "OpenFlow11", "OpenFlow12",
                    "OpenFlow13", "OpenFlow14", "OpenFlow15"]}
            }
        },
        "ModFlows": {
            "type": "object", "additionalProperties": false, "required": ["flows"],
            "properties": {
                "flows": {"type": "array", "minItems": 1, "items": {"type": "string",
                    "example": "tcp,tp_dst=80,actions=output:3"}},
                "strict": {"type": "boolean"},
                "bundle": {"type": "boolean"},
                "openflow": {"type": "string", "enum": ["OpenFlow10", "OpenFlow11", "OpenFlow12",
                    "OpenFlow13", "OpenFlow14", "OpenFlow15"]}
            }
        },
        "DelFlows": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "flows": {"type": "array", "items": {"type": "string", "example": "tcp,tp_dst=80"}},
                "strict": {"type": "boolean"}
            }
        },
        "AddGroups": {
            "type": "object", "additionalProperties": false, "required": ["groups"],
            "properties": {
                "groups": {"type": "array", "minItems": 1, "items": {"type": "string",
                    "example": "group_id=1,type=select,bucket=weight:100,actions=output:2,bucket=weight:100,actions=output:3"}},
                "modify": {"type": "boolean"}
            }
        },
        "DelGroups": {
            "type": "object", "additionalProperties": false,
            "properties": {"groups": {"type": "array", "items": {"type": "integer", "minimum": 0}}}
        },
        "LbCommands": {
            "type": "object", "additionalProperties": false, "required": ["lines"],
            "properties": {"lines": {"type": "array", "minItems": 1, "items": {"type": "string",
                "example": "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23"}}}
        },
        "LbConf": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "ip4-src-address": {"type": "string", "example": "198.18.0.254"},
                "ip6-src-address": {"type": "string", "example": "2001:db8::fe"},
                "buckets": {"type": "integer", "minimum": 1},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 86400},
                "timeout-tcp": {"type": "integer", "minimum": 1, "maximum": 86400},
                "timeout-udp": {"type": "integer", "minimum": 1, "maximum": 86400},
                "timeout-other": {"type": "integer", "minimum": 1, "maximum": 86400}
            }
        },
        "LbServer": {
            "type": "object", "additionalProperties": false, "required": ["address"],
            "properties": {
                "address": {"type": "string", "example": "198.18.2.1"},
                "weight": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}
            }
        },
        "LbServers": {
            "type": "object", "additionalProperties": false, "required": ["servers"],
            "properties": {"servers": {"type": "array", "minItems": 1,
                "items": {"$ref": "#/components/schemas/LbServer"}}}
        },
        "LbWeight": {
            "type": "object", "additionalProperties": false, "required": ["weight"],
            "properties": {"weight": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}}
        },
        "LbVip": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "prefix": {"type": "string", "example": "198.18.1.1/32"},
                "protocol": {"type": "string", "enum": ["tcp", "udp", "any"]},
                "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                "encap": {"type": "string", "enum": ["gre4", "gre6", "l3dsr", "nat4", "nat6"]},
                "dscp": {"type": "integer", "minimum": 0, "maximum": 63},
                "target_port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "new_len": {"type": "integer", "minimum": 1, "maximum": 4194304},
                "src_ip_sticky": {"type": "boolean"},
                "servers": {"type": "array", "items": {"$ref": "#/components/schemas/LbServer"}}
            }
        },
        "Policies": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "poll-mode": {"oneOf": [
                    {"type": "string", "enum": ["busy", "adaptive"]},
                    {"type": "array", "items": {"type": "string", "enum": ["busy", "adaptive"]}}
                ]},
                "poll-sleep-max-us": {"type": "integer", "minimum": 10, "maximum": 100000},
                "icmp-errors-per-second": {"type": "integer", "minimum": 0, "maximum": 4294967295u64},
                "icmp-errors-burst": {"type": "integer", "minimum": 0, "maximum": 4294967295u64},
                "ip4-options": {"type": "string", "enum": ["forward", "drop"]},
                "neighbour-reachable-seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
                "neighbour-gc-seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
                "bridge-age-seconds": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}
            }
        },
        "Trace": {
            "type": "object", "additionalProperties": false, "required": ["node", "count"],
            "properties": {"node": {"type": "string"}, "count": {"type": "integer", "minimum": 1, "maximum": 4096}}
        },
        "Pcap": {
            "type": "object", "additionalProperties": false, "required": ["port", "file"],
            "properties": {
                "port": {"type": "string"}, "file": {"type": "string"},
                "direction": {"type": "string", "enum": ["rx", "tx", "both"]},
                "count": {"type": "integer"}, "snaplen": {"type": "integer"}
            }
        },
        "Inject": {
            "type": "object", "additionalProperties": false, "required": ["packets"],
            "properties": {
                "port": {"type": "string", "example": "out0"},
                "bridge": {"type": "string", "example": "br0"},
                "in_port": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 65535},
                    {"type": "string", "enum": ["CONTROLLER"]}]},
                "actions": {"type": "string", "example": "table"},
                "packets": {"type": "array", "minItems": 1, "items": {"type": "string",
                    "example": "02000000020202000000010108004500..."}},
                "worker": {"type": "integer", "minimum": 0}
            }
        },
        "Error": {
            "type": "object", "required": ["error"],
            "properties": {"error": {"type": "object", "required": ["status", "message"],
                "properties": {"status": {"type": "integer"}, "message": {"type": "string"},
                    "field": {"type": "string"}, "item": {"type": "integer"}}}}
        }
    })
}

/// The OpenAPI document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for e in ENDPOINTS {
        let mut op = Map::new();
        op.insert("summary".into(), json!(e.summary));
        let mut parameters: Vec<Value> = e
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(e.query.iter().map(
            |q| json!({"name": q, "in": "query", "required": false, "schema": {"type": "string"}}),
        ));
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some(b) = e.body {
            op.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{b}")}}}}),
            );
        }
        op.insert(
            "responses".into(),
            json!({
                "200": {"description": "Success"},
                "default": {"description": "Failure", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }),
        );
        let entry = paths
            .entry(e.path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.insert(e.method.to_string(), Value::Object(op));
        }
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "vecplane API",
            "version": "1",
            "description": "Live control of a vecplane data plane: routes and static neighbours \
                            (batches all or nothing), counters, traces, captures, reload, \
                            metrics. On the Unix control socket without credentials (peers \
                            checked); on TCP with `Authorization: Bearer <token>`."
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}
        },
        "paths": paths,
    })
}
