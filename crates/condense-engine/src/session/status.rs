//! The context's metrics and the footer, the diagnostics a session
//! persists once, and the summarizer's cost.

use condense_core::{compute_context_metrics, format_count, ContextMetrics, Diagnostic};
use condense_store::effects::diagnostic_entry;

use super::Engine;
use crate::protocol::{Delivery, Effect, Effects};

impl Engine {
    pub(super) fn refresh_metrics(&mut self) {
        self.metrics = self.measure_context();
    }

    /// The context's metrics, measured now.
    pub fn measure_context(&self) -> ContextMetrics {
        compute_context_metrics(
            &self.messages,
            self.turns_before,
            self.state.frontier(),
            &self.state,
            &self.protection,
        )
    }

    /// The footer text.
    pub fn status_text(&self) -> Option<String> {
        if !self.config.show_prune_status_line {
            return None;
        }
        let mut s = if !self.config.enabled {
            "prune: OFF".to_owned()
        } else if let Some((before, after)) = self.reclaim {
            let (b, a) = (
                condense_core::chars_to_tokens(before),
                condense_core::chars_to_tokens(after),
            );
            let pct = if b > 0 {
                ((b as f64 - a as f64) / b as f64 * 100.0).round().max(0.0)
            } else {
                0.0
            };
            format!(
                "prune: ON · {}->{} (-{pct}%)",
                format_count(b),
                format_count(a)
            )
        } else {
            "prune: ON".to_owned()
        };
        s.push_str(&self.diagnostics.footer_suffix());
        let m = &self.metrics;
        if m.frontier_gap_tokens > 0 {
            s.push_str(&format!(
                " · think {} · gap {} · chain {}%",
                format_count(m.open_cycle_thinking_tokens),
                format_count(m.frontier_gap_tokens),
                m.largest_chain_share_pct
            ));
        }
        Some(format!("│ {s}"))
    }

    /// The footer effect, if the text changed since the last one.
    pub(super) fn status_if_changed(&mut self) -> Option<Effect> {
        let text = self.status_text();
        if text == self.last_status {
            return None;
        }
        self.last_status = text.clone();
        Some(Effect::status(text))
    }

    /// The footer effect for the current state, sent even if unchanged.
    pub fn footer(&mut self) -> Effect {
        let text = self.status_text();
        self.last_status = text.clone();
        Effect::status(text)
    }

    /// Persists each diagnostic the first time the session sees it.
    pub(super) fn report_diagnostics(&mut self, diagnostics: &[Diagnostic], out: &mut Effects) {
        for d in diagnostics {
            if self.diagnostics.report(d) {
                out.push(Effect::entry(diagnostic_entry(d), Delivery::Runtime));
            }
        }
    }

    /// The summarizer's cost since the session started.
    pub(super) fn cost_effect(&self) -> Effect {
        let s = self.state.stats();
        let b = &self.cost_baseline;
        Effect::Cost {
            total_cost: s.total_cost - b.total_cost,
            input_tokens: s.total_input_tokens.saturating_sub(b.total_input_tokens),
            output_tokens: s.total_output_tokens.saturating_sub(b.total_output_tokens),
        }
    }
}
