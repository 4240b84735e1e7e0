//! The features this binary has, one line each: the feature registry's list
//! (`control::registry`). Installed before any config is read, so `[NAME]` tables, `show
//! NAME`, `/v1/features/NAME`, the metrics and reloads reach them.

/// Install the registered features (once, at start).
pub fn install() {
    control::registry::install(vec![&ipfix::registration::IPFIX]);
}
