//! The port drivers as the config knows them: their names, the keys only their ports accept,
//! and how each driver's keys become a `PortDriver` (pcap files, kernel interfaces, fanout
//! groups, queues). A new driver is a `Drv` variant, its keys and its parser here, and its
//! `Driver` in `dataplane/src/drivers`. Kernel resources are only named here, never opened.

use super::ctx::{Ctx, Field, Fields};
use super::ports::SeenKernel;
use super::{FileKind, FileRef};
use dataplane::{PortDriver, XdpModeChoice};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A port driver as the config names it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Drv {
    Pcap,
    Memory,
    AfPacket,
    AfXdp,
    Tap,
    Vxlan,
    VhostUser,
}

impl Drv {
    pub(super) const ALL: [Drv; 7] = [
        Drv::Pcap,
        Drv::Memory,
        Drv::AfPacket,
        Drv::AfXdp,
        Drv::Tap,
        Drv::Vxlan,
        Drv::VhostUser,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Drv::Pcap => "pcap",
            Drv::Memory => "memory",
            Drv::AfPacket => "af-packet",
            Drv::AfXdp => "af-xdp",
            Drv::Tap => "tap",
            Drv::Vxlan => "vxlan",
            Drv::VhostUser => "vhost-user",
        }
    }

    /// The keys only this driver's ports accept.
    pub(super) fn keys(self) -> &'static [&'static str] {
        match self {
            Drv::Pcap => PCAP_KEYS,
            Drv::Memory => MEMORY_KEYS,
            Drv::AfPacket => AF_PACKET_KEYS,
            Drv::AfXdp => AF_XDP_KEYS,
            Drv::Tap => TAP_KEYS,
            Drv::Vxlan => super::vxlan::VXLAN_KEYS,
            Drv::VhostUser => VHOST_USER_KEYS,
        }
    }
}

pub(super) const PCAP_KEYS: &[&str] = &["rx", "tx"];
pub(super) const MEMORY_KEYS: &[&str] = &[
    "frame-size",
    "flows",
    "src-mac",
    "dst-mac",
    "vlan",
    "src-ip",
    "destinations",
    "limit",
    "generate",
];
pub(super) const AF_PACKET_KEYS: &[&str] = &["interface", "fanout"];
pub(super) const AF_XDP_KEYS: &[&str] = &["interface", "queues", "xdp-mode"];
pub(super) const TAP_KEYS: &[&str] = &["interface", "vnet-hdr", "offloads"];
pub(super) const VHOST_USER_KEYS: &[&str] = &[
    "socket",
    "socket-mode",
    "socket-permissions",
    "socket-group",
    "queues",
];
pub(super) const DRIVERS_ACCEPTED: &str =
    "\"pcap\", \"memory\", \"af-packet\", \"af-xdp\", \"tap\", \"vxlan\", \"vhost-user\"";
pub(super) const SOCKET_MODES_ACCEPTED: &str = "\"server\" (vecplane creates the socket; the \
     default) or \"client\" (vecplane connects to the frontend's socket)";
pub(super) const XDP_MODES_ACCEPTED: &str = "\"auto\", \"native\", \"generic\"";

impl Ctx<'_> {
    /// A pcap port's `rx` and `tx` files (relative to the config's directory), each file
    /// written by one port only and `tx` not the same as `rx`.
    pub(super) fn pcap_driver(
        &mut self,
        f: &Fields<'_>,
        section: &str,
        label: &str,
        base_dir: &Path,
        refs: &mut Vec<FileRef>,
        seen_tx: &mut HashMap<PathBuf, (usize, String)>,
    ) -> Option<PortDriver> {
        let mut path_of = |ctx: &mut Ctx<'_>, key: &'static str| -> Option<PathBuf> {
            match ctx.string(f, key) {
                Field::Ok("", span) => {
                    ctx.error(
                        &span,
                        section,
                        Some(key),
                        "empty path; accepted: a file path relative to the config \
                         file's directory",
                    );
                    None
                }
                Field::Ok(s, span) => {
                    let p = base_dir.join(s);
                    refs.push(FileRef {
                        section: section.to_string(),
                        field: key,
                        line: ctx.line_of(span.start),
                        path: p.clone(),
                        kind: if key == "rx" {
                            FileKind::PcapRx
                        } else {
                            FileKind::PcapTx
                        },
                    });
                    Some(p)
                }
                Field::Missing | Field::Bad => None,
            }
        };
        let rx = path_of(self, "rx");
        let tx = path_of(self, "tx");
        if let (Some(r), Some(t)) = (&rx, &tx) {
            if r == t {
                if let Some(n) = f.get("tx") {
                    self.bad(
                        f,
                        "tx",
                        n,
                        "`tx` is the same file as `rx`; accepted: a different file",
                    );
                }
            }
        }
        if let (Some(t), Some(n)) = (&tx, f.get("tx")) {
            let line = self.line_of(n.span().start);
            if let Some((first, other)) = seen_tx.get(t) {
                let msg = format!(
                    "{} is also the `tx` file of port `{other}` at line {first}; \
                     accepted: one writer per file",
                    t.display()
                );
                self.bad(f, "tx", n, msg);
            } else {
                seen_tx.insert(t.clone(), (line, label.to_string()));
            }
        }
        Some(PortDriver::Pcap { rx, tx })
    }

    /// An AF_PACKET port's interface and fanout group (one port per group).
    pub(super) fn af_packet_driver(
        &mut self,
        f: &Fields<'_>,
        section: &str,
        name: Option<&str>,
        label: &str,
        seen_kernel: &mut SeenKernel,
    ) -> Option<PortDriver> {
        let interface = self.interface(f, name, label, seen_kernel);
        let fanout = match self.int(f, "fanout", 0..=65535) {
            Field::Ok(v, span) => {
                let line = self.line_of(span.start);
                let group = v as u16;
                if let Some((first, other)) = seen_kernel.fanouts.get(&group) {
                    let msg = format!(
                        "fanout group {group} is also used by port `{other}` at line \
                         {first}; accepted: a group id used by one port only (a group \
                         belongs to one interface)"
                    );
                    self.error(&span, section, Some("fanout"), msg);
                    None
                } else {
                    seen_kernel.fanouts.insert(group, (line, label.to_string()));
                    Some(Some(group))
                }
            }
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        match (interface, fanout) {
            (Some(interface), Some(fanout)) => Some(PortDriver::AfPacket { interface, fanout }),
            _ => None,
        }
    }

    /// An AF_XDP port's interface, queues and XDP mode.
    pub(super) fn af_xdp_driver(
        &mut self,
        f: &Fields<'_>,
        section: &str,
        name: Option<&str>,
        label: &str,
        seen_kernel: &mut SeenKernel,
    ) -> Option<PortDriver> {
        let interface = self.interface(f, name, label, seen_kernel);
        let queues = match self.int(f, "queues", 1..=64) {
            Field::Ok(v, _) => Some(v as u32),
            // All of the interface's receive queues, counted when the port opens.
            Field::Missing => Some(0),
            Field::Bad => None,
        };
        let mode = match self.string(f, "xdp-mode") {
            Field::Ok("auto", _) | Field::Missing => Some(XdpModeChoice::Auto),
            Field::Ok("native", _) => Some(XdpModeChoice::Native),
            Field::Ok("generic", _) => Some(XdpModeChoice::Generic),
            Field::Ok(s, span) => {
                self.error(
                    &span,
                    section,
                    Some("xdp-mode"),
                    format!("`{s}` is not an XDP mode; accepted: {XDP_MODES_ACCEPTED}"),
                );
                None
            }
            Field::Bad => None,
        };
        match (interface, queues, mode) {
            (Some(interface), Some(queues), Some(mode)) => Some(PortDriver::AfXdp {
                interface,
                queues,
                mode,
            }),
            _ => None,
        }
    }

    /// A TAP port's device name, `vnet-hdr` and `offloads` (which implies `vnet-hdr`; with
    /// several workers, worker 0 keeps the TAP's offloaded frames and finishes what the others
    /// hand it).
    pub(super) fn tap_driver(
        &mut self,
        f: &Fields<'_>,
        name: Option<&str>,
        label: &str,
        seen_kernel: &mut SeenKernel,
    ) -> Option<PortDriver> {
        let section = f.section.clone();
        let interface = self.interface(f, name, label, seen_kernel);
        let vnet_hdr = match self.boolean(f, "vnet-hdr") {
            Field::Ok(b, span) => Some(Some((b, self.line_of(span.start)))),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        let offloads = match self.boolean(f, "offloads") {
            Field::Ok(true, span) => {
                let mut ok = true;
                if let Some(Some((false, line))) = vnet_hdr {
                    self.error(
                        &span,
                        &section,
                        Some("offloads"),
                        format!(
                            "offloads travel in virtio-net headers, and this port has \
                             `vnet-hdr = false` at line {line}; accepted: vnet-hdr = true or \
                             no vnet-hdr key (offloads = true implies it), or offloads = false"
                        ),
                    );
                    ok = false;
                }
                ok.then_some(true)
            }
            Field::Ok(false, _) | Field::Missing => Some(false),
            Field::Bad => None,
        };
        match (interface, vnet_hdr, offloads) {
            (Some(name), Some(vnet_hdr), Some(offloads)) => Some(PortDriver::Tap {
                name,
                vnet_hdr: vnet_hdr.map_or(offloads, |(b, _)| b),
                offloads,
            }),
            _ => None,
        }
    }

    /// A vhost-user port's `socket` (relative to the config's directory; one port per
    /// socket) and `socket-mode`.
    pub(super) fn vhost_user_driver(
        &mut self,
        f: &Fields<'_>,
        label: &str,
        base_dir: &Path,
        seen: &mut SeenKernel,
    ) -> Option<PortDriver> {
        let section = f.section.clone();
        let socket = match self.string(f, "socket") {
            Field::Ok("", span) => {
                self.error(
                    &span,
                    &section,
                    Some("socket"),
                    "empty path; accepted: a UNIX socket path, relative to the config \
                     file's directory",
                );
                None
            }
            Field::Ok(s, span) => {
                let p = base_dir.join(s);
                let line = self.line_of(span.start);
                if p.as_os_str().len() > 107 {
                    self.error(
                        &span,
                        &section,
                        Some("socket"),
                        format!(
                            "socket path {} is {} bytes long; accepted: at most 107 bytes \
                             (a UNIX socket address)",
                            p.display(),
                            p.as_os_str().len()
                        ),
                    );
                    None
                } else if let Some((first, other)) = seen.sockets.get(&p) {
                    let msg = format!(
                        "socket {} is also the socket of port `{other}` at line {first}; \
                         accepted: one port per socket",
                        p.display()
                    );
                    self.error(&span, &section, Some("socket"), msg);
                    None
                } else {
                    seen.sockets.insert(p.clone(), (line, label.to_string()));
                    Some(p)
                }
            }
            Field::Missing => {
                self.missing(f, "socket", "a UNIX socket path");
                None
            }
            Field::Bad => None,
        };
        let mode = match self.string(f, "socket-mode") {
            Field::Ok("server", _) | Field::Missing => Some(vhostuser::SocketMode::Server),
            Field::Ok("client", _) => Some(vhostuser::SocketMode::Client),
            Field::Ok(s, span) => {
                self.error(
                    &span,
                    &section,
                    Some("socket-mode"),
                    format!("`{s}` is not a socket mode; accepted: {SOCKET_MODES_ACCEPTED}"),
                );
                None
            }
            Field::Bad => None,
        };
        let max = vhostuser::device::MAX_QUEUE_PAIRS as i64;
        let queues = match self.int(f, "queues", 1..=max) {
            Field::Ok(v, _) => Some(v as u16),
            Field::Missing => Some(1),
            Field::Bad => None,
        };
        let access = self.vhost_socket_access(f, mode);
        Some(PortDriver::VhostUser {
            socket: socket?,
            mode: mode?,
            queues: queues?,
            access: access?,
        })
    }

    /// A server-mode socket's `socket-permissions` (octal) and `socket-group` (a group of
    /// this host); a client-mode socket is the frontend's, so neither applies to it.
    fn vhost_socket_access(
        &mut self,
        f: &Fields<'_>,
        mode: Option<vhostuser::SocketMode>,
    ) -> Option<vhostuser::SocketAccess> {
        let section = f.section.clone();
        let mut access = vhostuser::SocketAccess::default();
        let mut ok = true;
        for key in ["socket-permissions", "socket-group"] {
            let (value, span) = match self.string(f, key) {
                Field::Ok(value, span) => (value, span),
                Field::Missing => continue,
                Field::Bad => {
                    ok = false;
                    continue;
                }
            };
            let parsed = if mode == Some(vhostuser::SocketMode::Client) {
                Err(format!(
                    "`{key}` applies only to socket-mode = \"server\" (in client mode the \
                     frontend creates the socket)"
                ))
            } else if key == "socket-permissions" {
                vhostuser::socket_file::parse_permissions(value).map(|m| access.permissions = m)
            } else {
                vhostuser::SocketGroup::lookup(value).map(|g| access.group = Some(g))
            };
            if let Err(why) = parsed {
                self.error(&span, &section, Some(key), why);
                ok = false;
            }
        }
        ok.then_some(access)
    }
}
