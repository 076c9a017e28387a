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
mod common;

use common::cases::{array_field, config_of, replay_values, Suite};
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::State;
use condense_core::{apply_chains, plan_chains};
use condense_core::{
    apply_flush, plan_flush, FlushEffect, FlushOutcome, JobResult, Notice, NoticeLevel, Usage,
    WrittenSpill,
};
use condense_core::{capture_branch, group_by_mode, trim_to_pending};
use condense_core::{render, RenderSettings};
use condense_store::effects::{entry_for, NewEntry};
use serde_json::{json, Value};

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

/// `JSON.stringify` text (key order kept, numbers as JavaScript prints them).
fn js(v: &Value) -> String {
    condense_store::json::to_string(v).expect("values serialize")
}

/// An effect as the session entry it is appended as (case-file shape).
fn effect_value(effect: &FlushEffect) -> Value {
    match entry_for(effect) {
        NewEntry::Custom { custom_type, data } => json!({
            "type": "custom", "customType": custom_type, "data": data
        }),
        NewEntry::CustomMessage {
            custom_type,
            content,
            display,
            details,
        } => json!({
            "type": "custom_message", "customType": custom_type,
            "content": content, "display": display, "details": details
        }),
    }
}

fn messages_of(values: &[Value], what: &str) -> Result<Vec<Message>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Message::from_value(v).map_err(|e| format!("{what} {i}: {e}")))
        .collect()
}

fn usage_of(v: Option<&Value>) -> Usage {
    let Some(u) = v else {
        return Usage::default();
    };
    Usage {
        input_tokens: u.get("input").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u.get("output").and_then(Value::as_u64).unwrap_or(0),
        cost: u.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
    }
}

fn job_result(v: &Value) -> Result<JobResult, String> {
    if let Some(text) = v.get("text").and_then(Value::as_str) {
        return Ok(JobResult::Summary {
            text: text.to_owned(),
            usage: usage_of(v.get("usage")),
        });
    }
    if v.get("unusable") == Some(&Value::Bool(true)) {
        return Ok(JobResult::Unusable { usage: None });
    }
    if let Some(message) = v.get("failed").and_then(Value::as_str) {
        return Ok(JobResult::Failed {
            message: message.to_owned(),
            usage: None,
        });
    }
    Err(format!("bad scripted result {v}"))
}

fn results_of(values: &[Value]) -> Result<Vec<JobResult>, String> {
    values.iter().map(job_result).collect()
}

/// Compares appended entries with the expected ones.
fn check_effects(label: &str, expected: &[Value], actual: &[Value], out: &mut Vec<String>) {
    let kinds = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|e| e["customType"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    if expected.len() != actual.len() {
        out.push(format!(
            "{label}: expected {} entries {:?}, got {} {:?}",
            expected.len(),
            kinds(expected),
            actual.len(),
            kinds(actual)
        ));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e["customType"] != a["customType"] {
            out.push(format!(
                "{label}[{i}]: expected {}, got {}",
                e["customType"], a["customType"]
            ));
            continue;
        }
        let subset = e.get("subset") == Some(&Value::Bool(true));
        let fields: &[&str] = if a["type"] == "custom_message" {
            &["content", "details"]
        } else {
            &["data"]
        };
        for f in fields {
            let (Some(ev), Some(av)) = (e.get(*f), a.get(*f)) else {
                if e.get(*f).is_some() || !subset {
                    out.push(format!("{label}[{i}] {}: `{f}` missing", e["customType"]));
                }
                continue;
            };
            let av = match (subset, ev, av) {
                (true, Value::Object(em), Value::Object(am)) => Value::Object(
                    am.iter()
                        .filter(|(k, _)| em.contains_key(*k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                _ => av.clone(),
            };
            let (es, as_) = (js(ev), js(&av));
            if es != as_ {
                let note = if *ev == av {
                    " (same JSON value: key order differs)"
                } else {
                    ""
                };
                out.push(format!(
                    "{label}[{i}] {} `{f}` differs{note}\n  expected: {es}\n  actual:   {as_}",
                    e["customType"]
                ));
            }
        }
    }
}

fn check_notices(label: &str, expected: &[Value], actual: &[Notice], out: &mut Vec<String>) {
    let ok = expected.len() == actual.len()
        && expected.iter().zip(actual).all(|(e, a)| {
            e["level"].as_str() == Some(NoticeLevel::as_str(a.level))
                && e.get("text")
                    .and_then(Value::as_str)
                    .filter(|t| *t != a.text)
                    .is_none()
                && e.get("prefix")
                    .and_then(Value::as_str)
                    .filter(|p| !a.text.starts_with(p))
                    .is_none()
        });
    if !ok {
        let actual: Vec<Value> = actual
            .iter()
            .map(|n| json!({"level": NoticeLevel::as_str(n.level), "text": n.text}))
            .collect();
        out.push(format!(
            "{label}: notices differ\n  expected: {}\n  actual:   {}",
            js(&Value::Array(expected.to_vec())),
            js(&Value::Array(actual))
        ));
    }
}

fn outcome_name(o: &FlushOutcome) -> String {
    match o {
        FlushOutcome::Empty => "empty".into(),
        FlushOutcome::Processed(f) => f.as_str().into(),
        FlushOutcome::SummarizerFailed(_) => "summarizer-failed".into(),
    }
}

/// What a flush and the compression after it appended, as case entries.
struct Run {
    effects: Vec<Value>,
    state: State,
}

fn run_flush(
    case: &Value,
    config: &Config,
    protection: &Protection,
    messages: &[Message],
    state: &mut State,
    failures: &mut Vec<String>,
) -> Result<(Vec<Value>, bool), String> {
    let now = case.get("now").and_then(Value::as_i64).unwrap_or(0);
    let entry_ts: Vec<Option<i64>> = match case.get("entryTimestamps") {
        Some(v) => v
            .as_array()
            .ok_or("`entryTimestamps` must be an array")?
            .iter()
            .map(Value::as_i64)
            .collect(),
        None => vec![None; messages.len()],
    };
    let frontier = state.frontier().cloned();
    let batches: Vec<_> = capture_branch(messages, &entry_ts, state, protection, now)
        .into_iter()
        .filter_map(|b| trim_to_pending(b, state, frontier.as_ref()))
        .collect();
    let batches = group_by_mode(batches, config.batching_mode);
    let plan = plan_flush(batches, state, config);

    if let Some(jobs) = case.get("jobs") {
        let expected = jobs.as_array().ok_or("`jobs` must be an array")?;
        let actual: Vec<Value> = plan
            .jobs
            .iter()
            .map(|j| {
                let ids: Vec<&str> = j
                    .batch
                    .calls
                    .iter()
                    .map(|c| c.tool_call_id.as_str())
                    .collect();
                json!({"calls": ids, "turnIndex": j.batch.turn_index,
                       "assistantText": j.batch.assistant_text})
            })
            .collect();
        let same = expected.len() == actual.len()
            && expected.iter().zip(&actual).all(|(e, a)| {
                ["calls", "turnIndex", "assistantText"]
                    .iter()
                    .all(|k| e.get(*k).is_none() || e.get(*k) == a.get(*k))
            });
        if !same {
            failures.push(format!(
                "jobs differ\n  expected: {}\n  actual:   {}",
                js(jobs),
                js(&Value::Array(actual))
            ));
        }
    }

    let results = results_of(array_field(case, "results"))?;
    let result = apply_flush(plan, results, state, config);
    let effects: Vec<Value> = result.effects.iter().map(effect_value).collect();
    let expected = case.get("expected").cloned().unwrap_or(Value::Null);
    if let Some(e) = expected.get("effects") {
        check_effects(
            "flush effects",
            e.as_array().ok_or("`effects` must be an array")?,
            &effects,
            failures,
        );
    }
    let outcome = outcome_name(&result.outcome);
    if let Some(o) = expected.get("outcome").and_then(Value::as_str) {
        if o != outcome {
            failures.push(format!("outcome: expected {o}, got {outcome}"));
        }
    }
    match expected.get("restored") {
        None => {}
        Some(Value::Number(n)) if n.as_u64() != Some(result.restored.len() as u64) => {
            failures.push(format!(
                "restored: expected {n} batches, got {}",
                result.restored.len()
            ));
        }
        Some(Value::Number(_)) => {}
        Some(ids) => {
            let actual: Vec<Vec<&str>> = result
                .restored
                .iter()
                .map(|b| b.calls.iter().map(|c| c.tool_call_id.as_str()).collect())
                .collect();
            if js(ids) != js(&json!(actual)) {
                failures.push(format!(
                    "restored: expected {}, got {}",
                    js(ids),
                    js(&json!(actual))
                ));
            }
        }
    }
    if let Some(n) = expected.get("notices") {
        check_notices(
            "flush notices",
            n.as_array().ok_or("`notices` must be an array")?,
            &result.notices,
            failures,
        );
    }
    Ok((
        effects,
        matches!(result.outcome, FlushOutcome::Processed(_)),
    ))
}

fn run_chain(
    chain: &Value,
    config: &Config,
    protection: &Protection,
    messages: &[Message],
    closing: Option<&Message>,
    state: &mut State,
    failures: &mut Vec<String>,
) -> Result<Vec<Value>, String> {
    let k = chain
        .get("rollingWindow")
        .and_then(Value::as_u64)
        .map_or(config.chain_compression.rolling_window, |k| k as u32);
    let now = chain.get("now").and_then(Value::as_i64).unwrap_or(0);
    let plan = plan_chains(messages, closing, state, config, protection, k);
    let expected = chain.get("expected").cloned().unwrap_or(Value::Null);
    if let Some(jobs) = expected.get("fusionJobs") {
        let actual = json!(plan
            .fusion_jobs
            .iter()
            .map(|j| j.summaries.clone())
            .collect::<Vec<_>>());
        if js(jobs) != js(&actual) {
            failures.push(format!(
                "fusion jobs differ\n  expected: {}\n  actual:   {}",
                js(jobs),
                js(&actual)
            ));
        }
    }
    let fusion = results_of(array_field(chain, "fusion"))?;
    let spills: Vec<(usize, usize, WrittenSpill)> = array_field(chain, "spills")
        .iter()
        .map(|s| {
            let w = s["work"].as_u64().unwrap_or(0) as usize;
            let r = s["record"].as_u64().unwrap_or(0) as usize;
            (
                w,
                r,
                WrittenSpill {
                    call: r,
                    path: s["path"].as_str().unwrap_or_default().to_owned(),
                    bytes: s["bytes"].as_u64().unwrap_or(0),
                },
            )
        })
        .collect();
    let result = apply_chains(plan, fusion, &spills, state, config, now);
    let effects: Vec<Value> = result.effects.iter().map(effect_value).collect();
    if let Some(c) = expected.get("compressed") {
        let actual = json!(result
            .compressed
            .iter()
            .map(|c| c.block_id.clone())
            .collect::<Vec<_>>());
        if js(c) != js(&actual) {
            failures.push(format!(
                "compressed: expected {}, got {}",
                js(c),
                js(&actual)
            ));
        }
    }
    if let Some(e) = expected.get("effects") {
        check_effects(
            "chain effects",
            e.as_array().ok_or("`effects` must be an array")?,
            &effects,
            failures,
        );
    }
    if let Some(n) = expected.get("notices") {
        check_notices(
            "chain notices",
            n.as_array().ok_or("`notices` must be an array")?,
            &result.notices,
            failures,
        );
    }
    if let Some(d) = expected.get("diagnostics") {
        let d = d.as_array().ok_or("`diagnostics` must be an array")?;
        let actual: Vec<Value> = result
            .diagnostics
            .iter()
            .map(|x| json!({"kind": x.kind.as_str(), "key": x.key, "detail": x.detail}))
            .collect();
        let ok = d.len() == actual.len()
            && d.iter().zip(&actual).all(|(e, a)| {
                ["kind", "key", "detail"]
                    .iter()
                    .all(|k| e.get(*k).is_none() || e.get(*k) == a.get(*k))
            });
        if !ok {
            failures.push(format!(
                "chain diagnostics differ\n  expected: {}\n  actual:   {}",
                js(&Value::Array(d.clone())),
                js(&Value::Array(actual))
            ));
        }
    }
    Ok(effects)
}

fn rendered(messages: &[Message], state: &State, config: &Config) -> Vec<String> {
    let protection = Protection::new(config);
    let settings = RenderSettings {
        config,
        protection: &protection,
    };
    render(messages, state, &settings)
        .messages(messages)
        .iter()
        .map(|m| m.json().to_owned())
        .collect()
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
        state: State::new(),
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
