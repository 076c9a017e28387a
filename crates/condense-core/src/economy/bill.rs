//! Pricing one call, and adding calls up.
//!
//! A call's prompt is billed in three parts. The prefix it shares with the
//! previous call's prompt is a cache read, if the cache is still warm: the
//! previous call was at most the TTL earlier (by the session's timestamps)
//! and the prefix is long enough to have been cached. The rest is written to
//! the cache, or billed as plain input when the prompt is too short to be
//! cached at all. A profile without caching bills every token as input.

use super::price::PriceProfile;

/// What one call sends and receives, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallTokens {
    /// When the call was made (ms since the epoch), if known.
    pub at_ms: Option<i64>,
    /// The whole prompt.
    pub prompt: u64,
    /// The prefix of the prompt equal to the previous call's prompt's
    /// (0 when the cache cannot apply, e.g. after a model change).
    pub shared_prefix: u64,
    /// Output tokens.
    pub output: u64,
}

/// What the cache remembers of the previous call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousCall {
    /// When it was made, if known.
    pub at_ms: Option<i64>,
}

/// One call, billed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CallBill {
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache.
    pub cache_write: u64,
    /// Prompt tokens billed as plain input.
    pub uncached: u64,
    /// Output tokens.
    pub output: u64,
    /// The prompt's price, in main-model input units.
    pub input_units: f64,
    /// The output's price, in the same units.
    pub output_units: f64,
}

/// Bills `call`, made after `previous` (`None`: the first call, cold).
///
/// A gap is measured between the two calls' timestamps; an unknown or
/// negative gap (clock skew) counts as no gap, since the file cannot show the
/// cache went cold.
pub fn bill_call(
    profile: &PriceProfile,
    previous: Option<PreviousCall>,
    call: CallTokens,
) -> CallBill {
    let output_units = call.output as f64 * profile.output;
    let Some(cache) = profile.cache else {
        return CallBill {
            uncached: call.prompt,
            output: call.output,
            input_units: call.prompt as f64,
            output_units,
            ..CallBill::default()
        };
    };
    let warm = previous.is_some_and(|p| match (p.at_ms, call.at_ms) {
        (Some(before), Some(now)) => now.saturating_sub(before) <= cache.ttl_ms,
        _ => true,
    });
    let shared = call.shared_prefix.min(call.prompt);
    let cache_read = if warm && shared >= cache.min_cacheable_tokens && shared > 0 {
        shared
    } else {
        0
    };
    let rest = call.prompt - cache_read;
    let (cache_write, uncached) = if call.prompt >= cache.min_cacheable_tokens {
        (rest, 0)
    } else {
        (0, rest)
    };
    CallBill {
        cache_read,
        cache_write,
        uncached,
        output: call.output,
        input_units: uncached as f64
            + cache_write as f64 * cache.write
            + cache_read as f64 * cache.read,
        output_units,
    }
}

/// The sum of a run of calls and the summarizer's work.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BillTotals {
    /// Calls billed.
    pub calls: u64,
    /// Prompt tokens sent, summed over calls.
    pub prompt_tokens: u64,
    /// The largest prompt.
    pub peak_prompt: u64,
    /// Cache reads, writes and plain input, summed.
    pub cache_read: u64,
    /// See `cache_read`.
    pub cache_write: u64,
    /// See `cache_read`.
    pub uncached: u64,
    /// Output tokens of the main calls.
    pub output: u64,
    /// The main calls' prompt price.
    pub input_units: f64,
    /// The main calls' output price.
    pub output_units: f64,
    /// Summarizer input and output tokens.
    pub summarizer_input: u64,
    /// See `summarizer_input`.
    pub summarizer_output: u64,
    /// Their price (input and output, at the summarizer ratio; the
    /// host's compaction at the model's).
    pub summarizer_units: f64,
    /// The share of `summarizer_input` that was the host's compaction,
    /// billed at the session model's price.
    pub compaction_input: u64,
}

impl BillTotals {
    /// Adds a billed call whose prompt was `prompt` tokens.
    pub fn add_call(&mut self, prompt: u64, bill: &CallBill) {
        self.calls += 1;
        self.prompt_tokens = self.prompt_tokens.saturating_add(prompt);
        self.peak_prompt = self.peak_prompt.max(prompt);
        self.cache_read = self.cache_read.saturating_add(bill.cache_read);
        self.cache_write = self.cache_write.saturating_add(bill.cache_write);
        self.uncached = self.uncached.saturating_add(bill.uncached);
        self.output = self.output.saturating_add(bill.output);
        self.input_units += bill.input_units;
        self.output_units += bill.output_units;
    }

    /// Adds summarizer work (never cached: each batch is a new prompt).
    pub fn add_summarizer(&mut self, profile: &PriceProfile, input: u64, output: u64) {
        self.summarizer_input = self.summarizer_input.saturating_add(input);
        self.summarizer_output = self.summarizer_output.saturating_add(output);
        self.summarizer_units +=
            profile.summarizer * (input as f64 + output as f64 * profile.output);
    }

    /// Adds the host's own compaction work (pi summarizing what it
    /// compacts): summarizer tokens, billed at the session model's price,
    /// which pi compacts with, not at condense's summarizer's.
    pub fn add_compaction(&mut self, profile: &PriceProfile, input: u64, output: u64) {
        self.compaction_input = self.compaction_input.saturating_add(input);
        self.summarizer_input = self.summarizer_input.saturating_add(input);
        self.summarizer_output = self.summarizer_output.saturating_add(output);
        self.summarizer_units += input as f64 + output as f64 * profile.output;
    }

    /// Adds another run's totals (a corpus sum).
    pub fn merge(&mut self, other: &BillTotals) {
        self.calls = self.calls.saturating_add(other.calls);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.peak_prompt = self.peak_prompt.max(other.peak_prompt);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.uncached = self.uncached.saturating_add(other.uncached);
        self.output = self.output.saturating_add(other.output);
        self.input_units += other.input_units;
        self.output_units += other.output_units;
        self.summarizer_input = self.summarizer_input.saturating_add(other.summarizer_input);
        self.summarizer_output = self
            .summarizer_output
            .saturating_add(other.summarizer_output);
        self.summarizer_units += other.summarizer_units;
        self.compaction_input = self.compaction_input.saturating_add(other.compaction_input);
    }

    /// Billed input: the main prompts plus the summarizer's input, in units
    /// (the figure policies are compared by).
    pub fn billed_input_units(&self, profile: &PriceProfile) -> f64 {
        let compaction = self.compaction_input.min(self.summarizer_input);
        self.input_units
            + profile.summarizer * (self.summarizer_input - compaction) as f64
            + compaction as f64
    }

    /// Everything: prompts, outputs and the summarizer, in units.
    pub fn total_units(&self) -> f64 {
        self.input_units + self.output_units + self.summarizer_units
    }

    /// [`total_units`](Self::total_units) in US dollars.
    pub fn usd(&self, profile: &PriceProfile) -> f64 {
        self.total_units() * profile.usd_per_mtok_input / 1e6
    }

    /// The share of prompt tokens read from the cache (0 with no prompts).
    pub fn cache_hit_share(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cache_read as f64 / self.prompt_tokens as f64
        }
    }
}
