//! The per-call path: the host's list synced into the engine's copy, the
//! cache-aware policy's switch, and the render the model is sent.

use condense_core::{render, Message, PlanStep, RenderSettings, SwitchReason};
use condense_store::effects::switch_entry;
use condense_store::entries::SwitchEntryData;

use super::Engine;
use crate::protocol::{Delivery, Effect, Effects};
use crate::switch::CallFacts;

impl Engine {
    /// `context`: syncs the messages (`keep` of ours still match, then
    /// `append`) and renders. Returns the steps (`None` = unchanged) and
    /// effects (footer, diagnostics to persist).
    pub fn context(
        &mut self,
        keep: usize,
        append: Vec<Message>,
    ) -> (Option<Vec<PlanStep>>, Effects) {
        self.context_at(keep, append, &CallFacts::default())
    }

    /// Messages the host added without the events of their turns (a
    /// history it was handed whole, at `now`): synced as at `context`
    /// (`keep` of ours still match, then `append`), and their work queued
    /// as their turns' ends would have queued it, oversized outputs spilled
    /// (the effects: entries to persist), by one rescan of the branch
    /// rather than one capture a turn.
    pub fn appended(&mut self, keep: usize, append: Vec<Message>, now: i64) -> Effects {
        self.sync_host(keep, append);
        let mut out = Effects::new();
        if self.config.enabled {
            let batches = self.capture_now(now);
            self.pending = batches
                .into_iter()
                .map(|batch| self.spill(batch, &mut out))
                .collect();
            self.refresh_metrics();
        }
        out
    }

    /// The host's list synced into the copy: `keep` of ours still match,
    /// then `append`. A list sent again from the start (a compaction, a
    /// navigation) keeps the turns it lost counted.
    pub(super) fn sync_host(&mut self, keep: usize, append: Vec<Message>) {
        if keep == 0 && !self.messages.is_empty() {
            self.turns_before =
                crate::turns::turns_before_replacing(&self.messages, self.turns_before, &append);
        }
        self.injected
            .sync(&mut self.messages, &mut self.entry_ts, keep, append);
    }

    /// [`Engine::context`] for a call the host describes (its time and
    /// model). Under the cache-aware policy this is where a switch happens:
    /// its entry is the first effect, and the render already shows it, so
    /// what the model is sent is what a reload renders.
    pub fn context_at(
        &mut self,
        keep: usize,
        append: Vec<Message>,
        call: &CallFacts,
    ) -> (Option<Vec<PlanStep>>, Effects) {
        self.sync_host(keep, append);
        self.calls.reported(call);
        let mut out = Effects::new();
        if !self.config.enabled {
            return (self.injected.host_steps(None, &self.messages), out);
        }
        if let Some(start) = self.start_to_persist(call.now_ms) {
            out.push(Effect::entry(switch_entry(&start), Delivery::Runtime));
        }
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        // The call unpruned, priced once: the decision weighs the switch
        // against it, and the bound adds it as what the call would have
        // billed.
        let priced = self.config.economy.policy.gates_on_switch().then(|| {
            let profile = self.calls.profile(&self.config);
            let misses = self.calls.miss_rates(&self.config);
            let unpruned = self
                .calls
                .unpruned(&self.messages, (&profile, misses.as_ref()), call);
            (profile, unpruned)
        });
        let user_asked = std::mem::take(&mut self.user_asked);
        let mut decided = None;
        if let Some((profile, unpruned)) = &priced {
            let crate::switch::Decided {
                switch,
                held,
                render,
            } = crate::switch::decide(
                &self.messages,
                &self.state,
                &settings,
                &self.calls,
                call,
                (profile, unpruned),
                user_asked,
            );
            self.calls.switch_held = held;
            if let Some(switch) = switch {
                self.state.record_switch(self.messages.len());
                self.economy
                    .add_switch(condense_store::economy::switch_record(&switch));
                out.push(Effect::entry(switch_entry(&switch), Delivery::Runtime));
            }
            decided = render;
        }
        // The decision's render is the state's now (after a switch it
        // rendered what recording the switch shows).
        let r = decided.unwrap_or_else(|| render(&self.messages, &self.state, &settings));
        self.report_diagnostics(&r.diagnostics, &mut out);
        if let Some((profile, unpruned)) = priced {
            let misses = self.calls.miss_rates(&self.config);
            self.calls.sent(
                r.messages(&self.messages),
                unpruned,
                (&profile, misses.as_ref()),
                call,
            );
        }
        let steps = r.plan.map(|plan| {
            self.reclaim = Some((plan.before_chars, plan.after_chars));
            plan.steps
        });
        let steps = self.injected.host_steps(steps, &self.messages);
        out.extend(self.status_if_changed());
        (steps, out)
    }

    /// The cache-aware policy's first switch on a branch that has none
    /// (a new session, or one pi-condense or the reference policy wrote):
    /// it shows what the branch already shows ungated, so the render does
    /// not change, and from here on what flushes add waits for a switch.
    /// The caller persists the entry before anything that depends on it.
    /// `None` when the branch is gated already, or the policy is not
    /// cache-aware.
    pub(super) fn start_gating(&mut self, now_ms: Option<i64>) -> Option<SwitchEntryData> {
        let starts = self.config.enabled
            && self.config.economy.policy.gates_on_switch()
            && self.state.switch_count() == 0;
        starts.then(|| {
            self.state.record_switch(self.messages.len());
            SwitchEntryData::undecided(SwitchReason::Start, self.messages.len(), now_ms)
        })
    }

    /// The start switch whose entry the caller must persist now: one a
    /// flush recorded and has not returned yet, or one [`start_gating`]
    /// records at `now_ms`.
    ///
    /// [`start_gating`]: Engine::start_gating
    pub(super) fn start_to_persist(&mut self, now_ms: Option<i64>) -> Option<SwitchEntryData> {
        self.gating_started
            .take()
            .or_else(|| self.start_gating(now_ms))
    }
}
