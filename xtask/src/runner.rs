//! Step runner: runs an ordered list of [`Step`]s, stops at the first
//! failure, and prints a header per step plus a timing summary.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// One named unit of work in a pipeline such as `cargo xtask ci`.
///
/// Steps are plain function pointers so that adding one is a matter of
/// writing a `fn(&Ctx) -> Result<(), StepError>` and appending it to a list
/// in [`crate::steps`].
#[derive(Clone, Copy)]
pub struct Step {
    /// Short name shown in the `==> name` header, the summary and errors.
    pub name: &'static str,
    /// The work itself; returns an error describing what failed.
    pub run: fn(&Ctx) -> Result<(), StepError>,
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    /// Human-readable description, e.g. which command exited with what.
    pub message: String,
    /// Exit code of the failing child process, if there was one.
    pub code: Option<i32>,
}

impl StepError {
    /// A failure that did not come from a child's exit status.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Shared state handed to every step.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The cargo binary to run: `$CARGO` (the one that invoked xtask), or
    /// `cargo` from `PATH` if unset.
    pub cargo: OsString,
    /// Workspace root; every command runs with this as its working directory.
    pub root: PathBuf,
    /// Extra command-line arguments for steps that forward them (`bench`).
    pub extra_args: Vec<String>,
}

impl Ctx {
    /// Builds the context from the environment of the running process.
    pub fn from_env() -> Self {
        let cargo = std::env::var_os("CARGO")
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| OsString::from("cargo"));
        Self {
            cargo,
            root: workspace_root(),
            extra_args: Vec::new(),
        }
    }

    /// Returns the context with `extra_args` replaced.
    pub fn with_extra_args(mut self, extra_args: Vec<String>) -> Self {
        self.extra_args = extra_args;
        self
    }

    /// A [`Command`] for an arbitrary program (e.g. `node`, `npm`), run from
    /// the workspace root. Colour is left to cargo's own detection so CI logs
    /// stay greppable.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.root);
        cmd
    }

    /// A [`Command`] running the invoking cargo with `args`.
    pub fn cargo<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(&self.cargo);
        cmd.args(args);
        cmd
    }

    /// Echoes `cmd`, runs it with inherited stdio, and maps a non-zero exit
    /// status (or a failure to start) to a [`StepError`].
    pub fn run(&self, cmd: &mut Command) -> Result<(), StepError> {
        let shown = display_command(cmd);
        eprintln!("    $ {shown}");
        let status = cmd
            .status()
            .map_err(|e| StepError::new(format!("could not start `{shown}`: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(StepError {
                message: format!("`{shown}` failed ({status})"),
                code: status.code(),
            })
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// Renders a command as a shell-like line for logs, showing any explicit
/// environment overrides first and `cargo` instead of a full cargo path.
fn display_command(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter(|(k, _)| *k != "CARGO_TERM_COLOR")
        .filter_map(|(k, v)| Some(format!("{}={:?}", k.to_string_lossy(), v?)))
        .collect();
    let program = Path::new(cmd.get_program());
    let program = match program.file_stem() {
        Some(stem) if stem == "cargo" => "cargo".into(),
        _ => program.to_string_lossy(),
    };
    parts.push(program.into_owned());
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// What happened to one step, for the summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Ran and succeeded, taking this long.
    Ok(Duration),
    /// Ran and failed, taking this long.
    Failed(Duration),
    /// Not run because an earlier step failed.
    Skipped,
}

/// Formats the single summary line, e.g.
/// `==> ci: FAILED | fmt ok 0.3s | clippy FAILED 9.1s | test skipped | total 9.4s`.
fn summary_line(pipeline: &str, results: &[(&str, Outcome)], total: Duration) -> String {
    let failed = results.iter().any(|(_, o)| matches!(o, Outcome::Failed(_)));
    let mut line = format!("==> {pipeline}: {}", if failed { "FAILED" } else { "ok" });
    for (name, outcome) in results {
        let part = match outcome {
            Outcome::Ok(d) => format!("{name} ok {:.1}s", d.as_secs_f64()),
            Outcome::Failed(d) => format!("{name} FAILED {:.1}s", d.as_secs_f64()),
            Outcome::Skipped => format!("{name} skipped"),
        };
        line.push_str(" | ");
        line.push_str(&part);
    }
    line.push_str(&format!(" | total {:.1}s", total.as_secs_f64()));
    line
}

/// Runs `steps` in order, stopping at the first failure.
///
/// Prints `==> name` before each step and one summary line with per-step
/// timings at the end. On failure the last line names the failed step, and
/// the returned exit code is the failing child's code (or 1).
pub fn run_steps(pipeline: &str, ctx: &Ctx, steps: &[Step]) -> ExitCode {
    let start = Instant::now();
    let mut results: Vec<(&str, Outcome)> =
        steps.iter().map(|s| (s.name, Outcome::Skipped)).collect();
    let mut failure: Option<(&str, StepError)> = None;

    for (step, result) in steps.iter().zip(results.iter_mut()) {
        eprintln!("==> {}", step.name);
        let step_start = Instant::now();
        let outcome = (step.run)(ctx);
        let elapsed = step_start.elapsed();
        match outcome {
            Ok(()) => result.1 = Outcome::Ok(elapsed),
            Err(err) => {
                result.1 = Outcome::Failed(elapsed);
                failure = Some((step.name, err));
                break;
            }
        }
    }

    eprintln!();
    eprintln!("{}", summary_line(pipeline, &results, start.elapsed()));
    match failure {
        None => ExitCode::SUCCESS,
        Some((name, err)) => {
            eprintln!("xtask: error: {pipeline} step `{name}` failed: {err}");
            let code = err
                .code
                .and_then(|c| u8::try_from(c).ok())
                .filter(|&c| c != 0)
                .unwrap_or(1);
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_marks_failure_and_skips() {
        let results = [
            ("fmt", Outcome::Ok(Duration::from_millis(300))),
            ("clippy", Outcome::Failed(Duration::from_secs(2))),
            ("test", Outcome::Skipped),
        ];
        assert_eq!(
            summary_line("ci", &results, Duration::from_millis(2300)),
            "==> ci: FAILED | fmt ok 0.3s | clippy FAILED 2.0s | test skipped | total 2.3s"
        );
    }

    #[test]
    fn summary_all_ok() {
        let results = [("fmt", Outcome::Ok(Duration::from_secs(1)))];
        assert_eq!(
            summary_line("ci", &results, Duration::from_secs(1)),
            "==> ci: ok | fmt ok 1.0s | total 1.0s"
        );
    }

    #[test]
    fn display_shows_env_and_short_cargo() {
        let ctx = Ctx {
            cargo: OsString::from("/opt/rust/bin/cargo"),
            root: PathBuf::from("."),
            extra_args: Vec::new(),
        };
        let mut cmd = ctx.cargo(["doc", "--no-deps"]);
        cmd.env("RUSTDOCFLAGS", "-D warnings");
        assert_eq!(
            display_command(&cmd),
            "RUSTDOCFLAGS=\"-D warnings\" cargo doc --no-deps"
        );
    }

    #[test]
    fn failing_step_stops_the_run() {
        fn bad(_: &Ctx) -> Result<(), StepError> {
            Err(StepError {
                message: "boom".into(),
                code: Some(3),
            })
        }
        fn unreachable_step(_: &Ctx) -> Result<(), StepError> {
            panic!("must not run after a failure");
        }
        let ctx = Ctx::from_env();
        let steps = [
            Step {
                name: "bad",
                run: bad,
            },
            Step {
                name: "never",
                run: unreachable_step,
            },
        ];
        assert_eq!(run_steps("test", &ctx, &steps), ExitCode::from(3));
    }
}
