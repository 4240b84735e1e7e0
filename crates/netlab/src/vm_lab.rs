//! vecplane with QEMU guests on its vhost-user ports: [`VhostLab`] runs `vecplane run` in this
//! process's network namespace from a config text, in a scratch directory of its own that also
//! holds the vhost-user sockets (the config's relative `socket` paths land there); the two-guest
//! learning bridge of examples/vm-bridge.toml ([`VM_BRIDGE_CONFIG`], [`vm_bridge_guests`]) and a
//! bounded iperf3 run between two guests ([`iperf3`]) are shared by `vecplane demo --vms` and the
//! tests.
//!
//! It owns the daemon (stopped on drop, killed when this process ends) and the scratch directory
//! (deleted on drop and on SIGINT/SIGTERM/SIGHUP through [`crate::cleanup`]); it never touches a
//! socket, guest or process it did not create, and its guests only use 198.18.10.0/24 and
//! 2001:db8:10::/64.

use crate::cleanup::RegisteredDir;
use crate::guest::{guest_mac, Guest, GuestSpec, NicSpec};
use crate::vecplane::{validate_config, Vecplane};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The config of examples/vm-bridge.toml: learning bridge `br0` with vhost-user ports `vm1`
/// (vecplane listens on `vm1.sock`) and `vm2` (QEMU listens on `vm2.sock`, vecplane connects).
pub const VM_BRIDGE_CONFIG: &str = include_str!("../../../examples/vm-bridge.toml");

/// The vhost-user ports of [`VM_BRIDGE_CONFIG`], guest 1's and guest 2's.
pub const VM_BRIDGE_PORTS: [&str; 2] = ["vm1", "vm2"];

/// Prefix of the labs' scratch directories (`<tmp>/vvu-<pid>-<seq>`).
pub const VHOST_PREFIX: &str = "vvu";

/// Guest `n`'s IPv4 address (198.18.10.`n`, in a /24).
pub fn vm_ip4(n: u8) -> String {
    format!("198.18.10.{n}")
}

/// Guest `n`'s IPv6 address (2001:db8:10::`n`, in a /64).
pub fn vm_ip6(n: u8) -> String {
    format!("2001:db8:10::{n}")
}

/// A guest named `name` with one vhost-user NIC on `socket` (`qemu_server`: QEMU listens there)
/// and guest `n`'s addresses.
pub fn vhost_guest(name: &str, n: u8, socket: &Path, qemu_server: bool) -> GuestSpec {
    GuestSpec::new(name)
        .nic(NicSpec::VhostUser {
            socket: socket.to_path_buf(),
            server: qemu_server,
            mac: guest_mac(n, 0),
            queues: 1,
        })
        .addresses(&format!("{}/24", vm_ip4(n)), &format!("{}/64", vm_ip6(n)))
}

/// The guests of [`VM_BRIDGE_CONFIG`] on `lab`: vm1 (guest 1, connecting to vecplane's socket)
/// and vm2 (guest 2, QEMU listening on the socket vecplane connects to), in the order to start
/// them.
pub fn vm_bridge_guests(lab: &VhostLab) -> Vec<GuestSpec> {
    let [p1, p2] = VM_BRIDGE_PORTS;
    vec![
        vhost_guest(p1, 1, &lab.socket(p1), false),
        vhost_guest(p2, 2, &lab.socket(p2), true),
    ]
}

/// Deadline of one short guest command.
const GUEST_COMMAND: Duration = Duration::from_secs(30);

/// A `vecplane run` daemon with its config, control socket, log and vhost-user sockets in a
/// scratch directory; the daemon is stopped and the directory deleted on drop (in that order:
/// the fields drop in declaration order).
pub struct VhostLab {
    vecplane: Option<Vecplane>,
    dir: RegisteredDir,
}

impl VhostLab {
    /// Validate `config`, write it to a fresh scratch directory, start `exe run` on it (in this
    /// process's network namespace) and wait until its control socket answers.
    pub fn start(exe: &Path, config: &str) -> Result<VhostLab> {
        VhostLab::start_in(exe, config, None)
    }

    /// [`VhostLab::start`], the daemon inside netlab namespace `ns` when given (for ports on
    /// that namespace's interfaces besides the vhost-user ones; the sockets stay in the scratch
    /// directory, which every namespace sees, and deleting the namespace ends the daemon).
    pub fn start_in(exe: &Path, config: &str, ns: Option<&str>) -> Result<VhostLab> {
        validate_config(config)?;
        // Deleted on drop, also on the error paths below.
        let dir = RegisteredDir::create(VHOST_PREFIX)?;
        let path = dir.path().join("vecplane.toml");
        std::fs::write(&path, config).with_context(|| format!("write {}", path.display()))?;
        let vecplane = match ns {
            Some(ns) => crate::vecplane::start_in(ns, dir.path(), exe, &path)?,
            None => Vecplane::start_here(exe, &path, dir.path())?,
        };
        Ok(VhostLab {
            vecplane: Some(vecplane),
            dir,
        })
    }

    /// The vhost-user socket of port `port` (`<port>.sock` in the scratch directory).
    pub fn socket(&self, port: &str) -> PathBuf {
        self.dir.path().join(format!("{port}.sock"))
    }

    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon.
    pub fn vecplane(&self) -> Result<&Vecplane> {
        self.vecplane.as_ref().context("vecplane was stopped")
    }

    /// An error (with the daemon's output) if the daemon has exited.
    pub fn check_running(&mut self) -> Result<()> {
        match self.vecplane.as_mut() {
            Some(v) => v.check_running(),
            None => bail!("vecplane was stopped"),
        }
    }

    /// Port `name`'s entry of `show interfaces` (JSON: counters, driver state and counters).
    pub fn port(&self, name: &str) -> Result<Value> {
        let r = self.vecplane()?.request("show interfaces", true)?;
        let data = r.data.context("`show interfaces` answered without data")?;
        data.get("interfaces")
            .and_then(Value::as_array)
            .and_then(|ports| ports.iter().find(|p| p["name"] == name))
            .cloned()
            .with_context(|| format!("no port {name} in `show interfaces`: {data}"))
    }

    /// What vecplane logged about its guests that must not happen: malformed rings and failed
    /// vhost-user requests.
    pub fn guest_errors(&self) -> Vec<String> {
        let log = self
            .vecplane
            .as_ref()
            .map(Vecplane::log)
            .unwrap_or_default();
        log.lines()
            .filter(|l| l.contains("malformed ring") || l.contains("request failed"))
            .map(str::to_string)
            .collect()
    }

    /// Stop the daemon (an error, with its output, unless it exits cleanly) and delete the
    /// scratch directory.
    pub fn stop(mut self) -> Result<()> {
        match self.vecplane.take() {
            Some(v) => v.stop().map(|_| ()),
            None => Ok(()),
        }
    }
}

impl Drop for VhostLab {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(v) = &self.vecplane {
                eprintln!("--- vecplane log ---\n{}", v.log());
            }
        }
    }
}

/// A bounded iperf3 run from `client` to `server` listening on `server_ip`
/// ([`iperf3_server`], [`iperf3_client`]), waiting for the server to end. Returns the client's
/// JSON report.
pub fn iperf3(
    client: &mut Guest,
    server: &mut Guest,
    server_ip: &str,
    extra: &str,
    seconds: u32,
) -> Result<Value> {
    iperf3_server(server, server_ip, seconds)?;
    let report = iperf3_client(client, server_ip, extra, seconds)?;
    // The server exits after its one test; wait for it so a next run can listen.
    server.run_ok(
        "for i in $(seq 50); do netstat -ltn | grep -q :5201 || break; sleep 0.1; done",
        GUEST_COMMAND,
    )?;
    Ok(report)
}

/// Start an iperf3 server on `server` for one test (`-s -1`) on `server_ip`, in the background
/// and bounded by `timeout` (a client of `seconds` has time to finish), and wait until it
/// listens (at most 5 s).
pub fn iperf3_server(server: &mut Guest, server_ip: &str, seconds: u32) -> Result<()> {
    server.run_ok(
        &format!(
            "timeout {} iperf3 -s -1 -B {server_ip} >/tmp/iperf3-server.log 2>&1 &",
            seconds + 40
        ),
        GUEST_COMMAND,
    )?;
    server.run_ok(
        "for i in $(seq 50); do netstat -ltn | grep -q :5201 && break; sleep 0.1; done",
        GUEST_COMMAND,
    )?;
    Ok(())
}

/// Run an iperf3 client on `client` to `server_ip` for `seconds` (`extra`: more client options,
/// e.g. `-u -b 50M`), bounded by `timeout`. Returns its JSON report (an error if it printed
/// none, or reported an error).
pub fn iperf3_client(
    client: &mut Guest,
    server_ip: &str,
    extra: &str,
    seconds: u32,
) -> Result<Value> {
    let (_, out) = client.run(
        &format!(
            "timeout {} iperf3 -c {server_ip} -t {seconds} -J --connect-timeout 5000 {extra}",
            seconds + 30
        ),
        Duration::from_secs(u64::from(seconds) + 40),
    )?;
    let v: Value = serde_json::from_str(out.trim())
        .with_context(|| format!("iperf3 {extra} printed no JSON:\n{}", out.trim()))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3 {extra}: {e}");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_config_is_valid_and_names_its_two_ports() {
        validate_config(VM_BRIDGE_CONFIG).unwrap_or_else(|e| panic!("{e}"));
        for p in VM_BRIDGE_PORTS {
            assert!(
                VM_BRIDGE_CONFIG.contains(&format!("name = \"{p}\"")),
                "{p} is not a port of examples/vm-bridge.toml"
            );
        }
    }

    #[test]
    fn bridge_guests_are_valid_and_addressed_in_the_test_ranges() {
        let lab = VhostLab {
            vecplane: None,
            dir: RegisteredDir::create("vtvu").expect("scratch directory"),
        };
        let specs = vm_bridge_guests(&lab);
        assert_eq!(specs.len(), 2);
        for (s, n) in specs.iter().zip(1u8..) {
            s.validate().unwrap_or_else(|e| panic!("{e:#}"));
            assert_eq!(s.ip.as_deref(), Some(format!("198.18.10.{n}/24").as_str()));
            assert_eq!(
                s.ip6.as_deref(),
                Some(format!("2001:db8:10::{n}/64").as_str())
            );
        }
        assert!(matches!(
            &specs[1].nics[0],
            NicSpec::VhostUser { server: true, socket, .. } if socket.ends_with("vm2.sock")
        ));
    }
}
