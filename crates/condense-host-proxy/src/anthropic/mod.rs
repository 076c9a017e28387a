//! The Anthropic Messages API on the wire: a request read in place
//! ([`read_request`], `wire.rs`), the engine's view of it ([`units`],
//! `view.rs`), the render written back ([`rebuild()`], `rebuild.rs`), and
//! the streamed answer's usage ([`UsageTee`], `sse.rs`).

mod rebuild;
mod sse;
mod view;
mod wire;

pub(crate) use rebuild::text_of;
pub use rebuild::{name_query_tool, rebuild, wire_text, HostList, RebuildError};
pub use sse::{Usage, UsageTee};
pub use view::{
    held_view, holds, result_view, units, units_from, with_facts, with_timestamp, Part, Unit,
    MCP_QUERY_TOOL,
};
pub use wire::{
    read_request, read_request_after, Block, WireError, WireMemo, WireMessage, WireRequest,
};
