//! The config tables of registered features (`crate::registry`): `[NAME]` for each installed
//! feature, handed to the feature as TOML to check, its problems placed at the line of the key
//! at fault. The hub knows no feature's keys; each feature checks its own table.

use super::ctx::Ctx;
use super::value::{Node, Val};
use crate::registry::{self, StartContext};

/// Convert a spanned config value into plain TOML for a feature.
fn to_toml(node: &Node) -> toml::Value {
    match node.get_ref() {
        Val::Str(s) => toml::Value::String(s.clone()),
        Val::Int(i) => toml::Value::Integer(*i),
        Val::Float(f) => toml::Value::Float(*f),
        Val::Bool(b) => toml::Value::Boolean(*b),
        Val::Array(items) => toml::Value::Array(items.iter().map(to_toml).collect()),
        Val::Table(entries) => toml::Value::Table(
            entries
                .iter()
                .map(|(k, v)| (k.get_ref().clone(), to_toml(v)))
                .collect(),
        ),
    }
}

impl Ctx<'_> {
    /// Check the table of feature `name` (`node`, a top-level key) with the feature; its
    /// problems become issues at their keys' lines. Returns the table when it is valid.
    pub(super) fn feature_table(
        &mut self,
        name: &str,
        node: &Node,
        cx: &StartContext,
    ) -> Option<toml::Value> {
        let section = format!("[{name}]");
        let Val::Table(entries) = node.get_ref() else {
            self.error(
                &node.span(),
                &section,
                None,
                "expected a table (`[NAME]` with its keys)",
            );
            return None;
        };
        let feature = registry::find(name)?;
        let table = to_toml(node);
        self.lines
            .insert(section.clone(), self.line_of(node.span().start));
        match feature.check(&table, cx) {
            Ok(()) => Some(table),
            Err(problems) => {
                for p in problems {
                    let span = p
                        .key
                        .as_deref()
                        .and_then(|k| entries.iter().find(|(key, _)| key.get_ref() == k))
                        .map(|(key, _)| key.span())
                        .unwrap_or_else(|| node.span());
                    self.error(&span, &section, p.key.as_deref(), p.message);
                }
                None
            }
        }
    }
}
