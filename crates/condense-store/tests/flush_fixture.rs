//! Flush planning replayed against what pi-condense 2.9.1 actually wrote.
//!
//! The fixture session holds six flushes pi-condense ran inside pi with a
//! scripted model. For each, take the branch as it was when the flush ran
//! (everything before its first entry), capture, plan and apply with a
//! summarizer that answers what the scripted model answered, and compare the
//! entries condense would append with the ones pi-condense appended: summary
//! messages, index records, dedup aliases and the frontier, field for field.

mod common;

use condense_core::Config;
use condense_core::Protection;
use condense_core::{apply_chains, plan_chains};
use condense_core::{apply_flush, plan_flush, JobResult, Usage};
use condense_core::{capture_branch, group_by_mode, trim_to_pending};
use condense_store::context::branch_messages;
use condense_store::effects::{entry_for, NewEntry};
use condense_store::replay::replay_branch;
use condense_store::session::{Entry, EntryType, Session};
use condense_store::time::parse_iso;
use serde_json::Value;

const EFFECT_TYPES: [&str; 5] = [
    "context-prune-summary",
    "context-prune-index",
    "context-prune-dedup-alias",
    "context-prune-frontier",
    "context-prune-stats",
];

/// What the scripted model answered: one labelled bullet per call.
fn scripted_summary(job: &condense_core::SummaryJob) -> JobResult {
    let text = job
        .batch
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "- [[{}:{}]] ran {}; output inspected, nothing else needed.",
                i + 1,
                c.tool_name,
                c.tool_name
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    JobResult::Summary {
        text,
        usage: Usage::default(),
    }
}

/// The entry as (customType, payload) for comparison.
fn written(e: &Entry) -> (String, Value) {
    let ct = e.custom_type.clone().unwrap_or_default();
    let payload: Value = e.payload().and_then(Result::ok).unwrap_or(Value::Null);
    match e.kind {
        EntryType::CustomMessage => {
            let content: Value = serde_json::from_str(e.raw_field("content").unwrap()).unwrap();
            (
                ct,
                serde_json::json!({"content": content, "details": payload}),
            )
        }
        _ => (ct, payload),
    }
}

fn ours(entry: NewEntry) -> (String, Value) {
    match entry {
        NewEntry::Custom { custom_type, data } => (custom_type.to_owned(), data),
        NewEntry::CustomMessage {
            custom_type,
            content,
            details,
            ..
        } => (
            custom_type.to_owned(),
            serde_json::json!({"content": content, "details": details}),
        ),
    }
}

#[test]
fn every_fixture_flush_is_reproduced() {
    let session = Session::parse(&common::fixture_text());
    let branch = session.branch(None);
    let config = Config::default();
    let protection = Protection::new(&config);
    // Backfilled index entries belong to chain compression, not to the flush.
    let is_effect = |e: &Entry| {
        e.custom_type
            .as_deref()
            .is_some_and(|ct| EFFECT_TYPES.contains(&ct))
            && !e
                .payload_raw()
                .is_some_and(|p| p.contains("\"backfilled\":true"))
    };

    let mut flushes = 0;
    let mut chains = 0;
    let mut backfilled_extra = 0;
    let mut i = 0;
    while i < branch.len() {
        if !is_effect(branch[i]) {
            i += 1;
            continue;
        }
        // A stats entry right after a chain belongs to chain compression.
        if branch[i].custom_type.as_deref() == Some("context-prune-stats") {
            i += 1;
            continue;
        }
        // The flush's entries run until the first chain or flush-metrics entry.
        let start = i;
        let mut end = i;
        while end < branch.len() && is_effect(branch[end]) {
            end += 1;
        }
        let before = &branch[..start];
        let ctx = branch_messages(before);
        let by_id: std::collections::HashMap<&str, &Entry> =
            before.iter().map(|e| (e.id.as_str(), *e)).collect();
        let messages: Vec<_> = ctx.iter().map(|c| c.message.clone()).collect();
        let entry_ts: Vec<Option<i64>> = ctx
            .iter()
            .map(|c| {
                by_id
                    .get(c.entry_id.as_str())
                    .and_then(|e| parse_iso(&e.timestamp))
            })
            .collect();
        let (mut state, problems) = replay_branch(before);
        assert!(problems.is_empty(), "{problems:?}");
        let frontier = state.frontier().cloned();
        let batches: Vec<_> = capture_branch(&messages, &entry_ts, &state, &protection, 0)
            .into_iter()
            .filter_map(|b| trim_to_pending(b, &state, frontier.as_ref()))
            .collect();
        let batches = group_by_mode(batches, config.batching_mode);
        let plan = plan_flush(batches, &state, &config);
        let results = plan.jobs.iter().map(scripted_summary).collect();
        let result = apply_flush(plan, results, &mut state, &config);

        let expected: Vec<(String, Value)> =
            branch[start..end].iter().map(|e| written(e)).collect();
        let actual: Vec<(String, Value)> =
            result.effects.iter().map(|e| ours(entry_for(e))).collect();
        let kinds =
            |v: &[(String, Value)]| -> Vec<String> { v.iter().map(|(k, _)| k.clone()).collect() };
        assert_eq!(
            kinds(&actual),
            kinds(&expected),
            "flush at line {}",
            branch[start].line
        );
        for ((kind, a), (_, e)) in actual.iter().zip(&expected) {
            if kind == "context-prune-stats" {
                continue; // the scripted model's token counts are not in the fixture
            }
            assert_eq!(a, e, "flush at line {}: {kind}", branch[start].line);
        }

        // Chain compression follows in the same flush, with the closing
        // assistant (not yet persisted when pi-condense ran) threaded in.
        let mut chain_end = end;
        while chain_end < branch.len()
            && branch[chain_end].custom_type.as_deref() != Some("context-prune-flush-metrics")
        {
            chain_end += 1;
        }
        let closing = branch[chain_end..]
            .iter()
            .find(|e| e.kind == EntryType::Message)
            .and_then(|e| e.message.clone());
        let expected_chain: Vec<(String, Value)> =
            branch[end..chain_end].iter().map(|e| written(e)).collect();
        let chain_plan = plan_chains(
            &messages,
            closing.as_ref(),
            &state,
            &config,
            &protection,
            config.chain_compression.rolling_window,
        );
        // The scripted model's fusion answer and pi-condense's clock are read
        // back from the entry it wrote.
        let written_chain = expected_chain
            .iter()
            .find(|(k, _)| k == "context-prune-chain")
            .map(|(_, v)| v.clone());
        let fused = written_chain
            .as_ref()
            .and_then(|c| c["rangeSummaryText"].as_str())
            .unwrap_or("")
            .to_owned();
        let now = written_chain
            .as_ref()
            .map_or(0, |c| c["compressedAt"].as_i64().unwrap());
        let fusion = chain_plan
            .fusion_jobs
            .iter()
            .map(|_| JobResult::Summary {
                text: fused.clone(),
                usage: Usage::default(),
            })
            .collect();
        let chain_result = apply_chains(chain_plan, fusion, &[], &mut state, &config, now);
        let mut actual_chain: Vec<(String, Value)> = chain_result
            .effects
            .iter()
            .map(|e| ours(entry_for(e)))
            .collect();
        // A deliberate difference (docs/decisions.md): condense backfills a
        // covered chain's results no flush indexed (here call_4, skipped as
        // trivial), with refs, where pi-condense dropped them unrecoverably.
        // Take that entry out, check it, and compare the rest as written.
        if expected_chain.first().map(|(k, _)| k.as_str()) != Some("context-prune-index")
            && actual_chain.first().map(|(k, _)| k.as_str()) == Some("context-prune-index")
        {
            let (_, extra) = actual_chain.remove(0);
            assert_eq!(extra["backfilled"], true);
            let ids: Vec<&str> = extra["toolCalls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["toolCallId"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["call_4"], "only the trivially skipped result");
            let extra_refs: Vec<Value> = extra["refs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["shortId"].clone())
                .collect();
            for (kind, a) in actual_chain.iter_mut() {
                if kind == "context-prune-chain" {
                    let refs = a["toolRefs"].as_array_mut().unwrap();
                    refs.retain(|r| !extra_refs.contains(r));
                }
            }
            backfilled_extra += 1;
        }
        assert_eq!(
            kinds(&actual_chain),
            kinds(&expected_chain),
            "chains after line {}",
            branch[start].line
        );
        for ((kind, a), (_, e)) in actual_chain.iter().zip(&expected_chain) {
            if kind == "context-prune-stats" {
                assert_eq!(a["chainsCompressed"], e["chainsCompressed"]);
                assert_eq!(a["rangesSummarized"], e["rangesSummarized"]);
                continue;
            }
            assert_eq!(a, e, "chains after line {}: {kind}", branch[start].line);
        }
        chains += chain_result.compressed.len();
        flushes += 1;
        i = chain_end;
    }
    assert_eq!(flushes, 6, "the fixture holds six flushes");
    assert_eq!(chains, 3, "and three chain compressions");
    assert_eq!(
        backfilled_extra, 1,
        "call_4 is the one result pi-condense left unrecoverable"
    );
}
