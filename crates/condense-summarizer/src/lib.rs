//! condense-summarizer: the async edge of condense.
//!
//! Not built yet. This crate will hold the `Provider` plugin trait, the batch
//! and range-fusion prompts, the usable-summary guard, idle and ceiling
//! timeouts, the sticky fallback controller and the concurrent job runner.
//! Until then it exports nothing.
