//! The extractive provider: summaries without an LLM.
//!
//! [`Extractive`] reads the prompt the summarizer built and answers with
//! bullets taken from each call's own text, so it honours the same contract
//! as a model: every call gets 1-3 bullets and the first starts with the
//! call's `[[N:tool]]` label. Per call:
//!
//! 1. `- [[N:tool]] tool <key args> -> OK|ERROR, <size>: <first line>`
//! 2. `- errors: …` — up to three further lines that look like errors
//!    (only when there are some);
//! 3. `- refs: …` — up to eight paths and ids found in the result (only when
//!    there are some).
//!
//! Paths, ids and error lines are copied verbatim (long lines are cut). A
//! range-fusion prompt is answered with its summaries, repeated lines
//! dropped. Any other prompt gets an empty answer (an unusable summary).
//!
//! It is the offline default and the CLI demo's summarizer: deterministic,
//! fast (one pass over the prompt), and free (usage is zero).

use async_trait::async_trait;
use condense_core::Usage;
use condense_core::{js_len, js_prefix};
use serde_json::Value;

use crate::provider::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, StopReason,
};

/// The extractive provider (see the [module docs](crate::extractive)).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

impl Extractive {
    /// The provider.
    pub fn new() -> Extractive {
        Extractive
    }

    /// The answer to a user message built by [`crate::prompt`].
    pub fn answer(user: &str) -> String {
        if let Some(body) = between(user, "<tool-call-batch>\n", "\n</tool-call-batch>") {
            return summarize_batch_body(body);
        }
        if let Some(body) = between(user, "<sub-task-summaries>\n", "\n</sub-task-summaries>") {
            return fuse_summaries(body);
        }
        String::new()
    }
}

#[async_trait]
impl Provider for Extractive {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        if request.cancel.is_cancelled() {
            return Err(ProviderError::aborted());
        }
        let text = Extractive::answer(&request.user);
        if !text.is_empty() {
            events.text(text.clone());
        }
        Ok(Completion {
            text,
            stop_reason: StopReason::Stop,
            usage: Usage::default(),
        })
    }
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let end = s.rfind(close)?;
    (end >= start).then(|| &s[start..end])
}

/// One call as the prompt shows it.
#[derive(Debug)]
struct PromptCall<'a> {
    label: &'a str,
    tool: &'a str,
    args: &'a str,
    is_error: bool,
    result: &'a str,
}

const CALL_SEPARATOR: &str = "\n---\n";

/// Finds `[[k:` where call `k` starts: at a line start for the first call,
/// right after the call separator for the others.
fn find_call_start(body: &str, k: usize, from: usize) -> Option<usize> {
    let needle = if k == 1 {
        "[[1:".to_owned()
    } else {
        format!("{CALL_SEPARATOR}[[{k}:")
    };
    let mut at = from;
    while let Some(offset) = body.get(at..)?.find(&needle) {
        let pos = at + offset;
        let label_at = if k == 1 {
            pos
        } else {
            pos + CALL_SEPARATOR.len()
        };
        let line_start = label_at == 0 || body.as_bytes()[label_at - 1] == b'\n';
        if line_start && is_call_header(&body[label_at..]) {
            return Some(label_at);
        }
        at = pos + 1;
    }
    None
}

/// Whether `s` starts with a whole call header, `[[N:name]] Tool: name(`
/// (the same name twice), so text inside a result rarely passes for one.
fn is_call_header(s: &str) -> bool {
    let Some((label, rest)) = s.split_once("]] Tool: ") else {
        return false;
    };
    match label.split_once(':') {
        Some((_, name)) if !name.contains('\n') => rest
            .strip_prefix(name)
            .is_some_and(|after| after.starts_with('(')),
        _ => false,
    }
}

fn parse_calls(body: &str) -> Vec<PromptCall<'_>> {
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(start) = find_call_start(body, starts.len() + 1, from) {
        starts.push(start);
        from = start + 1;
    }
    let mut calls = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = match starts.get(i + 1) {
            Some(&next) => next - CALL_SEPARATOR.len(),
            None => body.len(),
        };
        if let Some(call) = parse_call(&body[start..end]) {
            calls.push(call);
        }
    }
    calls
}

fn parse_call(segment: &str) -> Option<PromptCall<'_>> {
    let label_end = segment.find("]] Tool: ")? + 2;
    let label = &segment[..label_end];
    let tool = label
        .strip_prefix("[[")?
        .strip_suffix("]]")?
        .split_once(':')?
        .1;
    let rest = &segment[label_end + " Tool: ".len()..];
    let rest = rest.strip_prefix(tool)?.strip_prefix('(')?;
    let (ok_at, err_at) = (
        rest.find(")\nResult (OK): "),
        rest.find(")\nResult (ERROR): "),
    );
    let (args_end, is_error) = match (ok_at, err_at) {
        (Some(o), Some(e)) if e < o => (e, true),
        (Some(o), _) => (o, false),
        (None, Some(e)) => (e, true),
        (None, None) => return None,
    };
    let marker = if is_error {
        ")\nResult (ERROR): "
    } else {
        ")\nResult (OK): "
    };
    Some(PromptCall {
        label,
        tool,
        args: &rest[..args_end],
        is_error,
        result: &rest[args_end + marker.len()..],
    })
}

/// Cuts `s` to `max` UTF-16 units, marking the cut with `…`.
fn clip(s: &str, max: usize) -> String {
    if js_len(s) <= max {
        s.to_owned()
    } else {
        format!("{}…", js_prefix(s, max))
    }
}

fn is_single_line(s: &str) -> bool {
    !s.contains('\n') && !s.contains('\r')
}

fn args_brief(args: &str) -> String {
    let value: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let describe = |v: &Value| -> Option<String> {
        Some(match v {
            Value::Null => return None,
            Value::String(s) if is_single_line(s) && js_len(s) <= 120 => s.clone(),
            Value::String(s) => format!("<{} chars>", js_len(s)),
            Value::Array(items) => format!("[{} items]", items.len()),
            Value::Object(_) => "{…}".to_owned(),
            other => other.to_string(),
        })
    };
    match &value {
        Value::Object(map) => map
            .iter()
            .filter_map(|(k, v)| describe(v).map(|d| format!("{k}={d}")))
            .take(6)
            .collect::<Vec<_>>()
            .join(" "),
        other => describe(other).unwrap_or_default(),
    }
}

/// The result's shown text and its full length, undoing the prompt's
/// truncation marker.
fn result_size(result: &str) -> (&str, usize) {
    if let Some(stripped) = result.strip_suffix(" chars truncated]") {
        if let Some(at) = stripped.rfind(" ...[") {
            if let Ok(k) = stripped[at + 5..].parse::<usize>() {
                let shown = &result[..at];
                return (shown, js_len(shown) + k);
            }
        }
    }
    (result, js_len(result))
}

const ERROR_WORDS: [&str; 12] = [
    "error",
    "fail",
    "panic",
    "exception",
    "fatal",
    "denied",
    "not found",
    "no such",
    "traceback",
    "cannot",
    "unable",
    "invalid",
];

fn looks_like_error(line: &str) -> bool {
    let lower = line.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

fn is_hex_id(t: &str) -> bool {
    let hex = t.len() >= 7 && t.bytes().all(|b| b.is_ascii_hexdigit());
    hex && t.bytes().any(|b| b.is_ascii_digit()) && t.bytes().any(|b| b.is_ascii_alphabetic())
}

fn is_uuid(t: &str) -> bool {
    let parts: Vec<&str> = t.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_file_name(t: &str) -> bool {
    let Some((name, ext)) = t.rsplit_once('.') else {
        return false;
    };
    let name_ok = name.len() >= 2
        && name.bytes().any(|b| b.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    let ext_ok = (1..=6).contains(&ext.len())
        && ext.as_bytes()[0].is_ascii_alphabetic()
        && ext.bytes().all(|b| b.is_ascii_alphanumeric());
    name_ok && ext_ok
}

fn is_path(t: &str) -> bool {
    t.contains('/') && t.chars().any(char::is_alphanumeric)
}

/// Paths and ids in `text`, in order of first appearance, without repeats.
fn refs_in(text: &str, skip: &str, max: usize) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let separators = |c: char| c.is_whitespace() || "\"'`()[]{}<>,;|=".contains(c);
    for token in text.split(separators) {
        let token = token.trim_end_matches(['.', ':', ',', ';', '!', '?']);
        if token.is_empty() || token.len() > 200 {
            continue;
        }
        let wanted = is_path(token) || is_file_name(token) || is_hex_id(token) || is_uuid(token);
        if wanted && !skip.contains(token) && !found.iter().any(|f| f == token) {
            found.push(token.to_owned());
            if found.len() == max {
                break;
            }
        }
    }
    found
}

fn call_bullets(call: &PromptCall<'_>) -> Vec<String> {
    let (shown, full_len) = result_size(call.result);
    let status = if call.is_error { "ERROR" } else { "OK" };
    let brief = args_brief(call.args);
    let mut lines = shown.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next();
    let mut head = format!("- {} {}", call.label, call.tool);
    if !brief.is_empty() {
        head.push(' ');
        head.push_str(&brief);
    }
    match first {
        Some(first) => head.push_str(&format!(
            " -> {status}, {full_len} chars: {}",
            clip(first, 160)
        )),
        None => head.push_str(&format!(" -> {status}, empty result")),
    }
    let mut bullets = vec![head];
    let errors: Vec<String> = lines
        .filter(|l| looks_like_error(l))
        .take(3)
        .map(|l| clip(l, 200))
        .collect();
    if !errors.is_empty() {
        bullets.push(format!("- errors: {}", errors.join(" | ")));
    }
    let refs = refs_in(shown, &bullets.join("\n"), 8);
    if !refs.is_empty() {
        bullets.push(format!("- refs: {}", refs.join(", ")));
    }
    bullets
}

fn summarize_batch_body(body: &str) -> String {
    parse_calls(body)
        .iter()
        .flat_map(call_bullets)
        .collect::<Vec<_>>()
        .join("\n")
}

fn fuse_summaries(body: &str) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut out: Vec<&str> = Vec::new();
    for line in body.lines() {
        let key = line.trim();
        if key.is_empty() {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push("");
            }
            continue;
        }
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(line);
    }
    out.join("\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_classes() {
        assert!(is_path("src/main.rs:12:5"));
        assert!(!is_path("/"));
        assert!(is_file_name("Cargo.toml"));
        assert!(!is_file_name("1.5"));
        assert!(!is_file_name("e.g"));
        assert!(is_hex_id("3f9a2c1e"));
        assert!(!is_hex_id("deadbeef"));
        assert!(!is_hex_id("1234567"));
        assert!(is_uuid("123e4567-e89b-12d3-a456-426614174000"));
    }

    #[test]
    fn truncation_marker_restores_full_size() {
        assert_eq!(result_size("abc ...[10 chars truncated]"), ("abc", 13));
        assert_eq!(result_size("plain"), ("plain", 5));
    }

    #[test]
    fn fusion_drops_repeated_lines() {
        let body = "- a `t1`\n- b\n\n- a `t1`\n- c\n\n\n- b";
        assert_eq!(fuse_summaries(body), "- a `t1`\n- b\n\n- c");
    }
}
