//! Feature arcs: named, ordered chains of optional feature nodes between an arc's start node
//! and its end node, enabled per place (a port, or the member ports of a bridge) and changed at
//! run time, as VPP's `vnet_feature` arcs are. Owns the arc layout (which features an arc has,
//! in which order, from their before/after constraints), the enabled sets (`ArcConfig`, one
//! published snapshot for every arc) and the per-packet step to the next enabled feature
//! (`ArcCursor`). It never knows what a feature does, and never allocates, locks or counts on
//! the fast path.
//!
//! Every registered feature's node is always in the graph; a packet visits only the features
//! enabled for its place. The start node of an arc (e.g. `ip4-input` for `ip4-unicast`) and
//! every feature node on it hold an `ArcCursor`: their next nodes are the later features of the
//! arc followed by the arc's end (e.g. `ip4-lookup`), so a disabled feature costs a shift and a
//! bit scan, and an arc with nothing enabled for a port sends its packets straight to the end.
//!
//! ```
//! use graph::arc::{ArcConfig, ArcsBuilder, FeatureDecl};
//!
//! let mut b = ArcsBuilder::new();
//! b.arc("ip4-unicast", "ip4-lookup");
//! b.feature(FeatureDecl::new("ip4-unicast", "acl", "acl-ip4"));
//! b.feature(FeatureDecl::new("ip4-unicast", "export", "export-ip4").after("acl"));
//! let arcs = b.build().expect("a valid layout");
//! let ip4 = arcs.arc_id("ip4-unicast").expect("an arc");
//! // ip4-input's next nodes for the arc: each feature, then the end.
//! assert_eq!(arcs.next_nodes(ip4, None), ["acl-ip4", "export-ip4", "ip4-lookup"]);
//!
//! // Port 1 exports, port 0 has nothing enabled.
//! let mut config = ArcConfig::new(&arcs, 2);
//! config.enable(&arcs, "ip4-unicast", "export", 1).expect("a feature");
//! let start = arcs.cursor_at(ip4, None, 0);
//! assert_eq!(start.next(config.masks(ip4), 0), 2); // port 0: straight to ip4-lookup
//! assert_eq!(start.next(config.masks(ip4), 1), 1); // port 1: export-ip4
//! let export = arcs.cursor(ip4, Some("export"), 0).expect("on the arc");
//! assert_eq!(export.next(config.masks(ip4), 1), 0); // then ip4-lookup
//! ```

use std::collections::BTreeSet;
use thiserror::Error;

/// Most features one arc holds (a place's enabled set is one `u32`, bit = position).
pub const MAX_FEATURES: usize = 31;

/// Why an arc layout or a change to it was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ArcError {
    /// Two arcs, or two features of one arc, share a name.
    #[error("`{0}` is declared twice")]
    Duplicate(String),
    /// A feature names an arc nobody declared.
    #[error("feature `{feature}` is on arc `{arc}`, which does not exist (arcs: {known})")]
    UnknownArc {
        /// The feature.
        feature: String,
        /// The arc it named.
        arc: String,
        /// The arcs that exist.
        known: String,
    },
    /// A feature named in a change is not on the arc.
    #[error("arc `{arc}` has no feature `{feature}` (features: {known})")]
    UnknownFeature {
        /// The arc.
        arc: String,
        /// The feature named.
        feature: String,
        /// The arc's features.
        known: String,
    },
    /// The before/after constraints of an arc's features contradict each other.
    #[error("arc `{arc}`: the order of {features} contradicts itself")]
    Cycle {
        /// The arc.
        arc: String,
        /// The features caught in the cycle.
        features: String,
    },
    /// An arc has more features than a place's set can hold.
    #[error("arc `{0}` has more than {MAX_FEATURES} features")]
    TooMany(String),
    /// A place past the configured ones.
    #[error("place {place} does not exist (there are {places})")]
    UnknownPlace {
        /// The place named.
        place: usize,
        /// How many there are.
        places: usize,
    },
}

/// Where a feature goes: its arc, its name, the node packets visit, and what it must run
/// before or after (names of other features of the same arc; a name that is not registered is
/// ignored, so optional features may be named).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureDecl {
    /// The arc's name.
    pub arc: String,
    /// The feature's name on the arc (as the operator enables it).
    pub name: String,
    /// The graph node packets visit.
    pub node: String,
    /// Features this one runs before.
    pub before: Vec<String>,
    /// Features this one runs after.
    pub after: Vec<String>,
}

impl FeatureDecl {
    /// Feature `name` on `arc`, visited as node `node`, in no particular order.
    pub fn new(arc: &str, name: &str, node: &str) -> FeatureDecl {
        FeatureDecl {
            arc: arc.into(),
            name: name.into(),
            node: node.into(),
            before: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Run before feature `other`.
    pub fn before(mut self, other: &str) -> FeatureDecl {
        self.before.push(other.into());
        self
    }

    /// Run after feature `other`.
    pub fn after(mut self, other: &str) -> FeatureDecl {
        self.after.push(other.into());
        self
    }
}

/// Collects arcs and features, then orders them (`build`).
#[derive(Clone, Debug, Default)]
pub struct ArcsBuilder {
    arcs: Vec<(String, String)>,
    features: Vec<FeatureDecl>,
}

impl ArcsBuilder {
    /// No arcs.
    pub fn new() -> ArcsBuilder {
        ArcsBuilder::default()
    }

    /// Declare arc `name`, whose packets go to node `end` when no enabled feature remains.
    pub fn arc(&mut self, name: &str, end: &str) -> &mut ArcsBuilder {
        self.arcs.push((name.into(), end.into()));
        self
    }

    /// Register a feature.
    pub fn feature(&mut self, decl: FeatureDecl) -> &mut ArcsBuilder {
        self.features.push(decl);
        self
    }

    /// Order every arc's features: each constraint between two registered features holds;
    /// otherwise features keep their registration order (a stable topological sort).
    pub fn build(&self) -> Result<Arcs, ArcError> {
        let mut names = BTreeSet::new();
        for (a, _) in &self.arcs {
            if !names.insert(a.as_str()) {
                return Err(ArcError::Duplicate(a.clone()));
            }
        }
        let known = || {
            self.arcs
                .iter()
                .map(|(a, _)| a.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(f) = self
            .features
            .iter()
            .find(|f| !names.contains(f.arc.as_str()))
        {
            return Err(ArcError::UnknownArc {
                feature: f.name.clone(),
                arc: f.arc.clone(),
                known: known(),
            });
        }
        let arcs = self
            .arcs
            .iter()
            .map(|(name, end)| {
                let on: Vec<&FeatureDecl> =
                    self.features.iter().filter(|f| &f.arc == name).collect();
                let features = order(name, &on)?;
                Ok(ResolvedArc {
                    name: name.clone(),
                    features,
                    end: end.clone(),
                })
            })
            .collect::<Result<Vec<_>, ArcError>>()?;
        Ok(Arcs { arcs })
    }
}

/// `features` of arc `arc` in an order that keeps every constraint (Kahn's algorithm, taking
/// the earliest registered ready feature each step).
fn order(arc: &str, features: &[&FeatureDecl]) -> Result<Vec<(String, String)>, ArcError> {
    if features.len() > MAX_FEATURES {
        return Err(ArcError::TooMany(arc.into()));
    }
    let index = |name: &str| features.iter().position(|f| f.name == name);
    let mut seen = BTreeSet::new();
    for f in features {
        if !seen.insert(f.name.as_str()) {
            return Err(ArcError::Duplicate(format!("{arc}/{}", f.name)));
        }
    }
    // must_precede[i] holds the features that must come before feature i.
    let mut must_precede = vec![BTreeSet::new(); features.len()];
    for (i, f) in features.iter().enumerate() {
        for b in &f.before {
            if let Some(j) = index(b) {
                must_precede[j].insert(i);
            }
        }
        for a in &f.after {
            if let Some(j) = index(a) {
                must_precede[i].insert(j);
            }
        }
    }
    let mut placed = vec![false; features.len()];
    let mut out = Vec::with_capacity(features.len());
    while out.len() < features.len() {
        let ready =
            (0..features.len()).find(|&i| !placed[i] && must_precede[i].iter().all(|&j| placed[j]));
        let Some(i) = ready else {
            let stuck: Vec<&str> = (0..features.len())
                .filter(|&i| !placed[i])
                .map(|i| features[i].name.as_str())
                .collect();
            return Err(ArcError::Cycle {
                arc: arc.into(),
                features: stuck.join(", "),
            });
        };
        placed[i] = true;
        out.push((features[i].name.clone(), features[i].node.clone()));
    }
    Ok(out)
}

/// One arc, ordered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedArc {
    /// The arc's name.
    pub name: String,
    /// (feature name, node name) in the order packets visit them.
    pub features: Vec<(String, String)>,
    /// The node after the last feature.
    pub end: String,
}

/// An arc's index in `Arcs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArcId(pub u8);

/// Every arc's layout; fixed when the graph is built (features enable and disable in
/// `ArcConfig`, which changes at run time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arcs {
    arcs: Vec<ResolvedArc>,
}

impl Arcs {
    /// The arcs, in declaration order.
    pub fn arcs(&self) -> &[ResolvedArc] {
        &self.arcs
    }

    /// The arc called `name`.
    pub fn arc_id(&self, name: &str) -> Option<ArcId> {
        self.arcs
            .iter()
            .position(|a| a.name == name)
            .map(|i| ArcId(i as u8))
    }

    /// Arc `id`'s layout.
    pub fn arc(&self, id: ArcId) -> Option<&ResolvedArc> {
        self.arcs.get(usize::from(id.0))
    }

    /// Feature `feature`'s position on arc `id`.
    pub fn position(&self, id: ArcId, feature: &str) -> Option<usize> {
        self.arc(id)?
            .features
            .iter()
            .position(|(name, _)| name == feature)
    }

    /// The next nodes of the node at feature `from` of arc `id` (None: the arc's start node):
    /// the later features' nodes, then the arc's end. Empty if `id` is not an arc.
    pub fn next_nodes(&self, id: ArcId, from: Option<usize>) -> Vec<String> {
        let Some(arc) = self.arc(id) else {
            return Vec::new();
        };
        let first = from.map_or(0, |p| p + 1);
        arc.features
            .iter()
            .skip(first)
            .map(|(_, node)| node.clone())
            .chain(std::iter::once(arc.end.clone()))
            .collect()
    }

    /// The nodes of the features after feature `from` of arc `id` (None: all of them), without
    /// the end: for a node whose next nodes already hold the arc's end (see
    /// `ArcCursor::with_end`).
    pub fn features_after(&self, id: ArcId, from: Option<usize>) -> Vec<String> {
        let mut v = self.next_nodes(id, from);
        v.pop();
        v
    }

    /// A cursor for the start node of arc `id` (`from` None) or for feature `from`'s node,
    /// whose arc next nodes (`next_nodes`) begin at the node's next index `base`. None when the
    /// feature is not on the arc.
    pub fn cursor_at(&self, id: ArcId, from: Option<usize>, base: u16) -> ArcCursor {
        let first = from.map_or(0, |p| p + 1) as u32;
        let len = self.arc(id).map_or(0, |a| a.features.len()) as u32;
        let after = len.saturating_sub(first) as u16;
        ArcCursor {
            arc: id,
            shift: first,
            end: base + after,
            base,
            after,
        }
    }

    /// As `cursor_at`, naming the feature.
    pub fn cursor(&self, id: ArcId, feature: Option<&str>, base: u16) -> Option<ArcCursor> {
        match feature {
            None => Some(self.cursor_at(id, None, base)),
            Some(f) => self
                .position(id, f)
                .map(|p| self.cursor_at(id, Some(p), base)),
        }
    }
}

/// Which features are enabled where: per arc, one bit set per place (bit = the feature's
/// position on the arc). Built and changed by the control side and published as one snapshot
/// (`live`) for every arc, so a change of several arcs and places is seen at once by a worker
/// at a vector boundary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArcConfig {
    masks: Vec<Vec<u32>>,
}

impl ArcConfig {
    /// Nothing enabled, for `places` places on each of `arcs`' arcs.
    pub fn new(arcs: &Arcs, places: usize) -> ArcConfig {
        ArcConfig {
            masks: vec![vec![0; places]; arcs.arcs.len()],
        }
    }

    /// Arc `id`'s sets by place (empty when `id` is not an arc: every place has nothing).
    #[inline(always)]
    pub fn masks(&self, id: ArcId) -> &[u32] {
        self.masks.get(usize::from(id.0)).map_or(&[], Vec::as_slice)
    }

    /// Enable `feature` of arc `arc` at `place`.
    pub fn enable(
        &mut self,
        arcs: &Arcs,
        arc: &str,
        feature: &str,
        place: usize,
    ) -> Result<(), ArcError> {
        self.set(arcs, arc, feature, place, true)
    }

    /// Disable `feature` of arc `arc` at `place`.
    pub fn disable(
        &mut self,
        arcs: &Arcs,
        arc: &str,
        feature: &str,
        place: usize,
    ) -> Result<(), ArcError> {
        self.set(arcs, arc, feature, place, false)
    }

    /// Whether `feature` of `arc` is enabled at `place` (false for unknown names).
    pub fn is_enabled(&self, arcs: &Arcs, arc: &str, feature: &str, place: usize) -> bool {
        let Some(id) = arcs.arc_id(arc) else {
            return false;
        };
        let Some(pos) = arcs.position(id, feature) else {
            return false;
        };
        self.masks(id)
            .get(place)
            .is_some_and(|m| m & (1 << pos) != 0)
    }

    fn set(
        &mut self,
        arcs: &Arcs,
        arc: &str,
        feature: &str,
        place: usize,
        on: bool,
    ) -> Result<(), ArcError> {
        let id = arcs.arc_id(arc).ok_or_else(|| ArcError::UnknownArc {
            feature: feature.into(),
            arc: arc.into(),
            known: arcs
                .arcs
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let pos = arcs
            .position(id, feature)
            .ok_or_else(|| ArcError::UnknownFeature {
                arc: arc.into(),
                feature: feature.into(),
                known: arcs.arcs[usize::from(id.0)]
                    .features
                    .iter()
                    .map(|(f, _)| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let places = self.masks.get(usize::from(id.0)).map_or(0, Vec::len);
        let mask = self
            .masks
            .get_mut(usize::from(id.0))
            .and_then(|m| m.get_mut(place))
            .ok_or(ArcError::UnknownPlace { place, places })?;
        if on {
            *mask |= 1 << pos;
        } else {
            *mask &= !(1 << pos);
        }
        Ok(())
    }
}

/// A node's step along one arc: from its position, the next enabled feature for a place, or
/// the arc's end. Copy, a few bytes; the node reads the place's set from the snapshot it
/// loaded for the vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArcCursor {
    arc: ArcId,
    /// Bits below this are features at or before the node (not next).
    shift: u32,
    /// The next index of the arc's end.
    end: u16,
    /// The next index of the first feature after the node.
    base: u16,
    /// How many features the arc has after the node.
    after: u16,
}

impl ArcCursor {
    /// The arc this cursor walks.
    #[inline(always)]
    pub fn arc(&self) -> ArcId {
        self.arc
    }

    /// The same cursor, sending packets that reach the arc's end to next index `end` (a next
    /// node the node already had, e.g. `ip4-lookup`, with `Arcs::features_after` appended).
    pub fn with_end(mut self, end: u16) -> ArcCursor {
        self.end = end;
        self
    }

    /// True when the arc has no feature after this node: `next` always answers the end.
    #[inline(always)]
    pub fn is_end_only(&self) -> bool {
        self.after == 0
    }

    /// The next index for a packet at `place`, given the arc's sets `masks` (from
    /// `ArcConfig::masks`; a place past them has nothing enabled).
    #[inline(always)]
    pub fn next(&self, masks: &[u32], place: usize) -> u16 {
        let mask = masks.get(place).copied().unwrap_or(0);
        self.next_for(mask)
    }

    /// The next index for a place whose enabled set is `mask`.
    #[inline(always)]
    pub fn next_for(&self, mask: u32) -> u16 {
        let later = mask.checked_shr(self.shift).unwrap_or(0);
        if later == 0 {
            self.end
        } else {
            self.base + later.trailing_zeros() as u16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Arcs {
        let mut b = ArcsBuilder::new();
        b.arc("ip4-unicast", "ip4-lookup").arc("output", "port-tx");
        b.feature(FeatureDecl::new("ip4-unicast", "c", "c-node").after("b"));
        b.feature(FeatureDecl::new("ip4-unicast", "a", "a-node").before("b"));
        b.feature(FeatureDecl::new("ip4-unicast", "b", "b-node"));
        b.feature(FeatureDecl::new("output", "x", "x-node").after("not-registered"));
        b.build().expect("valid")
    }

    #[test]
    fn constraints_order_features_and_registration_breaks_ties() {
        let arcs = layout();
        let ip4 = arcs.arc_id("ip4-unicast").expect("arc");
        let names: Vec<&str> = arcs
            .arc(ip4)
            .expect("arc")
            .features
            .iter()
            .map(|(f, _)| f.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            arcs.next_nodes(ip4, Some(1)),
            ["c-node".to_string(), "ip4-lookup".to_string()]
        );
        let out = arcs.arc_id("output").expect("arc");
        assert_eq!(arcs.next_nodes(out, None), ["x-node", "port-tx"]);
    }

    #[test]
    fn contradictions_and_unknown_names_are_refused() {
        let mut b = ArcsBuilder::new();
        b.arc("a", "end");
        b.feature(FeatureDecl::new("a", "x", "x").before("y"));
        b.feature(FeatureDecl::new("a", "y", "y").before("x"));
        assert!(matches!(b.build(), Err(ArcError::Cycle { .. })));
        let mut b = ArcsBuilder::new();
        b.arc("a", "end");
        b.feature(FeatureDecl::new("b", "x", "x"));
        let e = b.build().expect_err("unknown arc");
        assert!(e.to_string().contains("arcs: a"), "{e}");
        let mut b = ArcsBuilder::new();
        b.arc("a", "end").arc("a", "end");
        assert_eq!(b.build(), Err(ArcError::Duplicate("a".into())));
        let mut b = ArcsBuilder::new();
        b.arc("a", "end");
        for i in 0..=MAX_FEATURES {
            b.feature(FeatureDecl::new("a", &i.to_string(), "n"));
        }
        assert_eq!(b.build(), Err(ArcError::TooMany("a".into())));
        let arcs = layout();
        let mut c = ArcConfig::new(&arcs, 1);
        let e = c.enable(&arcs, "ip4-unicast", "z", 0).expect_err("no z");
        assert!(e.to_string().contains("features: a, b, c"), "{e}");
        assert!(c.enable(&arcs, "ip4-unicast", "a", 1).is_err());
        assert_eq!(c, ArcConfig::new(&arcs, 1), "nothing applied");
    }

    #[test]
    fn a_packet_visits_only_what_is_enabled_at_its_place() {
        let arcs = layout();
        let ip4 = arcs.arc_id("ip4-unicast").expect("arc");
        let mut c = ArcConfig::new(&arcs, 3);
        c.enable(&arcs, "ip4-unicast", "a", 1).expect("a");
        c.enable(&arcs, "ip4-unicast", "c", 1).expect("c");
        c.enable(&arcs, "ip4-unicast", "b", 2).expect("b");
        assert!(c.is_enabled(&arcs, "ip4-unicast", "c", 1));
        // Walk each place from the start node, mapping next indices to node names.
        let walk = |c: &ArcConfig, place: usize| {
            let mut path = Vec::new();
            let mut from: Option<usize> = None;
            loop {
                let cursor = arcs.cursor_at(ip4, from, 5);
                let next = cursor.next(c.masks(ip4), place);
                let names = arcs.next_nodes(ip4, from);
                let name = names[usize::from(next - 5)].clone();
                path.push(name.clone());
                if name == "ip4-lookup" {
                    return path;
                }
                from = arcs.position(ip4, &name.replace("-node", ""));
            }
        };
        assert_eq!(walk(&c, 0), ["ip4-lookup"]);
        assert_eq!(walk(&c, 1), ["a-node", "c-node", "ip4-lookup"]);
        assert_eq!(walk(&c, 2), ["b-node", "ip4-lookup"]);
        assert_eq!(walk(&c, 9), ["ip4-lookup"], "a place past the sets");
        c.disable(&arcs, "ip4-unicast", "a", 1).expect("a");
        assert_eq!(walk(&c, 1), ["c-node", "ip4-lookup"]);
    }

    #[test]
    fn the_last_feature_and_a_full_arc_step_to_the_end() {
        let mut b = ArcsBuilder::new();
        b.arc("a", "end");
        for i in 0..MAX_FEATURES {
            b.feature(FeatureDecl::new("a", &i.to_string(), &format!("n{i}")));
        }
        let arcs = b.build().expect("valid");
        let id = ArcId(0);
        let last = arcs.cursor_at(id, Some(MAX_FEATURES - 1), 3);
        assert!(last.is_end_only());
        assert_eq!(last.next_for(u32::MAX), 3);
        let start = arcs.cursor_at(id, None, 0);
        assert_eq!(start.next_for(1 << 30), 30);
        assert_eq!(start.next_for(0), MAX_FEATURES as u16);
        let empty = ArcsBuilder::new().build().expect("no arcs");
        assert_eq!(empty.cursor_at(ArcId(4), None, 7).next(&[], 0), 7);
    }
}
