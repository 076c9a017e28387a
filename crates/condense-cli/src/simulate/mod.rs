//! `condense simulate SESSION|DIR`: replays recorded sessions call by call
//! under each pruning policy and prices every call (issue 12).
//!
//! [`policy`](mod@policy) is the plug-in point (a [`policy::PromptSource`] per policy),
//! [`replay`] the loop over a branch, [`compaction`] pi's auto-compaction in
//! it, [`tokens`] the token model,
//! [`fidelity`] how closely the no-pruning replay reproduces the usage a
//! session recorded, [`report`] the text and JSON output, [`chart`] the SVG.
//! Pricing itself is core's (`condense_core::economy`).

pub mod chart;
pub mod compaction;
pub mod engine_policy;
pub mod fidelity;
pub mod history;
pub mod misses;
pub mod policy;
pub mod replay;
pub mod report;
pub mod tokens;

use std::path::{Path, PathBuf};

use condense_core::{PriceProfile, ProfileOverrides};
use condense_store::session::{read_regular_file, Session};
use rayon::prelude::*;

use crate::stdout::write_all;
use crate::{CliError, SessionArg};
use compaction::CompactionSettings;
use engine_policy::{builtin_settings, EnginePolicy, SummaryModel};
use replay::PolicyRun;
use tokens::{Chars, Coefficients, Measure, TokenCount, TokenModel, DEFAULT_COEFFICIENTS};

/// Options of `condense simulate`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// A session file or id, an OpenCode session as `opencode export`
    /// prints it, or a directory (every `*.jsonl` below it, and every
    /// `*.json` that is such an export).
    pub target: String,
    /// Policies to simulate, side by side (repeatable or comma-separated:
    /// none, reference, cache-aware, settings; default: the first three,
    /// and `settings` with --settings).
    #[arg(long = "policy", value_name = "NAME", value_delimiter = ',')]
    pub policies: Vec<String>,
    /// A pi settings.json whose `contextPrune` block is simulated as the
    /// policy `settings`.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// The models' context window in tokens, for the budget gates and the
    /// pressure share.
    #[arg(long, value_name = "TOKENS", default_value_t = 200_000)]
    pub context_window: u64,
    /// pi's `compaction.reserveTokens`: pi compacts after a run whose last
    /// call's prompt and output pass the window less this.
    #[arg(long, value_name = "TOKENS", default_value_t = compaction::DEFAULT_RESERVE_TOKENS)]
    pub reserve_tokens: u64,
    /// pi's `compaction.keepRecentTokens`: what a compaction keeps (pi's
    /// chars/4 estimate).
    #[arg(long, value_name = "TOKENS", default_value_t = compaction::DEFAULT_KEEP_RECENT_TOKENS)]
    pub keep_recent_tokens: u64,
    /// Tokens each compaction summary call answers (a model of its size).
    #[arg(long, value_name = "TOKENS", default_value_t = compaction::DEFAULT_SUMMARY_TOKENS)]
    pub compaction_summary_tokens: u64,
    /// Leave pi's auto-compaction out: prompts grow past the window as the
    /// session's messages do.
    #[arg(long)]
    pub no_compaction: bool,
    /// What summaries are: `extractive` (condense's offline summarizer), or
    /// `llm:N`, its bullets lengthened to N tokens per summarized call, an
    /// LLM's output size.
    #[arg(long, value_name = "MODEL", default_value = "extractive")]
    pub summarizer: String,
    /// Price profile: anthropic-5m, anthropic-1h, openai, no-cache. By
    /// default openai when every session is a Codex rollout, else
    /// anthropic-5m.
    #[arg(long)]
    pub profile: Option<String>,
    /// Override the cache write price (units of an input token).
    #[arg(long, value_name = "X")]
    pub write_price: Option<f64>,
    /// Override the cache read price.
    #[arg(long, value_name = "X")]
    pub read_price: Option<f64>,
    /// Override the cache time to live, in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub ttl: Option<f64>,
    /// Override the minimum cacheable prompt, in tokens.
    #[arg(long, value_name = "TOKENS")]
    pub min_cacheable: Option<u64>,
    /// Override the output token price.
    #[arg(long, value_name = "X")]
    pub output_price: Option<f64>,
    /// The summarizer's price relative to the main model's.
    #[arg(long, value_name = "X")]
    pub summarizer_price: Option<f64>,
    /// Dollars per million uncached input tokens.
    #[arg(long, value_name = "USD")]
    pub usd_per_mtok: Option<f64>,
    /// Tokens per character of message content (default: calibrated).
    #[arg(long, value_name = "X")]
    pub tokens_per_char: Option<f64>,
    /// Tokens each message adds beyond its content (default: calibrated).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub tokens_per_message: Option<f64>,
    /// Fixed prompt tokens the session file does not hold (system prompt,
    /// tools; default: calibrated).
    #[arg(long, value_name = "TOKENS")]
    pub overhead: Option<u64>,
    /// The provider's chance of missing a cached prefix within its TTL, by
    /// the gap since the previous call (under 10 s, 10–30 s, 30–60 s,
    /// 60–300 s, 300 s on), comma separated: every call the cache would
    /// serve is billed at its expected cost. `--calibrate` fits them on the
    /// recorded usage. Default: no miss (the cache holds for its TTL).
    #[arg(long, value_name = "P,P,…")]
    pub miss_rates: Option<String>,
    /// Fit the token model (and the miss rates) on the sessions' recorded
    /// usage and report it, instead of simulating.
    #[arg(long, conflicts_with_all = ["svg", "policies"])]
    pub calibrate: bool,
    /// With --calibrate: count BPE tokens of this tokenizer (o200k, cl100k)
    /// instead of characters (built with `--features tiktoken`).
    #[cfg(feature = "tiktoken")]
    #[arg(long, value_name = "NAME", requires = "calibrate")]
    pub tokenizer: Option<String>,
    /// Write a chart of prompt size and cumulative cost per call (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Worker threads for a directory (default: one per core).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Machine-readable report (fields in docs/cli.md).
    #[arg(long)]
    pub json: bool,
    /// With --json: every call of every policy too.
    #[arg(long, requires = "json")]
    pub per_call: bool,
}

impl SimulateArgs {
    /// The profile asked for, or the default for `files`.
    fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or(DEFAULT_PROFILE)
    }

    fn profile(&self) -> Result<PriceProfile, CliError> {
        PriceProfile::named(self.profile_name())
            .and_then(|p| {
                p.with_overrides(&ProfileOverrides {
                    write: self.write_price,
                    read: self.read_price,
                    ttl_seconds: self.ttl,
                    min_cacheable_tokens: self.min_cacheable,
                    output: self.output_price,
                    summarizer: self.summarizer_price,
                    usd_per_mtok_input: self.usd_per_mtok,
                })
            })
            .map_err(|e| CliError::Usage(e.to_string()))
    }

    fn coefficients(&self) -> Result<Coefficients, CliError> {
        let d = DEFAULT_COEFFICIENTS;
        let per_unit = self.tokens_per_char.unwrap_or(d.per_unit);
        if !per_unit.is_finite() || per_unit <= 0.0 {
            return Err(CliError::Usage(
                "--tokens-per-char must be a positive number".into(),
            ));
        }
        if per_unit > MAX_TOKENS_PER_CHAR {
            return Err(CliError::Usage(format!(
                "--tokens-per-char must be at most {MAX_TOKENS_PER_CHAR}"
            )));
        }
        let per_message = self.tokens_per_message.unwrap_or(d.per_message);
        if !per_message.is_finite() || !(0.0..=MAX_TOKENS_PER_MESSAGE).contains(&per_message) {
            return Err(CliError::Usage(format!(
                "--tokens-per-message must be a number from 0 to {MAX_TOKENS_PER_MESSAGE}"
            )));
        }
        Ok(Coefficients {
            per_unit,
            per_message,
            overhead: self.overhead.unwrap_or(d.overhead),
        })
    }

    fn policy_names(&self, setup: &PolicySetup) -> Result<Vec<String>, CliError> {
        if self.policies.is_empty() {
            let mut names: Vec<String> = POLICY_NAMES.iter().map(|s| (*s).to_owned()).collect();
            if setup.settings_file.is_some() {
                names.push(SETTINGS_POLICY.to_owned());
            }
            return Ok(names);
        }
        let mut names: Vec<String> = Vec::new();
        for name in &self.policies {
            if name == SETTINGS_POLICY && setup.settings_file.is_none() {
                return Err(CliError::Usage(
                    "the policy `settings` needs --settings FILE".into(),
                ));
            }
            if policy(name, setup).is_none() {
                return Err(CliError::Usage(format!(
                    "unknown policy `{name}` (known: {}, {})",
                    POLICY_NAMES.join(", "),
                    SETTINGS_POLICY
                )));
            }
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        Ok(names)
    }

    fn summary_model(&self, coefficients: &Coefficients) -> Result<SummaryModel, CliError> {
        if self.summarizer == "extractive" {
            return Ok(SummaryModel::Extractive);
        }
        let tokens = self
            .summarizer
            .strip_prefix("llm:")
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| (1..=MAX_SUMMARY_TOKENS).contains(n))
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--summarizer {}: expected `extractive` or `llm:TOKENS` (tokens per call, 1 to {MAX_SUMMARY_TOKENS})",
                    self.summarizer
                ))
            })?;
        Ok(SummaryModel::Sized {
            chars_per_call: (tokens as f64 / coefficients.per_unit).ceil() as usize,
        })
    }

    fn setup(&self, coefficients: &Coefficients) -> Result<PolicySetup, CliError> {
        if self.context_window == 0 {
            return Err(CliError::Usage(
                "--context-window must be at least 1".into(),
            ));
        }
        let settings_file = match &self.settings {
            None => None,
            Some(path) => {
                // A FIFO or a device would block or never end the read.
                let bytes = condense_store::session::read_regular_file(path)
                    .map_err(|e| CliError::Data(format!("{}: {e}", path.display())))?;
                let value = std::str::from_utf8(&bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|text| {
                        condense_core::parse_json_lossy(text).map_err(|e| e.to_string())
                    })
                    .map_err(|e| CliError::Data(format!("{}: not JSON: {e}", path.display())))?;
                if !value.is_object() {
                    return Err(CliError::Data(format!(
                        "{}: not a JSON object",
                        path.display()
                    )));
                }
                // What the engine will read of it, said once, as `status`
                // says it: a key it rounds or ignores is named.
                let (_, warnings) = condense_core::Config::from_settings_file_value(&value);
                for w in warnings {
                    eprintln!("condense: warning: {}: {w}", path.display());
                }
                Some(value)
            }
        };
        if self.reserve_tokens >= self.context_window {
            return Err(CliError::Usage(
                "--reserve-tokens must be below --context-window".into(),
            ));
        }
        let compaction = (!self.no_compaction).then_some(CompactionSettings {
            context_window: self.context_window,
            reserve_tokens: self.reserve_tokens,
            keep_recent_tokens: self.keep_recent_tokens,
            summary_tokens: self.compaction_summary_tokens,
        });
        Ok(PolicySetup {
            context_window: self.context_window,
            summaries: self.summary_model(coefficients)?,
            settings_file,
            compaction,
            misses: self
                .miss_rates
                .as_deref()
                .map(condense_core::MissRates::parse)
                .transpose()
                .map_err(|e| CliError::Usage(format!("--miss-rates: {e}")))?,
            economy: self.planned_terms(),
            miss_prior: Default::default(),
        })
    }

    /// The `economy` keys that make the built-in policies plan with the
    /// terms this run bills at: condense configured for the provider the
    /// simulation prices (the profile, and each price given on the
    /// command line). The output price and the dollar rate are no part of
    /// what the policy weighs.
    fn planned_terms(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut economy = serde_json::Map::new();
        economy.insert("profile".into(), self.profile_name().into());
        let prices = [
            ("summarizerPrice", self.summarizer_price),
            ("writePrice", self.write_price),
            ("readPrice", self.read_price),
            ("ttlSeconds", self.ttl),
            ("minCacheableTokens", self.min_cacheable.map(|t| t as f64)),
        ];
        for (key, value) in prices {
            if let Some(v) = value {
                economy.insert(key.into(), v.into());
            }
        }
        // Billed at a miss model, the built-in policies plan with it.
        if let Some(rates) = self
            .miss_rates
            .as_deref()
            .and_then(|r| condense_core::MissRates::parse(r).ok())
        {
            economy.insert("missRates".into(), rates.0.to_vec().into());
        }
        economy
    }
}

/// One session simulated under every policy asked for.
#[derive(Debug, Clone)]
pub struct SessionSim {
    /// The session file.
    pub path: PathBuf,
    /// Reader problems (lines skipped), as text.
    pub problems: Vec<String>,
    /// One run per policy, in the order asked.
    pub runs: Vec<PolicyRun>,
}

/// Simulates one session file.
pub fn simulate_file(
    path: &Path,
    policies: &[String],
    setup: &PolicySetup,
    tokens: &dyn TokenCount,
    profile: &PriceProfile,
) -> Result<SessionSim, String> {
    let session = open_session(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // A `*.jsonl` in a sessions directory need not be a session (another
    // tool's log): priced, it would count as a session of no calls.
    if session.header.is_none() && session.entries.is_empty() {
        return Err(format!(
            "{}: {}",
            path.display(),
            crate::files::NOT_A_SESSION
        ));
    }
    // What condense or pi-condense wrote while the session was recorded is
    // left out: every policy starts from the session as if none had run.
    let branch: Vec<_> = session
        .branch(None)
        .into_iter()
        .filter(|e| {
            !e.custom_type
                .as_deref()
                .is_some_and(|t| t.starts_with(CONDENSE_PREFIX))
        })
        .collect();
    // The policies replay the same branch independently: on one session
    // they are the only work there is to spread over the cores (a corpus
    // spreads its sessions too; rayon balances both).
    let runs = policies
        .par_iter()
        .map(|name| {
            let mut source =
                policy(name, setup).ok_or_else(|| format!("unknown policy `{name}`"))?;
            replay::replay(
                &branch,
                source.as_mut(),
                tokens,
                profile,
                setup.compaction.as_ref(),
                setup.misses.as_ref(),
            )
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(SessionSim {
        path: path.to_owned(),
        problems: session.problems.iter().map(|p| p.to_string()).collect(),
        runs,
    })
}

/// Whether `path` is a regular file that starts as an OpenCode export (a
/// directory's other `*.json`, settings say, are no sessions).
fn is_export_file(path: &Path) -> bool {
    crate::opencode_export::looks_like_export(&head_of(path, 256))
}

/// The first `len` bytes of `path` if it is a regular file, else none:
/// opening a FIFO a directory holds would wait for a writer forever.
fn head_of(path: &Path, len: usize) -> Vec<u8> {
    use std::io::Read as _;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut head = vec![0u8; len];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head.truncate(n);
    head
}

/// A pi session file, or an OpenCode export, a Claude Code transcript or a
/// Codex rollout read as one.
fn open_session(path: &Path) -> Result<Session, String> {
    let bytes = read_regular_file(path).map_err(|e| e.to_string())?;
    if crate::codex_rollout::looks_like_rollout(&bytes[..bytes.len().min(4096)]) {
        let text = String::from_utf8_lossy(&bytes);
        let jsonl = crate::codex_rollout::to_pi_session(&text)
            .map_err(|e| format!("a Codex rollout, but {e}"))?;
        return Ok(Session::parse(&jsonl));
    }
    if crate::claude_transcript::looks_like_transcript(&bytes[..bytes.len().min(4096)]) {
        let text = String::from_utf8_lossy(&bytes);
        let jsonl = crate::claude_transcript::to_pi_session(&text)
            .map_err(|e| format!("a Claude Code transcript, but {e}"))?;
        return Ok(Session::parse(&jsonl));
    }
    if !crate::opencode_export::looks_like_export(&bytes[..bytes.len().min(256)]) {
        return Ok(Session::from_bytes(bytes));
    }
    let text = String::from_utf8_lossy(&bytes);
    let jsonl = crate::opencode_export::to_pi_session(&text)
        .map_err(|e| format!("an OpenCode export, but {e}"))?;
    Ok(Session::parse(&jsonl))
}

/// The custom types condense and pi-condense write begin with this.
const CONDENSE_PREFIX: &str = "context-prune-";

/// The session files a target names: every `*.jsonl` below a directory
/// and every OpenCode export (`*.json`), or the one session a path or id
/// names.
fn target_files(target: &str) -> Result<(Vec<PathBuf>, bool), CliError> {
    let path = PathBuf::from(target);
    if path.is_dir() {
        let mut files = crate::files::session_files(&path);
        files.extend(
            crate::files::files_named(&path, "json")
                .into_iter()
                .filter(|f| is_export_file(f)),
        );
        files.sort();
        return Ok((files, true));
    }
    let file = crate::load::resolve(&SessionArg {
        session: Some(target.to_owned()),
        latest: false,
        settings: None,
    })?;
    Ok((vec![file], false))
}

/// A corpus, replayed as its user lived it: `none` first, for every
/// session, whose cache misses make the prior each session's other
/// policies plan with ([`history::priors`]); then those policies. The
/// runs come back in the order `policies` names them.
fn simulate_corpus(
    files: &[PathBuf],
    policies: &[String],
    setup: &PolicySetup,
    tokens: &dyn TokenCount,
    profile: &PriceProfile,
    jobs: Option<usize>,
) -> Result<Vec<Result<SessionSim, String>>, CliError> {
    let none = ["none".to_owned()];
    let nones = simulate_all(files, &none, setup, tokens, profile, jobs, None)?;
    let sessions: Vec<_> = nones
        .iter()
        .map(|r| {
            r.as_ref()
                .ok()
                .and_then(|s| s.runs.first())
                .and_then(history::SessionMisses::of)
        })
        .collect();
    let priors = history::priors(&sessions);
    let rest: Vec<String> = policies.iter().filter(|p| *p != "none").cloned().collect();
    let mut others = if rest.is_empty() {
        Vec::new()
    } else {
        simulate_all(files, &rest, setup, tokens, profile, jobs, Some(&priors))?
    }
    .into_iter();
    Ok(nones
        .into_iter()
        .map(|none| {
            // Taken first: the files line up, whichever of them failed.
            let other = others.next();
            let mut none = none?;
            let mut rest = match other {
                Some(sim) => sim?.runs.into_iter(),
                None => Vec::new().into_iter(),
            };
            let none_run = none.runs.pop();
            none.runs = policies
                .iter()
                .filter_map(|p| {
                    if p == "none" {
                        none_run.clone()
                    } else {
                        rest.next()
                    }
                })
                .collect();
            Ok(none)
        })
        .collect())
}

/// Simulates every file, on all cores, with progress for a corpus; with
/// `priors`, each file's policies plan with its prior.
fn simulate_all(
    files: &[PathBuf],
    policies: &[String],
    setup: &PolicySetup,
    tokens: &dyn TokenCount,
    profile: &PriceProfile,
    jobs: Option<usize>,
    priors: Option<&[condense_store::misses::ProviderMisses]>,
) -> Result<Vec<Result<SessionSim, String>>, CliError> {
    let progress = crate::progress::bar(files.len() as u64, "simulating sessions");
    let work = || -> Vec<Result<SessionSim, String>> {
        files
            .par_iter()
            .enumerate()
            .map(|(i, path)| {
                let sim = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    match priors.and_then(|p| p.get(i)) {
                        Some(prior) => {
                            let setup = PolicySetup {
                                miss_prior: prior.clone(),
                                ..setup.clone()
                            };
                            simulate_file(path, policies, &setup, tokens, profile)
                        }
                        None => simulate_file(path, policies, setup, tokens, profile),
                    }
                }))
                .unwrap_or_else(|_| {
                    Err(format!(
                        "{}: internal error while simulating",
                        path.display()
                    ))
                });
                progress.inc(1);
                sim
            })
            .collect()
    };
    let out = match jobs {
        Some(0) => return Err(CliError::Usage("--jobs must be at least 1".into())),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(crate::jobs::worker_threads(n, files.len()))
            .build()
            .map_err(|e| CliError::Data(format!("starting {n} worker threads: {e}")))?
            .install(work),
        None => work(),
    };
    progress.finish_and_clear();
    Ok(out)
}

/// The most tokens `--summarizer llm:N` makes a summarized call cost.
pub const MAX_SUMMARY_TOKENS: u64 = 100_000;
/// The largest `--tokens-per-char`.
pub const MAX_TOKENS_PER_CHAR: f64 = 16.0;
/// The largest `--tokens-per-message`.
pub const MAX_TOKENS_PER_MESSAGE: f64 = 100_000.0;

/// The built-in policies, by name, in report order.
pub const POLICY_NAMES: [&str; 3] = ["none", "reference", "cache-aware"];

/// The name a settings file's policy goes by.
pub const SETTINGS_POLICY: &str = "settings";

/// What every policy of a run shares.
#[derive(Debug, Clone)]
pub struct PolicySetup {
    /// The models' context window, for the budget gates and pressure.
    pub context_window: u64,
    /// What the summarizer answers.
    pub summaries: SummaryModel,
    /// The settings.json of `--settings`, when given.
    pub settings_file: Option<serde_json::Value>,
    /// pi's auto-compaction (`None`: `--no-compaction`).
    pub compaction: Option<CompactionSettings>,
    /// The provider's chance of missing a cached prefix (`--miss-rates`;
    /// `None`: the cache holds for its whole TTL).
    pub misses: Option<condense_core::MissRates>,
    /// The `economy` keys of the run's price terms, which the built-in
    /// policies plan with (a settings file is simulated as it is).
    pub economy: serde_json::Map<String, serde_json::Value>,
    /// The cache misses the sessions before this one showed
    /// ([`history::priors`]); empty for a session simulated alone.
    pub miss_prior: condense_store::misses::ProviderMisses,
}

/// A fresh instance of the policy called `name` (one per session replayed).
pub fn policy(name: &str, setup: &PolicySetup) -> Option<Box<dyn policy::PromptSource + Send>> {
    let engine = |settings| -> Box<dyn policy::PromptSource + Send> {
        Box::new(EnginePolicy::new(
            name,
            settings,
            setup.summaries,
            setup.context_window,
            setup.miss_prior.clone(),
        ))
    };
    match name {
        "none" => Some(Box::new(policy::NoPruning)),
        "reference" | "cache-aware" => Some(engine(builtin_settings(name, &setup.economy))),
        SETTINGS_POLICY => setup.settings_file.clone().map(engine),
        _ => None,
    }
}

/// The price profile when none is asked for and the sessions are not all
/// Codex rollouts.
const DEFAULT_PROFILE: &str = "anthropic-5m";

/// Whether every one of `files` is a Codex rollout (an OpenAI model's
/// session, priced by the openai profile unless told otherwise).
fn all_rollouts(files: &[PathBuf]) -> bool {
    !files.is_empty()
        && files
            .iter()
            .all(|path| crate::codex_rollout::looks_like_rollout(&head_of(path, 4096)))
}

/// An error if the chart would be written over one of the sessions read.
fn refuse_an_input(svg: &Path, files: &[PathBuf]) -> Result<(), CliError> {
    let Ok(target) = std::fs::canonicalize(svg) else {
        return Ok(()); // not there yet: no session is
    };
    if files
        .iter()
        .any(|f| std::fs::canonicalize(f).is_ok_and(|f| f == target))
    {
        return Err(CliError::Usage(format!(
            "--svg {}: that is a session being simulated; name another file for the chart",
            svg.display()
        )));
    }
    Ok(())
}

/// `condense simulate`.
pub fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let (files, is_dir) = target_files(&args.target)?;
    if let Some(svg) = &args.svg {
        refuse_an_input(svg, &files)?;
    }
    let for_rollouts;
    let args = if args.profile.is_none() && all_rollouts(&files) {
        eprintln!(
            "condense simulate: Codex rollouts, priced by the openai profile (--profile to choose)"
        );
        for_rollouts = SimulateArgs {
            profile: Some("openai".to_owned()),
            ..args.clone()
        };
        &for_rollouts
    } else {
        args
    };
    let profile = args.profile()?;
    let coefficients = args.coefficients()?;
    let model = TokenModel {
        measure: Chars,
        coefficients,
    };
    let setup = args.setup(&coefficients)?;
    if args.calibrate {
        // The fit compares prompts with what the session recorded, which
        // holds pi's own compactions; its replays count units, not tokens,
        // so a threshold in tokens means nothing there.
        let setup = PolicySetup {
            compaction: None,
            ..setup
        };
        let none = vec!["none".to_owned()];
        // Replayed counting one token per content unit, then one per message
        // sent: each call's prompt is then its context's content size, or
        // its number of messages.
        let units = Coefficients {
            per_unit: 1.0,
            per_message: 0.0,
            overhead: 0,
        };
        let count = Coefficients {
            per_unit: 0.0,
            per_message: 1.0,
            overhead: 0,
        };
        let counted = TokenModel {
            measure: Chars,
            coefficients: count,
        };
        let (by_count, _) = split(simulate_all(
            &files, &none, &setup, &counted, &profile, args.jobs, None,
        )?);
        #[cfg(feature = "tiktoken")]
        if let Some(name) = &args.tokenizer {
            let measure = tokens::Bpe::named(name).map_err(CliError::Usage)?;
            let bpe = TokenModel {
                measure,
                coefficients: units,
            };
            let (sims, failures) = split(simulate_all(
                &files, &none, &setup, &bpe, &profile, args.jobs, None,
            )?);
            let report = fidelity::calibrate(&sims, &by_count, bpe.measure.name(), None);
            return write_all(&calibration_text(&report, &failures, args.json));
        }
        let chars = TokenModel {
            measure: Chars,
            coefficients: units,
        };
        let (sims, failures) = split(simulate_all(
            &files, &none, &setup, &chars, &profile, args.jobs, None,
        )?);
        let report =
            fidelity::calibrate(&sims, &by_count, chars.measure.name(), Some(&coefficients));
        return write_all(&calibration_text(&report, &failures, args.json));
    }
    let policies = args.policy_names(&setup)?;
    let sims = if is_dir && files.len() > 1 {
        simulate_corpus(&files, &policies, &setup, &model, &profile, args.jobs)?
    } else {
        simulate_all(&files, &policies, &setup, &model, &profile, args.jobs, None)?
    };
    let (sims, failures) = split(sims);
    if !is_dir {
        if let Some(message) = failures.first() {
            return Err(CliError::Data(message.clone()));
        }
    }
    if let Some(svg) = &args.svg {
        chart::write_svg(svg, &sims, &profile).map_err(CliError::Data)?;
    }
    let report = report::Report {
        profile: &profile,
        coefficients: &coefficients,
        sims: &sims,
        failures: &failures,
        corpus: is_dir,
        per_call: args.per_call,
        miss_rates: setup.misses.as_ref(),
    };
    if args.json {
        write_all(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        ))
    } else {
        write_all(&report.text())
    }
}

fn calibration_text(report: &fidelity::Calibration, failures: &[String], json: bool) -> String {
    if json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        )
    } else {
        report.text(failures)
    }
}

fn split(results: Vec<Result<SessionSim, String>>) -> (Vec<SessionSim>, Vec<String>) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok(s) => ok.push(s),
            Err(e) => failed.push(e),
        }
    }
    (ok, failed)
}
