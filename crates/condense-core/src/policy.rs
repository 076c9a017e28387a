//! The display policy: when the model is shown what flushes prepared.
//!
//! Under [`Policy::Reference`] (pi-condense's behaviour) whatever a flush
//! appends is shown at once. Under [`Policy::CacheAware`] it is *pending*
//! until a switch (a `context-prune-switch` entry), and the switch happens
//! only when it is free or pays for itself under prompt caching: a stub saves
//! only on the calls after it, and changing an early message rewrites the
//! cached prefix from there on.
//!
//! Everything here is arithmetic over values the caller supplies (token
//! counts, times in ms, prices in units of one uncached input token); the
//! live sidecar and the simulator call the same functions. Cache prices are
//! the economy module's [`CacheTerms`].

use crate::config::Policy;
use crate::economy::CacheTerms;
#[cfg(doc)]
use crate::economy::NoPruningBound;
use crate::message::{Message, Role};

/// Why the cache is cold at this call regardless of what condense does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdEvent {
    /// The session was started from a branch whose last call the next one
    /// cannot be priced against: none is recorded, or a compaction, a
    /// model change or a switch came after it. (A branch whose last call
    /// is known is cold only by the time since it.)
    Resume,
    /// The model changed since the previous call (another cache).
    ModelChange,
    /// The harness compacted the context since the previous call (pi's
    /// compaction): its summary replaces the history near the prompt's
    /// start, so everything after the system prompt is written anew.
    Compaction,
}

/// What [`decide_switch`] needs to know about one LLM call.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchInputs {
    /// This call's time (ms).
    pub now_ms: i64,
    /// The previous LLM call's time (ms); `None` for the first call.
    pub previous_call_ms: Option<i64>,
    /// A host event that makes the cache cold.
    pub cold_event: Option<ColdEvent>,
    /// The provider's cache prices.
    pub prices: CacheTerms,
    /// Tokens of the prompt as it would be sent without the switch.
    pub prompt_tokens: u64,
    /// Tokens from the first message the switch would change to the end of
    /// that prompt (`S`).
    pub suffix_tokens: u64,
    /// Tokens of that prompt from its first message the previous call did
    /// not send as is (`N`: appended since, or changed by the render without
    /// a switch): written at this call whether it switches or not, so no
    /// part of the rewrite.
    pub new_tokens: u64,
    /// Tokens the switch removes (`P`).
    pub removed_tokens: u64,
    /// Calls expected from this one on, this one included (`R`, at least 1).
    pub expected_calls: u64,
    /// Share of the calls so far that found the cache cold by idle time, in
    /// `[0, 1]`; a stub also saves its size on each future cold rewrite.
    pub cold_share: f64,
    /// The model's context window (tokens), if known.
    pub context_window: Option<u64>,
    /// Share of the window at which the prompt is under pressure.
    pub pressure_share: f64,
    /// The budget trigger fired for this call.
    pub budget_triggered: bool,
    /// Switching at this call keeps the session within its bound against
    /// no pruning ([`NoPruningBound::allows_call`]; always true without
    /// one): a warm switch, even under pressure, waits until it does.
    pub within_bound: bool,
    /// The chance the provider misses the cached prefix at this call
    /// although its TTL has not passed (`economy.missRates` at the gap).
    pub miss_share: f64,
}

/// Why a switch happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchReason {
    /// The previous call is older than the cache's time to live.
    IdleExpiry,
    /// The session was started from a branch the call cannot be priced
    /// against ([`ColdEvent::Resume`]).
    Resume,
    /// The model changed.
    ModelChange,
    /// The harness compacted the context.
    Compaction,
    /// The prompt nears the context window, or the budget trigger fired.
    Pressure,
    /// The projected saving over the expected calls beats the rewrite.
    Pays,
    /// The cache-aware policy takes over a branch that had no switch entry:
    /// everything summarized so far stays shown, as it was rendered before,
    /// and what flushes add from here on waits for a switch. Recorded
    /// before the first call it renders, so it changes nothing the model
    /// has seen.
    Start,
    /// The user asked for a flush or a compaction (`/pruner now`,
    /// `/pruner compact`): the next call shows what it prepared, whatever
    /// the switch costs.
    User,
}

impl SwitchReason {
    /// The spelling persisted in the switch entry's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchReason::IdleExpiry => "idle-expiry",
            SwitchReason::Resume => "resume",
            SwitchReason::ModelChange => "model-change",
            SwitchReason::Compaction => "compaction",
            SwitchReason::Pressure => "pressure",
            SwitchReason::Pays => "pays",
            SwitchReason::Start => "start",
            SwitchReason::User => "user",
        }
    }

    /// Parses a persisted reason.
    pub fn from_name(name: &str) -> Option<SwitchReason> {
        [
            SwitchReason::IdleExpiry,
            SwitchReason::Resume,
            SwitchReason::ModelChange,
            SwitchReason::Compaction,
            SwitchReason::Pressure,
            SwitchReason::Pays,
            SwitchReason::Start,
            SwitchReason::User,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
    }
}

/// A switch entry's `reason` as persisted: one the policy gives, or a
/// spelling this version does not know, kept as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedReason {
    /// A reason this version's policy gives.
    Known(SwitchReason),
    /// Another condense's spelling.
    Unknown(String),
}

impl RecordedReason {
    /// The persisted spelling.
    pub fn as_str(&self) -> &str {
        match self {
            RecordedReason::Known(reason) => reason.as_str(),
            RecordedReason::Unknown(name) => name,
        }
    }

    /// Whether it is `reason`.
    pub fn is(&self, reason: SwitchReason) -> bool {
        *self == RecordedReason::Known(reason)
    }
}

impl From<SwitchReason> for RecordedReason {
    fn from(reason: SwitchReason) -> Self {
        RecordedReason::Known(reason)
    }
}

impl From<&str> for RecordedReason {
    fn from(name: &str) -> Self {
        match SwitchReason::from_name(name) {
            Some(reason) => RecordedReason::Known(reason),
            None => RecordedReason::Unknown(name.to_owned()),
        }
    }
}

impl serde::Serialize for RecordedReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for RecordedReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(RecordedReason::from(String::deserialize(d)?.as_str()))
    }
}

/// Why the cache-aware policy holds back what it could summarize or show,
/// as `/pruner status` tells the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Showing the summaries now would rewrite the cached prefix for more
    /// than the expected calls save: they wait for a call that finds the
    /// cache cold anyway.
    ColdCache,
    /// A summary would not repay its summarizer call over the expected
    /// calls yet.
    NotRepaid,
    /// The bound against no pruning has no headroom left for the bet (what
    /// the session saved, with `economy.maxExcess`, is spent).
    AllowanceSpent,
    /// A reply's flush waits for the next run's start: the call it pays
    /// off at is certain only once the user prompts again.
    NextPrompt,
}

impl Hold {
    /// The reason in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Hold::ColdCache => "waiting for a cold cache",
            Hold::NotRepaid => "not yet repaid",
            Hold::AllowanceSpent => "allowance spent",
            Hold::NextPrompt => "waiting for the next prompt",
        }
    }
}

/// The outcome of [`decide_switch`], with the figures behind it (persisted in
/// the switch entry, shown by `/pruner status`).
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchDecision {
    /// `Some` when the pending content should be shown at this call.
    pub switch: Option<SwitchReason>,
    /// What switching now costs beyond keeping the prefix (units); zero when
    /// the cache is cold anyway.
    pub rewrite_cost: f64,
    /// What the switch saves over the expected remaining calls (units).
    pub projected_saving: f64,
    /// Why a switch that would remove tokens is not made.
    pub held: Option<Hold>,
}

/// The extra a switch costs at this call over reading the cached prefix:
/// `(S' − P)·w − S'·r`, where `S' = S − N` is the part of the suffix the
/// previous call sent (the cache holds it; the rest is written either way).
/// A cold cache rewrites the suffix anyway, so there a switch only saves
/// (`−P·w`).
fn rewrite_extra(i: &SwitchInputs, cold: bool) -> f64 {
    let cached = i.suffix_tokens.saturating_sub(i.new_tokens);
    let s = cached as f64;
    let p = i.removed_tokens.min(cached) as f64;
    let w = i.prices.write;
    if cold {
        -p * w
    } else {
        (s - p) * w - s * i.prices.read
    }
}

/// What removing `P` tokens saves on each call after this one, on average:
/// a cache read of them on a warm call, a write on a cold one.
fn saving_per_later_call(removed: u64, prices: &CacheTerms, cold_share: f64) -> f64 {
    let c = cold_share.clamp(0.0, 1.0);
    removed as f64 * ((1.0 - c) * prices.read + c * prices.write)
}

/// True when the gap since the previous call exceeds the cache's TTL.
pub fn is_idle_expired(now_ms: i64, previous_call_ms: Option<i64>, ttl_ms: i64) -> bool {
    previous_call_ms.is_some_and(|prev| now_ms.saturating_sub(prev) > ttl_ms)
}

/// Whether to show everything pending at this call, and why.
///
/// In order: nothing to remove never switches; a cold cache (idle past the
/// TTL, a resume, a model change, a compaction) switches, the rewrite being paid anyway;
/// a switch the session cannot afford (`within_bound` false: the savings so
/// far would not cover the rewrite should no later call come) waits;
/// pressure (the prompt at `pressure_share` of the window, or the budget
/// trigger) switches; otherwise the switch happens iff the rewrite's extra
/// cost now is below the saving over the later expected calls:
/// `(S' − P)·w − S'·r < (R − 1)·P·((1 − c)·r + c·w)`, `S' = S − N`.
pub fn decide_switch(i: &SwitchInputs) -> SwitchDecision {
    let later = i.expected_calls.max(1) - 1;
    let projected_saving =
        later as f64 * saving_per_later_call(i.removed_tokens, &i.prices, i.cold_share);
    let cold_reason = match i.cold_event {
        Some(ColdEvent::Resume) => Some(SwitchReason::Resume),
        Some(ColdEvent::ModelChange) => Some(SwitchReason::ModelChange),
        Some(ColdEvent::Compaction) => Some(SwitchReason::Compaction),
        None => is_idle_expired(i.now_ms, i.previous_call_ms, i.prices.ttl_ms)
            .then_some(SwitchReason::IdleExpiry),
    };
    let m = i.miss_share.clamp(0.0, 1.0);
    let warm_rewrite = (1.0 - m) * rewrite_extra(i, false) + m * rewrite_extra(i, true);
    let rewrite_cost = if cold_reason.is_some() {
        rewrite_extra(i, true)
    } else {
        warm_rewrite
    }
    .max(0.0);
    let switch = if i.removed_tokens == 0 {
        None
    } else if cold_reason.is_some() {
        cold_reason
    } else if !i.within_bound {
        None
    } else if i.budget_triggered
        || under_pressure(i.prompt_tokens, i.context_window, i.pressure_share)
    {
        Some(SwitchReason::Pressure)
    } else if warm_rewrite < projected_saving {
        Some(SwitchReason::Pays)
    } else {
        None
    };
    let held = match switch {
        Some(_) => None,
        None if i.removed_tokens == 0 => None,
        None if !i.within_bound => Some(Hold::AllowanceSpent),
        None => Some(Hold::ColdCache),
    };
    SwitchDecision {
        switch,
        rewrite_cost,
        projected_saving,
        held,
    }
}

/// The share of the pressure share at which the cache-aware policy's
/// budget trigger flushes: the flush runs at a turn's end and the switch
/// that shows it at the next call, so that turn must still fit under the
/// pressure limit (at the defaults 8,000 tokens of a 200,000 window).
/// Measured on generated runs that never reply (docs/economy.md): 1.0 let
/// prompts pass the limit, 0.9 summarized runs that ended too soon after to
/// repay it.
pub const BUDGET_HEADROOM: f64 = 0.95;

/// The share of the context window at which the budget trigger flushes:
/// `autoBudgetThreshold` as configured, and under the cache-aware policy at
/// most [`BUDGET_HEADROOM`] of the pressure share, so a run that never
/// replies (where every other trigger waits) is summarized before its prompt
/// passes the pressure limit, and the switch that shows it follows at the
/// next call.
pub fn budget_threshold(
    policy: Policy,
    configured: Option<f64>,
    pressure_share: f64,
) -> Option<f64> {
    let latest = pressure_share * BUDGET_HEADROOM;
    match (policy, configured) {
        (Policy::Reference, t) => t,
        (Policy::CacheAware, Some(t)) => Some(t.min(latest)),
        (Policy::CacheAware, None) => Some(latest),
    }
}

/// True when `prompt_tokens` reaches `share` of a known window.
pub fn under_pressure(prompt_tokens: u64, context_window: Option<u64>, share: f64) -> bool {
    context_window.is_some_and(|w| w > 0 && prompt_tokens as f64 >= share * w as f64)
}

/// What [`decide_summarize`] needs to know about a flush the triggers asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarizeInputs {
    /// The provider's cache prices.
    pub prices: CacheTerms,
    /// Price of a summarizer input token, in main-model input units (1 when
    /// the session's own model summarizes).
    pub summarizer_input_price: f64,
    /// Price of a summarizer output token, in the same units.
    pub summarizer_output_price: f64,
    /// Tokens the summarizer would read (the batches' text and its prompt).
    pub summarizer_input_tokens: u64,
    /// Tokens the summarizer is expected to write.
    pub summarizer_output_tokens: u64,
    /// Tokens of the prompt from the first output the flush would stub to
    /// the end (`S` of the switch that would show it).
    pub suffix_tokens: u64,
    /// Tokens showing the flush's result would remove (`P`: the outputs
    /// minus their stubs and the summary message).
    pub removed_tokens: u64,
    /// LLM calls expected after this flush (`R`).
    pub expected_calls: u64,
    /// Share of calls so far that found the cache cold by idle time.
    pub cold_share: f64,
    /// Tokens of the current prompt.
    pub prompt_tokens: u64,
    /// The model's context window (tokens), if known.
    pub context_window: Option<u64>,
    /// Share of the window at which the prompt is under pressure.
    pub pressure_share: f64,
    /// The budget trigger asked for this flush.
    pub budget_triggered: bool,
    /// What the session may still spend within its bound against no
    /// pruning ([`NoPruningBound::headroom`], units; infinite without one):
    /// a summary, even under pressure, is paid from it.
    pub headroom: f64,
    /// What the bound is charged for the summarizer (units): its input
    /// only (billed input is what the bound weighs), counted as the bound
    /// counts prompts, so the two compare.
    pub bound_cost: f64,
    /// What the headroom is expected to gain before the switch that shows
    /// the flush's summaries (units): the bound may pay that switch from
    /// it, the summaries' own reads meanwhile counted against it.
    pub headroom_ahead: f64,
}

/// The outcome of [`decide_summarize`], with its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarizeDecision {
    /// Run the flush now.
    pub summarize: bool,
    /// The summarizer's projected cost (units).
    pub summarizer_cost: f64,
    /// What showing the result saves over the expected calls, net of the
    /// rewrite at a warm switch (units).
    pub net_saving: f64,
    /// Why a flush with tokens to remove does not run.
    pub held: Option<Hold>,
}

/// What a switch that removes `removed` of the `suffix` tokens after the
/// cached prefix costs beyond keeping that prefix, at a call that finds the
/// cache warm: `(S − P)·w − S·r`, never below zero (units).
pub fn warm_rewrite(suffix: u64, removed: u64, prices: &CacheTerms) -> f64 {
    let s = suffix as f64;
    let p = removed.min(suffix) as f64;
    ((s - p) * prices.write - s * prices.read).max(0.0)
}

/// Whether a flush the triggers asked for is worth its summarizer call.
///
/// Summarizing costs now; it pays back only once the result is shown. So a
/// flush runs, when the session's bound pays the summarizer and the warm
/// switch that will show its result (`headroom`; a flush whose switch the
/// bound cannot pay would leave its summaries in every later prompt beside
/// the outputs they summarize),
/// if the prompt is under pressure (pruning then beats pi's compaction
/// whatever it costs), or if the saving over the expected calls after it,
/// net of a warm switch's rewrite, exceeds the summarizer's cost.
/// A deferred flush loses nothing: the outputs stay captured and the next
/// trigger asks again, with more calls behind the estimate.
pub fn decide_summarize(i: &SummarizeInputs) -> SummarizeDecision {
    let summarizer_cost = i.summarizer_input_tokens as f64 * i.summarizer_input_price
        + i.summarizer_output_tokens as f64 * i.summarizer_output_price;
    let rewrite = warm_rewrite(i.suffix_tokens, i.removed_tokens, &i.prices);
    let saving =
        i.expected_calls as f64 * saving_per_later_call(i.removed_tokens, &i.prices, i.cold_share);
    let net_saving = saving - rewrite;
    let pressure =
        i.budget_triggered || under_pressure(i.prompt_tokens, i.context_window, i.pressure_share);
    let within_bound =
        i.headroom >= i.bound_cost && i.headroom + i.headroom_ahead >= i.bound_cost + rewrite;
    let pays = pressure || net_saving > summarizer_cost;
    let held = if i.removed_tokens == 0 {
        None
    } else if !within_bound {
        Some(Hold::AllowanceSpent)
    } else if !pays {
        Some(Hold::NotRepaid)
    } else {
        None
    };
    SummarizeDecision {
        summarize: i.removed_tokens > 0 && within_bound && pays,
        summarizer_cost,
        net_saving,
        held,
    }
}

/// How many times the calls so far [`expected_calls`] takes the calls still
/// to come to be.
///
/// A session that has run `n` calls runs `k` more with a probability of
/// about `n / (n + k)` (a Lindy estimate: at the median it is halfway
/// through). Taking `3n` switches when the odds that the session lasts long
/// enough to repay the rewrite are at least one in four, not one in two:
/// waiting is not free, since every call in between rewrites a longer
/// suffix when the switch comes and pays the removed tokens' reads meanwhile.
/// Measured (docs/economy.md): with `n` the policy billed more than
/// `reference` on 11 of 60 generated sessions, with `3n` on 1.
pub const EXPECTED_CALLS_FACTOR: u64 = 3;

/// pi's default `compaction.reserveTokens`: pi compacts once a prompt
/// passes the context window less this.
pub const COMPACTION_RESERVE_TOKENS: u64 = 16_384;

/// pi's default `compaction.keepRecentTokens`: what a compaction keeps of
/// the newest messages (pi's `chars / 4` estimate).
pub const COMPACTION_KEEP_RECENT_TOKENS: u64 = 20_000;

/// The summary a compaction writes, in tokens: about what pi's two
/// recorded compactions in the pi-mono fixtures wrote (4,291 and 3,649
/// characters, 1,324 and 1,126 tokens at the calibrated rate).
pub const COMPACTION_SUMMARY_TOKENS: u64 = 1_200;

/// The LLM calls expected from now on (this one included), estimated from
/// the calls so far ([`EXPECTED_CALLS_FACTOR`] times them, at least 1).
pub fn expected_calls(calls_so_far: u64) -> u64 {
    calls_so_far.max(1) * EXPECTED_CALLS_FACTOR
}

/// The calls a stub can still save on before pi's compaction replaces the
/// history it sits in (this one included): the room left under the
/// compaction point, at the prompt's growth per call so far. `None` when
/// the window is unknown.
pub fn calls_before_compaction(
    prompt_tokens: u64,
    calls_so_far: u64,
    context_window: Option<u64>,
) -> Option<u64> {
    let window = context_window.filter(|w| *w > 0)?;
    let growth = (prompt_tokens / calls_so_far.max(1)).max(1);
    let room = window
        .saturating_sub(COMPACTION_RESERVE_TOKENS)
        .saturating_sub(prompt_tokens);
    Some(room / growth + 1)
}

/// The share of calls so far that found the cache cold by idle time.
pub fn cold_share(cold_calls: u64, calls_so_far: u64) -> f64 {
    if calls_so_far == 0 {
        0.0
    } else {
        (cold_calls as f64 / calls_so_far as f64).clamp(0.0, 1.0)
    }
}

/// The token figures of a switch at one call: the prompt as it stands
/// (`current`, rendered with what is pending kept raw) against the prompt
/// with the switch (`shown`). Tokens are `chars / 4` of what of each message
/// reaches the model ([`Message::prompt_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchSizes {
    /// Tokens of `current`.
    pub prompt_tokens: u64,
    /// Tokens of `current` from its first message that `shown` changes (`S`).
    pub suffix_tokens: u64,
    /// How many tokens `shown` has fewer than `current` (`P`).
    pub removed_tokens: u64,
}

/// Measures a switch from the two renders of one call (see [`SwitchSizes`]).
pub fn switch_sizes(current: &[Message], shown: &[Message]) -> SwitchSizes {
    let tokens = |ms: &[Message]| ms.iter().map(Message::prompt_tokens).sum::<u64>();
    let first = current
        .iter()
        .zip(shown)
        .position(|(a, b)| a != b)
        .unwrap_or(current.len().min(shown.len()));
    let prompt_tokens = tokens(current);
    SwitchSizes {
        prompt_tokens,
        suffix_tokens: tokens(&current[first..]),
        removed_tokens: prompt_tokens.saturating_sub(tokens(shown)),
    }
}

/// The LLM calls a branch records (its assistant messages) and how many of
/// them came after a gap longer than `ttl_ms` since the previous one (by
/// their timestamps): the inputs of [`expected_calls`] and [`cold_share`].
pub fn call_history(messages: &[Message], ttl_ms: i64) -> (u64, u64) {
    let mut calls = 0u64;
    let mut cold = 0u64;
    let mut previous: Option<i64> = None;
    for m in messages.iter().filter(|m| m.is(&Role::Assistant)) {
        calls += 1;
        let at = m.timestamp();
        if let Some(now) = at {
            if is_idle_expired(now, previous, ttl_ms) {
                cold += 1;
            }
            previous = Some(now);
        }
    }
    (calls, cold)
}
