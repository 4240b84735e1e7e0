//! The golden rule sets under tests/golden/rulesets: NAME.flows (ovs-ofctl add-flows text),
//! optional NAME.groups (add-groups text, OpenFlow 1.5 for selection_method), NAME.packets (one
//! packet a line in OVS flow syntax) and NAME.expected (what Open vSwitch 3.1 answered for each
//! packet: canonical datapath actions in OpenFlow ports, then the megaflow, tab-separated;
//! rewritten by the OVS test under VECPLANE_BLESS=1). Owns only reading and writing them.

use std::path::{Path, PathBuf};

/// One golden rule set.
pub struct RuleSet {
    /// File stem.
    pub name: String,
    /// ovs-ofctl add-flows text.
    pub flows: String,
    /// ovs-ofctl add-groups text (may be empty).
    pub groups: String,
    /// Packets in OVS flow syntax.
    pub packets: Vec<String>,
    /// Recorded answers (packet, actions, megaflow), if recorded.
    pub expected: Vec<(String, String, String)>,
}

/// The directory of the rule sets.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/rulesets")
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Every golden rule set, by name.
pub fn load_all() -> Vec<RuleSet> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("golden rule set directory")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".flows").map(str::to_string)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let read = |ext: &str| std::fs::read_to_string(dir().join(format!("{name}.{ext}")));
            let flows = read("flows").expect("flows file");
            let packets = lines(&read("packets").expect("packets file"));
            let expected = read("expected")
                .map(|t| {
                    t.lines()
                        .filter_map(|l| {
                            let mut p = l.split('\t');
                            Some((
                                p.next()?.to_string(),
                                p.next()?.to_string(),
                                p.next()?.to_string(),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let groups = read("groups").unwrap_or_default();
            RuleSet {
                name,
                flows,
                groups,
                packets,
                expected,
            }
        })
        .collect()
}

/// The number of rules (non-comment lines) in add-flows text.
pub fn rule_count(flows: &str) -> usize {
    lines(flows).len()
}

/// Write the recorded answers of rule set `name`.
pub fn write_expected(name: &str, rows: &[(String, String, String)]) {
    let text: String = rows
        .iter()
        .map(|(p, a, m)| format!("{p}\t{a}\t{m}\n"))
        .collect();
    std::fs::write(dir().join(format!("{name}.expected")), text).expect("write expected");
}
