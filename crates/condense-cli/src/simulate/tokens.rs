//! Counting a prompt's tokens: a model calibrated on recorded usage.
//!
//! A provider's prompt is the session's messages in its own wire format plus
//! a fixed part the session file does not hold (the system prompt and the
//! tool definitions). What carries the tokens is each message's content
//! (texts, thinking, tool-call arguments, tool output), and each message adds
//! some framing of its own. So a prompt's tokens are modelled as
//!
//! `overhead + Σ over messages (per_unit · units(message) + per_message)`
//!
//! where `units` is the content's length in characters (JavaScript string
//! units), or, to compare, a BPE tokenizer's count of the same text. The
//! constants are fitted on sessions that recorded their usage
//! ([`super::fidelity::calibrate`]; figures and commands in docs/economy.md).

use condense_core::js_len;
use condense_core::Message;

/// How the simulator counts tokens.
pub trait TokenCount: Sync {
    /// Tokens of one message of the prompt.
    fn message(&self, message: &Message) -> u64;
    /// Tokens of a plain text (e.g. a summarizer prompt a policy models).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the tests' check of text_counter")
    )]
    fn text(&self, text: &str) -> u64;
    /// Tokens of an ordinary text of `chars` characters (a text modelled
    /// by its size alone), at [`TokenCount::text_counter`]'s rate.
    fn chars(&self, chars: usize) -> u64;
    /// A counter of plain texts that outlives `self` (for the summarizer
    /// an engine-driven policy runs): by characters, at this model's rate.
    fn text_counter(&self) -> condense_engine::drive::TextTokens;
    /// Tokens of every prompt the session file does not hold.
    fn overhead(&self) -> u64;
}

/// What a message's content is measured in.
pub trait Measure: Sync {
    /// The unit's name in reports (`char`, `o200k`, …).
    fn name(&self) -> &str;
    /// The size of a text.
    fn text(&self, text: &str) -> u64;
    /// Units per character of ordinary text (to count a text by its
    /// length alone).
    fn units_per_char(&self) -> f64 {
        1.0
    }
}

/// Characters (JavaScript string units).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chars;

impl Measure for Chars {
    fn name(&self) -> &str {
        "char"
    }
    fn text(&self, text: &str) -> u64 {
        js_len(text) as u64
    }
}

/// The constants of the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coefficients {
    /// Tokens per unit of content.
    pub per_unit: f64,
    /// Tokens each message adds beyond its content.
    pub per_message: f64,
    /// Fixed tokens per prompt (system prompt, tool definitions).
    pub overhead: u64,
}

/// Fitted on the two pi-mono sessions with `condense simulate --calibrate`
/// (docs/economy.md).
pub const DEFAULT_COEFFICIENTS: Coefficients = Coefficients {
    per_unit: 0.3085,
    per_message: 34.51,
    overhead: 1675,
};

/// Tokens an image block is counted as (a typical screenshot; the fixtures
/// have none to calibrate on).
pub const IMAGE_TOKENS: f64 = 1600.0;

/// A measure with its coefficients.
#[derive(Debug, Clone, Copy)]
pub struct TokenModel<M> {
    /// What content is measured in.
    pub measure: M,
    /// The constants.
    pub coefficients: Coefficients,
}

impl<M: Measure> TokenCount for TokenModel<M> {
    fn message(&self, message: &Message) -> u64 {
        let c = &self.coefficients;
        let Some(content) = content_size(message, &self.measure) else {
            return 0;
        };
        let tokens = c.per_unit * content.units as f64
            + IMAGE_TOKENS * content.images as f64
            + c.per_message;
        tokens.max(0.0).round() as u64
    }
    fn text(&self, text: &str) -> u64 {
        (self.coefficients.per_unit * self.measure.text(text) as f64)
            .max(0.0)
            .round() as u64
    }
    fn chars(&self, chars: usize) -> u64 {
        let rate = self.coefficients.per_unit * self.measure.units_per_char();
        (rate * chars as f64).max(0.0).round() as u64
    }
    fn text_counter(&self) -> condense_engine::drive::TextTokens {
        let rate = self.coefficients.per_unit * self.measure.units_per_char();
        std::sync::Arc::new(move |text: &str| (rate * js_len(text) as f64).max(0.0).round() as u64)
    }
    fn overhead(&self) -> u64 {
        self.coefficients.overhead
    }
}

/// A message's content, measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContentSize {
    /// Units of text.
    pub units: u64,
    /// Image blocks.
    pub images: u64,
}

/// Measures what of `message` reaches the model
/// ([`condense_core::visit_prompt_text`]: content and pi's text fields, not
/// `details` or usage); `None` for a message the host does not send (a
/// failed or aborted assistant message, a bash run excluded from the
/// context).
pub fn content_size(message: &Message, measure: &dyn Measure) -> Option<ContentSize> {
    let mut units = 0;
    let images = condense_core::visit_prompt_text(&message.json(), &mut |t| {
        units += measure.text(t);
    })?;
    Some(ContentSize { units, images })
}

/// Counts with a BPE tokenizer shipped in `tiktoken-rs`, to compare with
/// characters.
#[cfg(feature = "tiktoken")]
pub struct Bpe {
    name: String,
    bpe: tiktoken_rs::CoreBPE,
}

#[cfg(feature = "tiktoken")]
impl Bpe {
    /// `o200k` or `cl100k`.
    pub fn named(name: &str) -> Result<Bpe, String> {
        let bpe = match name {
            "o200k" => tiktoken_rs::o200k_base(),
            "cl100k" => tiktoken_rs::cl100k_base(),
            other => {
                return Err(format!(
                    "unknown tokenizer `{other}` (known: o200k, cl100k)"
                ))
            }
        }
        .map_err(|e| format!("loading tokenizer {name}: {e}"))?;
        Ok(Bpe {
            name: name.to_owned(),
            bpe,
        })
    }
}

#[cfg(feature = "tiktoken")]
impl Measure for Bpe {
    fn name(&self) -> &str {
        &self.name
    }
    fn text(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }
    fn units_per_char(&self) -> f64 {
        // About four characters of English and code per BPE token.
        0.25
    }
}

/// Least squares for `y = b·x + c·m` (no intercept); `None` when the two
/// columns are degenerate.
pub fn fit_two(points: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let (mut xx, mut xm, mut mm, mut xy, mut my) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, m, y) in points {
        xx += x * x;
        xm += x * m;
        mm += m * m;
        xy += x * y;
        my += m * y;
    }
    let det = xx * mm - xm * xm;
    if det.abs() <= f64::EPSILON * xx * mm || det == 0.0 {
        return None;
    }
    Some(((xy * mm - my * xm) / det, (my * xx - xy * xm) / det))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_columns_are_recovered_from_exact_points() {
        let pts: Vec<(f64, f64, f64)> = (1..20)
            .map(|i| {
                let (x, m) = (i as f64 * 1000.0, (i * i % 7) as f64 + 1.0);
                (x, m, 0.3 * x + 20.0 * m)
            })
            .collect();
        let (b, c) = fit_two(&pts).unwrap();
        assert!((b - 0.3).abs() < 1e-9 && (c - 20.0).abs() < 1e-6, "{b} {c}");
        assert_eq!(fit_two(&[(1.0, 2.0, 3.0), (2.0, 4.0, 6.0)]), None);
    }

    #[test]
    fn content_is_what_reaches_the_model() {
        let m = Message::from_json(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"abc","thinkingSignature":"zzzzzzzz"},{"type":"text","text":"hé"},{"type":"toolCall","id":"x","name":"bash","arguments":{"command":"ls"}},{"type":"image","data":"AAAA"}],"usage":{"input":1}}"#,
        )
        .unwrap();
        // "abc" + "hé" + "bash" + {"command":"ls"}
        assert_eq!(
            content_size(&m, &Chars),
            Some(ContentSize {
                units: 3 + 2 + 4 + 16,
                images: 1
            })
        );
        let s =
            Message::from_json(r#"{"role":"compactionSummary","summary":"done","tokensBefore":5}"#)
                .unwrap();
        assert_eq!(content_size(&s, &Chars).map(|c| c.units), Some(4));
        let b = Message::from_json(
            r#"{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":0}"#,
        )
        .unwrap();
        assert_eq!(content_size(&b, &Chars).map(|c| c.units), Some(2 + 3));
        let u = Message::from_json(r#"{"role":"user","content":"plain \"text\""}"#).unwrap();
        assert_eq!(content_size(&u, &Chars).map(|c| c.units), Some(12));
    }

    #[test]
    fn messages_pi_does_not_send_count_nothing() {
        let model = TokenModel {
            measure: Chars,
            coefficients: Coefficients {
                per_unit: 1.0,
                per_message: 10.0,
                overhead: 0,
            },
        };
        for json in [
            r#"{"role":"assistant","content":[{"type":"text","text":"partial"}],"stopReason":"aborted"}"#,
            r#"{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}"#,
            r#"{"role":"bashExecution","command":"ls","output":"x","excludeFromContext":true}"#,
        ] {
            assert_eq!(
                model.message(&Message::from_json(json).unwrap()),
                0,
                "{json}"
            );
        }
        let ok = Message::from_json(
            r#"{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}"#,
        )
        .unwrap();
        assert_eq!(model.message(&ok), 14);
    }

    #[test]
    fn a_message_counts_its_content_framing_and_images() {
        let model = TokenModel {
            measure: Chars,
            coefficients: Coefficients {
                per_unit: 0.5,
                per_message: 10.0,
                overhead: 7,
            },
        };
        let m = Message::from_json(r#"{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image","data":""}]}"#).unwrap();
        assert_eq!(model.message(&m), (0.5 * 4.0 + IMAGE_TOKENS + 10.0) as u64);
        assert_eq!(model.text("abcdef"), 3);
        assert_eq!(model.overhead(), 7);
    }
}
