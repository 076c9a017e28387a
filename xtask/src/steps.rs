//! The individual steps and the ordered pipelines built from them.
//!
//! To add a step, write a function with the [`Step::run`] signature and
//! append `Step { name, run }` to a list below.

use crate::runner::{Ctx, Step, StepError};

/// The `cargo xtask ci` pipeline, run in this order.
pub const CI_STEPS: &[Step] = &[
    Step {
        name: "fmt",
        run: fmt,
    },
    Step {
        name: "layers",
        run: crate::layers::layers,
    },
    Step {
        name: "clippy",
        run: clippy,
    },
    Step {
        name: "test",
        run: test,
    },
    Step {
        name: "dist",
        run: crate::dist::dist,
    },
    Step {
        name: "e2e",
        run: e2e,
    },
    Step {
        name: "doc",
        run: doc,
    },
];

/// The `cargo xtask dist` pipeline.
pub const DIST_STEPS: &[Step] = &[Step {
    name: "dist",
    run: crate::dist::dist,
}];

/// The `cargo xtask layers` pipeline.
pub const LAYERS_STEPS: &[Step] = &[Step {
    name: "layers",
    run: crate::layers::layers,
}];

/// The `cargo xtask bench` pipeline.
pub const BENCH_STEPS: &[Step] = &[Step {
    name: "bench",
    run: bench,
}];

/// The `cargo xtask soak` pipeline.
pub const SOAK_STEPS: &[Step] = &[Step {
    name: "soak",
    run: soak,
}];

/// The long run's knobs (environment variable, default), kept when set.
pub const SOAK_DEFAULTS: &[(&str, &str)] = &[
    ("CONDENSE_SOAK_SECONDS", "600"),
    ("CONDENSE_SOAK_SESSIONS", "1000000"),
    ("CONDENSE_SOAK_STEPS", "60"),
    ("CONDENSE_SOAK_MAX_OUTPUT", "67108864"),
];

/// `cargo test --release -p condense-store --test simulation -- --nocapture`
/// with the long run's knobs: simulated sessions until the time budget is
/// spent (docs/reliability.md), tool outputs up to 64 MiB.
fn soak(ctx: &Ctx) -> Result<(), StepError> {
    let mut cmd = ctx.cargo([
        "test",
        "--release",
        "-p",
        "condense-store",
        "--test",
        "simulation",
        "--",
        "--nocapture",
    ]);
    for (name, default) in SOAK_DEFAULTS {
        if std::env::var_os(name).filter(|v| !v.is_empty()).is_none() {
            cmd.env(name, default);
        }
    }
    ctx.run(&mut cmd)
}

/// `cargo fmt --all --check`: fails if any file is not rustfmt-clean.
fn fmt(ctx: &Ctx) -> Result<(), StepError> {
    ctx.run(&mut ctx.cargo(["fmt", "--all", "--check"]))
}

/// `cargo clippy --workspace --all-targets -- -D warnings`.
fn clippy(ctx: &Ctx) -> Result<(), StepError> {
    ctx.run(&mut ctx.cargo([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
}

/// The crates whose tests drive a real harness (pi, OpenCode, Claude Code
/// and Codex through the CLI's `condense claude` and `condense codex`) or
/// run the TypeScript client under Node (condense-engine's `client_*`);
/// they run in the `e2e` step.
const E2E_PACKAGES: [&str; 4] = [
    "condense-engine",
    "condense-host-pi",
    "condense-host-opencode",
    "condense-cli",
];

/// Environment variable naming the Node + pi cache of the end-to-end tests.
const E2E_CACHE_ENV: &str = "CONDENSE_E2E_CACHE";

/// Developer-only switch that makes the end-to-end tests skip; never honoured
/// in CI, so the `e2e` step removes it.
const E2E_SKIP_ENV: &str = "CONDENSE_SKIP_E2E";

/// `cargo test --workspace --exclude condense-engine --exclude
/// condense-host-pi --exclude condense-host-opencode --exclude
/// condense-cli`: lib, bin and
/// integration tests plus doc tests of every other crate.
///
/// The host crates' tests (which include the end-to-end tests) run in the
/// `e2e` step instead, so they run once. Output is passed through
/// untouched so CI can read the `test result:` lines.
fn test(ctx: &Ctx) -> Result<(), StepError> {
    let mut args = vec!["test", "--workspace"];
    for package in E2E_PACKAGES {
        args.extend(["--exclude", package]);
    }
    ctx.run(&mut ctx.cargo(args))
}

/// `cargo test -p condense-engine -p condense-host-pi -p
/// condense-host-opencode -p condense-cli -- --nocapture`: every test of
/// those crates, including the end-to-end tests against real pi, real
/// OpenCode, real Claude Code and real Codex, and the client's under Node.
///
/// The tests install Node (22 and 20), pi (0.83, 1.6, 0.73), OpenCode
/// (1.18.33), Claude Code (2.1.328), Codex (0.169.0) and verdaccio (6.8.0) from the npm registry with the system `npm` into `$CONDENSE_E2E_CACHE` (default `<root>/.cache/pi-e2e`, kept if
/// already set) and fail if they cannot; `CONDENSE_SKIP_E2E` is removed so CI
/// never skips them. The install tests (`e2e_install.rs`) install the
/// packages the `dist` step packed.
fn e2e(ctx: &Ctx) -> Result<(), StepError> {
    let mut args = vec!["test"];
    for package in E2E_PACKAGES {
        args.extend(["-p", package]);
    }
    args.extend(["--", "--nocapture"]);
    let mut cmd = ctx.cargo(args);
    if std::env::var_os(E2E_CACHE_ENV)
        .filter(|v| !v.is_empty())
        .is_none()
    {
        cmd.env(E2E_CACHE_ENV, ctx.root.join(".cache").join("pi-e2e"));
    }
    cmd.env_remove(E2E_SKIP_ENV);
    ctx.run(&mut cmd)
}

/// `cargo doc --workspace --no-deps` with rustdoc warnings denied.
///
/// Any `RUSTDOCFLAGS` already in the environment are kept and `-D warnings`
/// is appended.
fn doc(ctx: &Ctx) -> Result<(), StepError> {
    let mut cmd = ctx.cargo(["doc", "--workspace", "--no-deps"]);
    cmd.env(
        "RUSTDOCFLAGS",
        with_deny_warnings(std::env::var("RUSTDOCFLAGS").ok()),
    );
    ctx.run(&mut cmd)
}

/// `cargo bench --workspace`, followed by any extra `cargo xtask bench` args.
fn bench(ctx: &Ctx) -> Result<(), StepError> {
    let mut cmd = ctx.cargo(["bench", "--workspace"]);
    cmd.args(&ctx.extra_args);
    ctx.run(&mut cmd)
}

/// Appends `-D warnings` to existing rustdoc flags (if any).
fn with_deny_warnings(existing: Option<String>) -> String {
    match existing.as_deref().map(str::trim) {
        Some(flags) if !flags.is_empty() => format!("{flags} -D warnings"),
        _ => "-D warnings".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_order_is_fixed() {
        let names: Vec<_> = CI_STEPS.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["fmt", "layers", "clippy", "test", "dist", "e2e", "doc"]
        );
    }

    #[test]
    fn soak_runs_the_simulation_with_long_knobs() {
        let names: Vec<_> = SOAK_STEPS.iter().map(|s| s.name).collect();
        assert_eq!(names, ["soak"]);
        assert!(SOAK_DEFAULTS
            .iter()
            .all(|(k, v)| k.starts_with("CONDENSE_SOAK_") && v.parse::<u64>().is_ok()));
    }

    #[test]
    fn rustdocflags_are_extended() {
        assert_eq!(with_deny_warnings(None), "-D warnings");
        assert_eq!(with_deny_warnings(Some("  ".into())), "-D warnings");
        assert_eq!(
            with_deny_warnings(Some("--cfg docsrs".into())),
            "--cfg docsrs -D warnings"
        );
    }
}
