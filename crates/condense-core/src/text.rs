//! [`SharedText`]: a string that can stay where it was read, as a JSON
//! string literal inside a buffer it shares, and is decoded when asked for.
//!
//! Index records carry the tool outputs they replace, which are the largest
//! part of a long session file. A reader keeps the file's text in memory
//! anyway (messages are windows on it), and most record texts are never
//! read again after a reload: only a query, a flush's dedup lookup or a
//! spill reads them, one at a time. Copying each into its own `String` on
//! replay made records cost about 0.4× the file; a window costs 64 bytes.
//!
//! Reading a text is therefore not free: a literal with escapes (nearly every
//! multi-line output has `\n`) is decoded into a fresh `String` on each read,
//! and only its lengths are cached (a pending output's length is weighed at
//! every ask), so the decoded copy lives only as long as the caller keeps
//! it. An owned text is shared too: a clone (a record made from a captured
//! call, a record copied out of the index) costs a reference count.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::parked::OwnText;

/// A string that is either owned or a JSON string literal in a shared buffer.
///
/// Both forms behave the same: equality, `Debug`, `Display` and
/// serialization all see the decoded text, so a record read from a session
/// file compares and serializes exactly like one built in memory.
/// Deserializing always gives an owned text (serde hands no buffer to
/// share); [`ToolCallRecord::from_shared`](crate::ToolCallRecord::from_shared) makes
/// a record whose text is a shared one.
#[derive(Clone)]
pub struct SharedText(Repr, OnceLock<Lengths>);

/// A text's length in UTF-16 units and in chars: they differ only by the
/// astral chars, so their difference tells whether a prefix's length can be
/// had without reading the text.
#[derive(Clone, Copy)]
struct Lengths {
    units: usize,
    chars: usize,
}

#[derive(Clone)]
enum Repr {
    /// An `Arc<String>` rather than an `Arc<str>`: a decoded giant output
    /// moves in without a second copy of its bytes.
    Owned(Arc<String>),
    /// `buf[contents]` is the literal between its quotes; `escaped` when it
    /// holds a backslash (and so must be decoded to be read).
    Literal {
        buf: Buffer,
        contents: Range<usize>,
        escaped: bool,
    },
}

/// What a literal is a window on.
#[derive(Clone)]
pub(crate) enum Buffer {
    /// A loaded buffer (a session file), read in place.
    File(Arc<String>),
    /// A message's own JSON, which its host may park: read through it.
    Message(Arc<OwnText>),
}

impl Buffer {
    fn same(&self, other: &Buffer) -> bool {
        match (self, other) {
            (Buffer::File(a), Buffer::File(b)) => Arc::ptr_eq(a, b),
            (Buffer::Message(a), Buffer::Message(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl SharedText {
    /// An empty text.
    pub fn new() -> SharedText {
        SharedText::owned(Arc::new(String::new()))
    }

    /// A text whose JSON string literal (quotes included) is `buf[range]`,
    /// sharing the buffer instead of copying it.
    ///
    /// Fails as `serde_json::from_str::<String>` would on that literal; a
    /// range that does not hold exactly one string literal fails too.
    #[cfg(test)]
    pub(crate) fn from_shared(
        buf: &Arc<String>,
        range: Range<usize>,
    ) -> serde_json::Result<SharedText> {
        let literal = buf.get(range.clone()).unwrap_or_default();
        // One JSON value that starts and ends with a quote is exactly one
        // string literal (only whitespace may trail a value, and a quote is
        // not whitespace).
        let well_formed = literal.len() >= 2
            && literal.starts_with('"')
            && literal.ends_with('"')
            && serde_json::from_str::<serde::de::IgnoredAny>(literal).is_ok();
        if !well_formed {
            // Produces the error `String` would report.
            serde_json::from_str::<String>(literal)?;
            return Err(serde::de::Error::custom("not a JSON string literal"));
        }
        SharedText::from_checked_literal(&Buffer::File(Arc::clone(buf)), buf, range)
    }

    /// `SharedText::from_shared` for a range of `text` (what `buf` holds
    /// now) the caller already parsed as one JSON string literal (a
    /// `RawValue` starting with a quote): only what that parse does not
    /// check is checked here.
    pub(crate) fn from_checked_literal(
        buf: &Buffer,
        text: &str,
        range: Range<usize>,
    ) -> serde_json::Result<SharedText> {
        let literal = &text[range.clone()];
        let contents = range.start + 1..range.end - 1;
        let escapes = Escapes::scan(&text[contents.clone()]);
        if escapes.maybe_surrogate {
            // A `\uD8xx` escape must pair with a `\uDCxx` one to decode; a
            // syntax check lets lone ones through. Such literals are rare
            // (only writers that escape all non-ASCII make them), so serde
            // decodes them here, which also reports a lone one as it would.
            return serde_json::from_str::<String>(literal).map(SharedText::from);
        }
        Ok(SharedText(
            Repr::Literal {
                buf: buf.clone(),
                contents,
                escaped: escapes.any,
            },
            OnceLock::new(),
        ))
    }

    /// The text: borrowed when it is owned or a literal without escapes in
    /// a loaded buffer; copied out of a message's own JSON (which may be
    /// parked, and then is read back); decoded into a new `String` when it
    /// has escapes. A parked text that cannot be read back reads as a
    /// sentence saying so.
    pub fn to_str(&self) -> Cow<'_, str> {
        match &self.0 {
            Repr::Owned(s) => Cow::Borrowed(s),
            Repr::Literal {
                buf: Buffer::File(buf),
                contents,
                escaped,
            } => read_literal(buf, contents, *escaped)
                .expect("literal was validated at construction"),
            Repr::Literal {
                buf: Buffer::Message(own),
                contents,
                escaped,
            } => Cow::Owned(
                // Read back, the bytes are the source's word: a literal that
                // no longer reads is an error here, not a panic.
                own.get()
                    .and_then(|buf| {
                        read_literal(&buf, contents, *escaped)
                            .map(Cow::into_owned)
                            .ok_or_else(|| "the text read back is not the one parked".to_owned())
                    })
                    .unwrap_or_else(|e| {
                        format!("[condense: this text was parked and cannot be read back: {e}]")
                    }),
            ),
        }
    }

    /// The text as an owned `String`.
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(s) => Arc::try_unwrap(s).unwrap_or_else(|s| String::clone(&s)),
            Repr::Literal { .. } => self.to_str().into_owned(),
        }
    }

    /// True for the empty text (without decoding: a literal with an escape
    /// is never empty).
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Owned(s) => s.is_empty(),
            Repr::Literal { contents, .. } => contents.is_empty(),
        }
    }

    /// The text's length in UTF-16 units (what `String.length` gives),
    /// read once and then remembered.
    pub fn js_len(&self) -> usize {
        self.lengths().units
    }

    /// `js_len(js_prefix(text, units))`: without reading the text when it
    /// holds no astral char (each char is then one unit).
    pub fn js_prefix_len(&self, units: usize) -> usize {
        let lengths = self.lengths();
        if lengths.units == lengths.chars {
            units.min(lengths.units)
        } else {
            crate::js::js_len(crate::js::js_prefix(&self.to_str(), units))
        }
    }

    fn lengths(&self) -> Lengths {
        *self.1.get_or_init(|| {
            let text = self.to_str();
            if text.is_ascii() {
                return Lengths {
                    units: text.len(),
                    chars: text.len(),
                };
            }
            Lengths {
                units: crate::js::js_len(&text),
                chars: text.chars().count(),
            }
        })
    }

    /// Whether the text is a window on a parked message's JSON.
    pub fn is_parked(&self) -> bool {
        matches!(&self.0, Repr::Literal { buf: Buffer::Message(own), .. } if own.is_parked())
    }

    fn owned(s: Arc<String>) -> SharedText {
        SharedText(Repr::Owned(s), OnceLock::new())
    }

    /// True when the text is a window on a shared buffer rather than its
    /// own copy.
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Repr::Literal { .. })
    }
}

/// The text of the literal whose contents are `buf[contents]`; `None` when
/// they are not a literal there.
fn read_literal<'a>(buf: &'a str, contents: &Range<usize>, escaped: bool) -> Option<Cow<'a, str>> {
    if !escaped {
        return buf.get(contents.clone()).map(Cow::Borrowed);
    }
    let literal = buf.get(contents.start.checked_sub(1)?..contents.end + 1)?;
    serde_json::from_str(literal).ok().map(Cow::Owned)
}

/// What a literal's contents (between its quotes) hold, as far as reading
/// them goes.
struct Escapes {
    /// Any backslash: the text must be decoded to be read.
    any: bool,
    /// Perhaps a `\u` escape of a UTF-16 surrogate (`\uD800`–`\uDFFF`),
    /// which a syntax check does not pair up. An escaped backslash followed
    /// by `uD8…` counts too: a false alarm only means decoding at once.
    maybe_surrogate: bool,
}

impl Escapes {
    /// Scans contents that passed a JSON syntax check. Two whole-text
    /// searches rather than a walk from escape to escape: multi-line
    /// outputs hold a `\n` every few dozen bytes, and `\u` escapes are rare.
    fn scan(contents: &str) -> Escapes {
        let any = contents.as_bytes().contains(&b'\\');
        let maybe_surrogate = any
            && contents.contains("\\u")
            && contents.match_indices("\\u").any(|(i, _)| {
                matches!(
                    contents.as_bytes().get(i + 2..i + 4),
                    Some([b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
                )
            });
        Escapes {
            any,
            maybe_surrogate,
        }
    }
}

impl Default for SharedText {
    fn default() -> Self {
        SharedText::new()
    }
}

impl From<String> for SharedText {
    fn from(s: String) -> Self {
        SharedText::owned(Arc::new(s))
    }
}

impl From<&str> for SharedText {
    fn from(s: &str) -> Self {
        SharedText::owned(Arc::new(s.to_owned()))
    }
}

impl From<SharedText> for String {
    fn from(t: SharedText) -> Self {
        t.into_string()
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        if let (
            Repr::Literal {
                buf: a,
                contents: ra,
                ..
            },
            Repr::Literal {
                buf: b,
                contents: rb,
                ..
            },
        ) = (&self.0, &other.0)
        {
            if a.same(b) && ra == rb {
                return true;
            }
        }
        self.to_str() == other.to_str()
    }
}

impl Eq for SharedText {}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        self.to_str() == other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        self.to_str() == *other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        self.to_str() == other.as_str()
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.to_str(), f)
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_str())
    }
}

impl Serialize for SharedText {
    /// As the decoded string, so output does not depend on how the source
    /// escaped it (`\u0041` and `A` both come out as `A`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_str())
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(SharedText::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared text over `json` as the whole buffer.
    fn shared(json: &str) -> SharedText {
        let buf = Arc::new(json.to_owned());
        SharedText::from_shared(&buf, 0..buf.len()).unwrap()
    }

    proptest::proptest! {
        /// The remembered lengths are the decoded text's, whether the text
        /// is a window (escaped or not) or owned, astral chars included.
        #[test]
        fn lengths_are_the_decoded_texts(
            text in "[a-z\\n\"\\\\é日😀]{0,40}",
            units in 0usize..50,
        ) {
            let literal = serde_json::to_string(&text).unwrap();
            for t in [shared(&literal), SharedText::from(text.as_str())] {
                proptest::prop_assert_eq!(t.js_len(), crate::js::js_len(&text));
                proptest::prop_assert_eq!(
                    t.js_prefix_len(units),
                    crate::js::js_len(crate::js::js_prefix(&text, units))
                );
            }
        }
    }

    #[test]
    fn plain_literal_is_borrowed_from_the_buffer() {
        let t = shared(r#""hello world""#);
        assert!(t.is_shared());
        assert!(matches!(t.to_str(), Cow::Borrowed("hello world")));
        assert_eq!(t, "hello world");
    }

    #[test]
    fn escapes_are_decoded_on_read() {
        let t = shared(r#""a\nb\t\"q\"\\ \/ \u0041\u00e9""#);
        assert!(t.is_shared());
        assert_eq!(t.to_str(), "a\nb\t\"q\"\\ / Aé");
        assert!(matches!(t.to_str(), Cow::Owned(_)));
        assert_eq!(t.clone().into_string(), "a\nb\t\"q\"\\ / Aé");
    }

    #[test]
    fn unicode_raw_and_escaped_pairs() {
        assert_eq!(shared("\"héllo — 日本 😀\""), "héllo — 日本 😀");
        // An escaped surrogate pair is decoded at once (to check it pairs).
        let pair = shared(r#""x\ud83d\ude00y""#);
        assert_eq!(pair, "x😀y");
        assert!(!pair.is_shared());
        assert_eq!(shared(r#""\uD83D\uDE00""#), "😀");
        // An escaped backslash, then `ud83d` as text: valid, read as is.
        assert_eq!(shared(r#""a\\ud83d""#), r"a\ud83d");
        assert_eq!(shared(r#""\\u""#), r"\u");
    }

    #[test]
    fn rejects_what_serde_rejects() {
        let bad = |json: &str| {
            let buf = Arc::new(json.to_owned());
            SharedText::from_shared(&buf, 0..buf.len()).is_err()
        };
        assert!(bad(r#""\ud83d""#), "lone high surrogate");
        assert!(bad(r#""\ude00""#), "lone low surrogate");
        assert!(bad(r#""\ud83dx""#));
        assert!(bad(r#""\ud83d\u0041""#));
        assert!(bad("\"a\u{1}b\""), "raw control character");
        assert!(bad(r#""\q""#), "unknown escape");
        assert!(bad(r#""abc"#), "unterminated");
        assert!(bad(r#""a" "b""#), "two literals");
        assert!(bad("12"), "not a string");
        assert!(bad(""));
    }

    #[test]
    fn range_picks_a_literal_inside_a_larger_buffer() {
        let buf = Arc::new(r#"{"resultText":"x\ny","other":1}"#.to_owned());
        let start = buf.find("\"x").unwrap();
        let end = buf.find(",\"other").unwrap();
        let t = SharedText::from_shared(&buf, start..end).unwrap();
        assert_eq!(t, "x\ny");
        assert!(SharedText::from_shared(&buf, start..end + 1).is_err());
        assert!(SharedText::from_shared(&buf, start..buf.len() + 10).is_err());
    }

    #[test]
    fn a_window_is_small() {
        // What a replayed record pays for its text instead of a copy.
        assert_eq!(std::mem::size_of::<SharedText>(), 64);
    }

    #[test]
    fn empty_text() {
        assert!(SharedText::new().is_empty());
        assert_eq!(SharedText::default(), "");
        let t = shared(r#""""#);
        assert!(t.is_empty());
        assert!(t.is_shared());
        assert_eq!(t, SharedText::new());
        assert!(!shared(r#""\n""#).is_empty());
    }

    #[test]
    fn owned_and_shared_compare_by_text() {
        let owned = SharedText::from("a\nb".to_owned());
        let escaped = shared(r#""a\nb""#);
        let spelled_out = shared(r#""a\u000ab""#);
        assert_eq!(owned, escaped);
        assert_eq!(escaped, spelled_out);
        assert_eq!(escaped, "a\nb".to_owned());
        assert_ne!(escaped, shared(r#""a\nc""#));
        assert_eq!(format!("{escaped:?}"), format!("{:?}", "a\nb"));
        assert_eq!(escaped.to_string(), "a\nb");
    }

    #[test]
    fn serde_round_trip_writes_the_decoded_text() {
        for json in [
            r#""plain""#,
            r#""a\nb""#,
            r#""\u0041\/""#,
            r#""é😀""#,
            r#""""#,
        ] {
            let t = shared(json);
            let out = serde_json::to_string(&t).unwrap();
            let decoded: String = serde_json::from_str(json).unwrap();
            assert_eq!(out, serde_json::to_string(&decoded).unwrap());
            let back: SharedText = serde_json::from_str(&out).unwrap();
            assert!(!back.is_shared());
            assert_eq!(back, t);
        }
        assert!(serde_json::from_str::<SharedText>("null").is_err());
    }

    proptest::proptest! {
        /// Any candidate literal, made of pieces that are valid or not, is
        /// accepted exactly when serde accepts it as a `String`, and then
        /// reads as serde decodes it.
        #[test]
        fn agrees_with_serde(
            pieces in proptest::collection::vec(
                proptest::string::string_regex(
                    r#"[a-z ]{0,3}|é|😀|\\[nrtbf"/\\q]|\\u[0-9a-fA-F]{4}|\\u[dD][89abAB][0-9a-f]{2}|\\u[dD][c-fC-F][0-9a-f]{2}|\x01|""#,
                ).unwrap(),
                0..8,
            ),
            close in proptest::bool::ANY,
        ) {
            let json = format!("\"{}{}", pieces.concat(), if close { "\"" } else { "" });
            let buf = Arc::new(json.clone());
            let ours = SharedText::from_shared(&buf, 0..buf.len());
            // serde also takes whitespace after the closing quote; a literal's
            // window never has any.
            let serde = serde_json::from_str::<String>(&json)
                .ok()
                .filter(|_| !json.ends_with(|c: char| c.is_ascii_whitespace()))
                .ok_or(());
            proptest::prop_assert_eq!(ours.is_ok(), serde.is_ok(), "{}", json);
            if let (Ok(ours), Ok(serde)) = (ours, serde) {
                proptest::prop_assert_eq!(ours.to_str(), serde);
            }
        }
    }
}
