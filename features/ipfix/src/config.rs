//! The `[ipfix]` configuration: its keys and defaults, validation with errors that name the key
//! and what it accepts, and the split between knobs a running feature takes at once
//! (`IpfixHandle::apply`) and those that size per-worker memory (a re-enable). It never opens a
//! socket and never touches a worker.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use thiserror::Error;

/// The IANA-registered IPFIX port (RFC 7011 section 10.3.4).
pub const IPFIX_PORT: u16 = 4739;

/// Private Enterprise Number 32473, which RFC 5612 reserves for documentation and examples:
/// the default owner of the enterprise-specific `openflowCookie` element (IANA has no element
/// for an OpenFlow cookie). Operators with their own PEN set `cookie_enterprise`.
pub const DOCUMENTATION_PEN: u32 = 32473;

/// The feature's configuration (the `[ipfix]` section; every key has a default).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct IpfixConfig {
    /// Where messages go, e.g. `"198.18.0.10:4739"`, `"[2001:db8::10]:4739"`: every message
    /// to each collector (one UDP transport session each).
    pub collectors: Vec<SocketAddr>,
    /// The Observation Domain ID every message carries.
    pub observation_domain: u32,
    /// A flow still active after this many seconds is reported (a delta, `activeTimeout`) and
    /// keeps being metered.
    pub active_timeout_s: u32,
    /// A flow without a packet for this many seconds ends (`idleTimeout`).
    pub idle_timeout_s: u32,
    /// Meter one packet in this many (systematic count-based sampling; 1: every packet).
    pub sampling: u32,
    /// Re-send the templates every this many seconds (RFC 7011 section 8.4, UDP).
    pub template_refresh_s: u32,
    /// Also re-send them after this many messages (0: only on the timer).
    pub template_refresh_messages: u32,
    /// Largest IPFIX message (the UDP payload), in bytes: records are packed up to it.
    pub mtu: u16,
    /// Flows each worker meters at once per family and metering place (input or output); a
    /// new flow in a full bucket evicts the bucket's oldest (`lackOfResources`).
    pub flows_per_worker: u32,
    /// Records each worker's ring to the exporter holds (rounded up to a power of two).
    pub ring_records: u32,
    /// The Private Enterprise Number of the `openflowCookie` element.
    pub cookie_enterprise: u32,
}

impl Default for IpfixConfig {
    fn default() -> IpfixConfig {
        IpfixConfig {
            collectors: Vec::new(),
            observation_domain: 1,
            active_timeout_s: 60,
            idle_timeout_s: 15,
            sampling: 1,
            template_refresh_s: 600,
            template_refresh_messages: 1000,
            mtu: 1400,
            flows_per_worker: 65536,
            ring_records: 4096,
            cookie_enterprise: DOCUMENTATION_PEN,
        }
    }
}

/// Why a configuration was refused: the key, what it held, and what is accepted.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("ipfix.{key} = {value}: {accepted}")]
pub struct ConfigError {
    /// The key (`ipfix.<key>`).
    pub key: &'static str,
    /// What it held.
    pub value: String,
    /// What would be accepted.
    pub accepted: String,
}

/// Accepted range of `mtu`: room for a header, a template set and the longest record, and no
/// more than a UDP datagram over IPv4 carries.
pub const MTU_RANGE: (u16, u16) = (256, 65_507);

fn range(key: &'static str, v: u32, lo: u32, hi: u32, what: &str) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError {
            key,
            value: v.to_string(),
            accepted: format!("{what} from {lo} to {hi}"),
        })
    }
}

impl IpfixConfig {
    /// Check every key; the first error found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.collectors.is_empty() {
            return Err(ConfigError {
                key: "collectors",
                value: "[]".into(),
                accepted: "at least one collector, e.g. [\"198.18.0.10:4739\"]".into(),
            });
        }
        if let Some(c) = self
            .collectors
            .iter()
            .find(|c| c.port() == 0 || c.ip().is_unspecified())
        {
            return Err(ConfigError {
                key: "collectors",
                value: c.to_string(),
                accepted: format!(
                    "a collector's address and a port other than 0 (IPFIX's is {IPFIX_PORT})"
                ),
            });
        }
        range(
            "active_timeout_s",
            self.active_timeout_s,
            1,
            604_800,
            "seconds",
        )?;
        range("idle_timeout_s", self.idle_timeout_s, 1, 86_400, "seconds")?;
        range(
            "sampling",
            self.sampling,
            1,
            1_000_000,
            "one packet in N, N",
        )?;
        range(
            "template_refresh_s",
            self.template_refresh_s,
            1,
            86_400,
            "seconds",
        )?;
        range(
            "template_refresh_messages",
            self.template_refresh_messages,
            0,
            u32::MAX,
            "messages (0: timer only)",
        )?;
        range(
            "mtu",
            u32::from(self.mtu),
            u32::from(MTU_RANGE.0),
            u32::from(MTU_RANGE.1),
            "bytes of IPFIX message",
        )?;
        range(
            "flows_per_worker",
            self.flows_per_worker,
            16,
            1 << 24,
            "flows",
        )?;
        range("ring_records", self.ring_records, 16, 1 << 20, "records")?;
        range(
            "cookie_enterprise",
            self.cookie_enterprise,
            1,
            u32::MAX,
            "a Private Enterprise Number",
        )?;
        Ok(())
    }

    /// The keys whose change needs the feature re-created (they size per-worker memory); empty
    /// when `next` can be applied to a running feature.
    pub fn restart_keys(&self, next: &IpfixConfig) -> Vec<&'static str> {
        let mut keys = Vec::new();
        if self.flows_per_worker != next.flows_per_worker {
            keys.push("flows_per_worker");
        }
        if self.ring_records != next.ring_records {
            keys.push("ring_records");
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> IpfixConfig {
        IpfixConfig {
            collectors: vec!["198.18.0.10:4739".parse().expect("addr")],
            ..IpfixConfig::default()
        }
    }

    #[test]
    fn defaults_with_a_collector_are_valid() {
        assert_eq!(valid().validate(), Ok(()));
    }

    #[test]
    fn errors_name_the_key_the_value_and_what_is_accepted() {
        let e = IpfixConfig::default().validate().expect_err("no collector");
        assert_eq!(e.key, "collectors");
        let mut c = valid();
        c.sampling = 0;
        let e = c.validate().expect_err("sampling 0");
        assert_eq!(
            e.to_string(),
            "ipfix.sampling = 0: one packet in N, N from 1 to 1000000"
        );
        let mut c = valid();
        c.mtu = 100;
        assert!(c
            .validate()
            .expect_err("mtu")
            .to_string()
            .contains("ipfix.mtu = 100"));
        let mut c = valid();
        c.collectors = vec!["[2001:db8::1]:0".parse().expect("addr")];
        assert!(c
            .validate()
            .expect_err("port 0")
            .to_string()
            .contains("[2001:db8::1]:0"));
    }

    #[test]
    fn toml_keys_parse_and_unknown_keys_are_refused() {
        let c: IpfixConfig = serde_json::from_str(
            r#"{"collectors": ["198.18.0.10:4739", "[2001:db8::10]:4739"], "sampling": 1000}"#,
        )
        .expect("parses");
        assert_eq!(c.collectors.len(), 2);
        assert_eq!(c.sampling, 1000);
        assert_eq!(c.idle_timeout_s, 15);
        assert!(serde_json::from_str::<IpfixConfig>(r#"{"colectors": []}"#).is_err());
    }

    #[test]
    fn only_memory_sizes_need_a_restart() {
        let a = valid();
        let mut b = valid();
        b.sampling = 100;
        b.collectors
            .push("[2001:db8::10]:4739".parse().expect("addr"));
        assert!(a.restart_keys(&b).is_empty());
        b.flows_per_worker = 1 << 20;
        assert_eq!(a.restart_keys(&b), ["flows_per_worker"]);
    }
}
