//! A set of tool-call ids for the render's forward walks (orphan sweep,
//! error purge). An assistant opens a handful of calls, where scanning a
//! vector beats hashing; past [`SMALL`] ids the set hashes, so a message
//! of thousands of calls (a hostile session) still renders in linear time.

use rustc_hash::FxHashSet;

/// Ids held in the vector before the set switches to hashing.
pub(crate) const SMALL: usize = crate::ID_SCAN_LIMIT;

#[derive(Debug, Default)]
pub(crate) struct IdSet<'a> {
    small: Vec<&'a str>,
    large: FxHashSet<&'a str>,
}

impl<'a> IdSet<'a> {
    pub(crate) fn clear(&mut self) {
        self.small.clear();
        self.large.clear();
    }

    /// Adds `id`; false when it was already there.
    pub(crate) fn insert(&mut self, id: &'a str) -> bool {
        if !self.large.is_empty() {
            return self.large.insert(id);
        }
        if self.small.contains(&id) {
            return false;
        }
        if self.small.len() < SMALL {
            self.small.push(id);
        } else {
            self.large.extend(self.small.drain(..));
            self.large.insert(id);
        }
        true
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        if self.large.is_empty() {
            self.small.contains(&id)
        } else {
            self.large.contains(id)
        }
    }

    /// Takes `id` out; false when it was not there.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        if !self.large.is_empty() {
            return self.large.remove(id);
        }
        match self.small.iter().position(|o| *o == id) {
            Some(p) => {
                self.small.swap_remove(p);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdSet;

    #[test]
    fn behaves_as_a_set_below_and_past_the_switch() {
        let ids: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        for n in [3, 32, 33, 100] {
            let mut set = IdSet::default();
            for id in &ids[..n] {
                assert!(set.insert(id), "{n}: {id} is new");
                assert!(!set.insert(id), "{n}: {id} is there");
            }
            assert!(ids[..n].iter().all(|id| set.contains(id)), "{n}");
            assert!(!set.contains("c100"), "{n}");
            // Removing every other id, then the rest: each goes once.
            for id in ids[..n].iter().step_by(2) {
                assert!(set.remove(id), "{n}: {id}");
                assert!(!set.remove(id), "{n}: {id} went already");
            }
            assert!(
                ids[..n]
                    .iter()
                    .skip(1)
                    .step_by(2)
                    .all(|id| set.contains(id)),
                "{n}"
            );
            set.clear();
            assert!(!set.contains("c1"), "{n}: cleared");
            assert!(set.insert("c1"), "{n}: usable after clear");
        }
    }
}
