//! The AF_PACKET port: one packet socket per port and worker, bound to a kernel interface by
//! ifindex, with a TPACKET_V3 receive ring mapped into user space. `AfPacketRx` copies frames out
//! of blocks the kernel has retired into pool buffers and hands the blocks back; `AfPacketTx`
//! hands each batch to the kernel with one system call, PACKET_QDISC_BYPASS on: `sendmmsg()`
//! straight from the pool buffers (`TxMode::Sendmmsg`, the default), or a copy into a mapped
//! transmit ring and one `send()` kick (`TxMode::Ring`). The two nodes share the socket
//! (`Arc<AfPacketSocket>`): the receive ring belongs to the rx node, the transmit ring (if any)
//! to the tx node. PACKET_FANOUT (hash) lets several workers open sockets on one interface.
//!
//! It owns the socket, the rings and their cursors. It never blocks, never makes more than one
//! system call per batch (none at all when a receive block is ready), never allocates or locks on
//! the fast path, and never trusts ring contents: every offset and length the kernel wrote is
//! bounds-checked before use.
//!
//! Why these choices (measured on a 2-vCPU veth topology, 64-byte frames, see
//! `tests/af_packet.rs`): sendmmsg costs about 3,900 TSC cycles per packet of worker time against
//! about 4,600 for the transmit ring, because the ring's zero-copy page fragments are copied again
//! (`skb_copy_ubufs`, a page allocation per packet) when veth forwards them. A socket has one
//! TPACKET version, so the ring mode uses the V3 frame-based transmit ring (the V2 layout with a
//! V3 header), not a V2 ring.
//!
//! Behaviour worth knowing:
//! - Copies. AF_PACKET rings are kernel memory, not our pool: one copy in, one copy out.
//! - Latency. A TPACKET_V3 block reaches user space when it is full or when its retire timer
//!   (`rx_block_timeout_ms`, default 1 ms) fires, so a lone packet waits up to that long.
//! - VLAN tags. The kernel strips the outer 802.1Q/802.1ad tag into metadata before packet
//!   sockets see a frame; rx puts it back into the frame so nodes see what was on the wire.
//! - Checksums. A frame sent by a local stack over veth with tx checksum offload carries an
//!   incomplete L4 checksum (TP_STATUS_CSUMNOTREADY). rx finishes the TCP/UDP checksum of such
//!   frames in software (counted in `AfPacketSocket::csum_not_ready`). Segmentation offload
//!   (frames larger than the MTU) is not undone: turn `tso`/`gso` off on such senders.
//! - Drops. `rx_drops` counts frames seen but not handed on (larger than a buffer, truncated by
//!   the ring, or malformed ring data) and the frames the kernel dropped because the ring was
//!   full: `AfPacketRx` folds `AfPacketSocket::kernel_stats` (a `getsockopt`) in every 10 ms of
//!   polling, as the AF_XDP port folds its socket's, so `show interfaces` and the metrics count
//!   what the worker could not keep up with. `tx_drops` counts packets that
//!   found the transmit ring full, that sendmmsg did not take (no retry: one call per batch), or
//!   that do not fit a ring frame or the interface MTU.
//! - Where the time goes. Transmitting on veth runs the peer's receive path (and, for a local
//!   peer, its IP/UDP input) inside our system call, on the worker's core; that, not the copies,
//!   dominates the cost per packet.
//! - Outgoing traffic. PACKET_IGNORE_OUTGOING keeps our own (and the local stack's) transmissions
//!   out of the receive ring; with the qdisc bypassed, tcpdump on the interface does not see what
//!   vecplane sends either.
//! - GRO/LRO. Aggregated frames larger than a buffer are dropped (counted); keep GRO/LRO off on
//!   interfaces vecplane forwards between.

use crate::error::PortError;
use graph::{Counter, PortStats};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

mod rx;
mod tx;
pub use rx::AfPacketRx;
pub use tx::AfPacketTx;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "af-packet";

/// Largest interface name the kernel accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME: usize = 15;

/// Offset of the packet data in a transmit frame: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)).
const TX_DATA_OFFSET: usize = libc::TPACKET3_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();
const _: () = assert!(TX_DATA_OFFSET == 48);

/// Offsets inside a block descriptor (`struct tpacket_block_desc`, whose `hdr.bh1` starts at 8).
const BLOCK_HDR: usize = 8;
const BLOCK_STATUS: usize = BLOCK_HDR + std::mem::offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = BLOCK_HDR + std::mem::offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize =
    BLOCK_HDR + std::mem::offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
/// Smallest offset at which a packet header may start in a block.
const BLOCK_DESC_LEN: usize = BLOCK_HDR + std::mem::size_of::<libc::tpacket_hdr_v1>();
const _: () = assert!(BLOCK_STATUS == 8 && BLOCK_NUM_PKTS == 12 && BLOCK_FIRST_PKT == 16);

/// Offsets inside a frame header (`struct tpacket3_hdr`).
const HDR3_LEN: usize = std::mem::size_of::<libc::tpacket3_hdr>();
const FRAME_STATUS: usize = std::mem::offset_of!(libc::tpacket3_hdr, tp_status);
const FRAME_LEN: usize = std::mem::offset_of!(libc::tpacket3_hdr, tp_len);
const FRAME_SNAPLEN: usize = std::mem::offset_of!(libc::tpacket3_hdr, tp_snaplen);
const FRAME_NEXT: usize = std::mem::offset_of!(libc::tpacket3_hdr, tp_next_offset);

/// Ethernet header length and the bytes a VLAN tag adds.
const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;

/// How the transmit side hands frames to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxMode {
    /// A mapped transmit ring (PACKET_TX_RING): frames are copied into ring slots, one `send()`
    /// kick per batch sends them all.
    Ring,
    /// `sendmmsg()` of the whole batch straight from the pool buffers, one call per batch; the
    /// socket has no transmit ring.
    Sendmmsg,
}

/// How an AF_PACKET port is opened. `AfPacketConfig::new` gives the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Kernel interface to bind to (it must exist in the caller's network namespace).
    pub interface: String,
    /// PACKET_FANOUT group (hash mode, with defragmentation) this socket joins, so several
    /// workers can each open a socket on the same interface and split its flows. `None`: no
    /// fanout (one socket gets every frame). Group ids are per network namespace.
    pub fanout: Option<u16>,
    /// Bytes per receive block (a multiple of the page size, power of two; default 64 KiB).
    pub rx_block_size: u32,
    /// Receive blocks (default 64: a 4 MiB ring).
    pub rx_blocks: u32,
    /// Milliseconds after which the kernel hands over a partly filled block (default 1).
    pub rx_block_timeout_ms: u32,
    /// How tx hands frames to the kernel (default: `TxMode::Sendmmsg`, measured cheaper on veth;
    /// see the crate's tests).
    pub tx_mode: TxMode,
    /// Bytes per transmit ring frame including its 48-byte header (multiple of 16; default
    /// 2048). Ring mode only.
    pub tx_frame_size: u32,
    /// Transmit ring frames (rounded up to fill whole 64 KiB blocks; default 1024). Ring mode
    /// only.
    pub tx_frames: u32,
    /// Put the interface in promiscuous mode (PACKET_MR_PROMISC) so frames for other MACs arrive.
    pub promiscuous: bool,
    /// Send with PACKET_QDISC_BYPASS (straight to the driver, no qdisc).
    pub qdisc_bypass: bool,
}

impl AfPacketConfig {
    /// Defaults for `interface`: 64 x 64 KiB receive blocks retired after 1 ms, sendmmsg
    /// transmit (ring mode: 1024 frames of 2 KiB), promiscuous, qdisc bypassed, no fanout.
    pub fn new(interface: impl Into<String>) -> AfPacketConfig {
        AfPacketConfig {
            interface: interface.into(),
            fanout: None,
            rx_block_size: 1 << 16,
            rx_blocks: 64,
            rx_block_timeout_ms: 1,
            tx_mode: TxMode::Sendmmsg,
            tx_frame_size: 2048,
            tx_frames: 1024,
            promiscuous: true,
            qdisc_bypass: true,
        }
    }
}

/// Kernel-side counters of the socket (PACKET_STATISTICS, accumulated since open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames the kernel offered to the socket.
    pub packets: u64,
    /// Frames the kernel dropped (receive ring full).
    pub drops: u64,
    /// Times the receive queue was frozen (all blocks owned by user space).
    pub freezes: u64,
}

/// One AF_PACKET socket with its mapped rings, shared by a port's rx and tx nodes.
pub struct AfPacketSocket {
    interface: String,
    ifindex: u32,
    mtu: u32,
    fanout: Option<u16>,
    tx_mode: TxMode,
    map: *mut u8,
    map_len: usize,
    rx_block_size: usize,
    rx_blocks: usize,
    tx_offset: usize,
    tx_block_size: usize,
    tx_frames_per_block: usize,
    tx_frame_size: usize,
    tx_frames: usize,
    /// Longest frame tx accepts: a frame's room and the interface MTU plus Ethernet and VLAN.
    tx_max_len: usize,
    /// A kick failed (ENOBUFS, EAGAIN, link down): frames may wait in the ring.
    tx_retry: AtomicBool,
    last_kick_tsc: AtomicU64,
    tx_kick_errors: Counter,
    csum_not_ready: Counter,
    kernel: [AtomicU64; 3],
    fd: OwnedFd,
}

// SAFETY: the mapping is owned by the socket and unmapped once in Drop. Its receive part is only
// read and written by the one `AfPacketRx` made with the socket and its transmit part only by the
// one `AfPacketTx` (both built together by `AfPacketPort::open`, each keeping its own cursor);
// everything else in the struct is immutable after open or atomic.
unsafe impl Send for AfPacketSocket {}
// SAFETY: see `Send`; shared access (`&self`) only reads immutable fields and atomics, and cold
// paths (`kernel_stats`) only make system calls on the fd.
unsafe impl Sync for AfPacketSocket {}

impl std::fmt::Debug for AfPacketSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketSocket")
            .field("interface", &self.interface)
            .field("ifindex", &self.ifindex)
            .field("mtu", &self.mtu)
            .field("fanout", &self.fanout)
            .field("rx_ring", &(self.rx_blocks, self.rx_block_size))
            .field("tx_ring", &(self.tx_frames, self.tx_frame_size))
            .finish()
    }
}

/// Check an interface name the way the kernel will (1..=15 bytes, no '/', ':' or whitespace).
pub(crate) fn check_ifname(driver: &'static str, name: &str) -> Result<CString, PortError> {
    let bad = |why: &str| PortError::BadSetting {
        driver,
        interface: name.to_string(),
        reason: format!(
            "{why}; accepted: an interface name of 1 to {MAX_IFNAME} bytes without '/', ':' or \
             whitespace"
        ),
    };
    if name.is_empty() {
        return Err(bad("the interface name is empty"));
    }
    if name.len() > MAX_IFNAME {
        return Err(bad(&format!("the name is {} bytes long", name.len())));
    }
    if name == "."
        || name == ".."
        || name.contains(['/', ':'])
        || name.contains(char::is_whitespace)
    {
        return Err(bad("the name contains a character the kernel refuses"));
    }
    CString::new(name).map_err(|_| bad("the name contains a NUL byte"))
}

/// An `ifreq` carrying `name`.
pub(crate) fn ifreq_for(name: &CString) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    ifr
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

impl AfPacketSocket {
    /// The socket's descriptor (for waiting on it).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    fn os(&self, op: &str, source: std::io::Error) -> PortError {
        os_err(&self.interface, op, source)
    }

    /// Open a socket on `config.interface` with both rings mapped, bound, and (if asked)
    /// promiscuous and in a fanout group. Cold path.
    pub fn open(config: &AfPacketConfig) -> Result<Arc<AfPacketSocket>, PortError> {
        let name = &config.interface;
        let cname = check_ifname(DRIVER, name)?;
        let bad = |reason: String| PortError::BadSetting {
            driver: DRIVER,
            interface: name.clone(),
            reason,
        };
        let page = 4096u32;
        let bs = config.rx_block_size;
        if !bs.is_power_of_two() || !(page..=1 << 26).contains(&bs) {
            return Err(bad(format!(
                "rx block size {bs}; accepted: a power of two from 4096 to 64 MiB"
            )));
        }
        if !(1..=65536).contains(&config.rx_blocks) {
            return Err(bad(format!(
                "{} rx blocks; accepted: 1 to 65536",
                config.rx_blocks
            )));
        }
        let fs = config.tx_frame_size;
        if !fs.is_multiple_of(16) || !(TX_DATA_OFFSET as u32 + 64..=1 << 16).contains(&fs) {
            return Err(bad(format!(
                "tx frame size {fs}; accepted: a multiple of 16 from {} to 65536",
                TX_DATA_OFFSET + 64
            )));
        }
        if !(1..=1 << 20).contains(&config.tx_frames) {
            return Err(bad(format!(
                "{} tx frames; accepted: 1 to 1048576",
                config.tx_frames
            )));
        }
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(PortError::NoSuchInterface {
                driver: DRIVER,
                interface: name.clone(),
            });
        }
        // Protocol 0: nothing is queued before `bind` names the interface (ETH_P_ALL here would
        // deliver every interface's frames in between).
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            let e = last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => PortError::NotPermitted {
                    driver: DRIVER,
                    interface: name.clone(),
                    op: "open an AF_PACKET socket".into(),
                    needs: "AF_PACKET needs CAP_NET_RAW (run as root or grant the capability)",
                },
                _ => os_err(name, "open an AF_PACKET socket", e),
            });
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let set = |opt: libc::c_int, what: &str, v: libc::c_int| -> Result<(), PortError> {
            setsockopt(&fd, opt, &v).map_err(|e| os_err(name, &format!("set {what}"), e))
        };
        set(
            libc::PACKET_VERSION,
            "PACKET_VERSION (TPACKET_V3)",
            libc::tpacket_versions::TPACKET_V3 as libc::c_int,
        )?;
        // Malformed tx frames are skipped instead of stalling the ring.
        set(libc::PACKET_LOSS, "PACKET_LOSS", 1)?;
        if config.qdisc_bypass {
            set(libc::PACKET_QDISC_BYPASS, "PACKET_QDISC_BYPASS", 1)?;
        }
        set(libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING", 1)?;

        let rx_req = libc::tpacket_req3 {
            tp_block_size: bs,
            tp_block_nr: config.rx_blocks,
            tp_frame_size: 2048,
            tp_frame_nr: bs / 2048 * config.rx_blocks,
            tp_retire_blk_tov: config.rx_block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::PACKET_RX_RING, &rx_req)
            .map_err(|e| os_err(name, "set PACKET_RX_RING (TPACKET_V3)", e))?;
        let (mut tx_block_size, mut per_block, mut tx_blocks, mut tx_frames) = (0, 1, 0, 0);
        if config.tx_mode == TxMode::Ring {
            tx_block_size = (fs as usize).max(1 << 16).next_power_of_two();
            per_block = tx_block_size / fs as usize;
            tx_blocks = (config.tx_frames as usize).div_ceil(per_block);
            tx_frames = tx_blocks * per_block;
            let tx_req = libc::tpacket_req3 {
                tp_block_size: tx_block_size as u32,
                tp_block_nr: tx_blocks as u32,
                tp_frame_size: fs,
                tp_frame_nr: tx_frames as u32,
                tp_retire_blk_tov: 0,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            setsockopt(&fd, libc::PACKET_TX_RING, &tx_req)
                .map_err(|e| os_err(name, "set PACKET_TX_RING", e))?;
        }

        let rx_len = bs as usize * config.rx_blocks as usize;
        let map_len = rx_len + tx_block_size * tx_blocks;
        // SAFETY: maps the socket's rings (rx then tx, as the kernel lays them out); the result
        // is checked and unmapped in Drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(os_err(name, "mmap the rings", last_os_error()));
        }
        let mut sock = AfPacketSocket {
            interface: name.clone(),
            ifindex,
            mtu: 1500,
            fanout: config.fanout,
            tx_mode: config.tx_mode,
            map: map as *mut u8,
            map_len,
            rx_block_size: bs as usize,
            rx_blocks: config.rx_blocks as usize,
            tx_offset: rx_len,
            tx_block_size,
            tx_frames_per_block: per_block,
            tx_frame_size: fs as usize,
            tx_frames,
            tx_max_len: 0,
            tx_retry: AtomicBool::new(false),
            last_kick_tsc: AtomicU64::new(0),
            tx_kick_errors: Counter::default(),
            csum_not_ready: Counter::default(),
            kernel: Default::default(),
            fd,
        };

        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            let e = last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface {
                    driver: DRIVER,
                    interface: name.clone(),
                },
                _ => sock.os("bind to the interface", e),
            });
        }
        if config.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as i32,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(&sock.fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| sock.os("set promiscuous mode (PACKET_MR_PROMISC)", e))?;
        }
        if let Some(group) = config.fanout {
            let v = (group as u32)
                | ((libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_DEFRAG) << 16);
            setsockopt(&sock.fd, libc::PACKET_FANOUT, &v).map_err(|e| {
                sock.os(
                    &format!(
                        "join PACKET_FANOUT group {group} (a group id is per network \
                         namespace and bound to one interface and mode)"
                    ),
                    e,
                )
            })?;
        }
        let mut ifr = ifreq_for(&cname);
        // SAFETY: SIOCGIFMTU reads the name and writes `ifru_mtu` of the ifreq we own.
        let r = unsafe { libc::ioctl(sock.fd.as_raw_fd(), libc::SIOCGIFMTU, &mut ifr) };
        if r < 0 {
            return Err(sock.os("read the MTU (SIOCGIFMTU)", last_os_error()));
        }
        // SAFETY: SIOCGIFMTU succeeded, so the union holds the MTU.
        sock.mtu = unsafe { ifr.ifr_ifru.ifru_mtu }.max(0) as u32;
        sock.tx_max_len = sock.mtu as usize + ETH_HLEN + VLAN_HLEN;
        if sock.tx_mode == TxMode::Ring {
            sock.tx_max_len = sock.tx_max_len.min(sock.tx_frame_size - TX_DATA_OFFSET);
        }
        Ok(Arc::new(sock))
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The interface index it is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface MTU read at open.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The fanout group joined, if any.
    pub fn fanout(&self) -> Option<u16> {
        self.fanout
    }

    /// How the tx side hands frames to the kernel.
    pub fn tx_mode(&self) -> TxMode {
        self.tx_mode
    }

    /// Longest frame the tx side sends (longer ones are counted in `tx_drops`).
    pub fn tx_max_len(&self) -> usize {
        self.tx_max_len
    }

    /// (blocks, bytes per block) of the receive ring and (frames, bytes per frame) of the
    /// transmit ring ((0, _) in sendmmsg mode).
    pub fn ring_sizes(&self) -> ((usize, usize), (usize, usize)) {
        (
            (self.rx_blocks, self.rx_block_size),
            (self.tx_frames, self.tx_frame_size),
        )
    }

    /// Frames received with an incomplete L4 checksum (TP_STATUS_CSUMNOTREADY), finished in
    /// software.
    pub fn csum_not_ready(&self) -> u64 {
        self.csum_not_ready.get()
    }

    /// Ring mode: transmit kicks the kernel refused (the frames stay queued and go with a later
    /// kick). Sendmmsg mode: calls that failed or sent only part of a batch.
    pub fn tx_kick_errors(&self) -> u64 {
        self.tx_kick_errors.get()
    }

    /// Read and accumulate the kernel's counters for this socket (PACKET_STATISTICS, which the
    /// kernel resets on each read). Cold path: one `getsockopt`; call it from the control thread.
    pub fn kernel_stats(&self) -> Result<KernelStats, PortError> {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `st`, which we own.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats_v3 as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(self.os("read PACKET_STATISTICS", last_os_error()));
        }
        let add =
            |i: usize, v: u32| self.kernel[i].fetch_add(v as u64, Ordering::Relaxed) + v as u64;
        Ok(KernelStats {
            // tp_packets counts drops too.
            packets: add(0, st.tp_packets),
            drops: add(1, st.tp_drops),
            freezes: add(2, st.tp_freeze_q_cnt),
        })
    }

    /// Start of receive block `i` (< rx_blocks).
    #[inline(always)]
    fn rx_block(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.rx_blocks);
        // SAFETY: i < rx_blocks, so the offset stays inside the receive part of the mapping.
        unsafe { self.map.add(i * self.rx_block_size) }
    }

    /// Start of transmit frame `i` (< tx_frames).
    #[inline(always)]
    fn tx_frame(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.tx_frames);
        let block = i / self.tx_frames_per_block;
        let within = i % self.tx_frames_per_block;
        // SAFETY: block < tx blocks and within * frame_size + frame_size <= block size, so the
        // offset stays inside the transmit part of the mapping.
        unsafe {
            self.map
                .add(self.tx_offset + block * self.tx_block_size + within * self.tx_frame_size)
        }
    }

    /// Ask the kernel to send every frame marked SEND_REQUEST. One system call, never blocks.
    #[inline]
    fn kick(&self, now_tsc: u64) {
        // SAFETY: a zero-length send on our own socket with no buffer and no address.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        self.last_kick_tsc.store(now_tsc, Ordering::Relaxed);
        if r < 0 {
            self.tx_kick_errors.add(1);
            self.tx_retry.store(true, Ordering::Relaxed);
        } else {
            self.tx_retry.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for AfPacketSocket {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly what mmap returned in `open`; unmapped once, before
        // the fd closes (fields drop after this body).
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}

fn os_err(interface: &str, op: &str, source: std::io::Error) -> PortError {
    if matches!(
        source.raw_os_error(),
        Some(libc::EPERM) | Some(libc::EACCES)
    ) {
        return PortError::NotPermitted {
            driver: DRIVER,
            interface: interface.to_string(),
            op: op.to_string(),
            needs: "AF_PACKET needs CAP_NET_RAW (run as root or grant the capability)",
        };
    }
    PortError::Os {
        driver: DRIVER,
        interface: interface.to_string(),
        op: op.to_string(),
        source,
    }
}

fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> Result<(), std::io::Error> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_os_error())
    } else {
        Ok(())
    }
}

/// The status word at `ptr` (block or frame status), shared with the kernel.
///
/// # Safety
/// `ptr` must be 4-byte aligned and inside the live ring mapping.
#[inline(always)]
unsafe fn status_word<'a>(ptr: *mut u8) -> &'a AtomicU32 {
    // SAFETY: guaranteed by the caller; the kernel accesses the word with single aligned
    // loads/stores and barriers, which is what an atomic is.
    unsafe { AtomicU32::from_ptr(ptr as *mut u32) }
}

/// A port's two nodes, sharing one socket.
pub struct AfPacketPort {
    /// The receive node (an input node).
    pub rx: AfPacketRx,
    /// The transmit node.
    pub tx: AfPacketTx,
}

impl AfPacketPort {
    /// Open the socket of `config` for port `port_id`; received packets go to the node named
    /// `next` (normally `ethernet-input`). Cold path.
    pub fn open(
        config: &AfPacketConfig,
        port_id: u16,
        rx_node: String,
        tx_node: String,
        next: String,
        stats: Arc<PortStats>,
    ) -> Result<AfPacketPort, PortError> {
        let sock = AfPacketSocket::open(config)?;
        Ok(AfPacketPort {
            rx: AfPacketRx::new(rx_node, port_id, next, sock.clone(), stats.clone()),
            tx: AfPacketTx::new(tx_node, port_id, sock, stats),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked() {
        assert!(check_ifname(DRIVER, "eth0").is_ok());
        assert!(check_ifname(DRIVER, "a23456789012345").is_ok());
        for bad in ["", "a234567890123456", "a/b", "a b", "a:1", ".", ".."] {
            let e = check_ifname(DRIVER, bad).expect_err(bad);
            assert!(e.to_string().contains("accepted"), "{e}");
        }
    }

    #[test]
    fn missing_interface_says_what_to_do() {
        let e = AfPacketSocket::open(&AfPacketConfig::new("vpnosuchif0"))
            .expect_err("no such interface");
        let s = e.to_string();
        assert!(s.contains("`vpnosuchif0`"), "{s}");
        assert!(s.contains("create it first or check `ip link`"), "{s}");
    }

    #[test]
    fn bad_ring_settings_are_refused() {
        let mut c = AfPacketConfig::new("lo");
        c.rx_block_size = 5000;
        let s = AfPacketSocket::open(&c)
            .expect_err("block size")
            .to_string();
        assert!(s.contains("rx block size 5000"), "{s}");
        let mut c = AfPacketConfig::new("lo");
        c.tx_frame_size = 100;
        let s = AfPacketSocket::open(&c)
            .expect_err("frame size")
            .to_string();
        assert!(s.contains("tx frame size 100"), "{s}");
    }
}
