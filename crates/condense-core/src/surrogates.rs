//! Lone UTF-16 surrogate escapes in JSON text.
//!
//! JavaScript strings may hold half of a surrogate pair (a string cut inside
//! an emoji), and `JSON.stringify` writes it as an escape such as `"\ud83d"`.
//! That is valid JSON, but no UTF-8 string can hold it, so serde refuses it.
//! Readers that only need the text (a tool output to index, a result to
//! relocate) take it with each lone surrogate as U+FFFD: the one character a
//! UTF-8 text can show in its place.

/// `json` with every lone surrogate escape replaced by `\ufffd`, or `None`
/// when it has none. Escapes that pair up are kept; `\\u…` (an escaped
/// backslash before `u`) is not an escape and is kept too.
pub(crate) fn replace_lone_surrogates(json: &str) -> Option<String> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) != Some(&b'u') {
            // Any other escape is two bytes; skipping both keeps `\\` from
            // being read as the start of the next escape.
            i += 2;
            continue;
        }
        let Some(unit) = escape_unit(bytes, i) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let pairs =
                    escape_unit(bytes, i + 6).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
                if pairs {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
            out.push_str(&json[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    let mut out = out?;
    out.push_str(&json[copied..]);
    Some(out)
}

/// The code unit of a `\uXXXX` escape starting at `at`, if there is one.
fn escape_unit(bytes: &[u8], at: usize) -> Option<u32> {
    if bytes.get(at) != Some(&b'\\') || bytes.get(at + 1) != Some(&b'u') {
        return None;
    }
    let hex = std::str::from_utf8(bytes.get(at + 2..at + 6)?).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::replace_lone_surrogates as fix;

    #[test]
    fn lone_halves_become_replacement_characters() {
        assert_eq!(
            fix(r#"{"t":"a\ud83d"}"#).as_deref(),
            Some(r#"{"t":"a\ufffd"}"#)
        );
        assert_eq!(fix(r#"["\ude00x"]"#).as_deref(), Some(r#"["\ufffdx"]"#));
        assert_eq!(
            fix(r#"["\ud83d\ud83d\ude00"]"#).as_deref(),
            Some(r#"["\ufffd\ud83d\ude00"]"#)
        );
    }

    #[test]
    fn pairs_other_escapes_and_escaped_backslashes_are_kept() {
        assert_eq!(fix(r#"["\ud83d\ude00 \n \u0041"]"#), None);
        assert_eq!(fix(r#"["\\ud83d"]"#), None);
        assert_eq!(fix(r#"["\\\ud83d"]"#).as_deref(), Some(r#"["\\\ufffd"]"#));
        assert_eq!(fix("[\"é\\u12\"]"), None);
    }

    #[test]
    fn the_result_parses_where_the_input_did_not() {
        let json = r#"{"a":"x\udc00y","b":["\ud800"]}"#;
        assert!(serde_json::from_str::<serde_json::Value>(json).is_err());
        let fixed = fix(json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["a"], "x\u{fffd}y");
    }
}
