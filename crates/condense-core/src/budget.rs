//! Budget triggers: flush pending work when the context fills up or jumps.
//!
//! Two opt-in triggers, evaluated at every `turn_end` and ORed:
//!
//! - **budget** (`autoBudgetThreshold = t`): fires once the context holds at
//!   least `min(MAX_BUDGET_WINDOW, t × window)` tokens. The 300k ceiling
//!   keeps 1M-token windows from never flushing;
//! - **delta** (`budgetTurnDelta = d`): fires when the usage fraction rose by
//!   at least `d` since the previous turn. The fraction is
//!   `tokens / min(window, MAX_BUDGET_WINDOW)` and is not clamped, so it can
//!   exceed 1 on large windows.
//!
//! The gate remembers the previous turn's fraction. It is reset to none on
//! reload (`session_start`, `session_tree`), so the first turn after a reload
//! cannot fire a delta, and left unchanged by a turn without a token count
//! (right after a provider compaction `tokens` is null; reading that as 0
//! would fake a jump on the next turn).
//!
//! One deliberate difference from pi-condense: it only recorded the fraction
//! on turns that reached its gate (turns that queued a batch), so a "delta"
//! could span many turns and fire on slow growth. [`BudgetGate::on_turn_end`]
//! is called on every `turn_end` and records every turn, so the delta is
//! always between consecutive turns.
//!
//! Whether a flush then happens is [`flush_trigger`]'s decision.

use serde::{Deserialize, Serialize};

/// The largest window the budget triggers measure against, in tokens.
pub const MAX_BUDGET_WINDOW: u64 = 300_000;

/// What the budget triggers say about one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetDecision {
    /// The context reached the budget threshold.
    pub budget_hit: bool,
    /// The usage fraction jumped by at least the delta since the last turn.
    pub delta_hit: bool,
}

impl BudgetDecision {
    /// True if either trigger fired.
    pub fn any(self) -> bool {
        self.budget_hit || self.delta_hit
    }
}

/// A setting in `(0, 1]` (NaN, `<= 0` and `> 1` are off).
fn valid_fraction(value: Option<f64>) -> Option<f64> {
    value.filter(|v| *v > 0.0 && *v <= 1.0)
}

/// `tokens / min(window, MAX_BUDGET_WINDOW)`, unclamped; `None` without a
/// token count or with a zero window.
pub fn usage_fraction(usage_tokens: Option<u64>, context_window: u64) -> Option<f64> {
    let tokens = usage_tokens?;
    if context_window == 0 {
        return None;
    }
    Some(tokens as f64 / context_window.min(MAX_BUDGET_WINDOW) as f64)
}

/// True iff `threshold` is a valid fraction, the token count is known, the
/// window is non-zero and `tokens >= min(MAX_BUDGET_WINDOW, threshold ×
/// window)`.
pub fn budget_hit(usage_tokens: Option<u64>, context_window: u64, threshold: Option<f64>) -> bool {
    let (Some(t), Some(tokens)) = (valid_fraction(threshold), usage_tokens) else {
        return false;
    };
    if context_window == 0 {
        return false;
    }
    tokens as f64 >= (t * context_window as f64).min(MAX_BUDGET_WINDOW as f64)
}

/// The budget gate: remembers the previous turn's usage fraction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetGate {
    previous_fraction: Option<f64>,
}

impl BudgetGate {
    /// A gate with no previous fraction (the state after a reload).
    pub fn new() -> Self {
        BudgetGate::default()
    }

    /// The fraction recorded by the last turn that had a token count.
    pub fn previous_fraction(&self) -> Option<f64> {
        self.previous_fraction
    }

    /// Forgets the previous fraction. Call on `session_start` and
    /// `session_tree`.
    pub fn reset(&mut self) {
        self.previous_fraction = None;
    }

    /// Evaluates both triggers for a turn and records its fraction.
    ///
    /// Call on **every** `turn_end`, whether or not the turn queued a batch;
    /// the delta is measured between consecutive turns. `threshold` is
    /// `autoBudgetThreshold`, `delta` is `budgetTurnDelta` (`None`, or a
    /// value outside `(0, 1]`, turns a trigger off).
    ///
    /// - budget: see [`budget_hit`];
    /// - delta: fires iff `delta` is valid, a previous fraction exists, this
    ///   turn has a fraction ([`usage_fraction`]) and
    ///   `fraction - previous >= delta` (plain `f64` arithmetic, as
    ///   pi-condense's JavaScript does);
    /// - afterwards the previous fraction becomes this turn's, unless this
    ///   turn has none (null tokens or a zero window), in which case it is
    ///   kept.
    pub fn on_turn_end(
        &mut self,
        usage_tokens: Option<u64>,
        context_window: u64,
        threshold: Option<f64>,
        delta: Option<f64>,
    ) -> BudgetDecision {
        let fraction = usage_fraction(usage_tokens, context_window);
        let delta_hit = match (valid_fraction(delta), self.previous_fraction, fraction) {
            (Some(d), Some(previous), Some(current)) => current - previous >= d,
            _ => false,
        };
        if fraction.is_some() {
            self.previous_fraction = fraction;
        }
        BudgetDecision {
            budget_hit: budget_hit(usage_tokens, context_window, threshold),
            delta_hit,
        }
    }
}

/// Why a flush ran (the `trigger` of a `context-prune-flush-metrics` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerKind {
    /// `budget`: the context reached `autoBudgetThreshold`.
    Budget,
    /// `delta`: the context jumped by `budgetTurnDelta` in one turn.
    Delta,
    /// `message-end`: the agent's text-only reply closed the cycle.
    MessageEnd,
    /// `manual`: `/pruner now`.
    Manual,
    /// `rearmed`: a budget trigger fired with an empty queue after a reload
    /// found recoverable work on the branch.
    Rearmed,
}

impl TriggerKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Budget => "budget",
            TriggerKind::Delta => "delta",
            TriggerKind::MessageEnd => "message-end",
            TriggerKind::Manual => "manual",
            TriggerKind::Rearmed => "rearmed",
        }
    }
}

/// Whether a `turn_end` flushes, and as what.
///
/// A flush happens iff there is work (`pending` queued batches, or the
/// reload `rearmed` flag), no flush is running, and a budget trigger fired.
/// The trigger is `rearmed` when the queue is empty, else `budget` when the
/// budget trigger fired, else `delta`.
pub fn flush_trigger(
    pending: usize,
    rearmed: bool,
    flushing: bool,
    decision: BudgetDecision,
) -> Option<TriggerKind> {
    if (pending == 0 && !rearmed) || flushing || !decision.any() {
        return None;
    }
    Some(if pending == 0 {
        TriggerKind::Rearmed
    } else if decision.budget_hit {
        TriggerKind::Budget
    } else {
        TriggerKind::Delta
    })
}
