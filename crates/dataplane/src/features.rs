//! Features on the data plane's arcs: the arcs every graph has (`ip4-unicast`, `ip6-unicast`,
//! `output`), the `WorkerFeature`s registered on them (each adds its nodes to every worker's
//! graph), and `FeatureArcs`, the control side's handle on what is enabled where: it validates
//! a whole change before publishing it as one snapshot, so workers see all of it or none, at a
//! vector boundary, and no packet is lost. It never runs on a worker and never knows what a
//! feature does.

use crate::build::BuildError;
use graph::arc::{ArcConfig, ArcError, Arcs, ArcsBuilder, FeatureDecl};
use graph::GraphBuilder;
use live::{Domain, Publisher, Reader};
use nodes::names;
use std::sync::{Arc, Mutex};

/// What a feature adds to each worker: its nodes, and where on the arcs they go.
pub trait WorkerFeature: Send + Sync {
    /// The feature's name (as `show features` lists it).
    fn name(&self) -> &str;
    /// Its places on the arcs (its nodes must be added by `add_nodes`).
    fn arcs(&self) -> Vec<FeatureDecl>;
    /// Add its nodes (and inputs, if any) to worker `cx.worker`'s graph. Runs on the control
    /// thread while the worker is built; never on the fast path.
    fn add_nodes(&self, cx: &mut FeatureBuild<'_>) -> Result<(), BuildError>;
}

/// What a feature sees while its nodes are added to one worker's graph.
pub struct FeatureBuild<'a> {
    /// The worker.
    pub worker: usize,
    /// Its graph.
    pub graph: &'a mut GraphBuilder,
    /// The arcs, ordered (a feature node's next nodes are `Arcs::next_nodes` from its
    /// position; its cursor is `Arcs::cursor_at`).
    pub arcs: &'a Arcs,
    /// A reader of the enabled sets, for each node that steps along an arc.
    pub config: &'a dyn Fn() -> Reader<ArcConfig>,
    /// TSC ticks per second.
    pub tsc_hz: u64,
}

/// The arcs every graph has, with `features` registered on them.
pub fn layout(features: &[Arc<dyn WorkerFeature>]) -> Result<Arcs, ArcError> {
    let mut b = ArcsBuilder::new();
    b.arc(names::ARC_IP4_UNICAST, names::IP4_LOOKUP)
        .arc(names::ARC_IP6_UNICAST, names::IP6_LOOKUP)
        .arc(names::ARC_OUTPUT, names::INTERFACE_TX);
    for f in features {
        for d in f.arcs() {
            b.feature(d);
        }
    }
    b.build()
}

/// One change of what is enabled: `feature` of `arc` at port `port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArcChange {
    /// The arc.
    pub arc: String,
    /// The feature on it.
    pub feature: String,
    /// The port (the place of every arc here: the receive port of the input arcs, the
    /// transmit port of `output`).
    pub port: usize,
    /// Enable (true) or disable.
    pub enable: bool,
}

/// The control side's handle on the features of the arcs: their layout and what is enabled
/// where, published to every worker.
pub struct FeatureArcs {
    layout: Arcs,
    features: Vec<Arc<dyn WorkerFeature>>,
    publisher: Mutex<Publisher<ArcConfig>>,
}

impl std::fmt::Debug for FeatureArcs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeatureArcs")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl FeatureArcs {
    /// `features` on the standard arcs for `ports` ports, nothing enabled, published in
    /// `domain` (the workers' domain: a snapshot is freed only when every worker moved past it).
    pub fn new(
        features: Vec<Arc<dyn WorkerFeature>>,
        ports: usize,
        domain: &Domain,
    ) -> Result<FeatureArcs, ArcError> {
        let layout = layout(&features)?;
        let config = ArcConfig::new(&layout, ports);
        Ok(FeatureArcs {
            layout,
            features,
            publisher: Mutex::new(Publisher::new(config, domain)),
        })
    }

    /// No features (tools and tests).
    pub fn none(ports: usize) -> FeatureArcs {
        // Nothing can be enabled without features, so nothing is ever published and the
        // domain without workers frees nothing a worker reads.
        let (domain, _) = Domain::new(0);
        let layout = layout(&[]).unwrap_or_default();
        let config = ArcConfig::new(&layout, ports);
        FeatureArcs {
            layout,
            features: Vec::new(),
            publisher: Mutex::new(Publisher::new(config, &domain)),
        }
    }

    /// The arcs and their features, ordered.
    pub fn layout(&self) -> &Arcs {
        &self.layout
    }

    /// The registered features.
    pub fn features(&self) -> &[Arc<dyn WorkerFeature>] {
        &self.features
    }

    /// A reader of the enabled sets, for one worker's node.
    pub fn reader(&self) -> Reader<ArcConfig> {
        self.lock().reader()
    }

    /// What is enabled now.
    pub fn current(&self) -> ArcConfig {
        self.lock().current().clone()
    }

    /// Apply `changes` together: every one is checked first; nothing is published when one is
    /// refused. Returns how many changed something.
    pub fn apply(&self, changes: &[ArcChange]) -> Result<usize, ArcError> {
        let mut publisher = self.lock();
        let (next, changed) = self.changed(publisher.current(), changes)?;
        if changed > 0 {
            publisher.publish(next);
        }
        Ok(changed)
    }

    /// Disable every feature enabled at `port` (a removed port: a later port given its id
    /// starts with nothing), as one version; how many were enabled.
    pub fn disable_port(&self, port: usize) -> Result<usize, ArcError> {
        let current = self.current();
        let changes: Vec<ArcChange> = self
            .layout
            .arcs()
            .iter()
            .flat_map(|a| a.features.iter().map(move |(f, _)| (a.name.as_str(), f)))
            .filter(|(arc, f)| current.is_enabled(&self.layout, arc, f, port))
            .map(|(arc, f)| ArcChange {
                arc: arc.to_string(),
                feature: f.clone(),
                port,
                enable: false,
            })
            .collect();
        if changes.is_empty() {
            return Ok(0);
        }
        self.apply(&changes)
    }

    /// Whether `apply(changes)` would be accepted now (nothing is published).
    pub fn check(&self, changes: &[ArcChange]) -> Result<(), ArcError> {
        let publisher = self.lock();
        self.changed(publisher.current(), changes).map(|_| ())
    }

    /// `current` with `changes`, and how many changed something.
    fn changed(
        &self,
        current: &ArcConfig,
        changes: &[ArcChange],
    ) -> Result<(ArcConfig, usize), ArcError> {
        let mut next = current.clone();
        let mut changed = 0;
        for c in changes {
            let was = next.is_enabled(&self.layout, &c.arc, &c.feature, c.port);
            if c.enable {
                next.enable(&self.layout, &c.arc, &c.feature, c.port)?;
            } else {
                next.disable(&self.layout, &c.arc, &c.feature, c.port)?;
            }
            changed += usize::from(was != c.enable);
        }
        Ok((next, changed))
    }

    /// Add every feature's nodes to worker `worker`'s graph, and `interface-tx` when the
    /// output arc has features.
    pub(crate) fn add_nodes(
        &self,
        worker: usize,
        graph: &mut GraphBuilder,
        interface_tx: impl FnOnce() -> nodes::output::InterfaceOutput,
        tsc_hz: u64,
    ) -> Result<(), BuildError> {
        let output_has_features = self
            .layout
            .arc_id(names::ARC_OUTPUT)
            .and_then(|id| self.layout.arc(id))
            .is_some_and(|a| !a.features.is_empty());
        if output_has_features {
            graph.add_node(Box::new(interface_tx().as_arc_end()));
        }
        let reader = || self.reader();
        let mut cx = FeatureBuild {
            worker,
            graph,
            arcs: &self.layout,
            config: &reader,
            tsc_hz,
        };
        for f in &self.features {
            f.add_nodes(&mut cx)?;
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Publisher<ArcConfig>> {
        // A panic while a change was built left the published snapshot as it was.
        self.publisher.lock().unwrap_or_else(|p| p.into_inner())
    }
}
