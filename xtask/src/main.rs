//! Project automation for `condense`, run as `cargo xtask <command>`.
//!
//! The `xtask` alias lives in `.cargo/config.toml`. Its one dependency is
//! serde_json (criterion's estimates for `bench --report`), already in the
//! workspace's lock file, so it builds in seconds.
//!
//! Commands:
//!
//! * `ci`    – the full CI gate; see [`steps::CI_STEPS`] for the ordered list.
//! * `bench` – `cargo bench --workspace` (the `bench` profile keeps line
//!   tables for profiling), forwarding any extra arguments; with
//!   `--report` (or `--report-only`, which runs nothing) it then rewrites
//!   docs/benchmarks.md's criterion section; see [`bench_report`].
//! * `soak`  – the long simulation run; see [`steps::SOAK_STEPS`].
//! * `layers` – the module layering check; see [`layers`].
//! * `dist`  – release binaries and npm packages in `target/dist/`; see
//!   [`dist::dist`].

mod bench_report;
mod dist;
mod layers;
mod packages;
mod runner;
mod steps;

use std::process::ExitCode;

use runner::Ctx;

/// Usage text printed by `--help` and on argument errors.
const USAGE: &str = "\
Usage: cargo xtask <COMMAND> [ARGS...]

Commands:
  ci       Run the CI gate, stopping at the first failing step:
             fmt     cargo fmt --all --check
             layers  condense-core's modules import only downward, in
                     the layers docs/ARCHITECTURE.md declares, with no
                     circle
             clippy  cargo clippy --workspace --all-targets -- -D warnings
             test    cargo test --workspace --exclude condense-engine
                     --exclude condense-host-pi --exclude condense-host-opencode
                     --exclude condense-cli (includes doc tests)
             dist    cargo xtask dist (below): the packages e2e installs
             e2e     cargo test -p condense-engine -p condense-host-pi
                     -p condense-host-opencode -p condense-cli -- --nocapture
                     (end-to-end tests against real pi, OpenCode, Claude
                     Code and Codex, and the TypeScript client's under Node;
                     installs Node
                     22 and 20, pi 0.83, 1.6 and 0.73, opencode-ai 1.18.33,
                     @anthropic-ai/claude-code 2.1.328, @openai/codex 0.169.0
                     and verdaccio 6.8.0
                     from the npm registry with the system npm; the install
                     tests publish target/dist/*.tgz to verdaccio on
                     127.0.0.1)
             doc     cargo doc --workspace --no-deps  (RUSTDOCFLAGS=-D warnings)
  dist     Build the stripped release binary (condense, also the hosts'
             sidecar) and pack the npm packages into target/dist:
             condense-pi (pi), condense-opencode (OpenCode), condense (the
             command) and the platform package condense-<os>-<cpu> with the
             binary (needs node, npm)
  layers   The `layers` step of `ci` alone
  bench    Run `cargo bench --workspace` (the `bench` profile: release code
             with line tables); extra ARGS are passed to cargo bench
             --report       then rewrite the criterion section of
                            docs/benchmarks.md from target/criterion
             --report-only  rewrite that section without running anything
  soak     The long simulation (docs/reliability.md):
             cargo test --release -p condense-store --test simulation -- --nocapture
             with CONDENSE_SOAK_SECONDS=600, CONDENSE_SOAK_STEPS=60,
             CONDENSE_SOAK_MAX_OUTPUT=64 MiB unless already set
  help     Print this message

Options:
  -h, --help   Print this message

Environment:
  CARGO              cargo binary to use for sub-commands (set by cargo itself)
  CARGO_TERM_COLOR   passed through to cargo unchanged
  CONDENSE_E2E_CACHE where the e2e tests keep Node, pi and OpenCode
                     (default: <workspace>/.cache/pi-e2e)
  CONDENSE_SKIP_E2E  =1 skips the e2e tests in a plain `cargo test`
                     (developer convenience; the e2e step removes it)
  CONDENSE_SOAK_*    SESSIONS, STEPS, MAX_OUTPUT, SECONDS, SEED of `soak`
";

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    /// Print usage to stdout and succeed.
    Help,
    /// Run every CI step in order.
    Ci,
    /// Run the benchmarks, forwarding the given extra arguments.
    Bench(Vec<String>),
    /// Run the benchmarks as [`Command::Bench`] does, then regenerate the
    /// criterion section of docs/benchmarks.md.
    BenchReport(Vec<String>),
    /// Regenerate that section from `target/criterion` alone.
    BenchReportOnly,
    /// The long simulation run.
    Soak,
    /// Release binaries and npm packages.
    Dist,
    /// The layering check alone.
    Layers,
}

/// Parses the arguments that follow the program name.
///
/// Returns a human-readable error for unknown commands or unexpected
/// arguments; the caller prints it together with [`USAGE`].
fn parse_args(args: &[String]) -> Result<Command, String> {
    let Some((first, rest)) = args.split_first() else {
        return Err("missing command".to_owned());
    };
    let no_extra = |cmd: Command| {
        if rest.iter().any(|a| a == "-h" || a == "--help") {
            Ok(Command::Help)
        } else if let Some(extra) = rest.first() {
            Err(format!("unexpected argument `{extra}` for `{first}`"))
        } else {
            Ok(cmd)
        }
    };
    match first.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "ci" => no_extra(Command::Ci),
        "soak" => no_extra(Command::Soak),
        "dist" => no_extra(Command::Dist),
        "layers" => no_extra(Command::Layers),
        "bench" => parse_bench(rest),
        other => Err(format!("unknown command `{other}`")),
    }
}

/// `bench`'s arguments: `--report` or `--report-only` anywhere before a
/// `--` (after it everything is criterion's); the rest go to cargo bench.
fn parse_bench(rest: &[String]) -> Result<Command, String> {
    let ours = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    let flag = |name: &str| rest[..ours].iter().any(|a| a == name);
    let (report, only) = (flag("--report"), flag("--report-only"));
    let forwarded: Vec<String> = rest
        .iter()
        .enumerate()
        .filter(|(i, a)| *i >= ours || (*a != "--report" && *a != "--report-only"))
        .map(|(_, a)| a.clone())
        .collect();
    match (report, only) {
        (false, false) => Ok(Command::Bench(forwarded)),
        (true, false) => Ok(Command::BenchReport(forwarded)),
        (false, true) if forwarded.is_empty() => Ok(Command::BenchReportOnly),
        (false, true) => Err(format!(
            "`bench --report-only` runs no benches and takes no other argument (got `{}`)",
            forwarded.join(" ")
        )),
        (true, true) => Err("`--report` and `--report-only` exclude each other".to_owned()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse_args(&args) {
        Ok(command) => command,
        Err(msg) => {
            eprintln!("xtask: error: {msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    match command {
        Command::Help => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Command::Ci => runner::run_steps("ci", &Ctx::from_env(), steps::CI_STEPS),
        Command::Bench(extra) => runner::run_steps(
            "bench",
            &Ctx::from_env().with_extra_args(extra),
            steps::BENCH_STEPS,
        ),
        Command::BenchReport(extra) => {
            bench_report::run(&Ctx::from_env().with_extra_args(extra), true)
        }
        Command::BenchReportOnly => bench_report::run(&Ctx::from_env(), false),
        Command::Soak => runner::run_steps("soak", &Ctx::from_env(), steps::SOAK_STEPS),
        Command::Dist => runner::run_steps("dist", &Ctx::from_env(), steps::DIST_STEPS),
        Command::Layers => runner::run_steps("layers", &Ctx::from_env(), steps::LAYERS_STEPS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_commands() {
        assert_eq!(parse_args(&args(&["ci"])), Ok(Command::Ci));
        assert_eq!(parse_args(&args(&["soak"])), Ok(Command::Soak));
        assert_eq!(parse_args(&args(&["dist"])), Ok(Command::Dist));
        assert_eq!(parse_args(&args(&["--help"])), Ok(Command::Help));
        assert_eq!(parse_args(&args(&["-h"])), Ok(Command::Help));
        assert_eq!(parse_args(&args(&["help"])), Ok(Command::Help));
        assert_eq!(parse_args(&args(&["ci", "--help"])), Ok(Command::Help));
        assert_eq!(
            parse_args(&args(&["bench", "--", "--save-baseline", "x"])),
            Ok(Command::Bench(args(&["--", "--save-baseline", "x"])))
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse_args(&[]).is_err());
        assert!(parse_args(&args(&["nope"])).is_err());
        assert!(parse_args(&args(&["ci", "extra"])).is_err());
    }

    #[test]
    fn parses_bench_report_flags() {
        assert_eq!(
            parse_args(&args(&["bench", "--report"])),
            Ok(Command::BenchReport(Vec::new()))
        );
        assert_eq!(
            parse_args(&args(&["bench", "--report", "--", "--quick"])),
            Ok(Command::BenchReport(args(&["--", "--quick"])))
        );
        assert_eq!(
            parse_args(&args(&["bench", "--bench", "render", "--report"])),
            Ok(Command::BenchReport(args(&["--bench", "render"])))
        );
        // After `--` the flag is criterion's business, not ours.
        assert_eq!(
            parse_args(&args(&["bench", "--", "--report"])),
            Ok(Command::Bench(args(&["--", "--report"])))
        );
        assert_eq!(
            parse_args(&args(&["bench", "--report-only"])),
            Ok(Command::BenchReportOnly)
        );
        assert!(parse_args(&args(&["bench", "--report-only", "--bench", "x"])).is_err());
        assert!(parse_args(&args(&["bench", "--report-only", "--", "--quick"])).is_err());
        assert!(parse_args(&args(&["bench", "--report", "--report-only"])).is_err());
    }
}
