//! `condense gen`: write a synthetic pi session (see `condense_gen`).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use condense_gen::{Shape, SynthOptions};

use crate::CliError;

/// The conversation's shape.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ShapeArg {
    /// One prompt, then tool turns (400 chars of thinking, one bash call, a
    /// 3,600-char result each).
    ToolTurns,
    /// Prompts of ten such tool turns, each closed by a text reply.
    Tasks,
    /// A realistic mix: file reads, build logs, a failed write, a re-read,
    /// a skill file, an oversized output.
    Realistic,
    /// Stress: one assistant message of many reads (200-char results).
    Wide,
    /// Stress: failed edits whose arguments hold 500 keys and an object
    /// nested 120 deep (6,000-char errors).
    Deep,
    /// Stress: runs of 50 reads of one unchanged file (3,900 chars).
    Dups,
    /// Stress: one run of short bash turns, every seventh failed, that
    /// never replies.
    Long,
}

impl ShapeArg {
    fn name(self) -> &'static str {
        match self {
            ShapeArg::ToolTurns => "tool-turns",
            ShapeArg::Tasks => "tasks",
            ShapeArg::Realistic => "realistic",
            ShapeArg::Wide => "wide",
            ShapeArg::Deep => "deep",
            ShapeArg::Dups => "dups",
            ShapeArg::Long => "long",
        }
    }
}

/// The largest `gen --tokens`.
pub const MAX_TOKENS: u64 = 20_000_000;

/// Options of `condense gen`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Size of the unpruned context, in tokens (chars / 4), at most
    /// 20,000,000: the session is built in memory before it is written.
    #[arg(long, default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_TOKENS))]
    pub tokens: u64,
    /// The conversation's shape.
    #[arg(long, value_enum, default_value = "realistic")]
    pub shape: ShapeArg,
    /// Run condense's flush pipeline while generating, so the session holds
    /// the entries a live pi-condense would have written.
    #[arg(long)]
    pub pruned: bool,
    /// Idle gaps, in percent: that share of the user prompts after the
    /// first comes 6 to 90 minutes after the previous message, and a tenth
    /// of that share of tool turns waits 5.5 to 20 minutes (default 0).
    #[arg(long, value_name = "PERCENT", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=100))]
    pub idle_gaps: u64,
    /// The provider's cache misses the usage reports, by the gap since the
    /// previous call (under 10 s, 10–30 s, 30–60 s, 60–300 s, 300 s on;
    /// later buckets take the last share given), comma separated: the
    /// chance that a call reads nothing of the prefix cached (default:
    /// every call reads what the previous one sent).
    #[arg(long, value_name = "P,P,…")]
    pub miss_rates: Option<String>,
    /// Seed: the same seed and options give the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the session here (and spilled outputs into its blob directory)
    /// instead of to stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `condense gen`.
pub fn run(args: &GenArgs) -> Result<(), CliError> {
    let miss_rates = args
        .miss_rates
        .as_deref()
        .map(condense_core::MissRates::parse)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--miss-rates: {e}")))?;
    let opts = SynthOptions {
        seed: args.seed,
        tokens: Some(args.tokens),
        shape: Shape::from_name(args.shape.name()).expect("every ShapeArg names a shape"),
        pruned: args.pruned,
        idle_gaps_percent: args.idle_gaps,
        miss_rates,
        ..SynthOptions::default()
    };
    match &args.output {
        Some(path) => condense_gen::write(path, &opts)
            .map_err(|e| CliError::Data(format!("{}: {e}", path.display()))),
        None => {
            let s = condense_gen::generate_session(&opts);
            if !s.blobs.is_empty() {
                eprintln!(
                    "condense: {} spilled output(s) not written (use -o FILE to write them)",
                    s.blobs.len()
                );
            }
            let mut out = std::io::stdout().lock();
            out.write_all(s.jsonl.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| CliError::Data(format!("stdout: {e}")))
        }
    }
}
