//! Cycle counts of the flow caches (run with `--ignored`).
