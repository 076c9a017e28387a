//! `/pruner tree` as text: each summary, then the tool calls it replaced.

use crate::Engine;
use condense_core::{format_count, js_len, js_prefix};
use serde_json::Value;

use super::{plural, CommandEnv};

/// `tree` lists at most this many summaries (the newest).
const TREE_MAX_SUMMARIES: usize = 100;
/// `tree` cuts each argument value's JSON to this many UTF-16 units.
const TREE_ARG_UNITS: usize = 80;

/// `YYYY-MM-DD HH:MM:SS` in the user's local time.
fn local_time(ms: i64, env: CommandEnv) -> String {
    let iso = condense_store::time::format_iso(ms + env.utc_offset_minutes * 60_000);
    iso.get(..19).unwrap_or(&iso).replacen('T', " ", 1)
}

fn tree_args(args: &Value) -> String {
    match args.as_object() {
        Some(m) => m
            .iter()
            .map(|(k, v)| {
                let json = v.to_string();
                if js_len(&json) > TREE_ARG_UNITS {
                    format!("{k}={}…", js_prefix(&json, TREE_ARG_UNITS))
                } else {
                    format!("{k}={json}")
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => String::new(),
    }
}

/// `/pruner tree` as text: each summary, then the calls it replaced.
pub fn tree_text(e: &Engine, env: CommandEnv) -> String {
    let state = e.state();
    let bodies = state.summary_bodies();
    if bodies.is_empty() {
        return "No pruned tool calls found in this session.".to_owned();
    }
    let skip = bodies.len().saturating_sub(TREE_MAX_SUMMARIES);
    let mut out = format!(
        "Pruned Tool Calls ({} summar{})",
        bodies.len(),
        if bodies.len() == 1 { "y" } else { "ies" }
    );
    if skip > 0 {
        out.push_str(&format!(
            "\n({skip} older summar{} not shown)",
            if skip == 1 { "y" } else { "ies" }
        ));
    }
    for body in &bodies[skip..] {
        let records: Vec<_> = body
            .keys
            .iter()
            .filter_map(|k| state.record_for(&k.id, k.result_timestamp))
            .collect();
        let original: u64 = records
            .iter()
            .map(|r| js_len(&r.result_text.to_str()) as u64)
            .sum();
        let n = records.len() as u64;
        let turn = records
            .first()
            .map_or_else(|| "?".to_owned(), |r| r.turn_index.to_string());
        out.push_str(&format!(
            "\n[pruner] Turn {turn} summary ({n} tool{} · {} chars · original {})",
            plural(n),
            format_count(js_len(&body.text) as u64),
            format_count(original)
        ));
        if let Some(r) = records.first() {
            out.push_str(&format!(" · {}", local_time(r.timestamp, env)));
        }
        for r in records {
            let size = match r.spill_bytes {
                Some(b) => format!("{} bytes", format_count(b)),
                None => format!(
                    "{} chars",
                    format_count(js_len(&r.result_text.to_str()) as u64)
                ),
            };
            out.push_str(&format!(
                "\n  {}({}) · {size}{}",
                r.tool_name,
                tree_args(&r.args),
                if r.is_error { " [error]" } else { "" }
            ));
        }
    }
    out
}
