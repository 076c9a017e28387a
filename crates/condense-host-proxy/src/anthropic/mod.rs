//! The Anthropic Messages API on the wire: a request read in place
//! ([`read_request`], `wire.rs`), the engine's view of it ([`units`],
//! `view.rs`), the render written back ([`rebuild()`], `rebuild.rs`).

mod rebuild;
mod view;
mod wire;

pub use rebuild::rebuild;
pub use view::{units, units_from};
pub use wire::{read_request, read_request_after, Block, WireMemo, WireMessage, WireRequest};
