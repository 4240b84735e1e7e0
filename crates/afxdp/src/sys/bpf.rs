//! The bpf() syscall, for the few commands the AF_XDP port needs: create an XSKMAP and set its
//! entries, load an XDP program, attach it with a bpf link, and look up a program by id (name).
//! Attribute structs follow `union bpf_attr` of the kernel UAPI, one per command; the kernel
//! zero-extends a shorter attribute, so each struct stops after the last field we set.

use super::{last_error, owned_fd};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_int = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
const BPF_LINK_CREATE: libc::c_int = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` value of XDP.
const BPF_XDP: u32 = 37;

/// Length of kernel object names, including the NUL.
pub(crate) const OBJ_NAME_LEN: usize = 16;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Insn {
    /// Opcode.
    pub code: u8,
    /// Destination register in the low nibble, source register in the high nibble.
    pub regs: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; OBJ_NAME_LEN],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; OBJ_NAME_LEN],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_prog_info`, up to and including `name`.
#[repr(C)]
#[derive(Default)]
struct ProgInfoHead {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; OBJ_NAME_LEN],
}

/// Marker for the attribute structs above: plain `repr(C)` data with no padding the kernel
/// could misread (explicit `_pad` fields) and no pointers other than `u64` addresses.
trait BpfAttr {}
impl BpfAttr for MapCreateAttr {}
impl BpfAttr for MapElemAttr {}
impl BpfAttr for ProgLoadAttr {}
impl BpfAttr for LinkCreateAttr {}
impl BpfAttr for GetFdByIdAttr {}
impl BpfAttr for InfoAttr {}

fn sys_bpf<A: BpfAttr>(cmd: libc::c_int, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised `repr(C)` attribute struct of exactly the size
    // passed; any address inside it points at memory the caller keeps alive for the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut libc::c_void,
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok(ret)
}

fn name_bytes(name: &str) -> [u8; OBJ_NAME_LEN] {
    let mut out = [0u8; OBJ_NAME_LEN];
    for (dst, src) in out.iter_mut().zip(name.bytes().take(OBJ_NAME_LEN - 1)) {
        *dst = src;
    }
    out
}

/// Create an XSKMAP (u32 queue index -> AF_XDP socket) with `max_entries` entries.
pub(crate) fn create_xskmap(name: &str, max_entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_name: name_bytes(name),
        ..Default::default()
    };
    owned_fd(sys_bpf(BPF_MAP_CREATE, &mut attr)? as libc::c_int)
}

/// Set `map[key] = value` (for an XSKMAP: the socket descriptor `value` at queue `key`).
pub(crate) fn map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let (k, v) = (key, value);
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &k as *const u32 as u64,
        value: &v as *const u32 as u64,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Remove `map[key]`.
pub(crate) fn map_delete_u32(map: &OwnedFd, key: u32) -> io::Result<()> {
    let k = key;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &k as *const u32 as u64,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(|_| ())
}

/// Load an XDP program. On failure, the error and the verifier's log.
pub(crate) fn load_xdp_program(
    name: &str,
    insns: &[Insn],
    license: &str,
) -> Result<OwnedFd, (io::Error, String)> {
    let license = std::ffi::CString::new(license)
        .map_err(|_| (io::Error::from(io::ErrorKind::InvalidInput), String::new()))?;
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name_bytes(name),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => owned_fd(fd as libc::c_int).map_err(|e| (e, String::new())),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err((e, String::from_utf8_lossy(&log[..end]).trim().to_string()))
        }
    }
}

/// Attach an XDP program to interface `ifindex` with a bpf link; `flags` are XDP_FLAGS_*_MODE.
/// The program stays attached exactly as long as the returned descriptor is open.
pub(crate) fn link_create_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    owned_fd(sys_bpf(BPF_LINK_CREATE, &mut attr)? as libc::c_int)
}

/// A descriptor of the loaded program with id `id`.
pub(crate) fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = GetFdByIdAttr {
        id,
        ..Default::default()
    };
    owned_fd(sys_bpf(BPF_PROG_GET_FD_BY_ID, &mut attr)? as libc::c_int)
}

/// Id and name of a loaded program.
pub(crate) fn prog_id_and_name(prog: &OwnedFd) -> io::Result<(u32, String)> {
    let mut info = ProgInfoHead::default();
    let mut attr = InfoAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let end = info
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(OBJ_NAME_LEN);
    Ok((
        info.id,
        String::from_utf8_lossy(&info.name[..end]).into_owned(),
    ))
}
