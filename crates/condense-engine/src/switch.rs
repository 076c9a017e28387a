//! The cache-aware policy at each LLM call: whether to show what flushes
//! prepared since the last switch.
//!
//! The decision is core's ([`decide_switch`]); this module gathers its
//! inputs from the engine's copy of the messages, the state and what the
//! host says about the call (its time and model), and says what a switch
//! persists. Time comes in as a value: the engine reads no clock.

use condense_core::{
    call_history, calls_before_compaction, chars_to_tokens, cold_share, decide_summarize,
    decide_switch, expected_calls, is_idle_expired, js_len, prompt_units, render,
    render_after_switch, switch_sizes, warm_rewrite, Branch, CacheTerms, CapturedBatch, ColdEvent,
    Config, Hold, Message, MissModel, MissRates, NoPruningBound, PriceProfile, PromptShape, Render,
    RenderSettings, Role, SummarizeInputs, SwitchInputs, SwitchReason,
};
use condense_store::entries::SwitchEntryData;

use crate::learned_misses::LearnedMisses;
use crate::unpruned_compaction::{Postponed, UnprunedCompaction};
// What the summarizer reads: the bound pays for it.
use condense_summarizer::prompt::batch_user_message_len;

/// What the host says about the LLM call a `context` request precedes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallFacts {
    /// The host's clock at the call (ms); `None` when it did not say.
    pub now_ms: Option<i64>,
    /// The model the call goes to (`provider/id`), when the host knows.
    pub model: Option<String>,
    /// The summarizer model's input price over this call's model's, when
    /// the host knows both and they differ; `None`: the same model, or
    /// unknown. Used only where `economy.summarizerPrice` is not set.
    pub summarizer_price: Option<f64>,
}

/// A call's prompt with nothing pruned, and what it bills
/// ([`CallLog::unpruned`]).
#[derive(Debug)]
pub(crate) struct Unpruned {
    prompt: Vec<Message>,
    /// Its tokens as the bound counts them ([`bound_tokens`]).
    tokens: u64,
    units: f64,
    /// The leading messages no pruning's own compaction replaced.
    replaced: Option<usize>,
    /// Once replaced, no pruning's growth per call (bound tokens) and the
    /// calls the branch records.
    growth: Option<(f64, u64)>,
}

/// What the engine remembers of the calls it saw, for the next decision.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallLog {
    /// The previous call's time.
    last_ms: Option<i64>,
    /// The previous call's model.
    last_model: Option<String>,
    /// No call since the session was (re)started: the cache is cold.
    resumed: bool,
    /// The host compacted the context since the previous call: the next
    /// prompt is written anew from its start, and so would the unpruned
    /// one be (no pruning compacts too, and its prompt after the summary
    /// shares no prefix with the one before).
    compacted: bool,
    /// The model's context window, from the last turn's usage.
    context_window: Option<u64>,
    /// A budget trigger fired since the previous call.
    budget_hit: bool,
    /// The prompt the previous call sent (after any switch).
    last_prompt: Option<Vec<Message>>,
    /// The prompt the previous call would have sent with nothing pruned.
    last_unpruned: Option<Vec<Message>>,
    /// Its tokens as the bound counts them.
    last_unpruned_tokens: Option<u64>,
    /// What the calls so far billed against no pruning.
    bound: NoPruningBound,
    /// The summarizer's price the host reported with the latest call
    /// ([`CallFacts::summarizer_price`]).
    host_summarizer_price: Option<f64>,
    /// Why the latest call did not show the summaries pending, if it did
    /// not ([`decide`]).
    pub(crate) switch_held: Option<Hold>,
    /// Why the latest turn end that weighed a flush did not run it.
    pub(crate) flush_held: Option<Hold>,
    /// What the session's summaries took, per call they covered.
    summary_sizes: SummarySizes,
    /// The cache misses the host's usage reports showed
    /// (`economy.missRates: "learn"`).
    misses: LearnedMisses,
    /// Where no pruning would have compacted a session the host has not.
    unpruned_compaction: UnprunedCompaction,
    /// The host compacted a session no pruning had compacted before: no
    /// pruning's next call reads its own compacted prompt from the cache,
    /// which the host's list no longer holds; its size is taken for it.
    unpruned_cached: bool,
    /// What the calls ahead owe beyond no pruning, weighed at the last
    /// call ([`UnprunedCompaction::postponed_cost`]; `None` before no
    /// pruning compacted, or after the host did).
    postponed: Option<Postponed>,
    /// The host's count of the context after the latest call (its prompt,
    /// output and the turn's results), which its own compaction check
    /// weighs; `None` before a report, or after the host compacted.
    host_tokens: Option<u64>,
}

/// The wordiest summary the session's summarizer wrote, per call it
/// covered, so a flush's output is estimated from what this summarizer
/// writes for these tools, not from a constant; the wordiest, not the
/// average, because a flush the bound allows on a low estimate overshoots
/// by the difference at the output price.
#[derive(Debug, Clone, Copy, Default)]
struct SummarySizes {
    calls: u64,
    tokens: u64,
}

impl SummarySizes {
    /// A summary covering `calls` calls took `tokens`.
    fn add(&mut self, calls: u64, tokens: u64) {
        let calls = calls.max(1);
        // tokens / calls > self.tokens / self.calls, without division.
        if self.calls == 0
            || u128::from(tokens) * u128::from(self.calls)
                > u128::from(self.tokens) * u128::from(calls)
        {
            *self = SummarySizes { calls, tokens };
        }
    }

    /// The tokens summaries covering `calls` are expected to take:
    /// `projected` until a summary was written, then the wordiest rate.
    fn expected(&self, calls: u64, projected: u64) -> u64 {
        if self.calls == 0 {
            return projected;
        }
        calls.saturating_mul(self.tokens).div_ceil(self.calls)
    }
}

/// The last LLM call a session's branch records, as an engine started from
/// the branch finds it ([`CallLog::restart`]).
#[derive(Debug)]
pub(crate) struct RecordedCall {
    /// The call's time: its assistant message's timestamp, which the host
    /// stamps when it makes the request.
    at_ms: i64,
    /// What the call was sent.
    prompt: Vec<Message>,
    /// What it would have been sent with nothing pruned.
    unpruned: Vec<Message>,
}

impl RecordedCall {
    /// The call made at `at_ms` with the host's `messages` (condense's
    /// summaries among them), sent `prompt` (those messages rendered).
    pub(crate) fn new(at_ms: i64, messages: &[Message], prompt: Vec<Message>) -> RecordedCall {
        RecordedCall {
            at_ms,
            prompt,
            unpruned: unpruned(messages),
        }
    }
}

impl CallLog {
    /// A session (re)started from its branch. The provider's cache knows
    /// no process: a harness resumed within the time to live sends the
    /// prefix it sent before (pi's system prompt carries no clock), and
    /// finds it cached. So the first call prices against `last`, the call
    /// the branch records, and is cold only by the time since it; with no
    /// such call it is cold. The bound against no pruning starts from
    /// nothing saved (another process's savings, or another branch's, pay
    /// for no bet here).
    pub(crate) fn restart(&mut self, last: Option<RecordedCall>) {
        let mut misses = std::mem::take(&mut self.misses);
        misses.restarted();
        *self = match last {
            Some(call) => CallLog {
                last_ms: Some(call.at_ms),
                last_unpruned_tokens: Some(bound_tokens(&call.unpruned)),
                last_unpruned: Some(call.unpruned),
                last_prompt: Some(call.prompt),
                misses,
                ..CallLog::default()
            },
            None => CallLog {
                resumed: true,
                misses,
                ..CallLog::default()
            },
        };
    }

    /// The misses the session learns from (kept over a restart; the engine
    /// sets them from the history a session directory holds).
    pub(crate) fn misses(&mut self) -> &mut LearnedMisses {
        &mut self.misses
    }

    /// [`CallLog::misses`], to read.
    pub(crate) fn misses_ref(&self) -> &LearnedMisses {
        &self.misses
    }

    /// The host moved to another branch of the session in this process:
    /// the next prompt shares with the last one the messages up to where
    /// the branches part, and the cache holds them, so the calls are kept;
    /// the bound starts from nothing saved, as on a restart.
    pub(crate) fn navigated(&mut self) {
        self.bound = NoPruningBound::default();
        self.budget_hit = false;
        self.unpruned_compaction = UnprunedCompaction::default();
        self.postponed = None;
    }

    /// Whether this engine has seen a call, or been told of one a branch
    /// records.
    pub(crate) fn knows_a_call(&self) -> bool {
        self.last_prompt.is_some()
    }

    /// The host compacted the context: the next call finds the cache cold.
    pub(crate) fn compacted(&mut self) {
        self.compacted = true;
        self.unpruned_cached = self.postponed.is_some();
        self.unpruned_compaction.host_compacted();
        self.postponed = None;
        self.host_tokens = None;
    }

    /// An agent run ended: where pi checks its compaction point.
    pub(crate) fn run_ended(&mut self) {
        self.unpruned_compaction.run_ended();
    }

    /// Whether the next call finds the cache cold at `now_ms` whatever
    /// condense does: a restart, a compaction, or the cache's time to
    /// live gone by since the previous call (a model change is known only
    /// at the call).
    pub(crate) fn next_call_cold(&self, now_ms: i64, ttl_ms: i64) -> bool {
        self.resumed || self.compacted || is_idle_expired(now_ms, self.last_ms, ttl_ms)
    }

    /// What the last turn said about the context window and the budget.
    pub(crate) fn turn(&mut self, context_window: u64, budget_hit: bool) {
        if context_window > 0 {
            self.context_window = Some(context_window);
        }
        self.budget_hit |= budget_hit;
    }

    /// The host counted `host_tokens` for the context after the last call:
    /// its prompt and the messages the turn `appended` (its reply and the
    /// tools' results), which scales the bound's counts to the host's where
    /// they meet the host's compaction point.
    pub(crate) fn context_measured(&mut self, host_tokens: u64, appended: &[&[Message]]) {
        self.host_tokens = Some(host_tokens);
        if let Some(prompt) = &self.last_prompt {
            let counted =
                bound_tokens(prompt) + appended.iter().map(|m| bound_tokens(m)).sum::<u64>();
            self.unpruned_compaction.measured(host_tokens, counted);
        }
    }

    /// At the end of an agent run, the host's list being `messages`:
    /// whether asking the host to compact now keeps the session within its
    /// bound where running on would not. That is where no pruning compacts
    /// before the next call ([`UnprunedCompaction::prompt`], as pi checks
    /// after a run), or compacted before and the host has not, and the
    /// host, by its own count of the context, does not compact now, and
    /// what the calls ahead would owe for the longer prompt
    /// ([`UnprunedCompaction::postponed_cost`]) passes the headroom the
    /// session has left. Compacted where no pruning compacts, a pruned
    /// session reads less at the compaction and writes about the same
    /// prompt after it (docs/decisions.md, "A pruned session compacts where
    /// no pruning would, when running on would cost more").
    pub(crate) fn compaction_pays(&self, messages: &[Message], config: &Config) -> bool {
        let Some(window) = self.context_window.filter(|w| *w > 0) else {
            return false;
        };
        let limit = window.saturating_sub(condense_core::COMPACTION_RESERVE_TOKENS);
        let (Some(prompt), Some(host_tokens)) = (&self.last_prompt, self.host_tokens) else {
            return false;
        };
        if host_tokens > limit {
            return false; // the host compacts it anyway
        }
        let mut after_run = self.unpruned_compaction.clone();
        after_run.run_ended();
        let no_pruning = after_run.prompt(
            unpruned(messages),
            self.context_window,
            self.last_unpruned_tokens,
            bound_tokens,
        );
        // No pruning compacts now, or did before and the host has not.
        let Some((growth, calls)) = no_pruning.growth else {
            return false;
        };
        // The next prompt: the last one, and what the run added after it
        // (its last reply, with any calls left unanswered).
        let added = messages
            .iter()
            .rposition(|m| m.is(&Role::Assistant))
            .map_or(0, |i| bound_tokens(&messages[i..]));
        let profile = self.profile(config);
        let owed = self.unpruned_compaction.postponed_cost(Postponed {
            sent_tokens: bound_tokens(prompt) + added,
            unpruned_tokens: no_pruning.tokens,
            unpruned_growth: growth,
            calls,
            context_window: self.context_window,
            read_price: profile.cache.map_or(1.0, |c| c.read),
        });
        let mut bound = self.bound;
        bound.set_max_excess(config.economy.max_excess);
        owed > bound.headroom()
    }

    /// The call about to be made, priced with nothing pruned (`messages`
    /// without condense's summaries): what the switch decision and
    /// [`CallLog::sent`] weigh against.
    pub(crate) fn unpruned(
        &self,
        messages: &[Message],
        terms: (&PriceProfile, Option<&MissRates>),
        call: &CallFacts,
    ) -> Unpruned {
        let no_pruning = self.unpruned_compaction.prompt(
            unpruned(messages),
            self.context_window,
            self.last_unpruned_tokens,
            bound_tokens,
        );
        let prompt = no_pruning.messages;
        let units = if self.unpruned_cached {
            self.priced_as(terms, &prompt, Some(&prompt), call, false).0
        } else {
            self.units(terms, &prompt, self.last_unpruned.as_deref(), call)
        };
        Unpruned {
            prompt,
            tokens: no_pruning.tokens,
            units,
            replaced: no_pruning.replaced,
            growth: no_pruning.growth,
        }
    }

    /// The prompt this call sent (after any switch), priced against the
    /// same call `unpruned` for the bound; the call is then the previous
    /// one.
    pub(crate) fn sent(
        &mut self,
        prompt: Vec<Message>,
        unpruned: Unpruned,
        terms: (&PriceProfile, Option<&MissRates>),
        call: &CallFacts,
    ) {
        let (sent, read) = self.priced(terms, &prompt, self.last_prompt.as_deref(), call);
        self.misses.expect(match (self.last_ms, call.now_ms) {
            (Some(before), Some(now)) if read > 0 => Some((read, now.saturating_sub(before))),
            _ => None,
        });
        self.bound.add_call(sent, unpruned.units);
        self.unpruned_compaction.priced(unpruned.replaced);
        self.postponed = self.postponed(&prompt, &unpruned, terms.0);
        self.last_prompt = Some(prompt);
        self.last_unpruned_tokens = Some(unpruned.tokens);
        self.last_unpruned = Some(unpruned.prompt);
        self.called(call);
    }

    /// The summarizer's work, priced: spent from the bound's headroom.
    pub(crate) fn summarized(&mut self, units: f64) {
        self.bound.add_summarizer(units);
    }

    /// A summary covering `calls` tool calls took `tokens`.
    pub(crate) fn summary_written(&mut self, calls: u64, tokens: u64) {
        self.summary_sizes.add(calls, tokens);
    }

    /// The latest call's usage as the host reported it: how much of the
    /// prefix the provider read from its cache.
    pub(crate) fn usage_reported(&mut self, cache_read: u64) {
        self.misses.observe(cache_read);
    }

    /// The miss model `config` plans with (`economy.missRates`): the rates
    /// it sets, or those the session's reported usage shows.
    pub(crate) fn miss_rates(&self, config: &Config) -> Option<MissRates> {
        match config.economy.miss_model {
            MissModel::Ttl => None,
            MissModel::Rates(rates) => Some(rates),
            MissModel::Learned => self.misses.rates(),
        }
    }

    /// A call's output tokens as the provider reported them, priced.
    pub(crate) fn output(&mut self, tokens: u64, profile: &PriceProfile) {
        self.bound.add_output(tokens as f64 * profile.output);
    }

    /// What the calls so far saved against no pruning, the summarizer's
    /// input included (units, estimated).
    pub(crate) fn saved(&self) -> f64 {
        self.bound.saved()
    }

    /// Takes what the host says of the call about to be made, before
    /// anything is decided for it.
    pub(crate) fn reported(&mut self, call: &CallFacts) {
        self.host_summarizer_price = call.summarizer_price.filter(|r| r.is_finite() && *r >= 0.0);
        self.misses.model(call.model.as_deref());
    }

    /// The prices the policy plans with: `economy.profile` and the price
    /// keys beside it; where `economy.summarizerPrice` is not set, the
    /// summarizer at the price the host reported, but never below the
    /// session model's. A distinct summarizer that fails falls back to the
    /// session model, so a cheaper one may bill at 1 on any flush, and the
    /// bound must not count on less.
    pub(crate) fn profile(&self, config: &Config) -> PriceProfile {
        let mut prices = config.economy.prices();
        if config.economy.overrides.summarizer.is_none() {
            if let Some(r) = self.host_summarizer_price {
                prices.summarizer = prices.summarizer.max(r);
            }
        }
        prices
    }

    /// The session's bound against no pruning, allowed the excess
    /// `config` sets (`economy.maxExcess`), what the calls ahead owe kept
    /// out of its headroom.
    fn bound(&self, config: &Config) -> NoPruningBound {
        self.bound_after(config, 0)
    }

    /// [`CallLog::bound`] once a flush removed `removed` tokens from the
    /// prompt: what the calls ahead owe shrinks with it.
    fn bound_after(&self, config: &Config, removed: u64) -> NoPruningBound {
        let mut bound = self.bound;
        bound.set_max_excess(config.economy.max_excess);
        if let Some(p) = self.postponed {
            bound.reserve(self.unpruned_compaction.postponed_cost(Postponed {
                sent_tokens: p.sent_tokens.saturating_sub(removed),
                ..p
            }));
        }
        bound
    }

    /// What [`UnprunedCompaction::postponed_cost`] weighs after a call
    /// sending `prompt`, once no pruning compacted and the host has not.
    fn postponed(
        &self,
        prompt: &[Message],
        unpruned: &Unpruned,
        profile: &PriceProfile,
    ) -> Option<Postponed> {
        let (growth, calls) = unpruned.growth?;
        Some(Postponed {
            sent_tokens: bound_tokens(prompt),
            unpruned_tokens: unpruned.tokens,
            unpruned_growth: growth,
            calls,
            context_window: self.context_window,
            read_price: profile.cache.map_or(1.0, |c| c.read),
        })
    }

    /// True when this call finds the cache cold whatever condense does.
    fn cold_event(&self, call: &CallFacts) -> Option<ColdEvent> {
        if self.resumed {
            return Some(ColdEvent::Resume);
        }
        if self.compacted {
            return Some(ColdEvent::Compaction);
        }
        match (&call.model, &self.last_model) {
            (Some(now), Some(before)) if now != before => Some(ColdEvent::ModelChange),
            _ => None,
        }
    }

    /// What `prompt` bills at `call`, the previous call having sent
    /// `before`.
    fn units(
        &self,
        terms: (&PriceProfile, Option<&MissRates>),
        prompt: &[Message],
        before: Option<&[Message]>,
        call: &CallFacts,
    ) -> f64 {
        self.priced(terms, prompt, before, call).0
    }

    /// [`CallLog::units`], and the tokens of the prefix the call is
    /// expected to read from the cache (0 when cold).
    fn priced(
        &self,
        terms: (&PriceProfile, Option<&MissRates>),
        prompt: &[Message],
        before: Option<&[Message]>,
        call: &CallFacts,
    ) -> (f64, u64) {
        self.priced_as(terms, prompt, before, call, self.cold_event(call).is_some())
    }

    /// [`CallLog::priced`], the cache known `cold` or not.
    fn priced_as(
        &self,
        (profile, misses): (&PriceProfile, Option<&MissRates>),
        prompt: &[Message],
        before: Option<&[Message]>,
        call: &CallFacts,
        cold: bool,
    ) -> (f64, u64) {
        let shared = match before {
            Some(before) if !cold => common_prefix(before, prompt),
            _ => 0,
        };
        // One pass over the prompt for both sums (it runs several times a
        // call over thousands of messages).
        let (head, tail) = prompt.split_at(shared);
        let shared_prefix = bound_tokens(head);
        let previous = (!cold).then_some(self.last_ms.filter(|_| call.now_ms.is_some()));
        let shape = PromptShape {
            tokens: shared_prefix + bound_tokens(tail),
            shared_prefix,
        };
        let warm = prompt_units(profile, previous, call.now_ms, shape);
        // Under a miss model a warm call is priced at its expected cost:
        // the provider may have dropped the prefix, for this prompt and the
        // unpruned one alike.
        let p = miss_share(misses, self.last_ms, call.now_ms);
        let units = if p > 0.0 && !cold {
            (1.0 - p) * warm + p * prompt_units(profile, None, call.now_ms, shape)
        } else {
            warm
        };
        let read = match (previous, call.now_ms) {
            (Some(Some(before)), Some(now))
                if !is_idle_expired(now, Some(before), ttl(profile)) =>
            {
                shared_prefix
            }
            _ => 0,
        };
        (units, read)
    }

    /// Tokens of `prompt` from its first message the previous call did not
    /// send as is: appended since, or changed by the render without a
    /// switch (a stub whose summary ref a later flush renumbered, a
    /// compaction). The call writes them whether it switches or not.
    fn unsent_tokens(&self, prompt: &[Message]) -> u64 {
        let first = self
            .last_prompt
            .as_deref()
            .map_or(0, |before| common_prefix(before, prompt));
        tokens(prompt.get(first..).unwrap_or_default())
    }

    fn called(&mut self, call: &CallFacts) {
        self.last_ms = call.now_ms.or(self.last_ms);
        if call.model.is_some() {
            self.last_model.clone_from(&call.model);
        }
        self.resumed = false;
        self.compacted = false;
        self.unpruned_cached = false;
        self.budget_hit = false;
    }
}

/// The cache's time to live under `profile` (0 without a cache).
fn ttl(profile: &PriceProfile) -> i64 {
    profile.cache.map_or(0, |c| c.ttl_ms)
}

/// The chance the provider misses the cached prefix at a call made at
/// `now_ms`, the previous one at `last_ms`, under `misses`
/// (`economy.missRates`); 0 without a miss model or a clock.
fn miss_share(misses: Option<&MissRates>, last_ms: Option<i64>, now_ms: Option<i64>) -> f64 {
    match (misses, last_ms, now_ms) {
        (Some(rates), Some(before), Some(now)) => rates.at(now.saturating_sub(before)),
        _ => 0.0,
    }
}

/// The cache the policy plans for: the configured profile's
/// (`economy.profile`, Anthropic's 5-minute terms by default, with the
/// `economy` price keys over it). A profile without caching is a cache that
/// is always cold and rewrites at the plain input price, so every switch
/// pays.
fn cache_terms(config: &Config) -> CacheTerms {
    config.economy.prices().cache.unwrap_or(CacheTerms {
        ttl_ms: 0,
        write: 1.0,
        read: 1.0,
        min_cacheable_tokens: 0,
    })
}

/// Whether a failed call past the purge horizon (the context at the last
/// switch) may have its arguments purged at the next switch: that, too, is
/// something a switch removes, though no flush made it pending.
fn purge_pending(messages: &[Message], state: &Branch, settings: &RenderSettings<'_>) -> bool {
    settings.config.purge_errors.enabled
        && messages
            .get(state.purge_horizon().unwrap_or(0)..)
            .is_some_and(|after| {
                after
                    .iter()
                    .any(|m| m.is(&Role::ToolResult) && m.skeleton().is_error)
            })
}

/// Tokens of messages as [`switch_sizes`] counts them: `chars / 4` of what
/// of each reaches the model ([`Message::prompt_tokens`]; not pi's
/// `details`, which the model never reads and a stub drops).
fn tokens(messages: &[Message]) -> u64 {
    messages.iter().map(Message::prompt_tokens).sum()
}

/// Tokens a message costs beyond its content's `chars / 4`, as the bound
/// against no pruning counts prompts: its role and separators, a tool
/// call's wrapping. A summary message condense adds pays them on every
/// call, which content alone would not charge the bound. The token model
/// calibrated on the pi-mono sessions (docs/economy.md) counts 34.51 a
/// message at 0.3085 a character, 28 tokens of `chars / 4`; this is
/// rounded up, so the bound charges a message's framing no less than its
/// content does.
pub(crate) const FRAMING_TOKENS: u64 = 32;

/// Tokens of messages as the bound against no pruning counts them: what
/// reaches the model at `chars / 4`, as the decisions count it, and the
/// framing ([`FRAMING_TOKENS`]) of each message the host sends.
fn bound_tokens(messages: &[Message]) -> u64 {
    // One pass: it runs over the whole prompt and its unpruned twin at
    // every call.
    messages
        .iter()
        .filter_map(Message::prompt_len)
        .map(|len| chars_to_tokens(len) + FRAMING_TOKENS)
        .sum()
}

/// What a summarizer prompt of `text` charges the bound (tokens): counted
/// as the bound counts the main prompts, one message, so the headroom it is
/// paid from and its cost are in the same tokens, whatever the provider's
/// tokenizer makes of both.
pub(crate) fn summarizer_bound_tokens(text: &str) -> u64 {
    summarizer_bound_len(js_len(text))
}

/// [`summarizer_bound_tokens`] of a prompt of `len` UTF-16 units.
fn summarizer_bound_len(len: usize) -> u64 {
    chars_to_tokens(len) + FRAMING_TOKENS
}

/// How many leading messages two prompts share.
fn common_prefix(a: &[Message], b: &[Message]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The prompt a call would send with nothing pruned: the host's messages
/// without the summaries condense added.
fn unpruned(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| !m.is_summary_message())
        .cloned()
        .collect()
}

/// The calls expected from this one on ([`expected_calls`]), no more than
/// pi's compaction point leaves ([`calls_before_compaction`]).
fn calls_ahead(prompt_tokens: u64, calls_so_far: u64, context_window: Option<u64>) -> u64 {
    let expected = expected_calls(calls_so_far);
    calls_before_compaction(prompt_tokens, calls_so_far, context_window)
        .map_or(expected, |c| c.min(expected))
}

/// What [`decide`] chose at one call.
pub(crate) struct Decided {
    /// The switch entry to persist, on a switch.
    pub(crate) switch: Option<SwitchEntryData>,
    /// Why pending content that would remove tokens stays hidden.
    pub(crate) held: Option<Hold>,
    /// The render the call sends, when the decision made it (the one
    /// after the switch on a switch, else the current one): the caller
    /// renders only when nothing was pending.
    pub(crate) render: Option<Render>,
}

/// Decides at one call, `unpruned` the same call with nothing pruned and
/// `profile` the prices it was priced at (the bound weighs both sides at
/// the same prices, and the caller prices once); on a switch returns the
/// entry to persist (the caller records it in the state and appends it,
/// then reports the prompt it sent with [`CallLog::sent`]). When `user_asked` (the user's `/pruner now` or
/// `/pruner compact` ran since the last call), anything pending is shown
/// whatever it costs.
pub(crate) fn decide(
    messages: &[Message],
    state: &Branch,
    settings: &RenderSettings<'_>,
    log: &CallLog,
    call: &CallFacts,
    (profile, unpruned): (&PriceProfile, &Unpruned),
    user_asked: bool,
) -> Decided {
    if state.pending_count() == 0 && !purge_pending(messages, state, settings) {
        Decided {
            switch: None,
            held: None,
            render: None,
        }
    } else {
        let current_render = render(messages, state, settings);
        let shown_render = render_after_switch(messages, state, settings);
        let current = current_render.messages(messages);
        let shown = shown_render.messages(messages);
        let sizes = switch_sizes(&current, &shown);
        let prices = cache_terms(settings.config);
        let (calls, cold) = call_history(messages, prices.ttl_ms);
        let cold_event = log.cold_event(call);
        let misses = log.miss_rates(settings.config);
        let misses = misses.as_ref();
        let within_bound = {
            let before = log.last_prompt.as_deref();
            let terms = (profile, misses);
            let with = log.units(terms, &shown, before, call);
            let without = log.units(terms, &current, before, call);
            let mut bound = log.bound(settings.config);
            // This call's own figure: no pruning may compact at it.
            let owed = log
                .postponed(&shown, unpruned, profile)
                .map_or(0.0, |p| log.unpruned_compaction.postponed_cost(p));
            bound.reserve(owed);
            bound.allows_call(with, without, unpruned.units)
        };
        let inputs = SwitchInputs {
            now_ms: call.now_ms.unwrap_or_default(),
            previous_call_ms: call.now_ms.and(log.last_ms),
            cold_event,
            prices,
            prompt_tokens: sizes.prompt_tokens,
            suffix_tokens: sizes.suffix_tokens,
            new_tokens: log.unsent_tokens(&current),
            removed_tokens: sizes.removed_tokens,
            expected_calls: calls_ahead(sizes.prompt_tokens, calls, log.context_window),
            cold_share: cold_share(cold, calls),
            context_window: log.context_window,
            pressure_share: settings.config.economy.pressure_share,
            budget_triggered: log.budget_hit,
            within_bound,
            miss_share: miss_share(misses, log.last_ms, call.now_ms),
        };
        let decision = decide_switch(&inputs);
        let switch = if user_asked {
            Some(SwitchReason::User)
        } else {
            decision.switch
        };
        let held = decision.held.filter(|_| switch.is_none());
        let chosen = if switch.is_some() {
            shown_render
        } else {
            current_render
        };
        let entry = switch.map(|reason| SwitchEntryData {
            reason: reason.into(),
            message_count: messages.len() as u64,
            prompt_tokens: Some(sizes.prompt_tokens),
            removed_tokens: Some(sizes.removed_tokens),
            rewrite_cost: Some(decision.rewrite_cost),
            projected_saving: Some(decision.projected_saving),
            ts: call.now_ms,
            extra: Default::default(),
        });
        Decided {
            switch: entry,
            held,
            render: Some(chosen),
        }
    }
}

/// The turn of an agent run from which the cache-aware policy may flush at
/// a turn's end: runs that long rarely end in a reply soon (an autonomous
/// run may never reply), and their outputs would otherwise wait for the
/// pressure limit, to be shown by a switch that rewrites everything after
/// the oldest of them.
pub(crate) const LONG_RUN_TURNS: i64 = 10;

/// Tokens a summarized output still shows (its stub), and a batch's
/// summary, as written by the summarizer.
const STUB_TOKENS: u64 = 40;
const SUMMARY_TOKENS: u64 = 150;
/// A merged batch's summary per call it covers (the summarizer writes
/// bullets for each call, whatever the batch).
const SUMMARY_TOKENS_PER_CALL: u64 = 100;
/// A call's summary as the bound charges a flush before the session's
/// summarizer has written one: a quarter above a merged summary's share,
/// since the first flush is charged on no evidence and a low estimate
/// overshoots the allowance at the output price.
const FIRST_SUMMARY_TOKENS_PER_CALL: u64 = 125;

/// Calls one summarizer prompt covers at most under the bound
/// ([`summarized_batches`]).
pub(crate) const MERGED_BATCH_MAX_CALLS: usize = 16;

/// Whether `config` bounds the cache-aware policy against no pruning
/// (`economy.maxExcess`).
pub(crate) fn bounded(config: &Config) -> bool {
    config.economy.policy.gates_on_switch() && config.economy.max_excess.is_some()
}

/// Batches with each run's turns merged into one summarizer prompt
/// ([`condense_core::merge_runs`]), at most [`MERGED_BATCH_MAX_CALLS`]
/// calls each. The bound pays a summary only from what it saves for
/// certain, and one turn's output rarely saves, written once at a cold
/// call, what the summarizer's instructions and that output cost to read;
/// a run's worth of outputs pays for the instructions once.
pub(crate) fn merged_by_run(batches: Vec<CapturedBatch>, config: &Config) -> Vec<CapturedBatch> {
    condense_core::merge_runs(batches, MERGED_BATCH_MAX_CALLS, config.min_batch_chars)
}

/// What summarizing `batches` (captured, not yet flushed) would cost and
/// remove, estimated before the summarizer runs.
struct FlushEstimate {
    /// The summarizer's input tokens: its instructions and each batch as
    /// it reads it, at three characters a token (on the high side: what
    /// the summarizer reads is paid from the bound's headroom).
    summarizer_input: u64,
    /// The same input as the bound against no pruning counts it
    /// ([`summarizer_bound_tokens`]), and is charged for it once run.
    bound_input: u64,
    /// Tokens showing the summaries would remove (`P`).
    removed: u64,
    /// Tokens of the prompt from the first output the flush stubs (`S`).
    suffix: u64,
    /// Tokens the summaries are expected to take.
    summaries: u64,
    /// The tool calls the summaries cover.
    calls: u64,
}

impl FlushEstimate {
    /// The estimate for `batches`, summarized as captured or, `merged`,
    /// each run's turns in one prompt ([`merged_by_run`]). Either way the
    /// summarizer's input is each prompt as sent (its instructions once a
    /// prompt). Merged, a summary grows with the calls it covers; as
    /// captured, a summary is a batch's.
    fn of(
        messages: &[Message],
        batches: &[CapturedBatch],
        merged: bool,
        config: &Config,
    ) -> FlushEstimate {
        Self::shown_with(messages, None, batches, merged, config)
    }

    /// [`FlushEstimate::of`] for a flush whose switch also shows what
    /// earlier flushes left unshown from message `unshown_from` on
    /// ([`condense_core::State::first_unshown`]): that switch rewrites the
    /// prompt from the earlier of the two.
    fn shown_with(
        messages: &[Message],
        unshown_from: Option<usize>,
        batches: &[CapturedBatch],
        merged: bool,
        config: &Config,
    ) -> FlushEstimate {
        // Each summarizer prompt's batches, weighed in place: an ask
        // prices every pending batch, and under the bound they pile up.
        let prompts: Vec<&[CapturedBatch]> = if merged {
            condense_core::run_groups(batches, MERGED_BATCH_MAX_CALLS, config.min_batch_chars)
                .into_iter()
                .map(|range| &batches[range])
                .collect()
        } else {
            batches.chunks(1).collect()
        };
        // A batch the flush keeps raw costs no summarizer call and removes
        // nothing; merging never takes one into a run, so filtering after
        // the merge drops the same batches the flush would skip.
        let summarized: Vec<&[CapturedBatch]> = prompts
            .into_iter()
            .filter(|p| {
                let raw = p.iter().map(CapturedBatch::raw_chars).sum();
                !condense_core::kept_raw_chars(raw, config)
            })
            .collect();
        Self::estimate(messages, unshown_from, &summarized, merged)
    }

    /// The estimate for `prompts`, each the batches one summarizer prompt
    /// covers.
    fn estimate(
        messages: &[Message],
        unshown_from: Option<usize>,
        prompts: &[&[CapturedBatch]],
        merged: bool,
    ) -> FlushEstimate {
        let calls = prompts.iter().flat_map(|p| p.iter()).flat_map(|b| &b.calls);
        let outputs: u64 = calls
            .clone()
            .map(|c| chars_to_tokens(c.result_text.js_len()))
            .sum();
        // The user message holds the instructions: the request has no
        // system prompt.
        let lengths: Vec<usize> = prompts.iter().map(|p| batch_user_message_len(p)).collect();
        let read: usize = lengths.iter().sum();
        let summaries: u64 = prompts
            .iter()
            .map(|p| {
                let covered = p.iter().map(|b| b.calls.len() as u64).sum::<u64>();
                if merged {
                    SUMMARY_TOKENS.max(covered * SUMMARY_TOKENS_PER_CALL)
                } else {
                    SUMMARY_TOKENS
                }
            })
            .sum();
        let call_count = calls.count() as u64;
        let first_call = prompts
            .first()
            .and_then(|p| p.iter().flat_map(|b| &b.calls).next());
        let from = first_call
            .map(|c| c.tool_call_id.as_str())
            .and_then(|id| {
                messages
                    .iter()
                    .rposition(|m| m.skeleton().tool_call_id.as_deref() == Some(id))
            })
            .unwrap_or(messages.len())
            .min(unshown_from.unwrap_or(usize::MAX));
        FlushEstimate {
            summarizer_input: read.div_ceil(3) as u64,
            bound_input: lengths.iter().map(|&l| summarizer_bound_len(l)).sum(),
            removed: outputs.saturating_sub(call_count * STUB_TOKENS + summaries),
            suffix: tokens(messages.get(from..).unwrap_or_default()),
            summaries,
            calls: call_count,
        }
    }

    /// What a flush is expected to charge the bound: the summarizer's
    /// input and the summaries' output, priced (`summarizer` times the main
    /// model's). The output is sized by what the session's summaries took
    /// per call covered, once one was written (docs/decisions.md, "The
    /// bound counts the total").
    fn bound_cost(&self, profile: &PriceProfile, log: &CallLog) -> f64 {
        let projected = self
            .summaries
            .max(self.calls * FIRST_SUMMARY_TOKENS_PER_CALL);
        let output = log.summary_sizes.expected(self.calls, projected);
        (self.bound_input as f64 + output as f64 * profile.output) * profile.summarizer
    }

    /// What the switch that shows the summaries costs beyond keeping the
    /// prefix, at a call that finds the cache warm ([`warm_rewrite`]).
    fn warm_rewrite(&self, prices: &CacheTerms) -> f64 {
        warm_rewrite(self.suffix, self.removed, prices)
    }

    /// What `bound`'s headroom is expected to gain over the calls the
    /// summaries may wait for their switch ([`SWITCH_WAIT_CALLS`]), shown
    /// meanwhile beside the outputs they summarize (their reads counted).
    fn headroom_ahead(&self, bound: &NoPruningBound, prices: &CacheTerms) -> f64 {
        let growth = bound.gain_per_call() - self.summaries as f64 * prices.read;
        growth.max(0.0) * SWITCH_WAIT_CALLS
    }
}

/// The calls a flush's summaries may wait for the bound to pay the warm
/// switch that shows them (docs/economy.md, "The rules the policy
/// follows", rule 10).
pub(crate) const SWITCH_WAIT_CALLS: f64 = 30.0;

/// Whether summarizing `batches` (captured, not yet flushed) now, at a turn
/// end of a long run, pays ([`decide_summarize`]): their outputs sit at the
/// end of the prompt, so the switch that shows them rewrites little.
pub(crate) fn turn_flush_pays(
    messages: &[Message],
    unshown_from: Option<usize>,
    batches: &[CapturedBatch],
    settings: &RenderSettings<'_>,
    log: &CallLog,
    merged: bool,
) -> Result<(), Hold> {
    let estimate =
        FlushEstimate::shown_with(messages, unshown_from, batches, merged, settings.config);
    let prompt_tokens = tokens(messages);
    let prices = cache_terms(settings.config);
    let (calls_so_far, cold) = call_history(messages, prices.ttl_ms);
    let profile = log.profile(settings.config);
    // The flush shortens what a longer prompt owes the calls ahead.
    let bound = log.bound_after(settings.config, estimate.removed);
    let summarizer_price = profile.summarizer;
    let decision = decide_summarize(&SummarizeInputs {
        prices,
        summarizer_input_price: summarizer_price,
        // The figure policies are compared by is billed input
        // (docs/economy.md); the output counts like input here.
        summarizer_output_price: summarizer_price,
        summarizer_input_tokens: estimate.summarizer_input,
        summarizer_output_tokens: estimate.summaries,
        suffix_tokens: estimate.suffix,
        removed_tokens: estimate.removed,
        expected_calls: calls_ahead(prompt_tokens, calls_so_far, log.context_window),
        cold_share: cold_share(cold, calls_so_far),
        prompt_tokens,
        context_window: log.context_window,
        pressure_share: settings.config.economy.pressure_share,
        budget_triggered: false,
        headroom: bound.headroom(),
        bound_cost: estimate.bound_cost(&profile, log),
        headroom_ahead: estimate.headroom_ahead(&bound, &prices),
    });
    match decision.held {
        _ if decision.summarize => Ok(()),
        Some(hold) => Err(hold),
        None => Err(Hold::NotRepaid),
    }
}

/// Whether the call after `now_ms` finds the cache cold whatever condense
/// does, by the terms the policy plans with ([`CallLog::next_call_cold`]).
pub(crate) fn next_call_cold(log: &CallLog, config: &Config, now_ms: i64) -> bool {
    log.next_call_cold(now_ms, cache_terms(config).ttl_ms)
}

/// Whether a call of the session found the cache cold by idle time.
pub(crate) fn seen_idle_expiry(messages: &[Message], config: &Config) -> bool {
    call_history(messages, cache_terms(config).ttl_ms).1 > 0
}

/// Whether a flush of `batches` may run at `now_ms` within the session's
/// bound against no pruning: the headroom pays its summarizer, or the next
/// call finds the cache cold anyway, so showing the summaries there saves
/// their outputs' rewrite at once ([`NoPruningBound::allows_summary`]).
/// Always true without a bound.
pub(crate) fn flush_affordable(
    messages: &[Message],
    unshown_from: Option<usize>,
    batches: &[CapturedBatch],
    settings: &RenderSettings<'_>,
    log: &CallLog,
    now_ms: i64,
    merged: bool,
) -> bool {
    let estimate =
        FlushEstimate::shown_with(messages, unshown_from, batches, merged, settings.config);
    let profile = log.profile(settings.config);
    let prices = cache_terms(settings.config);
    let cold = next_call_cold(log, settings.config, now_ms);
    // The flush shortens what a longer prompt owes the calls ahead.
    let bound = log.bound_after(settings.config, estimate.removed);
    let cost = estimate.bound_cost(&profile, log);
    if cold {
        return bound.allows_summary(cost, estimate.removed as f64 * prices.write);
    }
    // Warm, the summaries are shown by a switch that rewrites what follows
    // them: a flush whose switch the bound cannot pay soon would leave its
    // summaries in every later prompt beside the outputs they summarize.
    // Under a miss model the next call finds the cache cold with the chance
    // its gap shows, and then owes no rewrite and saves the outputs' write.
    let m = miss_share(
        log.miss_rates(settings.config).as_ref(),
        log.last_ms,
        Some(now_ms),
    );
    let rewrite = (1.0 - m) * estimate.warm_rewrite(&prices);
    let at_once = m * estimate.removed as f64 * prices.write;
    bound.allows_summary(cost, at_once)
        && bound.allows_summary(
            cost + rewrite,
            at_once + estimate.headroom_ahead(&bound, &prices),
        )
}

/// Whether a flush of `batches` pays at a call that finds the cache cold
/// anyway (the first after the host's compaction): showing the summaries
/// there saves their outputs' write at once, more than the summarizer
/// reads; under the bound against no pruning, the headroom may pay the
/// rest ([`NoPruningBound::allows_summary`]).
pub(crate) fn flush_pays_at_cold_call(
    messages: &[Message],
    batches: &[CapturedBatch],
    settings: &RenderSettings<'_>,
    log: &CallLog,
    merged: bool,
) -> bool {
    let estimate = FlushEstimate::of(messages, batches, merged, settings.config);
    let cost = estimate.bound_cost(&log.profile(settings.config), log);
    let saved_at_once = estimate.removed as f64 * cache_terms(settings.config).write;
    saved_at_once >= cost
        || (bounded(settings.config)
            && log
                .bound(settings.config)
                .allows_summary(cost, saved_at_once))
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::CapturedCall;
    use condense_summarizer::prompt::{batch_user_message, BATCH_PROMPT};

    use crate::unpruned_compaction::tests::message;

    fn batch(turn: i64, id: &str, result: &str) -> CapturedBatch {
        CapturedBatch {
            turn_index: turn,
            timestamp: 0,
            assistant_text: String::new(),
            calls: vec![CapturedCall {
                tool_call_id: id.to_owned(),
                tool_name: "read".to_owned(),
                args: serde_json::json!({ "path": "src/lib.rs" }).into(),
                result_text: result.into(),
                is_error: false,
                result_timestamp: None,
            }],
            user_turn_group: Some(0),
        }
    }

    /// After a run whose 40 reads of 10,000 characters (about 105,000
    /// tokens unpruned) were sent stubbed but for the last 10 (about
    /// 27,000), in a 100,000-token window: no pruning compacts now, the
    /// host (at `host_tokens`) does not, and the bound's totals are
    /// `sent` against `unpruned`.
    fn after_a_pruned_run(host_tokens: u64, sent: f64, unpruned: f64) -> (CallLog, Vec<Message>) {
        let messages: Vec<Message> = (0..40)
            .flat_map(|_| [message("user", 400), message("toolResult", 10_000)])
            .chain([message("assistant", 200)])
            .collect();
        let prompt: Vec<Message> = (0..40)
            .flat_map(|i| {
                let result = if i < 30 { 100 } else { 10_000 };
                [message("user", 400), message("toolResult", result)]
            })
            .collect();
        let mut log = CallLog {
            context_window: Some(100_000),
            host_tokens: Some(host_tokens),
            last_unpruned_tokens: Some(bound_tokens(&messages)),
            last_prompt: Some(prompt),
            ..CallLog::default()
        };
        log.unpruned_compaction.measured(1, 1);
        log.bound.add_call(sent, unpruned);
        (log, messages)
    }

    #[test]
    fn a_run_that_leaves_the_session_owing_more_than_its_bound_has_asks_for_a_compaction() {
        let config = Config::default();
        let (log, messages) = after_a_pruned_run(30_000, 1_000.0, 1_000.0);
        assert!(log.compaction_pays(&messages, &config));
        // What the session saved covers what running on owes.
        let (rich, _) = after_a_pruned_run(30_000, 0.0, 10_000_000.0);
        assert!(!rich.compaction_pays(&messages, &config));
        // The host compacts it itself: nothing to ask.
        let (full, _) = after_a_pruned_run(90_000, 1_000.0, 1_000.0);
        assert!(!full.compaction_pays(&messages, &config));
        // No bound, nothing it could pass.
        let mut unbounded = config.clone();
        unbounded.economy.max_excess = None;
        assert!(!log.compaction_pays(&messages, &unbounded));
        // No pruning would not compact: its prompt is under the point.
        let mut short = log.clone();
        short.last_unpruned_tokens = Some(50_000);
        assert!(!short.compaction_pays(&messages[..40], &config));
        // Without a window, no compaction point is known.
        let mut unknown = log;
        unknown.context_window = None;
        assert!(!unknown.compaction_pays(&messages, &config));
    }

    #[test]
    fn a_batch_the_flush_keeps_raw_is_neither_charged_nor_counted_removed() {
        let config = Config::default();
        let large = batch(1, "a", &"x".repeat(3_000));
        let small = batch(2, "b", &"y".repeat(600));
        assert!(condense_core::kept_raw(&small, &config));
        assert!(!condense_core::kept_raw(&large, &config));
        for merged in [false, true] {
            let both = FlushEstimate::of(&[], &[large.clone(), small.clone()], merged, &config);
            let alone = FlushEstimate::of(&[], std::slice::from_ref(&large), merged, &config);
            assert_eq!(
                both.summarizer_input, alone.summarizer_input,
                "merged {merged}"
            );
            assert_eq!(both.bound_input, alone.bound_input, "merged {merged}");
            assert_eq!(both.removed, alone.removed, "merged {merged}");
            assert_eq!(both.summaries, alone.summaries, "merged {merged}");
        }
    }

    #[test]
    fn a_flush_is_charged_its_summaries_at_the_wordiest_rate_the_session_wrote() {
        let config = Config::default();
        let profile = PriceProfile::named("openai").unwrap();
        let merged = [
            batch(1, "a", &"x".repeat(3_000)),
            batch(1, "b", &"y".repeat(3_000)),
        ];
        let estimate = FlushEstimate::of(&[], &merged, true, &config);
        let input = estimate.bound_input as f64;
        let charged = |log: &CallLog| (estimate.bound_cost(&profile, log) - input) / profile.output;
        // Before any summary: a quarter above the merged projection of
        // 100 tokens a call.
        let mut log = CallLog::default();
        assert_eq!(estimate.summaries, 200);
        assert_eq!(charged(&log), 250.0);
        // Then the wordiest summary per call covered, not the average.
        log.summary_written(4, 200);
        log.summary_written(1, 90);
        log.summary_written(2, 60);
        assert_eq!(charged(&log), 180.0);
        log.summary_written(3, 600);
        assert_eq!(charged(&log), 400.0);
    }

    #[test]
    fn a_flush_shown_with_earlier_unshown_work_is_charged_the_rewrite_from_there() {
        let config = Config::default();
        let message = |v: serde_json::Value| Message::from_value(&v).expect("a message");
        let output = |id: &str| {
            message(serde_json::json!({"role": "toolResult", "toolCallId": id,
                "toolName": "read", "content": [{"type": "text", "text": "z".repeat(4_000)}],
                "isError": false, "timestamp": 0}))
        };
        let messages = [output("old"), output("a")];
        let newest = [batch(1, "a", &"x".repeat(3_000))];
        let alone = FlushEstimate::of(&messages, &newest, false, &config);
        assert_eq!(alone.suffix, tokens(&messages[1..]));
        // The switch that shows it also shows what waits from message 0.
        let with = FlushEstimate::shown_with(&messages, Some(0), &newest, false, &config);
        assert_eq!(with.suffix, tokens(&messages));
        assert_eq!(with.removed, alone.removed, "it removes only its own");
        let prices = cache_terms(&config);
        assert!(with.warm_rewrite(&prices) > alone.warm_rewrite(&prices));
    }

    #[test]
    fn a_flush_as_captured_counts_the_instructions_once_a_batch() {
        let batches = [
            batch(1, "a", &"x".repeat(3_000)),
            batch(2, "b", &"y".repeat(1_600)),
        ];
        let estimate = FlushEstimate::of(&[], &batches, false, &Config::default());
        let sent: usize = batches.iter().map(|b| js_len(&batch_user_message(b))).sum();
        // The user message is the whole request: it holds the instructions.
        assert!(sent > 2 * js_len(BATCH_PROMPT));
        assert_eq!(estimate.summarizer_input, sent.div_ceil(3) as u64);
    }

    #[test]
    fn the_bound_counts_a_summarizer_prompt_as_it_counts_the_main_prompts() {
        let batches = [
            batch(1, "a", &"x".repeat(3_000)),
            batch(2, "b", &"y".repeat(1_600)),
        ];
        let estimate = FlushEstimate::of(&[], &batches, false, &Config::default());
        let expected: u64 = batches
            .iter()
            .map(|b| chars_to_tokens(js_len(&batch_user_message(b))) + FRAMING_TOKENS)
            .sum();
        assert_eq!(estimate.bound_input, expected);
        // Below the unbounded projection's three characters a token.
        assert!(estimate.bound_input < estimate.summarizer_input);
    }

    #[test]
    fn a_message_costs_the_bound_its_framing_beyond_its_content() {
        let m = |text: &str| {
            Message::from_value(&serde_json::json!({"role": "user",
                "content": [{"type": "text", "text": text}], "timestamp": 0}))
            .expect("a message")
        };
        let one = [m(&"a".repeat(400))];
        let two = [m(&"a".repeat(200)), m(&"a".repeat(200))];
        assert_eq!(bound_tokens(&one), tokens(&one) + FRAMING_TOKENS);
        assert_eq!(bound_tokens(&two), tokens(&two) + 2 * FRAMING_TOKENS);
    }
}
