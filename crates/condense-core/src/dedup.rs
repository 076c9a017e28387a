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
    h.update(normalize(text).as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
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

    #[test]
    fn hash_ignores_trailing_noise_but_not_tool_name() {
        assert_eq!(content_hash("read", "x\r\n"), content_hash("read", "x"));
        assert_ne!(content_hash("read", "x"), content_hash("bash", "x"));
        // sha1("read\0x")
        assert_eq!(content_hash("read", "x").len(), 40);
    }
}
