//! The `condense` command: see and query what a pi session's context holds,
//! with no pi running.
//!
//! Exit codes: 0 ok, 1 usage error, 2 data problem (missing or unreadable
//! session, unknown ref, malformed settings).

mod claude;
mod claude_transcript;
mod codex;
mod codex_rollout;
mod compact;
mod corpus;
mod demo;
mod files;
mod generate;
mod inspect;
mod jobs;
mod launch;
mod load;
mod mcp;
mod opencode_export;
mod output;
mod pi_session;
mod progress;
mod proxy;
mod sidecar;
mod simulate;
mod stdout;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use condense_core::PageRequest;

/// `condense --version`: the crate version and the commit it was built from
/// (`unknown` without git history; build_commit.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CONDENSE_BUILD_COMMIT"),
    ")"
);

/// What failed, and which exit code it maps to.
#[derive(Debug)]
pub enum CliError {
    /// Bad arguments (exit 1).
    Usage(String),
    /// Bad input data (exit 2).
    Data(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Data(m) => f.write_str(m),
        }
    }
}

#[derive(Parser)]
#[command(
    name = "condense",
    version = VERSION,
    about = "See and query what a pi session's context holds"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How a session is named.
#[derive(Args, Clone, Debug)]
pub struct SessionArg {
    /// A session file path or a session id (looked up under
    /// $PI_CODING_AGENT_DIR/sessions, default ~/.pi/agent/sessions).
    #[arg(required_unless_present = "latest")]
    pub session: Option<String>,
    /// Use the most recently modified session.
    #[arg(long, conflicts_with = "session")]
    pub latest: bool,
    /// Read settings (contextPrune) from this settings.json instead of the
    /// agent directory's.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Print exactly the message array the model is sent for the session's branch.
    Render {
        #[command(flatten)]
        session: SessionArg,
        /// A readable view instead of JSON.
        #[arg(long, conflicts_with = "diff")]
        pretty: bool,
        /// Per-message sizes before and after.
        #[arg(long)]
        diff: bool,
        /// JSON output (the default).
        #[arg(long, conflicts_with_all = ["pretty", "diff"])]
        json: bool,
    },
    /// Flush pending work and compress chains offline, appending entries to
    /// the session file as pi would.
    Compact(compact::CompactArgs),
    /// What condense knows: config, summarizer stats, context metrics,
    /// frontier, pending work and totals.
    Status {
        #[command(flatten)]
        session: SessionArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Summarizer calls, tokens, cost; chains compressed.
    Stats {
        #[command(flatten)]
        session: SessionArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Summaries with the tool calls they pruned.
    Tree {
        #[command(flatten)]
        session: SessionArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print what `context_tree_query` returns for the refs, byte for byte.
    ///
    /// `condense query SESSION REF...`, or `condense query --latest REF...`.
    Query {
        /// The session (unless --latest), then short refs (t3), occurrence
        /// keys (id@ts) or tool-call ids.
        #[arg(required = true, value_name = "SESSION|REF")]
        args: Vec<String>,
        /// Use the most recently modified session.
        #[arg(long)]
        latest: bool,
        /// Read settings (contextPrune) from this settings.json.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// First line of each output to show (1-based), as the tool's
        /// `offset`.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        offset: Option<u64>,
        /// Most lines of each output to show (at most 2000), as the tool's
        /// `limit`.
        #[arg(long, value_name = "M", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
    },
    /// Write a synthetic pi session (deterministic from a seed).
    Gen(generate::GenArgs),
    /// Figures over every session under a directory: reclaim, re-query gaps,
    /// session length, context metrics.
    Corpus(corpus::CorpusArgs),
    /// Generate a realistic session, compact it, and show what each
    /// mechanism reclaimed.
    Demo(demo::DemoArgs),
    /// Replay sessions call by call under each pruning policy and price
    /// every call with prompt caching.
    Simulate(Box<simulate::SimulateArgs>),
    /// A local API proxy that prunes each request's history (Claude Code:
    /// `ANTHROPIC_BASE_URL=http://127.0.0.1:8787`); see docs/proxy.md.
    Proxy(proxy::ProxyArgs),
    /// The stdio MCP server that gives the agent `context_tree_query`
    /// (answered by `condense proxy`); see docs/proxy.md.
    Mcp,
    /// The sidecar the pi extension and the OpenCode plugin start: the
    /// engine on stdin/stdout (docs/protocol.md). Not run by hand.
    Sidecar,
    /// Claude Code through condense: the proxy (reused or started), the
    /// MCP server registered, and `claude` with your arguments after `--`.
    Claude(claude::ClaudeArgs),
    /// Codex through condense: the proxy (reused or started), `-c`
    /// overrides adding it as the model provider and the MCP server, and
    /// `codex` with your arguments after `--`.
    Codex(codex::CodexArgs),
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Render {
            session,
            pretty,
            diff,
            json: _,
        } => {
            let loaded = load::load(&session)?;
            let mode = if pretty {
                output::RenderMode::Pretty
            } else if diff {
                output::RenderMode::Diff
            } else {
                output::RenderMode::Json
            };
            output::render(&loaded, mode)
        }
        Command::Compact(args) => compact::run(&args),
        Command::Status { session, json } => inspect::status(&load::load(&session)?, json),
        Command::Stats { session, json } => inspect::stats(&load::load(&session)?, json),
        Command::Tree { session, json } => inspect::tree(&load::load(&session)?, json),
        Command::Gen(args) => generate::run(&args),
        Command::Corpus(args) => corpus::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Proxy(args) => proxy::run(&args),
        Command::Mcp => mcp::run(),
        Command::Sidecar => sidecar::run(),
        Command::Claude(args) => claude::run(&args).map(|_| ()),
        Command::Codex(args) => codex::run(&args).map(|_| ()),
        Command::Query {
            mut args,
            latest,
            settings,
            offset,
            limit,
        } => {
            let session = SessionArg {
                session: if latest { None } else { Some(args.remove(0)) },
                latest,
                settings,
            };
            if args.is_empty() {
                return Err(CliError::Usage("query: name at least one ref".into()));
            }
            let refs = args;
            let loaded = load::load(&session)?;
            output::query(&loaded, &refs, PageRequest { offset, limit })
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // `condense claude` and `condense codex` end with the agent's own exit
    // code.
    let result = match &cli.command {
        Command::Claude(args) => claude::run(args).map(|code| u8::try_from(code).unwrap_or(1)),
        Command::Codex(args) => codex::run(args).map(|code| u8::try_from(code).unwrap_or(1)),
        _ => run(cli).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("condense: {e}");
            ExitCode::from(match e {
                CliError::Usage(_) => 1,
                CliError::Data(_) => 2,
            })
        }
    }
}
