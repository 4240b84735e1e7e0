//! `FixedTable`: the fixed-capacity hash table of the fast path (neighbour tables, and the flow
//! tables to come). Entries live in an arena whose slot numbers never change while an entry
//! lives, so a slot can name it (a neighbour's adjacency id, a flow id); an open-addressing index
//! of at least twice the capacity (linear probing, backward-shift deletion, no tombstones) finds
//! them by key. It allocates only in `new`, never resizes, never panics on a key, and keeps what a
//! removed entry's value held (a generation, say) for the next occupant to read.

/// A key of a `FixedTable`: compared whole, spread by its own hash.
pub trait TableKey: Copy + Eq {
    /// A well-mixed 64-bit hash (the index uses its low bits).
    fn table_hash(&self) -> u64;
}

/// No slot (in the index).
const NIL: u32 = u32::MAX;

/// A fixed-capacity table of `V` keyed by `K` (see the module header).
pub struct FixedTable<K, V> {
    keys: Box<[K]>,
    values: Box<[V]>,
    live: Box<[bool]>,
    index: Box<[u32]>,
    mask: usize,
    /// Free slots, the next one to use last.
    free: Vec<u32>,
}

impl<K: TableKey, V: Clone> FixedTable<K, V> {
    /// Room for `capacity` entries (at least 1); every slot starts as `vacant_key` /
    /// `vacant_value`. Slots are handed out from 0 up.
    pub fn new(capacity: usize, vacant_key: K, vacant_value: V) -> FixedTable<K, V> {
        let n = capacity.clamp(1, NIL as usize - 1);
        let slots = (n * 2).next_power_of_two();
        FixedTable {
            keys: vec![vacant_key; n].into_boxed_slice(),
            values: vec![vacant_value; n].into_boxed_slice(),
            live: vec![false; n].into_boxed_slice(),
            index: vec![NIL; slots].into_boxed_slice(),
            mask: slots - 1,
            free: (0..n as u32).rev().collect(),
        }
    }
}

impl<K: TableKey, V> FixedTable<K, V> {
    /// Entries it can hold.
    pub fn capacity(&self) -> usize {
        self.values.len()
    }

    /// Entries it holds.
    pub fn len(&self) -> usize {
        self.values.len() - self.free.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an insert would fail.
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    #[inline(always)]
    fn home(&self, key: &K) -> usize {
        key.table_hash() as usize & self.mask
    }

    /// The slot of `key`, if it is in the table.
    #[inline]
    pub fn find(&self, key: &K) -> Option<u32> {
        let mut i = self.home(key);
        loop {
            let s = *self.index.get(i)?;
            if s == NIL {
                return None;
            }
            if self.keys.get(s as usize) == Some(key) {
                return Some(s);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Add `key` (which must not be in the table) and return its slot; None when full. The
    /// slot's value is what its previous occupant left (or the vacant value): the caller sets it.
    pub fn insert(&mut self, key: K) -> Option<u32> {
        debug_assert!(self.find(&key).is_none(), "insert of a key already present");
        let s = self.free.pop()?;
        let mut i = self.home(&key);
        while self.index[i] != NIL {
            i = (i + 1) & self.mask;
        }
        self.index[i] = s;
        self.keys[s as usize] = key;
        self.live[s as usize] = true;
        Some(s)
    }

    /// Remove the entry in `slot` (false when the slot holds none). Its value stays as it was
    /// until the slot is used again.
    pub fn remove(&mut self, slot: u32) -> bool {
        if !self.is_live(slot) {
            return false;
        }
        let key = self.keys[slot as usize];
        let mut hole = self.home(&key);
        while self.index[hole] != slot {
            hole = (hole + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole when the
        // hole lies on their way from their home slot.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let t = self.index[j];
            if t == NIL {
                break;
            }
            let h = self.home(&self.keys[t as usize]);
            if (j.wrapping_sub(h) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.index[hole] = t;
                hole = j;
            }
        }
        self.index[hole] = NIL;
        self.live[slot as usize] = false;
        self.free.push(slot);
        true
    }

    /// Whether `slot` holds an entry.
    #[inline(always)]
    pub fn is_live(&self, slot: u32) -> bool {
        self.live.get(slot as usize).copied().unwrap_or(false)
    }

    /// The key in `slot`, if it holds an entry.
    #[inline]
    pub fn key(&self, slot: u32) -> Option<&K> {
        self.is_live(slot)
            .then(|| self.keys.get(slot as usize))
            .flatten()
    }

    /// Every slot's value, in slot order (vacant slots too: check `is_live`).
    #[inline(always)]
    pub fn values(&self) -> &[V] {
        &self.values
    }

    /// Every slot's value, mutable.
    #[inline(always)]
    pub fn values_mut(&mut self) -> &mut [V] {
        &mut self.values
    }

    /// The live entries: (slot, key, value).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &K, &V)> {
        (0..self.values.len() as u32)
            .filter(|&s| self.is_live(s))
            .map(|s| (s, &self.keys[s as usize], &self.values[s as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    impl TableKey for u32 {
        fn table_hash(&self) -> u64 {
            // A poor hash on purpose (many collisions), so probe runs and shifts are exercised.
            u64::from(*self % 7)
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in prop::collection::vec((any::<bool>(), 0u32..40), 1..400)) {
            let mut t: FixedTable<u32, u32> = FixedTable::new(24, 0, 0);
            let mut model: HashMap<u32, (u32, u32)> = HashMap::new(); // key -> (slot, value)
            for (i, (add, k)) in ops.into_iter().enumerate() {
                if add {
                    match t.find(&k) {
                        Some(s) => prop_assert_eq!(model.get(&k).map(|m| m.0), Some(s)),
                        None => match t.insert(k) {
                            Some(s) => {
                                t.values_mut()[s as usize] = i as u32;
                                model.insert(k, (s, i as u32));
                            }
                            None => prop_assert_eq!(model.len(), 24),
                        },
                    }
                } else if let Some((s, _)) = model.remove(&k) {
                    prop_assert!(t.remove(s));
                    prop_assert!(!t.remove(s), "a slot is removed once");
                }
                prop_assert_eq!(t.len(), model.len());
                for (k, (s, v)) in &model {
                    prop_assert_eq!(t.find(k), Some(*s));
                    prop_assert_eq!(t.key(*s), Some(k));
                    prop_assert_eq!(t.values()[*s as usize], *v);
                }
                for k in 0..40u32 {
                    prop_assert_eq!(t.find(&k).is_some(), model.contains_key(&k));
                }
            }
            prop_assert_eq!(t.iter().count(), model.len());
        }
    }

    #[test]
    fn slots_are_stable_and_values_outlive_removal() {
        let mut t: FixedTable<u32, u32> = FixedTable::new(2, 0, 0);
        let a = t.insert(10).expect("room");
        let b = t.insert(17).expect("room");
        assert!(t.insert(24).is_none(), "full");
        t.values_mut()[a as usize] = 5;
        assert!(t.remove(b));
        assert_eq!(t.find(&10), Some(a), "a's slot did not move");
        assert!(t.remove(a));
        assert_eq!(t.values()[a as usize], 5, "kept for the next occupant");
        assert!(t.key(a).is_none() && !t.is_live(a) && !t.remove(99));
        assert!(t.is_empty());
    }
}
