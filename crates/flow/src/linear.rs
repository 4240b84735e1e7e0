//! A naive reference classifier for differential tests: every rule of a table checked in
//! priority order, the first match wins. Owns nothing but the scan; it is slow on purpose
//! (obviously right) and must never be used on a packet path.

use crate::key::FlowKey;
use crate::rule::RuleId;
use crate::tables::{FlowTables, RuleEntry};
use crate::xlate::{translate_with, Lookup, Translation};

/// The highest-priority rule of `table` matching `key` (ties: the one added first).
pub fn lookup(tables: &FlowTables, table: u8, key: &FlowKey) -> Option<RuleId> {
    scan(tables, table, key).map(|e| e.id)
}

fn scan<'t>(tables: &'t FlowTables, table: u8, key: &FlowKey) -> Option<&'t RuleEntry> {
    let t = tables.tables.get(table as usize)?;
    let mut best: Option<&RuleEntry> = None;
    for e in &t.rules {
        if e.rule.m.matches(key) && best.is_none_or(|b| e.rule.priority > b.rule.priority) {
            best = Some(e);
        }
    }
    best
}

struct LinearLookup;

impl Lookup for LinearLookup {
    fn lookup<'t>(
        &self,
        tables: &'t FlowTables,
        table: u8,
        key: &FlowKey,
        wc: &mut FlowKey,
    ) -> Option<&'t RuleEntry> {
        // The reference consults everything: its mask says nothing.
        wc.w = [u64::MAX; crate::key::KEY_WORDS];
        scan(tables, table, key)
    }
}

/// `FlowTables::translate` with the linear scan in place of the classifier (its `mask` is
/// meaningless: every bit).
pub fn translate(tables: &FlowTables, key: &FlowKey) -> Translation {
    translate_with(tables, &LinearLookup, key)
}

#[cfg(test)]
#[path = "linear_tests.rs"]
mod tests;
