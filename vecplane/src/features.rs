//! The features this binary has, one line each: the feature registry's list
//! (`control::registry`). Installed before any config is read, so `[NAME]` tables, `show
//! NAME`, `/v1/features/NAME`, the metrics and reloads reach them.

/// Install the registered features (once, at start).
pub fn install() {
    control::registry::install(vec![&ipfix::registration::IPFIX]);
}

#[cfg(test)]
mod tests {
    use control::config::{Config, PortFeature};
    use std::path::Path;

    const PORTS: &str = "[ipfix]\ncollectors = [\"127.0.0.1:4739\"]\n\n\
        [[port]]\nname = \"a\"\ndriver = \"memory\"\nmac = \"02:00:00:00:00:01\"\ngenerate = false\n";

    fn parse(features: &str, with_ipfix: bool) -> Result<Config, String> {
        let mut text = format!("{PORTS}features = {features}\n");
        if !with_ipfix {
            text = text.replace("[ipfix]\ncollectors = [\"127.0.0.1:4739\"]\n", "");
        }
        super::install();
        Config::parse(&text, "t.toml", Path::new(".")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_port_enables_running_features_on_their_arcs() {
        let c = parse("{ ip4-unicast = [\"ipfix\"], output = [\"ipfix\"] }", true).expect("ok");
        let f = |arc: &str| PortFeature {
            port: "a".into(),
            arc: arc.into(),
            feature: "ipfix".into(),
        };
        assert_eq!(c.port_features, vec![f("ip4-unicast"), f("output")]);
    }

    #[test]
    fn bad_port_features_name_the_line_and_what_is_accepted() {
        let cases = [
            (
                "\"ipfix\"",
                true,
                "t.toml:9: [[port]] #1 field `features`: found a string; accepted: a table of arcs",
            ),
            (
                "{ l2-input = [\"ipfix\"] }",
                true,
                "`l2-input` is not an arc; accepted: ip4-unicast, ip6-unicast, output",
            ),
            (
                "{ output = \"ipfix\" }",
                true,
                "arc output: found a string; accepted: a list of feature names",
            ),
            (
                "{ output = [1] }",
                true,
                "arc output: found an integer; accepted: a feature name",
            ),
            (
                "{ output = [\"nat\"] }",
                true,
                "`nat` is not a running feature; accepted: ipfix",
            ),
            (
                "{ output = [\"ipfix\"] }",
                false,
                "`ipfix` is not a running feature: this config has no feature table",
            ),
            (
                "{ output = [\"ipfix\", \"ipfix\"] }",
                true,
                "`ipfix` is listed twice on arc output",
            ),
        ];
        for (features, with_ipfix, want) in cases {
            let e = parse(features, with_ipfix).expect_err(features);
            assert!(e.contains(want), "{features}: {e}");
            assert!(e.contains("t.toml:"), "{features}: names the line: {e}");
        }
    }
}
