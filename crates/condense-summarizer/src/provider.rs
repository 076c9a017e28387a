//! The plugin point for LLMs: [`Provider`] and the values it exchanges.
//!
//! A provider answers one [`CompletionRequest`] at a time. While it works it
//! reports what it receives through an [`EventSink`] (text and thinking
//! deltas, usage); when the answer is complete it returns a [`Completion`],
//! or a [`ProviderError`] saying whether the failure is about credentials,
//! is worth retrying elsewhere, or was a cancellation.
//!
//! Providers do not implement timeouts, retries or fallbacks: the
//! [`Summarizer`](crate::Summarizer) wraps every call with those. What a
//! provider must do is stop promptly when the request's
//! [`cancel`](CompletionRequest::cancel) token fires (or when its future is
//! dropped) and report every event as soon as it arrives, since events are
//! what keep the idle timeout from firing.

use async_trait::async_trait;
use condense_core::{ThinkingLevel, Usage};
use tokio::sync::mpsc;

use crate::cancel::CancelToken;

/// One completion call.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// The model id, as the provider's API names it.
    pub model: String,
    /// System instructions, if any. The summarizer sends none: like
    /// pi-condense it puts its instructions at the top of the user message.
    pub system: Option<String>,
    /// The user message.
    pub user: String,
    /// Thinking effort.
    pub thinking: ThinkingLevel,
    /// Cap on output tokens; `None` lets the provider choose.
    pub max_tokens: Option<u32>,
    /// Fires when the caller gives up on this call (user abort, timeout).
    pub cancel: CancelToken,
}

impl CompletionRequest {
    /// A request for `model` with `user` text and every other field at its
    /// default.
    pub fn new(model: impl Into<String>, user: impl Into<String>) -> CompletionRequest {
        CompletionRequest {
            model: model.into(),
            system: None,
            user: user.into(),
            thinking: ThinkingLevel::Default,
            max_tokens: None,
            cancel: CancelToken::new(),
        }
    }
}

/// Something a provider received while a call was in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A piece of the model's thinking.
    ThinkingDelta(String),
    /// Usage so far (cumulative, not a delta).
    Usage(Usage),
}

/// Where a provider reports [`StreamEvent`]s.
///
/// Reporting never blocks and never fails: events sent after the caller
/// stopped listening are dropped.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<StreamEvent>>,
}

impl EventSink {
    /// A sink and the receiver its events arrive on.
    pub fn channel() -> (EventSink, mpsc::UnboundedReceiver<StreamEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink { tx: Some(tx) }, rx)
    }

    /// A sink that drops everything.
    pub fn discard() -> EventSink {
        EventSink { tx: None }
    }

    /// Reports one event.
    pub fn emit(&self, event: StreamEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }

    /// Reports a text delta.
    pub fn text(&self, delta: impl Into<String>) {
        self.emit(StreamEvent::TextDelta(delta.into()));
    }

    /// Reports a thinking delta.
    pub fn thinking(&self, delta: impl Into<String>) {
        self.emit(StreamEvent::ThinkingDelta(delta.into()));
    }
}

/// Why a model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its answer.
    Stop,
    /// It hit the output-token cap: the text is truncated.
    Length,
    /// It wanted to call a tool.
    ToolUse,
    /// Anything else the API reported, verbatim.
    Other(String),
}

/// A finished call.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer's text blocks, joined by `\n`.
    pub text: String,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Tokens and cost of the call.
    pub usage: Usage,
}

/// What kind of failure a [`ProviderError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderErrorKind {
    /// Credentials are missing or were refused. Retrying on another model
    /// would not help, so this never engages the fallback.
    Auth,
    /// An outage-shaped failure: network error, rate limit, server error,
    /// broken stream. The fallback may retry it on the session model.
    Transient,
    /// The request's cancel token fired.
    Aborted,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What kind of failure.
    pub kind: ProviderErrorKind,
    /// For the user.
    pub message: String,
    /// Usage reported before the failure, if any.
    pub usage: Option<Usage>,
}

impl ProviderError {
    /// An [`Auth`](ProviderErrorKind::Auth) failure.
    pub fn auth(message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind: ProviderErrorKind::Auth,
            message: message.into(),
            usage: None,
        }
    }

    /// A [`Transient`](ProviderErrorKind::Transient) failure.
    pub fn transient(message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind: ProviderErrorKind::Transient,
            message: message.into(),
            usage: None,
        }
    }

    /// An [`Aborted`](ProviderErrorKind::Aborted) call.
    pub fn aborted() -> ProviderError {
        ProviderError {
            kind: ProviderErrorKind::Aborted,
            message: "summarizer call aborted".into(),
            usage: None,
        }
    }

    /// The same error carrying `usage`.
    pub fn with_usage(mut self, usage: Option<Usage>) -> ProviderError {
        self.usage = usage;
        self
    }
}

/// An LLM backend: answers one completion request with a stream of events
/// and a final result.
///
/// Implementations: [`OpenAiCompatible`](crate::OpenAiCompatible),
/// [`Anthropic`](crate::Anthropic), [`Extractive`](crate::Extractive), the pi
/// host's forwarder, and test doubles. The trait is object-safe; the
/// summarizer holds providers as `Arc<dyn Provider>`.
///
/// Contract:
/// - report every received delta through `events` as it arrives;
/// - return `Err` with [`ProviderErrorKind::Aborted`] (or simply stop being
///   polled) once `request.cancel` fires;
/// - return errors for API-level failures (pi-ai's `error` and `aborted`
///   stop reasons included) rather than a [`Completion`];
/// - do not retry, time out or fall back: the summarizer does that.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Provider: Send + Sync {
    /// Runs one completion.
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError>;
}
