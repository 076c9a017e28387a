//! What a provider reported for a call, as pi records it on the assistant
//! message (`usage`), and its price under a profile.
//!
//! The simulator prices the prompts it models; this prices what a session
//! actually recorded: the provider's own split of plain input, cache writes
//! and cache reads.

use serde::Deserialize;

use super::bill::CallBill;
use super::price::PriceProfile;
use crate::message::{Message, Role};

/// Usage a provider reported for one call (pi's `usage` object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedUsage {
    /// Uncached prompt tokens.
    #[serde(default)]
    pub input: u64,
    /// Prompt tokens read from the cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Prompt tokens written to the cache.
    #[serde(default)]
    pub cache_write: u64,
    /// Output tokens.
    #[serde(default)]
    pub output: u64,
    /// What pi priced the call at (`cost.total`, US dollars; 0 when absent).
    #[serde(default, deserialize_with = "cost_total")]
    pub cost: f64,
}

/// `cost.total`, tolerating a missing or malformed `cost`: the token counts
/// are what the economics rest on, the dollar figure is pi's own.
fn cost_total<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    struct Cost {
        #[serde(default)]
        total: Option<f64>,
    }
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value::<Cost>(v)
        .ok()
        .and_then(|c| c.total)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .unwrap_or(0.0))
}

#[derive(Deserialize)]
struct UsageField {
    #[serde(default)]
    usage: Option<RecordedUsage>,
}

impl RecordedUsage {
    /// The whole prompt: `input + cacheRead + cacheWrite`.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// The usage an assistant message recorded; `None` for another role, a
    /// message without usage, or usage that does not parse (a count that is
    /// not a non-negative integer, or one past 1,000,000,000 tokens: no
    /// provider bills a billion tokens a call, and sums of such counts leave
    /// any figure meaningless).
    pub fn of_message(message: &Message) -> Option<RecordedUsage> {
        if !message.is(&Role::Assistant) {
            return None;
        }
        let usage = serde_json::from_str::<UsageField>(&message.json())
            .ok()?
            .usage?;
        let counts = [
            usage.input,
            usage.cache_read,
            usage.cache_write,
            usage.output,
        ];
        counts
            .iter()
            .all(|n| *n <= MAX_RECORDED_TOKENS)
            .then_some(usage)
    }

    /// An assistant message that records a `usage` [`of_message`] refuses
    /// (a count that is negative, not a whole number, or past
    /// [`MAX_RECORDED_TOKENS`]): the call is left out of the economics, and
    /// whoever shows them says so instead of leaving it out silently.
    ///
    /// [`of_message`]: RecordedUsage::of_message
    pub fn refused(message: &Message) -> bool {
        #[derive(Deserialize)]
        struct AnyUsage {
            #[serde(default)]
            usage: Option<serde_json::Value>,
        }
        message.is(&Role::Assistant)
            && serde_json::from_str::<AnyUsage>(&message.json())
                .is_ok_and(|m| m.usage.is_some_and(|u| !u.is_null()))
            && Self::of_message(message).is_none()
    }
}

/// The largest token count a recorded usage is read with.
pub const MAX_RECORDED_TOKENS: u64 = 1_000_000_000;

/// What the provider billed a recorded call, priced by `profile`: its
/// recorded split of plain input, cache writes and cache reads. A profile
/// without caching bills every prompt token as input.
pub fn recorded_bill(profile: &PriceProfile, usage: &RecordedUsage) -> CallBill {
    let output_units = usage.output as f64 * profile.output;
    match profile.cache {
        Some(c) => CallBill {
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            uncached: usage.input,
            output: usage.output,
            input_units: usage.input as f64
                + usage.cache_write as f64 * c.write
                + usage.cache_read as f64 * c.read,
            output_units,
        },
        None => CallBill {
            uncached: usage.prompt(),
            output: usage.output,
            input_units: usage.prompt() as f64,
            output_units,
            ..CallBill::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(usage: &str) -> Message {
        Message::from_json(&format!(
            r#"{{"role":"assistant","content":[],"usage":{usage}}}"#
        ))
        .expect("message")
    }

    #[test]
    fn a_count_past_a_billion_tokens_is_no_usage() {
        let absurd =
            assistant(r#"{"input":18446744073709551615,"output":4,"cacheRead":5,"cacheWrite":6}"#);
        assert_eq!(RecordedUsage::of_message(&absurd), None);
        assert!(RecordedUsage::refused(&absurd));
        let big = assistant(r#"{"input":1000000000,"output":4,"cacheRead":5,"cacheWrite":6}"#);
        assert!(RecordedUsage::of_message(&big).is_some());
        assert!(!RecordedUsage::refused(&big));
        assert!(RecordedUsage::refused(&assistant(r#"{"input":-3}"#)));
        assert!(!RecordedUsage::refused(&assistant("null")));
        let no_usage = Message::from_json(r#"{"role":"assistant","content":[]}"#).expect("message");
        assert!(!RecordedUsage::refused(&no_usage));
    }

    #[test]
    fn usage_is_read_from_assistant_messages_only() {
        let m = assistant(
            r#"{"input":3,"output":4,"cacheRead":5,"cacheWrite":6,"totalTokens":18,"cost":{"total":0.25}}"#,
        );
        assert_eq!(
            RecordedUsage::of_message(&m),
            Some(RecordedUsage {
                input: 3,
                cache_read: 5,
                cache_write: 6,
                output: 4,
                cost: 0.25
            })
        );
        let user = Message::from_json(r#"{"role":"user","content":"hi","usage":{"input":3}}"#)
            .expect("message");
        assert_eq!(RecordedUsage::of_message(&user), None);
        let bad = assistant(r#"{"input":-3}"#);
        assert_eq!(RecordedUsage::of_message(&bad), None);
        let odd_cost = assistant(r#"{"input":1,"cost":"free"}"#);
        assert_eq!(
            RecordedUsage::of_message(&odd_cost).map(|u| u.cost),
            Some(0.0)
        );
    }
}
