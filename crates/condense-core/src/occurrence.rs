//! Occurrence keys: which tool result a record belongs to.
//!
//! Providers reuse tool-call ids (`bash_23` twice in one session), so a bare id
//! does not name one result. pi-condense keys every record by
//! `<toolCallId>@<resultTimestamp>`, the tool result message's own timestamp;
//! records written before that scheme carry no timestamp and are keyed by the
//! bare id ("legacy").

use std::fmt;

/// `id@resultTimestamp`, or a bare `id` for legacy records.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OccurrenceKey {
    /// The provider's tool-call id.
    pub id: String,
    /// The tool result message's timestamp (ms); `None` for legacy keys.
    pub result_timestamp: Option<i64>,
}

impl OccurrenceKey {
    /// A key for one occurrence of `id`.
    pub fn new(id: impl Into<String>, result_timestamp: Option<i64>) -> Self {
        OccurrenceKey {
            id: id.into(),
            result_timestamp,
        }
    }

    /// Parses `id@digits` (or `id@-digits`: a result whose timestamp is
    /// negative, as the index writes it) into an occurrence key; anything
    /// else (no `@`, or a suffix that is not an integer) is a bare id.
    /// Splits on the last `@`.
    pub fn parse(text: &str) -> Self {
        match split_occurrence(text) {
            Some((id, ts)) => OccurrenceKey::new(id, Some(ts)),
            None => OccurrenceKey::new(text, None),
        }
    }

    /// True for a legacy (bare-id) key.
    pub fn is_bare(&self) -> bool {
        self.result_timestamp.is_none()
    }
}

/// Splits `id@digits` (or `id@-digits`) on the last `@`; `None` if the
/// text is a bare id.
pub fn split_occurrence(text: &str) -> Option<(&str, i64)> {
    let at = text.rfind('@')?;
    let (id, suffix) = (&text[..at], &text[at + 1..]);
    let digits = suffix.strip_prefix('-').unwrap_or(suffix);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    suffix.parse::<i64>().ok().map(|ts| (id, ts))
}

/// The bare tool-call id of a key text (`a@12` → `a`, `a` → `a`).
pub fn bare_id(text: &str) -> &str {
    split_occurrence(text).map_or(text, |(id, _)| id)
}

impl fmt::Display for OccurrenceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.result_timestamp {
            Some(ts) => write!(f, "{}@{}", self.id, ts),
            None => f.write_str(&self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        let cases = [
            ("bash_23@1150", "bash_23", Some(1150)),
            ("bash_23", "bash_23", None),
            ("a@b@12", "a@b", Some(12)),
            ("a@12b", "a@12b", None),
            ("a@", "a@", None),
            ("@5", "", Some(5)),
            // A result timestamp before the epoch, as the index writes it.
            ("toolu_1@-1", "toolu_1", Some(-1)),
            ("a@-", "a@-", None),
            ("a@--1", "a@--1", None),
            ("a@1-", "a@1-", None),
        ];
        for (text, id, ts) in cases {
            let key = OccurrenceKey::parse(text);
            assert_eq!(key.id, id, "{text}");
            assert_eq!(key.result_timestamp, ts, "{text}");
            assert_eq!(key.to_string(), text);
        }
        assert_eq!(bare_id("x@1"), "x");
        assert_eq!(bare_id("x@y"), "x@y");
        assert_eq!(bare_id("x@-7"), "x");
    }

    proptest::proptest! {
        /// Every key the index writes reads back as itself.
        #[test]
        fn a_written_key_parses_back(id in "[a-zA-Z0-9_@-]{0,12}", ts in proptest::prelude::any::<i64>()) {
            let key = OccurrenceKey::new(id, Some(ts));
            proptest::prop_assert_eq!(OccurrenceKey::parse(&key.to_string()), key);
        }
    }
}
