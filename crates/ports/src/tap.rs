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
//!   every frame, and TUNSETOFFLOAD(0): we announce no offload, so the kernel checksums and
//!   segments everything before handing it to us and never sends GSO or partial-checksum frames.
//!   Should one arrive anyway (GSO type set or VIRTIO_NET_HDR_F_NEEDS_CSUM), it is dropped and
//!   counted. Frames we write carry an all-zero header (complete frame, checksum done). Rx reads
//!   the header into the headroom and strips it; tx writes it into the headroom before the frame,
//!   so each frame is still one `write()`.
//! - The link state is left alone: bring the interface up (`ip link set <name> up`) and address
//!   it as the host side needs. A device vecplane created disappears when the port closes; one it
//!   attached to (created with `ip tuntap add`) stays.
//! - `rx_drops` counts frames read but not handed on (larger than a buffer, runts, offload
//!   frames); failed reads that consumed no frame are in `TapDevice::read_errors`. `tx_drops`
//!   counts packets the kernel refused (link down, too short) or without headroom for the vnet
//!   header.

use crate::af_packet::{check_ifname, ifreq_for};
use crate::error::PortError;
use graph::{Counter, Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::BufferPool;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "tap";

/// Size of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// virtio-net header flag: the checksum must still be computed.
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// virtio-net header GSO type "none".
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;

/// Shortest frame accepted: an Ethernet header.
const ETH_HLEN: usize = 14;

/// How a TAP port is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapConfig {
    /// Interface name: created if it does not exist, attached to if it is a TAP device.
    pub name: String,
    /// Exchange a virtio-net header with every frame (IFF_VNET_HDR), offloads off.
    pub vnet_hdr: bool,
    /// Create the device in this network namespace (None: the calling thread's).
    pub netns: Option<crate::netns::Netns>,
}

impl TapConfig {
    /// A plain TAP (no vnet header) named `name`.
    pub fn new(name: impl Into<String>) -> TapConfig {
        TapConfig {
            name: name.into(),
            vnet_hdr: false,
            netns: None,
        }
    }
}

/// An open TAP device, shared by a port's rx and tx nodes.
#[derive(Debug)]
pub struct TapDevice {
    name: String,
    vnet_hdr: bool,
    created: bool,
    ifindex: u32,
    read_errors: Counter,
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
            // No TUN_F_* offload: the kernel never hands us GSO or partial-checksum frames.
            // SAFETY: TUNSETOFFLOAD takes its argument by value.
            if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, 0 as libc::c_ulong) } < 0 {
                return Err(tap_err(
                    name,
                    "turn offloads off (TUNSETOFFLOAD)",
                    std::io::Error::last_os_error(),
                ));
            }
        }
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        Ok(Arc::new(TapDevice {
            name: name.clone(),
            vnet_hdr: config.vnet_hdr,
            created: !existed,
            ifindex,
            read_errors: Counter::default(),
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
        let hdr = self.dev.hdr_len();
        let fd = self.dev.fd.as_raw_fd();
        let data_size = cx.pool.data_size();
        let (mut n, mut bytes, mut drops) = (0usize, 0u64, 0u64);
        // One spare buffer is reused across dropped frames and returned at the end.
        let mut spare: Option<u32> = None;
        while n < out.len() {
            let Some(b) = spare.take().or_else(|| cx.pool.alloc()) else {
                // No buffer: leave frames queued in the kernel.
                break;
            };
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
            // A second one-byte iovec catches frames larger than the buffer: the kernel copies what
            // fits and drops the rest, so a read that reaches it was truncated.
            let mut overflow = 0u8;
            let iov = [
                libc::iovec {
                    iov_base: room.as_mut_ptr() as *mut libc::c_void,
                    iov_len: room.len(),
                },
                libc::iovec {
                    iov_base: &mut overflow as *mut u8 as *mut libc::c_void,
                    iov_len: 1,
                },
            ];
            // SAFETY: the kernel writes at most `room.len()` bytes into the buffer slot and one
            // byte into `overflow`, both held exclusively here.
            let r = unsafe { libc::readv(fd, iov.as_ptr(), 2) };
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
                        self.dev.read_errors.add(1);
                        break;
                    }
                }
            }
            let got = r as usize;
            if got < hdr + ETH_HLEN || got > room.len() {
                drops += 1;
                spare = Some(b);
                continue;
            }
            if hdr > 0
                && (room[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0
                    || room[1] != VIRTIO_NET_HDR_GSO_NONE)
            {
                // Offloads are off, so this should not happen; never forward a half-done frame.
                drops += 1;
                spare = Some(b);
                continue;
            }
            meta.length = (got - hdr) as u16;
            meta.rx_port = self.port_id;
            out[n] = b;
            n += 1;
            bytes += (got - hdr) as u64;
        }
        if let Some(b) = spare {
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
        format!(
            "tap rx: {} (port {}), {} bytes",
            self.dev.name, m.rx_port, m.length
        )
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
}

impl Node for TapTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        let hdr = self.dev.hdr_len();
        let fd = self.dev.fd.as_raw_fd();
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
            bytes_out[..hdr].fill(0);
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
}
