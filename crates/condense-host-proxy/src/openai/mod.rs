//! OpenAI's APIs on the wire: Responses (Codex) and Chat Completions (any
//! OpenAI-compatible client), both a flat list of items read in place
//! ([`read_request`], `wire.rs`), the engine's view of it ([`units`],
//! `view.rs`), and the render written back ([`rebuild()`], `rebuild.rs`).

mod rebuild;
mod view;
mod wire;

pub use rebuild::rebuild;
pub use view::{units, units_from};
pub use wire::{
    read_request, read_request_after, Call, Format, Item, ItemsMemo, ItemsRequest, Output, Side,
};
