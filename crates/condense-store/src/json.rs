//! JSON text the way JavaScript's `JSON.stringify` writes it.
//!
//! pi and pi-condense write session lines with `JSON.stringify`. serde_json
//! writes the same text for strings, integers, booleans and nulls, and keeps
//! object keys in insertion order (the `preserve_order` feature), but it
//! writes floating-point numbers differently: `0.0` where JavaScript writes
//! `0`, `1e21` where JavaScript writes `1e+21`. [`to_string`] plugs a
//! formatter into serde_json that writes every `f64` as JavaScript's
//! `Number.prototype.toString` does, so an entry condense writes is
//! byte-identical to the one pi-condense would have written.

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// Serializes `value` compactly, with numbers formatted as JavaScript does.
///
/// Non-finite floats become `null`, as in `JSON.stringify`.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JsFormatter);
    value.serialize(&mut ser)?;
    // serde_json only ever writes valid UTF-8.
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// A finite `f64` as JavaScript's `Number.prototype.toString` writes it
/// (`NaN`, `Infinity` and `-Infinity` for the non-finite values).
pub fn js_number(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if value == 0.0 {
        // Both zeros print as "0".
        return "0".into();
    }
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` prints the shortest digit string that round-trips,
    // e.g. "1.2345e3"; split it into digits and a decimal exponent.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    // The value is 0.d1d2…dk × 10^n.
    let n = exp + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        let e = n - 1;
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&e.abs().to_string());
    }
    out
}

/// serde_json's compact formatter with JavaScript number formatting.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsFormatter;

impl Formatter for JsFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.is_finite() {
            writer.write_all(js_number(value).as_bytes())
        } else {
            CompactFormatter.write_null(writer)
        }
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        // Widen as JavaScript would see the stored double.
        self.write_f64(writer, f64::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_as_javascript_does() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (100.0, "100"),
            (0.5, "0.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123.456, "123.456"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (1e-7, "1e-7"),
            (2.5e-8, "2.5e-8"),
            (1795969940838.0, "1795969940838"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (value, text) in cases {
            assert_eq!(js_number(*value), *text, "{value:e}");
        }
        assert_eq!(js_number(f64::NAN), "NaN");
        assert_eq!(js_number(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn serializes_like_json_stringify() {
        let v = json!({"b": 0.0, "a": [1.5, -2, 1e21], "s": "x\u{1}\"\n", "n": null});
        assert_eq!(
            to_string(&v).unwrap(),
            r#"{"b":0,"a":[1.5,-2,1e+21],"s":"x\u0001\"\n","n":null}"#
        );
        assert_eq!(to_string(&f64::NAN).unwrap(), "null");
        assert_eq!(to_string(&2.0f32).unwrap(), "2");
    }
}
