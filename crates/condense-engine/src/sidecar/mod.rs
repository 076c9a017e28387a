//! The sidecar every host runs: the protocol of docs/protocol.md served on
//! JSON lines, host-neutral. A host's binary starts [`serve`] on its stdio
//! (reading stdin with [`BlockingStdin`]); what differs between hosts (pi's
//! extension API, OpenCode's plugin hooks) lives in their shims, which
//! translate the harness's events into these requests.
//!
//! - [`server`]: the serving loop, the engine behind its lock, the session
//!   hold, flushes run with the summarizer's LLM calls sent to the shim.
//! - `outbox`: lines out, our own requests, [`ShimProvider`].
//! - `lines`: reading a line within [`MAX_LINE`], error answers.
//! - [`answer`]: the `context` answer, incremental against the shim's.
//! - `commands`: `/pruner` (every subcommand, answered as effects).
//! - [`stdio`]: stdin read on the calling thread.

pub mod answer;
mod commands;
mod lines;
mod outbox;
pub mod server;
pub mod stdio;

pub use answer::ContextAnswers;
pub use lines::MAX_LINE;
pub use lines::OUT_OF_SYNC;
pub use outbox::ShimProvider;
pub use server::{checked_context, context_answer, serve, PROTOCOL};
pub use stdio::BlockingStdin;
