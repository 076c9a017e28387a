//! The summarizer's work in tokens: a provider that counts what passes
//! through it, with the caller's token counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use condense_core::Usage;
use condense_summarizer::{Completion, CompletionRequest, EventSink, Provider, ProviderError};

/// Counts the tokens of a text (the summarizer's prompts and answers).
pub type TextTokens = Arc<dyn Fn(&str) -> u64 + Send + Sync>;

/// The summarizer's work so far, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummarizerTokens {
    /// Prompt tokens sent (system and user text).
    pub input: u64,
    /// Tokens answered.
    pub output: u64,
}

/// A provider that counts what passes through it.
pub(super) struct Metered {
    pub(super) inner: Arc<dyn Provider>,
    pub(super) tokens: TextTokens,
    pub(super) input: Arc<AtomicU64>,
    pub(super) output: Arc<AtomicU64>,
}

#[async_trait]
impl Provider for Metered {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let input = (self.tokens)(request.system.as_deref().unwrap_or_default())
            + (self.tokens)(&request.user);
        self.input.fetch_add(input, Ordering::Relaxed);
        let mut done = self.inner.complete(request, events).await?;
        let output = (self.tokens)(&done.text);
        self.output.fetch_add(output, Ordering::Relaxed);
        done.usage = Usage {
            input_tokens: input,
            output_tokens: output,
            cost: done.usage.cost,
        };
        Ok(done)
    }
}
