//! `context_tree_query`: the model pages pruned originals back in.
//!
//! Given the ids the model passed (short refs, occurrence keys, dedup aliases
//! or bare ids), [`query`] formats every matching record the way
//! pi-condense's tool does, byte for byte. Reading spilled outputs is I/O, so
//! the caller supplies it as a function (and decides which paths it trusts).

use crate::records::ToolCallRecord;
use crate::state::State;

/// The recovery tool's name.
pub const QUERY_TOOL_NAME: &str = crate::render::grace::QUERY_TOOL_NAME;

/// pi's `DEFAULT_MAX_LINES` for tool output.
pub const MAX_LINES: usize = 2000;
/// pi's `DEFAULT_MAX_BYTES` for tool output (50 KiB, UTF-8).
pub const MAX_BYTES: usize = 50 * 1024;

/// Text shown when a spill file cannot be read and no preview exists.
pub const SPILL_UNAVAILABLE: &str = "(spilled output unavailable — sidecar file missing)";

/// First line of a spilled output shown from its preview only.
pub const SPILL_PREVIEW_ONLY: &str =
    "(full output unavailable — spill file missing or outside this session's blob directory; preview follows)";

/// The tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    /// The tool result text.
    pub text: String,
    /// Each block's label and record (the tool's `details.results`).
    pub results: Vec<(String, ToolCallRecord)>,
}

/// pi's `truncateHead`: whole head lines within `max_lines` and `max_bytes`
/// (UTF-8). Returns the kept text, lines kept, total lines, and whether
/// anything was cut.
pub fn truncate_head(
    text: &str,
    max_lines: usize,
    max_bytes: usize,
) -> (String, usize, usize, bool) {
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len();
    if total <= max_lines && text.len() <= max_bytes {
        return (text.to_owned(), total, total, false);
    }
    if lines[0].len() > max_bytes {
        return (String::new(), 0, total, true);
    }
    let mut kept = 0usize;
    let mut bytes = 0usize;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let add = line.len() + usize::from(i > 0);
        if bytes + add > max_bytes {
            break;
        }
        bytes += add;
        kept += 1;
    }
    (lines[..kept].join("\n"), kept, total, true)
}

/// Runs the query for `ids`. `read_spill` returns a spilled record's full
/// text, or `None` when it cannot be read.
pub fn query(
    state: &State,
    ids: &[String],
    read_spill: impl Fn(&ToolCallRecord) -> Option<String>,
) -> QueryOutput {
    let mut blocks = Vec::new();
    let mut results = Vec::new();
    for id in ids {
        let records = state.records_for_query(id);
        if records.is_empty() {
            blocks.push(format!(
                "## toolRef: {id}\n(not found in index — may not have been summarized yet)"
            ));
            continue;
        }
        let multiple = records.len() > 1;
        for record in records {
            let label = if multiple {
                record.key().to_string()
            } else {
                id.clone()
            };
            let mut block = format!("## toolRef: {label}\n");
            if multiple && record.result_timestamp.is_none() {
                block.push_str("Occurrence: legacy (no resultTimestamp)\n");
            }
            let args = serde_json::to_string_pretty(&record.args).unwrap_or_else(|_| "null".into());
            block.push_str(&format!(
                "Tool: {}\nArgs: {}\nStatus: {}\nTurn: {}\n\n",
                record.tool_name,
                args,
                if record.is_error { "ERROR" } else { "OK" },
                record.turn_index
            ));
            let body = if record.spill_path.is_some() {
                // A spill that cannot be read (missing, or refused because its
                // recorded path lies outside the session's blob directory)
                // shows its preview, saying so.
                read_spill(&record)
                    .or_else(|| {
                        record
                            .result_preview
                            .as_ref()
                            .map(|p| format!("{SPILL_PREVIEW_ONLY}\n{p}"))
                    })
                    .unwrap_or_else(|| SPILL_UNAVAILABLE.to_owned())
            } else {
                record.result_text.to_str().into_owned()
            };
            let (kept, shown, total, cut) = truncate_head(&body, MAX_LINES, MAX_BYTES);
            block.push_str(&kept);
            if cut {
                block.push_str(&format!(
                    "\n[Output truncated: {shown}/{total} lines shown]"
                ));
            }
            blocks.push(block);
            results.push((label, record));
        }
    }
    QueryOutput {
        text: blocks.join("\n\n---\n\n"),
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occurrence::OccurrenceKey;
    use serde_json::json;

    fn rec(id: &str, ts: Option<i64>, text: &str) -> ToolCallRecord {
        serde_json::from_value(json!({
            "toolCallId": id, "toolName": "bash", "args": {"cmd": "ls"}, "resultText": text,
            "isError": false, "turnIndex": 0, "timestamp": 1000, "resultTimestamp": ts,
        }))
        .unwrap()
    }

    fn run(state: &State, ids: &[&str]) -> String {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        query(state, &ids, |_| None).text
    }

    #[test]
    fn single_record_block_format() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "FIRST"), true);
        assert_eq!(
            run(&s, &["bash_23"]),
            "## toolRef: bash_23\nTool: bash\nArgs: {\n  \"cmd\": \"ls\"\n}\nStatus: OK\nTurn: 0\n\nFIRST"
        );
    }

    #[test]
    fn reused_id_lists_every_occurrence_oldest_first() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(2150), "SECOND"), true);
        s.add_record(rec("bash_23", None, "OLD"), true);
        let text = run(&s, &["bash_23"]);
        assert_eq!(text.matches("## toolRef:").count(), 2);
        assert!(text.contains("## toolRef: bash_23\nOccurrence: legacy (no resultTimestamp)\n"));
        assert!(text.contains("## toolRef: bash_23@2150\n"));
        assert!(text.find("OLD").unwrap() < text.find("SECOND").unwrap());
        assert!(text.contains("\n\n---\n\n"));
    }

    #[test]
    fn not_found_and_dedup_alias() {
        let mut s = State::new();
        s.add_record(rec("a", Some(1), "SAME"), true);
        s.register_dedup_alias(&OccurrenceKey::parse("b@2"), &OccurrenceKey::parse("a@1"));
        assert!(
            run(&s, &["nope"]).contains("(not found in index — may not have been summarized yet)")
        );
        assert!(run(&s, &["b@2"]).ends_with("SAME"));
    }

    #[test]
    fn truncation_keeps_whole_head_lines() {
        let text: String = (0..2500)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let (kept, shown, total, cut) = truncate_head(&text, MAX_LINES, MAX_BYTES);
        assert!(cut);
        assert_eq!(total, 2500);
        assert_eq!(shown, 2000);
        assert!(kept.ends_with("line 1999"));
        let long = "x".repeat(60 * 1024);
        assert_eq!(
            truncate_head(&long, MAX_LINES, MAX_BYTES),
            (String::new(), 0, 1, true)
        );
        let (_, shown, _, _) =
            truncate_head(&format!("a\n{}", "y".repeat(52_000)), MAX_LINES, MAX_BYTES);
        assert_eq!(shown, 1);
    }

    #[test]
    fn spilled_body_falls_back_to_preview_then_notice() {
        let mut s = State::new();
        let mut r = rec("big", Some(5), "");
        r.spill_path = Some("/nowhere/big.txt".into());
        r.result_preview = Some("HEAD".into());
        s.add_record(r, true);
        assert!(run(&s, &["big"]).ends_with("HEAD"));
        let ids = vec!["big".to_string()];
        assert!(query(&s, &ids, |_| Some("FULL".into()))
            .text
            .ends_with("FULL"));
    }
}
