//! Differential tests: the classifier against the linear scan, and every megaflow checked by
//! perturbing the bits it leaves wildcarded.

use crate::key::Field::{self, *};
use crate::key::FlowKey;
use crate::rule::{Action, Bucket, FlowMod, Group, GroupKind, Match, PortRef, Rule, RuleFilter};
use crate::tables::FlowTables;
use crate::testutil::*;
use proptest::prelude::*;

const TABLES: u8 = 3;

fn addr() -> impl Strategy<Value = u128> {
    (0u8..4, 0u8..4, any::<u8>()).prop_map(|(c, d, e)| ip(198, 18, c, d ^ (e & 0x80)))
}

fn match_strategy() -> impl Strategy<Value = Match> {
    let field = prop_oneof![
        (1u128..5).prop_map(|p| ex(InPort, p)),
        prop::sample::select(vec![0x800u128, 0x806, 0x86dd]).prop_map(|t| ex(EthType, t)),
        (addr(), 0u32..=32).prop_map(|(a, l)| (
            NwSrc,
            a,
            crate::classifier::trie::prefix_mask(l, 32)
        )),
        (addr(), 0u32..=32).prop_map(|(a, l)| (
            NwDst,
            a,
            crate::classifier::trie::prefix_mask(l, 32)
        )),
        (addr(), any::<u32>()).prop_map(|(a, m)| (NwDst, a, (m | 0xffff_0000) as u128)),
        prop::sample::select(vec![1u128, 6, 17]).prop_map(|p| ex(NwProto, p)),
        (
            prop::sample::select(vec![53u128, 80, 443, 8080]),
            prop::sample::select(vec![0xffffu128, 0xff00, 0xfff0])
        )
            .prop_map(|(v, m)| (TpDst, v, m)),
        (
            prop::sample::select(vec![53u128, 80, 1000]),
            prop::sample::select(vec![0xffffu128, 0xfc00])
        )
            .prop_map(|(v, m)| (TpSrc, v, m)),
        (0u128..3).prop_map(|v| (VlanVid, v, 0xfff)),
        (0u128..2).prop_map(|v| (VlanPresent, v, 1)),
        (0u128..3).prop_map(|v| ex(EthDst, 0x0200_0000_0000 | v)),
        (0u128..2).prop_map(|v| (EthDst, v << 40, 1 << 40)),
        prop::sample::select(vec![1u128, 2, 64]).prop_map(|v| ex(NwTtl, v)),
        (0u128..3).prop_map(|v| ex(Reg0, v)),
        (0u128..4).prop_map(|v| (NwFrag, v, 3)),
    ];
    prop::collection::vec(field, 0..4).prop_map(|fs| m(&fs))
}

fn action_strategy(table: u8) -> impl Strategy<Value = Action> {
    let later = if table + 1 < TABLES { table + 1 } else { table };
    prop_oneof![
        4 => (1u16..5).prop_map(|p| Action::Output(PortRef::Number(p))),
        1 => Just(Action::Output(PortRef::InPort)),
        1 => Just(Action::Output(PortRef::Flood)),
        1 => Just(Action::Output(PortRef::Number(9))),
        2 => (addr(), 8u32..=32).prop_map(|(a, l)| Action::SetField { field: NwDst, value: a, mask: crate::classifier::trie::prefix_mask(l, 32) }),
        1 => (0u128..3).prop_map(|v| Action::SetField { field: Reg0, value: v, mask: 0xffff_ffff }),
        1 => prop::sample::select(vec![80u128, 443]).prop_map(|v| Action::SetField { field: TpDst, value: v, mask: 0xffff }),
        1 => (0u128..3).prop_map(|v| Action::SetField { field: VlanVid, value: v, mask: 0xfff }),
        1 => Just(Action::SetField { field: TunId, value: 77, mask: 0xffff }),
        1 => Just(Action::DecTtl),
        1 => Just(Action::PushVlan(0x8100)),
        1 => Just(Action::PopVlan),
        1 => (0..TABLES, prop::option::of(1u16..5)).prop_map(|(t, p)| Action::Resubmit { port: p, table: Some(t) }),
        1 => Just(Action::GotoTable(later)),
        1 => (1u32..3).prop_map(Action::Group),
    ]
}

fn rule_strategy() -> impl Strategy<Value = Rule> {
    (0..TABLES, 0u16..60, match_strategy()).prop_flat_map(|(t, p, mtch)| {
        prop::collection::vec(action_strategy(t), 0..4).prop_map(move |mut acts| {
            // goto_table only last and only forward (apply refuses the rest).
            let last = acts.len();
            acts = acts
                .into_iter()
                .enumerate()
                .filter(|(i, a)| match a {
                    Action::GotoTable(to) => *i + 1 == last && *to > t,
                    _ => true,
                })
                .map(|(_, a)| a)
                .collect();
            rule(t, p * 10 + t as u16, mtch, acts)
        })
    })
}

fn key_strategy() -> impl Strategy<Value = FlowKey> {
    (
        (
            1u128..5,
            prop::sample::select(vec![0x800u128, 0x806, 0x86dd, 0x88cc]),
            addr(),
            addr(),
        ),
        (
            prop::sample::select(vec![1u128, 6, 17, 47]),
            prop::sample::select(vec![53u128, 80, 443, 1000, 8080, 0x1234]),
        ),
        (
            prop::sample::select(vec![53u128, 80, 1000]),
            0u128..4,
            prop::sample::select(vec![0u128, 0x1000, 0x1001, 0x1002, 0x2002]),
        ),
        (0u128..4, prop::sample::select(vec![1u128, 2, 64]), 0u128..2),
    )
        .prop_map(
            |((inp, et, s, d), (proto, dport), (sport, dst, vlan), (frag, ttl, mc))| {
                let mut k = FlowKey::ZERO;
                k.set(InPort, inp);
                k.set(EthType, et);
                k.set(EthDst, 0x0200_0000_0000 | dst | (mc << 40));
                k.set(VlanTci, vlan);
                k.set(NwSrc, s);
                k.set(NwDst, d);
                k.set(NwProto, proto);
                k.set(NwTtl, ttl);
                k.set(NwFrag, frag);
                k.set(TpSrc, sport);
                k.set(TpDst, dport);
                sanitize(&mut k);
                k
            },
        )
}

fn groups() -> Vec<FlowMod> {
    vec![
        FlowMod::AddGroup(Group {
            id: 1,
            kind: GroupKind::Select,
            fields: vec![],
            method: Default::default(),
            method_param: 0,
            field_masks: vec![],
            buckets: (0..3)
                .map(|i| Bucket {
                    watch_port: None,
                    watch_group: None,
                    id: i,
                    weight: 50 + 25 * i as u16,
                    actions: vec![Action::Output(PortRef::Number(2 + i as u16))],
                })
                .collect(),
        }),
        FlowMod::AddGroup(Group {
            id: 2,
            kind: GroupKind::All,
            fields: vec![],
            method: Default::default(),
            method_param: 0,
            field_masks: vec![],
            buckets: vec![
                Bucket {
                    watch_port: None,
                    watch_group: None,
                    id: 0,
                    weight: 0,
                    actions: vec![
                        Action::SetField {
                            field: NwSrc,
                            value: 1,
                            mask: 0xff,
                        },
                        Action::Output(PortRef::Number(1)),
                    ],
                },
                Bucket {
                    watch_port: None,
                    watch_group: None,
                    id: 1,
                    weight: 0,
                    actions: vec![Action::Resubmit {
                        port: None,
                        table: Some(2),
                    }],
                },
            ],
        }),
    ]
}

/// Unique priority per table, as OpenFlow leaves overlapping equal priorities undefined.
fn dedup(rules: Vec<Rule>) -> Vec<Rule> {
    let mut seen = std::collections::HashSet::new();
    rules
        .into_iter()
        .filter(|r| seen.insert((r.table, r.priority)))
        .collect()
}

/// Actions with each `Set` replaced by the field value it leaves in `k` (the linear reference
/// consults every bit, so its `Set` masks are wider; the packet comes out the same).
fn effect(a: &crate::dpaction::DpActions, k: &FlowKey) -> Vec<crate::dpaction::DpAction> {
    use crate::dpaction::DpAction;
    a.as_slice()
        .iter()
        .map(|x| match *x {
            DpAction::Set { field, value, mask } => DpAction::Set {
                field,
                value: (k.get(field) & !mask) | value,
                mask: 0,
            },
            other => other,
        })
        .collect()
}

/// The classifier agrees with the linear scan on `k`, and the megaflow of `k` gives every key
/// inside it the same actions.
fn check(t: &FlowTables, k: &FlowKey, noise: &[FlowKey]) -> Result<(), TestCaseError> {
    let fast = t.translate(k);
    let slow = crate::linear::translate(t, k);
    prop_assert_eq!(
        effect(&fast.actions, k),
        effect(&slow.actions, k),
        "key {:?}",
        k
    );
    prop_assert_eq!(fast.rules, slow.rules);
    prop_assert_eq!(fast.error, slow.error);
    for n in noise {
        let mut k2 = FlowKey::ZERO;
        for i in 0..crate::key::KEY_WORDS {
            k2.w[i] = (k.w[i] & fast.mask.w[i]) | (n.w[i] & !fast.mask.w[i]);
        }
        sanitize(&mut k2);
        if !k2.matches(k, &fast.mask) {
            continue; // sanitizing moved it out of the megaflow: not a key extract can make
        }
        let other = crate::linear::translate(t, &k2);
        prop_assert_eq!(
            effect(&fast.actions, &k2),
            effect(&other.actions, &k2),
            "megaflow {:?} of {:?} wrong for {:?}",
            fast.mask,
            k,
            k2
        );
        // (Not `translate(&k2)` literally: a `Set` may carry a narrower mask there, as a trie
        // that passed for `k` is not in the megaflow; the packet comes out the same.)
    }
    Ok(())
}

fn noise_strategy() -> impl Strategy<Value = Vec<FlowKey>> {
    prop::collection::vec(
        prop_oneof![
            key_strategy(),
            any::<[u64; 19]>().prop_map(|w| FlowKey { w })
        ],
        8,
    )
}

proptest! {
    // 256 cases unless PROPTEST_CASES says otherwise.

    #[test]
    fn classifier_matches_linear_and_megaflows_hold(
        rules in prop::collection::vec(rule_strategy(), 1..40),
        keys in prop::collection::vec(key_strategy(), 16),
        noise in noise_strategy(),
    ) {
        let mut mods = groups();
        mods.extend(dedup(rules).into_iter().map(FlowMod::Add));
        let t = FlowTables::new(ports()).apply(&mods).unwrap();
        for k in &keys {
            check(&t, k, &noise)?;
        }
    }

    #[test]
    fn rules_added_and_removed_in_any_order(
        rules in prop::collection::vec(rule_strategy(), 1..30),
        order in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 1..40),
        keys in prop::collection::vec(key_strategy(), 6),
        noise in noise_strategy(),
    ) {
        let rules = dedup(rules);
        let mut t = FlowTables::new(ports()).apply(&groups()).unwrap();
        for (i, add) in order {
            let r = i.get(&rules);
            let m = if add {
                FlowMod::Add(r.clone())
            } else {
                FlowMod::Delete(RuleFilter { table: Some(r.table), m: r.m, strict: Some(r.priority), cookie: None, out_port: None })
            };
            let v = t.version();
            t = t.apply(&[m]).unwrap();
            prop_assert_eq!(t.version(), v + 1);
            for k in &keys {
                check(&t, k, &noise[..2])?;
            }
        }
    }
}

#[test]
fn linear_lookup_takes_the_highest_priority() {
    let t = FlowTables::new(ports())
        .apply(&[
            FlowMod::Add(rule(0, 5, Match::ANY, vec![])),
            FlowMod::Add(rule(0, 9, m(&[ex(Field::InPort, 1)]), vec![])),
        ])
        .unwrap();
    let id = crate::linear::lookup(&t, 0, &ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(id.and_then(|id| t.rule(id)).map(|r| r.priority), Some(9));
}
