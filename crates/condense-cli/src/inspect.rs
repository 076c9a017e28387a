//! `status`, `stats` and `tree`: what condense knows about a session.

use condense_core::capture_pending;
use condense_core::compute_context_metrics;
use condense_core::Branch;
use condense_core::EconomyReport;
use condense_core::{array_chars, chars_to_tokens, render, RenderSettings};
use serde_json::{json, Value};

use crate::load::Loaded;
use crate::stdout::write_all;
use crate::CliError;

/// `$0.003`, or `<$0.001` for a positive amount below a tenth of a cent.
pub fn format_cost(cost: f64) -> String {
    if cost > 0.0 && cost < 0.001 {
        "<$0.001".to_owned()
    } else {
        format!("${cost:.3}")
    }
}

fn pending(loaded: &Loaded) -> (usize, usize, usize) {
    let batches = capture_pending(
        &loaded.messages,
        &[],
        loaded.turns_before,
        &loaded.state,
        &loaded.protection,
        loaded.config.batching_mode,
        0,
    );
    let calls = batches.iter().map(|b| b.calls.len()).sum();
    let raw = batches.iter().map(|b| b.raw_chars()).sum();
    (batches.len(), calls, raw)
}

/// The session's cache economics and the policy's decisions (the
/// `economy` object of `status --json`).
fn economy_value(report: &EconomyReport) -> Value {
    let r = &report.recorded;
    json!({
        "profile": report.profile,
        "calls": r.calls,
        "promptTokens": r.prompt_tokens,
        "cacheReadTokens": r.cache_read,
        "cacheWriteTokens": r.cache_write,
        "uncachedTokens": r.uncached,
        "cacheHitShare": r.cache_hit_share(),
        "outputTokens": r.output,
        "billedInputUnits": r.input_units,
        "billedInputUsd": report.billed_input_usd(),
        "noCachingUnits": report.uncached_units,
        "savedShare": report.saved_share(),
        "recordedCost": report.recorded_cost,
        "policy": report.policy.name(),
        "switches": report.switches,
        "switchReasons": report.reasons.iter().map(|(r, n)| (r.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "removedTokens": report.removed_tokens,
        "rewriteCostUnits": report.rewrite_cost,
        "projectedSavingUnits": report.projected_saving,
        "pending": report.pending,
    })
}

fn spilled_bytes(state: &Branch) -> u64 {
    state.records().iter().filter_map(|r| r.spill_bytes).sum()
}

/// The status report as JSON (the `--json` form, documented in README).
pub fn status_value(loaded: &Loaded) -> Value {
    let settings = RenderSettings {
        config: &loaded.config,
        protection: &loaded.protection,
    };
    let r = render(&loaded.messages, &loaded.state, &settings);
    let (before, after) = match &r.plan {
        Some(p) => (p.before_chars, p.after_chars),
        None => {
            let n = array_chars(loaded.messages.iter().map(|m| m.size()));
            (n, n)
        }
    };
    let metrics = compute_context_metrics(
        &loaded.messages,
        loaded.turns_before,
        loaded.state.frontier(),
        &loaded.state,
        &loaded.protection,
    );
    let (batches, calls, raw) = pending(loaded);
    let stats = loaded.state.stats();
    let c = &loaded.config;
    let economy = loaded
        .economy
        .report_for(&c.economy, loaded.state.pending_count());
    json!({
        "session": loaded.path.display().to_string(),
        "config": {
            "enabled": c.enabled,
            "summarizerModel": c.summarizer_model,
            "summarizerThinking": c.summarizer_thinking,
            "pruneOn": c.prune_on.name(),
            "batchingMode": c.batching_mode.name(),
            "dedupByContentHash": c.dedup_by_content_hash,
            "summarizerIdleTimeoutMs": c.summarizer_idle_timeout_ms,
            "summarizerMaxTimeoutMs": c.summarizer_max_timeout_ms,
            "chainCompression": c.chain_compression.enabled,
            "rollingWindow": c.chain_compression.rolling_window,
            "purgeErrors": c.purge_errors.enabled,
        },
        "summarizer": {
            "calls": stats.call_count,
            "inputTokens": stats.total_input_tokens,
            "outputTokens": stats.total_output_tokens,
            "cost": stats.total_cost,
            "chainsCompressed": stats.chains_compressed,
            "rangesSummarized": stats.ranges_summarized,
        },
        "context": {
            "openCycleThinkingTokens": metrics.open_cycle_thinking_tokens,
            "largestChainSharePct": metrics.largest_chain_share_pct,
            "frontierGapTokens": metrics.frontier_gap_tokens,
        },
        "frontier": loaded.state.frontier().map(|f| serde_json::to_value(f).unwrap_or(Value::Null)),
        "pending": { "batches": batches, "toolCalls": calls, "rawChars": raw },
        "totals": {
            "messages": loaded.messages.len(),
            "toolCallsIndexed": loaded.state.indexed_count(),
            "bytesSpilled": spilled_bytes(&loaded.state),
            "chainsCompressed": loaded.state.chains().len(),
            "liveReclaim": {
                "beforeChars": before,
                "afterChars": after,
                "beforeTokens": chars_to_tokens(before),
                "afterTokens": chars_to_tokens(after),
            },
        },
        "economy": economy_value(&economy),
    })
}

/// `condense status`.
pub fn status(loaded: &Loaded, as_json: bool) -> Result<(), CliError> {
    let v = status_value(loaded);
    if as_json {
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).expect("json")
        ));
    }
    let c = &v["config"];
    let s = &v["summarizer"];
    let x = &v["context"];
    let t = &v["totals"];
    let lr = &t["liveReclaim"];
    let before = lr["beforeTokens"].as_u64().unwrap_or(0);
    let after = lr["afterTokens"].as_u64().unwrap_or(0);
    let pct = if before > 0 {
        100.0 * (before - after.min(before)) as f64 / before as f64
    } else {
        0.0
    };
    let secs = |ms: &Value| match ms.as_u64() {
        Some(0) | None => "disabled".to_owned(),
        Some(ms) => format!("{}s", ms / 1000),
    };
    let mut out = format!("condense status: {}\n", v["session"].as_str().unwrap_or(""));
    out.push_str(&format!(
        "enabled: {} (the CLI prunes regardless)\nmodel: {}\nthinking: {}\nidle to: {}\nmax to: {}\ntrigger: {}\nbatching: {}\ndedup: {}\n",
        c["enabled"], c["summarizerModel"].as_str().unwrap_or(""), c["summarizerThinking"].as_str().unwrap_or(""),
        secs(&c["summarizerIdleTimeoutMs"]), secs(&c["summarizerMaxTimeoutMs"]),
        c["pruneOn"].as_str().unwrap_or(""), c["batchingMode"].as_str().unwrap_or(""),
        if c["dedupByContentHash"] == true { "on" } else { "off" },
    ));
    out.push_str("--- summarizer ---\n");
    if s["calls"].as_u64() == Some(0) {
        out.push_str("(no summarizer calls yet)\n");
    } else {
        out.push_str(&format!(
            "calls: {}\ninput: {} tokens\noutput: {} tokens\ncost: {}\n",
            s["calls"],
            s["inputTokens"],
            s["outputTokens"],
            format_cost(s["cost"].as_f64().unwrap_or(0.0))
        ));
    }
    out.push_str("--- context ---\n");
    out.push_str(&format!(
        "thinking: {} tokens\nchain share: {}%\nfrontier gap: {} tokens\n",
        x["openCycleThinkingTokens"], x["largestChainSharePct"], x["frontierGapTokens"]
    ));
    match v["frontier"].as_object() {
        Some(f) => out.push_str(&format!(
            "frontier: turn {} · {} ({}) · {}\n",
            f["lastAttemptedTurnIndex"],
            f["lastAttemptedToolCallId"].as_str().unwrap_or(""),
            f["lastAttemptedToolName"].as_str().unwrap_or(""),
            f["outcome"].as_str().unwrap_or("")
        )),
        None => out.push_str("frontier: (none)\n"),
    }
    let p = &v["pending"];
    out.push_str(&format!(
        "pending: {} batch(es), {} tool call(s), {} raw chars\n",
        p["batches"], p["toolCalls"], p["rawChars"]
    ));
    out.push_str("--- totals ---\n");
    out.push_str(&format!(
        "tool calls indexed: {}\nbytes spilled: {}\nchains compressed: {}\nlive reclaim: {before} -> {after} tokens (-{pct:.1}%)\n",
        t["toolCallsIndexed"], t["bytesSpilled"], t["chainsCompressed"]
    ));
    // The same section `/pruner status` ends with.
    let economy = loaded
        .economy
        .report_for(&loaded.config.economy, loaded.state.pending_count());
    for line in economy.lines() {
        out.push_str(&line);
        out.push('\n');
    }
    write_all(&out)
}

/// `condense stats`.
pub fn stats(loaded: &Loaded, as_json: bool) -> Result<(), CliError> {
    let s = loaded.state.stats();
    if as_json {
        let v = json!({
            "calls": s.call_count, "inputTokens": s.total_input_tokens, "outputTokens": s.total_output_tokens,
            "cost": s.total_cost, "chainsCompressed": s.chains_compressed, "rangesSummarized": s.ranges_summarized,
        });
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).expect("json")
        ));
    }
    if s.call_count == 0 && s.chains_compressed == 0 {
        return write_all("pruner stats: no summarizer calls yet.\n");
    }
    write_all(&format!(
        "pruner stats:\ncalls: {}\ninput: {} tokens\noutput: {} tokens\ncost: {}\nchains: {} compressed\n",
        s.call_count,
        s.total_input_tokens,
        s.total_output_tokens,
        format_cost(s.total_cost),
        s.chains_compressed
    ))
}

fn args_line(args: &Value) -> String {
    match args.as_object() {
        Some(m) => m
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let short: String = v.chars().take(60).collect();
                if short.len() < v.len() {
                    format!("{k}={short}…")
                } else {
                    format!("{k}={short}")
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => args.to_string(),
    }
}

/// `condense tree`: each summary with the tool calls it pruned.
pub fn tree(loaded: &Loaded, as_json: bool) -> Result<(), CliError> {
    let state = &loaded.state;
    let mut nodes = Vec::new();
    for body in state.summary_bodies() {
        let calls: Vec<Value> = body
            .keys
            .iter()
            .filter_map(|k| state.record_for(&k.id, k.result_timestamp))
            .map(|r| {
                json!({
                    "ref": state.short_ref(&r.tool_call_id, r.result_timestamp),
                    "toolCallId": r.tool_call_id,
                    "tool": r.tool_name,
                    "args": r.args,
                    "chars": condense_core::js_len(&r.result_text.to_str()),
                    "spillBytes": r.spill_bytes,
                    "isError": r.is_error,
                    "turn": r.turn_index,
                })
            })
            .collect();
        let original: usize = calls
            .iter()
            .map(|c| c["chars"].as_u64().unwrap_or(0) as usize)
            .sum();
        nodes.push(json!({
            "summaryChars": condense_core::js_len(&body.text),
            "originalChars": original,
            "summary": body.text,
            "calls": calls,
        }));
    }
    if as_json {
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&nodes).expect("json")
        ));
    }
    if nodes.is_empty() {
        return write_all("No pruned tool calls found in this session.\n");
    }
    let mut out = String::new();
    for n in &nodes {
        let calls = n["calls"].as_array().map_or(0, Vec::len);
        let turn = n["calls"][0]["turn"].as_i64().unwrap_or(-1);
        out.push_str(&format!(
            "[pruner] Turn {turn} summary ({calls} tools · {} chars · original {})\n",
            n["summaryChars"], n["originalChars"]
        ));
        for c in n["calls"].as_array().into_iter().flatten() {
            let size = match c["spillBytes"].as_u64() {
                Some(b) => format!("{b} bytes"),
                None => format!("{} chars", c["chars"]),
            };
            out.push_str(&format!(
                "  {} {}({}) · {size}{}\n",
                c["ref"].as_str().unwrap_or("-"),
                c["tool"].as_str().unwrap_or(""),
                args_line(&c["args"]),
                if c["isError"] == true { " [error]" } else { "" }
            ));
        }
    }
    write_all(&out)
}
