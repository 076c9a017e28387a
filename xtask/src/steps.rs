//! The individual steps and the ordered pipelines built from them.
//!
//! To add a step (for example an end-to-end test that needs Node), write a
//! function with the [`Step::run`] signature and append it to a list:
//!
//! ```ignore
//! fn e2e(ctx: &Ctx) -> Result<(), StepError> {
//!     ctx.run(ctx.command("npm").args(["ci"]).current_dir(ctx.root.join("e2e")))?;
//!     ctx.run(ctx.command("node").args(["e2e/run.mjs"]))
//! }
//! // ... then add `Step { name: "e2e", run: e2e }` to `CI_STEPS`.
//! ```

use crate::runner::{Ctx, Step, StepError};

/// The `cargo xtask ci` pipeline, run in this order.
pub const CI_STEPS: &[Step] = &[
    Step {
        name: "fmt",
        run: fmt,
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
        name: "doc",
        run: doc,
    },
];

/// The `cargo xtask bench` pipeline.
pub const BENCH_STEPS: &[Step] = &[Step {
    name: "bench",
    run: bench,
}];

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

/// `cargo test --workspace`: lib, bin and integration tests plus doc tests.
///
/// Output is passed through untouched so CI can read the `test result:` lines.
fn test(ctx: &Ctx) -> Result<(), StepError> {
    ctx.run(&mut ctx.cargo(["test", "--workspace"]))
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
        assert_eq!(names, ["fmt", "clippy", "test", "doc"]);
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
