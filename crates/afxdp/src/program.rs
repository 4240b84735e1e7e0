//! The XDP program that steers an interface's packets to its AF_XDP sockets, loaded and attached
//! by vecplane itself with no C toolchain and no libbpf: six hand-assembled eBPF instructions
//! (`bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`), an XSKMAP made with the bpf()
//! syscall, and a bpf link (BPF_LINK_CREATE, attach type BPF_XDP), native mode first, generic
//! mode when the driver has none. A link detaches when its last descriptor closes, so a vecplane
//! that exits or is killed (even SIGKILL) leaves no program behind. Before attaching, a program
//! left attached the legacy way (netlink) is removed if, and only if, it is ours (by name).
//!
//! One attachment serves every queue of an interface in this process (a registry keyed by
//! network namespace and interface index); each queue's socket sits in the XSKMAP at its index.
//! This module owns the attachment policy; it never touches packets.

use crate::error::{hint, AfXdpError};
use crate::sys::{self, bpf, netlink};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, Weak};

/// Name of vecplane's XDP program (kernel object names hold 15 characters).
pub const PROGRAM_NAME: &str = "vecplane_xsk";
/// Name of its XSKMAP.
pub const XSKMAP_NAME: &str = "vecplane_xsks";
/// Entries of the XSKMAP: queue indices `0..XSKMAP_ENTRIES` can have a socket.
pub const XSKMAP_ENTRIES: u32 = 1024;

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The XDP mode a program runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`); veth has it.
    Native,
    /// In the generic network stack, after the skb is built (`XDP_FLAGS_SKB_MODE`); any device.
    Generic,
}

impl XdpMode {
    /// `"native"` or `"generic"`.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }

    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which XDP mode to ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModeChoice {
    /// Native when the driver supports it, generic otherwise.
    #[default]
    Auto,
    /// Native only (fail if the driver has no XDP).
    Native,
    /// Generic only.
    Generic,
}

/// A vecplane program found attached the legacy way and removed before attaching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleProgram {
    /// Its program id.
    pub id: u32,
    /// The mode it was attached in.
    pub mode: XdpMode,
}

/// An XDP program attached to an interface, as `xdp_programs` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProgram {
    /// Program id.
    pub id: u32,
    /// Program name (empty when it could not be read).
    pub name: String,
    /// Mode.
    pub mode: XdpMode,
}

const BPF_LDX_MEM_W: u8 = 0x61;
const BPF_LD_IMM64: u8 = 0x18;
const BPF_MOV64_IMM: u8 = 0xb7;
const BPF_CALL: u8 = 0x85;
const BPF_EXIT: u8 = 0x95;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

fn regs(dst: u8, src: u8) -> u8 {
    dst | (src << 4)
}

/// The program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);` (the flags'
/// low bits are the action when the queue has no socket: the packet goes to the kernel stack).
pub(crate) fn redirect_instructions(map_fd: i32) -> [bpf::Insn; 6] {
    use bpf::Insn;
    [
        // r2 = *(u32 *)(r1 + offsetof(struct xdp_md, rx_queue_index))
        Insn {
            code: BPF_LDX_MEM_W,
            regs: regs(2, 1),
            off: XDP_MD_RX_QUEUE_INDEX,
            imm: 0,
        },
        // r1 = &xsks (a 16-byte load of the map's descriptor, resolved by the verifier)
        Insn {
            code: BPF_LD_IMM64,
            regs: regs(1, BPF_PSEUDO_MAP_FD),
            off: 0,
            imm: map_fd,
        },
        Insn::default(),
        // r3 = XDP_PASS
        Insn {
            code: BPF_MOV64_IMM,
            regs: regs(3, 0),
            off: 0,
            imm: XDP_PASS,
        },
        // r0 = bpf_redirect_map(r1, r2, r3)
        Insn {
            code: BPF_CALL,
            regs: 0,
            off: 0,
            imm: BPF_FUNC_REDIRECT_MAP,
        },
        Insn {
            code: BPF_EXIT,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

/// A loaded redirect program and its XSKMAP (not attached by itself).
pub struct XskProgram {
    prog: OwnedFd,
    map: OwnedFd,
    id: u32,
}

impl XskProgram {
    /// Load vecplane's program (`PROGRAM_NAME`) with a fresh XSKMAP; `ifname` only names the
    /// interface in errors.
    pub fn load(ifname: &str) -> Result<XskProgram, AfXdpError> {
        XskProgram::load_named(ifname, PROGRAM_NAME)
    }

    /// Load the same program under another name (tests use it to stand for a foreign program).
    pub fn load_named(ifname: &str, name: &str) -> Result<XskProgram, AfXdpError> {
        let err = |what, source, h: &str| AfXdpError::Xdp {
            ifname: ifname.to_string(),
            what,
            source,
            hint: hint(h),
        };
        let map = bpf::create_xskmap(XSKMAP_NAME, XSKMAP_ENTRIES).map_err(|e| {
            err(
                "BPF_MAP_CREATE (XSKMAP)",
                e,
                "needs CAP_BPF/CAP_NET_ADMIN and a kernel with AF_XDP (CONFIG_XDP_SOCKETS)",
            )
        })?;
        let insns = redirect_instructions(map.as_raw_fd());
        let prog = bpf::load_xdp_program(name, &insns, "GPL").map_err(|(e, log)| {
            err(
                "BPF_PROG_LOAD",
                e,
                &if log.is_empty() {
                    "no verifier log".to_string()
                } else {
                    format!("verifier: {log}")
                },
            )
        })?;
        let (id, _) = bpf::prog_id_and_name(&prog)
            .map_err(|e| err("BPF_OBJ_GET_INFO_BY_FD", e, "reading the new program's id"))?;
        Ok(XskProgram { prog, map, id })
    }

    /// The kernel's id of the program.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Attach the program the legacy way (netlink, `IFLA_XDP`): it stays attached after this
    /// value and the process are gone, until someone detaches it. vecplane itself never does
    /// this (it uses bpf links); it exists for kernels without XDP links and for tests of the
    /// stale-program cleanup.
    pub fn attach_netlink(&self, ifname: &str, mode: XdpMode) -> Result<(), AfXdpError> {
        let ifindex = ifindex_for_xdp(ifname)?;
        netlink::xdp_set_fd(ifindex, self.prog.as_raw_fd(), mode.flags(), None).map_err(|e| {
            AfXdpError::Xdp {
                ifname: ifname.to_string(),
                what: "RTM_SETLINK (attach XDP program)",
                source: e,
                hint: String::new(),
            }
        })
    }
}

fn ifindex_for_xdp(ifname: &str) -> Result<u32, AfXdpError> {
    sys::if_index(ifname).map_err(|e| AfXdpError::Xdp {
        ifname: ifname.to_string(),
        what: "if_nametoindex",
        source: e,
        hint: hint("no such interface in this network namespace"),
    })
}

/// The XDP programs attached to `ifname` (native and generic), with their names.
pub fn xdp_programs(ifname: &str) -> Result<Vec<AttachedProgram>, AfXdpError> {
    let ifindex = ifindex_for_xdp(ifname)?;
    let state = netlink::xdp_state(ifindex).map_err(|e| AfXdpError::Xdp {
        ifname: ifname.to_string(),
        what: "RTM_GETLINK (IFLA_XDP)",
        source: e,
        hint: String::new(),
    })?;
    let mut out = Vec::new();
    for (mode, id) in [
        (XdpMode::Native, state.drv_prog_id),
        (XdpMode::Generic, state.skb_prog_id),
    ] {
        if id == 0 {
            continue;
        }
        let name = bpf::prog_fd_by_id(id)
            .and_then(|fd| bpf::prog_id_and_name(&fd))
            .map(|(_, n)| n)
            .unwrap_or_default();
        out.push(AttachedProgram { id, name, mode });
    }
    Ok(out)
}

/// Detach whatever XDP program is attached to `ifname` in `mode` the legacy way (netlink). It
/// fails with EBUSY for a program held by a bpf link. For tools and tests; vecplane's own
/// cleanup (`remove_stale_program`) only ever removes its own program.
pub fn detach_netlink(ifname: &str, mode: XdpMode) -> Result<(), AfXdpError> {
    let ifindex = ifindex_for_xdp(ifname)?;
    netlink::xdp_set_fd(ifindex, -1, mode.flags(), None).map_err(|e| AfXdpError::Xdp {
        ifname: ifname.to_string(),
        what: "RTM_SETLINK (detach XDP program)",
        source: e,
        hint: String::new(),
    })
}

/// Remove a vecplane program that an earlier run left attached the legacy way (netlink) to
/// `ifname`. A program with another name is not touched: that is an error naming it, because a
/// bpf link cannot be attached over it. A vecplane program held by a live bpf link (another
/// running vecplane) is not touched either (the kernel refuses with EBUSY): also an error.
/// Returns what was removed.
pub fn remove_stale_program(ifname: &str) -> Result<Option<StaleProgram>, AfXdpError> {
    let ifindex = ifindex_for_xdp(ifname)?;
    let xdp_err = |what, source: io::Error, h: &str| AfXdpError::Xdp {
        ifname: ifname.to_string(),
        what,
        source,
        hint: hint(h),
    };
    let state = netlink::xdp_state(ifindex)
        .map_err(|e| xdp_err("RTM_GETLINK (IFLA_XDP)", e, "reading the attached programs"))?;
    let mut removed = None;
    for (mode, id) in [
        (XdpMode::Native, state.drv_prog_id),
        (XdpMode::Generic, state.skb_prog_id),
    ] {
        if id == 0 {
            continue;
        }
        let prog = bpf::prog_fd_by_id(id).map_err(|e| {
            xdp_err(
                "BPF_PROG_GET_FD_BY_ID",
                e,
                &format!("inspecting program {id} attached in {mode} mode"),
            )
        })?;
        let (_, name) = bpf::prog_id_and_name(&prog)
            .map_err(|e| xdp_err("BPF_OBJ_GET_INFO_BY_FD", e, "reading the program's name"))?;
        if name != PROGRAM_NAME {
            return Err(AfXdpError::Occupied {
                ifname: ifname.to_string(),
                detail: format!(
                    "a foreign XDP program `{name}` (id {id}) is attached in {mode} mode; vecplane \
                     removes only its own (`{PROGRAM_NAME}`): detach it with `ip link set dev \
                     {ifname} xdp off` if it is not needed"
                ),
            });
        }
        match netlink::xdp_set_fd(ifindex, -1, mode.flags(), Some(prog.as_raw_fd())) {
            Ok(()) => removed = Some(StaleProgram { id, mode }),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(AfXdpError::Occupied {
                    ifname: ifname.to_string(),
                    detail: format!(
                        "`{PROGRAM_NAME}` (id {id}) is attached in {mode} mode through a bpf link \
                         that a running process holds (another vecplane on this interface?); it \
                         goes away when that process exits"
                    ),
                });
            }
            Err(e) => {
                return Err(xdp_err(
                    "RTM_SETLINK (detach stale program)",
                    e,
                    &format!("removing stale `{PROGRAM_NAME}` id {id}"),
                ))
            }
        }
    }
    Ok(removed)
}

/// vecplane's program attached to one interface through a bpf link, shared by every socket of
/// that interface in this process. Dropping the last reference closes the link: the kernel
/// detaches the program.
pub(crate) struct XdpAttachment {
    // Field order is drop order: the link (detach) goes first, then the program and the map.
    _link: OwnedFd,
    program: XskProgram,
    ifname: String,
    mode: XdpMode,
    stale_removed: Option<StaleProgram>,
}

impl XdpAttachment {
    /// Put socket `xsk` at `queue` in the XSKMAP.
    pub(crate) fn insert_socket(&self, queue: u32, xsk: &OwnedFd) -> io::Result<()> {
        bpf::map_update_u32(&self.program.map, queue, xsk.as_raw_fd() as u32)
    }

    /// Remove the socket at `queue` from the XSKMAP (the kernel also does it when the socket
    /// closes).
    pub(crate) fn remove_socket(&self, queue: u32) {
        let _ = bpf::map_delete_u32(&self.program.map, queue);
    }

    /// The mode the program runs in.
    pub(crate) fn mode(&self) -> XdpMode {
        self.mode
    }

    /// A stale program removed before attaching, if any.
    pub(crate) fn stale_removed(&self) -> Option<StaleProgram> {
        self.stale_removed
    }

    /// The attached program's id.
    pub(crate) fn program_id(&self) -> u32 {
        self.program.id
    }
}

impl std::fmt::Debug for XdpAttachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpAttachment")
            .field("ifname", &self.ifname)
            .field("mode", &self.mode)
            .field("program_id", &self.program.id)
            .finish()
    }
}

type Registry = Vec<((u64, u32), Weak<XdpAttachment>)>;

static REGISTRY: Mutex<Registry> = Mutex::new(Vec::new());

/// The attachment of `ifname` in this process: the existing one, or a new one (stale program
/// removed, program loaded, link created in the chosen mode).
pub(crate) fn attach(ifname: &str, choice: ModeChoice) -> Result<Arc<XdpAttachment>, AfXdpError> {
    let ifindex = ifindex_for_xdp(ifname)?;
    let key = (sys::netns_id(), ifindex);
    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    reg.retain(|(_, w)| w.strong_count() > 0);
    if let Some(existing) = reg
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        let ok = match choice {
            ModeChoice::Auto => true,
            ModeChoice::Native => existing.mode == XdpMode::Native,
            ModeChoice::Generic => existing.mode == XdpMode::Generic,
        };
        if !ok {
            return Err(AfXdpError::Occupied {
                ifname: ifname.to_string(),
                detail: format!(
                    "another queue of this interface already runs vecplane's program in {} mode; \
                     all queues of an interface share one mode",
                    existing.mode
                ),
            });
        }
        return Ok(existing);
    }
    let stale_removed = remove_stale_program(ifname)?;
    let program = XskProgram::load(ifname)?;
    let modes: &[XdpMode] = match choice {
        ModeChoice::Auto => &[XdpMode::Native, XdpMode::Generic],
        ModeChoice::Native => &[XdpMode::Native],
        ModeChoice::Generic => &[XdpMode::Generic],
    };
    let mut failures = Vec::new();
    for &mode in modes {
        match bpf::link_create_xdp(&program.prog, ifindex, mode.flags()) {
            Ok(link) => {
                let att = Arc::new(XdpAttachment {
                    _link: link,
                    program,
                    ifname: ifname.to_string(),
                    mode,
                    stale_removed,
                });
                reg.push((key, Arc::downgrade(&att)));
                return Ok(att);
            }
            Err(e) => failures.push((mode, e)),
        }
    }
    let detail = failures
        .iter()
        .map(|(m, e)| format!("{m}: {e}"))
        .collect::<Vec<_>>()
        .join("; ");
    let source = failures
        .pop()
        .map(|(_, e)| e)
        .unwrap_or_else(|| io::Error::from(io::ErrorKind::Unsupported));
    Err(AfXdpError::Xdp {
        ifname: ifname.to_string(),
        what: "BPF_LINK_CREATE (BPF_XDP)",
        source,
        hint: hint(&format!(
            "tried {detail}; EBUSY/EEXIST means another XDP program is attached; EINVAL on an old \
             kernel means no XDP bpf links (needs 5.9+)"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = redirect_instructions(7);
        assert_eq!(p.len(), 6);
        // ldxw r2, [r1 + 16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // lddw r1, map fd 7 (src = BPF_PSEUDO_MAP_FD), second half zero
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!(p[2], bpf::Insn::default());
        // mov r3, XDP_PASS; call bpf_redirect_map; exit
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<bpf::Insn>(), 8);
    }

    #[test]
    fn names_fit_kernel_objects() {
        assert!(PROGRAM_NAME.len() < bpf::OBJ_NAME_LEN);
        assert!(XSKMAP_NAME.len() < bpf::OBJ_NAME_LEN);
        assert_eq!(XdpMode::Native.as_str(), "native");
        assert_eq!(XdpMode::Generic.to_string(), "generic");
    }
}
