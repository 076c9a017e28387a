//! What a memo keeps of a request body so the conversation's next request
//! can tell which of its messages it carries over byte for byte: a hash of
//! each prefix of the body that ends where one of its messages ends, not
//! the body itself. A body is megabytes; its print is 24 bytes a message
//! and the few bytes that identify the conversation.
//!
//! The hash is XXH3's 128-bit one, seeded once per process: two prefixes
//! that differ and hash alike are a chance of about 2^-128 a compare,
//! and a client cannot aim for one without knowing the seed.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use xxhash_rust::xxh3::Xxh3;

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x636f_6e64_656e_7365);
        h.finish()
    })
}

/// A body's print: its length, its hash, and the hash of the body through
/// each of its messages' ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct BodyPrint {
    /// Each message's end in the body, and the hash of the body before it.
    ends: Vec<(usize, u128)>,
    len: usize,
    whole: u128,
    /// The body's first bytes, as they were (what identifies the
    /// conversation, [`crate::sessions`]).
    head: String,
}

impl BodyPrint {
    /// The print of `body` whose messages end at `ends` (ascending, each
    /// within the body; one that is not is taken as the nearest that is),
    /// keeping its first `head` bytes.
    pub(crate) fn of(body: &str, ends: impl IntoIterator<Item = usize>, head: usize) -> BodyPrint {
        let mut hasher = Xxh3::with_seed(seed());
        let mut at = 0;
        let mut marks = Vec::new();
        for end in ends {
            let end = end.clamp(at, body.len());
            hasher.update(&body.as_bytes()[at..end]);
            marks.push((end, hasher.digest128()));
            at = end;
        }
        hasher.update(&body.as_bytes()[at..]);
        BodyPrint {
            ends: marks,
            len: body.len(),
            whole: hasher.digest128(),
            head: body.get(..head).unwrap_or_default().to_owned(),
        }
    }

    /// How many of the printed body's leading messages `body` starts with
    /// byte for byte: those whose whole prefix, through the message's end,
    /// is the same.
    pub(crate) fn shared(&self, body: &str) -> usize {
        let mut hasher = Xxh3::with_seed(seed());
        let mut at = 0;
        let mut count = 0;
        for (end, hash) in &self.ends {
            if *end > body.len() {
                break;
            }
            hasher.update(&body.as_bytes()[at..*end]);
            if hasher.digest128() != *hash {
                break;
            }
            at = *end;
            count += 1;
        }
        count
    }

    /// Whether `body` is the printed body, byte for byte.
    pub(crate) fn is(&self, body: &str) -> bool {
        if body.len() != self.len {
            return false;
        }
        let mut hasher = Xxh3::with_seed(seed());
        hasher.update(body.as_bytes());
        hasher.digest128() == self.whole
    }

    /// The body's first bytes as [`BodyPrint::of`] kept them.
    pub(crate) fn head(&self) -> &str {
        &self.head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The messages `body` shares with `printed`, by comparing bytes.
    fn shared_bytes(printed: &str, ends: &[usize], body: &str) -> usize {
        let same = printed
            .bytes()
            .zip(body.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        ends.iter().take_while(|e| **e <= same).count()
    }

    proptest! {
        #[test]
        fn a_print_finds_the_messages_the_bytes_share(
            printed in "[ab\u{e9}]{0,40}",
            body in "[ab\u{e9}]{0,40}",
            cuts in proptest::collection::vec(0usize..60, 0..8),
        ) {
            let mut ends: Vec<usize> = cuts
                .into_iter()
                .filter(|c| *c <= printed.len() && printed.is_char_boundary(*c))
                .collect();
            ends.sort_unstable();
            ends.dedup();
            let print = BodyPrint::of(&printed, ends.iter().copied(), 3);
            prop_assert_eq!(print.shared(&body), shared_bytes(&printed, &ends, &body));
            prop_assert_eq!(print.is(&body), body == printed);
            prop_assert!(print.is(&printed));
            prop_assert_eq!(print.head(), printed.get(..3).unwrap_or_default());
        }
    }

    #[test]
    fn a_changed_byte_anywhere_before_a_message_end_ends_the_share() {
        let body = "[{\"a\":1},{\"b\":2},{\"c\":3}]";
        let ends = [8, 16, 24];
        let print = BodyPrint::of(body, ends, 0);
        assert_eq!(print.shared(body), 3);
        let longer = format!("{}…", body);
        assert_eq!(print.shared(&longer), 3);
        assert!(!print.is(&longer));
        for at in 0..24 {
            let mut changed = body.as_bytes().to_vec();
            changed[at] ^= 1;
            let changed = String::from_utf8(changed).unwrap();
            let expected = ends.iter().take_while(|e| **e <= at).count();
            assert_eq!(print.shared(&changed), expected, "byte {at}");
        }
    }
}
