//! The facade: a branch as the phases work on it, its [`State`] and the
//! memos the phases keep beside it between calls, and the one-call entry
//! points that hand each phase its memo.
//!
//! The state holds what a session persists; the memos hold what a phase
//! read off the messages last time, so that the next call reads only what
//! is new. A memo never changes an answer: each is checked against the
//! very messages it was made from and keyed on the state's generation,
//! which no two different states share.

use std::ops::{Deref, DerefMut};

use crate::capture::{self, CaptureMemo, CapturedBatch, Known};
use crate::chains_memo::ChainsMemo;
use crate::compress::{self, ChainPlan};
use crate::config::{BatchingMode, Config};
use crate::message::Message;
use crate::metrics::ContextMetrics;
use crate::metrics_memo::MetricsMemo;
use crate::protect::Protection;
use crate::records::Frontier;
use crate::render::{self, Render, RenderMemos, RenderSettings};
use crate::state::State;

/// One branch's pruning state with the phases' memos.
///
/// It reads as its [`State`] (`Deref`) and changes through it (`DerefMut`):
/// every change moves the state to a generation no state had, so the memos
/// never answer for a state they were not made from.
#[derive(Debug, Clone)]
pub struct Branch {
    state: State,
    memos: Memos,
}

/// A clone starts empty (each memo belongs to one state value).
#[derive(Debug, Clone, Default)]
struct Memos {
    render: RenderMemos,
    capture: CaptureMemo,
    chains: ChainsMemo,
    metrics: MetricsMemo,
}

impl Branch {
    /// A branch with an empty state.
    pub fn new() -> Self {
        Branch::from(State::new())
    }

    fn known(&self) -> Known<'_> {
        Known {
            state: &self.state,
            turns: &self.memos.capture,
        }
    }

    #[cfg(test)]
    pub(crate) fn capture_memo(&self) -> &CaptureMemo {
        &self.memos.capture
    }
}

impl Default for Branch {
    fn default() -> Self {
        Branch::new()
    }
}

impl From<State> for Branch {
    fn from(state: State) -> Self {
        Branch {
            state,
            memos: Memos::default(),
        }
    }
}

impl Deref for Branch {
    type Target = State;

    fn deref(&self) -> &State {
        &self.state
    }
}

impl DerefMut for Branch {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

/// Computes what the model should see for `messages` given the `branch`.
pub fn render(messages: &[Message], branch: &Branch, settings: &RenderSettings<'_>) -> Render {
    render::render(messages, &branch.state, &branch.memos.render, settings)
}

/// What the model would see if a switch were recorded now, at this context:
/// [`render`] with everything pending shown. Equal to [`render`] under the
/// reference policy. The cache-aware policy compares the two to price a
/// switch.
pub fn render_after_switch(
    messages: &[Message],
    branch: &Branch,
    settings: &RenderSettings<'_>,
) -> Render {
    render::render_after_switch(messages, &branch.state, &branch.memos.render, settings)
}

/// Rescans a branch for completed, unsummarized, unprotected tool calls.
///
/// `entry_timestamps[i]` is the ms timestamp of the session entry holding
/// `messages[i]` (a batch's timestamp); when absent the assistant message's
/// own timestamp is used, then `now`.
pub fn capture_branch(
    messages: &[Message],
    entry_timestamps: &[Option<i64>],
    branch: &Branch,
    protection: &Protection,
    now: i64,
) -> Vec<CapturedBatch> {
    capture::capture_branch(messages, entry_timestamps, branch.known(), protection, now)
}

/// What a flush would work on now: the branch rescanned, trimmed to what
/// lies past the frontier, grouped by the batching mode.
///
/// `messages` is the context pi builds from the branch; `turns_before` is
/// the number of assistant messages on the branch before it (the ones pi's
/// compaction left out). Turns are numbered over the
/// whole branch, as pi-condense's rescan of `getBranch()` numbers them, so
/// the frontier, which both write in that numbering, still holds after a
/// compaction.
pub fn capture_pending(
    messages: &[Message],
    entry_timestamps: &[Option<i64>],
    turns_before: i64,
    branch: &Branch,
    protection: &Protection,
    mode: BatchingMode,
    now: i64,
) -> Vec<CapturedBatch> {
    capture::capture_pending(
        messages,
        entry_timestamps,
        turns_before,
        branch.known(),
        protection,
        mode,
        now,
    )
}

/// Plans the compression of eligible chains.
///
/// `messages` is the branch (the closing message, when a flush runs before pi
/// persisted it, is threaded in here); `rolling_window` is K (0 for
/// `/pruner compact`).
pub fn plan_chains(
    messages: &[Message],
    closing: Option<&Message>,
    branch: &Branch,
    config: &Config,
    protection: &Protection,
    rolling_window: u32,
) -> ChainPlan {
    compress::plan_chains(
        messages,
        closing,
        &branch.state,
        &branch.memos.chains,
        config,
        protection,
        rolling_window,
    )
}

/// Computes the metrics of a branch.
///
/// `frontier` is the last persisted prune frontier; `branch`'s state
/// answers whether an occurrence is summarized ([`State::is_summarized`],
/// strict); `protection` whether a call is protected (tool name and the
/// call's arguments).
///
/// **Open segment**: the messages strictly after the last text-only assistant
/// (an assistant without `toolCall` blocks) through the end, every role
/// included; the whole branch when there is none.
///
/// **Open-cycle thinking**: the summed chars of the `thinking` blocks of the
/// open segment's assistant messages, each block measured as its own JSON
/// text (`JSON.stringify(block).length`, signature included, as
/// pi-condense's src/context-metrics.ts does), then converted to tokens once.
///
/// **Largest-chain share**: the larger of the largest chain and the open
/// segment, over the whole branch. Chains are the detector's closed and
/// interrupted chains (interrupted ones count: they are retained context);
/// a closed chain spans its start user message through its closing
/// assistant, an interrupted one through the message before the user
/// message that interrupted it. Ranges are positional, straight from the
/// detection walk, and chains whose start has no timestamp count too (they
/// are retained context even if they can never be compressed).
///
/// **Frontier gap**: the boundary is located by counting every assistant
/// message from 0 (the turn counter of pi-condense's branch rescan, so the
/// first assistant is turn 0): the boundary turn is the first assistant
/// whose counter equals `last_attempted_turn_index`; it must hold a
/// `toolCall` with `last_attempted_tool_call_id`, otherwise (or with no
/// frontier, or no such turn) the window is the whole branch. With a
/// boundary, tool results up to and including the boundary assistant are
/// outside the window, and so are results after it, but before the next
/// assistant, whose id is one of the boundary turn's calls up to and
/// including the frontier's call. Each tool result in the window counts its
/// tokens unless its occurrence (`toolCallId` + its own timestamp) is
/// summarized or its call is protected, judged by the result's `toolName`
/// and the arguments of the call with its id in the nearest preceding
/// assistant.
///
/// `messages` is the context pi builds from the branch; `turns_before` is
/// the number of assistant messages on the branch before it (the ones pi's
/// compaction left out), so the frontier's turn, numbered over the whole
/// branch, is found in it; a frontier before it leaves the whole context in
/// the window.
///
/// The branch keeps what it read off the messages between calls (a memo
/// checked against the very messages), so measuring a branch that grew
/// reads only the new messages and the frontier window.
pub fn compute_context_metrics(
    messages: &[Message],
    turns_before: i64,
    frontier: Option<&Frontier>,
    branch: &Branch,
    protection: &Protection,
) -> ContextMetrics {
    let frontier = frontier.map(|f| Frontier {
        last_attempted_turn_index: f.last_attempted_turn_index - turns_before,
        ..f.clone()
    });
    branch
        .memos
        .metrics
        .measure(messages, frontier.as_ref(), &branch.state, protection)
}
