//! `condense corpus DIR`: figures over every pi session under a directory.
//!
//! Every `*.jsonl` file below `DIR` (recursively; symlinked directories are
//! not followed) is read on all cores, and each session's branch is measured
//! the way the rest of the CLI sees it: its messages, its condense state
//! folded from the branch, the settings' config. A file that cannot be read
//! is counted and named; it never stops the scan.
//!
//! The figures are the ones the pi-condense specs were argued from
//! (recovery grace window, 2026-07-06; single-chain observability,
//! 2026-08-12): how much condense reclaims per session, how far apart the
//! model re-queries the same ref with `context_tree_query` (in user-turn
//! groups), how long sessions are in user-turn groups, and the context
//! metrics. Distributions use the nearest-rank percentile: the `p`-th
//! percentile of `n` sorted values is the value at rank `ceil(p/100 · n)`
//! (the median is `p50`, the lower middle value for an even `n`).
//! `--json` prints the same report as one object (fields in docs/cli.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use condense_core::Branch;
use condense_core::Config;
use condense_core::Protection;
use condense_core::QUERY_TOOL_NAME;
use condense_core::{array_chars, chars_to_tokens, render, RenderSettings};
use condense_core::{compute_context_metrics, ContextMetrics};
use condense_core::{Message, Role};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::files::{session_files, NOT_A_SESSION};
use crate::jobs::{percentile, worker_threads};
use crate::stdout::write_all;
use crate::{CliError, SessionArg};

/// Options of `condense corpus`.
#[derive(clap::Args, Debug, Clone)]
pub struct CorpusArgs {
    /// The directory to scan (every `*.jsonl` below it is a session).
    pub dir: PathBuf,
    /// Read settings (contextPrune) from this settings.json instead of the
    /// agent directory's.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,
}

/// What one readable session contributes.
#[derive(Debug, Default)]
struct Figures {
    /// Reader and replay problems, as text (empty: read cleanly).
    problems: Vec<String>,
    /// Any `context-prune-*` entry in the file.
    condense_active: bool,
    /// Tool results on the branch.
    tool_results: u64,
    /// Their text (UTF-16 units, text blocks joined by `\n`).
    tool_output_chars: u64,
    /// Branch messages.
    messages: usize,
    /// Render sizes (`JSON.stringify` of the message array).
    before_chars: usize,
    after_chars: usize,
    /// User messages on the branch (user-turn groups).
    user_turn_groups: u64,
    /// `context_tree_query` calls, and those naming no id.
    ctq_calls: u64,
    ctq_empty_calls: u64,
    /// Re-query gaps, in user-turn groups.
    requery_gaps: Vec<u64>,
    metrics: ContextMetrics,
}

/// One file's outcome.
#[derive(Debug)]
enum Outcome {
    Read(Figures),
    Unreadable(String),
}

/// The distinct, non-empty ids a `context_tree_query` call asks for.
fn queried_ids(args: &Value) -> Vec<String> {
    let mut ids: Vec<String> = args
        .get("toolCallIds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The `context_tree_query` calls of an assistant message: each call's ids.
fn ctq_calls(m: &Message) -> Vec<Vec<String>> {
    let v = m.to_value().unwrap_or_default();
    v.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            b.get("type").and_then(Value::as_str) == Some("toolCall")
                && b.get("name").and_then(Value::as_str) == Some(QUERY_TOOL_NAME)
        })
        .map(|b| {
            let args = ["arguments", "input", "args"]
                .iter()
                .find_map(|k| b.get(*k).filter(|a| !a.is_null()))
                .cloned()
                .unwrap_or(Value::Null);
            queried_ids(&args)
        })
        .collect()
}

/// Walks the branch: user-turn groups, tool output and re-query gaps.
fn walk(messages: &[Message], state: &Branch, f: &mut Figures) {
    let mut utg = 0u64;
    // The user-turn group each ref (resolved to its occurrence when the
    // index knows it) was last asked for in.
    let mut last_asked: HashMap<String, u64> = HashMap::new();
    for m in messages {
        let sk = m.skeleton();
        match sk.role {
            Some(Role::User) => utg += 1,
            Some(Role::ToolResult) => {
                f.tool_results += 1;
                let text = m.result_text();
                f.tool_output_chars += condense_core::js_len(&text) as u64;
            }
            Some(Role::Assistant) if sk.tool_calls.iter().any(|c| c.name == QUERY_TOOL_NAME) => {
                for ids in ctq_calls(m) {
                    f.ctq_calls += 1;
                    if ids.is_empty() {
                        f.ctq_empty_calls += 1;
                    }
                    let mut keys: Vec<String> = ids
                        .iter()
                        .map(|id| {
                            state
                                .resolve(id)
                                .map_or_else(|| id.clone(), |k| k.to_string())
                        })
                        .collect();
                    keys.sort();
                    keys.dedup();
                    for key in keys {
                        if let Some(prev) = last_asked.insert(key, utg) {
                            f.requery_gaps.push(utg - prev);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    f.user_turn_groups = utg;
}

/// Reads and measures one session.
fn analyze(path: &Path, config: &Config, protection: &Protection) -> Outcome {
    let session = match condense_store::session::Session::open(path) {
        Ok(s) => s,
        Err(e) => return Outcome::Unreadable(e.to_string()),
    };
    // Another tool's `*.jsonl` beside the sessions is not a session of
    // length zero.
    if session.header.is_none() && session.entries.is_empty() {
        return Outcome::Unreadable(NOT_A_SESSION.into());
    }
    let mut f = Figures {
        problems: session.problems.iter().map(ToString::to_string).collect(),
        condense_active: session.entries.iter().any(|e| {
            e.custom_type
                .as_deref()
                .is_some_and(|c| c.starts_with("context-prune-"))
        }),
        ..Figures::default()
    };
    let branch = session.branch(None);
    let context = condense_store::context::build_context(&branch);
    let messages: Vec<Message> = context.messages;
    let (state, problems) = condense_store::replay::replay_branch(&branch);
    f.problems.extend(
        problems
            .iter()
            .map(|p| format!("skipped {} entry: {}", p.custom_type, p.message)),
    );
    f.messages = messages.len();
    let settings = RenderSettings { config, protection };
    let r = render(&messages, &state, &settings);
    (f.before_chars, f.after_chars) = match &r.plan {
        Some(p) => (p.before_chars, p.after_chars),
        None => {
            let n = array_chars(messages.iter().map(Message::size));
            (n, n)
        }
    };
    drop(r);
    walk(&messages, &state, &mut f);
    f.metrics = compute_context_metrics(
        &messages,
        context.turns_before,
        state.frontier(),
        &state,
        protection,
    );
    Outcome::Read(f)
}

fn share(count: usize, of: usize) -> Value {
    if of == 0 {
        Value::Null
    } else {
        json!(count as f64 / of as f64)
    }
}

fn reclaim_block(figs: &[&Figures]) -> Value {
    let mut ratios: Vec<f64> = figs
        .iter()
        .filter(|f| f.messages > 0 && f.before_chars > 0)
        .map(|f| f.after_chars as f64 / f.before_chars as f64)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let before: usize = figs.iter().map(|f| f.before_chars).sum();
    let after: usize = figs.iter().map(|f| f.after_chars).sum();
    json!({
        "sessions": ratios.len(),
        "beforeChars": before,
        "afterChars": after,
        "beforeTokens": chars_to_tokens(before),
        "afterTokens": chars_to_tokens(after),
        "ratio": {
            "min": percentile(&ratios, 0),
            "p25": percentile(&ratios, 25),
            "median": percentile(&ratios, 50),
            "p75": percentile(&ratios, 75),
            "max": percentile(&ratios, 100),
        },
    })
}

fn length_block(figs: &[&Figures]) -> Value {
    let mut lens: Vec<u64> = figs.iter().map(|f| f.user_turn_groups).collect();
    lens.sort_unstable();
    json!({
        "sessions": lens.len(),
        "median": percentile(&lens, 50),
        "le3Share": share(lens.iter().filter(|&&n| n <= 3).count(), lens.len()),
    })
}

fn metric_block(mut values: Vec<u64>) -> Value {
    values.sort_unstable();
    json!({
        "median": percentile(&values, 50),
        "p90": percentile(&values, 90),
        "max": percentile(&values, 100),
    })
}

/// Builds the report from each file's outcome (in path order).
fn report(dir: &Path, outcomes: &[(PathBuf, Outcome)]) -> Value {
    let read: Vec<&Figures> = outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Read(f) => Some(f),
            Outcome::Unreadable(_) => None,
        })
        .collect();
    let active: Vec<&Figures> = read.iter().copied().filter(|f| f.condense_active).collect();
    let problems: Vec<Value> = outcomes
        .iter()
        .filter_map(|(p, o)| match o {
            Outcome::Unreadable(e) => Some(json!({
                "path": p.display().to_string(),
                "unreadable": true,
                "count": 1,
                "first": e,
            })),
            Outcome::Read(f) if !f.problems.is_empty() => Some(json!({
                "path": p.display().to_string(),
                "unreadable": false,
                "count": f.problems.len(),
                "first": f.problems[0],
            })),
            Outcome::Read(_) => None,
        })
        .collect();
    let with_problems = read.iter().filter(|f| !f.problems.is_empty()).count();

    let mut gaps: Vec<u64> = read
        .iter()
        .flat_map(|f| f.requery_gaps.iter().copied())
        .collect();
    gaps.sort_unstable();
    let le = |k: u64| share(gaps.iter().filter(|&&g| g <= k).count(), gaps.len());
    let tool_output_chars: u64 = read.iter().map(|f| f.tool_output_chars).sum();

    json!({
        "dir": dir.display().to_string(),
        "sessions": {
            "found": outcomes.len(),
            "readOk": read.len() - with_problems,
            "withProblems": with_problems,
            "unreadable": outcomes.len() - read.len(),
            "condenseActive": active.len(),
        },
        "toolOutput": {
            "results": read.iter().map(|f| f.tool_results).sum::<u64>(),
            "chars": tool_output_chars,
            "tokens": chars_to_tokens(tool_output_chars as usize),
        },
        "reclaim": {
            "all": reclaim_block(&read),
            "condenseActive": reclaim_block(&active),
        },
        "requery": {
            "ctqSessions": read.iter().filter(|f| f.ctq_calls > 0).count(),
            "ctqCalls": read.iter().map(|f| f.ctq_calls).sum::<u64>(),
            "emptyCalls": read.iter().map(|f| f.ctq_empty_calls).sum::<u64>(),
            "sessionsWithRequery": read.iter().filter(|f| !f.requery_gaps.is_empty()).count(),
            "events": gaps.len(),
            "gapMedian": percentile(&gaps, 50),
            "gapLe1Share": le(1),
            "gapLe2Share": le(2),
            "gapLe3Share": le(3),
            "gapLe5Share": le(5),
            "gapEq0": gaps.iter().filter(|&&g| g == 0).count(),
        },
        "sessionLength": {
            "all": length_block(&read),
            "condenseActive": length_block(&active),
        },
        "metrics": {
            "largestChainSharePct": metric_block(read.iter().map(|f| f.metrics.largest_chain_share_pct).collect()),
            "openCycleThinkingTokens": metric_block(read.iter().map(|f| f.metrics.open_cycle_thinking_tokens).collect()),
            "frontierGapTokens": metric_block(read.iter().map(|f| f.metrics.frontier_gap_tokens).collect()),
        },
        "problems": problems,
    })
}

fn pct(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_owned(), |x| format!("{:.1}%", 100.0 * x))
}

fn num(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

/// The readable form of the report.
fn text(v: &Value) -> String {
    let s = &v["sessions"];
    let found = s["found"].as_u64().unwrap_or(0);
    let mut out = format!(
        "corpus: {}\nsessions: {found} ({} read ok, {} with problems, {} unreadable)\n",
        v["dir"].as_str().unwrap_or(""),
        s["readOk"],
        s["withProblems"],
        s["unreadable"]
    );
    let read = found - s["unreadable"].as_u64().unwrap_or(0);
    out.push_str(&format!(
        "condense active: {} of {read}\n",
        s["condenseActive"]
    ));
    let t = &v["toolOutput"];
    out.push_str(&format!(
        "tool output: {} results, {} chars (~{} tokens)\n",
        t["results"], t["chars"], t["tokens"]
    ));
    out.push_str("reclaim, rendered after / before per session (min p25 median p75 max):\n");
    for (label, key) in [("all", "all"), ("condense active", "condenseActive")] {
        let b = &v["reclaim"][key];
        let r = &b["ratio"];
        out.push_str(&format!(
            "  {label:<16} {:>6} sessions  {} {} {} {} {}  ~{} -> ~{} tokens\n",
            b["sessions"],
            num(&r["min"]),
            num(&r["p25"]),
            num(&r["median"]),
            num(&r["p75"]),
            num(&r["max"]),
            b["beforeTokens"],
            b["afterTokens"]
        ));
    }
    let q = &v["requery"];
    out.push_str(&format!(
        "context_tree_query: {} calls in {} sessions ({} naming no id)\n",
        q["ctqCalls"], q["ctqSessions"], q["emptyCalls"]
    ));
    out.push_str(&format!(
        "  re-queries of the same ref: {} in {} sessions\n  gap in user-turn groups: median {}  <=1 {}  <=2 {}  <=3 {}  <=5 {}  ==0: {}\n",
        q["events"],
        q["sessionsWithRequery"],
        num(&q["gapMedian"]),
        pct(&q["gapLe1Share"]),
        pct(&q["gapLe2Share"]),
        pct(&q["gapLe3Share"]),
        pct(&q["gapLe5Share"]),
        q["gapEq0"]
    ));
    out.push_str("session length (user-turn groups):\n");
    for (label, key) in [("all", "all"), ("condense active", "condenseActive")] {
        let b = &v["sessionLength"][key];
        out.push_str(&format!(
            "  {label:<16} {:>6} sessions  median {}  <=3: {}\n",
            b["sessions"],
            num(&b["median"]),
            pct(&b["le3Share"])
        ));
    }
    out.push_str("context metrics (per session):\n");
    for (label, key) in [
        ("largest-chain share %", "largestChainSharePct"),
        ("open-cycle thinking tokens", "openCycleThinkingTokens"),
        ("frontier gap tokens", "frontierGapTokens"),
    ] {
        let m = &v["metrics"][key];
        out.push_str(&format!(
            "  {label:<27} median {}  p90 {}  max {}\n",
            num(&m["median"]),
            num(&m["p90"]),
            num(&m["max"])
        ));
    }
    let problems = v["problems"].as_array().map_or(&[][..], Vec::as_slice);
    if !problems.is_empty() {
        out.push_str("problems:\n");
        for p in problems {
            let what = if p["unreadable"] == true {
                format!("unreadable: {}", p["first"].as_str().unwrap_or(""))
            } else {
                format!(
                    "{} problem(s), first: {}",
                    p["count"],
                    p["first"].as_str().unwrap_or("")
                )
            };
            out.push_str(&format!("  {}: {what}\n", p["path"].as_str().unwrap_or("")));
        }
    }
    out
}

/// Scans the directory and builds the report.
pub fn scan(args: &CorpusArgs) -> Result<Value, CliError> {
    let meta = std::fs::metadata(&args.dir)
        .map_err(|e| CliError::Data(format!("{}: {e}", args.dir.display())))?;
    if !meta.is_dir() {
        return Err(CliError::Data(format!(
            "{}: not a directory",
            args.dir.display()
        )));
    }
    if args.jobs == Some(0) {
        return Err(CliError::Usage("--jobs must be at least 1".into()));
    }
    let config = crate::load::load_config(&SessionArg {
        session: None,
        latest: false,
        settings: args.settings.clone(),
    })?;
    let protection = crate::load::protection(&config);
    let files = session_files(&args.dir);
    let progress = crate::progress::bar(files.len() as u64, "reading sessions");
    let work = || -> Vec<(PathBuf, Outcome)> {
        files
            .par_iter()
            .map(|path| {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    analyze(path, &config, &protection)
                }))
                .unwrap_or_else(|_| Outcome::Unreadable("internal error while reading".into()));
                progress.inc(1);
                (path.clone(), outcome)
            })
            .collect()
    };
    let outcomes = match args.jobs {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(worker_threads(n, files.len()))
            .build()
            .map_err(|e| CliError::Data(format!("starting {n} worker threads: {e}")))?
            .install(work),
        None => work(),
    };
    progress.finish_and_clear();
    Ok(report(&args.dir, &outcomes))
}

/// `condense corpus`.
pub fn run(args: &CorpusArgs) -> Result<(), CliError> {
    let v = scan(args)?;
    if args.json {
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).expect("json")
        ));
    }
    write_all(&text(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let xs = [0u64, 1, 2, 3, 6];
        assert_eq!(percentile(&xs, 0), Some(0));
        assert_eq!(percentile(&xs, 25), Some(1));
        assert_eq!(percentile(&xs, 50), Some(2));
        assert_eq!(percentile(&xs, 90), Some(6));
        assert_eq!(percentile(&xs, 100), Some(6));
        assert_eq!(percentile(&[4u64, 9], 50), Some(4));
        assert_eq!(percentile::<u64>(&[], 50), None);
    }

    #[test]
    fn query_ids_are_deduplicated_and_empty_ones_dropped() {
        let args = json!({"toolCallIds": ["t2", "t1", "t2", ""]});
        assert_eq!(queried_ids(&args), vec!["t1".to_owned(), "t2".to_owned()]);
        assert!(queried_ids(&json!({})).is_empty());
    }
}
