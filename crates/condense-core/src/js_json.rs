//! JSON settings read as they reach condense through pi: JavaScript's
//! `JSON.parse` of the file, then the shim's `JSON.stringify`.
//!
//! Two kinds of valid JSON text make serde refuse the whole value:
//! - a lone surrogate escape (`"\ud83d"`, half an emoji), which
//!   `JSON.stringify` writes for a string cut inside a pair
//!   ([`crate::surrogates`]); it is read as U+FFFD;
//! - a number past `f64`'s range (`1e400`), which `JSON.parse` reads as
//!   `Infinity` and `JSON.stringify` writes as `null`; it is read as `null`,
//!   so the CLI sees what the live sidecar is sent (and the setting warns as
//!   a `null` would there).

use crate::surrogates::replace_lone_surrogates;

/// Parses JSON text as pi would have handed it to condense (see the module
/// docs): for values condense only reads (a setting), never for a message
/// whose bytes it passes on. Any other error is serde's.
pub fn parse_lossy(json: &str) -> serde_json::Result<serde_json::Value> {
    serde_json::from_str(json).or_else(|e| {
        let unpaired = replace_lone_surrogates(json);
        let text = unpaired.as_deref().unwrap_or(json);
        match (replace_infinite_numbers(text), unpaired.is_some()) {
            (Some(fixed), _) => serde_json::from_str(&fixed),
            (None, true) => serde_json::from_str(text),
            (None, false) => Err(e),
        }
    })
}

/// `json` with every number outside strings that `f64` cannot hold written
/// as `null`, or `None` when it has none.
fn replace_infinite_numbers(json: &str) -> Option<String> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b != b'-' && !b.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        {
            i += 1;
        }
        // The scan stops at ASCII bytes, so both ends are char boundaries.
        let token = &json[start..i];
        if token.parse::<f64>().is_ok_and(f64::is_infinite) {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
            out.push_str(&json[copied..start]);
            out.push_str("null");
            copied = i;
        }
    }
    let mut out = out?;
    out.push_str(&json[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{parse_lossy, replace_infinite_numbers as fix};

    #[test]
    fn numbers_past_f64_read_as_null_as_javascript_hands_them_on() {
        let v = parse_lossy(r#"{"a": 1e400, "b": [-1E+999, 2.5e3], "c": "1e400", "d": 1e-400}"#)
            .unwrap();
        assert_eq!(v["a"], serde_json::Value::Null);
        assert_eq!(v["b"], serde_json::json!([null, 2500.0]));
        assert_eq!(v["c"], "1e400", "inside a string it is text");
        assert_eq!(v["d"], 0.0, "an underflow is 0, as in JavaScript");
        let digits = format!("[{}]", "9".repeat(400));
        assert_eq!(parse_lossy(&digits).unwrap(), serde_json::json!([null]));
    }

    #[test]
    fn a_lossy_parse_reads_lone_halves_as_replacement_characters() {
        let v = parse_lossy(r#"{"p":["a\ud83d"],"q":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(v["p"][0], "a\u{fffd}");
        assert_eq!(v["q"], "\u{1f600}");
        assert!(parse_lossy("[1,").is_err());
    }

    #[test]
    fn both_kinds_together_and_other_errors_stay_errors() {
        let v = parse_lossy(r#"{"p": "x\ud83d", "n": 1e309}"#).unwrap();
        assert_eq!(v["p"], "x\u{fffd}");
        assert_eq!(v["n"], serde_json::Value::Null);
        assert!(parse_lossy("[1e400,").is_err());
        assert!(parse_lossy("{\"a\": 01}").is_err());
    }

    #[test]
    fn escaped_quotes_keep_the_scan_inside_the_string() {
        assert_eq!(fix(r#"["a\"1e400", 5]"#), None);
        assert_eq!(
            fix(r#"["a\\", 1e400]"#).as_deref(),
            Some(r#"["a\\", null]"#)
        );
        assert_eq!(fix("[1, 2.5, -3e10]"), None);
    }
}
