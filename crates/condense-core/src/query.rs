//! `context_tree_query`: the model pages pruned originals back in.
//!
//! Given the ids the model passed (short refs, occurrence keys, dedup aliases
//! or bare ids), [`query`] formats every matching record the way
//! pi-condense's tool does, byte for byte. Reading spilled outputs is I/O, so
//! the caller supplies it as a function (and decides which paths it trusts).

mod page;

pub use page::{page, Page, PageRequest, SPLIT_BYTES};

use crate::message::{Message, Role};
use crate::occurrence::OccurrenceKey;
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

/// Most bytes of blocks an answer holds before it stops adding blocks (five
/// full pages). The first block is always shown; every block after it must
/// fit, and the refs left over are named in one closing line.
pub const MAX_ANSWER_BYTES: usize = 5 * MAX_BYTES;

/// Most bytes of ref names the closing line of a cut answer lists.
const MAX_OMITTED_LIST_BYTES: usize = 4096;

/// What a query asks beyond its ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryOptions<'a> {
    /// The part of each output to show.
    pub page: PageRequest,
    /// The branch's messages: a raw id the index does not know is looked
    /// up among its tool results.
    pub branch: &'a [Message],
}

/// Runs the query for `ids`, showing each output's first page. `read_spill`
/// returns a spilled record's full text, or `None` when it cannot be read.
pub fn query(
    state: &State,
    ids: &[String],
    read_spill: impl Fn(&ToolCallRecord) -> Option<String>,
) -> QueryOutput {
    query_with(state, ids, QueryOptions::default(), read_spill)
}

/// Runs the query for `ids` with `options` (a page, the branch to fall back
/// to). Each distinct id is answered once, in the order given.
pub fn query_with(
    state: &State,
    ids: &[String],
    options: QueryOptions<'_>,
    read_spill: impl Fn(&ToolCallRecord) -> Option<String>,
) -> QueryOutput {
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<&String> = ids.iter().filter(|id| seen.insert(id.as_str())).collect();
    let mut text = String::new();
    let mut results = Vec::new();
    for (n, id) in distinct.iter().enumerate() {
        let (blocks, found) = answer_id(state, id, options, &read_spill);
        let size: usize = blocks.iter().map(|b| b.len() + SEPARATOR.len()).sum();
        if !text.is_empty() && text.len() + size > MAX_ANSWER_BYTES {
            text.push_str(SEPARATOR);
            text.push_str(&omitted_notice(&distinct[n..]));
            break;
        }
        for block in blocks {
            if !text.is_empty() {
                text.push_str(SEPARATOR);
            }
            text.push_str(&block);
        }
        results.extend(found);
    }
    QueryOutput { text, results }
}

const SEPARATOR: &str = "\n\n---\n\n";

/// The blocks answering one id, and the records they show.
fn answer_id(
    state: &State,
    id: &str,
    options: QueryOptions<'_>,
    read_spill: &impl Fn(&ToolCallRecord) -> Option<String>,
) -> (Vec<String>, Vec<(String, ToolCallRecord)>) {
    let mut records = state.records_for_query(id);
    let from_branch = records.is_empty();
    if from_branch {
        records = branch_records(options.branch, id);
    }
    if records.is_empty() {
        return (
            vec![format!(
                "## toolRef: {id}\n(not found in index — may not have been summarized yet)"
            )],
            Vec::new(),
        );
    }
    let multiple = records.len() > 1;
    let mut blocks = Vec::new();
    let mut found = Vec::new();
    for record in records {
        let label = if multiple {
            record.key().to_string()
        } else {
            id.to_owned()
        };
        blocks.push(format_block(
            &label,
            &record,
            multiple,
            from_branch,
            options.page,
            read_spill,
        ));
        found.push((label, record));
    }
    (blocks, found)
}

fn format_block(
    label: &str,
    record: &ToolCallRecord,
    multiple: bool,
    from_branch: bool,
    request: PageRequest,
    read_spill: &impl Fn(&ToolCallRecord) -> Option<String>,
) -> String {
    let mut block = format!("## toolRef: {label}\n");
    if from_branch {
        block.push_str("Source: session branch (not in the index)\n");
    }
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
        // recorded path lies outside the session's blob directory) shows
        // its preview, saying so.
        read_spill(record)
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
    let page = page::page(&body, request);
    if page.text.is_empty() && page.first > page.total {
        block.push_str(&format!(
            "(offset {} is past the end of this output: it has {} lines)",
            page.first, page.total
        ));
        return block;
    }
    block.push_str(page.text);
    if page.has_more() {
        let next = page.last + 1;
        let split = if page.splits_a_line {
            format!(
                "; line {} is part of a line longer than {} bytes, which line {next} continues",
                page.last,
                page::SPLIT_BYTES
            )
        } else {
            String::new()
        };
        block.push_str(&format!(
            "\n[Output truncated: lines {}-{} of {} shown{split}. To continue, call {QUERY_TOOL_NAME} with toolCallIds [{}] and offset={next}.]",
            page.first,
            page.last,
            page.total,
            serde_json::Value::from(label),
        ));
    } else if !request.is_default() {
        block.push_str(&format!(
            "\n[Lines {}-{} of {} shown: the end of the output.]",
            page.first, page.last, page.total
        ));
    }
    block
}

/// The closing line of an answer cut at [`MAX_ANSWER_BYTES`].
fn omitted_notice(rest: &[&String]) -> String {
    let mut listed = String::new();
    let mut count = 0;
    for id in rest {
        let quoted = serde_json::Value::from(id.as_str()).to_string();
        if listed.len() + quoted.len() > MAX_OMITTED_LIST_BYTES {
            break;
        }
        if count > 0 {
            listed.push_str(", ");
        }
        listed.push_str(&quoted);
        count += 1;
    }
    let more = if count < rest.len() {
        format!(" and {} more", rest.len() - count)
    } else {
        String::new()
    };
    format!(
        "[Answer size limit ({MAX_ANSWER_BYTES} bytes) reached: {} ref(s) not answered: {listed}{more}. Query them in another call.]",
        rest.len()
    )
}

/// Records built from the branch's tool results for a raw id (a bare id, or
/// an `id@resultTimestamp` key) the index does not know: a result a chain
/// dropped without indexing it stays reachable while it is on the branch.
fn branch_records(branch: &[Message], id: &str) -> Vec<ToolCallRecord> {
    let wanted = OccurrenceKey::parse(id);
    let mut out = Vec::new();
    for (i, m) in branch.iter().enumerate() {
        let sk = m.skeleton();
        if !m.is(&Role::ToolResult) || sk.tool_call_id.as_deref() != Some(wanted.id.as_str()) {
            continue;
        }
        if wanted.result_timestamp.is_some() && wanted.result_timestamp != sk.timestamp {
            continue;
        }
        let args = call_args(&branch[..i], &wanted.id);
        out.push(ToolCallRecord {
            tool_call_id: wanted.id.clone(),
            tool_name: sk.tool_name.clone().unwrap_or_default(),
            args,
            result_text: m.result_text().into(),
            is_error: sk.is_error,
            turn_index: -1,
            timestamp: sk.timestamp.unwrap_or_default(),
            result_timestamp: sk.timestamp,
            spill_path: None,
            spill_bytes: None,
            result_preview: None,
            content_hash: None,
            extra: Default::default(),
        });
    }
    out
}

/// The arguments of the latest `toolCall` block with `id` in `messages`.
fn call_args(messages: &[Message], id: &str) -> serde_json::Value {
    let empty = || serde_json::Value::Object(Default::default());
    let Some(assistant) = messages
        .iter()
        .rev()
        .find(|m| m.is(&Role::Assistant) && m.skeleton().tool_calls.iter().any(|c| c.id == id))
    else {
        return empty();
    };
    let Ok(value) = assistant.to_value() else {
        return empty();
    };
    value
        .get("content")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .find(|b| {
            b.get("type").and_then(serde_json::Value::as_str) == Some("toolCall")
                && b.get("id").and_then(serde_json::Value::as_str) == Some(id)
        })
        .and_then(|b| {
            ["arguments", "input", "args"]
                .iter()
                .find_map(|k| b.get(*k))
        })
        .filter(|a| !a.is_null())
        .cloned()
        .unwrap_or_else(empty)
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
