//! `/pruner status` and `/pruner stats`: settings, summarizer usage and
//! context metrics as text, then (condense only) the session's cache
//! economics and the display policy's decisions.

use crate::Engine;
use condense_core::{compute_context_metrics, format_count};

use super::settings::{label_of, on_off, seconds, BATCHING_CHOICES, PRUNE_ON_CHOICES};

/// `$0.003`, or `<$0.001` for a positive amount below a tenth of a cent.
pub fn format_cost(cost: f64) -> String {
    if cost > 0.0 && cost < 0.001 {
        "<$0.001".to_owned()
    } else {
        format!("${cost:.3}")
    }
}

/// `/pruner status`.
pub fn status_text(e: &Engine) -> String {
    let c = e.config();
    let mut t = format!(
        "pruner status:\n  enabled:  {}\n  model:    {}\n  thinking: {} ({})\n  idle to:  {}\n  max to:   {}\n  trigger:  {}\n  batching: {} ({})\n  dedup:    {}\n  status:   {}",
        c.enabled,
        c.summarizer_model,
        super::settings::thinking_label(&c.summarizer_thinking),
        c.summarizer_thinking,
        seconds(c.summarizer_idle_timeout_ms),
        seconds(c.summarizer_max_timeout_ms),
        label_of(PRUNE_ON_CHOICES, c.prune_on.name()),
        label_of(BATCHING_CHOICES, c.batching_mode.name()),
        c.batching_mode.name(),
        on_off(c.dedup_by_content_hash),
        on_off(c.show_prune_status_line),
    );
    let s = e.state().stats();
    if s.call_count > 0 {
        t.push_str(&format!(
            "\n  --- summarizer ---\n  calls:       {}\n  input:       {} tokens\n  output:      {} tokens\n  cost:        {}",
            s.call_count,
            format_count(s.total_input_tokens),
            format_count(s.total_output_tokens),
            format_cost(s.total_cost)
        ));
    } else {
        t.push_str("\n  (no summarizer calls yet)");
    }
    // Measured now, not the cached snapshot: status is rare and should be exact.
    let m = compute_context_metrics(
        e.messages(),
        e.state().frontier(),
        e.state(),
        e.protection(),
    );
    t.push_str(&format!(
        "\n  --- context ---\n  thinking:     {} tokens (open segment)\n  chain share:  {}%\n  frontier gap: {} tokens",
        format_count(m.open_cycle_thinking_tokens),
        m.largest_chain_share_pct,
        format_count(m.frontier_gap_tokens)
    ));
    if e.is_rearmed() {
        t.push_str("\n  rearmed:      yes");
    }
    // condense's own section, after pi-condense's lines (kept byte for byte).
    for line in e.economy_report().lines() {
        t.push_str("\n  ");
        t.push_str(&line);
    }
    t
}

/// `/pruner stats`.
pub fn stats_text(e: &Engine) -> String {
    let s = e.state().stats();
    if s.call_count == 0 && s.chains_compressed == 0 {
        return "pruner stats: no summarizer calls yet.".to_owned();
    }
    let mut t = format!(
        "pruner stats:\n  calls:       {}\n  input:       {} tokens\n  output:      {} tokens\n  cost:        {}",
        s.call_count,
        format_count(s.total_input_tokens),
        format_count(s.total_output_tokens),
        format_cost(s.total_cost)
    );
    if s.chains_compressed > 0 {
        t.push_str(&format!(
            "\n  chains:      {} compressed",
            s.chains_compressed
        ));
    }
    t
}
