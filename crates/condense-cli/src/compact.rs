//! `condense compact`: a real flush of a session's pending work, offline.
//!
//! The same pipeline a live pi-condense runs, on the session file:
//! oversized outputs spill to blob files, pending batches are deduplicated,
//! skipped or summarized with the chosen provider, then eligible chains are
//! compressed (every closed chain by default: `--window` keeps the last K raw).
//! The entries are appended the way pi appends them, under the store's
//! advisory lock, and only after every decision is made: a failed run
//! writes nothing.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use condense_core::capture_pending;
use condense_core::Branch;
use condense_core::ModelRef;
use condense_core::OccurrenceKey;
use condense_core::{array_chars, chars_to_tokens, render, RenderSettings};
use condense_core::{FlushEffect, JobResult, Notice, NoticeLevel, WrittenSpill};
use condense_engine::flush::{spill_batch, BlobDir};
use condense_engine::{run_flush, Blobs, ChainPolicy, Chains, Flush, FlushReport, FlushSteps};
use condense_store::append::{Appender, LockMode};
use condense_summarizer::{
    Anthropic, AnthropicConfig, ApiKey, CancelToken, Extractive, OpenAiCompatible, OpenAiConfig,
    Provider, RunOptions, Summarizer, SummarizerSettings, Target,
};

use crate::load::{load, load_at, load_config, rebuild, resolve, Loaded};
use crate::stdout::write_all;
use crate::{CliError, SessionArg};

/// Which summarizer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderKind {
    /// No LLM: deterministic bullets from the raw outputs.
    Extractive,
    /// An OpenAI-compatible chat completions endpoint.
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
}

/// `compact` options.
#[derive(Debug, Clone, clap::Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub session: SessionArg,
    /// The summarizer.
    #[arg(long, value_enum, default_value = "extractive")]
    pub provider: ProviderKind,
    /// Model id for an LLM provider.
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of the LLM API (default: the provider's public endpoint).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Closed chains to keep uncompressed (the rolling window); 0 compresses all.
    #[arg(long, default_value_t = 0)]
    pub window: u32,
    /// Show what would happen; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Compact even if another process has the session open.
    #[arg(long)]
    pub force: bool,
    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,
}

fn provider(args: &CompactArgs) -> Result<(Arc<dyn Provider>, ModelRef), CliError> {
    Ok(match args.provider {
        ProviderKind::Extractive => (
            Arc::new(Extractive::new()),
            ModelRef::new("condense", "extractive"),
        ),
        ProviderKind::Openai => {
            let mut c = OpenAiConfig::default();
            if let Some(u) = &args.base_url {
                c.base_url = u.clone();
            }
            if let Some(e) = &args.api_key_env {
                c.api_key = ApiKey::Env(e.clone());
            }
            let model = args
                .model
                .clone()
                .ok_or_else(|| CliError::Usage("--provider openai needs --model".into()))?;
            (
                Arc::new(OpenAiCompatible::new(c)),
                ModelRef::new("openai", model),
            )
        }
        ProviderKind::Anthropic => {
            let mut c = AnthropicConfig::default();
            if let Some(u) = &args.base_url {
                c.base_url = u.clone();
            }
            if let Some(e) = &args.api_key_env {
                c.api_key = ApiKey::Env(e.clone());
            }
            let model = args
                .model
                .clone()
                .ok_or_else(|| CliError::Usage("--provider anthropic needs --model".into()))?;
            (
                Arc::new(Anthropic::new(c)),
                ModelRef::new("anthropic", model),
            )
        }
    })
}

/// Every other process's pid and `/proc/<pid>` directory (`None` without
/// a readable `/proc`).
fn other_processes() -> Option<impl Iterator<Item = (u32, std::path::PathBuf)>> {
    let me = std::process::id();
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(entries.flatten().filter_map(move |entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        (pid != me).then(|| (pid, entry.path()))
    }))
}

/// Another process that has `path` open (Linux: any `/proc/<pid>/fd` link
/// to it): the condense sidecar of a running pi keeps its session open, and
/// so does any other reader or writer.
pub fn held_by_other_process(path: &Path) -> Option<u32> {
    let target = path.canonicalize().ok()?;
    for (pid, proc_dir) in other_processes()? {
        let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l == target) {
                return Some(pid);
            }
        }
    }
    None
}

/// A running pi whose working directory is `cwd` (the session header's):
/// a process whose command line names pi (an argument whose file name is
/// `pi`, or that lies in a `pi-coding-agent` package) with that cwd. pi
/// keeps no descriptor open and takes no lock, so without condense's sidecar
/// this is the only trace of it; it may be running another session of the
/// same directory, which is refused all the same (`--force` overrides).
pub fn pi_running_in(cwd: &Path) -> Option<u32> {
    let want = cwd.canonicalize().ok()?;
    for (pid, proc_dir) in other_processes()? {
        if std::fs::read_link(proc_dir.join("cwd")).ok() != Some(want.clone()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
            continue;
        };
        let names_pi = cmdline.split(|&b| b == 0).any(|arg| {
            let arg = String::from_utf8_lossy(arg);
            let path = Path::new(arg.as_ref());
            path.file_name().is_some_and(|n| n == "pi") || arg.contains("pi-coding-agent")
        });
        if names_pi {
            return Some(pid);
        }
    }
    None
}

/// Refuses a session another process has open (`--force` overrides).
fn refuse_if_open(path: &Path) -> Result<(), CliError> {
    match held_by_other_process(path) {
        Some(pid) => Err(CliError::Data(format!(
            "{}: open in process {pid} (a running pi's condense sidecar?); close it or pass --force",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// Refuses a session whose directory a running pi works in (`--force`
/// overrides).
fn refuse_if_pi_runs_there(
    path: &Path,
    session: &condense_store::session::Session,
) -> Result<(), CliError> {
    let Some(cwd) = session.header.as_ref().map(|h| h.cwd.as_str()) else {
        return Ok(());
    };
    if cwd.is_empty() {
        return Ok(());
    }
    match pi_running_in(Path::new(cwd)) {
        Some(pid) => Err(CliError::Data(format!(
            "{}: pi (process {pid}) is running in the session's directory {cwd}; close it or pass --force",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// What a compaction did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactReport {
    pub batches: usize,
    pub summarized_batches: usize,
    pub summarized_calls: usize,
    pub skipped_batches: usize,
    pub spilled_outputs: usize,
    pub dedup_aliases: usize,
    pub chains_compressed: usize,
    pub entries: usize,
    pub before_tokens: u64,
    pub after_tokens: u64,
    pub outcome: String,
    pub notices: Vec<String>,
    pub written: bool,
}

fn rendered_tokens(loaded: &Loaded, state: &condense_core::Branch) -> u64 {
    let settings = RenderSettings {
        config: &loaded.config,
        protection: &loaded.protection,
    };
    let r = render(&loaded.messages, state, &settings);
    chars_to_tokens(match r.plan {
        Some(p) => p.after_chars,
        None => array_chars(loaded.messages.iter().map(|m| m.size())),
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Finds the session, refuses it if a running pi may hold it, takes the
/// store's lock and only then reads it, so every decision is made on the file
/// as it is under the lock (a compact that ran meanwhile is seen, not
/// repeated). A dry run takes no lock.
fn load_locked(args: &CompactArgs) -> Result<(Loaded, Option<Appender>), CliError> {
    let config = load_config(&args.session)?;
    let path = resolve(&args.session)?;
    if args.dry_run {
        return Ok((load_at(path, config)?, None));
    }
    if !args.force {
        refuse_if_open(&path)?;
    }
    let (appender, session) = Appender::open_reading(&path, LockMode::Try)
        .map_err(|e| CliError::Data(format!("{}: {e}", path.display())))?;
    if !args.force {
        refuse_if_pi_runs_there(&path, &session)?;
    }
    let loaded = rebuild(path, &session, config);
    Ok((loaded, Some(appender)))
}

/// Runs the compaction; returns the report (entries appended unless dry run).
pub fn compact(args: &CompactArgs) -> Result<CompactReport, CliError> {
    let (loaded, appender) = load_locked(args)?;
    let path: PathBuf = loaded.path.clone();
    let (provider, model) = provider(args)?;
    let mut report = CompactReport {
        before_tokens: rendered_tokens(&loaded, &loaded.state),
        ..CompactReport::default()
    };
    let now = now_ms();
    let mut state = loaded.state.clone();
    let config = loaded.config.clone();
    let mut effects: Vec<FlushEffect> = Vec::new();
    let mut notices: Vec<Notice> = Vec::new();
    let mut blobs: Box<dyn Blobs> = if args.dry_run {
        Box::new(DryRun)
    } else {
        Box::new(BlobDir(Some(&loaded.blob_dir)))
    };

    // Eager spill of oversized pending outputs (blob first, record after).
    let batches = capture_pending(
        &loaded.messages,
        &[],
        loaded.turns_before,
        &state,
        &loaded.protection,
        config.batching_mode,
        now,
    );
    let mut kept = Vec::new();
    for batch in batches {
        let spilled = spill_batch(batch, &mut state, &config, blobs.as_mut());
        report.spilled_outputs += spilled.spilled;
        report.dedup_aliases += spilled.aliases;
        effects.extend(spilled.effects);
        notices.extend(spilled.failures.into_iter().map(|text| Notice {
            level: NoticeLevel::Warning,
            text,
        }));
        let rest = spilled.rest;
        if !rest.calls.is_empty() {
            kept.push(rest);
        }
    }
    report.batches = kept.len();

    // The flush, through the one driver (K = --window; pi-condense's
    // /pruner compact uses 0).
    let flush = Flush::plan(
        kept,
        &state,
        &config,
        ChainPolicy::Always(args.window),
        None,
        Default::default(),
        None,
    );
    report.dedup_aliases += flush.aliases();
    let summarizer = Summarizer::new(
        Target::new(provider, model),
        SummarizerSettings::from_config(&config),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Data(format!("starting the async runtime: {e}")))?;
    let cancel = CancelToken::new();
    let progress = crate::progress::bar(flush.jobs().len() as u64, "summarizing");
    let steps = Offline {
        state: RefCell::new(state),
        config: &config,
        loaded: &loaded,
        blobs: RefCell::new(blobs),
    };
    let run = runtime.block_on(run_flush(
        &steps,
        flush,
        &summarizer,
        RunOptions::default(),
        &cancel,
        &mut |e| {
            if let condense_summarizer::ProgressEvent::Done { .. }
            | condense_summarizer::ProgressEvent::Skipped { .. } = e
            {
                progress.inc(1);
            }
        },
        &move || now,
    ));
    progress.finish_and_clear();
    let Ok((run_notices, flushed)) = run else {
        return Err(CliError::Data(
            "compaction cancelled; nothing written".into(),
        ));
    };
    let mut state = steps.state.into_inner();
    notices.extend(run_notices);
    report.summarized_batches = flushed.summarized_batches;
    report.summarized_calls = flushed.summarized_calls;
    report.skipped_batches = flushed.processed - flushed.summarized_batches;
    report.outcome = flushed.outcome.clone();
    report.chains_compressed = flushed.compressed.len();
    effects.extend(flushed.effects().cloned());
    notices.extend(flushed.flush_notices);
    notices.extend(flushed.chain_notices);

    // A branch condense gated (it holds a switch entry) would keep what the
    // user compacted pending until the next switch: shown at once, as
    // `/pruner compact` shows it live.
    let shown = (config.economy.policy.gates_on_switch()
        && state.switch_count() > 0
        && state.pending_count() > 0)
        .then(|| {
            state.record_switch(loaded.messages.len());
            condense_store::entries::SwitchEntryData::undecided(
                condense_core::SwitchReason::User,
                loaded.messages.len(),
                Some(now),
            )
        });
    report.entries = effects.len() + usize::from(shown.is_some());
    report.after_tokens = rendered_tokens(&loaded, &state);
    report.notices = notices.iter().map(|n| n.text.clone()).collect();
    if let Some(mut appender) = appender {
        if !effects.is_empty() {
            condense_store::effects::append_effects(&mut appender, &effects, now)
                .map_err(|e| CliError::Data(format!("{}: appending: {e}", path.display())))?;
            report.written = true;
        }
        if let Some(switch) = shown {
            appender
                .append_custom(condense_store::entries::CUSTOM_TYPE_SWITCH, &switch, now)
                .map_err(|e| CliError::Data(format!("{}: appending: {e}", path.display())))?;
            report.written = true;
        }
    }
    Ok(report)
}

/// The session's state while the driver runs: no lock (one thread), the
/// steps borrow it in turn.
struct Offline<'a> {
    state: RefCell<Branch>,
    config: &'a condense_core::Config,
    loaded: &'a Loaded,
    blobs: RefCell<Box<dyn Blobs + 'a>>,
}

impl FlushSteps for Offline<'_> {
    type Done = FlushReport;

    fn apply_summaries(&self, flush: Flush, results: Vec<JobResult>) -> Chains {
        let mut state = self.state.borrow_mut();
        flush.apply(results, &mut state, self.config).plan_chains(
            &self.loaded.messages,
            &state,
            self.config,
            &self.loaded.protection,
        )
    }

    fn apply_chains(&self, chains: Chains, fusion: Vec<JobResult>, now: i64) -> FlushReport {
        let mut state = self.state.borrow_mut();
        let mut blobs = self.blobs.borrow_mut();
        chains.apply(fusion, blobs.as_mut(), &mut state, self.config, now)
    }

    fn abandon(&self) {}
}

/// A dry run's blobs: counted, not written.
struct DryRun;

impl Blobs for DryRun {
    fn write(
        &mut self,
        _key: &OccurrenceKey,
        text: &str,
        call: usize,
    ) -> Result<WrittenSpill, String> {
        Ok(WrittenSpill {
            call,
            path: "(dry run)".into(),
            bytes: text.len() as u64,
        })
    }
}

/// `condense compact`: runs and prints the report.
pub fn run(args: &CompactArgs) -> Result<(), CliError> {
    let mut report = compact(args)?;
    if report.written {
        // Measure what the model now sees, summary messages included.
        let reloaded = load(&args.session)?;
        report.after_tokens = rendered_tokens(&reloaded, &reloaded.state);
    }
    if args.json {
        return write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report).expect("json")
        ));
    }
    let mut out = String::new();
    let verb = if args.dry_run {
        "would append"
    } else {
        "appended"
    };
    out.push_str(&format!(
        "compact: {} pending batch(es): {} summarized ({} tool calls), {} skipped; {} output(s) spilled; {} duplicate(s); {} chain(s) compressed\n",
        report.batches, report.summarized_batches, report.summarized_calls, report.skipped_batches,
        report.spilled_outputs, report.dedup_aliases, report.chains_compressed
    ));
    out.push_str(&format!(
        "context: ~{} -> ~{} tokens\n",
        report.before_tokens, report.after_tokens
    ));
    out.push_str(&format!(
        "{verb} {} entr{}\n",
        report.entries,
        if report.entries == 1 { "y" } else { "ies" }
    ));
    for n in &report.notices {
        out.push_str(&format!("  {n}\n"));
    }
    write_all(&out)
}
