//! OpenAI-compatible chat completions (`POST <base>/chat/completions`,
//! streaming): OpenAI itself and the many servers that speak its API
//! (OpenRouter, vLLM, llama.cpp, Ollama, …).

use async_trait::async_trait;
use condense_core::Usage;
use serde_json::{json, Value};

use super::{join_url, next_events, post_json, ApiKey, Pricing, SseParser};
use crate::provider::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, StopReason, StreamEvent,
};
use condense_core::ThinkingLevel;

/// Settings of an [`OpenAiCompatible`] provider.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The bearer token.
    pub api_key: ApiKey,
    /// Prices for the cost figure; `None` reports a cost of zero.
    pub pricing: Option<Pricing>,
}

impl Default for OpenAiConfig {
    /// OpenAI's API, key from `OPENAI_API_KEY`.
    fn default() -> Self {
        OpenAiConfig {
            base_url: "https://api.openai.com/v1".into(),
            api_key: ApiKey::Env("OPENAI_API_KEY".into()),
            pricing: None,
        }
    }
}

/// A provider speaking the OpenAI chat-completions API with streaming.
///
/// The request asks for `stream_options.include_usage` so the last chunk
/// carries token counts. A thinking level other than `default` and `off`
/// becomes `reasoning_effort` (`xhigh` is sent as `high`, the highest value
/// the API widely accepts); `max_tokens` is sent only when the request sets
/// it. Streamed `reasoning_content` / `reasoning` deltas are reported as
/// thinking. A stream that ends without a `finish_reason` is a transient
/// failure.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiCompatible {
    /// A provider with its own HTTP client.
    pub fn new(config: OpenAiConfig) -> OpenAiCompatible {
        OpenAiCompatible::with_client(config, reqwest::Client::new())
    }

    /// A provider using `client` (to share a connection pool, or set
    /// proxies and connect timeouts).
    pub fn with_client(config: OpenAiConfig, client: reqwest::Client) -> OpenAiCompatible {
        OpenAiCompatible { config, client }
    }

    /// The settings.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &CompletionRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &request.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": request.user }));
        let mut body = json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if let Some(effort) = request.thinking.effort() {
            body["reasoning_effort"] = json!(match effort {
                ThinkingLevel::Minimal => "minimal",
                ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                _ => "high",
            });
        }
        if let Some(max) = request.max_tokens {
            body["max_tokens"] = json!(max);
        }
        body
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::Stop,
        "length" => StopReason::Length,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        other => StopReason::Other(other.to_owned()),
    }
}

#[async_trait]
impl Provider for OpenAiCompatible {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let key = self.config.api_key.resolve()?;
        let url = join_url(&self.config.base_url, "chat/completions");
        let headers: Vec<(&str, String)> = key
            .map(|k| ("authorization", format!("Bearer {k}")))
            .into_iter()
            .collect();
        let body = self.request_body(&request);
        let cancel = &request.cancel;
        let mut response = post_json(&self.client, &url, &headers, &body, cancel).await?;

        let pricing = self.config.pricing.unwrap_or_default();
        let mut parser = SseParser::new();
        let mut text = String::new();
        let mut stop = None;
        let mut usage: Option<Usage> = None;
        'read: while let Some(batch) = next_events(&mut response, &mut parser, cancel).await? {
            for event in batch {
                if event.data.trim() == "[DONE]" {
                    break 'read;
                }
                let Ok(chunk) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                if let Some(error) = chunk.get("error") {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error event in stream");
                    return Err(ProviderError::transient(message).with_usage(usage));
                }
                if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
                    let input = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
                    let output = u
                        .get("completion_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    let current = Usage {
                        input_tokens: input,
                        output_tokens: output,
                        cost: pricing.cost(input, output),
                    };
                    usage = Some(current);
                    events.emit(StreamEvent::Usage(current));
                }
                let choice = chunk.pointer("/choices/0");
                if let Some(delta) = choice.and_then(|c| c.get("delta")) {
                    if let Some(t) = delta.get("content").and_then(Value::as_str) {
                        if !t.is_empty() {
                            text.push_str(t);
                            events.text(t);
                        }
                    }
                    let thinking = delta
                        .get("reasoning_content")
                        .or_else(|| delta.get("reasoning"))
                        .and_then(Value::as_str);
                    if let Some(t) = thinking.filter(|t| !t.is_empty()) {
                        events.thinking(t);
                    }
                }
                if let Some(reason) = choice
                    .and_then(|c| c.get("finish_reason"))
                    .and_then(Value::as_str)
                {
                    stop = Some(stop_reason(reason));
                }
            }
        }
        let Some(stop_reason) = stop else {
            return Err(
                ProviderError::transient("stream ended before the model finished")
                    .with_usage(usage),
            );
        };
        Ok(Completion {
            text,
            stop_reason,
            usage: usage.unwrap_or_default(),
        })
    }
}
