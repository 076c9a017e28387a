//! condense's session engine: what every host drives, knowing no harness.
//!
//! - [`session`]: one session's state machine ([`Engine`]): replay on start,
//!   capture at turn end, budget gates, render with incremental message
//!   sync, query, and the engine's side of a flush. Its copy of the context
//!   holds the summaries a flush wrote to the session file before the
//!   host's list does (`injected`), so what the model is sent is what a
//!   reload renders.
//! - [`flush`]: **the** flush driver. Sans-IO steps (plan → summarizer jobs
//!   → apply → chain compression with range fusion → effects) and one async
//!   runner, [`flush::run_flush`], that runs the LLM calls between the steps
//!   with no state borrowed. The pi sidecar, `/pruner now` and `compact`,
//!   `condense compact` and the session generator all go through it.
//! - [`drive`]: an engine driven through a recorded session as the live
//!   sidecar would (what `condense simulate` replays).
//! - [`host`]: what a host does at the events that end in a flush (turn
//!   end, an assistant's reply): the engine's call, then the flush its
//!   trigger fired, through the driver.
//! - [`switch`]: the cache-aware policy at each call (whether to show what
//!   flushes prepared), with time and model as values from the host.
//! - [`query`]: `context_tree_query`'s answer: the index, then the whole
//!   branch from the session file for a raw id the index does not know.
//! - [`protocol`]: the typed effects a host carries out; [`request`]: the
//!   typed requests a shim sends (one `Request` enum, read in one pass).
//! - [`sidecar`]: the protocol served on JSON lines, host-neutral: the
//!   loop both hosts' sidecar binaries (pi's, OpenCode's) run, `/pruner`,
//!   the incremental `context` answer.
//!
//! Hosts (pi's and OpenCode's shims through the sidecar, the CLI directly)
//! translate their harness's events into calls here and carry out the
//! [`protocol::Effect`]s that come back.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod drive;
pub mod flush;
pub mod host;
mod injected;
mod learned_misses;
pub mod protocol;
pub mod query;
pub mod request;
pub mod session;
pub mod sidecar;
pub mod switch;
mod turns;
mod unpruned_compaction;

pub use flush::{run_flush, Blobs, ChainPolicy, Chains, Flush, FlushReport, FlushSteps};
pub use protocol::{Delivery, Effect, Effects, Placement};
pub use session::{jsonl, Engine, FlushDone, StartParams};
pub use switch::CallFacts;
