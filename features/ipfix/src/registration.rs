//! IPFIX as the feature registry sees it (`control::registry`): the `[ipfix]` table checked
//! and started, its nodes placed on the arcs of every worker, `show ipfix`, its Prometheus
//! families and its reload. The one thing the binary names is `IPFIX`. It owns no metering or
//! export logic (the rest of the crate does) and never runs on a worker.

use crate::{feature_decls, ArcBinding, IpfixConfig, IpfixFeature, IpfixHandle, IpfixWorkers};
use crate::{Place, FEATURE, IPFIX_IP4, IPFIX_IP6, IPFIX_OUTPUT};
use control::registry::{Feature, FeatureIssue, RunningFeature, StartContext};
use dataplane::features::{FeatureBuild, WorkerFeature};
use dataplane::BuildError;
use graph::arc::FeatureDecl;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The registration: `control::registry::install(vec![&ipfix::registration::IPFIX, ...])`.
pub static IPFIX: Ipfix = Ipfix;

/// IPFIX flow export, as a registered feature.
pub struct Ipfix;

/// `[ipfix]` as TOML, read into the crate's config (its keys are kebab-case, as every
/// vecplane table's).
fn config_of(table: &toml::Value) -> Result<IpfixConfig, FeatureIssue> {
    table
        .clone()
        .try_into::<IpfixConfig>()
        .map_err(|e| FeatureIssue::table(e.message().trim().to_string()))
}

fn key_name(key: &str) -> String {
    key.replace('_', "-")
}

impl Feature for Ipfix {
    fn name(&self) -> &'static str {
        FEATURE
    }

    fn summary(&self) -> &'static str {
        "IPFIX flow export (RFC 7011): per-port metering on the ip4-unicast, ip6-unicast and \
         output arcs, records over UDP to collectors"
    }

    fn arcs(&self) -> Vec<FeatureDecl> {
        feature_decls()
    }

    fn check(&self, table: &toml::Value, _: &StartContext) -> Result<(), Vec<FeatureIssue>> {
        let config = config_of(table).map_err(|e| vec![e])?;
        config.validate().map_err(|e| {
            vec![FeatureIssue::key(
                &key_name(e.key),
                format!("`{}`: {}", e.value, e.accepted),
            )]
        })
    }

    fn start(
        &self,
        table: &toml::Value,
        _: &StartContext,
    ) -> Result<Arc<dyn RunningFeature>, String> {
        let config = config_of(table).map_err(|e| e.message)?;
        let (handle, workers) = IpfixFeature::new(config).map_err(|e| e.to_string())?;
        Ok(Arc::new(RunningIpfix {
            handle: Mutex::new(Some(handle)),
            workers: Arc::new(IpfixOnArcs(workers)),
        }))
    }
}

/// The running feature: the exporter's handle (taken at stop) and the node factory.
struct RunningIpfix {
    handle: Mutex<Option<IpfixHandle>>,
    workers: Arc<IpfixOnArcs>,
}

impl RunningIpfix {
    fn with<T>(&self, f: impl FnOnce(&IpfixHandle) -> T) -> Option<T> {
        self.handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(f)
    }
}

impl RunningFeature for RunningIpfix {
    fn name(&self) -> &'static str {
        FEATURE
    }

    fn worker(&self) -> Arc<dyn WorkerFeature> {
        self.workers.clone()
    }

    fn show(&self) -> (String, Value) {
        let Some((config, stats)) = self.with(|h| (h.config(), h.stats())) else {
            return ("ipfix: stopped\n".into(), json!({"state": "stopped"}));
        };
        let e = &stats.exporter;
        let mut text = format!(
            "IPFIX to {} (domain {}, 1 packet in {}, active {} s, idle {} s)\n",
            config
                .collectors
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            config.observation_domain,
            config.sampling,
            config.active_timeout_s,
            config.idle_timeout_s
        );
        text.push_str(&format!("exporter: {e:?}\n"));
        for (i, w) in stats.workers.iter().enumerate() {
            text.push_str(&format!(
                "worker {i}: {} packets metered, {} flows live, {} records, {} evicted, {} lost \
                 to a full ring\n",
                w.packets, w.live_flows, w.records, w.evicted, w.ring_drops
            ));
        }
        (text, json!({"config": config, "stats": stats}))
    }

    fn metrics(&self) -> String {
        let Some(stats) = self.with(|h| h.stats()) else {
            return String::new();
        };
        let mut out = String::new();
        let mut family = |name: &str, help: &str, values: Vec<(usize, u64)>| {
            out.push_str(&format!(
                "# TYPE vecplane_ipfix_{name} counter\n# HELP vecplane_ipfix_{name} {help}\n"
            ));
            for (w, v) in values {
                out.push_str(&format!(
                    "vecplane_ipfix_{name}_total{{worker=\"{w}\"}} {v}\n"
                ));
            }
        };
        let per = |f: fn(&crate::WorkerStats) -> u64| -> Vec<(usize, u64)> {
            stats.workers.iter().map(f).enumerate().collect()
        };
        family("packets", "Packets metered", per(|w| w.packets));
        family(
            "records",
            "Flow records handed to the exporter",
            per(|w| w.records),
        );
        family(
            "evicted",
            "Flows evicted from a full table",
            per(|w| w.evicted),
        );
        family(
            "ring_drops",
            "Records lost to a full ring",
            per(|w| w.ring_drops),
        );
        out
    }

    fn check_reload(&self, table: &toml::Value) -> Result<(), String> {
        let next = config_of(table).map_err(|e| e.message)?;
        next.validate().map_err(|e| e.to_string())?;
        let Some(current) = self.with(|h| h.config()) else {
            return Err("ipfix is stopped".into());
        };
        let restart = current.restart_keys(&next);
        if restart.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} cannot change while vecplane runs (restart to change them)",
                restart
                    .iter()
                    .map(|k| key_name(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }

    fn reload(&self, table: &toml::Value) -> Result<Value, String> {
        let next = config_of(table).map_err(|e| e.message)?;
        self.with(|h| h.apply(next.clone()))
            .ok_or_else(|| "ipfix is stopped".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(json!(next))
    }

    fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            h.shutdown(Duration::from_secs(1));
        }
    }
}

/// The worker half: `ipfix-ip4`, `ipfix-ip6`, `ipfix-output` on their arcs and the
/// `ipfix-timer` input, in every worker's graph.
struct IpfixOnArcs(IpfixWorkers);

impl WorkerFeature for IpfixOnArcs {
    fn name(&self) -> &str {
        FEATURE
    }

    fn arcs(&self) -> Vec<FeatureDecl> {
        feature_decls()
    }

    fn add_nodes(&self, cx: &mut FeatureBuild<'_>) -> Result<(), BuildError> {
        let failed = |e: &dyn std::fmt::Display| BuildError::Routing(format!("ipfix: {e}"));
        let w = self.0.worker().map_err(|e| failed(&e))?;
        let binding = |cx: &FeatureBuild<'_>, arc: &str, place: Place| {
            let id = cx.arcs.arc_id(arc)?;
            let pos = cx.arcs.position(id, FEATURE)?;
            Some(ArcBinding {
                next_nodes: cx.arcs.next_nodes(id, Some(pos)),
                cursor: cx.arcs.cursor_at(id, Some(pos), 0),
                config: (cx.config)(),
                place,
            })
        };
        let missing = |node: &str| failed(&format!("node {node} has no place on its arc"));
        let ip4 = binding(cx, "ip4-unicast", Place::RxPort).ok_or_else(|| missing(IPFIX_IP4))?;
        let ip6 = binding(cx, "ip6-unicast", Place::RxPort).ok_or_else(|| missing(IPFIX_IP6))?;
        let out = binding(cx, "output", Place::TxPort).ok_or_else(|| missing(IPFIX_OUTPUT))?;
        cx.graph.add_node(w.ip4_node(ip4));
        cx.graph.add_node(w.ip6_node(ip6));
        cx.graph
            .add_node(w.output_node(out).map_err(|e| failed(&e))?);
        cx.graph.add_input(w.timer());
        Ok(())
    }
}
