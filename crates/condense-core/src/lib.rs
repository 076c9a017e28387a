//! condense-core: the engine's logic, with no I/O, no clock and no threads.
//!
//! Given a branch's messages and the pruning [`State`](state::State), [`render()`]
//! computes exactly what the model should see, as an edit plan over the input.
//! Time and ids come in as values, so the same inputs always give
//! byte-identical outputs; that is what keeps the provider's prompt cache warm.
//!
//! See `docs/ARCHITECTURE.md` for the map of modules.

pub mod config;
pub mod dedup;
pub mod diagnostics;
pub mod js;
pub mod message;
pub mod occurrence;
pub mod protect;
pub mod records;
pub mod render;
pub mod state;
pub mod text;

pub use render::{render, Render, RenderPlan, RenderSettings};
pub mod budget;
pub mod capture;
pub mod chains;
pub mod compress;
pub mod flush;
pub mod fxhash;
pub mod metrics;
pub mod query;
pub mod refs;
