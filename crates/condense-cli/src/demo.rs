//! `condense demo`: what condense does to a session, in a few seconds.
//!
//! Generates a realistic unpruned pi session (`condense_gen`,
//! `Shape::Realistic`: several user prompts, file reads, build logs, a failed
//! `write` with a large argument, a re-read of an unchanged file, a skill
//! file under `skills/`, an oversized web page) into a temporary directory,
//! and compacts it offline with the extractive summarizer (the `compact`
//! command's own code, no LLM). The session is written task by task and
//! compacted after each task's final reply, with the default rolling window
//! of 3 chains, the way a live pi-condense flushes at the end of every agent
//! message (a single compaction of the whole file would find no duplicate:
//! dedup matches outputs indexed by an *earlier* flush). Then it reports the
//! context the model is sent before and after, and what each mechanism
//! reclaimed.
//!
//! A failed call shows in the error purge only while its chain is inside the
//! rolling window: compressing a chain indexes its unsummarized results, the
//! failed result is then stubbed (stubs are not errors), and the purge no
//! longer sees a failed call. Hence the default seed (see [`DemoArgs`]).
//!
//! The attribution renders the compacted session three times, switching the
//! render phases on in their pipeline order, and diffs the sizes:
//! 1. error purge and chain compression off: what the stub phase did,
//!    split per replaced tool result by what its record is (a spilled
//!    output, a content-hash duplicate, or a summarized output);
//! 2. error purge on: its saving;
//! 3. everything on (the real render): chain compression's saving.
//!
//! So each saving is measured after the phases before it, and
//! `before + summaries added - reclaimed = after` holds exactly, in chars.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use condense_core::Branch;
use condense_core::Config;
use condense_core::Protection;
use condense_core::{array_chars, chars_to_tokens, render, PlanStep, RenderSettings};
use condense_core::{Message, Role};
use condense_gen::{Shape, SynthOptions};
use serde_json::{json, Value};

use crate::compact::{CompactArgs, ProviderKind};
use crate::load::load;
use crate::stdout::write_all;
use crate::{CliError, SessionArg};

/// Options of `condense demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Tasks (user prompts) in the generated session.
    #[arg(long, default_value_t = 12)]
    pub tasks: usize,
    /// Seed of the generated session. The default, 2, makes one of the last
    /// three tasks a failed write, so it is still inside the rolling window
    /// (not folded into a compressed chain) and the error purge shows; with
    /// other seeds it may reclaim nothing.
    #[arg(long, default_value_t = 2)]
    pub seed: u64,
    /// Write the session (and its spilled outputs) into this directory and
    /// keep it, instead of a temporary directory removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,
}

/// The most tasks a demo generates: its session, compacted after each task,
/// is held whole in memory.
pub const MAX_TASKS: usize = 200;

/// The files a demo writes into its directory.
const DEMO_SESSION: &str = "demo-session.jsonl";
const DEMO_SETTINGS: &str = "settings.json";

/// Chars reclaimed by the stub phase, per kind of replaced result.
#[derive(Debug, Default)]
struct StubSplit {
    stub: (usize, i64),
    dedup: (usize, i64),
    spill: (usize, i64),
    /// Messages dropped or inserted (the orphan sweep): net chars saved.
    other: i64,
}

fn sizes_of(messages: &[Message], state: &Branch, config: &Config) -> (usize, Vec<Message>) {
    let protection = Protection::new(config);
    let settings = RenderSettings {
        config,
        protection: &protection,
    };
    let r = render(messages, state, &settings);
    let out = r.messages(messages);
    let chars = match &r.plan {
        Some(p) => p.after_chars,
        None => array_chars(messages.iter().map(Message::size)),
    };
    (chars, out)
}

/// Splits the stub phase's saving by what each replaced result's record is.
fn split_stub_phase(messages: &[Message], state: &Branch, config: &Config) -> StubSplit {
    let protection = Protection::new(config);
    let settings = RenderSettings {
        config,
        protection: &protection,
    };
    let r = render(messages, state, &settings);
    let mut split = StubSplit::default();
    let Some(plan) = r.plan else {
        return split;
    };
    let mut attributed = 0i64;
    let mut next = 0usize;
    for step in &plan.steps {
        match step {
            PlanStep::Keep(range) => next = range.end.max(next),
            PlanStep::New(m) => {
                let Some(original) = messages.get(next).filter(|o| {
                    o.is(&Role::ToolResult)
                        && o.skeleton().tool_call_id == m.skeleton().tool_call_id
                        && o.timestamp() == m.timestamp()
                }) else {
                    continue;
                };
                next += 1;
                let saved = original.size() as i64 - m.size() as i64;
                attributed += saved;
                let sk = original.skeleton();
                let id = sk.tool_call_id.as_deref().unwrap_or("");
                let bucket = if state
                    .record_for(id, sk.timestamp)
                    .is_some_and(|r| r.spill_path.is_some())
                {
                    &mut split.spill
                } else if state.dedup_original(id, sk.timestamp).is_some() {
                    &mut split.dedup
                } else {
                    &mut split.stub
                };
                bucket.0 += 1;
                bucket.1 += saved;
            }
        }
    }
    split.other = plan.before_chars as i64 - plan.after_chars as i64 - attributed;
    split
}

/// Tool results kept verbatim because their call is protected: count, chars.
fn protected_results(messages: &[Message], protection: &Protection) -> (usize, usize) {
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut found = (0, 0);
    for m in messages {
        if m.is(&Role::Assistant) && !m.skeleton().tool_calls.is_empty() {
            let v = m.to_value().unwrap_or_default();
            for b in v
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if b.get("type").and_then(Value::as_str) != Some("toolCall") {
                    continue;
                }
                let (Some(id), Some(name)) = (
                    b.get("id").and_then(Value::as_str),
                    b.get("name").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let args = ["arguments", "input", "args"]
                    .iter()
                    .find_map(|k| b.get(*k).filter(|a| !a.is_null()))
                    .cloned()
                    .unwrap_or(Value::Null);
                calls.insert(id.to_owned(), (name.to_owned(), args));
            }
        } else if m.is(&Role::ToolResult) {
            let id = m.skeleton().tool_call_id.as_deref().unwrap_or("");
            if let Some((name, args)) = calls.get(id) {
                if protection.is_protected(name, args) {
                    found.0 += 1;
                    found.1 += m.size();
                }
            }
        }
    }
    found
}

/// The compact reports of every task's flush, added up.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CompactTotals {
    compactions: usize,
    batches: usize,
    summarized_batches: usize,
    summarized_calls: usize,
    skipped_batches: usize,
    spilled_outputs: usize,
    dedup_aliases: usize,
    chains_compressed: usize,
    entries: usize,
}

impl CompactTotals {
    fn add(&mut self, r: crate::compact::CompactReport) {
        self.compactions += 1;
        self.batches += r.batches;
        self.summarized_batches += r.summarized_batches;
        self.summarized_calls += r.summarized_calls;
        self.skipped_batches += r.skipped_batches;
        self.spilled_outputs += r.spilled_outputs;
        self.dedup_aliases += r.dedup_aliases;
        self.chains_compressed += r.chains_compressed;
        self.entries += r.entries;
    }
}

/// Writes the session task by task, compacting after each task's final
/// reply as a live pi-condense flushes at the end of each agent message
/// (so a later re-read can be a duplicate of an output already indexed,
/// and dedup finds the outputs earlier flushes indexed).
fn grow_and_compact(
    path: &Path,
    jsonl: &str,
    session: &SessionArg,
) -> Result<CompactTotals, CliError> {
    use std::io::Write;
    let parsed = condense_store::session::Session::parse(jsonl);
    let lines: Vec<&str> = jsonl.lines().collect();
    // 0-based line indexes of the task replies (text-only assistants).
    let ends: Vec<usize> = parsed
        .entries
        .iter()
        .filter(|e| {
            e.message
                .as_ref()
                .is_some_and(Message::is_text_only_assistant)
        })
        .map(|e| e.line - 1)
        .collect();
    let io = |e: std::io::Error| CliError::Data(format!("{}: {e}", path.display()));
    let mut totals = CompactTotals::default();
    let mut written = 0usize;
    for (k, &end) in ends.iter().enumerate() {
        let mut chunk: Vec<String> = lines[written..=end]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
        if k > 0 {
            // Chain the task onto the entries the last compaction appended.
            let previous = parsed
                .entries
                .iter()
                .find(|e| e.line == written)
                .map(|e| e.id.clone());
            let leaf = condense_store::session::Session::open(path)
                .map_err(io)?
                .leaf()
                .map(|e| e.id.clone());
            if let (Some(previous), Some(leaf)) = (previous, leaf) {
                chunk[0] = chunk[0].replacen(
                    &format!("\"parentId\":\"{previous}\""),
                    &format!("\"parentId\":\"{leaf}\""),
                    1,
                );
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        file.write_all((chunk.join("\n") + "\n").as_bytes())
            .map_err(io)?;
        drop(file);
        written = end + 1;
        totals.add(crate::compact::compact(&CompactArgs {
            session: session.clone(),
            provider: ProviderKind::Extractive,
            model: None,
            base_url: None,
            api_key_env: None,
            window: Config::default().chain_compression.rolling_window,
            dry_run: false,
            force: true,
            json: false,
        })?);
    }
    Ok(totals)
}

fn mechanism(count: usize, chars: i64) -> Value {
    json!({ "count": count, "reclaimedChars": chars, "reclaimedTokens": chars_to_tokens(chars.max(0) as usize) })
}

/// Runs the demo in `dir` and returns its report.
fn run_in(dir: &Path, args: &DemoArgs) -> Result<Value, CliError> {
    let path = dir.join(DEMO_SESSION);
    let settings = dir.join(DEMO_SETTINGS);
    let opts = SynthOptions {
        seed: args.seed,
        tokens: None,
        shape: Shape::Realistic { tasks: args.tasks },
        pruned: false,
        ..SynthOptions::default()
    };
    let generated = condense_gen::generate_session(&opts);
    // The demo shows condense's defaults, whatever the user's settings say.
    std::fs::write(&settings, "{}\n")
        .map_err(|e| CliError::Data(format!("{}: {e}", settings.display())))?;
    let _ = std::fs::remove_file(&path);
    let session = SessionArg {
        session: Some(path.display().to_string()),
        latest: false,
        settings: Some(settings),
    };

    // The unpruned context, as the model would be sent it without condense.
    let original = condense_store::session::Session::parse(&generated.jsonl);
    let original: Vec<Message> = condense_store::context::branch_messages(&original.branch(None))
        .into_iter()
        .map(|m| m.message)
        .collect();
    let before = array_chars(original.iter().map(Message::size));
    let prompts = original.iter().filter(|m| m.is(&Role::User)).count();
    let tool_calls = original.iter().filter(|m| m.is(&Role::ToolResult)).count();
    let (protected, protected_chars) =
        protected_results(&original, &Protection::new(&Config::default()));
    drop(original);

    let compact = grow_and_compact(&path, &generated.jsonl, &session)?;

    let loaded = load(&session)?;
    let messages = &loaded.messages;
    let state = &loaded.state;
    let with_summaries = array_chars(messages.iter().map(Message::size));
    let summaries = messages.iter().filter(|m| m.is_summary_message()).count();

    let mut stubs_only = loaded.config.clone();
    stubs_only.chain_compression.enabled = false;
    stubs_only.purge_errors.enabled = false;
    let mut no_chains = loaded.config.clone();
    no_chains.chain_compression.enabled = false;
    let (r1, out1) = sizes_of(messages, state, &stubs_only);
    let (r2, out2) = sizes_of(messages, state, &no_chains);
    let (after, _) = sizes_of(messages, state, &loaded.config);
    let split = split_stub_phase(messages, state, &stubs_only);
    debug_assert_eq!(
        with_summaries as i64 - r1 as i64,
        split.stub.1 + split.dedup.1 + split.spill.1 + split.other
    );
    let purged = out1
        .iter()
        .zip(&out2)
        .filter(|(a, b)| a.is(&Role::Assistant) && a.size() != b.size())
        .count();
    let chains = state.chains().len();

    Ok(json!({
        "session": path.display().to_string(),
        "tasks": args.tasks,
        "seed": args.seed,
        "prompts": prompts,
        "toolCalls": tool_calls,
        "before": { "chars": before, "tokens": chars_to_tokens(before) },
        "after": { "chars": after, "tokens": chars_to_tokens(after) },
        "mechanisms": {
            "stubReplace": mechanism(split.stub.0, split.stub.1),
            "contentDedup": mechanism(split.dedup.0, split.dedup.1),
            "spill": mechanism(split.spill.0, split.spill.1),
            "errorPurge": mechanism(purged, r1 as i64 - r2 as i64),
            "chainCompression": mechanism(chains, r2 as i64 - after as i64),
            "other": mechanism(0, split.other),
        },
        "summariesAdded": {
            "count": summaries,
            "chars": with_summaries - before,
            "tokens": chars_to_tokens(with_summaries - before),
        },
        "protection": {
            "count": protected,
            "keptChars": protected_chars,
            "keptTokens": chars_to_tokens(protected_chars),
        },
        "state": {
            "toolCallsIndexed": state.indexed_count(),
            "summaries": state.summary_bodies().len(),
            "chainsCompressed": chains,
            "dedupAliases": compact.dedup_aliases,
            "spilledOutputs": compact.spilled_outputs,
        },
        "compact": compact,
    }))
}

fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).expect("ASCII digits"))
        .collect();
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{}", groups.join(","))
}

fn text(v: &Value, kept: bool) -> String {
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    let before = n(&v["before"]["chars"]);
    let after = n(&v["after"]["chars"]);
    let pct = if before > 0 {
        100.0 * (before - after) as f64 / before as f64
    } else {
        0.0
    };
    let mut out = format!(
        "condense demo: a generated pi session ({} user prompts, {} tool calls), compacted\noffline with the extractive summarizer (no LLM) and the default settings.\n\n",
        v["prompts"], v["toolCalls"]
    );
    out.push_str("context the model is sent:\n");
    out.push_str(&format!(
        "  before  {:>9} tokens  ({} chars)\n  after   {:>9} tokens  ({} chars, -{pct:.1}%)\n\n",
        format!("~{}", thousands(n(&v["before"]["tokens"]))),
        thousands(before),
        format!("~{}", thousands(n(&v["after"]["tokens"]))),
        thousands(after)
    ));
    out.push_str(
        "what each mechanism did (render phases in order, each measured after the ones above):\n",
    );
    out.push_str(&format!(
        "  {:<18} {:>5}  {:<38} {:>10} {:>9}\n",
        "mechanism", "count", "", "chars", "~tokens"
    ));
    let m = &v["mechanisms"];
    let mut row = |name: &str, count: &Value, what: &str, chars: i64| {
        let tokens = (chars as f64 / 4.0).round() as i64;
        out.push_str(&format!(
            "  {name:<18} {:>5}  {what:<38} {:>10} {:>9}\n",
            count.to_string(),
            if chars > 0 {
                format!("+{}", thousands(chars))
            } else {
                thousands(chars)
            },
            if tokens > 0 {
                format!("+{}", thousands(tokens))
            } else {
                thousands(tokens)
            }
        ));
    };
    for (key, name, what) in [
        (
            "stubReplace",
            "stub-replace",
            "summarized outputs shown as stubs",
        ),
        (
            "contentDedup",
            "content dedup",
            "identical re-reads: stub of the first",
        ),
        ("spill", "spill", "oversized outputs: file + preview"),
        (
            "errorPurge",
            "error purge",
            "failed calls' argument bodies purged",
        ),
        (
            "chainCompression",
            "chain compression",
            "finished chains folded into one message",
        ),
    ] {
        row(name, &m[key]["count"], what, -n(&m[key]["reclaimedChars"]));
    }
    if n(&m["other"]["reclaimedChars"]) != 0 {
        row(
            "orphan sweep",
            &json!("-"),
            "tool results without their call",
            -n(&m["other"]["reclaimedChars"]),
        );
    }
    let s = &v["summariesAdded"];
    row(
        "summaries added",
        &s["count"],
        "per-batch summaries the stubs point to",
        n(&s["chars"]),
    );
    let p = &v["protection"];
    out.push_str(&format!(
        "  {:<18} {:>5}  {:<38} {:>10} {:>9}\n",
        "protection",
        p["count"].to_string(),
        "skill files kept verbatim (not counted)",
        thousands(n(&p["keptChars"])),
        thousands(n(&p["keptTokens"]))
    ));
    let st = &v["state"];
    out.push_str(&format!(
        "\nstate: {} tool calls indexed, {} summaries, {} chains compressed, {} duplicate(s), {} output(s) spilled\n",
        st["toolCallsIndexed"], st["summaries"], st["chainsCompressed"], st["dedupAliases"], st["spilledOutputs"]
    ));
    let session = v["session"].as_str().unwrap_or("");
    if kept {
        let dir = Path::new(session)
            .parent()
            .map_or_else(String::new, |d| d.display().to_string());
        out.push_str(&format!(
            "\nthe session is kept; look at it with:\n  condense render --diff --settings {dir}/settings.json {session}\n  condense tree {session}\n  condense query {session} t1\n"
        ));
    } else {
        out.push_str(
            "\n(pass --dir DIR to keep the session and look at it with render/query/tree)\n",
        );
    }
    out
}

/// A fresh temporary directory for one run.
fn temp_dir() -> Result<PathBuf, CliError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir =
        std::env::temp_dir().join(format!("condense-demo-{}-{nanos:08x}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Data(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// `condense demo`.
pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    if !(1..=MAX_TASKS).contains(&args.tasks) {
        return Err(CliError::Usage(format!(
            "--tasks must be from 1 to {MAX_TASKS}"
        )));
    }
    let (dir, keep) = match &args.dir {
        Some(d) => {
            // A directory of the user's (pi's agent directory, say) keeps
            // its files: the demo writes its own beside them or not at all.
            if let Some(there) = [DEMO_SESSION, DEMO_SETTINGS]
                .iter()
                .find(|name| std::fs::symlink_metadata(d.join(name)).is_ok())
            {
                return Err(CliError::Usage(format!(
                    "--dir {}: it holds a {there} already, which the demo would replace; name a new or empty directory",
                    d.display()
                )));
            }
            std::fs::create_dir_all(d)
                .map_err(|e| CliError::Data(format!("{}: {e}", d.display())))?;
            (d.clone(), true)
        }
        None => (temp_dir()?, false),
    };
    let result = run_in(&dir, args);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut v = result?;
    if !keep {
        v["session"] = Value::Null;
    }
    if args.json {
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).expect("json")
        ));
    }
    write_all(&text(&v, keep))
}
