//! A start node's hold on its feature arc (`graph::arc`): the cursor from the arc's start,
//! the published enabled sets, and the feature nodes to append to the node's next nodes. Owns
//! nothing else; a node whose arc has no registered feature holds none and pays nothing.

use graph::arc::{ArcConfig, ArcCursor, Arcs};
use live::Reader;

/// The arc a start node begins.
pub struct ArcStart {
    cursor: ArcCursor,
    config: Reader<ArcConfig>,
    nodes: Vec<String>,
}

impl ArcStart {
    /// The start of arc `arc` of `arcs`, whose feature nodes the node appends to its next
    /// nodes from index `base`, and whose end is the node's next index `end`. None when the
    /// arc does not exist or has no feature (the node keeps its direct path).
    pub fn new(
        arcs: &Arcs,
        arc: &str,
        config: Reader<ArcConfig>,
        base: u16,
        end: u16,
    ) -> Option<ArcStart> {
        let id = arcs.arc_id(arc)?;
        let cursor = arcs.cursor_at(id, None, base).with_end(end);
        if cursor.is_end_only() {
            return None;
        }
        Some(ArcStart {
            cursor,
            config,
            nodes: arcs.features_after(id, None),
        })
    }

    /// The feature nodes, in next-index order from `base`.
    pub fn next_nodes(&self) -> &[String] {
        &self.nodes
    }

    /// How many next nodes the arc adds.
    #[inline(always)]
    pub fn node_count(&self) -> u16 {
        self.nodes.len() as u16
    }

    /// The cursor from the start.
    #[inline(always)]
    pub fn cursor(&self) -> ArcCursor {
        self.cursor
    }

    /// The enabled sets by place, from the snapshot current for this vector.
    #[inline(always)]
    pub fn masks(&self) -> &[u32] {
        self.config.get().masks(self.cursor.arc())
    }

    /// The enabled sets when some place has a feature of this arc enabled, else `None`: read
    /// once per vector, so a start node whose arc's features are all off sends every packet to
    /// the arc's end without looking up its place.
    #[inline(always)]
    pub fn enabled_masks(&self) -> Option<&[u32]> {
        let masks = self.masks();
        masks.iter().any(|&m| m != 0).then_some(masks)
    }
}
