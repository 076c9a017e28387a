//! What a host reads of the engine (messages, state, config, economy),
//! `context_tree_query`, and the one way the config changes.

use condense_core::{Branch, Config, EconomyReport, Message, Protection};
use serde_json::{json, Value};

use super::Engine;
use crate::protocol::Effect;

impl Engine {
    /// How many messages of the host's list the engine holds: the most a
    /// `context` or `session.compact` request's `keep` can be.
    pub fn host_len(&self) -> usize {
        self.messages.len().saturating_sub(self.injected.len())
    }

    /// The context the engine renders: the host's list as the last
    /// `context` call (and turn ends since) gave it, with the summaries the
    /// engine's flushes wrote to the session in their places, as a reload
    /// would read them.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The host's own list as the engine holds it (what `keep` counts):
    /// [`Engine::messages`] without the summaries the host does not hold.
    pub fn host_messages(&self) -> impl Iterator<Item = &Message> + '_ {
        self.injected.host_messages(&self.messages)
    }

    /// The session's cache economics so far (recorded usage, priced at the
    /// configured profile) and what the display policy decided.
    /// Under the cache-aware policy it adds the engine's estimate against
    /// no pruning over the calls this process saw, and the summarizer's
    /// price it charged.
    pub fn economy_report(&self) -> EconomyReport {
        let mut report = self
            .economy
            .report_for(&self.config.economy, self.state.pending_count());
        if self.config.economy.policy.gates_on_switch() {
            report.against_no_pruning = Some(condense_core::AgainstNoPruning {
                saved_units: self.calls.saved(),
                max_excess: self.config.economy.max_excess,
                summarizer_price: self.calls.profile(&self.config).summarizer,
            });
            report.holding = Some(condense_core::Holding {
                switch: self.calls.switch_held,
                outputs: self.pending.iter().map(|b| b.calls.len()).sum(),
                flush: self.calls.flush_held,
            });
            report.misses = Some(self.planned_misses());
        }
        report
    }

    /// Whether a reload found recoverable work no flush has run for yet
    /// (`rearmed: yes` in `/pruner status`).
    pub fn is_rearmed(&self) -> bool {
        self.rearmed
    }

    /// The compiled protection rules of the current config.
    pub fn protection(&self) -> &Protection {
        &self.protection
    }

    /// `context_tree_query`: `page` picks each output's lines; a raw id the
    /// index does not know is looked up on the branch (see [`crate::query`]).
    pub fn query(&self, ids: &[String], page: condense_core::PageRequest) -> Value {
        let blob_dir = self.blob_dir.clone().unwrap_or_default();
        let out = crate::query::answer(
            &self.state,
            ids,
            page,
            &self.messages,
            self.session_file.as_deref(),
            &blob_dir,
        );
        let details: serde_json::Map<String, Value> = out
            .results
            .iter()
            .map(|(label, r)| {
                (
                    label.clone(),
                    serde_json::to_value(r).unwrap_or(Value::Null),
                )
            })
            .collect();
        json!({"text": out.text, "details": {"results": details}})
    }

    /// Pending batches.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The settings.json value the config came from.
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// The normalized config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The pruning state, with the phases' memos.
    pub fn state(&self) -> &Branch {
        &self.state
    }

    /// Whether the host compacts its context when asked
    /// ([`Effect::Compact`]): pi does (`ctx.compact`); OpenCode's plugin and
    /// the proxy's agents offer no such call.
    pub fn set_compacts_on_request(&mut self, compacts: bool) {
        self.compacts_on_request = compacts;
    }

    /// Replaces the config (a `/pruner` command changed it) and returns the
    /// `saveSettings` effect.
    pub fn set_config(&mut self, config: Config) -> Effect {
        let block =
            config.to_settings_value(self.settings.get("contextPrune").unwrap_or(&Value::Null));
        self.settings = condense_core::replace_context_prune(&self.settings, block.clone());
        self.protection = Protection::new(&config);
        self.config = config;
        Effect::SaveSettings {
            context_prune: block,
        }
    }
}
