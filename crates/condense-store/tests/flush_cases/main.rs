//! Data-driven tests of the flush pipeline and of chain compression.
//!
//! Each file in `tests/cases/flush/` is one case, written by hand from the
//! behaviour reference (§3 entry payloads, §5 flush pipeline) and the design
//! specs: the state before the flush (pi-condense session entries, replayed),
//! the branch's messages, the summarizer's scripted answers, and what the
//! flush must append. A case file has these keys:
//!
//! - `name`: the file stem (also the test function's name);
//! - `area`: one of [`AREAS`];
//! - `about`: the behaviour pinned, citing the reference;
//! - `config` (optional): a `contextPrune` block, normalized by
//!   `Config::from_settings_value` (must load without warnings);
//! - `entries` (optional): `custom` / `custom_message` session entries,
//!   replayed in order into the state the flush starts from;
//! - `messages`: the branch's messages (pi `AgentMessage`s), as pi-condense's
//!   rescan sees them (the closing message of a `message_end` flush is not
//!   among them: pi persists it after the flush);
//! - `entryTimestamps` (optional): for each message, the ms timestamp of the
//!   session entry holding it (`null` where unknown); a batch's timestamp is
//!   its assistant's entry timestamp;
//! - `now` (optional, default 0): the clock, in ms;
//! - `skipFlush` (optional): run chain compression alone (`/pruner compact`
//!   runs it without a flush);
//! - `jobs` (optional): the summarization jobs the plan must contain, each
//!   `{calls: [toolCallId…], turnIndex?, assistantText?}`;
//! - `results`: the summarizer's answer per job, in order: `{text, usage?}`,
//!   `{unusable: true}` (empty, whitespace or `length`-truncated text) or
//!   `{failed: "<message>"}`; a missing answer is "not run";
//! - `expected`: `{effects?, outcome?, restored?, notices?}`:
//!   - `effects`: the entries appended, in order, each
//!     `{customType, data}` or `{customType, content, details}` (compared as
//!     `JSON.stringify` text, so key order counts); `subset: true` compares
//!     only the top-level keys given in `data` / `details`;
//!   - `outcome`: `empty`, `summarizer-failed`, or the frontier outcome;
//!   - `restored`: how many batches go back to pending, or their call ids;
//!   - `notices`: every notice, in order, each `{level, text}` or
//!     `{level, prefix}` (only where the reference pins a text);
//! - `chain` (optional): chain compression after the flush (run only when the
//!   flush processed something, as in pi-condense), with
//!   `closing` (the message that triggered the flush), `rollingWindow`
//!   (default: the config's), `fusion` (answers per fusion job), `spills`
//!   (`{work, record, path, bytes}` files the host wrote for backfilled
//!   outputs), `now` (the clock), and `expected`:
//!   `{fusionJobs?, compressed?, effects?, notices?, diagnostics?}`;
//! - `render` (optional): the messages the model sees afterwards (the input
//!   is `messages` plus the closing message);
//! - `known_failure` (optional): why the implementation disagrees with the
//!   reference; the case still runs, and its failure is printed, not raised.
//!
//! Every case also checks restart convergence: replaying the prior entries
//! plus everything the flush and the compression appended gives a state that
//! renders the branch byte for byte as the live state does, with the same
//! frontier and stats.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
mod compare;
mod scripted;
mod steps;

use common::cases::{array_field, config_of, replay_values, Suite};
use common::rendered;
use condense_core::Branch;
use condense_core::Message;
use condense_core::Protection;
use scripted::{js, messages_of};
use serde_json::Value;
use steps::{run_chain, run_flush};

/// The areas a case may belong to.
const AREAS: &[&str] = &[
    "capture",
    "frontier",
    "indexer",
    "dedup",
    "trivial",
    "oversized",
    "failure",
    "snapshot",
    "outcome",
    "stats",
    "batching",
    "chain-compressor",
    "id-collision",
    "integration",
];

const CASE_KEYS: &[&str] = &[
    "name",
    "area",
    "about",
    "config",
    "entries",
    "messages",
    "entryTimestamps",
    "now",
    "skipFlush",
    "jobs",
    "results",
    "expected",
    "chain",
    "render",
    "known_failure",
];

const SUITE: Suite = Suite {
    kind: "flush",
    areas: AREAS,
    keys: CASE_KEYS,
};
/// What a flush and the compression after it appended, as case entries.
struct Run {
    effects: Vec<Value>,
    state: Branch,
}

fn run(case: &Value) -> Result<(), String> {
    let config = config_of(case)?;
    let protection = Protection::new(&config);
    let prior = array_field(case, "entries");
    let mut state = replay_values(prior)?;
    let messages = messages_of(array_field(case, "messages"), "message")?;
    let closing = match case.pointer("/chain/closing") {
        Some(v) => Some(Message::from_value(v).map_err(|e| format!("closing: {e}"))?),
        None => None,
    };
    let mut failures: Vec<String> = Vec::new();

    let mut run = Run {
        effects: Vec::new(),
        state: Branch::new(),
    };
    let processed = if case.get("skipFlush") == Some(&Value::Bool(true)) {
        true
    } else {
        let (effects, processed) = run_flush(
            case,
            &config,
            &protection,
            &messages,
            &mut state,
            &mut failures,
        )?;
        run.effects = effects;
        processed
    };
    if let Some(chain) = case.get("chain") {
        if processed {
            let effects = run_chain(
                chain,
                &config,
                &protection,
                &messages,
                closing.as_ref(),
                &mut state,
                &mut failures,
            )?;
            run.effects.extend(effects);
        } else if chain.get("expected").is_some() {
            failures.push("the flush processed nothing, so no chain compression ran".into());
        }
    }
    run.state = state;

    // What the model sees next: the branch with the closing message persisted.
    let mut next = messages.clone();
    if let Some(c) = &closing {
        next.push(c.clone());
    }
    let live = rendered(&next, &run.state, &config);
    if let Some(expected) = case.get("render") {
        let expected: Vec<String> = expected
            .as_array()
            .ok_or("`render` must be an array")?
            .iter()
            .map(js)
            .collect();
        if expected != live {
            let mut d = format!(
                "render differs (expected {} messages, got {})",
                expected.len(),
                live.len()
            );
            for (i, (e, a)) in expected.iter().zip(&live).enumerate() {
                if e != a {
                    d.push_str(&format!("\n  [{i}] expected: {e}\n  [{i}] actual:   {a}"));
                }
            }
            for (i, extra) in live.iter().enumerate().skip(expected.len()) {
                d.push_str(&format!("\n  [{i}] extra: {extra}"));
            }
            for (i, missing) in expected.iter().enumerate().skip(live.len()) {
                d.push_str(&format!("\n  [{i}] missing: {missing}"));
            }
            failures.push(d);
        }
    }

    // Restart: replay what the session now holds.
    let mut all: Vec<Value> = prior.to_vec();
    all.extend(run.effects.iter().cloned());
    let replayed = replay_values(&all)?;
    if rendered(&next, &replayed, &config) != live {
        failures.push("after a restart (replaying the appended entries) the render differs".into());
    }
    if replayed.frontier() != run.state.frontier() {
        failures.push(format!(
            "after a restart the frontier differs: live {:?}, replayed {:?}",
            run.state.frontier(),
            replayed.frontier()
        ));
    }
    if replayed.stats() != run.state.stats() {
        failures.push(format!(
            "after a restart the stats differ: live {:?}, replayed {:?}",
            run.state.stats(),
            replayed.stats()
        ));
    }

    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Checks this suite's own rules for a case file (the common ones are
/// `Suite::validate_common`'s); panics (never "known") on a bad file.
fn validate(name: &str, case: &Value) {
    assert!(
        case.get("expected").is_some() || case.get("chain").is_some(),
        "{name}: nothing expected"
    );
    if let Some(ts) = case.get("entryTimestamps") {
        assert_eq!(
            ts.as_array().map(Vec::len),
            case.get("messages").and_then(Value::as_array).map(Vec::len),
            "{name}: `entryTimestamps` must have one item per message"
        );
    }
}

fn run_case(name: &str) {
    SUITE.run_case(name, validate, run);
}

case_tests! {
    run_case;
    // capture
    capture_pairs_within_own_turn_first_result_wins,
    capture_result_outside_its_turn_not_paired,
    capture_turn_counter_counts_text_only_assistants,
    capture_skips_summarized_and_protected_calls,
    capture_batch_timestamp_is_entry_timestamp,
    capture_args_input_first_text_blocks_joined_error_kept,
    capture_unanswered_call_waits,
    capture_skips_dedup_alias_occurrences,
    // frontier
    frontier_none_keeps_everything,
    frontier_trims_before_equal_and_after,
    frontier_equal_turn_id_not_found_keeps_all,
    frontier_equal_turn_last_call_drops_batch,
    frontier_last_entry_wins,
    frontier_entry_without_id_ignored,
    frontier_summarized_filter_runs_before_trim,
    frontier_past_everything_is_empty,
    // indexer
    indexer_dedup_is_cross_flush_only,
    indexer_backfilled_record_never_canonical,
    indexer_spilled_record_is_canonical_by_content_hash,
    indexer_first_seen_record_is_canonical,
    indexer_short_refs_continue_after_highest,
    // dedup
    dedup_hash_normalizes_crlf_trailing_space_and_trim,
    dedup_needs_same_tool_name,
    dedup_internal_whitespace_is_significant,
    dedup_partial_batch_summarizes_the_rest,
    dedup_partial_batch_notice,
    dedup_disabled_summarizes_duplicates,
    dedup_runs_before_trivial_check,
    dedup_protected_call_never_aliased,
    dedup_fully_deduped_notice_text,
    // trivial
    trivial_below_min_batch_chars_skipped,
    trivial_is_strictly_less_than,
    trivial_zero_disables,
    trivial_notice_singular_tool_call,
    trivial_quiet_skips_no_notice,
    // oversized
    oversized_strictly_longer_is_skipped,
    oversized_equal_length_is_kept,
    oversized_burns_its_refs,
    oversized_summary_chars_count_in_frontier,
    oversized_notice_text,
    // failure
    failure_unusable_restores_batch,
    failure_unusable_is_silent,
    failure_first_failure_stops_the_loop,
    failure_later_trivial_batch_is_restored,
    failure_earlier_trivial_batch_is_processed,
    failure_notice_precedes_skip_notices,
    failure_dedup_aliases_persist,
    // snapshot
    snapshot_from_last_processed_batch,
    snapshot_deduped_batch_uses_its_deduped_calls,
    snapshot_partial_dedup_uses_last_real_call,
    // outcome
    outcome_summarized_beats_skips,
    outcome_oversized_beats_deduped,
    outcome_deduped_beats_trivial,
    // stats
    stats_snapshot_accumulates_usage,
    stats_one_snapshot_after_all_chains,
    // batching
    batching_agent_message_merges_a_user_turn,
    batching_agent_message_splits_at_user_messages,
    batching_turn_mode_one_job_per_turn,
    // chain-compressor
    chain_window_keeps_newest_k,
    chain_compressed_notice,
    chain_window_exactly_k_compresses_nothing,
    chain_k_zero_compresses_every_candidate,
    chain_already_compressed_not_counted,
    chain_interrupted_and_open_chains_not_counted,
    chain_grace_defers_without_shrinking_window,
    chain_fusion_of_two_distinct_summaries,
    chain_fusion_failure_falls_back_to_concatenation,
    chain_fusion_disabled,
    chain_single_summary_not_fused,
    chain_one_summary_over_two_turns_not_fused,
    chain_uncovered_backfill_and_deterministic_body,
    chain_uncovered_refs_line_lists_chain_refs,
    chain_fully_protected_skipped_silently,
    chain_backfill_empty_diagnostic,
    chain_protected_ids_copied_and_relocated,
    chain_uncovered_protected_sibling_not_backfilled,
    chain_backfill_spills_large_outputs,
    chain_covered_dedup_alias_keeps_original_ref,
    chain_covered_unindexed_sibling_backfilled,
    // id-collision
    collision_reused_id_occurrences_indexed_apart,
    collision_live_reused_id_is_not_summarized,
    collision_chain_drop_keeps_live_reused_id,
    collision_backfill_takes_args_of_its_own_call,
    // integration
    integration_flush_then_chain_then_render,
    integration_without_closing_message_newest_chain_stays_open,
    integration_trivial_flush_then_deterministic_chain,
}

/// Every case file has a test function and every test function a file; each
/// area has a case.
#[test]
fn every_case_file_is_listed() {
    SUITE.check_listed(LISTED, 80);
}
