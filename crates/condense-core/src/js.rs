//! JavaScript string semantics that wire compatibility depends on.
//!
//! pi-condense measures sizes and thresholds with JavaScript's `String.length`,
//! which counts UTF-16 code units, not bytes or chars. Every threshold that
//! pi-condense compares (`minBatchChars`, `spillThreshold`, the oversized skip,
//! the 2,000-char serializer cut) is measured in these units here too.

/// Length of `s` in UTF-16 code units, as JavaScript's `String.length`.
pub fn js_len(s: &str) -> usize {
    // Fast path: ASCII bytes are one unit each.
    let bytes = s.as_bytes();
    if bytes.is_ascii() {
        return bytes.len();
    }
    s.chars().map(char::len_utf16).sum()
}

/// The longest prefix of `s` at most `units` UTF-16 code units long that ends
/// on a char boundary (JavaScript's `slice(0, units)`, without splitting a
/// surrogate pair).
pub fn js_prefix(s: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if used + w > units {
            return &s[..i];
        }
        used += w;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_utf16_units() {
        assert_eq!(js_len("abc"), 3);
        assert_eq!(js_len("é"), 1);
        assert_eq!(js_len("😀"), 2);
        assert_eq!(js_len("a😀b"), 4);
    }

    #[test]
    fn prefix_never_splits_a_pair() {
        assert_eq!(js_prefix("abcdef", 3), "abc");
        assert_eq!(js_prefix("a😀b", 2), "a");
        assert_eq!(js_prefix("a😀b", 3), "a😀");
        assert_eq!(js_prefix("ab", 10), "ab");
    }
}
