//! Numbers as people read them: `340`, `12.3k`, `2.5M`.

/// A count in pi-condense's compact form: `340`, `1.3k`, `2.5M`.
///
/// One decimal, rounded as JavaScript's `toFixed(1)` rounds: by the exact
/// value of the quotient, an exact tie upward. So 1250 is `1.3k`; 1150 is
/// `1.1k`, because 1.15 is not exactly representable and lies below the tie.
/// The footer and `/pruner status` both print counts with this.
pub fn format_count(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{}M", to_fixed1(n as f64 / 1_000_000.0))
    } else if n >= 1000 {
        format!("{}k", to_fixed1(n as f64 / 1000.0))
    } else {
        n.to_string()
    }
}

/// `x.toFixed(1)` for a non-negative `x`. Rust's formatting rounds an exact
/// tie to even where JavaScript rounds it up; the exact ties at one decimal
/// are the quarters `j/4` with `j` odd (`x.25`, `x.75`).
fn to_fixed1(x: f64) -> String {
    let q = x * 4.0;
    if q.fract() == 0.0 && q < 9.0e15 && (q as i64) % 2 == 1 {
        let tenths = (q as i64 * 10 + 2) / 4;
        return format!("{}.{}", tenths / 10, tenths % 10);
    }
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_ties_round_up_as_javascript_does() {
        assert_eq!(format_count(1250), "1.3k");
        assert_eq!(format_count(1750), "1.8k");
        assert_eq!(format_count(2250), "2.3k");
        assert_eq!(format_count(12_250), "12.3k");
        assert_eq!(format_count(1_250_000), "1.3M");
        assert_eq!(format_count(2_750_000), "2.8M");
    }

    #[test]
    fn inexact_near_ties_round_by_their_binary_value() {
        // 1.15 and 1.45 lie just below their ties in binary, 1.05 and 1.35
        // just above: `(1.15).toFixed(1)` is "1.1" in JavaScript too.
        assert_eq!(format_count(1150), "1.1k");
        assert_eq!(format_count(1050), "1.1k");
        assert_eq!(format_count(1350), "1.4k");
        assert_eq!(format_count(1450), "1.4k");
    }

    #[test]
    fn thresholds_and_plain_numbers() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1.0k");
        assert_eq!(format_count(999_949), "999.9k");
        assert_eq!(format_count(999_999), "1000.0k");
        assert_eq!(format_count(1_000_000), "1.0M");
        assert_eq!(format_count(2_500_000), "2.5M");
    }
}
