//! `/pruner status` and `/pruner stats`: settings, summarizer usage and
//! context metrics as text, then (condense only) the session's cache
//! economics and the display policy's decisions.

use crate::Engine;
use condense_core::format_count;

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
    let m = e.measure_context();
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

#[cfg(test)]
mod tests {
    use crate::{Engine, StartParams};
    use condense_core::Message;

    use super::status_text;

    /// The session of the CLI's `status` golden: three calls with recorded
    /// usage and two switch entries (figures worked out in
    /// condense-core's `tests/economy_recorded.rs`).
    const SESSION: &str =
        include_str!("../../../../condense-cli/tests/golden/economy-status.jsonl");
    const SETTINGS: &str =
        include_str!("../../../../condense-cli/tests/golden/economy-status.settings.json");

    fn engine() -> Engine {
        let mut e = Engine::default();
        let branch = SESSION.split_once('\n').map_or("", |(_, rest)| rest);
        e.start(StartParams {
            settings: serde_json::from_str(SETTINGS).unwrap(),
            session_id: "economy-status".into(),
            session_dir: None,
            misses_dir: None,
            session_file: None,
            branch: branch.trim_end().to_owned(),
            tree: false,
        });
        e
    }

    #[test]
    fn status_golden_with_recorded_usage_and_switches() {
        // pi-condense's lines unchanged, then condense's section.
        let expected = "\
pruner status:
  enabled:  true
  model:    default
  thinking: Default (default)
  idle to:  20s
  max to:   180s
  trigger:  On agent message
  batching: Per turn (turn)
  dedup:    on
  status:   on
  (no summarizer calls yet)
  --- context ---
  thinking:     0 tokens (open segment)
  chain share:  55%
  frontier gap: 37 tokens
  rearmed:      yes
  --- cache (anthropic-5m) ---
  calls:        3
  prompt:       5.2k tokens
  cache:        read 38.5% · written 57.7% · uncached 3.8%
  hit share:    38.5%
  billed input: 4.2k units ($0.012)
  no caching:   5.2k units (caching saved 20.2%)
  pi's cost:    $0.006
  --- policy ---
  policy:       cache-aware
  switches:     2 (idle-expiry 1, pays 1)
  decided:      removed 2.0k tokens · rewrite 300 units · projected saving 1.4k units
  not shown:    0 summarized, pending the next switch
  holding back: nothing
  no pruning:   saved 0 units (estimate); bound: at most 2.0% above it
  summaries:    charged at 1x the model's input price
  misses:       learning (0 calls here, 0 before): the TTL until there are enough";
        assert_eq!(status_text(&engine()), expected);
    }

    #[test]
    fn a_turn_end_adds_its_call_to_the_status() {
        let mut e = engine();
        let assistant = Message::from_json(
            r#"{"role":"assistant","content":[{"type":"text","text":"more"}],"usage":{"input":0,"cacheRead":3000,"cacheWrite":800,"output":20,"cost":{"total":0.001}},"stopReason":"stop","timestamp":1796000700000}"#,
        )
        .unwrap();
        e.turn_end(3, &assistant, &[], Some(3800), 200_000, 1_796_000_700_000);
        let t = status_text(&e);
        // 5200 + 3800 prompt tokens; reads 2000 + 3000 of 9000.
        for line in [
            "  calls:        4",
            "  prompt:       9.0k tokens",
            "  hit share:    55.6%",
            "  pi's cost:    $0.007",
        ] {
            assert!(t.contains(line), "{line:?} missing from\n{t}");
        }
    }
}
