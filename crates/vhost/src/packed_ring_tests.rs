//! Unit tests of the packed ring against `PackedGuest`, a driver playing by the spec (and
//! breaking it on purpose).

use super::*;
use crate::fake_guest::{PackedGuest, GPA, MEM, P_AVAIL, P_NEXT, P_USED, P_WRITE};

fn segs() -> Box<[Segment; MAX_SEGMENTS]> {
    Box::new(
        [Segment {
            ptr: std::ptr::null_mut(),
            len: 0,
        }; MAX_SEGMENTS],
    )
}

/// Take the next chain, which must be there.
fn take(r: &mut PackedRing) -> PackedHead {
    r.take_one().expect("well formed").expect("available")
}

#[test]
fn a_chain_is_read_and_returned_with_its_flags_published_last() {
    let mut g = PackedGuest::new(8);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    assert_eq!(
        g.device_event().1,
        EVENT_FLAGS_DISABLE,
        "kicks are not wanted"
    );
    assert_eq!(r.take_one(), Ok(None), "nothing available yet");
    let data: Vec<u8> = (0..72).collect();
    let id = g.add_chain(&[12, 60], false, &data);
    let head = take(&mut r);
    assert_eq!(
        head,
        PackedHead {
            slot: 0,
            wrap: true,
            count: 2,
            id
        }
    );
    assert_eq!(r.take_one(), Ok(None));
    let mut s = segs();
    assert_eq!(r.chain(&g.g.mem, head, &mut s), Ok((2, 72)));
    assert_eq!(r.single(&g.g.mem, head), Ok(None), "two buffers");
    // SAFETY: the segments point into the fake guest's memory, 12 and 60 bytes long.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(s[0].ptr, 12).to_vec(),
            std::slice::from_raw_parts(s[1].ptr, 60).to_vec(),
        )
    };
    assert_eq!([a, b].concat(), data);
    r.push_used(head, 0);
    assert_eq!(g.take_used(), None, "not visible before publish");
    assert!(r.publish(), "the driver did not suppress interrupts");
    assert_eq!(g.take_used(), Some((id, 0, P_AVAIL | P_USED)));
    assert_eq!(r.last_avail(), 2 | WRAP_BIT);
    assert!(!r.publish(), "nothing new, nothing to tell");
}

#[test]
fn a_batch_becomes_visible_at_once_and_unused_chains_go_back() {
    let mut g = PackedGuest::new(8);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Write);
    let ids: Vec<u16> = (0..4).map(|_| g.add_chain(&[2048], true, &[])).collect();
    let mut heads = [PackedHead::default(); 8];
    assert_eq!(r.take_heads(&mut heads), Ok(4));
    for h in &heads[..3] {
        assert!(r.single(&g.g.mem, *h).expect("single").is_some());
        r.push_used(*h, 100 + u32::from(h.id));
    }
    // The fourth is given back, and taken again later.
    r.rewind(&heads[3..4]);
    assert_eq!(
        g.take_used(),
        None,
        "the first used descriptor's flags come last"
    );
    assert!(r.publish());
    for &id in &ids[..3] {
        assert_eq!(
            g.take_used(),
            Some((id, 100 + u32::from(id), P_AVAIL | P_USED | P_WRITE))
        );
    }
    assert_eq!(g.take_used(), None);
    assert_eq!(take(&mut r), heads[3]);
}

#[test]
fn wrap_counters_flip_over_several_laps() {
    // A ring of 5 (packed rings need not be powers of two) and chains of 1 to 3 descriptors,
    // so chains straddle the end of the ring.
    let mut g = PackedGuest::new(5);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    let mut s = segs();
    let mut laps_seen = 0;
    let mut last_wrap = true;
    for round in 0..40u32 {
        let lens: Vec<u32> = (0..1 + round % 3).map(|k| 10 + k).collect();
        let total: u32 = lens.iter().sum();
        let data = vec![round as u8; total as usize];
        let id = g.add_chain(&lens, false, &data);
        let head = take(&mut r);
        assert_eq!(head.id, id, "round {round}");
        let (n, len) = r.chain(&g.g.mem, head, &mut s).expect("chain");
        assert_eq!((n, len), (lens.len(), u64::from(total)));
        for seg in &s[..n] {
            // SAFETY: a translated segment of the fake guest's memory.
            let got = unsafe { std::slice::from_raw_parts(seg.ptr, seg.len as usize) };
            assert!(got.iter().all(|&b| b == round as u8), "round {round}");
        }
        r.push_used(head, 0);
        assert!(r.publish());
        let (uid, _, flags) = g.take_used().expect("used");
        assert_eq!(uid, id);
        let wrap = flags & P_AVAIL != 0;
        assert_eq!(wrap, flags & P_USED != 0, "used: both bits alike");
        if wrap != last_wrap {
            laps_seen += 1;
            last_wrap = wrap;
        }
        assert_eq!(r.last_avail() & !WRAP_BIT, g.next);
        assert_eq!(r.last_avail() & WRAP_BIT != 0, g.wrap);
    }
    assert!(laps_seen >= 10, "{laps_seen} laps");
}

#[test]
fn a_ring_restarts_where_the_vring_base_says() {
    // Slot 3 on the lap with wrap counter 0.
    let mut g = PackedGuest::new(8);
    g.next = 3;
    g.wrap = false;
    let id = g.add_chain(&[64], false, &[1; 64]);
    let mut r = PackedRing::new(g.layout(), 3, false, Direction::Read);
    let head = take(&mut r);
    assert_eq!((head.slot, head.wrap, head.id), (3, false, id));
    // A device starting on the other lap does not see it.
    let mut other = PackedRing::new(g.layout(), 3 | WRAP_BIT, false, Direction::Read);
    assert_eq!(other.take_one(), Ok(None));
    r.push_used(head, 0);
    r.publish();
    let (_, _, _, flags) = g.desc(3);
    assert_eq!(
        flags & (P_AVAIL | P_USED),
        0,
        "used on lap 0: both bits clear"
    );
}

#[test]
fn malformed_rings_are_errors_never_reads_outside() {
    let mut s = segs();
    let g = PackedGuest::new(8);
    let avail = PackedGuest::avail_flags(true);
    let buf = g.g.buffer_gpa(0);
    // A chain through the whole ring and back: a loop.
    for slot in 0..8 {
        g.set_desc(slot, buf, 64, 0, avail | P_NEXT);
    }
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    assert_eq!(r.take_one(), Err(RingError::Loop(8)));
    // A chain continuing into a descriptor of the wrong lap.
    g.set_desc(1, buf, 64, 0, PackedGuest::avail_flags(false));
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    assert!(matches!(
        r.take_one(),
        Err(RingError::WrapMismatch { slot: 1, .. })
    ));
    // An id past the ring.
    g.set_desc(0, buf, 64, 8, avail);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    assert_eq!(r.take_one(), Err(RingError::BufferId { id: 8, size: 8 }));
    // Buffers outside memory, empty, indirect or going the wrong way.
    let head = PackedHead {
        slot: 0,
        wrap: true,
        count: 1,
        id: 0,
    };
    for (addr, len) in [
        (GPA + MEM - 10, 64),
        (u64::MAX - 8, 64),
        (0, 64),
        (GPA, u32::MAX),
    ] {
        g.set_desc(0, addr, len, 0, avail);
        assert_eq!(
            r.single(&g.g.mem, head),
            Err(RingError::OutOfRange { addr, len })
        );
        assert_eq!(
            r.chain(&g.g.mem, head, &mut s),
            Err(RingError::OutOfRange { addr, len })
        );
    }
    g.set_desc(0, buf, 0, 0, avail);
    assert_eq!(r.single(&g.g.mem, head), Err(RingError::ZeroLength));
    g.set_desc(0, buf, 64, 0, avail | 4);
    assert_eq!(r.single(&g.g.mem, head), Err(RingError::Indirect));
    g.set_desc(0, buf, 64, 0, avail | P_WRITE);
    assert!(matches!(
        r.single(&g.g.mem, head),
        Err(RingError::Direction { .. })
    ));
    let w = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Write);
    g.set_desc(0, buf, 64, 0, avail);
    assert!(matches!(
        w.chain(&g.g.mem, head, &mut s),
        Err(RingError::Direction { .. })
    ));
    // A head the ring did not hand out.
    let past = PackedHead { slot: 8, ..head };
    assert!(matches!(
        r.single(&g.g.mem, past),
        Err(RingError::DescriptorIndex { index: 8, .. })
    ));
    // More buffers than a port follows, on a ring large enough to hold them.
    let g = PackedGuest::new(128);
    for slot in 0..70 {
        let flags = if slot < 69 { avail | P_NEXT } else { avail };
        g.set_desc(slot, g.g.buffer_gpa(slot), 64, 0, flags);
    }
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    let head = take(&mut r);
    assert_eq!(head.count, 70);
    assert_eq!(r.chain(&g.g.mem, head, &mut s), Err(RingError::TooLong));
}

#[test]
fn interrupts_follow_the_drivers_event_suppression() {
    let mut g = PackedGuest::new(8);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    let cycle = |g: &mut PackedGuest, r: &mut PackedRing| {
        g.add_chain(&[64], false, &[0; 64]);
        let h = take(r);
        r.push_used(h, 0);
        let told = r.publish();
        g.take_used().expect("used");
        told
    };
    g.set_driver_event(0, EVENT_FLAGS_DISABLE);
    assert!(!cycle(&mut g, &mut r), "disabled");
    g.set_driver_event(0, EVENT_FLAGS_ENABLE);
    assert!(cycle(&mut g, &mut r), "enabled");

    // EVENT_IDX: the driver names the used descriptor it wants to hear about.
    let mut g = PackedGuest::new(8);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, true, Direction::Read);
    g.set_driver_event(2 | WRAP_BIT, EVENT_FLAGS_DESC);
    assert!(
        !cycle(&mut g, &mut r),
        "used slot 0: the driver waits for 2"
    );
    assert!(!cycle(&mut g, &mut r), "slot 1");
    assert!(cycle(&mut g, &mut r), "slot 2");
    assert!(!cycle(&mut g, &mut r), "slot 3: 2 is behind");
    // Across the end of the ring: slot 1 of the next lap (wrap counter 0).
    g.set_driver_event(1, EVENT_FLAGS_DESC);
    for k in 4..9 {
        assert!(!cycle(&mut g, &mut r), "slot {k}");
    }
    assert!(cycle(&mut g, &mut r), "slot 1 of lap 2");
    // A batch across the end that covers the slot asked for.
    g.set_driver_event(7, EVENT_FLAGS_DESC);
    for _ in 0..7 {
        g.add_chain(&[64], false, &[0; 64]);
    }
    for _ in 0..7 {
        let h = take(&mut r);
        r.push_used(h, 0);
    }
    assert!(r.publish(), "slots 2..7 of lap 2 and 0 of lap 3 cover 7");
    // DESC without EVENT_IDX negotiated: treated as enabled.
    let mut g = PackedGuest::new(8);
    let mut r = PackedRing::new(g.layout(), WRAP_BIT, false, Direction::Read);
    g.set_driver_event(5, EVENT_FLAGS_DESC);
    assert!(cycle(&mut g, &mut r));
}

#[test]
fn kicks_are_asked_for_only_before_a_sleep() {
    for event_idx in [false, true] {
        let mut g = PackedGuest::new(8);
        let r = PackedRing::new(g.layout(), WRAP_BIT, event_idx, Direction::Read);
        assert_eq!(g.device_event().1, EVENT_FLAGS_DISABLE);
        assert!(!r.arm_kick(), "nothing available: the worker may sleep");
        let (off_wrap, flags) = g.device_event();
        if event_idx {
            assert_eq!((off_wrap, flags), (WRAP_BIT, EVENT_FLAGS_DESC));
        } else {
            assert_eq!(flags, EVENT_FLAGS_ENABLE);
        }
        r.disarm_kick();
        assert_eq!(g.device_event().1, EVENT_FLAGS_DISABLE);
        g.add_chain(&[64], false, &[0; 64]);
        assert!(r.arm_kick(), "a chain is there: no sleep");
    }
}

#[test]
fn layouts_are_checked() {
    let g = PackedGuest::new(8);
    let (d, a, u) = g.g.ring_uvas();
    assert!(translate(&g.g.mem, 0, d, a, u).is_err());
    assert!(translate(&g.g.mem, 3, d, a, u).is_ok(), "any size");
    assert!(translate(&g.g.mem, 8, d + 8, a, u).is_err(), "unaligned");
    assert!(translate(&g.g.mem, 8, d, a + 2, u).is_err(), "unaligned");
    assert!(translate(&g.g.mem, 8, d, a, 0).is_err(), "outside");
}
