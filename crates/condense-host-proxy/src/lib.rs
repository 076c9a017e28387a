//! condense as a local API proxy: the third host, for agents that offer no
//! hook to rewrite their history but take a base URL (Claude Code through
//! `ANTHROPIC_BASE_URL`). Each request's history is mapped onto the engine
//! in process (no sidecar), rendered, and written back onto the wire with
//! only what condense rewrites changed; the answer streams back untouched.
//!
//! - [`anthropic`]: the Messages API wire format, read in place, the
//!   engine's view of it, and the render written back.
//! - [`session`]: one conversation: the engine, its event log (a pi
//!   session file under the proxy's directory) and the list it holds.
//!   Tool results are parked in the log once the engine has seen them
//!   (`log_text`): read back from it, not held in memory.
//! - [`sessions`]: which conversation a request belongs to.
//! - [`query_tool`]: `context_tree_query` as an MCP tool, answered by the
//!   proxy in place of the MCP server's placeholder.
//! - [`server`]: the HTTP side: forwarding, streaming, fail-open.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod anthropic;
mod log_text;
pub mod openai;
mod print;
pub mod query_tool;
pub mod render;
pub mod server;
pub mod session;
pub mod sessions;
mod span;
pub mod usage;
pub mod view;

pub use server::{serve, ProxyConfig, Timeouts};
pub use session::{Credentials, Prepared, ProxySession, SessionOptions};
pub use sessions::Sessions;
pub use span::WireError;
