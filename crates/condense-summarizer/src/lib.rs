//! condense-summarizer: the async edge of condense.
//!
//! Everything between a flush plan's [`SummaryJob`]s and their
//! [`JobResult`]s:
//!
//! - [`Provider`]: the plugin trait for LLMs (one completion request in, a
//!   stream of events and a final [`Completion`] out). Implementations here:
//!   [`OpenAiCompatible`] and [`Anthropic`] over HTTP with streaming, and
//!   [`Extractive`], which needs no model at all.
//! - [`prompt`]: the batch prompt with its `[[N:tool]]` labels and the
//!   range-fusion prompt.
//! - [`Summarizer`]: one summarization with idle and ceiling [`Timeouts`],
//!   the usable-summary guard ([`is_usable_summary`]), failure
//!   classification ([`FailureKind`]) and the sticky [`FallbackController`].
//! - [`Summarizer::run_jobs`]: a plan's jobs with bounded concurrency,
//!   results in job order, [`JobResult::NotRun`] after the first failure.
//!
//! Nothing here knows pi or files, nothing prints: user-facing messages come
//! back as core [`Notice`] values. Time comes from tokio (and an injected
//! [`Clock`] for the fallback), so tests run under paused time.
//!
//! [`Notice`]: condense_core::Notice
//! [`SummaryJob`]: condense_core::SummaryJob
//! [`JobResult`]: condense_core::JobResult
//! [`JobResult::NotRun`]: condense_core::JobResult::NotRun

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cancel;
pub mod extractive;
pub mod fallback;
pub mod http;
pub mod notice;
pub mod prompt;
pub mod provider;
pub mod runner;
pub mod summarizer;

pub use cancel::CancelToken;
pub use extractive::Extractive;
pub use fallback::{
    Clock, FallbackController, ManualClock, Route, TargetChoice, TokioClock, Transition,
    PROBE_COOLDOWN,
};
pub use http::{Anthropic, AnthropicConfig, ApiKey, OpenAiCompatible, OpenAiConfig, Pricing};
pub use provider::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, ProviderErrorKind,
    StopReason, StreamEvent,
};
pub use runner::{ProgressEvent, RunOptions, RunReport};
pub use summarizer::{
    is_usable_summary, FailureKind, JobOutcome, Summarizer, SummarizerSettings, Target, Timeouts,
};
