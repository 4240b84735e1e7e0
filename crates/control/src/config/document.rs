//! The whole document: the top-level keys, the order sections are read in (dataplane, api, ports,
//! neighbours, routes, the route file, xconnects, bridges, lb, bgp) and what each needs from the
//! ones before. The rules of each section live in its own module; this one only wires them together.

use super::bridges::Membership;
use super::ctx::{Ctx, Fields};
use super::ports::{SeenKernel, PORT_KEYS};
use super::route_file::RouteContext;
use super::routes::{NEIGHBOUR_KEYS, ROUTE_KEYS, XCONNECT_KEYS};
use super::validation::SeenAddrs;
use super::value::{kind, Node, Val};
use super::FileRef;
use crate::api_config::ApiConfig;
use dataplane::{DataplaneSpec, NeighbourSpec, PortSpec};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub(super) struct Parsed {
    pub(super) spec: DataplaneSpec,
    pub(super) files: Vec<FileRef>,
    pub(super) api: ApiConfig,
    pub(super) bgp: Option<crate::bgp::BgpConfig>,
    pub(super) features: Vec<(String, toml::Value)>,
    pub(super) port_features: Vec<super::PortFeature>,
}

pub(super) const TOP_KEYS: &[&str] = &[
    "dataplane",
    "port",
    "route",
    "neighbour",
    "xconnect",
    "bridge",
    "api",
    "route-file",
    "lb",
    "bgp",
];

impl Ctx<'_> {
    pub(super) fn document(&mut self, root: &Node, base_dir: &Path) -> Parsed {
        let mut spec = DataplaneSpec::default();
        let mut files = Vec::new();
        let mut api = ApiConfig::default();
        let registered = crate::registry::installed();
        let mut top_keys = TOP_KEYS.to_vec();
        top_keys.extend(registered.iter().map(|f| f.name()));
        let Some(top) = self.fields(String::new(), None, root, &top_keys) else {
            return Parsed {
                spec,
                files,
                api,
                bgp: None,
                features: Vec::new(),
                port_features: Vec::new(),
            };
        };

        if let Some(n) = top.get("dataplane") {
            self.dataplane(n, &mut spec);
        }
        if let Some(n) = top.get("api") {
            api = self.api(n, base_dir, &mut files);
        }
        let ports = self.array_of_tables(&top, "port");
        let routes = self.array_of_tables(&top, "route");
        let neighbours = self.array_of_tables(&top, "neighbour");
        let xconnects = self.array_of_tables(&top, "xconnect");
        let bridges = self.array_of_tables(&top, "bridge");

        // Ports.
        let mut memberships: Vec<Option<Membership>> = Vec::new();
        let mut port_names: Vec<Option<String>> = Vec::new();
        let mut port_specs: Vec<Option<PortSpec>> = Vec::new();
        let mut seen_names: HashMap<String, (usize, usize)> = HashMap::new();
        let mut seen_ips = SeenAddrs::default();
        let mut seen_tx: HashMap<PathBuf, (usize, String)> = HashMap::new();
        let mut seen_kernel = SeenKernel::default();
        let mut listed_features = Vec::new();
        for (i, node) in ports.iter().enumerate() {
            let section = format!("[[port]] #{}", i + 1);
            let Some(f) = self.fields(section.clone(), None, node, PORT_KEYS) else {
                port_names.push(None);
                port_specs.push(None);
                memberships.push(None);
                continue;
            };
            self.remember_lines(&f);
            memberships.push(self.membership(&f));
            let (name, port, refs) = self.port(
                &f,
                &spec,
                base_dir,
                &mut seen_names,
                &mut seen_ips,
                &mut seen_tx,
                &mut seen_kernel,
            );
            listed_features.extend(self.port_features(&f, name.as_deref()));
            port_names.push(name);
            port_specs.push(port);
            files.extend(refs);
        }

        self.vxlan_ports(&ports, &mut port_specs);

        // Neighbours.
        let mut neigh: Vec<Option<NeighbourSpec>> = Vec::new();
        let mut neigh_ips: HashMap<IpAddr, usize> = HashMap::new();
        for (i, node) in neighbours.iter().enumerate() {
            let section = format!("[[neighbour]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, NEIGHBOUR_KEYS) else {
                neigh.push(None);
                continue;
            };
            neigh.push(self.neighbour(&f, &port_names, &port_specs, &mut neigh_ips));
        }

        // Routes: a next hop is a static neighbour or a host on a port's prefix.
        let connected: Vec<(IpAddr, u8)> = port_specs
            .iter()
            .flatten()
            .flat_map(|p| p.own_addresses())
            .collect();
        let mut seen_prefixes: HashMap<(IpAddr, u8), usize> = HashMap::new();
        for (i, node) in routes.iter().enumerate() {
            let section = format!("[[route]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, ROUTE_KEYS) else {
                continue;
            };
            self.route(&f, &neigh_ips, &connected, &mut seen_prefixes, &mut spec);
        }
        let rc = RouteContext {
            neighbours: &neigh_ips,
            connected: &connected,
            table_routes: &seen_prefixes,
            config_label: self.file,
        };
        self.route_file(&top, base_dir, &rc, &mut spec);

        // Cross-connects.
        let mut seen_from: HashMap<usize, usize> = HashMap::new();
        for (i, node) in xconnects.iter().enumerate() {
            let section = format!("[[xconnect]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, XCONNECT_KEYS) else {
                continue;
            };
            self.remember_lines(&f);
            if let Some(x) = self.xconnect(&f, &port_names, &mut seen_from) {
                spec.xconnects.push(x);
            }
        }

        // Bridges and their ports.
        let bridge_names = self.bridge_names(&bridges, base_dir);
        self.bridges(&memberships, &bridge_names, &port_specs, &mut spec);

        // The load balancer (its NAT inside ports name ports of this config).
        if let Some(n) = top.get("lb") {
            spec.lb = self.lb(n, base_dir, &port_names, &port_specs, spec.workers);
        }

        // BGP announces the VIPs of [lb].
        let bgp = top
            .get("bgp")
            .and_then(|n| self.bgp(n, base_dir, top.get("lb").is_some(), &mut files));

        // Registered features check their own tables, knowing the ports.
        let start = crate::registry::StartContext {
            ports: port_names.iter().flatten().cloned().collect(),
            workers: spec.workers.max(1),
        };
        let features: Vec<(String, toml::Value)> = registered
            .iter()
            .filter_map(|f| {
                let node = top.get(f.name())?;
                let table = self.feature_table(f.name(), node, &start)?;
                Some((f.name().to_string(), table))
            })
            .collect();
        // The ports' `features` name running features, on arcs they have a place on.
        let mut running: Vec<(String, Vec<String>)> = Vec::new();
        for f in registered.iter().filter(|f| top.get(f.name()).is_some()) {
            for d in f.arcs() {
                match running.iter_mut().find(|(n, _)| *n == d.name) {
                    Some((_, arcs)) => arcs.push(d.arc),
                    None => running.push((d.name, vec![d.arc])),
                }
            }
        }
        let port_features = self.check_port_features(listed_features, &running);

        spec.ports = port_specs.into_iter().flatten().collect();
        spec.neighbours = neigh.into_iter().flatten().collect();
        Parsed {
            spec,
            files,
            api,
            bgp,
            features,
            port_features,
        }
    }

    pub(super) fn array_of_tables<'t>(&mut self, top: &Fields<'t>, key: &str) -> Vec<&'t Node> {
        let Some(n) = top.get(key) else {
            return Vec::new();
        };
        match n.get_ref() {
            Val::Array(items) => items.iter().collect(),
            other => {
                self.error(
                    &n.span(),
                    "",
                    Some(key),
                    format!(
                        "expected an array of tables, found {}; accepted: one `[[{key}]]` \
                         header per {key}",
                        kind(other)
                    ),
                );
                Vec::new()
            }
        }
    }
}
