//! The steps a case runs: the flush (capture, trim to pending, plan, apply
//! the scripted answers) and chain compression after it. Each checks its
//! part of `expected` as it goes.

use condense_core::Branch;
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{apply_chains, plan_chains};
use condense_core::{apply_flush, plan_flush, FlushOutcome, WrittenSpill};
use condense_core::{capture_branch, group_by_mode, trim_to_pending};
use serde_json::{json, Value};

use crate::common::cases::array_field;
use crate::compare::{check_effects, check_notices, outcome_name};
use crate::scripted::{effect_value, js, results_of};

pub fn run_flush(
    case: &Value,
    config: &Config,
    protection: &Protection,
    messages: &[Message],
    state: &mut Branch,
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

pub fn run_chain(
    chain: &Value,
    config: &Config,
    protection: &Protection,
    messages: &[Message],
    closing: Option<&Message>,
    state: &mut Branch,
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
