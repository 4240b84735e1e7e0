//! The probe host end to end through a real data plane (root): its private namespace's kernel
//! sends a UDP probe from a leased band port to a VIP, the `lb` node wraps it (L3DSR) for the
//! leased server whatever Maglev would choose, and the server's reply (replayed from a pcap
//! file) comes back through `probe-reply` and the TAP to the probing socket.

use dataplane::probe_host::ProbeHost;
use dataplane::{Dataplane, DataplaneSpec, LbSpec, NeighbourSpec, PortDriver, PortSpec};
use lb::health::ProbeSources;
use lb::model::LbState;
use lb::probe::PROBE_PORT_BASE;
use packet::checksum;
use ports::{PcapReader, PcapWriter};
use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

const PROBE_SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 12, 1);
const VIP: [u8; 4] = [198, 18, 100, 1];
const SERVERS: [[u8; 4]; 3] = [[198, 18, 12, 11], [198, 18, 12, 12], [198, 18, 12, 13]];
const PORT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x11];

fn lb_state() -> LbState {
    let lines = "lb vip 198.18.100.1/32 protocol udp port 53 encap l3dsr dscp 23 new_len 1024\n\
                 lb as 198.18.100.1/32 protocol udp port 53 198.18.12.11 198.18.12.12 198.18.12.13\n";
    let cmds = lb::cli::parse_lines(lines).expect("lines");
    LbState::new().apply(&cmds).expect("apply")
}

/// The server's reply: VIP:53 -> probe source:band port, UDP with a valid checksum.
fn reply_frame(dport: u16, payload: &[u8]) -> Vec<u8> {
    let ulen = 8 + payload.len();
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&((20 + ulen) as u16).to_be_bytes());
    ip.extend_from_slice(&VIP);
    ip.extend_from_slice(&PROBE_SRC.octets());
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut udp = vec![0, 53];
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&(ulen as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let ph = checksum::pseudo_header_v4(VIP, PROBE_SRC.octets(), 17, ulen as u16);
    let c = !checksum::fold(checksum::sum(ph, &udp));
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = PORT_MAC.to_vec();
    f.extend_from_slice(&SERVER_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

fn frames(path: &Path) -> Vec<Vec<u8>> {
    let Ok(mut r) = PcapReader::open(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(Some(rec)) = r.next_record(&mut buf) {
        out.push(buf[..rec.caplen].to_vec());
    }
    out
}

#[test]
fn a_probe_reaches_its_leased_server_wrapped_and_the_reply_reaches_the_socket() {
    if !ports::netns::may_create() {
        testenv::skip("the probe host needs root (a network namespace and a TAP)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vecplane-probe-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let (rx, tx) = (dir.join("reply.pcap"), dir.join("out.pcap"));
    let band = PROBE_PORT_BASE + 3;
    {
        let mut w = PcapWriter::create(&rx).expect("reply pcap");
        let f = reply_frame(band, b"pong");
        w.write_record(0, &f, f.len() as u32).expect("write");
    }
    let host = ProbeHost::create().expect("probe host");
    let mut spec = DataplaneSpec {
        buffers: 1024,
        ..DataplaneSpec::default()
    };
    spec.ports.push(PortSpec {
        name: "srv".into(),
        mac: PORT_MAC,
        mtu: 1500,
        ip4: vec![(PROBE_SRC, 24)],
        ip6: Vec::new(),
        driver: PortDriver::Pcap {
            rx: Some(rx.clone()),
            tx: Some(tx.clone()),
        },
    });
    for s in SERVERS {
        spec.neighbours.push(NeighbourSpec {
            ip: Ipv4Addr::from(s).into(),
            mac: SERVER_MAC,
            port: 0,
        });
    }
    spec.lb = Some(LbSpec {
        state: lb_state(),
        ..LbSpec::default()
    });
    spec.ports.push(host.port_spec());
    let dp = Dataplane::new(&spec).expect("data plane");
    host.configure(&ProbeSources {
        ip4: Some(PROBE_SRC),
        ip6: None,
    })
    .expect("configure the probe namespace");
    // Lease the band port to the last server: Maglev would spread, the lease must not.
    let lb = dp.view().lb.clone();
    let slot = lb.with_tables(|t| {
        t.vips()
            .flat_map(|v| v.slots.clone())
            .find(|&s| t.as_entry(s).addr == Ipv4Addr::from(SERVERS[2]))
            .expect("slot")
    });
    assert!(host.leases().lease(band, slot));
    let socket = ports::netns::run_in(host.netns(), || {
        UdpSocket::bind((PROBE_SRC, band)).expect("bind the probe socket in the namespace")
    })
    .expect("enter the namespace");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let stats = dp.view().ports.get()[0].stats.clone();
    let running = dp.start();
    let mut got = None;
    // The reply is replayed from its pcap whatever is sent: wait for it and for a probe to
    // have left on the server port (a loaded machine may poll the TAP after the reply came).
    let sent = || -> u64 { stats.iter().map(|s| s.tx_packets.get()).sum() };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 64];
    while (got.is_none() || sent() == 0) && Instant::now() < deadline {
        socket
            .send_to(b"ping", (Ipv4Addr::from(VIP), 53))
            .expect("send the probe");
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            got = Some((buf[..n].to_vec(), from));
        }
    }
    running.stop();
    let out = frames(&tx);
    let _ = std::fs::remove_dir_all(&dir);
    let probes: Vec<&Vec<u8>> = out
        .iter()
        .filter(|f| f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 17)
        .filter(|f| u16::from_be_bytes([f[34], f[35]]) == band)
        .collect();
    assert!(!probes.is_empty(), "no probe left the data path: {out:?}");
    for f in &probes {
        assert_eq!(&f[30..34], &SERVERS[2], "the leased server");
        assert_eq!(f[15] >> 2, 23, "L3DSR DSCP");
        assert_eq!(&f[26..30], &PROBE_SRC.octets(), "from the probe source");
        assert_eq!(&f[0..6], &SERVER_MAC);
    }
    let (payload, from) = got.expect("the reply reached the probing socket");
    assert_eq!(payload, b"pong");
    assert_eq!(from, (Ipv4Addr::from(VIP), 53).into());
}
