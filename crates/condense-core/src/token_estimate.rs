//! The one estimate of tokens from chars that pricing, metrics and the
//! render's totals share, so their numbers agree.

/// `Math.round(chars / 4)`, in integers: a remainder of two quarters or
/// more rounds up, as the float did for every length below 2^53. Pricing
/// sums this over every message of a prompt several times per call, and
/// the float's rounding was a library call each time.
pub fn chars_to_tokens(chars: usize) -> u64 {
    (chars / 4 + usize::from(chars % 4 >= 2)) as u64
}

#[cfg(test)]
mod tests {
    use super::chars_to_tokens;

    /// The integer form gives what `Math.round(chars / 4)` gives: the halves
    /// round up, the quarters down, at small and large lengths alike.
    #[test]
    fn chars_to_tokens_rounds_as_math_round() {
        let float = |c: usize| ((c as f64) / 4.0).round() as u64;
        for c in (0..4096).chain((1usize << 40) - 4096..(1usize << 40) + 4096) {
            assert_eq!(chars_to_tokens(c), float(c), "{c}");
        }
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 6, 7].map(chars_to_tokens),
            [0, 0, 1, 1, 1, 1, 2, 2]
        );
    }
}
