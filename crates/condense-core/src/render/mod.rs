//! The render pipeline: what the model sees, as an edit plan over the branch.
//!
//! [`render`] runs five phases over the branch's messages, in this order:
//! 1. [`stub`]: summarized and spilled tool results become short stubs
//!    (render-time protection re-check, recovery grace window);
//! 2. [`purge`]: argument bodies of failed calls are purged after a cooldown;
//! 3. [`chains`]: compressed chains collapse into one `<compressed-chain>`
//!    user message after their start user message;
//! 4. [`sweep`]: tool results without an open tool call are removed;
//! 5. [`thinking`]: opt-in strip of thinking blocks outside the last K
//!    assistant turns.
//!
//! Under the cache-aware policy a [`Gate`] keeps what flushes added since
//! the last switch entry *pending*: its results render raw, its chains
//! uncompressed, and only failed calls before the last switch are purged.
//! The reference policy shows everything (pi-condense's behaviour), and so
//! does a branch with no switch entry at all, whatever the policy: one that
//! pi-condense wrote renders as pi-condense renders it.
//!
//! No phase mutates its input. A render that changes nothing returns
//! [`Render::plan`] `None` without copying a message or serializing anything.

pub(crate) mod chain_memo;
pub(crate) mod chains;
pub(crate) mod grace;
mod id_set;
pub(crate) mod purge;
pub(crate) mod purge_memo;
pub(crate) mod render_memo;
pub(crate) mod stub;
pub(crate) mod sweep;
pub(crate) mod thinking;

pub use chains::neutralize_closing_tags;
pub use grace::in_grace_keys;

use std::ops::Range;

use crate::config::Config;
use crate::config::Policy;
use crate::diagnostics::Diagnostic;
use crate::message::Message;
use crate::protect::Protection;
use crate::state::State;
use crate::token_estimate::chars_to_tokens;

use chain_memo::ChainMemo;
use purge_memo::PurgeMemo;
use render_memo::RenderMemo;

/// What the render phases keep between renders of one branch: the last
/// renders, the chain phase's indexes and synthetics, the purged copies.
/// A render never depends on them being warm. A clone starts empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct RenderMemos {
    last: RenderMemo,
    chain: ChainMemo,
    purge: PurgeMemo,
}

/// One step of an edit plan. The output is the concatenation of the steps;
/// input messages not covered by a `Keep` are dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanStep {
    /// Input messages in this index range, unchanged.
    Keep(Range<usize>),
    /// A message condense wrote (a stub, a purged or stripped copy, a
    /// `<compressed-chain>` synthetic).
    New(Message),
}

/// The edits that turn the branch into what the model sees.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderPlan {
    /// The output, as runs of kept input and new messages.
    pub steps: Vec<PlanStep>,
    /// `JSON.stringify(input).length`, from cached per-message sizes.
    pub before_chars: usize,
    /// `JSON.stringify(output).length`, likewise.
    pub after_chars: usize,
}

/// Applies plan steps to the messages they were computed for, as a host
/// applies them. A range past the messages contributes what it covers.
pub fn apply_steps(steps: &[PlanStep], messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for step in steps {
        match step {
            PlanStep::Keep(r) => out.extend_from_slice(messages.get(r.clone()).unwrap_or_default()),
            PlanStep::New(m) => out.push(m.clone()),
        }
    }
    out
}

impl RenderPlan {
    /// Applies the plan to the messages it was computed for.
    pub fn apply(&self, messages: &[Message]) -> Vec<Message> {
        apply_steps(&self.steps, messages)
    }

    /// Estimated tokens before (chars / 4, rounded).
    pub fn before_tokens(&self) -> u64 {
        chars_to_tokens(self.before_chars)
    }

    /// Estimated tokens after (chars / 4, rounded).
    pub fn after_tokens(&self) -> u64 {
        chars_to_tokens(self.after_chars)
    }
}

/// The result of one render.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Render {
    /// `None` when nothing changed: the model sees the branch as it is.
    pub plan: Option<RenderPlan>,
    /// Degradations noticed on the way, deduplicated by kind and key.
    pub diagnostics: Vec<Diagnostic>,
}

impl Render {
    /// The rendered messages (a copy of the input when nothing changed).
    pub fn messages(&self, input: &[Message]) -> Vec<Message> {
        match &self.plan {
            Some(p) => p.apply(input),
            None => input.to_vec(),
        }
    }
}

/// `JSON.stringify(array).length` for messages of the given sizes.
pub fn array_chars<I: IntoIterator<Item = usize>>(sizes: I) -> usize {
    let mut n = 0usize;
    let mut total = 2; // [ ]
    for s in sizes {
        total += s;
        n += 1;
    }
    total + n.saturating_sub(1)
}

/// The working list of a render: input positions or new messages, built only
/// once something changes.
#[derive(Debug)]
pub(crate) enum Item {
    Orig(usize),
    New(Message),
}

pub(crate) struct Working<'a> {
    base: &'a [Message],
    items: Option<Vec<Item>>,
}

impl<'a> Working<'a> {
    fn new(base: &'a [Message]) -> Self {
        Working { base, items: None }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.as_ref().map_or(self.base.len(), Vec::len)
    }

    pub(crate) fn get(&self, i: usize) -> &Message {
        match &self.items {
            None => &self.base[i],
            Some(items) => match &items[i] {
                Item::Orig(j) => &self.base[*j],
                Item::New(m) => m,
            },
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Message> + Clone + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    fn items_mut(&mut self) -> &mut Vec<Item> {
        let base = self.base;
        self.items
            .get_or_insert_with(|| (0..base.len()).map(Item::Orig).collect())
    }

    pub(crate) fn replace(&mut self, i: usize, m: Message) {
        self.items_mut()[i] = Item::New(m);
    }

    /// Replaces the whole list; `f` gets the current items.
    pub(crate) fn rebuild(&mut self, f: impl FnOnce(Vec<Item>) -> Vec<Item>) {
        let items = std::mem::take(self.items_mut());
        self.items = Some(f(items));
    }

    fn into_plan(self) -> Option<RenderPlan> {
        let items = self.items?;
        let before = array_chars(self.base.iter().map(Message::size));
        let mut after_sizes = 0usize;
        let mut steps: Vec<PlanStep> = Vec::new();
        for item in &items {
            match item {
                Item::Orig(j) => {
                    after_sizes += self.base[*j].size();
                    if let Some(PlanStep::Keep(r)) = steps.last_mut() {
                        if r.end == *j {
                            r.end += 1;
                            continue;
                        }
                    }
                    steps.push(PlanStep::Keep(*j..*j + 1));
                }
                Item::New(m) => {
                    after_sizes += m.size();
                    steps.push(PlanStep::New(m.clone()));
                }
            }
        }
        let after = 2 + after_sizes + items.len().saturating_sub(1);
        // A plan that reproduces the input exactly is no change at all.
        if steps.len() == 1 && steps[0] == PlanStep::Keep(0..self.base.len()) {
            return None;
        }
        if items.is_empty() && self.base.is_empty() {
            return None;
        }
        Some(RenderPlan {
            steps,
            before_chars: before,
            after_chars: after,
        })
    }
}

/// What a render needs besides the messages and the state.
#[derive(Debug, Clone)]
pub struct RenderSettings<'a> {
    /// The normalized config.
    pub config: &'a Config,
    /// The protection predicate compiled from it.
    pub protection: &'a Protection,
}

/// What the display policy lets a render show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    /// `false` under the reference policy, and on a branch with no switch
    /// entry: everything is shown.
    gated: bool,
    /// Content first summarized when fewer switches than this existed is shown.
    shown_before: u64,
    /// Failed calls among this many first messages may be purged.
    purge_horizon: Option<usize>,
}

impl Gate {
    fn new(state: &State, policy: Policy) -> Gate {
        Gate {
            // A branch with no switch entry was written by pi-condense or
            // under the reference policy: it renders as they render it
            // until the engine records the first switch.
            gated: policy.gates_on_switch() && state.switch_count() > 0,
            shown_before: state.switch_count(),
            purge_horizon: state.purge_horizon(),
        }
    }

    /// As if a switch were recorded now, at a context of `messages` messages.
    fn after_switch(state: &State, policy: Policy, messages: usize) -> Gate {
        Gate {
            gated: policy.gates_on_switch(),
            shown_before: state.switch_count() + 1,
            purge_horizon: Some(messages),
        }
    }

    /// True when content first summarized at switch count `since` is shown.
    pub(crate) fn shows(&self, since: Option<u64>) -> bool {
        !self.gated || since.is_some_and(|s| s < self.shown_before)
    }

    /// How many leading messages the error purge may touch.
    fn purge_limit(&self, len: usize) -> usize {
        if self.gated {
            self.purge_horizon.unwrap_or(0).min(len)
        } else {
            len
        }
    }
}

/// [`crate::render`], with the branch's state and render memos apart.
pub(crate) fn render(
    messages: &[Message],
    state: &State,
    memos: &RenderMemos,
    settings: &RenderSettings<'_>,
) -> Render {
    let gate = Gate::new(state, settings.config.economy.policy);
    render_gated(messages, state, memos, settings, gate)
}

/// [`crate::render_after_switch`], with the state and memos apart.
pub(crate) fn render_after_switch(
    messages: &[Message],
    state: &State,
    memos: &RenderMemos,
    settings: &RenderSettings<'_>,
) -> Render {
    let gate = Gate::after_switch(state, settings.config.economy.policy, messages.len());
    render_gated(messages, state, memos, settings, gate)
}

fn render_gated(
    messages: &[Message],
    state: &State,
    memos: &RenderMemos,
    settings: &RenderSettings<'_>,
    gate: Gate,
) -> Render {
    // Keyed on the content generation: a switch changes only what the gate
    // captures, so the render that priced a switch is the one the call then
    // sends.
    memos.last.get_or_make(
        state.content_generation(),
        gate,
        settings.config,
        settings.protection.fingerprint(),
        messages,
        || render_now(messages, state, memos, settings, gate),
    )
}

fn render_now(
    messages: &[Message],
    state: &State,
    memos: &RenderMemos,
    settings: &RenderSettings<'_>,
    gate: Gate,
) -> Render {
    let config = settings.config;
    let mut work = Working::new(messages);
    let mut diags = crate::diagnostics::Collector::default();

    // Chains resolve first so the stub phase can skip the results they drop.
    let resolved = (config.chain_compression.enabled && state.chains().len() > 0)
        .then(|| chains::resolve(messages, state, &memos.chain, gate, &mut diags));
    let dropped = resolved.as_ref().and_then(|r| r.dropped_results(messages));
    stub::apply(
        &mut work,
        state,
        settings.protection,
        config.recovery_grace_turns,
        dropped.as_deref(),
        gate,
    );
    if config.purge_errors.enabled {
        let limit = gate.purge_limit(work.len());
        purge::apply(&mut work, &config.purge_errors, limit, &memos.purge);
    }
    if let Some(resolved) = &resolved {
        chains::apply(
            &mut work,
            state,
            &memos.chain,
            resolved,
            config.chain_compression.strip_final_assistant_thinking,
            &mut diags,
        );
    }
    sweep::apply(&mut work, &mut diags);
    if config.thinking_strip.enabled {
        thinking::apply(
            &mut work,
            config.thinking_strip.keep_last_turns.max(1) as usize,
        );
    }
    Render {
        plan: work.into_plan(),
        diagnostics: diags.finish(),
    }
}
