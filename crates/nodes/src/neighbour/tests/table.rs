//! The table itself against a map model, and the neighbour nodes in a real graph.

use super::*;

proptest! {
    #[test]
    fn table_matches_a_map_through_inserts_and_deletes(ops in proptest::collection::vec((any::<bool>(), 0u16..3, 0u32..40), 1..400)) {
        let mut t: Table<u32> = Table::new(16);
        let mut model: HashMap<(u16, u32), u16> = HashMap::new();
        let adj = Adjacency::new(0, 1500, [0; 6], [0; 6]);
        for (insert, port, ip) in ops {
            let found = t.find(port, ip);
            prop_assert_eq!(found, model.get(&(port, ip)).copied());
            match (insert, found) {
                (true, None) => {
                    let r = t.insert(port, ip, adj, 1);
                    if model.len() < 16 {
                        let s = r.expect("room");
                        model.insert((port, ip), s);
                    } else {
                        prop_assert!(r.is_none());
                    }
                }
                (false, Some(s)) => {
                    let old = t.id(s);
                    t.remove(s);
                    model.remove(&(port, ip));
                    prop_assert!(t.slot_of(old).is_none());
                }
                _ => {}
            }
            prop_assert_eq!(t.len(), model.len());
            for (&(p, a), &s) in &model {
                prop_assert_eq!(t.find(p, a), Some(s));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// In a real graph

type Shared<T> = Arc<Mutex<T>>;

struct Inject {
    frames: Shared<VecDeque<(u16, u16, Vec<u8>)>>,
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        "inject"
    }
    fn next_nodes(&self) -> Vec<String> {
        [ARP_INPUT, IP6_ND, IP4_ARP].map(String::from).to_vec()
    }
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut q = self.frames.lock().expect("lock");
        let mut n = 0;
        while let Some((port, next, f)) = q.pop_front() {
            let b = cx.pool.alloc().expect("buffer");
            cx.pool.write_packet(b, &f);
            let m = cx.pool.meta_mut(b);
            m.rx_port = 0;
            m.l3_offset = 14;
            if next == 2 {
                // As ip4-lookup sends a packet to a connected host without an entry.
                m.tx_port = port;
                m.next_scratch = GLEAN;
            } else {
                m.rx_port = port;
            }
            out[n] = b;
            nexts[n] = next;
            n += 1;
        }
        (n, Dispatch::PerPacket)
    }
    fn is_finished(&self) -> bool {
        self.frames.lock().expect("lock").is_empty()
    }
}

/// Stands in for `interface-output`: records (tx port, frame).
struct Wire(Shared<Vec<(u16, Vec<u8>)>>);

impl Node for Wire {
    fn name(&self) -> &str {
        names::INTERFACE_OUTPUT
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut w = self.0.lock().expect("lock");
        for &b in frame {
            w.push((cx.pool.meta(b).tx_port, cx.pool.data(b).to_vec()));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

/// Stands in for `ip4-rewrite`/`ip6-rewrite` with the neighbour part the lead adds: a neighbour
/// adjacency id becomes the entry's MACs, or goes to the resolution node.
struct Rewrite {
    name: &'static str,
    neighbours: NeighbourHandle,
}

impl Node for Rewrite {
    fn name(&self) -> &str {
        self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        let resolve = if self.name == names::IP4_REWRITE {
            IP4_ARP
        } else {
            IP6_DISCOVER
        };
        [names::INTERFACE_OUTPUT, resolve]
            .map(String::from)
            .to_vec()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let v4 = self.name == names::IP4_REWRITE;
        let now = cx.now_tsc;
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                let (m, d) = cx.pool.packet_mut(b);
                let id = m.next_scratch;
                let adj = if v4 {
                    n.adjacency4(id, now)
                } else {
                    n.adjacency6(id, now)
                };
                nexts[i] = match adj {
                    Some(a) => {
                        d[..12].copy_from_slice(&a.macs);
                        m.tx_port = a.port;
                        0
                    }
                    None => 1,
                };
            }
        });
        Dispatch::PerPacket
    }
}

#[test]
fn in_a_graph_arp_is_answered_and_a_packet_is_resolved_and_forwarded() {
    let n = NeighbourHandle::new(&config(), 2_596_000_000);
    let frames: Shared<VecDeque<(u16, u16, Vec<u8>)>> = Arc::default();
    let wire: Shared<Vec<(u16, Vec<u8>)>> = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        frames: frames.clone(),
    }));
    let (nodes, tx) = n.nodes();
    for node in nodes {
        b.add_node(node);
    }
    b.add_input(tx);
    b.add_node(Box::new(Wire(wire.clone())));
    b.add_node(Box::new(ErrorDrop::new()));
    for name in [names::IP4_REWRITE, names::IP6_REWRITE] {
        b.add_node(Box::new(Rewrite {
            name,
            neighbours: n.clone(),
        }));
    }
    let mut g = b.build(0, 2_596_000_000).expect("graph");
    let mut pool = pool(256);
    let run = |g: &mut graph::Graph, pool: &mut BufferPool| {
        for _ in 0..100 {
            if g.is_finished() {
                break;
            }
            g.run_once(pool);
        }
    };

    let data = udp4_to("198.18.2.77");
    {
        let mut q = frames.lock().expect("lock");
        q.push_back((
            0,
            0,
            arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1"),
        ));
        q.push_back((0, 1, ns_for_us(255)));
        q.push_back((1, 2, data.clone()));
    }
    run(&mut g, &mut pool);
    let out = std::mem::take(&mut *wire.lock().expect("lock"));
    assert_eq!(out.len(), 3, "ARP reply, NA, ARP request");
    let arp_reply = out.iter().find(|(_, f)| f[12..14] == [8, 6] && f[21] == 2);
    assert_eq!(arp_reply.map(|o| o.0), Some(0));
    let na = out.iter().find(|(_, f)| f[12..14] == [0x86, 0xdd]);
    assert_eq!(na.map(|(p, f)| (*p, f[14 + 40])), Some((0, 136)));
    let request = out.iter().find(|(_, f)| f[0..6] == [0xff; 6]);
    assert_eq!(request.map(|(p, f)| (*p, f[21])), Some((1, 1)));

    frames.lock().expect("lock").push_back((
        1,
        0,
        arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1"),
    ));
    run(&mut g, &mut pool);
    let out = std::mem::take(&mut *wire.lock().expect("lock"));
    assert_eq!(out.len(), 1, "the queued packet");
    assert_eq!(out[0].0, 1);
    assert_eq!(&out[0].1[0..12], &[HOST, MAC1].concat()[..]);
    assert_eq!(&out[0].1[12..], &data[12..]);
    let s = g.stats();
    let learned = s.error_id(ARP_INPUT, "learned").expect("reason");
    assert_eq!(s.errors[learned].get(), 1);
    assert_eq!(s.total_drops(), 1, "only the consumed reply");
    n.flush(&mut pool);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn timers_changed_live_apply_at_the_next_maintenance() {
    let mut t = Bench::new();
    let timers = Arc::new(NeighbourTimers::new(30, 300));
    t.n.with(|n| n.set_timers(timers.clone()));
    learn_host(&mut t);
    // Reachable for 5 s from now on, deleted 60 s after the last confirmation.
    timers.set(5, 60);
    t.now = T0 + 2 * HZ;
    let now = t.now;
    t.n.with(|n| n.maintain(&mut t.pool, now));
    t.now = T0 + 6 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Stale
    );
    t.now = T0 + 61 * HZ;
    t.sweep_all();
    assert!(t.rows().is_empty(), "deleted after the new gc time");
    assert_eq!(t.stats().aged, 1);
    t.assert_no_leak();
}
