//! `/pruner now`: a manual flush with a progress widget above the editor.

use crate::{Effect, Effects, Placement};
use condense_core::{format_count, Frontier, FrontierOutcome, Slot, TriggerKind};
use condense_summarizer::ProgressEvent;

use super::{notice_effects, now_ms, plural, run_command_flush, CommandHost};

/// The widget key pi-condense's progress widget uses.
pub const PROGRESS_WIDGET: &str = "context-prune-progress";

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const SPINNER_MS: i64 = 120;
/// Streaming updates closer together than this are not sent.
const STREAM_UPDATE_MS: i64 = 100;

#[derive(Clone, Copy, PartialEq)]
enum RowState {
    Pending,
    Running(usize),
    Done(usize),
    Skipped,
}

struct Row {
    calls: u64,
    raw: u64,
    state: RowState,
}

fn char_progress(received: u64, raw: u64) -> String {
    format!(
        "{} summary char{} / {} raw char{}",
        format_count(received),
        plural(received),
        format_count(raw),
        plural(raw)
    )
}

fn widget_lines(rows: &[Row], now: i64) -> Vec<String> {
    let total = rows.len();
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let label = format!("Batch {}/{total}", i + 1);
            let calls = format!("{} tool call{}", r.calls, plural(r.calls));
            match r.state {
                RowState::Pending => format!("○ {label} · {calls} · pending"),
                RowState::Running(chars) => {
                    let frame = SPINNER[(now / SPINNER_MS).rem_euclid(10) as usize];
                    if chars > 0 {
                        format!(
                            "{frame} {label} · {calls} · {}",
                            char_progress(chars as u64, r.raw)
                        )
                    } else {
                        format!("{frame} {label} · {calls}")
                    }
                }
                RowState::Done(chars) => {
                    format!(
                        "✓ {label} · {calls} · {}",
                        char_progress(chars as u64, r.raw)
                    )
                }
                RowState::Skipped => format!("⚠ {label} · {calls} · skipped"),
            }
        })
        .collect()
}

fn widget(lines: Option<Vec<String>>) -> Effect {
    Effect::Widget {
        key: PROGRESS_WIDGET.to_owned(),
        lines,
        placement: Placement::AboveEditor,
        ttl_ms: None,
    }
}

/// The text `/pruner now` ends with, from the frontier the flush wrote.
fn now_text(frontier: &Frontier, min_batch_chars: u64) -> Effect {
    let (calls, batches, raw, summary) = (
        frontier.attempted_tool_call_count,
        frontier.attempted_batch_count,
        frontier.raw_char_count,
        frontier.summary_char_count,
    );
    let tc = format!("tool call{}", plural(calls));
    match frontier.outcome {
        FrontierOutcome::SkippedOversized => Effect::warning(format!(
            "pruner: skipped pruning {calls} {tc} — summary was {summary} chars vs {raw} raw chars; frontier advanced past this range"
        )),
        FrontierOutcome::SkippedTrivial => Effect::info(format!(
            "pruner: skipped {calls} trivial {tc} — only {raw} raw chars below minBatchChars={min_batch_chars}; no LLM call made; frontier advanced past this range"
        )),
        FrontierOutcome::SkippedDeduped => Effect::info(format!(
            "pruner: deduplicated {calls} {tc} ({raw} raw chars) against earlier prunes; no LLM call made; frontier advanced past this range"
        )),
        FrontierOutcome::Summarized => Effect::info(format!(
            "pruner: pruned {calls} {tc} from {batches} batch{} — summary {summary} chars vs {raw} raw chars",
            if batches == 1 { "" } else { "es" }
        )),
    }
}

/// `/pruner now`: a manual flush, sequential, with a progress widget and
/// runtime delivery.
pub(super) async fn now(host: &dyn CommandHost) -> Effects {
    let (flush, show_status, min_batch) = {
        let mut e = host.engine();
        if !e.config().enabled {
            return vec![Effect::warning(
                "Context pruning is disabled. Run /pruner on first.",
            )];
        }
        let show = e.config().show_prune_status_line;
        let min_batch = e.config().min_batch_chars;
        (
            e.begin_flush(TriggerKind::Manual, None, now_ms()),
            show,
            min_batch,
        )
    };
    let Some(flush) = flush else {
        return vec![Effect::warning(
            "pruner: nothing flushed — already-flushing",
        )];
    };
    if flush.is_empty() {
        // Still run it through: its metrics entry records `empty`.
        let mut out = vec![Effect::info(
            "pruner: nothing pending — no batches to summarize",
        )];
        if let Ok((_, done)) = run_command_flush(host, flush, &mut |_| {}).await {
            out.extend(done.effects);
        }
        return out;
    }

    let mut rows: Vec<Row> = flush
        .batches()
        .iter()
        .map(|b| Row {
            calls: b.captured.calls.len() as u64,
            raw: b.captured.raw_chars() as u64,
            // Deduplicated and trivial batches need no summarizer call.
            state: match b.slot {
                Slot::Summarize(_) => RowState::Pending,
                Slot::Deduped | Slot::Trivial => RowState::Skipped,
            },
        })
        .collect();
    let job_rows: Vec<usize> = {
        let mut by_job: Vec<(usize, usize)> = flush
            .batches()
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.slot {
                Slot::Summarize(j) => Some((j, i)),
                _ => None,
            })
            .collect();
        by_job.sort_unstable();
        by_job.into_iter().map(|(_, i)| i).collect()
    };
    let mut first = vec![widget(Some(widget_lines(&rows, now_ms())))];
    if show_status && !flush.jobs().is_empty() {
        first.insert(0, Effect::status(Some("│ prune: summarizing…".to_owned())));
    }
    host.ui(first);

    let mut last_sent = now_ms();
    let mut on_progress = |event: ProgressEvent| {
        let (index, state, throttle) = match event {
            ProgressEvent::Started { index, .. } => (index, RowState::Running(0), false),
            ProgressEvent::Streaming { index, chars } => (index, RowState::Running(chars), true),
            ProgressEvent::Done {
                index,
                summary_chars,
            } => (index, RowState::Done(summary_chars), false),
            ProgressEvent::Skipped { index } => (index, RowState::Skipped, false),
        };
        let Some(row) = job_rows.get(index).and_then(|&r| rows.get_mut(r)) else {
            return;
        };
        row.state = state;
        let t = now_ms();
        if throttle && t - last_sent < STREAM_UPDATE_MS {
            return;
        }
        last_sent = t;
        host.ui(vec![widget(Some(widget_lines(&rows, t)))]);
    };
    let run = run_command_flush(host, flush, &mut on_progress).await;
    let Ok((notices, done)) = run else {
        return vec![
            widget(None),
            Effect::warning("pruner: nothing flushed — cancelled"),
        ];
    };
    let mut out = notice_effects(&notices);
    let last = match done.report.frontier() {
        Some(f) => now_text(f, min_batch),
        None => Effect::warning(format!(
            "pruner: nothing flushed — summarizer-failed{}",
            done.report
                .failure
                .as_ref()
                .map_or(String::new(), |f| format!(" ({f})"))
        )),
    };
    out.extend(done.effects);
    out.push(widget(None));
    out.push(last);
    out
}
