//! The TAP port: a /dev/net/tun file descriptor in TAP mode (IFF_TAP | IFF_NO_PI), non-blocking,
//! that creates the kernel interface or attaches to an existing one. `TapRx` reads frames into
//! pool buffers, `TapTx` writes packets out of them; they share the device (`Arc<TapDevice>`).
//!
//! It owns the descriptor. It never blocks, never allocates or locks on the fast path, and never
//! trusts what it reads (lengths and virtio-net headers are checked).
//!
//! Behaviour worth knowing:
//! - One system call per packet. A tap descriptor moves one frame per `read()`/`write()`; there is
//!   no batched or ring interface for it (readv scatters one frame, it does not gather several).
//!   Rx reads (`readv`: the buffer plus a one-byte overflow slot that reveals a truncated, too
//!   large frame) until EAGAIN or a full vector, so an idle poll costs one system call; tx writes
//!   each frame. This is the inherent price of TAP; AF_PACKET or AF_XDP ports avoid it.
//! - vnet headers (`vnet_hdr = true`): IFF_VNET_HDR with a 10-byte `struct virtio_net_hdr` before
//!   every frame. Rx reads the header into the headroom and strips it; tx writes it into the
//!   headroom before the frame, so each frame is still one `write()`. Headers are translated and
//!   checked by `packet::vnet`; a refused one drops the frame, counted by reason.
//! - Without offloads (the default) TUNSETOFFLOAD(0): the kernel checksums and segments
//!   everything before handing it to us; a GSO or partial-checksum frame arriving anyway is
//!   dropped (`rx_vnet_offload_not_negotiated`). Frames we write carry an all-zero header.
//! - With offloads (`offloads = true`, needs `vnet_hdr`): TUNSETOFFLOAD(CSUM | TSO4 | TSO6 |
//!   TSO_ECN), so the kernel hands over TCP super-packets up to 64 KiB with the checksum left
//!   partial, recorded in the meta (`FLAG_CSUM_PARTIAL`, `gso_*`); on tx the meta's offloads go
//!   into the header and the kernel finishes them. A frame larger than an ordinary buffer is read
//!   with its tail straight into a jumbo buffer (a third iovec over the jumbo's data past the
//!   ordinary size); only the head (one ordinary buffer's worth) is then copied across. Without a
//!   free jumbo buffer such a frame is dropped (`rx_no_jumbo_buffer`); smaller ones still flow.
//! - A packet with offloads sent on a port without them is dropped and counted
//!   (`tx_vnet_offload_not_negotiated`): whoever routes to the port must finish the work first
//!   (`TapTx::takes_offloads`).
//! - The link state is left alone: bring the interface up (`ip link set <name> up`) and address
//!   it as the host side needs. A device vecplane created disappears when the port closes; one it
//!   attached to (created with `ip tuntap add`) stays.
//! - `rx_drops` counts frames read but not handed on (larger than a buffer, runts, refused vnet
//!   headers); failed reads that consumed no frame are in `TapDevice::read_errors`. `tx_drops`
//!   counts packets the kernel refused (link down, too short), without headroom for the vnet
//!   header, or with offloads the port cannot pass on. The device's own counters (reasons) are
//!   its `DriverCounters`.

use crate::af_packet::{check_ifname, ifreq_for};
use crate::error::PortError;
use graph::{Counter, Dispatch, DriverCounters, InputNode, Node, NodeContext, PortStats};
use packet::pool::JUMBO_DATA_SIZE;
use packet::vnet::{self, VnetError, VnetHdr};
use packet::BufferPool;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "tap";

/// Size of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = vnet::HDR_LEN;

/// The offloads a TAP with `offloads` announces: partial checksums and TCP segmentation (v4,
/// v6, with ECN). Never UDP (UFO/USO): nothing here would segment it.
const TAP_OFFLOADS: libc::c_uint =
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;

/// Names of the per-reason counters of refused received headers (index: `VnetError::index`).
const RX_VNET_NAMES: [&str; VnetError::ALL.len()] = [
    "rx_vnet_unknown_flags",
    "rx_vnet_csum_out_of_frame",
    "rx_vnet_offload_not_negotiated",
    "rx_vnet_udp_gso",
    "rx_vnet_unknown_gso_type",
    "rx_vnet_gso_size_zero",
    "rx_vnet_gso_not_tcp",
];
/// Names of the per-reason counters of packets not sent for their offloads.
const TX_VNET_NAMES: [&str; VnetError::ALL.len()] = [
    "tx_vnet_unknown_flags",
    "tx_vnet_csum_out_of_frame",
    "tx_vnet_offload_not_negotiated",
    "tx_vnet_udp_gso",
    "tx_vnet_unknown_gso_type",
    "tx_vnet_gso_size_zero",
    "tx_vnet_gso_not_tcp",
];

/// Shortest frame accepted: an Ethernet header.
const ETH_HLEN: usize = 14;

/// How a TAP port is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapConfig {
    /// Interface name: created if it does not exist, attached to if it is a TAP device.
    pub name: String,
    /// Exchange a virtio-net header with every frame (IFF_VNET_HDR).
    pub vnet_hdr: bool,
    /// Take and pass on checksum and TCP segmentation offloads (needs `vnet_hdr`): received
    /// super-packets need jumbo buffers in the pool.
    pub offloads: bool,
    /// Create the device in this network namespace (None: the calling thread's).
    pub netns: Option<crate::netns::Netns>,
}

impl TapConfig {
    /// A plain TAP (no vnet header) named `name`.
    pub fn new(name: impl Into<String>) -> TapConfig {
        TapConfig {
            name: name.into(),
            vnet_hdr: false,
            offloads: false,
            netns: None,
        }
    }
}

/// An open TAP device, shared by a port's rx and tx nodes.
#[derive(Debug)]
pub struct TapDevice {
    name: String,
    vnet_hdr: bool,
    offloads: bool,
    created: bool,
    ifindex: u32,
    read_errors: Counter,
    /// Frames longer than the buffers they could go to (truncated by the kernel).
    rx_too_long: Counter,
    /// Frames larger than an ordinary buffer read while no jumbo buffer was free.
    rx_no_jumbo: Counter,
    /// Received frames refused for their virtio-net header, by `VnetError::index`.
    rx_vnet: [Counter; VnetError::ALL.len()],
    /// Packets not sent because of their offloads, by `VnetError::index`.
    tx_vnet: [Counter; VnetError::ALL.len()],
    fd: OwnedFd,
}

fn tap_err(name: &str, op: &str, source: std::io::Error) -> PortError {
    let name = name.to_string();
    match source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::NotPermitted {
            driver: DRIVER,
            interface: name,
            op: op.to_string(),
            needs: "TAP needs CAP_NET_ADMIN to create or attach a device (run as root)",
        },
        Some(libc::EBUSY) => PortError::BadSetting {
            driver: DRIVER,
            interface: name,
            reason: format!(
                "cannot {op}: the device is already attached by another process (a TAP without \
                 multi-queue takes one reader); stop it or pick another name"
            ),
        },
        Some(libc::EINVAL) if op.starts_with("create or attach") => PortError::BadSetting {
            driver: DRIVER,
            interface: name,
            reason: format!(
                "cannot {op}: an interface of that name exists and is not a single-queue TAP \
                 device; pick another name or delete it (`ip link del`)"
            ),
        },
        _ => PortError::Os {
            driver: DRIVER,
            interface: name,
            op: op.to_string(),
            source,
        },
    }
}

impl TapDevice {
    /// The device's descriptor (for waiting on it).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Create (or attach to) the TAP device of `config`, in its namespace if it names one.
    /// Cold path.
    pub fn open(config: &TapConfig) -> Result<Arc<TapDevice>, PortError> {
        match &config.netns {
            None => TapDevice::open_here(config),
            Some(ns) => crate::netns::run_in(ns, || TapDevice::open_here(config))
                .map_err(|e| tap_err(&config.name, "enter the port's network namespace", e))?,
        }
    }

    /// `open` in the calling thread's namespace.
    fn open_here(config: &TapConfig) -> Result<Arc<TapDevice>, PortError> {
        let name = &config.name;
        let cname = check_ifname(DRIVER, name)?;
        if config.offloads && !config.vnet_hdr {
            return Err(PortError::BadSetting {
                driver: DRIVER,
                interface: name.clone(),
                reason: "offloads travel in virtio-net headers; accepted: offloads with \
                         vnet_hdr, or neither"
                    .into(),
            });
        }
        // SAFETY: `cname` is a valid NUL-terminated string.
        let existed = unsafe { libc::if_nametoindex(cname.as_ptr()) } != 0;
        let path = c"/dev/net/tun";
        // SAFETY: plain system call on a constant path; the result is checked.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Err(PortError::BadSetting {
                    driver: DRIVER,
                    interface: name.clone(),
                    reason: "/dev/net/tun does not exist; load the tun module (`modprobe tun`) \
                             or create the node (`mknod /dev/net/tun c 10 200`)"
                        .into(),
                });
            }
            return Err(tap_err(name, "open /dev/net/tun", e));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut ifr = ifreq_for(&cname);
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
        if config.vnet_hdr {
            flags |= libc::IFF_VNET_HDR;
        }
        ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
        // SAFETY: TUNSETIFF reads the name and flags of the ifreq we own (and may write the name).
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) } < 0 {
            let op = if existed {
                "create or attach the TAP (TUNSETIFF; the interface exists)"
            } else {
                "create or attach the TAP (TUNSETIFF)"
            };
            return Err(tap_err(name, op, std::io::Error::last_os_error()));
        }
        if config.vnet_hdr {
            let size: libc::c_int = VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one int we own.
            if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &size) } < 0 {
                return Err(tap_err(
                    name,
                    "set the vnet header size (TUNSETVNETHDRSZ)",
                    std::io::Error::last_os_error(),
                ));
            }
            // Without offloads no TUN_F_* bit: the kernel never hands us GSO or partial-checksum
            // frames.
            let (features, op) = if config.offloads {
                (
                    TAP_OFFLOADS,
                    "turn checksum and TCP segmentation offloads on (TUNSETOFFLOAD)",
                )
            } else {
                (0, "turn offloads off (TUNSETOFFLOAD)")
            };
            // SAFETY: TUNSETOFFLOAD takes its argument by value.
            if unsafe {
                libc::ioctl(
                    fd.as_raw_fd(),
                    libc::TUNSETOFFLOAD,
                    features as libc::c_ulong,
                )
            } < 0
            {
                return Err(tap_err(name, op, std::io::Error::last_os_error()));
            }
        }
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        Ok(Arc::new(TapDevice {
            name: name.clone(),
            vnet_hdr: config.vnet_hdr,
            offloads: config.offloads,
            created: !existed,
            ifindex,
            read_errors: Counter::default(),
            rx_too_long: Counter::default(),
            rx_no_jumbo: Counter::default(),
            rx_vnet: std::array::from_fn(|_| Counter::default()),
            tx_vnet: std::array::from_fn(|_| Counter::default()),
            fd,
        }))
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether frames carry a virtio-net header.
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    /// Whether the port takes and passes on checksum and TCP segmentation offloads: received
    /// packets may be super-packets (jumbo buffers) or have a partial checksum, and packets
    /// with offloads may be sent. Without it, a packet with offloads sent here is dropped.
    pub fn offloads(&self) -> bool {
        self.offloads
    }

    /// True when this port created the interface (it goes away with the port).
    pub fn created(&self) -> bool {
        self.created
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Reads that failed without consuming a frame (neither EAGAIN nor a too-large frame).
    pub fn read_errors(&self) -> u64 {
        self.read_errors.get()
    }

    fn hdr_len(&self) -> usize {
        if self.vnet_hdr {
            VNET_HDR_LEN
        } else {
            0
        }
    }
}

/// Only the counters that can move on a port of this kind: the vnet-header reasons with vnet
/// headers, the jumbo and tx-offload ones with offloads, and on every port the packets refused
/// for offloads it does not take.
impl DriverCounters for TapDevice {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("read_errors", self.read_errors.get()),
            ("rx_too_long", self.rx_too_long.get()),
        ];
        if self.offloads {
            v.push(("rx_no_jumbo_buffer", self.rx_no_jumbo.get()));
        }
        if self.vnet_hdr {
            v.extend(
                RX_VNET_NAMES
                    .iter()
                    .zip(&self.rx_vnet)
                    .map(|(n, c)| (*n, c.get())),
            );
        }
        let not_negotiated = VnetError::NotNegotiated.index();
        for (i, (n, c)) in TX_VNET_NAMES.iter().zip(&self.tx_vnet).enumerate() {
            if self.offloads || i == not_negotiated {
                v.push((*n, c.get()));
            }
        }
        v
    }
}

/// A TAP port's two nodes, sharing one device.
pub struct TapPort {
    /// The receive node (an input node).
    pub rx: TapRx,
    /// The transmit node.
    pub tx: TapTx,
}

impl TapPort {
    /// Open the device of `config` for port `port_id`; received packets go to the node named
    /// `next` (normally `ethernet-input`). Cold path.
    pub fn open(
        config: &TapConfig,
        port_id: u16,
        rx_node: String,
        tx_node: String,
        next: String,
        stats: Arc<PortStats>,
    ) -> Result<TapPort, PortError> {
        let dev = TapDevice::open(config)?;
        Ok(TapPort {
            rx: TapRx {
                name: rx_node,
                port_id,
                next,
                dev: dev.clone(),
                stats: stats.clone(),
            },
            tx: TapTx {
                name: tx_node,
                port_id,
                dev,
                stats,
            },
        })
    }
}

/// Input node reading frames from a TAP device, one `read()` each, until EAGAIN or a full vector.
pub struct TapRx {
    name: String,
    port_id: u16,
    next: String,
    dev: Arc<TapDevice>,
    stats: Arc<PortStats>,
}

impl TapRx {
    /// The port number stamped into `rx_port`.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The device.
    pub fn device(&self) -> &Arc<TapDevice> {
        &self.dev
    }
}

impl InputNode for TapRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.dev.raw_fd())
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let dev = &*self.dev;
        let hdr = dev.hdr_len();
        let fd = dev.fd.as_raw_fd();
        let data_size = cx.pool.data_size();
        let (mut n, mut bytes, mut drops) = (0usize, 0u64, 0u64);
        // One spare buffer is reused across dropped frames and returned at the end.
        let mut spare: Option<u32> = None;
        // With offloads: the jumbo buffer the next frame's tail (past `data_size`) lands in,
        // taken once per poll while the pool has one (a dry pool is not asked again).
        let mut landing: Option<u32> = None;
        let mut jumbo_dry = !dev.offloads || cx.pool.jumbo_capacity() == 0;
        while n < out.len() {
            let Some(b) = spare.take().or_else(|| cx.pool.alloc()) else {
                // No buffer: leave frames queued in the kernel.
                break;
            };
            if landing.is_none() && !jumbo_dry {
                landing = cx.pool.alloc_jumbo();
                jumbo_dry = landing.is_none();
            }
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize;
            // Read the vnet header (if any) into the headroom just before the data.
            let Some(room) = start
                .checked_sub(hdr)
                .and_then(|s| slot.get_mut(s..start + data_size))
            else {
                spare = Some(b);
                break;
            };
            let head = libc::iovec {
                iov_base: room.as_mut_ptr() as *mut libc::c_void,
                iov_len: room.len(),
            };
            // The landing buffer's data past `data_size`: where a super-packet's tail goes.
            let tail = landing.and_then(|j| {
                let (jm, js) = cx.pool.slot_mut(j);
                let at = jm.data_offset as usize;
                js.get_mut(at + data_size..at + JUMBO_DATA_SIZE as usize)
                    .map(|t| libc::iovec {
                        iov_base: t.as_mut_ptr() as *mut libc::c_void,
                        iov_len: t.len(),
                    })
            });
            // A last one-byte iovec catches frames larger than the buffers: the kernel copies
            // what fits and drops the rest, so a read that reaches it was truncated.
            let mut overflow = 0u8;
            let over = libc::iovec {
                iov_base: &mut overflow as *mut u8 as *mut libc::c_void,
                iov_len: 1,
            };
            let (iov, iovcnt) = match tail {
                Some(t) => ([head, t, over], 3),
                None => ([head, over, over], 2),
            };
            let capacity = data_size + tail.map_or(0, |t| t.iov_len);
            // SAFETY: the kernel writes at most `iov_len` bytes at each `iov_base`: the buffer
            // slot of `b`, the landing slot (a different buffer), and `overflow`, all held
            // exclusively by this node until the call returns.
            let r = unsafe { libc::readv(fd, iov.as_ptr(), iovcnt) };
            if r < 0 {
                spare = Some(b);
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => break,
                    // EFAULT/EINVAL: the frame did not fit the buffer; the kernel dropped it.
                    Some(libc::EFAULT) | Some(libc::EINVAL) | Some(libc::EMSGSIZE) => {
                        drops += 1;
                        continue;
                    }
                    // Not a frame (e.g. the device went away): counted apart, retried next poll.
                    _ => {
                        dev.read_errors.add(1);
                        break;
                    }
                }
            }
            // The kernel answers the frame's whole length, also when it truncated it.
            let got = r as usize;
            if got < hdr + ETH_HLEN {
                drops += 1;
                spare = Some(b);
                continue;
            }
            let len = got - hdr;
            if len > capacity {
                if dev.offloads && landing.is_none() && len <= JUMBO_DATA_SIZE as usize {
                    dev.rx_no_jumbo.add(1);
                } else {
                    dev.rx_too_long.add(1);
                }
                drops += 1;
                spare = Some(b);
                continue;
            }
            let h = if hdr > 0 {
                VnetHdr::read(&cx.pool.slot(b)[start - hdr..start]).unwrap_or_default()
            } else {
                VnetHdr::default()
            };
            let (keep, spare_back) = if len <= data_size {
                (b, None)
            } else {
                // A super-packet: its tail is in the landing buffer; copy the head over.
                let Some(j) = landing.take() else {
                    drops += 1;
                    spare = Some(b);
                    continue;
                };
                let src = cx.pool.slot(b)[start..start + data_size].as_ptr();
                let (jm, js) = cx.pool.slot_mut(j);
                let at = jm.data_offset as usize;
                let dst = &mut js[at..at + data_size];
                // SAFETY: `src` points at `data_size` bytes of buffer `b`'s slot, which the pool
                // keeps mapped; `b` is an ordinary buffer and `j` a jumbo one, so the ranges
                // are disjoint, and no reference to `b`'s slot is alive.
                unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), data_size) };
                (j, Some(b))
            };
            let (meta, slot) = cx.pool.slot_mut(keep);
            let at = meta.data_offset as usize;
            if hdr > 0 {
                if let Err(e) = vnet::to_meta(
                    &h,
                    &slot[at..at + len],
                    meta.data_offset,
                    dev.offloads,
                    meta,
                ) {
                    dev.rx_vnet[e.index()].add(1);
                    drops += 1;
                    if keep == b {
                        spare = Some(b);
                    } else {
                        // Keep the jumbo buffer for the next super-packet.
                        landing = Some(keep);
                        spare = spare_back;
                    }
                    continue;
                }
            }
            meta.length = len as u16;
            meta.rx_port = self.port_id;
            out[n] = keep;
            n += 1;
            bytes += len as u64;
            spare = spare_back;
        }
        for b in [spare, landing].into_iter().flatten() {
            cx.pool.free(b);
        }
        if n > 0 {
            self.stats.rx_packets.add(n as u64);
            self.stats.rx_bytes.add(bytes);
        }
        if drops > 0 {
            self.stats.rx_drops.add(drops);
        }
        (n, Dispatch::AllTo(0))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let mut t = format!(
            "tap rx: {} (port {}), {} bytes",
            self.dev.name, m.rx_port, m.length
        );
        if m.flags & packet::meta::FLAG_CSUM_PARTIAL != 0 {
            t.push_str(&format!(
                ", checksum partial (start {}, offset {})",
                m.csum_start.saturating_sub(m.data_offset),
                m.csum_offset
            ));
        }
        if m.is_gso() {
            t.push_str(&format!(
                ", GSO type {} size {}{}",
                m.gso_type,
                m.gso_size,
                if m.gso_flags != 0 { " ECN" } else { "" }
            ));
        }
        t
    }
}

/// Output node writing each packet to a TAP device with one `write()`, then freeing it.
pub struct TapTx {
    name: String,
    port_id: u16,
    dev: Arc<TapDevice>,
    stats: Arc<PortStats>,
}

impl TapTx {
    /// The port number this node stands for.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The device.
    pub fn device(&self) -> &Arc<TapDevice> {
        &self.dev
    }

    /// Whether packets with offloads (partial checksum, super-packets) may be sent here; when
    /// not, the sender must finish them first (they are dropped here otherwise).
    pub fn takes_offloads(&self) -> bool {
        self.dev.offloads
    }
}

impl Node for TapTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        let dev = &*self.dev;
        let hdr = dev.hdr_len();
        let fd = dev.fd.as_raw_fd();
        let (mut sent, mut bytes, mut drops) = (0u64, 0u64, 0u64);
        for &b in frame {
            let (meta, slot) = cx.pool.slot_mut(b);
            let (start, len) = (meta.data_offset as usize, meta.length as usize);
            // The vnet header goes into the headroom right before the frame: one write.
            let Some(bytes_out) = start
                .checked_sub(hdr)
                .and_then(|s| slot.get_mut(s..start + len))
            else {
                drops += 1;
                continue;
            };
            if len < ETH_HLEN {
                drops += 1;
                continue;
            }
            if !meta.has_offload() {
                bytes_out[..hdr].fill(0);
            } else {
                // A half-done frame never leaves: the kernel finishes it, or it is dropped.
                let h = if dev.offloads {
                    vnet::from_meta(meta, &bytes_out[hdr..])
                } else {
                    Err(VnetError::NotNegotiated)
                };
                match h {
                    Ok(h) => {
                        h.write(bytes_out);
                    }
                    Err(e) => {
                        dev.tx_vnet[e.index()].add(1);
                        drops += 1;
                        continue;
                    }
                }
            }
            // SAFETY: writes `bytes_out.len()` bytes from memory we hold.
            let r = unsafe {
                libc::write(
                    fd,
                    bytes_out.as_ptr() as *const libc::c_void,
                    bytes_out.len(),
                )
            };
            if r == bytes_out.len() as isize {
                sent += 1;
                bytes += len as u64;
            } else {
                drops += 1;
            }
        }
        cx.pool.free_batch(frame);
        self.stats.tx_packets.add(sent);
        self.stats.tx_bytes.add(bytes);
        if drops > 0 {
            self.stats.tx_drops.add(drops);
        }
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "tap tx: {} (port {}), {} bytes",
            self.dev.name,
            self.port_id,
            pool.meta(buffer).length
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_any_syscall() {
        let e = TapDevice::open(&TapConfig::new("name-that-is-too-long")).expect_err("long");
        let s = e.to_string();
        assert!(
            s.starts_with("tap port on interface `name-that-is-too-long`"),
            "{s}"
        );
        assert!(s.contains("1 to 15 bytes"), "{s}");
    }

    #[test]
    fn offloads_without_vnet_headers_are_refused() {
        let mut c = TapConfig::new("vp-nohdr");
        c.offloads = true;
        let s = TapDevice::open(&c)
            .expect_err("offloads need vnet headers")
            .to_string();
        assert!(s.contains("offloads travel in virtio-net headers"), "{s}");
    }

    #[test]
    fn counter_names_follow_the_reasons() {
        for e in VnetError::ALL {
            assert_eq!(RX_VNET_NAMES[e.index()], format!("rx_vnet_{}", e.name()));
            assert_eq!(TX_VNET_NAMES[e.index()], format!("tx_vnet_{}", e.name()));
        }
    }
}
