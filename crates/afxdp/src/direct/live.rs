//! Live-frame transmission: a small XDP program that the kernel runs on frames it builds from one
//! template (`BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`, kernel 5.18+). The program
//! gives each frame a uniformly random flow's UDP source port and the matching UDP checksum
//! (computed from the template's, so it never reads what an earlier run left in the page) and
//! returns `bpf_redirect(ifindex)`; the kernel sends the frames in bulk through the interface's
//! `ndo_xdp_xmit` (for a veth: straight into the peer's ring, no socket buffer per frame).
//!
//! This module owns the program (hand-assembled, like the port's redirect program) and the
//! bpf() calls it needs beyond `sys::bpf`; it never attaches anything to an interface, so
//! nothing outlives the value. `unsafe` is limited to the one bpf() syscall wrapper below.
#![allow(unsafe_code)]

use crate::error::{hint, AfXdpError};
use crate::sys::bpf::{self, Insn};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Most frames the kernel builds and redirects per batch (TEST_XDP_MAX_BATCH).
pub const LIVE_BATCH_MAX: u32 = 256;

const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
const XDP_REDIRECT: u32 = 4;

// Opcodes (class | operation | source).
const LD_IMM64: u8 = 0x18;
const ALU64_MUL_X: u8 = 0x2f;
const ALU32_ADD_X: u8 = 0x0c;
const ALU64_MOV_X: u8 = 0xbf;
const ALU64_MOV_K: u8 = 0xb7;
const ALU64_ADD_K: u8 = 0x07;
const ALU64_ADD_X: u8 = 0x0f;
const ALU64_AND_K: u8 = 0x57;
const ALU64_RSH_K: u8 = 0x77;
const ALU64_XOR_K: u8 = 0xa7;
const ALU32_MOV_X: u8 = 0xbc;
const ALU32_MOD_K: u8 = 0x94;
const ALU32_TO_BE: u8 = 0xdc;
const LDX_MEM_W: u8 = 0x61;
const STX_MEM_H: u8 = 0x6b;
const JMP_JGT_X: u8 = 0x2d;
const JMP_JNE_K: u8 = 0x55;
const JMP_CALL: u8 = 0x85;
const JMP_EXIT: u8 = 0x95;
const FUNC_KTIME_GET_NS: i32 = 5;
const FUNC_GET_PRANDOM_U32: i32 = 7;
const FUNC_REDIRECT: i32 = 23;
/// Offsets of `data`, `data_end` and `ingress_ifindex` in `struct xdp_md`.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
const XDP_MD_INGRESS_IFINDEX: i16 = 12;
/// A test run without a context receives on the network namespace's loopback, whose index is
/// always 1.
const LOOPBACK_IFINDEX: i32 = 1;
const XDP_PASS: i32 = 2;
/// `XDP_FLAGS_SKB_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// What the frames are and where they go.
#[derive(Clone, Debug)]
pub struct LiveFramesSpec<'a> {
    /// Interface the frames leave by (in this network namespace).
    pub ifname: &'a str,
    /// Flow 0's frame (Ethernet header first, no FCS).
    pub frame: &'a [u8],
    /// Flows: flow `i` has UDP source port `first_src_port + i` (wrapping); 1..=65536.
    pub flows: u32,
    /// The template's UDP source port.
    pub first_src_port: u16,
    /// Offset of the UDP source port in the frame.
    pub src_port_at: usize,
    /// Offset of the UDP checksum in the frame (the template's must be valid and non-zero).
    pub udp_checksum_at: usize,
    /// Churn: 0 keeps the `flows` fixed flows. N > 0 starts N new flows per second: a frame's
    /// flow number is `floor(now_ns * N / 1e9) + random % flows` (so about `flows` flows are
    /// live at a time and each lives `flows / N` seconds), its low 16 bits added to the source
    /// port and the next 10 bits to the template's UDP destination port (2^26 distinct flows
    /// before a 5-tuple repeats). At most [`MAX_NEW_FLOWS_PER_SECOND`].
    pub new_flows_per_second: u64,
    /// Frames per kernel batch (1..=256); each batch is flushed to the device at once.
    pub batch: u32,
    /// Also attach the program to the interface in generic mode while the value lives (where
    /// it passes every real frame untouched): a program already attached somewhere stays in
    /// the kernel's XDP dispatcher, so a run does not re-patch it (about 25 ms per call on a
    /// 2-vCPU VM). Not attaching (or failing to) only makes each `send` slower.
    pub keep_dispatched: bool,
}

/// `fold(!checksum + !port)`: the ones'-complement sum of everything the template's UDP checksum
/// covers except its source port, so that flow port `p` gets checksum `!fold(seed + p)`.
pub fn checksum_seed(template_checksum: u16, template_port: u16) -> u16 {
    fold(!template_checksum as u32 + !template_port as u32)
}

/// The UDP checksum of the template with source port `port`, from `checksum_seed` (what the
/// program computes; 0 is sent as 0xffff).
pub fn patched_checksum(seed: u16, port: u16) -> u16 {
    match !fold(seed as u32 + port as u32) {
        0 => 0xffff,
        c => c,
    }
}

/// Most new flows per second of a churning run.
pub const MAX_NEW_FLOWS_PER_SECOND: u64 = 100_000_000;

/// Bits of the churn flow number added to the destination port (above its 16 source-port bits).
pub const CHURN_DST_PORT_BITS: u32 = 10;

/// `fold(!checksum + !sport + !dport)`: the template's UDP checksum without both ports, so that
/// ports `(s, d)` get checksum `!fold(seed + s + d)` ([`patched_checksum2`]).
pub fn checksum_seed2(template_checksum: u16, sport: u16, dport: u16) -> u16 {
    fold(!template_checksum as u32 + !sport as u32 + !dport as u32)
}

/// The UDP checksum of the template with ports `(sport, dport)`, from [`checksum_seed2`].
pub fn patched_checksum2(seed: u16, sport: u16, dport: u16) -> u16 {
    match !fold(seed as u32 + sport as u32 + dport as u32) {
        0 => 0xffff,
        c => c,
    }
}

/// The source and destination ports of churn flow `flow` (what the program writes).
pub fn churn_ports(flow: u32, first_src_port: u16, template_dport: u16) -> (u16, u16) {
    let sport = first_src_port.wrapping_add(flow as u16);
    let dport =
        template_dport.wrapping_add(((flow >> 16) & ((1 << CHURN_DST_PORT_BITS) - 1)) as u16);
    (sport, dport)
}

fn fold(mut v: u32) -> u16 {
    v = (v & 0xffff) + (v >> 16);
    v = (v & 0xffff) + (v >> 16);
    v as u16
}

/// The program: `flow = prandom() % flows; port = first + flow; write port and checksum;
/// return bpf_redirect(ifindex, 0)`.
fn program(ifindex: u32, spec: &LiveFramesSpec<'_>, seed: u16) -> Vec<Insn> {
    if spec.new_flows_per_second > 0 {
        return churn_program(ifindex, spec, seed);
    }
    let sport = spec.src_port_at as i16;
    let csum = spec.udp_checksum_at as i16;
    let end = (spec.udp_checksum_at + 2) as i32;
    let head = [
        insn(ALU64_MOV_X, 6, 1, 0, 0),                 // r6 = ctx
        insn(JMP_CALL, 0, 0, 0, FUNC_GET_PRANDOM_U32), // r0 = random
        insn(ALU32_MOV_X, 7, 0, 0, 0),                 // w7 = w0
        insn(ALU32_MOD_K, 7, 0, 0, spec.flows as i32), // w7 %= flows
        insn(LDX_MEM_W, 2, 6, XDP_MD_DATA, 0),         // r2 = data
        insn(LDX_MEM_W, 3, 6, XDP_MD_DATA_END, 0),     // r3 = data_end
        insn(ALU64_MOV_X, 4, 2, 0, 0),                 // r4 = data
        insn(ALU64_ADD_K, 4, 0, 0, end),               // r4 += end of the checksum
    ];
    let body = [
        insn(ALU64_MOV_X, 5, 7, 0, 0), // r5 = flow
        insn(ALU64_ADD_K, 5, 0, 0, spec.first_src_port as i32),
        insn(ALU64_AND_K, 5, 0, 0, 0xffff), // r5 = port (wrapped)
        insn(ALU64_MOV_X, 8, 5, 0, 0),      // r8 = port + seed
        insn(ALU64_ADD_K, 8, 0, 0, seed as i32),
        insn(ALU64_MOV_X, 9, 8, 0, 0), // fold once
        insn(ALU64_RSH_K, 9, 0, 0, 16),
        insn(ALU64_AND_K, 8, 0, 0, 0xffff),
        insn(ALU64_ADD_X, 8, 9, 0, 0),
        insn(ALU64_MOV_X, 9, 8, 0, 0), // fold twice
        insn(ALU64_RSH_K, 9, 0, 0, 16),
        insn(ALU64_AND_K, 8, 0, 0, 0xffff),
        insn(ALU64_ADD_X, 8, 9, 0, 0),
        insn(ALU64_XOR_K, 8, 0, 0, 0xffff), // r8 = checksum
        insn(JMP_JNE_K, 8, 0, 1, 0),        // a zero checksum is sent as 0xffff
        insn(ALU64_MOV_K, 8, 0, 0, 0xffff),
        insn(ALU32_TO_BE, 5, 0, 0, 16), // network byte order
        insn(ALU32_TO_BE, 8, 0, 0, 16),
        insn(STX_MEM_H, 2, 5, sport, 0), // *(u16 *)(data + sport) = r5
        insn(STX_MEM_H, 2, 8, csum, 0),  // *(u16 *)(data + csum) = r8
    ];
    let redirect = [
        insn(ALU64_MOV_K, 1, 0, 0, ifindex as i32), // r1 = ifindex
        insn(ALU64_MOV_K, 2, 0, 0, 0),              // r2 = 0 (flags)
        insn(JMP_CALL, 0, 0, 0, FUNC_REDIRECT),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ];
    // Frames that did not come from a test run (the program is also attached to the interface
    // to keep it in the kernel's XDP dispatcher) pass untouched.
    let to_pass = (head.len() + 1 + body.len() + redirect.len()) as i16;
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, XDP_MD_INGRESS_IFINDEX, 0),
        insn(JMP_JNE_K, 2, 0, to_pass, LOOPBACK_IFINDEX),
    ];
    p.extend(head);
    // Frames too short for the patch are sent as they are: jump over the body.
    p.push(insn(JMP_JGT_X, 4, 3, body.len() as i16, 0));
    p.extend(body);
    p.extend(redirect);
    p.extend([
        insn(ALU64_MOV_K, 0, 0, 0, XDP_PASS), // pass: return XDP_PASS
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]);
    p
}

/// `ktime * N / 1e9` as a 32.32 fixed-point factor: the high half of the (wrapping) 64-bit
/// product `ns * k` is the flow number modulo 2^32.
fn churn_factor(new_flows_per_second: u64) -> u64 {
    ((new_flows_per_second as u128 * (1u128 << 32) + 500_000_000) / 1_000_000_000) as u64
}

/// The churn program (see [`LiveFramesSpec::new_flows_per_second`]); `seed` is
/// [`checksum_seed2`] of the template.
fn churn_program(ifindex: u32, spec: &LiveFramesSpec<'_>, seed: u16) -> Vec<Insn> {
    let sport = spec.src_port_at as i16;
    let dport_at = sport + 2;
    let csum = spec.udp_checksum_at as i16;
    let end = (spec.udp_checksum_at + 2) as i32;
    let template_dport = u16::from_be_bytes([
        spec.frame[spec.src_port_at + 2],
        spec.frame[spec.src_port_at + 3],
    ]);
    let k = churn_factor(spec.new_flows_per_second);
    let head = [
        insn(ALU64_MOV_X, 6, 1, 0, 0),                 // r6 = ctx
        insn(JMP_CALL, 0, 0, 0, FUNC_GET_PRANDOM_U32), // r0 = random
        insn(ALU32_MOV_X, 7, 0, 0, 0),                 // w7 = w0
        insn(ALU32_MOD_K, 7, 0, 0, spec.flows as i32), // w7 %= flows
        insn(JMP_CALL, 0, 0, 0, FUNC_KTIME_GET_NS),    // r0 = now (ns)
        insn(LD_IMM64, 1, 0, 0, k as u32 as i32),      // r1 = k
        insn(0, 0, 0, 0, (k >> 32) as u32 as i32),
        insn(ALU64_MUL_X, 0, 1, 0, 0),             // r0 *= k (wrapping)
        insn(ALU64_RSH_K, 0, 0, 0, 32),            // r0 = flow base (mod 2^32)
        insn(ALU32_ADD_X, 7, 0, 0, 0),             // w7 += w0: the flow number
        insn(LDX_MEM_W, 2, 6, XDP_MD_DATA, 0),     // r2 = data
        insn(LDX_MEM_W, 3, 6, XDP_MD_DATA_END, 0), // r3 = data_end
        insn(ALU64_MOV_X, 4, 2, 0, 0),             // r4 = data
        insn(ALU64_ADD_K, 4, 0, 0, end),           // r4 += end of the checksum
    ];
    let body = [
        insn(ALU64_MOV_X, 5, 7, 0, 0), // r5 = flow
        insn(ALU64_AND_K, 5, 0, 0, 0xffff),
        insn(ALU64_ADD_K, 5, 0, 0, spec.first_src_port as i32),
        insn(ALU64_AND_K, 5, 0, 0, 0xffff), // r5 = source port (wrapped)
        insn(ALU64_MOV_X, 0, 7, 0, 0),      // r0 = flow
        insn(ALU64_RSH_K, 0, 0, 0, 16),
        insn(ALU64_AND_K, 0, 0, 0, (1 << CHURN_DST_PORT_BITS) - 1),
        insn(ALU64_ADD_K, 0, 0, 0, template_dport as i32),
        insn(ALU64_AND_K, 0, 0, 0, 0xffff), // r0 = destination port (wrapped)
        insn(ALU64_MOV_X, 8, 5, 0, 0),      // r8 = sport + dport + seed
        insn(ALU64_ADD_X, 8, 0, 0, 0),
        insn(ALU64_ADD_K, 8, 0, 0, seed as i32),
        insn(ALU64_MOV_X, 9, 8, 0, 0), // fold once
        insn(ALU64_RSH_K, 9, 0, 0, 16),
        insn(ALU64_AND_K, 8, 0, 0, 0xffff),
        insn(ALU64_ADD_X, 8, 9, 0, 0),
        insn(ALU64_MOV_X, 9, 8, 0, 0), // fold twice
        insn(ALU64_RSH_K, 9, 0, 0, 16),
        insn(ALU64_AND_K, 8, 0, 0, 0xffff),
        insn(ALU64_ADD_X, 8, 9, 0, 0),
        insn(ALU64_XOR_K, 8, 0, 0, 0xffff), // r8 = checksum
        insn(JMP_JNE_K, 8, 0, 1, 0),        // a zero checksum is sent as 0xffff
        insn(ALU64_MOV_K, 8, 0, 0, 0xffff),
        insn(ALU32_TO_BE, 5, 0, 0, 16), // network byte order
        insn(ALU32_TO_BE, 0, 0, 0, 16),
        insn(ALU32_TO_BE, 8, 0, 0, 16),
        insn(STX_MEM_H, 2, 5, sport, 0),    // source port
        insn(STX_MEM_H, 2, 0, dport_at, 0), // destination port
        insn(STX_MEM_H, 2, 8, csum, 0),     // checksum
    ];
    let redirect = [
        insn(ALU64_MOV_K, 1, 0, 0, ifindex as i32),
        insn(ALU64_MOV_K, 2, 0, 0, 0),
        insn(JMP_CALL, 0, 0, 0, FUNC_REDIRECT),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ];
    let to_pass = (head.len() + 1 + body.len() + redirect.len()) as i16;
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, XDP_MD_INGRESS_IFINDEX, 0),
        insn(JMP_JNE_K, 2, 0, to_pass, LOOPBACK_IFINDEX),
    ];
    p.extend(head);
    p.push(insn(JMP_JGT_X, 4, 3, body.len() as i16, 0));
    p.extend(body);
    p.extend(redirect);
    p.extend([
        insn(ALU64_MOV_K, 0, 0, 0, XDP_PASS),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]);
    p
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

fn test_run(attr: &mut TestRunAttr) -> io::Result<()> {
    // SAFETY: `attr` is a live, fully initialised `repr(C)` BPF_PROG_TEST_RUN attribute (explicit
    // padding, no implicit holes) of exactly the size passed; its addresses point at buffers the
    // caller keeps alive, of the sizes it states, for the duration of the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            attr as *mut TestRunAttr as *mut libc::c_void,
            std::mem::size_of::<TestRunAttr>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A loaded live-frame program for one interface and template.
#[derive(Debug)]
pub struct LiveFrames {
    /// The generic-mode attachment that keeps the program dispatched, if any.
    keep_link: Option<OwnedFd>,
    prog: OwnedFd,
    ifname: String,
    frame: Box<[u8]>,
    batch: u32,
}

impl LiveFrames {
    /// Check `spec`, then assemble and load the program. Fails with the verifier's log when the
    /// kernel refuses it.
    pub fn new(spec: &LiveFramesSpec<'_>) -> Result<LiveFrames, AfXdpError> {
        let invalid = |reason: String| AfXdpError::Invalid {
            ifname: spec.ifname.to_string(),
            queue: 0,
            reason,
        };
        if spec.flows == 0 || spec.flows > 65536 {
            return Err(invalid(format!(
                "{} flows; accepted: 1..=65536",
                spec.flows
            )));
        }
        if spec.batch == 0 || spec.batch > LIVE_BATCH_MAX {
            return Err(invalid(format!(
                "batch {}; accepted: 1..={LIVE_BATCH_MAX}",
                spec.batch
            )));
        }
        let (sp, uc) = (spec.src_port_at, spec.udp_checksum_at);
        if sp + 2 > spec.frame.len() || uc + 2 > spec.frame.len() || spec.frame.len() < 60 {
            return Err(invalid(format!(
                "a {}-byte frame with its UDP source port at {sp} and checksum at {uc}",
                spec.frame.len()
            )));
        }
        let template_port = u16::from_be_bytes([spec.frame[sp], spec.frame[sp + 1]]);
        let template_checksum = u16::from_be_bytes([spec.frame[uc], spec.frame[uc + 1]]);
        if template_port != spec.first_src_port || template_checksum == 0 {
            return Err(invalid(format!(
                "the template's UDP source port is {template_port} (expected {}) and its checksum \
                 {template_checksum:#06x} (must be set)",
                spec.first_src_port
            )));
        }
        let ifindex = crate::sys::if_index(spec.ifname).map_err(|e| AfXdpError::Socket {
            ifname: spec.ifname.to_string(),
            queue: 0,
            what: "if_nametoindex",
            source: e,
            hint: hint("no such interface in this network namespace"),
        })?;
        if spec.new_flows_per_second > MAX_NEW_FLOWS_PER_SECOND {
            return Err(invalid(format!(
                "{} new flows per second; accepted: 0 (fixed flows) or 1..={MAX_NEW_FLOWS_PER_SECOND}",
                spec.new_flows_per_second
            )));
        }
        if spec.new_flows_per_second > 0 && (sp + 4 > spec.frame.len() || uc < sp + 4) {
            return Err(invalid(format!(
                "churn rewrites both UDP ports: the destination port at {} must lie inside the \
                 {}-byte frame and before the checksum at {uc}",
                sp + 2,
                spec.frame.len()
            )));
        }
        let seed = if spec.new_flows_per_second > 0 {
            let dport = u16::from_be_bytes([spec.frame[sp + 2], spec.frame[sp + 3]]);
            checksum_seed2(template_checksum, template_port, dport)
        } else {
            checksum_seed(template_checksum, template_port)
        };
        let insns = program(ifindex, spec, seed);
        let prog = bpf::load_xdp_program("vecplane_gen", &insns, "GPL").map_err(|(e, log)| {
            AfXdpError::Xdp {
                ifname: spec.ifname.to_string(),
                what: "BPF_PROG_LOAD (live-frame generator)",
                source: e,
                hint: hint(&log),
            }
        })?;
        let keep_link = if spec.keep_dispatched {
            bpf::link_create_xdp(&prog, ifindex, XDP_FLAGS_SKB_MODE).ok()
        } else {
            None
        };
        Ok(LiveFrames {
            keep_link,
            prog,
            ifname: spec.ifname.to_string(),
            frame: spec.frame.into(),
            batch: spec.batch,
        })
    }

    /// Have the kernel build `count` frames from the template, run the program on each and send
    /// them, in batches, on the calling CPU. `Ok(true)` when all ran; `Ok(false)` when a signal
    /// interrupted the run (an unknown part of them ran).
    pub fn send(&self, count: u32) -> Result<bool, AfXdpError> {
        if count == 0 {
            return Ok(true);
        }
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat: count,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: self.batch,
            ..Default::default()
        };
        match test_run(&mut attr) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(false),
            Err(e) => {
                let h = match e.raw_os_error() {
                    Some(libc::EINVAL) => "live frames need kernel 5.18 or newer",
                    Some(libc::EPERM) => "needs root or CAP_BPF + CAP_NET_ADMIN",
                    _ => "",
                };
                Err(AfXdpError::Xdp {
                    ifname: self.ifname.clone(),
                    what: "BPF_PROG_TEST_RUN (live frames)",
                    source: e,
                    hint: hint(h),
                })
            }
        }
    }

    /// Run the program once on a copy of the template without sending anything (not live):
    /// the XDP action it returned and the frame as it left it.
    pub fn dry_run(&self) -> Result<(u32, Vec<u8>), AfXdpError> {
        let mut out = vec![0u8; self.frame.len() + 256];
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            data_size_out: out.len() as u32,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        test_run(&mut attr).map_err(|e| AfXdpError::Xdp {
            ifname: self.ifname.clone(),
            what: "BPF_PROG_TEST_RUN",
            source: e,
            hint: String::new(),
        })?;
        out.truncate((attr.data_size_out as usize).min(out.len()));
        Ok((attr.retval, out))
    }

    /// True while the program is attached to the interface to stay dispatched.
    pub fn kept_dispatched(&self) -> bool {
        self.keep_link.is_some()
    }

    /// The XDP action the program returns for every frame (XDP_REDIRECT).
    pub fn expected_action() -> u32 {
        XDP_REDIRECT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent UDP-over-IPv4 checksum of a frame (Ethernet + 20-byte IPv4 + UDP).
    fn udp4_checksum_ok(f: &[u8]) -> bool {
        let mut acc: u32 = 0;
        let mut add = |b: &[u8]| {
            for pair in b.chunks(2) {
                acc += (pair[0] as u32) << 8 | pair.get(1).copied().unwrap_or(0) as u32;
                acc = (acc & 0xffff) + (acc >> 16);
            }
        };
        let udp = &f[34..];
        add(&f[26..34]);
        add(&[0, 17]);
        add(&(udp.len() as u16).to_be_bytes());
        add(udp);
        acc == 0xffff
    }

    #[test]
    fn patched_checksums_match_a_full_sum_for_every_port() {
        // A crafted IPv4/UDP frame: addresses 198.18.1.2 -> 198.18.2.2, ports 1024 -> 1024.
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 1, 2]);
        f[30..34].copy_from_slice(&[198, 18, 2, 2]);
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f[36..38].copy_from_slice(&1024u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        for (i, b) in f[42..].iter_mut().enumerate() {
            *b = i as u8 * 7;
        }
        // Find the template checksum by search (independent of the code under test).
        let c0 = (0..=0xffffu16)
            .find(|&c| {
                let mut g = f.clone();
                g[40..42].copy_from_slice(&c.to_be_bytes());
                c != 0 && udp4_checksum_ok(&g)
            })
            .expect("a valid checksum");
        let seed = checksum_seed(c0, 1024);
        for port in 0..=0xffffu16 {
            let mut g = f.clone();
            g[34..36].copy_from_slice(&port.to_be_bytes());
            let c = patched_checksum(seed, port);
            assert_ne!(c, 0);
            g[40..42].copy_from_slice(&c.to_be_bytes());
            assert!(udp4_checksum_ok(&g), "port {port}: checksum {c:#06x}");
        }
    }

    #[test]
    fn churn_checksums_match_a_full_sum() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 1, 2]);
        f[30..34].copy_from_slice(&[198, 18, 1, 3]);
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f[36..38].copy_from_slice(&1024u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        let c0 = (1..=0xffffu16)
            .find(|&c| {
                let mut g = f.clone();
                g[40..42].copy_from_slice(&c.to_be_bytes());
                udp4_checksum_ok(&g)
            })
            .expect("a valid checksum");
        let seed = checksum_seed2(c0, 1024, 1024);
        for flow in (0..u32::MAX)
            .step_by(9_999_991)
            .chain([0xffff, 0x1_0000, 0x3ff_ffff])
        {
            let (s, d) = churn_ports(flow, 1024, 1024);
            let mut g = f.clone();
            g[34..36].copy_from_slice(&s.to_be_bytes());
            g[36..38].copy_from_slice(&d.to_be_bytes());
            g[40..42].copy_from_slice(&patched_checksum2(seed, s, d).to_be_bytes());
            assert!(udp4_checksum_ok(&g), "flow {flow}: ports {s} {d}");
            assert!((1024..2048).contains(&d));
        }
        assert_eq!(churn_ports(0x1_0001, 1024, 1024), (1025, 1025));
        // 1M new flows per second: 2^32 / 1000 per nanosecond.
        assert_eq!(churn_factor(1_000_000), 4_294_967);
        assert_eq!(churn_factor(0), 0);
    }

    #[test]
    fn churn_program_shape() {
        let mut frame = [0u8; 60];
        frame[36..38].copy_from_slice(&1024u16.to_be_bytes());
        let spec = LiveFramesSpec {
            ifname: "lo",
            frame: &frame,
            flows: 64,
            first_src_port: 1024,
            src_port_at: 34,
            udp_checksum_at: 40,
            batch: 64,
            keep_dispatched: false,
            new_flows_per_second: 125_000,
        };
        let p = program(3, &spec, 0x1234);
        let pass = 2 + p[1].off as usize;
        assert_eq!((p[pass].code, p[pass].imm), (ALU64_MOV_K, XDP_PASS));
        assert_eq!(pass + 2, p.len());
        let jgt = p.iter().position(|i| i.code == JMP_JGT_X).expect("bounds");
        let target = jgt + 1 + p[jgt].off as usize;
        assert_eq!((p[target].code, p[target].imm), (ALU64_MOV_K, 3));
        assert!(p
            .iter()
            .any(|i| i.code == JMP_CALL && i.imm == FUNC_KTIME_GET_NS));
    }

    #[test]
    fn program_shape() {
        let frame = [0u8; 60];
        let spec = LiveFramesSpec {
            ifname: "lo",
            frame: &frame,
            flows: 7,
            first_src_port: 1024,
            src_port_at: 34,
            udp_checksum_at: 40,
            batch: 64,
            keep_dispatched: false,
            new_flows_per_second: 0,
        };
        let p = program(3, &spec, 0x1234);
        // Frames from elsewhere than a test run jump to `return XDP_PASS`.
        let pass = 2 + p[1].off as usize;
        assert_eq!((p[pass].code, p[pass].imm), (ALU64_MOV_K, XDP_PASS));
        assert_eq!(p[pass + 1].code, JMP_EXIT);
        assert_eq!(pass + 2, p.len());
        // The bounds-check jump lands exactly on the redirect.
        let jgt = p
            .iter()
            .position(|i| i.code == JMP_JGT_X)
            .expect("bounds check");
        let target = jgt + 1 + p[jgt].off as usize;
        assert_eq!(p[target].code, ALU64_MOV_K);
        assert_eq!(p[target].imm, 3);
        assert_eq!(p[target + 2].imm, FUNC_REDIRECT);
        assert_eq!(p[target + 3].code, JMP_EXIT);
    }
}
