//! The whole port through its socket: a test frontend of ours (rust-vmm's `Frontend`) sets up
//! a fake guest's memory and rings like QEMU would, a worker thread runs the port's two nodes
//! as an echo (what the guest sends comes back to it), and malformed rings reset the
//! connection without harm; the next frontend is served again.

use super::*;
use crate::fake_guest::{FakeGuest, GPA, MEM, UVA};
use crate::port::{VhostRx, VhostTx};
use graph::{GraphBuilder, PortStats};
use packet::{BufferPool, PoolConfig};
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU32;
use std::time::Instant;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

static SEQ: AtomicU32 = AtomicU32::new(0);

fn socket_path() -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("vp-vhost-test-{}-{n}.sock", std::process::id()))
}

/// A worker thread running the port as an echo until dropped.
struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Echo {
    /// A one-pair port serving a fresh socket, and its echo.
    fn serving() -> (PathBuf, Echo) {
        let path = socket_path();
        let device = VhostUserDevice::open(&path, SocketMode::Server, 1).expect("open");
        (path, Echo::start(device))
    }

    fn start(device: VhostUserDevice) -> Echo {
        let device = Arc::new(device);
        let shared = device.shared().clone();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            let stats = Arc::new(PortStats::default());
            let mut b = GraphBuilder::new();
            b.add_input(Box::new(VhostRx::new(
                "vu-rx".into(),
                0,
                "vu-tx".into(),
                device.clone(),
                stats.clone(),
            )));
            b.add_node(Box::new(VhostTx::new("vu-tx".into(), device, stats)));
            let mut g = b.build(0, 1).expect("graph");
            let mut pool = BufferPool::new(PoolConfig {
                buffers: 1024,
                try_hugepages: false,
                ..PoolConfig::default()
            })
            .expect("pool");
            while !st.load(Ordering::Acquire) {
                g.run_once(&mut pool);
            }
        });
        Echo {
            stop,
            thread: Some(thread),
            shared,
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Set the device up as QEMU does: features, memory, both rings (guest rx = `rx`, guest tx =
/// `tx`), kicks, calls, enable. Split rings.
fn frontend(path: &Path, rx: &FakeGuest, tx: &FakeGuest) -> (Frontend, Vec<EventFd>) {
    frontend_with(path, false, rx, tx)
}

/// The same with packed rings (`packed`: every feature, bases on wrap counter 1 as DPDK's
/// virtio-user sends them) or split ones (every feature but VIRTIO_F_RING_PACKED).
fn frontend_with(
    path: &Path,
    packed: bool,
    rx: &FakeGuest,
    tx: &FakeGuest,
) -> (Frontend, Vec<EventFd>) {
    let mut f = Frontend::connect(path, 2).expect("connect");
    f.set_owner().expect("owner");
    let offered = f.get_features().expect("features");
    assert_eq!(offered, OFFERED_FEATURES);
    let (features, base) = if packed {
        (offered, crate::packed_ring::WRAP_BIT)
    } else {
        (offered & !VIRTIO_F_RING_PACKED, 0)
    };
    f.set_features(features).expect("set features");
    let proto = f.get_protocol_features().expect("protocol features");
    f.set_protocol_features(proto)
        .expect("set protocol features");
    let region = VhostUserMemoryRegionInfo {
        guest_phys_addr: GPA,
        memory_size: MEM,
        userspace_addr: UVA,
        mmap_offset: 0,
        mmap_handle: rx.file.as_raw_fd(),
    };
    f.set_mem_table(&[region]).expect("memory table");
    let mut fds = Vec::new();
    for (q, g) in [(0usize, rx), (1, tx)] {
        let (d, a, u) = g.ring_uvas();
        f.set_vring_num(q, g.size).expect("num");
        f.set_vring_base(q, base).expect("base");
        f.set_vring_addr(
            q,
            &VringConfigData {
                queue_max_size: g.size,
                queue_size: g.size,
                flags: 0,
                desc_table_addr: d,
                used_ring_addr: u,
                avail_ring_addr: a,
                log_addr: None,
            },
        )
        .expect("addr");
        let kick = EventFd::new(0).expect("eventfd");
        let call = EventFd::new(0).expect("eventfd");
        f.set_vring_kick(q, &kick).expect("kick");
        f.set_vring_call(q, &call).expect("call");
        f.set_vring_enable(q, true).expect("enable");
        fds.push(kick);
        fds.push(call);
    }
    (f, fds)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn with_header(frame: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 12];
    v.extend_from_slice(frame);
    v
}

/// Post receive buffers, send one frame, and check it came back whole.
fn echo_once(rx: &mut FakeGuest, tx: &mut FakeGuest, seed: u8) {
    let frame: Vec<u8> = (0..200u32).map(|i| (i as u8) ^ seed).collect();
    let head = rx.add_chain(&[2048], true, &[]);
    let before = rx.used_idx();
    tx.add_chain(&[212], false, &with_header(&frame));
    wait_for("the echo", || rx.used_idx() != before);
    let (id, len) = rx.used(before);
    assert_eq!((id, len), (u32::from(head), 212));
    assert_eq!(rx.buffer(head, 212)[12..], frame[..]);
}

#[test]
fn a_frontend_sets_up_the_device_and_frames_flow() {
    let (path, echo) = Echo::serving();
    let mut rx = FakeGuest::new(64);
    let mut tx = rx.another(1, 64);
    let (f, _fds) = frontend(&path, &rx, &tx);
    for seed in 0..5 {
        echo_once(&mut rx, &mut tx, seed);
    }
    assert_eq!(tx.used_idx(), 5);
    // GET_VRING_BASE stops a ring and reports where the worker left it.
    assert_eq!(f.get_vring_base(1).expect("base"), 5);
    assert_eq!(f.get_vring_base(0).expect("base"), 5);
    assert_eq!(echo.shared.counters.guest_errors.get(), 0);
    assert_eq!(echo.shared.counters.connections.get(), 1);
    drop(f);
    wait_for("the disconnect", || {
        !echo.shared.connected.load(Ordering::Acquire)
    });
    drop(echo);
    assert!(!path.exists(), "the socket file is removed with the port");
}

#[test]
fn a_frontend_sets_up_packed_rings_and_frames_flow() {
    use crate::fake_guest::PackedGuest;
    let path = socket_path();
    let device = VhostUserDevice::open(&path, SocketMode::Server, 1).expect("open");
    let echo = Echo::start(device);
    let mut rx = PackedGuest::new(64);
    let mut tx = PackedGuest::on(rx.g.another(1, 64));
    let (f, _fds) = frontend_with(&path, true, &rx.g, &tx.g);
    for seed in 0..5u8 {
        let frame: Vec<u8> = (0..200u32).map(|i| (i as u8) ^ seed).collect();
        let id = rx.add_chain(&[2048], true, &[]);
        tx.add_chain(&[212], false, &with_header(&frame));
        let mut used = None;
        wait_for("the echo", || {
            used = rx.take_used();
            used.is_some()
        });
        assert_eq!(used.map(|(i, len, _)| (i, len)), Some((id, 212)));
        assert_eq!(rx.g.buffer(u16::from(seed), 212)[12..], frame[..]);
        assert!(tx.take_used().is_some(), "the sent chain came back");
    }
    use graph::DriverCounters;
    let state = echo.shared.state().unwrap_or_default();
    assert!(state.contains("rings: packed (rx0 64, tx0 64)"), "{state}");
    // GET_VRING_BASE: slot 5 on wrap counter 1, the used side (upper half) alike.
    let base = 5 | 0x8000;
    assert_eq!(f.get_vring_base(1).expect("base"), base | base << 16);
    assert_eq!(f.get_vring_base(0).expect("base"), base | base << 16);
    assert_eq!(echo.shared.counters.guest_errors.get(), 0);
    drop(f);
    drop(echo);
}

/// A packed ring the guest breaks resets the connection like a split one, and the next
/// frontend (split rings this time) is served.
#[test]
fn a_malformed_packed_ring_resets_the_connection() {
    use crate::fake_guest::PackedGuest;
    let path = socket_path();
    let device = VhostUserDevice::open(&path, SocketMode::Server, 1).expect("open");
    let echo = Echo::start(device);
    let rx = PackedGuest::new(64);
    let mut tx = PackedGuest::on(rx.g.another(1, 64));
    let (f, _fds) = frontend_with(&path, true, &rx.g, &tx.g);
    // A chain whose second descriptor is marked for the next lap.
    let avail = PackedGuest::avail_flags(true);
    let next_lap = PackedGuest::avail_flags(false);
    tx.set_desc(1, tx.g.buffer_gpa(1), 64, 0, next_lap);
    tx.set_desc(0, tx.g.buffer_gpa(0), 64, 0, avail | 1);
    tx.next = 2;
    wait_for("the reset", || {
        echo.shared.counters.guest_errors.get() == 1
            && !echo.shared.connected.load(Ordering::Acquire)
    });
    assert!(
        echo.shared
            .last_error()
            .contains("not available for wrap counter"),
        "{}",
        echo.shared.last_error()
    );
    drop(f);
    let mut rx = FakeGuest::new(64);
    let mut tx = rx.another(1, 64);
    let (_f, _fds) = frontend(&path, &rx, &tx);
    echo_once(&mut rx, &mut tx, 1);
    assert_eq!(echo.shared.counters.connections.get(), 2);
}

/// SET_VRING_BASE of a packed ring as QEMU sends it (used slot and wrap counter in the upper
/// half) and as DPDK does (upper half 0); a split ring's base must fit 16 bits.
#[test]
fn packed_vring_bases_carry_wrap_counters() {
    let mut d = Device::new(Arc::new(Shared::default()), "test".into(), 1, 1);
    d.set_features(OFFERED_FEATURES).expect("features");
    d.set_vring_num(0, 100).expect("any size for packed rings");
    for (sent, kept) in [
        (0x8000_8000u32, 0x8000u16),
        (0x8000, 0x8000),
        (0x0007_0007, 7),
    ] {
        d.set_vring_base(0, sent).expect("base");
        assert_eq!(d.queues[0].base, kept);
        let back = d.get_vring_base(0).expect("base").num;
        assert_eq!(back, u32::from(kept) | u32::from(kept) << 16);
    }
    d.set_features(OFFERED_FEATURES & !VIRTIO_F_RING_PACKED)
        .expect("features");
    assert!(d.set_vring_base(0, 0x1_0000).is_err());
    assert!(d.set_vring_num(0, 100).is_err(), "split: a power of two");
}

/// A receive queue moves only once every worker let go of it; a worker that does not keeps it
/// (and its place in the ring), and the move is refused by name.
#[test]
fn a_move_waits_for_the_workers_and_backs_out_when_one_stalls() {
    use crate::device::guest_tx;
    let shared = Arc::new(Shared::default());
    let mut d = Device::new(shared.clone(), "test".into(), 2, 2);
    assert_eq!(d.rx_workers[..2], [0, 1], "round-robin to begin with");
    // No queue runs and no worker listens: the placement just changes.
    assert_eq!(d.move_rx(1, 0), Ok(()));
    assert_eq!(d.rx_workers[1], 0);
    assert!(d.move_rx(2, 0).unwrap_err().contains("accepted: 0 to 1"));
    // A worker that never acknowledges, with pair 1 running.
    let _stalled = shared.register_acker();
    d.queues[guest_tx(1)].running = Some(5);
    let e = d.move_rx(1, 1).unwrap_err();
    assert!(e.contains("stays on worker 0"), "{e}");
    assert_eq!(d.rx_workers[1], 0);
    assert_eq!(
        d.queues[guest_tx(1)].running,
        Some(5),
        "same start: same place"
    );
}

/// How a guest may break its transmit ring.
fn break_ring(tx: &mut FakeGuest, how: &str) {
    match how {
        "loop" => {
            tx.set_desc(10, tx.buffer_gpa(10), 64, 1, 11);
            tx.set_desc(11, tx.buffer_gpa(11), 64, 1, 10);
            tx.push_avail(10);
            tx.publish_avail(tx.avail_idx);
        }
        "out of range" => {
            tx.set_desc(10, GPA + MEM - 16, 64, 0, 0);
            tx.push_avail(10);
            tx.publish_avail(tx.avail_idx);
        }
        "index jump" => tx.publish_avail(tx.avail_idx.wrapping_add(1000)),
        "head past the table" => {
            tx.push_avail(4000);
            tx.publish_avail(tx.avail_idx);
        }
        "too many buffers" => {
            for i in 0..63 {
                tx.set_desc(i, tx.buffer_gpa(i), 1, 1, i + 1);
            }
            tx.set_desc(63, tx.buffer_gpa(63), 1, 0, 0);
            tx.set_desc(64, tx.buffer_gpa(64), 1, 0, 0);
            tx.set_desc(63, tx.buffer_gpa(63), 1, 1, 64);
            tx.push_avail(0);
            tx.publish_avail(tx.avail_idx);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn malformed_rings_reset_the_connection_and_the_next_frontend_is_served() {
    let (path, echo) = Echo::serving();
    let cases = [
        ("loop", "a loop"),
        ("out of range", "outside the guest's memory"),
        ("index jump", "jumped"),
        ("head past the table", "past the ring"),
        ("too many buffers", "more than"),
    ];
    for (k, (how, message)) in cases.iter().enumerate() {
        let mut rx = FakeGuest::new(128);
        let mut tx = rx.another(1, 128);
        let (f, _fds) = frontend(&path, &rx, &tx);
        echo_once(&mut rx, &mut tx, k as u8);
        break_ring(&mut tx, how);
        wait_for("the reset", || {
            echo.shared.counters.guest_errors.get() == k as u64 + 1
                && !echo.shared.connected.load(Ordering::Acquire)
        });
        assert!(
            echo.shared.last_error().contains(message),
            "{how}: {}",
            echo.shared.last_error()
        );
        drop(f);
    }
    // Zero-length and oversized frames are dropped and counted, not errors.
    let mut rx = FakeGuest::new(128);
    let mut tx = rx.another(1, 128);
    let (_f, _fds) = frontend(&path, &rx, &tx);
    tx.add_chain(&[0], false, &[]);
    // Longer than the 64 KiB any buffer holds.
    tx.add_chain(&[4096; 17], false, &[0u8; 4096 * 17]);
    echo_once(&mut rx, &mut tx, 99);
    assert_eq!(echo.shared.counters.rx_bad_frames.get(), 2);
    assert_eq!(echo.shared.counters.guest_errors.get(), cases.len() as u64);
    assert_eq!(
        echo.shared.counters.connections.get(),
        cases.len() as u64 + 1
    );
}

#[test]
fn a_frontend_shrinking_guest_memory_resets_its_connection_not_the_process() {
    let (path, echo) = Echo::serving();
    let mut rx = FakeGuest::new(64);
    let mut tx = rx.another(1, 64);
    let (f, _fds) = frontend(&path, &rx, &tx);
    echo_once(&mut rx, &mut tx, 1);
    // A frontend truncates the memory file under the worker, which polls the rings in it:
    // SIGBUS there is answered with zero pages, and the connection is reset.
    rx.file.set_len(0).expect("shrink the guest memory file");
    wait_for("the reset", || {
        echo.shared.counters.memory_shrunk.get() == 1
            && !echo.shared.connected.load(Ordering::Acquire)
    });
    assert!(
        echo.shared.last_error().contains("shrank"),
        "{}",
        echo.shared.last_error()
    );
    drop(f);
    // The test's own view of the old memory is gone too: drop it unread.
    drop((rx, tx));
    // The next frontend is served as usual.
    let mut rx = FakeGuest::new(64);
    let mut tx = rx.another(1, 64);
    let (_f, _fds) = frontend(&path, &rx, &tx);
    echo_once(&mut rx, &mut tx, 2);
    assert_eq!(echo.shared.counters.connections.get(), 2);
}

/// One raw vhost-user message (version 1, `flags` more) and, if `reply`, the reply's header and
/// u64 payload.
fn raw_request(
    s: &mut std::os::unix::net::UnixStream,
    request: u32,
    flags: u32,
    body: &[u8],
    reply: bool,
) -> Option<([u32; 3], u64)> {
    use std::io::{Read, Write};
    let mut m = Vec::new();
    for w in [request, 1 | flags, body.len() as u32] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m.extend_from_slice(body);
    s.write_all(&m).expect("send");
    if !reply {
        return None;
    }
    let mut r = [0u8; 20];
    s.read_exact(&mut r).ok()?;
    let w = |at: usize| u32::from_le_bytes(r[at..at + 4].try_into().expect("4 bytes"));
    let v = u64::from_le_bytes(r[12..20].try_into().expect("8 bytes"));
    Some(([w(0), w(4), w(8)], v))
}

/// QEMU's virtio-net enables the rings when the guest's driver sets its features, before
/// SET_FEATURES: the connection stays up, the request is acknowledged when asked, and the
/// frontend goes on.
#[test]
fn a_vring_enable_before_set_features_keeps_the_connection() {
    let path = socket_path();
    let device = VhostUserDevice::open(&path, SocketMode::Server, 1).expect("open");
    let mut s = std::os::unix::net::UnixStream::connect(&path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    const GET_FEATURES: u32 = 1;
    let (hdr, features) = raw_request(&mut s, GET_FEATURES, 0, &[], true).expect("features");
    assert_eq!(hdr, [GET_FEATURES, 1 | 4, 8]);
    assert_eq!(features, OFFERED_FEATURES);
    let mut state = Vec::new();
    state.extend_from_slice(&0u32.to_le_bytes());
    state.extend_from_slice(&1u32.to_le_bytes());
    // Without a reply wanted, then with one (REPLY_ACK's NEED_REPLY flag).
    raw_request(&mut s, REQ_SET_VRING_ENABLE, 0, &state, false);
    let acked = raw_request(&mut s, REQ_SET_VRING_ENABLE, MSG_NEED_REPLY, &state, true);
    assert_eq!(acked, Some(([REQ_SET_VRING_ENABLE, 1 | 4, 8], 0)));
    // A bad value is refused, not fatal.
    state[4] = 7;
    let refused = raw_request(&mut s, REQ_SET_VRING_ENABLE, MSG_NEED_REPLY, &state, true);
    assert_eq!(refused, Some(([REQ_SET_VRING_ENABLE, 1 | 4, 8], 1)));
    let again = raw_request(&mut s, GET_FEATURES, 0, &[], true);
    assert_eq!(again.map(|(_, f)| f), Some(OFFERED_FEATURES));
    assert_eq!(device.shared().counters.connections.get(), 1);
    drop(s);
    drop(device);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_frontend_stuck_in_the_middle_of_a_message_does_not_hold_the_port() {
    use std::io::Write;
    let path = socket_path();
    let device = VhostUserDevice::open(&path, SocketMode::Server, 1).expect("open");
    let shared = device.shared().clone();
    let mut s = std::os::unix::net::UnixStream::connect(&path).expect("connect");
    // Four bytes of a twelve-byte header, then nothing.
    s.write_all(&[1, 0, 0, 0]).expect("write");
    wait_for("the connection", || {
        shared.connected.load(Ordering::Acquire)
    });
    // The control thread now waits for the rest of the header; closing the port ends that.
    std::thread::sleep(Duration::from_millis(300));
    assert!(shared.connected.load(Ordering::Acquire));
    let t = Instant::now();
    drop(device);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(!shared.connected.load(Ordering::Acquire));
    drop(s);
}
