//! Data-driven tests of the render pipeline.
//!
//! Each file in `tests/cases/render/` is one case: pi-condense session entries
//! (the state), the branch's messages, and the messages the model must see,
//! written by hand from the behaviour reference (§4) and the design specs.
//! A case file has these keys:
//!
//! - `name`: the file stem (also the test function's name);
//! - `area`: one of [`AREAS`];
//! - `about`: the behaviour pinned, citing the reference;
//! - `config` (optional): a `contextPrune` block, normalized by
//!   `Config::from_settings_value` (must load without warnings);
//! - `entries`: `custom` / `custom_message` session entries, replayed in order;
//! - `messages`: the branch's messages (pi `AgentMessage`s);
//! - `expected` (the output messages) or `unchanged: true` (no plan at all);
//! - `diagnostics` (optional, default none): `{kind, key?, detail?}` in order;
//!   `key` and `detail` are compared only when given;
//! - `known_failure` (optional): why the implementation disagrees with the
//!   reference; the case still runs, and its failure is printed, not raised.
//!
//! Every case also checks that the plan's sizes are the `JSON.stringify`
//! lengths (UTF-16 units) of the input and output arrays, that rendering is
//! deterministic, and that rendering the output again with the same state
//! changes nothing (stubs re-stub to themselves, a chain's synthetic is not
//! inserted twice).

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use common::cases::{array_field, config_of, replay_values, Suite};
use condense_core::Protection;
use condense_core::{render, Render, RenderSettings};
use condense_core::{Message, Role};
use serde_json::Value;

/// The areas a case may belong to.
const AREAS: &[&str] = &[
    "pruner",
    "chain-range-prune",
    "error-purge",
    "orphan-sweep",
    "recovery-grace",
    "protected",
    "occurrence-key",
    "nested-placeholders",
    "cache-aware",
];

const CASE_KEYS: &[&str] = &[
    "name",
    "area",
    "about",
    "config",
    "entries",
    "messages",
    "expected",
    "unchanged",
    "diagnostics",
    "known_failure",
];

const SUITE: Suite = Suite {
    kind: "render",
    areas: AREAS,
    keys: CASE_KEYS,
};

/// `JSON.stringify(value).length`: compact JSON in UTF-16 units.
fn js_json_len(value: &Value) -> usize {
    serde_json::to_string(value)
        .expect("values serialize")
        .encode_utf16()
        .count()
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).expect("values serialize")
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("values serialize")
}

/// Compares two message lists, element by element, by compact JSON text
/// (so key order counts); returns a readable diff.
fn diff_messages(label: &str, expected: &[Value], actual: &[Value]) -> Option<String> {
    let mut out = String::new();
    if expected.len() != actual.len() {
        let _ = writeln!(
            out,
            "{label}: expected {} messages, got {}",
            expected.len(),
            actual.len()
        );
    }
    for i in 0..expected.len().max(actual.len()) {
        let (e, a) = (expected.get(i), actual.get(i));
        if e.map(compact) != a.map(compact) {
            let _ = writeln!(out, "{label}: message {i} differs");
            let show = |v: Option<&Value>| v.map_or_else(|| "(none)".to_owned(), pretty);
            let _ = writeln!(out, "  expected: {}", show(e).replace('\n', "\n  "));
            let _ = writeln!(out, "  actual:   {}", show(a).replace('\n', "\n  "));
            if e.is_some() && e == a {
                let _ = writeln!(out, "  (same JSON value: key order differs)");
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

fn check_diagnostics(case: &Value, render: &Render) -> Result<(), String> {
    let expected = array_field(case, "diagnostics");
    let actual: Vec<Value> = render
        .diagnostics
        .iter()
        .map(|d| serde_json::json!({"kind": d.kind.as_str(), "key": d.key, "detail": d.detail}))
        .collect();
    let matches = expected.len() == actual.len()
        && expected.iter().zip(&actual).all(|(e, a)| {
            ["kind", "key", "detail"].iter().all(|k| match e.get(*k) {
                None => true,
                Some(v) => Some(v) == a.get(*k),
            })
        });
    if matches {
        Ok(())
    } else {
        Err(format!(
            "diagnostics differ\n  expected: {}\n  actual:   {}",
            compact(&Value::Array(expected.to_vec())),
            compact(&Value::Array(actual))
        ))
    }
}

/// Block ids of `<compressed-chain id="…"` user messages, with counts.
fn synthetic_counts(messages: &[Message]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in messages.iter().filter(|m| m.is(&Role::User)) {
        let v = m.to_value().unwrap();
        let text = v
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(rest) = text.strip_prefix("<compressed-chain id=\"") {
            if let Some(end) = rest.find('"') {
                *counts.entry(rest[..end].to_owned()).or_insert(0) += 1;
            }
        }
    }
    counts
}

fn run(case: &Value) -> Result<(), String> {
    let config = config_of(case)?;
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let state = replay_values(array_field(case, "entries"))?;
    let input_values = array_field(case, "messages");
    let input: Vec<Message> = input_values
        .iter()
        .enumerate()
        .map(|(i, v)| Message::from_value(v).map_err(|e| format!("message {i}: {e}")))
        .collect::<Result<_, _>>()?;

    let first = render(&input, &state, &settings);
    let mut failures: Vec<String> = Vec::new();
    if let Err(e) = check_diagnostics(case, &first) {
        failures.push(e);
    }

    let output: Vec<Message> = first.messages(&input);
    let output_values: Vec<Value> = output.iter().map(|m| m.to_value().unwrap()).collect();
    if case.get("unchanged") == Some(&Value::Bool(true)) {
        if first.plan.is_some() {
            failures.push("expected no plan (unchanged), got one".to_owned());
            if let Some(d) = diff_messages("unchanged", input_values, &output_values) {
                failures.push(d);
            }
        }
    } else {
        let expected = array_field(case, "expected");
        match &first.plan {
            None => failures.push("expected a plan, got none (render was a no-op)".to_owned()),
            Some(plan) => {
                let before = js_json_len(&Value::Array(input_values.to_vec()));
                let after = js_json_len(&Value::Array(expected.to_vec()));
                if plan.before_chars != before || plan.after_chars != after {
                    failures.push(format!(
                        "sizes: plan says before={} after={}, JSON.stringify lengths are before={before} after={after}",
                        plan.before_chars, plan.after_chars
                    ));
                }
            }
        }
        if let Some(d) = diff_messages("output", expected, &output_values) {
            failures.push(d);
        }
    }

    // Determinism: the same input renders to the same plan and diagnostics.
    let again = render(&input, &state, &settings);
    if again != first {
        failures.push("rendering the same input twice gave different results".to_owned());
    }

    // Re-applying to the output changes nothing: stubs re-stub to themselves,
    // and no chain synthetic is inserted a second time.
    let second = render(&output, &state, &settings);
    let reapplied = second.messages(&output);
    let duplicated: Vec<String> = synthetic_counts(&reapplied)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(b, n)| format!("{b} x{n}"))
        .collect();
    if !duplicated.is_empty() {
        failures.push(format!(
            "re-render inserted a second synthetic: {}",
            duplicated.join(", ")
        ));
    }
    let reapplied_values: Vec<Value> = reapplied.iter().map(|m| m.to_value().unwrap()).collect();
    if let Some(d) = diff_messages("re-render of the output", &output_values, &reapplied_values) {
        failures.push(d);
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
    let unchanged = case.get("unchanged") == Some(&Value::Bool(true));
    assert!(
        unchanged != case.get("expected").is_some(),
        "{name}: give exactly one of `expected` and `unchanged: true`"
    );
}

fn run_case(name: &str) {
    SUITE.run_case(name, validate, run);
}

case_tests! {
    run_case;
    // pruner
    pruner_summarized_stub,
    pruner_stub_bare_id_when_no_short_ref,
    pruner_errored_result_stub_is_not_error,
    pruner_legacy_bare_record_fallback,
    pruner_legacy_tool_call_ids_summary,
    pruner_legacy_fallback_fails_closed_when_mixed,
    pruner_reused_id_live_occurrence_not_stubbed,
    pruner_dedup_alias_reuses_original_ref,
    pruner_dedup_alias_order_independent,
    pruner_spilled_stub,
    pruner_spilled_stub_missing_bytes_and_preview,
    pruner_unindexed_results_unchanged,
    pruner_stub_without_tool_name,
    // protected
    protected_tool_render_recheck,
    protected_path_render_recheck,
    protected_paths_kill_switch,
    protected_output_relocation_in_chain,
    protected_dedup_alias_follows_original_record,
    protected_path_backslashes_normalized,
    protected_path_relative_zero_dirs,
    protected_path_non_string_or_case_mismatch_stubbed,
    protected_chain_relocation_ignores_current_config,
    protected_compressed_chain_not_repaired,
    protected_relocation_only_within_range,
    // recovery-grace
    grace_age_zero_verbatim,
    grace_age_exactly_k_verbatim,
    grace_age_k_plus_one_stubbed,
    grace_zero_disables,
    grace_non_query_tool_stubbed_at_age_zero,
    grace_protected_query_tool_verbatim_past_grace,
    grace_each_result_judged_by_position,
    grace_spilled_recovery_output,
    // error-purge
    purge_at_cooldown_boundary,
    purge_below_cooldown_not_purged,
    purge_custom_cooldown_one,
    purge_min_arg_chars_exact,
    purge_below_min_arg_chars_not_purged,
    purge_non_errored_calls_untouched,
    purge_input_field_purged,
    purge_summarized_errored_result_not_purged,
    purge_disabled,
    // chain-range-prune
    chain_basic_synthetic_and_drops,
    chain_range_summary_text_preferred,
    chain_batch_texts_joined_by_blank_line,
    chain_keep_final_thinking_when_disabled,
    chain_user_and_bash_inside_range_kept,
    chain_third_party_custom_inside_range_kept,
    chain_batch_summary_after_range_suppressed,
    chain_batch_summary_after_range_kept_for_other_occurrence,
    chain_legacy_summary_ref_suppressed_by_bare_id,
    chain_unresolved_start_matches_two_users,
    chain_unresolved_final_null,
    chain_unresolved_final_before_start,
    chain_unresolved_missing_final,
    chain_unresolved_missing_start,
    chain_unresolved_does_not_block_stubs,
    chain_nested_range_overlap,
    chain_duplicate_start_last_wins,
    chain_range_id_mismatch,
    chain_compression_disabled,
    chain_existing_synthetic_not_duplicated,
    chain_empty_body_without_summaries,
    chain_unresolved_final_matches_two_assistants,
    chain_identical_batch_texts_once,
    // nested-placeholders
    nested_block_ref_substituted,
    nested_one_level_only,
    nested_self_reference_literal,
    nested_unknown_block_literal,
    nested_ref_to_unresolved_block,
    // orphan-sweep
    sweep_result_without_call,
    sweep_barrier_user,
    sweep_barrier_custom,
    sweep_barrier_bash_execution,
    sweep_barrier_branch_summary,
    sweep_barrier_compaction_summary,
    sweep_barrier_unknown_role,
    sweep_results_after_their_assistant_kept,
    sweep_duplicate_result_second_swept,
    sweep_assistant_replaces_open_set,
    sweep_multiple_orphans_one_diagnostic,
    sweep_runs_after_stub,
    // occurrence-key
    occurrence_numeric_timestamp_key,
    occurrence_non_numeric_timestamp_bare_lookup,
    occurrence_non_numeric_timestamp_no_legacy_record,
    occurrence_missing_timestamp_bare_lookup,
    occurrence_id_containing_at_sign,
    occurrence_chain_body_by_occurrence_key,
    // cache-aware
    cache_aware_nothing_shown_before_the_first_switch,
    cache_aware_without_switch_entries_renders_as_reference,
    cache_aware_switch_shows_what_came_before,
    cache_aware_alias_after_the_switch_is_pending,
    cache_aware_reference_ignores_switch_entries,
    cache_aware_chain_after_the_switch_is_pending,
    cache_aware_chain_before_the_switch_is_shown,
    cache_aware_purge_waits_for_a_switch,
    cache_aware_purge_before_the_switch,
    cache_aware_purge_cooldown_counted_at_the_switch,
}

/// Every case file has a test function and every test function a file; the
/// suite keeps its size and covers each area it is about.
#[test]
fn every_case_file_is_listed() {
    SUITE.check_listed(LISTED, 45);
}
