//! The sequence an `lb4`/`lb6` node runs for one vector, with the part-B pieces only (plain
//! `u32` VIP ids and AS slots, a fixed server list standing in for Maglev): parse, key, batched
//! flow-table lookup, insert on a miss (refused -> plain hashing), encapsulation, live counts,
//! sweep. It documents the calling contract and checks that a flow keeps its server.

use lb::encap;
use lb::flowtable::{class_of, flow_key, touch_for, worker_tables, AsRef};
use lb::parse::parse;
use lb::stable_hash;
use packet::checksum::checksum;
use packet::BufferMeta;
use session::{Insert, SessionTable, BATCH};

const SERVERS: [[u8; 4]; 3] = [[198, 18, 2, 1], [198, 18, 2, 2], [198, 18, 2, 3]];

/// A UDP packet from client port `sport` to the VIP 198.18.1.1:53 in an Ethernet frame.
fn frame(sport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 4];
    f[12] = 0x08;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&32u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 1, 1]);
    let c = checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f[38..40].copy_from_slice(&12u16.to_be_bytes()); // checksum 0: none
    f
}

struct Buffer {
    meta: BufferMeta,
    slot: Vec<u8>,
}

fn buffer(f: &[u8]) -> Buffer {
    let mut slot = vec![0u8; 128];
    slot.extend_from_slice(f);
    slot.resize(2048, 0);
    let meta = BufferMeta {
        data_offset: 128,
        length: f.len() as u16,
        l3_offset: 14,
        ..BufferMeta::default()
    };
    Buffer { meta, slot }
}

/// One vector through the node; returns each packet's server (None: dropped).
fn run_vector(t: &mut SessionTable<AsRef>, bufs: &mut [Buffer], now: u32) -> Vec<Option<[u8; 4]>> {
    const VIP: u32 = 0;
    let n = bufs.len().min(BATCH);
    let mut hashes = Vec::with_capacity(n); // a node keeps these arrays in its state
    let mut touch = Vec::with_capacity(n);
    let mut parsed = Vec::with_capacity(n);
    for b in &bufs[..n] {
        let start = usize::from(b.meta.data_offset);
        let l3 = &b.slot[start + usize::from(b.meta.l3_offset)..start + usize::from(b.meta.length)];
        let p = parse(l3, false).expect("test packets are well formed");
        // (the node finds the VIP by p.tuple in the snapshot here)
        let h = t.hash(&flow_key(VIP, &p.tuple));
        t.prefetch(h);
        hashes.push(h);
        touch.push(touch_for(p.kind));
        parsed.push(p);
    }
    let mut out = vec![None; n];
    t.lookup_batch(&hashes, &touch, now, &mut out);
    let mut servers = Vec::with_capacity(n);
    for i in 0..n {
        let p = &parsed[i];
        let slot = match out[i] {
            Some(a) => a.slot, // (the node checks flow_still_valid / usable_for_syn here)
            None => {
                // Maglev stands in: the stable hash picks the server.
                let s = stable_hash(&p.tuple, false) % SERVERS.len() as u32;
                let class = class_of(p.tuple.protocol);
                let r = t.insert(hashes[i], AsRef { slot: s, gen: 0 }, class, now);
                assert_ne!(r, Insert::Full, "plenty of room in this test");
                s
            }
        };
        let server = SERVERS[slot as usize];
        let b = &mut bufs[i];
        encap::l3dsr(&b.meta, &mut b.slot, p, server, 23).expect("l3dsr");
        servers.push(Some(server));
    }
    servers
}

#[test]
fn a_flow_keeps_its_server_and_counts_follow_expiry() {
    // 3072 entries: 1024 buckets.
    let (mut t, _nat) = worker_tables(3072, 1, 3).expect("tables");
    let counts = t.counts(); // the control plane keeps this Arc and reads it racily
    let mut first = Vec::new();
    for round in 0..3u32 {
        let mut bufs: Vec<Buffer> = (0..200).map(|i| buffer(&frame(10_000 + i))).collect();
        let got = run_vector(&mut t, &mut bufs, 100 + round);
        for b in &bufs {
            let s = usize::from(b.meta.data_offset) + 14;
            assert_eq!(checksum(&b.slot[s..s + 20]), 0, "IPv4 header checksum");
            assert_eq!(b.slot[s + 1], 23 << 2, "DSCP");
        }
        if round == 0 {
            first = got;
        } else {
            assert_eq!(got, first, "round {round}: every flow kept its server");
        }
    }
    assert_eq!(counts.total(), 200);
    assert_eq!((0..3).map(|s| counts.bin(s)).sum::<u32>(), 200);
    // Long after the timeout, one sweep round (buckets / budget calls) uncounts them all.
    for _ in 0..1024 / 64 {
        t.sweep(1000, 64, |_| true);
    }
    assert_eq!((counts.total(), counts.group(0)), (0, 0));
}
