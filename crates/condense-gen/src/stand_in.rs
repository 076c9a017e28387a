//! Deterministic stand-ins for the LLM summarizer and range fusion, so a
//! pruned session (and a bench) needs no model and gives the same bytes
//! every time.

use condense_core::FusionJob;
use condense_core::{JobResult, SummaryJob, Usage};
use serde_json::Value;

pub(crate) fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub(crate) fn describe_call(name: &str, args: &Value, result: &str, is_error: bool) -> String {
    let lines = result.lines().count();
    let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let status = if is_error { "failed" } else { "ok" };
    match name {
        "bash" => format!(
            "ran `{}` ({status}): {lines} lines of output; first line `{}`.",
            clip(arg("command"), 80),
            clip(result.lines().next().unwrap_or(""), 60)
        ),
        "read" => format!(
            "read `{}` ({lines} lines, {status}).",
            clip(arg("path"), 80)
        ),
        "write" | "edit" => {
            let first = clip(result.lines().next().unwrap_or(""), 80);
            format!("{name} `{}` {status}: {first}", clip(arg("path"), 80))
        }
        _ => format!("{name} returned {} chars ({status}).", result.len()),
    }
}

/// The deterministic summarizer the generator (and the benches) use in
/// place of an LLM: one `- [[N:tool]] …` bullet per call, naming the call
/// and its output's size, with a usage estimate (`chars / 4`).
pub fn stand_in_summary(job: &SummaryJob) -> JobResult {
    let mut text = String::new();
    let mut prompt_chars = 1200;
    for (i, c) in job.batch.calls.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let result = c.result_text.to_str();
        text.push_str(&format!(
            "- [[{}:{}]] {}",
            i + 1,
            c.tool_name,
            describe_call(&c.tool_name, &c.args, &result, c.is_error)
        ));
        prompt_chars += result.len().min(2000) + 120;
    }
    let input_tokens = (prompt_chars / 4) as u64;
    let output_tokens = (text.len() / 4) as u64;
    JobResult::Summary {
        usage: Usage {
            input_tokens,
            output_tokens,
            cost: (input_tokens * 3 + output_tokens * 15) as f64 / 1e6,
        },
        text,
    }
}

/// The deterministic range fusion: the first bullet of each sub-summary
/// (at most eight), under one line saying how many were fused.
pub fn stand_in_fusion(job: &FusionJob) -> JobResult {
    let mut text = format!(
        "- Fused {} batch summaries; commands, paths and errors kept.",
        job.summaries.len()
    );
    for s in job.summaries.iter().take(8) {
        if let Some(first) = s.lines().find(|l| l.starts_with("- ")) {
            text.push('\n');
            text.push_str(clip(first, 200));
        }
    }
    let input_tokens = (job.summaries.iter().map(String::len).sum::<usize>() / 4 + 300) as u64;
    let output_tokens = (text.len() / 4) as u64;
    JobResult::Summary {
        usage: Usage {
            input_tokens,
            output_tokens,
            cost: (input_tokens * 3 + output_tokens * 15) as f64 / 1e6,
        },
        text,
    }
}
