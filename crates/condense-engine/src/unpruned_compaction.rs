//! The host's compaction of the session as no pruning would have run it.
//!
//! The bound against no pruning ([`condense_core::NoPruningBound`]) prices
//! each call's prompt with nothing pruned. Hosts compact a prompt that nears
//! the context window, so an unpruned session compacts where a pruned one
//! runs on: past that point the unpruned prompt is a summary and the newest
//! messages, not the whole history. Priced whole, it would let the bound
//! count savings that no pruning, having compacted, never paid for, and
//! spend them on bets that lose (docs/decisions.md, "The bound sees no
//! pruning's compaction").
//!
//! So where pi would compact it (after an agent run whose last call's prompt
//! passed the window less pi's `reserveTokens`, in the host's tokens, or
//! before a prompt past the window), the unpruned prompt's messages before a cut
//! that keeps pi's `keepRecentTokens` are replaced by a summary of pi's
//! modelled size, until the host itself compacts. The compaction's own call
//! is left out on both sides: a pruned session's compaction reads less.
//!
//! Past that point a session that pruned runs on with a longer prompt than
//! no pruning's, until the host compacts it too or no pruning's prompt
//! grows past it: what those calls bill beyond no pruning is committed
//! whatever condense does next, so the bound keeps it out of the headroom
//! ([`UnprunedCompaction::postponed_cost`]).

use std::sync::LazyLock;

use condense_core::{
    Message, Role, COMPACTION_KEEP_RECENT_TOKENS, COMPACTION_RESERVE_TOKENS,
    COMPACTION_SUMMARY_TOKENS,
};

/// Host tokens per bound token before the host reported any: the token
/// model calibrated on the pi-mono sessions counts 0.3085 a character where
/// the bound counts 0.25.
const DEFAULT_SCALE: f64 = 1.23;
/// The host's count is trusted within these multiples of the bound's
/// (a usage report missing a part, or counting images, is not a tokenizer).
const SCALE_RANGE: (f64, f64) = (1.0, 3.0);

/// The prompt no pruning sends at a call ([`UnprunedCompaction::prompt`]).
#[derive(Debug)]
pub(crate) struct NoPruningPrompt {
    /// Its messages: the host's, unpruned, a summary for those replaced.
    pub(crate) messages: Vec<Message>,
    /// Their tokens, as the caller's count gives them.
    pub(crate) tokens: u64,
    /// How many leading unpruned messages a summary replaces.
    pub(crate) replaced: Option<usize>,
    /// Once replaced: the growth of the unpruned messages per call so far
    /// (bound tokens; all of them over the calls they record), and those
    /// calls.
    pub(crate) growth: Option<(f64, u64)>,
}

/// What [`UnprunedCompaction::postponed_cost`] weighs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Postponed {
    /// Bound tokens of the prompt the call sends.
    pub(crate) sent_tokens: u64,
    /// Bound tokens of no pruning's prompt.
    pub(crate) unpruned_tokens: u64,
    /// No pruning's growth per call (bound tokens).
    pub(crate) unpruned_growth: f64,
    /// The calls the branch records.
    pub(crate) calls: u64,
    /// The model's context window.
    pub(crate) context_window: Option<u64>,
    /// The price of a token read from the cache (units).
    pub(crate) read_price: f64,
}

/// Where no pruning's compaction cut the unpruned prompt, and the scale from
/// the bound's token count to the host's.
#[derive(Debug, Clone)]
pub(crate) struct UnprunedCompaction {
    /// How many leading messages of the unpruned prompt a summary replaces.
    replaced: Option<usize>,
    /// Host tokens per bound token, from the latest usage report.
    scale: f64,
    /// An agent run ended since the last call: pi checks its compaction
    /// point then.
    run_ended: bool,
}

impl Default for UnprunedCompaction {
    fn default() -> Self {
        UnprunedCompaction {
            replaced: None,
            scale: DEFAULT_SCALE,
            run_ended: false,
        }
    }
}

impl UnprunedCompaction {
    /// An agent run ended.
    pub(crate) fn run_ended(&mut self) {
        self.run_ended = true;
    }

    /// The host compacted the session itself: the unpruned prompt is its
    /// messages again (the host's compaction left both sides a summary).
    pub(crate) fn host_compacted(&mut self) {
        self.replaced = None;
        self.run_ended = false;
    }

    /// The host counted `host_tokens` for a context the bound counts
    /// `bound_tokens`.
    pub(crate) fn measured(&mut self, host_tokens: u64, bound_tokens: u64) {
        if host_tokens > 0 && bound_tokens > 0 {
            let scale = host_tokens as f64 / bound_tokens as f64;
            self.scale = scale.clamp(SCALE_RANGE.0, SCALE_RANGE.1);
        }
    }

    /// The prompt no pruning sends for the host's unpruned messages, and how
    /// many of them its compactions replaced: the earlier compaction's
    /// replacement, and a new one where pi would compact in `context_window`,
    /// `previous` being the bound tokens of no pruning's prompt at the last
    /// call (the call then writes it anew, as no pruning's first call after
    /// its compaction does).
    pub(crate) fn prompt(
        &self,
        unpruned: Vec<Message>,
        context_window: Option<u64>,
        previous: Option<u64>,
        count: fn(&[Message]) -> u64,
    ) -> NoPruningPrompt {
        let summary_tokens = SUMMARY
            .as_ref()
            .map_or(0, |s| count(std::slice::from_ref(s)));
        let tokens_after = |replaced: Option<usize>| match replaced {
            Some(r) => summary_tokens + count(&unpruned[r..]),
            None => count(&unpruned),
        };
        let mut replaced = self.replaced.filter(|&r| r <= unpruned.len());
        let mut tokens = tokens_after(replaced);
        if let Some(window) = context_window.filter(|w| *w > 0) {
            let limit = window.saturating_sub(COMPACTION_RESERVE_TOKENS) as f64;
            let after_run =
                self.run_ended && previous.is_some_and(|tokens| tokens as f64 * self.scale > limit);
            if after_run || tokens as f64 * self.scale > window as f64 {
                let start = replaced.unwrap_or(0);
                if let Some(cut) =
                    cut_point(&unpruned[start..], COMPACTION_KEEP_RECENT_TOKENS, count)
                        .filter(|&cut| cut > 0)
                {
                    replaced = Some(start + cut);
                    tokens = tokens_after(replaced);
                }
            }
        }
        let growth = replaced.map(|_| {
            let calls = unpruned.iter().filter(|m| m.is(&Role::Assistant)).count() as u64;
            (count(&unpruned) as f64 / calls.max(1) as f64, calls)
        });
        let messages = match (replaced, SUMMARY.as_ref()) {
            (Some(r), Some(summary)) => std::iter::once(summary.clone())
                .chain(unpruned[r..].iter().cloned())
                .collect(),
            _ => unpruned,
        };
        NoPruningPrompt {
            messages,
            tokens,
            replaced,
            growth,
        }
    }

    /// What the calls ahead bill beyond no pruning, at most, once no
    /// pruning has compacted and the session has not (units; 0 before):
    /// each call until the host compacts the session reads the tokens by
    /// which its prompt is longer than no pruning's, a gap that closes by
    /// the difference of their growths per call.
    pub(crate) fn postponed_cost(&self, p: Postponed) -> f64 {
        let Some(window) = p.context_window.filter(|w| *w > 0) else {
            return 0.0;
        };
        let gap = p.sent_tokens.saturating_sub(p.unpruned_tokens) as f64;
        if gap == 0.0 {
            return 0.0;
        }
        let growth = p.sent_tokens as f64 / p.calls.max(1) as f64;
        let limit = window.saturating_sub(COMPACTION_RESERVE_TOKENS) as f64 / self.scale;
        let calls_left = ((limit - p.sent_tokens as f64) / growth.max(1.0)).max(0.0);
        let closing = p.unpruned_growth - growth;
        // Calls until the gap closes, if it does before the host compacts.
        let calls = if closing > 0.0 {
            calls_left.min(gap / closing)
        } else {
            calls_left
        };
        let closing = closing.max(0.0);
        (gap * calls - closing * calls * calls / 2.0) * p.read_price
    }

    /// The call was priced with `replaced` leading messages summarized.
    pub(crate) fn priced(&mut self, replaced: Option<usize>) {
        self.replaced = replaced;
        self.run_ended = false;
    }
}

/// The first message kept when the newest ones worth `keep` tokens are kept:
/// never a tool result, which must follow its call.
fn cut_point(messages: &[Message], keep: u64, count: fn(&[Message]) -> u64) -> Option<usize> {
    let mut kept = 0u64;
    let mut from = messages.len();
    while from > 0 && kept < keep {
        from -= 1;
        kept += count(std::slice::from_ref(&messages[from]));
    }
    (from..messages.len()).find(|&i| !messages[i].is(&Role::ToolResult))
}

/// A compaction summary of the modelled size: only its size is priced.
static SUMMARY: LazyLock<Option<Message>> = LazyLock::new(|| {
    let value = serde_json::json!({
        "role": "compactionSummary",
        "summary": "s".repeat(COMPACTION_SUMMARY_TOKENS as usize * 4),
        "tokensBefore": 0,
    });
    Message::from_value(&value).ok()
});

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A message of `role` whose text is `chars` characters (a tool
    /// result answers call `c`).
    pub(crate) fn message(role: &str, chars: usize) -> Message {
        let value = if role == "toolResult" {
            serde_json::json!({"role": role, "toolCallId": "c", "content": [{"type": "text", "text": "x".repeat(chars)}]})
        } else {
            serde_json::json!({"role": role, "content": [{"type": "text", "text": "x".repeat(chars)}]})
        };
        Message::from_value(&value).unwrap()
    }

    fn count(messages: &[Message]) -> u64 {
        messages.iter().map(Message::prompt_tokens).sum()
    }

    /// 40 turns of a user message and a 10,000-character tool result.
    fn session() -> Vec<Message> {
        (0..40)
            .flat_map(|_| [message("user", 400), message("toolResult", 10_000)])
            .collect()
    }

    #[test]
    fn a_prompt_under_the_compaction_point_is_priced_whole() {
        let c = UnprunedCompaction::default();
        let p = c.prompt(session(), Some(200_000), Some(104_000), count);
        assert_eq!((p.replaced, p.growth), (None, None));
        assert_eq!(p.messages.len(), 80);
    }

    #[test]
    fn past_the_compaction_point_a_summary_replaces_all_but_the_newest_messages() {
        let mut c = UnprunedCompaction::default();
        c.measured(1, 1);
        c.run_ended();
        // 104,000 tokens against a 100,000-token window less the reserve.
        let p = c.prompt(session(), Some(100_000), Some(104_000), count);
        let (prompt, replaced) = (p.messages, p.replaced.expect("compacted"));
        assert!(prompt[0].is(&Role::CompactionSummary));
        assert_eq!(prompt.len(), 80 - replaced + 1);
        assert!(
            !prompt[1].is(&Role::ToolResult),
            "the cut splits no call from its result"
        );
        let kept = count(&prompt[1..]);
        assert!(
            // Within a turn of what pi keeps: the cut moves to the call.
            kept.abs_diff(COMPACTION_KEEP_RECENT_TOKENS) < 2_600,
            "{kept}"
        );
        // The next call, a turn later, keeps the same cut.
        c.priced(Some(replaced));
        c.run_ended();
        let mut longer = session();
        longer.extend([message("user", 400), message("toolResult", 400)]);
        let p = c.prompt(longer, Some(100_000), Some(count(&prompt)), count);
        let (again, same) = (p.messages, p.replaced);
        assert_eq!(same, Some(replaced));
        assert_eq!(again.len(), prompt.len() + 2);
        assert!(again[..prompt.len()] == prompt[..]);
    }

    #[test]
    fn inside_a_run_only_a_prompt_past_the_window_compacts() {
        let mut c = UnprunedCompaction::default();
        c.measured(1, 1);
        // 104,000 tokens: past the window less the reserve, not the window.
        assert_eq!(
            c.prompt(session(), Some(110_000), Some(104_000), count)
                .replaced,
            None
        );
        assert!(c
            .prompt(session(), Some(100_000), Some(104_000), count)
            .replaced
            .is_some());
        c.run_ended();
        assert!(c
            .prompt(session(), Some(110_000), Some(104_000), count)
            .replaced
            .is_some());
        // The call priced, the next run is another.
        c.priced(None);
        assert_eq!(
            c.prompt(session(), Some(110_000), Some(104_000), count)
                .replaced,
            None
        );
    }

    #[test]
    fn the_hosts_larger_count_brings_the_compaction_point_sooner() {
        let mut c = UnprunedCompaction::default();
        c.measured(1, 1);
        c.run_ended();
        assert_eq!(
            c.prompt(session(), Some(150_000), Some(104_000), count)
                .replaced,
            None
        );
        c.measured(3, 2);
        assert!(c
            .prompt(session(), Some(150_000), Some(104_000), count)
            .replaced
            .is_some());
        // A report below the bound's own count is not believed.
        c.measured(1, 2);
        assert_eq!(
            c.prompt(session(), Some(150_000), Some(104_000), count)
                .replaced,
            None
        );
    }

    #[test]
    fn the_hosts_compaction_ends_no_prunings_own() {
        let mut c = UnprunedCompaction::default();
        c.measured(1, 1);
        c.run_ended();
        let p = c.prompt(session(), Some(100_000), Some(104_000), count);
        c.priced(p.replaced);
        c.host_compacted();
        let short: Vec<Message> = session().into_iter().take(4).collect();
        let p = c.prompt(short, Some(100_000), Some(104_000), count);
        assert_eq!((p.messages.len(), p.replaced), (4, None));
    }

    #[test]
    fn no_window_no_compaction() {
        let c = UnprunedCompaction::default();
        assert_eq!(
            c.prompt(session(), None, Some(104_000), count).replaced,
            None
        );
    }

    fn postponed(sent: u64, unpruned: u64, unpruned_growth: f64) -> Postponed {
        Postponed {
            sent_tokens: sent,
            unpruned_tokens: unpruned,
            unpruned_growth,
            calls: 100,
            context_window: Some(116_384),
            read_price: 0.1,
        }
    }

    #[test]
    fn a_longer_prompt_owes_its_gap_on_each_call_until_the_host_compacts() {
        let mut c = UnprunedCompaction::default();
        c.measured(1, 1);
        // 80,000 tokens at 800 a call: 25 calls to the 100,000 limit, each
        // reading 60,000 more than no pruning's prompt growing as fast.
        let owed = c.postponed_cost(postponed(80_000, 20_000, 800.0));
        assert!((owed - 25.0 * 60_000.0 * 0.1).abs() < 1e-6, "{owed}");
        // No pruning growing 1,600 a call closes the gap in 75 calls,
        // after the host compacted: still 25 calls, the gap shrinking.
        let owed = c.postponed_cost(postponed(80_000, 20_000, 1_600.0));
        let expected = (60_000.0 * 25.0 - 800.0 * 25.0 * 25.0 / 2.0) * 0.1;
        assert!((owed - expected).abs() < 1e-6, "{owed}");
        // Growing 3,200 a call it closes in 25 calls: a triangle.
        let owed = c.postponed_cost(postponed(80_000, 20_000, 3_200.0));
        assert!((owed - 60_000.0 * 25.0 / 2.0 * 0.1).abs() < 1e-6, "{owed}");
    }

    #[test]
    fn a_prompt_no_longer_than_no_prunings_owes_nothing() {
        let c = UnprunedCompaction::default();
        assert_eq!(c.postponed_cost(postponed(20_000, 20_000, 800.0)), 0.0);
        assert_eq!(c.postponed_cost(postponed(10_000, 20_000, 800.0)), 0.0);
        let no_window = Postponed {
            context_window: None,
            ..postponed(80_000, 20_000, 800.0)
        };
        assert_eq!(c.postponed_cost(no_window), 0.0);
    }
}
