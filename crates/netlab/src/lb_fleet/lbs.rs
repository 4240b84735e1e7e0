//! The fleet's load balancers seen from vecplane, and its load: each LB's config (ports `up`
//! and `down` on its bare veth ends, static neighbours, default route via the router, the
//! L3DSR VIP with every server in `[lb]`, `[bgp]` pointing at the LB's BIRD), starting,
//! stopping and killing `vecplane run` in an LB namespace, and bounded curl loops and wrk runs
//! from the client against the VIP. It never edits vecplane's config format and only sends
//! traffic to the fleet's own VIP from the client namespace.

use super::{addr, LbFleet};
use crate::lb::{self, Encap};
use crate::lb_load::{self, LoadResult, WrkJob, WrkSpec};
use crate::vecplane::{validate_config, Vecplane};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::Path;

impl LbFleet {
    /// LB `i`'s vecplane config: ports `up` and `down` on its veth ends (the fleet's driver,
    /// [`addr::lb_up4`] / [`addr::lb_down4`]), static neighbours for the router and every
    /// server, a default route via the router, `[lb]` with `lb conf` (IPv4 source: its `down`
    /// address), the L3DSR VIP [`addr::VIP4`] tcp port 80 dscp 23 with every server (weights
    /// as given), the spec's extra lines, `probe-source4` = its `down` address and the spec's
    /// extra keys, then `[bgp]` (the LB's BIRD socket, its routes file, its liveness device,
    /// the spec's extra `[bgp]` keys) and the spec's extra TOML. Empty for an LB the fleet does not have.
    pub fn vecplane_config(&self, i: usize) -> String {
        if i >= self.spec.lbs {
            return String::new();
        }
        let d = self.spec.driver.name();
        let mut s = format!(
            "# Load balancer {i} of a netlab LbFleet: `up` towards the router (VIP traffic\n\
             # arrives here, spread by ECMP), `down` on the servers' segment.\n\n\
             [dataplane]\nbuffers = 8192\n"
        );
        for (name, dev, mac, ip4) in [
            (
                "up",
                &self.names.lb_up[i],
                addr::lb_up_mac(i),
                addr::lb_up4(i),
            ),
            (
                "down",
                &self.names.lb_down[i],
                addr::lb_down_mac(i),
                addr::lb_down4(i),
            ),
        ] {
            let _ = writeln!(
                s,
                "\n[[port]]\nname = \"{name}\"\ndriver = \"{d}\"\ninterface = \"{dev}\"\n\
                 mac = \"{mac}\"\nmtu = 1500\nip4 = [\"{ip4}/{}\"]",
                lb::addr::LEN4
            );
        }
        let mut neighbours = vec![(
            lb::addr::ROUTER_U4.to_string(),
            lb::addr::MAC_ROUTER_U.to_string(),
            "up",
        )];
        for sv in &self.servers {
            neighbours.push((sv.ip4.to_string(), sv.mac.clone(), "down"));
        }
        for (ip, mac, port) in neighbours {
            let _ = writeln!(
                s,
                "\n[[neighbour]]\nip = \"{ip}\"\nmac = \"{mac}\"\nport = \"{port}\""
            );
        }
        let _ = writeln!(
            s,
            "\n[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"{}\"",
            lb::addr::ROUTER_U4
        );
        let vip = format!("{}/32", addr::VIP4);
        let dscp = match self.encaps[0] {
            Encap::L3dsr { dscp } => dscp,
            _ => addr::VIP_DSCP,
        };
        // One `lb as` per server: VPP's `weight` is the whole line's.
        let mut lines = vec![
            format!("lb conf ip4-src-address {}", addr::lb_down4(i)),
            format!("lb vip {vip} protocol tcp port 80 encap l3dsr dscp {dscp}"),
        ];
        for sv in &self.servers {
            lines.push(format!(
                "lb as {vip} protocol tcp port 80 {} weight {}",
                sv.ip4, sv.weight
            ));
        }
        lines.extend(self.spec.lb_lines.iter().cloned());
        s.push_str("\n[lb]\nlines = [\n");
        for l in &lines {
            let _ = writeln!(s, "  {},", toml_string(l));
        }
        let _ = writeln!(s, "]\nprobe-source4 = \"{}\"", addr::lb_down4(i));
        push_block(&mut s, &self.spec.lb_keys);
        let _ = writeln!(
            s,
            "\n[bgp]\ncontrol-socket = {}\nroutes-file = {}\ninterface = \"{}\"",
            toml_string(&self.bird_socket(i).to_string_lossy()),
            toml_string(&self.routes_file(i).to_string_lossy()),
            self.names.liveness[i]
        );
        push_block(&mut s, &self.spec.bgp_keys);
        if !self.spec.extra_toml.trim().is_empty() {
            s.push('\n');
            push_block(&mut s, &self.spec.extra_toml);
        }
        s
    }

    /// Write LB `i`'s config ([`LbFleet::vecplane_config`]), check it with vecplane's own
    /// parser, start `exe run` in LB `i`'s namespace and wait until its control socket
    /// answers. An error if it already runs.
    pub fn start_lb(&mut self, i: usize, exe: &Path) -> Result<()> {
        let ns = self
            .names
            .ns_lbs
            .get(i)
            .with_context(|| format!("LB {i}: the fleet has {} LBs", self.spec.lbs))?
            .clone();
        if self.vecplanes[i].is_some() {
            bail!("vecplane already runs in LB {i}");
        }
        let text = self.vecplane_config(i);
        validate_config(&text).map_err(|e| {
            anyhow::anyhow!("LB {i}'s vecplane config is refused by vecplane's parser: {e}\n{text}")
        })?;
        let path = self.path(&format!("lb{i}-vecplane.toml"));
        std::fs::write(&path, &text).with_context(|| format!("write {}", path.display()))?;
        let v = crate::vecplane::start_in(&ns, &self.names.dir, exe, &path)
            .with_context(|| format!("vecplane in LB {i}"))?;
        self.vecplanes[i] = Some(v);
        Ok(())
    }

    /// Stop LB `i`'s vecplane (SIGTERM, wait; SIGKILL after a grace period); an error if it
    /// did not run or did not exit cleanly.
    pub fn stop_lb(&mut self, i: usize) -> Result<()> {
        match self.vecplanes.get_mut(i).and_then(Option::take) {
            Some(v) => v.stop().map(|_| ()),
            None => bail!("vecplane does not run in LB {i}"),
        }
    }

    /// Kill LB `i`'s vecplane with SIGKILL (a crash: no withdrawal, its liveness device
    /// vanishes with it) and reap it.
    pub fn kill_lb(&mut self, i: usize) -> Result<()> {
        let Some(mut v) = self.vecplanes.get_mut(i).and_then(Option::take) else {
            bail!("vecplane does not run in LB {i}");
        };
        if v.check_running().is_ok() {
            let pid = libc::pid_t::try_from(v.pid()).context("process id out of range")?;
            // SAFETY: kill() on the id of our own child (`ip netns exec` replaced itself with
            // vecplane), not reaped yet: check_running() just saw it alive.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // Dropping it reaps it (its SIGTERM finds it gone).
        drop(v);
        Ok(())
    }

    /// LB `i`'s running vecplane, if any.
    pub fn lb(&self, i: usize) -> Option<&Vecplane> {
        self.vecplanes.get(i).and_then(Option::as_ref)
    }

    /// `count` sequential requests from the client to the VIP with curl, each on a new
    /// connection (a new flow for ECMP and the LBs), each bounded by 5 s to connect and 8 s in
    /// all (see `lb_load::curl_loop_in`).
    pub fn curl_loop(&self, count: u32) -> Result<LoadResult> {
        lb_load::curl_loop_in(
            self.client_ns(),
            &self.path("curl-loop.txt"),
            &self.vip().url(),
            count,
        )
    }

    /// Run wrk from the client against the VIP as `spec` says (bounded: wrk's own duration,
    /// killed 15 s after it), counting the answers by server name.
    pub fn run_wrk(&self, spec: &WrkSpec) -> Result<LoadResult> {
        self.wrk_job(spec)?.run()
    }

    /// The wrk run of [`LbFleet::run_wrk`], made but not started: it owns what it needs, so
    /// it can run on another thread while the fleet is changed (LBs killed, restarted).
    pub fn wrk_job(&self, spec: &WrkSpec) -> Result<WrkJob> {
        lb_load::wrk_job(
            self.client_ns(),
            &self.path("wrk-count.lua"),
            &self.vip().url(),
            spec,
        )
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut s = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(s, "\\u{:04x}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Append `block` to `s`, ending in a newline.
fn push_block(s: &mut String, block: &str) {
    if !block.trim().is_empty() {
        s.push_str(block.trim_end());
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lb_fleet::FleetSpec;

    #[test]
    fn config_is_accepted_by_vecplane() {
        let mut spec = FleetSpec::new(2, &[1, 3]);
        spec.lb_lines = vec!["lb conf timeout 40".to_string()];
        let f = LbFleet::unbuilt(&spec).expect("fleet value");
        let text = f.vecplane_config(1);
        for want in [
            "interface = \"vlbx1-2u1\"",
            "ip4 = [\"198.18.11.3/24\"]",
            "ip4 = [\"198.18.12.2/24\"]",
            "\"lb vip 198.18.100.1/32 protocol tcp port 80 encap l3dsr dscp 23\",",
            "\"lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 weight 1\",",
            "\"lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.12 weight 3\",",
            "\"lb conf timeout 40\",",
            "probe-source4 = \"198.18.12.2\"",
            "interface = \"vlbx1-2g1\"",
            "routes-file = \"/tmp/vlbf-1-2/lb1-vips.conf\"",
            "control-socket = \"/tmp/vlbf-1-2/lb1-bird.ctl\"",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
        assert!(f.vecplane_config(2).is_empty());
        // The whole config, [bgp] included, is what vecplane's parser accepts.
        if let Err(e) = validate_config(&text) {
            panic!("{e}\n{text}");
        }
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(toml_string("\u{1}"), "\"\\u0001\"");
    }
}
