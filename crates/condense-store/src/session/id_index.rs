//! Entry lookup by id, built once per session without copying the ids,
//! with pi's rule that a repeated id resolves to its last entry.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use super::entry::*;

/// A map key that is already a keyed hash (the `IdIndex`'s), used as its
/// own hash: hashing it again would only cost time.
#[derive(Default)]
pub(super) struct KeyedHash(u64);

impl Hasher for KeyedHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Entry ids to positions in [`Session::entries`], without a second copy of
/// the ids: a map from each id's hash to the last entry with that id, the
/// entry's own `id` confirming a match. A map keyed by the ids cost ~100
/// bytes an entry (the copy, its allocation, a wider slot), ~0.04× of a
/// long session's file. The hash is keyed per session, so ids cannot be
/// chosen to collide; two ids that do collide anyway go to `collided`.
#[derive(Clone)]
pub(super) struct IdIndex<S = RandomState> {
    hasher: S,
    /// Hash → the last entry whose id is the first id seen with that hash.
    by_hash: HashMap<u64, usize, BuildHasherDefault<KeyedHash>>,
    /// Ids whose hash an earlier, different id took (practically never).
    collided: HashMap<String, usize>,
}

impl IdIndex {
    /// The index, and each entry whose id an earlier entry already has, with
    /// the nearest such earlier entry.
    pub(super) fn build(entries: &[Entry]) -> (IdIndex, Vec<(usize, usize)>) {
        IdIndex::build_with(entries, RandomState::new())
    }
}

impl<S: BuildHasher> IdIndex<S> {
    pub(super) fn build_with(entries: &[Entry], hasher: S) -> (IdIndex<S>, Vec<(usize, usize)>) {
        let mut index = IdIndex {
            hasher,
            by_hash: HashMap::with_capacity_and_hasher(entries.len(), Default::default()),
            collided: HashMap::new(),
        };
        let mut duplicates = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let id = entry.id.as_str();
            let previous = match index.by_hash.entry(index.hasher.hash_one(id)) {
                MapEntry::Vacant(slot) => {
                    slot.insert(i);
                    None
                }
                MapEntry::Occupied(mut slot) if entries[*slot.get()].id == id => {
                    Some(slot.insert(i))
                }
                MapEntry::Occupied(_) => index.collided.insert(id.to_owned(), i),
            };
            if let Some(previous) = previous {
                duplicates.push((i, previous));
            }
        }
        (index, duplicates)
    }

    /// The position of the last entry with this id.
    pub(super) fn get(&self, entries: &[Entry], id: &str) -> Option<usize> {
        match self.by_hash.get(&self.hasher.hash_one(id)) {
            Some(&i) if entries[i].id == id => Some(i),
            _ if self.collided.is_empty() => None,
            _ => self.collided.get(id).copied(),
        }
    }
}
