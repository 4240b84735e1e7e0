//! Linux bridges with TAP ports for QEMU guests ([`crate::NicSpec::Tap`]), in a network namespace
//! of their own so that nothing of the host's network sees them: [`TapBridges`] creates the
//! namespace (IPv6 off, so its devices send nothing of their own), bridges without addresses or
//! STP, TAP devices, and moves TAPs between bridges while guests run.
//!
//! It owns that namespace and everything in it: all of it is deleted on drop, on
//! SIGINT/SIGTERM/SIGHUP and on a panic that aborts (through [`crate::cleanup`]), with the QEMU
//! processes still inside. Names are unique per process and run ([`Names`]); it never touches
//! a device outside its namespace and never gives an address to anything.

use crate::cleanup;
use crate::cmd::{self, in_ns, run_bounded, run_ok, DEFAULT_TIMEOUT};
use crate::guest_spec::{GuestSpec, Mac, NicSpec};
use crate::names::Names;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Prefix of the namespaces of [`TapBridges`] (`vtb-<pid>-<seq>-r`).
pub const TAP_PREFIX: &str = "vtb";

/// A namespace holding Linux bridges and TAP devices for guests.
pub struct TapBridges {
    names: Names,
    bridges: Vec<String>,
    taps: Vec<String>,
    deleted: bool,
}

impl TapBridges {
    /// An empty namespace for bridges and TAPs (see [`TapBridges::create_with_prefix`]).
    pub fn create() -> Result<TapBridges> {
        TapBridges::create_with_prefix(TAP_PREFIX)
    }

    /// An empty namespace named `<prefix>-<pid>-<seq>-r` (leftovers of dead runs with the same
    /// prefix are deleted first).
    pub fn create_with_prefix(prefix: &str) -> Result<TapBridges> {
        if let Some(why) = cmd::missing_prerequisite(&["ip"]) {
            bail!("cannot build Linux bridges with TAP ports: {why}");
        }
        if !Path::new("/dev/net/tun").exists() {
            bail!("cannot build Linux bridges with TAP ports: /dev/net/tun is missing");
        }
        cleanup::install_cleanup_handlers()?;
        cleanup::delete_leftovers(prefix);
        let lab = TapBridges {
            names: Names::next(prefix)?,
            bridges: Vec::new(),
            taps: Vec::new(),
            deleted: false,
        };
        // From here Drop deletes the namespace, also when a step fails.
        let ns = lab.namespace().to_string();
        cleanup::create_namespace(&ns)?;
        for conf in ["all", "default"] {
            cmd::write_sysctl(&ns, &format!("net/ipv6/conf/{conf}/disable_ipv6"), "1")
                .with_context(|| format!("cannot turn IPv6 off in {ns}"))?;
        }
        lab.ip(&["link", "set", "lo", "up"])?;
        Ok(lab)
    }

    /// The namespace's name (QEMU starts there: [`GuestSpec::in_namespace`]).
    pub fn namespace(&self) -> &str {
        &self.names.ns_r
    }

    fn ip(&self, args: &[&str]) -> Result<()> {
        let mut v = vec!["ip", "-n", self.namespace()];
        v.extend_from_slice(args);
        run_ok(&v).map(|_| ())
    }

    /// A new bridge `br<N>`, up, without STP, forwarding delay or address.
    pub fn add_bridge(&mut self) -> Result<String> {
        let name = format!("br{}", self.bridges.len());
        self.ip(&[
            "link",
            "add",
            "name",
            &name,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ])?;
        self.bridges.push(name.clone());
        self.ip(&["link", "set", &name, "up"])?;
        Ok(name)
    }

    /// A new TAP device `tap<N>`, up, a port of `bridge` if given. QEMU attaches to it by name
    /// ([`NicSpec::Tap`]) and brings its carrier up.
    pub fn add_tap(&mut self, bridge: Option<&str>) -> Result<String> {
        let name = format!("tap{}", self.taps.len());
        self.ip(&["tuntap", "add", "dev", &name, "mode", "tap"])?;
        self.taps.push(name.clone());
        self.attach(&name, bridge)?;
        self.ip(&["link", "set", &name, "up"])?;
        Ok(name)
    }

    /// Make `tap` a port of `bridge`, or of no bridge (its frames then go nowhere).
    pub fn attach(&self, tap: &str, bridge: Option<&str>) -> Result<()> {
        if !self.taps.iter().any(|t| t == tap) {
            bail!("{tap} is not a TAP of {}", self.namespace());
        }
        match bridge {
            Some(b) if !self.bridges.iter().any(|x| x == b) => {
                bail!("{b} is not a bridge of {}", self.namespace())
            }
            Some(b) => self.ip(&["link", "set", tap, "master", b]),
            None => self.ip(&["link", "set", tap, "nomaster"]),
        }
    }

    /// The NIC of a guest on `tap` with `mac`.
    pub fn nic(&self, tap: &str, mac: Mac) -> NicSpec {
        NicSpec::Tap {
            ifname: tap.to_string(),
            mac,
        }
    }

    /// `spec` started in this namespace.
    pub fn guest(&self, spec: GuestSpec) -> GuestSpec {
        spec.in_namespace(self.namespace())
    }

    /// The bridges made so far.
    pub fn bridges(&self) -> &[String] {
        &self.bridges
    }

    /// The TAPs made so far.
    pub fn taps(&self) -> &[String] {
        &self.taps
    }

    /// The value of sysctl `key` (`net/bridge/bridge-nf-call-iptables`) in the namespace, if
    /// it exists there.
    pub fn sysctl(&self, key: &str) -> Option<String> {
        let path = format!("/proc/sys/{key}");
        let o = run_bounded(&in_ns(self.namespace(), &["cat", &path]), DEFAULT_TIMEOUT).ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }

    /// Delete the namespace with every bridge and TAP in it (and end what still runs there).
    pub fn delete(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        let ns = self.names.ns_r.clone();
        let failed = cleanup::release(&[&ns], &[]);
        if !failed.is_empty() {
            bail!("cannot delete {}", failed.join("; "));
        }
        Ok(())
    }
}

impl Drop for TapBridges {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("netlab: {e:#}");
        }
    }
}
