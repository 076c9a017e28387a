//! condense on the other pi lines it supports (issue #6), end to end, besides
//! the pinned 0.83 of `e2e_condense.rs`:
//!
//! * `@earendil-works/pi-coding-agent@1.6.0` on Node 22.23.3,
//! * `@mariozechner/pi-coding-agent@0.73.1` on Node 20 (the last version
//!   under the old package name; its extension loader aliases only
//!   `@mariozechner/*` imports, and it runs extension handlers on a queue
//!   the agent loop does not wait for).
//!
//! Each runs the core scenario (`support::scenario::flush_stub_and_recover`:
//! tool turns reading large files, a flush at the final text reply, stubs
//! with `t<N>` refs in the next prompt of the same session,
//! `context_tree_query` returning the original) and the budget flush at turn
//! end (`support::scenario::budget_flush_at_turn_end`), and checks that the
//! summarizer calls went through the streaming entry point that pi version
//! offers (feature-detected by the shim, `extension/llm.ts`).
//!
//! `support::pi_env` installs each target into its own directory of the e2e
//! cache. A failed install fails the test; only `CONDENSE_SKIP_E2E=1` skips.

mod support;

use support::pi_env::{require_pi_target, PiInstall, PiTarget};
use support::scenario;

fn install(target: &PiTarget) -> Option<&'static PiInstall> {
    let install = require_pi_target(target)?;
    assert_eq!(&install.target, target, "the install is the one asked for");
    Some(install)
}

/// Runs the core scenario and checks where the shim's `llm.complete` streamed.
fn core_scenario(target: PiTarget, stream_source: &str) {
    let Some(install) = install(&target) else {
        return;
    };
    let runs = scenario::flush_stub_and_recover(install);
    let line = format!("condense: llm.complete streams through {stream_source}");
    assert!(
        runs.first.output.stderr.contains(&line),
        "{target}: expected `{line}`\n{}",
        runs.first.report()
    );
}

/// pi 1.x streams through its model registry (request-time credentials); the
/// deprecated `pi-ai/compat` module is not needed.
#[test]
fn pi_1_6_core_scenario() {
    core_scenario(PiTarget::pi_1_6(), "ctx.modelRegistry.stream");
}

/// pi 0.73 has no registry `stream`; pi-ai is reachable only under its old
/// scope.
#[test]
fn pi_0_73_node_20_core_scenario() {
    core_scenario(PiTarget::pi_0_73(), "@mariozechner/pi-ai");
}

#[test]
fn pi_1_6_budget_flush_at_turn_end() {
    if let Some(install) = install(&PiTarget::pi_1_6()) {
        scenario::budget_flush_at_turn_end(install);
    }
}

/// pi 0.73 calls `context` before its `turn_end` handlers finish, or even
/// start (they queue behind `message_end`'s); the stubs must still reach the
/// very next request.
#[test]
fn pi_0_73_node_20_budget_flush_at_turn_end() {
    if let Some(install) = install(&PiTarget::pi_0_73()) {
        scenario::budget_flush_at_turn_end(install);
    }
}
