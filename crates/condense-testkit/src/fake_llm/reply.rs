//! The scripted replies: what the fake model answers, built step by step.

use std::time::Duration;

use serde_json::{json, Value};

/// One tool call of a scripted reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call id (`call_…`); pi echoes it back as the tool result's
    /// `tool_call_id`.
    pub id: String,
    /// Tool name, e.g. pi's built-in `read` or `bash`.
    pub name: String,
    /// The arguments as the JSON text the model "writes"; streamed in
    /// fragments.
    pub arguments: String,
}

/// One scripted answer of the fake model.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(super) reasoning: Option<String>,
    pub(super) text: Option<String>,
    pub(super) tool_calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<(u64, u64)>,
    cache: Option<(u64, u64)>,
    pub(super) delay: Duration,
    pub(super) http_error: Option<(u16, String)>,
    pub(super) fragment_chars: usize,
}

impl Reply {
    fn empty() -> Self {
        Self {
            reasoning: None,
            text: None,
            tool_calls: Vec::new(),
            finish_reason: None,
            usage: None,
            cache: None,
            delay: Duration::ZERO,
            http_error: None,
            fragment_chars: 24,
        }
    }

    /// A plain text answer (`finish_reason: "stop"`).
    pub fn text(text: impl Into<String>) -> Self {
        Self::empty().with_text(text)
    }

    /// An answer that calls one tool (`finish_reason: "tool_calls"`).
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::empty().and_tool_call(id, name, arguments)
    }

    /// An HTTP error answer (no SSE), with `message` inside an OpenAI-style
    /// `{"error": {...}}` body. Note that pi retries some statuses.
    pub fn http_error(status: u16, message: impl Into<String>) -> Self {
        let mut reply = Self::empty();
        reply.http_error = Some((status, message.into()));
        reply
    }

    /// Adds (or replaces) the text part, streamed before any tool call.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Adds reasoning streamed as `delta.reasoning_content` before the text
    /// (pi turns it into a `thinking` block).
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Adds one more tool call (parallel tool calls in one reply).
    pub fn and_tool_call(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.and_tool_call_raw(id, name, arguments.to_string())
    }

    /// Adds a tool call whose arguments are sent verbatim (may be malformed
    /// JSON on purpose).
    pub fn and_tool_call_raw(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.tool_calls.push(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Overrides the finish reason (default: `tool_calls` when the reply has
    /// tool calls, else `stop`). `length` makes pi see a truncated answer.
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// Sets the reported usage. pi takes `prompt_tokens` as the context size
    /// (`getContextUsage`, compaction), so this scripts context pressure.
    /// Default: request body bytes / 4 and reply bytes / 4.
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Reports `read` of the prompt tokens as read from the provider's cache
    /// and `written` as written to it (`prompt_tokens_details.cached_tokens`
    /// and `.cache_write_tokens`, which pi records as `usage.cacheRead` and
    /// `usage.cacheWrite`; the rest of the prompt is its `usage.input`).
    pub fn with_cache(mut self, read: u64, written: u64) -> Self {
        self.cache = Some((read, written));
        self
    }

    /// Waits this long before answering (for timeout tests; keep it below
    /// the client's patience and the test's timeout).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Characters per streamed text or argument fragment (default 24).
    pub fn with_fragment_chars(mut self, chars: usize) -> Self {
        self.fragment_chars = chars.max(1);
        self
    }

    /// The tool calls of this reply.
    pub fn tool_calls(&self) -> &[ToolCall] {
        &self.tool_calls
    }

    pub(super) fn finish_reason(&self) -> &str {
        match &self.finish_reason {
            Some(reason) => reason,
            None if self.tool_calls.is_empty() => "stop",
            None => "tool_calls",
        }
    }

    pub(super) fn usage_json(&self, request_bytes: usize) -> Value {
        let (prompt, completion) = self.usage.unwrap_or_else(|| {
            let out = self.text.as_deref().map_or(0, str::len)
                + self.reasoning.as_deref().map_or(0, str::len)
                + self
                    .tool_calls
                    .iter()
                    .map(|c| c.arguments.len())
                    .sum::<usize>();
            ((request_bytes / 4).max(1) as u64, (out / 4).max(1) as u64)
        });
        let mut usage = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        });
        if let Some((read, written)) = self.cache {
            usage["prompt_tokens_details"] =
                json!({"cached_tokens": read, "cache_write_tokens": written});
        }
        usage
    }
}
