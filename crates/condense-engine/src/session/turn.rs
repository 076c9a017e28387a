//! Turn end, replies, and agent runs starting and ending: what is
//! captured and spilled, and which of them fires a flush.

use condense_core::{capture_pending, capture_turn, trim_to_pending, without_protected};
use condense_core::{flush_trigger, TriggerKind};
use condense_core::{CapturedBatch, Message, PruneOn, RecordedUsage, RenderSettings, Role};

use super::{entries, Engine, ReplyFlush};
use crate::flush::{spill_batch, BlobDir};
use crate::protocol::{Delivery, Effect, Effects};
use condense_store::effects::switch_entry;

impl Engine {
    /// `turn_end` comes before the next `context`: appends the turn's
    /// assistant message and results to the copy (so a budget flush at turn
    /// end rescans them, as pi-condense's `getBranch()` would), unless the
    /// copy already ends with them (a pi that delivered `context` first).
    fn sync_turn(&mut self, assistant: &Message, results: &[Message]) {
        let turn: Vec<&Message> = std::iter::once(assistant).chain(results).collect();
        let n = turn.len();
        let already = self.messages.len() >= n
            && self.messages[self.messages.len() - n..]
                .iter()
                .zip(&turn)
                .all(|(a, b)| a.json() == b.json());
        if !already {
            self.messages.extend(turn.into_iter().cloned());
            self.entry_ts.extend(std::iter::repeat_n(None, n));
        }
    }

    pub(super) fn capture_now(&self, now: i64) -> Vec<CapturedBatch> {
        self.capture_sent(now, self.messages.len())
    }

    /// [`Engine::capture_now`] over the messages before `end`.
    pub(super) fn capture_sent(&self, now: i64, end: usize) -> Vec<CapturedBatch> {
        capture_pending(
            &self.messages[..end.min(self.messages.len())],
            &self.entry_ts[..end.min(self.entry_ts.len())],
            self.turns_before,
            &self.state,
            &self.protection,
            self.config.batching_mode,
            now,
        )
    }

    /// `turn_end`: capture the turn's batch (protection, eager spill, frontier
    /// trim), queue it, and decide whether a budget trigger flushes now.
    pub fn turn_end(
        &mut self,
        turn_index: i64,
        assistant: &Message,
        results: &[Message],
        tokens: Option<u64>,
        context_window: u64,
        now: i64,
    ) -> (Effects, Option<TriggerKind>) {
        let mut out = Effects::new();
        // Set again below when this turn's end runs a long run's flush.
        self.unsent_from = None;
        self.sync_turn(assistant, results);
        if let Some(usage) = RecordedUsage::of_message(assistant) {
            let profile = self.calls.profile(&self.config);
            self.calls.output(usage.output, &profile);
            self.calls.usage_reported(usage.cache_read);
            self.misses_reported(now, &mut out);
            self.economy.add_call(usage);
        } else if RecordedUsage::refused(assistant) {
            out.push(Effect::warning(format!(
                "condense: this call's recorded usage is left out of the economics: a count \
                 that is not a whole number of tokens up to {}",
                condense_core::MAX_RECORDED_TOKENS
            )));
        }
        if !self.config.enabled {
            return (out, None);
        }
        // Measured on every turn: the delta trigger compares consecutive turns.
        let threshold = condense_core::budget_threshold(
            self.config.economy.policy,
            self.config.auto_budget_threshold,
            self.config.economy.pressure_share,
        );
        let decision = self.budget.on_turn_end(
            tokens,
            context_window,
            threshold,
            self.config.budget_turn_delta,
        );
        self.calls.turn(context_window, decision.budget_hit);
        if let Some(tokens) = tokens {
            self.calls
                .context_measured(tokens, &[std::slice::from_ref(assistant), results]);
        }
        let mut pushed = false;
        if !results.is_empty() {
            // Numbered over the branch as the frontier is (pi's `turnIndex`
            // counts within the run: every turn of a later run would number
            // below the frontier and never queue).
            let turn = self.turns_before + crate::turns::assistants(&self.messages) - 1;
            let mut batch = without_protected(
                capture_turn(assistant, results, turn, now),
                &self.protection,
            );
            // The run the turn belongs to: what a flush under the bound
            // may merge, and its estimate with it.
            batch.user_turn_group = Some(crate::turns::runs(&self.messages, self.turns_before));
            let batch = self.spill(batch, &mut out);
            if let Some(b) = trim_to_pending(batch, &self.state, self.state.frontier()) {
                self.pending.push(b);
                pushed = true;
                if self.config.show_prune_status_line {
                    out.push(Effect::status(Some(format!(
                        "│ prune: {} pending",
                        self.pending.len()
                    ))));
                }
                let when = match self.config.prune_on {
                    PruneOn::AgentMessage => "agent's next text response",
                    PruneOn::OnDemand => "/pruner now",
                };
                out.push(Effect::info(format!(
                    "pruner: {} turn(s) queued — will summarize on {when}",
                    self.pending.len()
                )));
            }
            self.refresh_metrics();
        }
        // A reply's flush no agent start ran (a host without the event):
        // the next run's first turn runs it.
        let mut reply_flush = self.reply_flush == ReplyFlush::NextRun && !self.flushing;
        if reply_flush {
            self.reply_flush = ReplyFlush::None;
            reply_flush = self.flush_affordable(now);
        }
        if !pushed && !self.rearmed && !reply_flush {
            return (out, None);
        }
        let n = self.pending.len();
        let gated = flush_trigger(n, self.rearmed, self.flushing, decision).filter(|_| {
            !self.config.economy.policy.gates_on_switch() || self.flush_affordable(now)
        });
        let (trigger, text) = match gated {
            Some(TriggerKind::Rearmed) => (
                gated,
                "pruner: context budget reached — compacting work recovered after reload"
                    .to_owned(),
            ),
            Some(TriggerKind::Budget) => (
                gated,
                format!("pruner: context budget reached — compacting {n} pending turn(s)"),
            ),
            Some(_) => (
                gated,
                format!("pruner: context jumped this turn — compacting {n} pending turn(s)"),
            ),
            // The cache-aware policy's own flushes say what they are.
            None if reply_flush => (
                Some(TriggerKind::MessageEnd),
                format!("pruner: after the last reply — compacting {n} pending turn(s)"),
            ),
            None => match self.in_run_flush(turn_index, now) {
                Some((t, text)) => (Some(t), text),
                None => (None, String::new()),
            },
        };
        if trigger.is_some() {
            out.push(Effect::info(text));
        }
        (out, trigger)
    }

    /// Under the cache-aware policy, a flush at a turn's end inside a run:
    /// in a long run's turn when summarizing what is pending pays over the
    /// expected calls ([`crate::switch::turn_flush_pays`]), and in any
    /// turn whose end the clock puts past the cache's time to live since
    /// the last call (a tool ran that long), when showing the summaries at
    /// that call, which rewrites everything anyway, saves more than the
    /// summarizer reads ([`crate::switch::flush_pays_at_cold_call`]).
    /// Reported as `delta` (the context grew), the trigger pi-condense
    /// knows for a mid-run flush, with the number of turns it summarizes.
    ///
    /// The turn that just ended is left out: no call has sent its outputs
    /// yet, and the switch that shows the flush's summaries would hand the
    /// model a summary of what its own call asked for. The next turn's end
    /// may summarize it, once a call has sent it.
    fn in_run_flush(&mut self, turn_index: i64, now: i64) -> Option<(TriggerKind, String)> {
        let long = turn_index >= crate::switch::LONG_RUN_TURNS;
        let cold = crate::switch::next_call_cold(&self.calls, &self.config, now);
        if !self.config.economy.policy.gates_on_switch()
            || !(long || cold)
            || self.flushing
            || self.pending.is_empty()
        {
            return None;
        }
        let unsent_from = self
            .messages
            .iter()
            .rposition(|m| m.is(&Role::Assistant))
            .unwrap_or(self.messages.len());
        // What the flush will summarize, captured as it will (after a
        // restart the queue holds only what was captured since).
        let sent = self.capture_sent(now, unsent_from);
        if sent.is_empty() {
            return None;
        }
        let held = std::cell::Cell::new(None);
        let pays = |merged: bool| {
            let settings = RenderSettings {
                config: &self.config,
                protection: &self.protection,
            };
            let (messages, log) = (&self.messages, &self.calls);
            let long_pays = long
                && match crate::switch::turn_flush_pays(
                    messages,
                    self.state.first_unshown(messages),
                    &sent,
                    &settings,
                    log,
                    merged,
                ) {
                    Ok(()) => true,
                    Err(hold) => {
                        held.set(Some(hold));
                        false
                    }
                };
            long_pays
                || (cold
                    && crate::switch::flush_pays_at_cold_call(
                        messages, &sent, &settings, log, merged,
                    ))
        };
        let how = flush_by(&self.config, pays);
        self.calls.flush_held = if how.is_some() { None } else { held.get() };
        let flushes = self.flush_as(how);
        if flushes {
            self.unsent_from = Some(unsent_from);
        }
        let why = if long {
            "long run"
        } else {
            "cache expired during the tools"
        };
        flushes.then(|| {
            (
                TriggerKind::Delta,
                format!("pruner: {why} — compacting {} pending turn(s)", sent.len()),
            )
        })
    }

    /// Records how the flush `how` allowed summarizes; whether there is one.
    fn flush_as(&mut self, how: Option<bool>) -> bool {
        if let Some(merged) = how {
            self.merge_runs = merged;
        }
        how.is_some()
    }

    /// Eager spill of oversized results: the blob is written first and the
    /// record committed after, so a failed write leaves the output inline.
    pub(super) fn spill(&mut self, batch: CapturedBatch, out: &mut Effects) -> CapturedBatch {
        if let Some(start) = self.start_to_persist(Some(batch.timestamp)) {
            out.push(Effect::entry(switch_entry(&start), Delivery::Session));
        }
        let mut blobs = BlobDir(self.blob_dir.as_deref());
        let spilled = spill_batch(batch, &mut self.state, &self.config, &mut blobs);
        for f in spilled.failures {
            // The output stays inline; the next flush summarizes it.
            eprintln!("condense: {f}");
        }
        entries(out, &spilled.effects, Delivery::Session);
        spilled.rest
    }

    /// `message_end`: an assistant reply without tool calls flushes in
    /// `agent-message` mode (the reply threaded in as the closing message).
    /// Under the cache-aware policy the flush waits for the next agent run
    /// ([`Engine::agent_start`]): summaries made at a session's last reply
    /// would never be shown, and the next run's first call is where a
    /// switch is cheapest (its cache is often cold after the user's pause).
    pub fn message_end(&mut self, message: &Message) -> Option<TriggerKind> {
        let asks = self.config.enabled
            && self.config.prune_on == PruneOn::AgentMessage
            && message.is_text_only_assistant();
        if asks && self.config.economy.policy.gates_on_switch() {
            self.reply_flush = ReplyFlush::ThisRun;
            return None;
        }
        asks.then_some(TriggerKind::MessageEnd)
    }

    /// The start of an agent run (the user's next prompt, before its first
    /// call, at `now`): the flush a reply asked for under the cache-aware
    /// policy, when the session can afford it (`Engine::flush_affordable`).
    pub fn agent_start(&mut self, now: i64) -> Option<TriggerKind> {
        let asked = std::mem::take(&mut self.reply_flush) != ReplyFlush::None;
        (asked && self.config.enabled && self.flush_affordable(now))
            .then_some(TriggerKind::MessageEnd)
    }

    /// The host compacted the context (pi's `session_compact`, after pi
    /// rebuilt its list; `keep` and `append` are that list, synced as at
    /// `context`). The next call finds the cache cold, under no pruning
    /// too, and the cache-aware policy's switch decision and bound price it
    /// so. Under that policy, captured work the compaction left out of the
    /// context is dropped (no call sees it again), and the rest is flushed now
    /// when showing its summaries at that cold call saves more than the
    /// summarizer reads (`switch::flush_pays_at_cold_call`); the
    /// last turn is left out when no call has sent its outputs
    /// (`unsent_after_compaction`), as a long run's flush leaves it out.
    /// A compaction after a run's reply leaves the flush to the next run's
    /// start ([`Engine::agent_start`]), the first moment a call is certain.
    pub fn compacted(
        &mut self,
        keep: usize,
        append: Vec<Message>,
        now: i64,
    ) -> Option<TriggerKind> {
        self.sync_host(keep, append);
        self.calls.compacted();
        if !self.config.enabled || !self.config.economy.policy.gates_on_switch() {
            return None;
        }
        let kept: std::collections::HashSet<&str> = self
            .messages
            .iter()
            .filter(|m| m.is(&Role::ToolResult))
            .filter_map(|m| m.skeleton().tool_call_id.as_deref())
            .collect();
        self.pending.retain_mut(|b| {
            b.calls.retain(|c| kept.contains(c.tool_call_id.as_str()));
            !b.calls.is_empty()
        });
        // After a run that ended in a reply, the next call waits for the
        // user's next prompt, who may never send one: the reply's held
        // flush runs at that run's start, where the call is certain and
        // still cold (`CallLog::compacted`), and pays there. Run now, it
        // would bill its summarizer for a call that may never come. An
        // overflow's compaction (the list ends with the refused call) is
        // followed by the call retried.
        let waits_for_a_prompt =
            self.reply_flush == ReplyFlush::NextRun && ends_in_reply(&self.messages);
        if self.flushing || waits_for_a_prompt {
            return None;
        }
        let unsent_from = unsent_after_compaction(&self.messages);
        let sent = self.capture_sent(now, unsent_from);
        if sent.is_empty() {
            return None;
        }
        let pays = |merged: bool| {
            let settings = RenderSettings {
                config: &self.config,
                protection: &self.protection,
            };
            crate::switch::flush_pays_at_cold_call(
                &self.messages,
                &sent,
                &settings,
                &self.calls,
                merged,
            )
        };
        let how = flush_by(&self.config, pays);
        if !self.flush_as(how) {
            return None;
        }
        self.unsent_from = Some(unsent_from);
        Some(if self.reply_flush == ReplyFlush::None {
            TriggerKind::Delta
        } else {
            TriggerKind::MessageEnd
        })
    }

    /// Whether the cache-aware policy's bound against no pruning pays for
    /// a flush of what is pending ([`crate::switch::flush_affordable`]);
    /// unpaid, it stays captured for the next trigger.
    fn flush_affordable(&mut self, now: i64) -> bool {
        // What the flush would summarize: the queue holds only the turns
        // this process saw end, and a restarted one finds the rest on the
        // branch.
        let batches = self.capture_now(now);
        let anything = !batches.is_empty();
        let unshown_from = self.state.first_unshown(&self.messages);
        let affordable = |batches: &[CapturedBatch], merged: bool| {
            let settings = RenderSettings {
                config: &self.config,
                protection: &self.protection,
            };
            crate::switch::flush_affordable(
                &self.messages,
                unshown_from,
                batches,
                &settings,
                &self.calls,
                now,
                merged,
            )
        };
        let mut how = flush_by(&self.config, |merged| affordable(&batches, merged));
        // What is pending piles up while the bound cannot pay for showing
        // it all, and the switch that shows it rewrites from its oldest
        // output: the newest run's outputs alone sit near the end of the
        // prompt, so their switch rewrites little. The older ones stay as
        // they are, raw, in the cached prefix.
        let mut tail_from = None;
        if how.is_none() {
            let newest_run = batches.last().and_then(|b| b.user_turn_group);
            let tail: Vec<CapturedBatch> = batches
                .iter()
                .filter(|b| newest_run.is_some() && b.user_turn_group == newest_run)
                .cloned()
                .collect();
            // A tail the summarizer would not read (every batch of it kept
            // raw) gains nothing, and the frontier would pass the older
            // outputs for it.
            let summarizes = tail
                .iter()
                .any(|b| !condense_core::kept_raw_chars(b.raw_chars(), &self.config));
            if summarizes && tail.len() < batches.len() {
                how = flush_by(&self.config, |merged| affordable(&tail, merged));
                tail_from = how.and(tail.first().map(|b| b.turn_index));
            }
        }
        self.flush_from_turn = tail_from;
        if how.is_some() {
            self.calls.flush_held = None;
        } else if anything {
            self.calls.flush_held = Some(condense_core::Hold::AllowanceSpent);
        }
        self.flush_as(how)
    }

    /// `agent_end`: status; a flush the run's reply asked for now waits
    /// for the next run. A host that compacts when asked is asked to,
    /// under the bound against no pruning, where no pruning compacts and
    /// the pruned session running on would owe more than the bound has
    /// left (`CallLog::compaction_pays`).
    pub fn agent_end(&mut self) -> Effects {
        self.calls.run_ended();
        if self.reply_flush == ReplyFlush::ThisRun {
            self.reply_flush = ReplyFlush::NextRun;
            if !self.pending.is_empty() {
                self.calls.flush_held = Some(condense_core::Hold::NextPrompt);
            }
        }
        let mut out = Effects::new();
        if self.compacts_on_request
            && self.config.enabled
            && crate::switch::bounded(&self.config)
            && self.calls.compaction_pays(&self.messages, &self.config)
        {
            out.push(Effect::Compact);
            out.push(Effect::info(
                "condense: compacting where no pruning would have: running on with the \
                 pruned context would cost more than pruning saved (economy.maxExcess)",
            ));
        }
        if !self.config.enabled || !self.config.show_prune_status_line {
            return out;
        }
        let text = if self.pending.is_empty() && self.rearmed {
            "│ prune: recovered pending (reload)".to_owned()
        } else if !self.pending.is_empty() {
            format!("│ prune: {} pending", self.pending.len())
        } else {
            out.push(self.footer());
            return out;
        };
        out.push(Effect::status(Some(text)));
        out
    }
}

/// How a flush `pays` allows (given whether each run's turns share one
/// summarizer prompt) runs: `Some(true)` merged by run, under the bound
/// against no pruning when that pays; `Some(false)` as captured, turn by
/// turn, when that pays; `None` when neither does.
fn flush_by(config: &condense_core::Config, pays: impl Fn(bool) -> bool) -> Option<bool> {
    if crate::switch::bounded(config) && pays(true) {
        Some(true)
    } else if pays(false) {
        Some(false)
    } else {
        None
    }
}

/// An assistant message of a call that failed (refused, or aborted).
fn failed(m: &Message) -> bool {
    #[derive(serde::Deserialize)]
    struct Stop {
        #[serde(rename = "stopReason", default)]
        stop_reason: Option<String>,
    }
    m.is(&Role::Assistant)
        && serde_json::from_str::<Stop>(&m.json())
            .is_ok_and(|s| matches!(s.stop_reason.as_deref(), Some("error" | "aborted")))
}

/// Whether `messages` end with a reply the model gave: its run is over.
fn ends_in_reply(messages: &[Message]) -> bool {
    messages
        .last()
        .is_some_and(|m| m.is_text_only_assistant() && !failed(m))
}

/// Where the turn no call has sent starts in `messages`, the list after a
/// compaction: the last turn when the list ends with its outputs, or with
/// them and then failed replies (pi keeps the refused call's error message
/// on the branch, so the list it rebuilds at an overflow's compaction ends
/// with it; the call that would have sent those outputs is the one retried
/// next); else the end (a reply sent them all).
fn unsent_after_compaction(messages: &[Message]) -> usize {
    let end = messages.len() - messages.iter().rev().take_while(|m| failed(m)).count();
    let ends_with_outputs = messages[..end]
        .last()
        .is_some_and(|m| m.is(&Role::ToolResult));
    if ends_with_outputs {
        messages[..end]
            .iter()
            .rposition(|m| m.is(&Role::Assistant))
            .unwrap_or(end)
    } else {
        end
    }
}
