//! Content-hash dedup: identical outputs of the same tool share one record.
//!
//! The hash is SHA-1 over `toolName`, a NUL byte, and the normalized result
//! text, hex-encoded, exactly as pi-condense computes it, so hashes persisted
//! by either project match.

use sha1::{Digest, Sha1};

/// Conservative normalization: CRLF to LF, trailing spaces and tabs stripped
/// per line, then the whole text trimmed (JavaScript `trim()` semantics).
/// Internal whitespace and case are kept so different outputs never collide.
pub fn normalize(text: &str) -> String {
    let unix = text.replace("\r\n", "\n");
    let mut out = String::with_capacity(unix.len());
    for (i, line) in unix.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end_matches([' ', '\t']));
    }
    js_trim(&out).to_owned()
}

/// JavaScript's `String.prototype.trim`: Unicode white space plus line
/// terminators and the BOM.
fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// `sha1(toolName + "\0" + normalize(text))` as lowercase hex.
pub fn content_hash(tool_name: &str, text: &str) -> String {
    let mut h = Sha1::new();
    h.update(tool_name.as_bytes());
    h.update([0u8]);
    feed_normalized(text, |piece| h.update(piece.as_bytes()));
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Hands [`normalize`]`(text)` to `out` in pieces, without building it: a
/// giant output is hashed with no copy of it (only a run of white space that
/// may turn out to be trailing is held back).
fn feed_normalized(text: &str, mut out: impl FnMut(&str)) {
    let is_space = |c: char| c.is_whitespace() || c == '\u{feff}';
    let mut started = false;
    let mut held = String::new();
    let mut piece = |p: &str| {
        let p = if started {
            p
        } else {
            p.trim_start_matches(is_space)
        };
        let body = p.trim_end_matches(is_space).len();
        if body == 0 {
            if started {
                held.push_str(p);
            }
            return;
        }
        started = true;
        if !held.is_empty() {
            out(&held);
            held.clear();
        }
        out(&p[..body]);
        held.push_str(&p[body..]);
    };
    let mut lines = text.split('\n').peekable();
    let mut first = true;
    while let Some(line) = lines.next() {
        // A line followed by `\n` loses one `\r`: CRLF becomes LF.
        let line = match lines.peek() {
            Some(_) => line.strip_suffix('\r').unwrap_or(line),
            None => line,
        };
        if !first {
            piece("\n");
        }
        first = false;
        piece(line.trim_end_matches([' ', '\t']));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_is_conservative() {
        assert_eq!(normalize("a  \r\nb\t\n\n  c  \n"), "a\nb\n\n  c");
        assert_eq!(normalize("A b"), "A b");
        assert_ne!(normalize("a b"), normalize("a  b"));
    }

    proptest::proptest! {
        #[test]
        fn streamed_normalization_equals_normalize(
            text in "[ \t\r\na-c\u{feff}\u{a0}\u{2028}é]{0,40}"
        ) {
            let mut streamed = String::new();
            feed_normalized(&text, |p| streamed.push_str(p));
            proptest::prop_assert_eq!(streamed, normalize(&text));
        }
    }

    #[test]
    fn hash_ignores_trailing_noise_but_not_tool_name() {
        assert_eq!(content_hash("read", "x\r\n"), content_hash("read", "x"));
        assert_ne!(content_hash("read", "x"), content_hash("bash", "x"));
        // sha1("read\0x")
        assert_eq!(content_hash("read", "x").len(), 40);
    }
}
