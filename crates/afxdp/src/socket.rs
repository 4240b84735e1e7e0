//! One AF_XDP socket for one (interface, queue): created, given the worker's UMEM (registered or
//! shared), its four rings sized and mapped, bound with need_wakeup, and put in the interface's
//! XSKMAP. It turns kernel failures into errors that say what to check; it never moves packets
//! (the port's nodes do).

use crate::error::{hint, AfXdpError};
use crate::program::{self, ModeChoice, XdpAttachment, XdpMode};
use crate::sys::ring::{ring_bytes, ConsRing, ProdRing};
use crate::sys::xsk::{self, XdpDesc, XdpStatistics};
use crate::sys::{self, Mmap};
use crate::umem::Umem;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to bind the socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy when the driver supports it, copy otherwise (the kernel decides).
    #[default]
    Auto,
    /// Copy mode only.
    Copy,
    /// Zero-copy only (fails on drivers without it, e.g. veth).
    ZeroCopy,
}

/// What a port is opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Interface name.
    pub ifname: String,
    /// Receive/transmit queue index.
    pub queue: u32,
    /// vecplane port number (written to `rx_port` of received packets).
    pub port_id: u16,
    /// XDP mode of the redirect program.
    pub mode: ModeChoice,
    /// Copy or zero-copy.
    pub bind: BindMode,
    /// Rx ring entries (power of two).
    pub rx_ring: u32,
    /// Tx ring entries (power of two).
    pub tx_ring: u32,
    /// Fill ring entries (power of two): buffers lent to the kernel for reception.
    pub fill_ring: u32,
    /// Completion ring entries (power of two).
    pub comp_ring: u32,
}

impl AfXdpConfig {
    /// Defaults: automatic modes, 2048 entries per ring.
    pub fn new(ifname: impl Into<String>, queue: u32, port_id: u16) -> AfXdpConfig {
        AfXdpConfig {
            ifname: ifname.into(),
            queue,
            port_id,
            mode: ModeChoice::Auto,
            bind: BindMode::Auto,
            rx_ring: 2048,
            tx_ring: 2048,
            fill_ring: 2048,
            comp_ring: 2048,
        }
    }
}

/// What both halves of a port share: the socket descriptor and the program attachment.
pub(crate) struct SocketCore {
    // Drop order: the socket closes before the attachment (which detaches the program).
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) attachment: Arc<XdpAttachment>,
    pub(crate) ifname: String,
    pub(crate) queue: u32,
    pub(crate) zerocopy: bool,
    pub(crate) shared_umem: bool,
    /// Wake-up syscalls that failed with an unexpected error.
    pub(crate) wakeup_errors: AtomicU64,
}

impl SocketCore {
    pub(crate) fn statistics(&self) -> Result<XdpStatistics, AfXdpError> {
        xsk::statistics(&self.fd).map_err(|e| self.err("getsockopt(XDP_STATISTICS)", e, ""))
    }

    pub(crate) fn err(&self, what: &'static str, e: io::Error, h: &str) -> AfXdpError {
        AfXdpError::Socket {
            ifname: self.ifname.clone(),
            queue: self.queue,
            what,
            source: e,
            hint: hint(h),
        }
    }

    pub(crate) fn count_wakeup(&self, r: io::Result<()>) {
        if r.is_err() {
            self.wakeup_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn mode(&self) -> XdpMode {
        self.attachment.mode()
    }
}

impl Drop for SocketCore {
    fn drop(&mut self) {
        // Stop redirecting to this socket before it closes (the kernel would also do it).
        self.attachment.remove_socket(self.queue);
    }
}

/// A bound socket with its four rings.
pub(crate) struct OpenSocket {
    pub(crate) rx: ConsRing<XdpDesc>,
    pub(crate) fill: ProdRing<u64>,
    pub(crate) tx: ProdRing<XdpDesc>,
    pub(crate) comp: ConsRing<u64>,
    pub(crate) core: Arc<SocketCore>,
}

struct Rings {
    rx: ConsRing<XdpDesc>,
    fill: ProdRing<u64>,
    tx: ProdRing<XdpDesc>,
    comp: ConsRing<u64>,
}

/// Open and bind the socket of `cfg` on `umem`.
pub(crate) fn open(umem: &Umem, cfg: &AfXdpConfig) -> Result<OpenSocket, AfXdpError> {
    let invalid = |reason: String| AfXdpError::Invalid {
        ifname: cfg.ifname.clone(),
        queue: cfg.queue,
        reason,
    };
    for (name, n) in [
        ("rx_ring", cfg.rx_ring),
        ("tx_ring", cfg.tx_ring),
        ("fill_ring", cfg.fill_ring),
        ("comp_ring", cfg.comp_ring),
    ] {
        if !n.is_power_of_two() || !(64..=32768).contains(&n) {
            return Err(invalid(format!(
                "{name} = {n}; accepted: a power of two in 64..=32768"
            )));
        }
    }
    if cfg.queue >= program::XSKMAP_ENTRIES {
        return Err(invalid(format!(
            "queue {} is out of range; accepted: 0..{}",
            cfg.queue,
            program::XSKMAP_ENTRIES
        )));
    }
    let ifindex = sys::if_index(&cfg.ifname).map_err(|e| AfXdpError::Socket {
        ifname: cfg.ifname.clone(),
        queue: cfg.queue,
        what: "if_nametoindex",
        source: e,
        hint: hint("no such interface in this network namespace"),
    })?;
    let attachment = program::attach(&cfg.ifname, cfg.mode)?;

    let mut flags = xsk::XDP_USE_NEED_WAKEUP;
    match (attachment.mode(), cfg.bind) {
        (XdpMode::Generic, BindMode::ZeroCopy) => {
            return Err(invalid(
                "zero-copy needs native XDP, but the program runs in generic mode".into(),
            ))
        }
        (XdpMode::Generic, _) | (_, BindMode::Copy) => flags |= xsk::XDP_COPY,
        (_, BindMode::ZeroCopy) => flags |= xsk::XDP_ZEROCOPY,
        (XdpMode::Native, BindMode::Auto) => {}
    }

    // Share a live socket's UMEM; if that fails (e.g. the first socket is zero-copy and this
    // device has none), register the region again: same memory, same addresses.
    let mut shared = false;
    let mut made = None;
    if let Some(owner) = umem.live_socket() {
        if let Ok(m) = create(umem, cfg, ifindex, flags, Some(&owner)) {
            shared = true;
            made = Some(m);
        }
    }
    let (fd, rings) = match made {
        Some(m) => m,
        None => create(umem, cfg, ifindex, flags, None)?,
    };
    // Let one sendto send the whole ring in copy mode. Kernels before 6.17 refuse and send at
    // most 32 frames per call; the receive half kicks leftovers on its next poll.
    let _ = xsk::set_tx_budget(&fd, cfg.tx_ring);
    let zerocopy = xsk::is_zerocopy(&fd).unwrap_or(false);
    let fd = Arc::new(fd);
    let core = Arc::new(SocketCore {
        fd: fd.clone(),
        attachment,
        ifname: cfg.ifname.clone(),
        queue: cfg.queue,
        zerocopy,
        shared_umem: shared,
        wakeup_errors: AtomicU64::new(0),
    });
    core.attachment.insert_socket(cfg.queue, &fd).map_err(|e| {
        core.err(
            "BPF_MAP_UPDATE_ELEM (XSKMAP)",
            e,
            "putting the socket at its queue index",
        )
    })?;
    umem.add_socket(&fd);
    Ok(OpenSocket {
        rx: rings.rx,
        fill: rings.fill,
        tx: rings.tx,
        comp: rings.comp,
        core,
    })
}

fn create(
    umem: &Umem,
    cfg: &AfXdpConfig,
    ifindex: u32,
    flags: u16,
    share: Option<&Arc<OwnedFd>>,
) -> Result<(OwnedFd, Rings), AfXdpError> {
    let err = |what: &'static str, e: io::Error, h: String| AfXdpError::Socket {
        ifname: cfg.ifname.clone(),
        queue: cfg.queue,
        what,
        source: e,
        hint: hint(&h),
    };
    let fd = xsk::socket().map_err(|e| {
        let h = match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => "the kernel has no AF_XDP (CONFIG_XDP_SOCKETS)",
            Some(libc::EPERM) | Some(libc::EACCES) => "needs root or CAP_NET_RAW",
            _ => "",
        };
        err("socket(AF_XDP)", e, h.into())
    })?;
    if share.is_none() {
        let reg = umem.registration();
        xsk::umem_register(&fd, &reg).map_err(|e| {
            let h = match e.raw_os_error() {
                Some(libc::EINVAL) => format!(
                    "is the pool region page-aligned, and its stride {} a chunk size the kernel \
                     takes (2048..=page size, or up to 64 KiB on hugepages)?",
                    reg.chunk_size
                ),
                Some(libc::ENOMEM) | Some(libc::ENOBUFS) => {
                    "locked-memory limit (RLIMIT_MEMLOCK) too low for the pool?".into()
                }
                Some(libc::EFAULT) => "the pool region is not mapped".into(),
                _ => String::new(),
            };
            err("XDP_UMEM_REG", e, h)
        })?;
    }
    let ring_err = |what, e: io::Error| {
        err(
            what,
            e,
            "ring sizes must be powers of two; the kernel may be short of memory".into(),
        )
    };
    xsk::set_ring_size(&fd, xsk::XDP_UMEM_FILL_RING, cfg.fill_ring)
        .map_err(|e| ring_err("XDP_UMEM_FILL_RING", e))?;
    xsk::set_ring_size(&fd, xsk::XDP_UMEM_COMPLETION_RING, cfg.comp_ring)
        .map_err(|e| ring_err("XDP_UMEM_COMPLETION_RING", e))?;
    xsk::set_ring_size(&fd, xsk::XDP_RX_RING, cfg.rx_ring)
        .map_err(|e| ring_err("XDP_RX_RING", e))?;
    xsk::set_ring_size(&fd, xsk::XDP_TX_RING, cfg.tx_ring)
        .map_err(|e| ring_err("XDP_TX_RING", e))?;
    let off = xsk::mmap_offsets(&fd).map_err(|e| {
        err(
            "getsockopt(XDP_MMAP_OFFSETS)",
            e,
            "kernel too old for need_wakeup (needs 5.4+)".into(),
        )
    })?;
    let map = |what: &'static str, pgoff: u64, len: usize| -> Result<Arc<Mmap>, AfXdpError> {
        xsk::map_ring(&fd, pgoff, len)
            .map(Arc::new)
            .map_err(|e| err(what, e, String::new()))
    };
    let bad = |what: &'static str, e: io::Error| err(what, e, String::new());
    let fill_map = map(
        "mmap(fill ring)",
        xsk::XDP_UMEM_PGOFF_FILL_RING,
        ring_bytes::<u64>(&off.fr, cfg.fill_ring),
    )?;
    let comp_map = map(
        "mmap(completion ring)",
        xsk::XDP_UMEM_PGOFF_COMPLETION_RING,
        ring_bytes::<u64>(&off.cr, cfg.comp_ring),
    )?;
    let rx_map = map(
        "mmap(rx ring)",
        xsk::XDP_PGOFF_RX_RING,
        ring_bytes::<XdpDesc>(&off.rx, cfg.rx_ring),
    )?;
    let tx_map = map(
        "mmap(tx ring)",
        xsk::XDP_PGOFF_TX_RING,
        ring_bytes::<XdpDesc>(&off.tx, cfg.tx_ring),
    )?;
    let rings = Rings {
        fill: ProdRing::new(fill_map, &off.fr, cfg.fill_ring).map_err(|e| bad("fill ring", e))?,
        comp: ConsRing::new(comp_map, &off.cr, cfg.comp_ring)
            .map_err(|e| bad("completion ring", e))?,
        rx: ConsRing::new(rx_map, &off.rx, cfg.rx_ring).map_err(|e| bad("rx ring", e))?,
        tx: ProdRing::new(tx_map, &off.tx, cfg.tx_ring).map_err(|e| bad("tx ring", e))?,
    };
    // Shared sockets take their copy/zero-copy and need_wakeup flags from the UMEM's owner.
    let bind_flags = if share.is_some() { 0 } else { flags };
    // Right after a crash the kernel releases the old socket's hold on the queue from a work
    // item: retry EBUSY briefly.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match xsk::bind(&fd, ifindex, cfg.queue, bind_flags, share.map(|s| &**s)) {
            Ok(()) => break,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                let h = match e.raw_os_error() {
                    Some(libc::EINVAL) => format!(
                        "does queue {} exist on {}? see `ethtool -l {}`",
                        cfg.queue, cfg.ifname, cfg.ifname
                    ),
                    Some(libc::EBUSY) => {
                        "another AF_XDP socket is bound to this queue (another vecplane?)".into()
                    }
                    Some(libc::EOPNOTSUPP) => "the driver has no zero-copy AF_XDP".into(),
                    Some(libc::ENODEV) => "the interface disappeared".into(),
                    _ => String::new(),
                };
                return Err(err("bind", e, h));
            }
        }
    }
    Ok((fd, rings))
}

/// Kernel drops that count as receive drops of the port: `rx_dropped` and `rx_ring_full`, plus
/// fill-ring-empty events in zero-copy mode (in copy mode the kernel already counts each of
/// those in `rx_dropped`).
pub(crate) fn kernel_rx_drops(s: &XdpStatistics, zerocopy: bool) -> u64 {
    s.rx_dropped
        + s.rx_ring_full
        + if zerocopy {
            s.rx_fill_ring_empty_descs
        } else {
            0
        }
}
