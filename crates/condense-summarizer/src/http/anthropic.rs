//! Anthropic Messages (`POST <base>/v1/messages`, streaming).

use async_trait::async_trait;
use condense_core::Usage;
use serde_json::{json, Value};

use super::{join_url, next_events, post_json, ApiKey, Pricing, SseParser};
use crate::provider::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, StopReason, StreamEvent,
};
use condense_core::ThinkingLevel;

/// Settings of an [`Anthropic`] provider.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The API root; `/v1/messages` is appended.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: ApiKey,
    /// The `anthropic-version` header.
    pub version: String,
    /// Output-token cap when the request sets none (the API requires one).
    pub default_max_tokens: u32,
    /// Prices for the cost figure; `None` reports a cost of zero.
    pub pricing: Option<Pricing>,
    /// Headers sent as they are with every call (a proxy passes on its
    /// client's `authorization` and `anthropic-beta`).
    pub extra_headers: Vec<(String, String)>,
}

impl Default for AnthropicConfig {
    /// Anthropic's API, key from `ANTHROPIC_API_KEY`, 4,096 output tokens.
    fn default() -> Self {
        AnthropicConfig {
            base_url: "https://api.anthropic.com".into(),
            api_key: ApiKey::Env("ANTHROPIC_API_KEY".into()),
            version: "2023-06-01".into(),
            default_max_tokens: 4096,
            pricing: None,
            extra_headers: Vec::new(),
        }
    }
}

/// A provider speaking Anthropic's Messages API with streaming.
///
/// Thinking levels other than `default` and `off` enable extended thinking
/// with a token budget ([`Anthropic::thinking_budget`]); the budget is added
/// on top of the output cap so the answer keeps its full allowance. Text
/// blocks are joined by `\n`. `error` events are auth failures when the API
/// says `authentication_error` or `permission_error`, else transient. A
/// stream that ends before `message_stop` is a transient failure.
#[derive(Debug, Clone)]
pub struct Anthropic {
    config: AnthropicConfig,
    client: reqwest::Client,
}

impl Anthropic {
    /// A provider with its own HTTP client.
    pub fn new(config: AnthropicConfig) -> Anthropic {
        Anthropic::with_client(config, reqwest::Client::new())
    }

    /// A provider using `client`.
    pub fn with_client(config: AnthropicConfig, client: reqwest::Client) -> Anthropic {
        Anthropic { config, client }
    }

    /// The settings.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// The thinking budget (tokens) of a level; `None` sends no thinking
    /// parameter.
    pub fn thinking_budget(level: ThinkingLevel) -> Option<u32> {
        match level.effort()? {
            ThinkingLevel::Minimal => Some(1024),
            ThinkingLevel::Low => Some(2048),
            ThinkingLevel::Medium => Some(8192),
            ThinkingLevel::High => Some(16_384),
            _ => Some(32_000),
        }
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &CompletionRequest) -> Value {
        let answer_cap = request.max_tokens.unwrap_or(self.config.default_max_tokens);
        let budget = Anthropic::thinking_budget(request.thinking);
        let mut body = json!({
            "model": request.model,
            "max_tokens": answer_cap.saturating_add(budget.unwrap_or(0)),
            "stream": true,
            "messages": [{ "role": "user", "content": request.user }],
        });
        if let Some(system) = &request.system {
            body["system"] = json!(system);
        }
        if let Some(budget) = budget {
            body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget });
        }
        body
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "max_tokens" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        other => StopReason::Other(other.to_owned()),
    }
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

#[async_trait]
impl Provider for Anthropic {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let key = self.config.api_key.resolve()?;
        let url = join_url(&self.config.base_url, "v1/messages");
        let mut headers = vec![("anthropic-version", self.config.version.clone())];
        if let Some(key) = key {
            headers.push(("x-api-key", key));
        }
        for (name, value) in &self.config.extra_headers {
            headers.push((name.as_str(), value.clone()));
        }
        let body = self.request_body(&request);
        let cancel = &request.cancel;
        let mut response = post_json(&self.client, &url, &headers, &body, cancel).await?;

        let pricing = self.config.pricing.unwrap_or_default();
        let mut parser = SseParser::new();
        let mut blocks: Vec<String> = Vec::new();
        let mut in_text_block = false;
        let mut stop = None;
        let mut finished = false;
        let (mut input, mut output) = (0u64, 0u64);
        let mut usage: Option<Usage> = None;
        'read: while let Some(batch) = next_events(&mut response, &mut parser, cancel).await? {
            for event in batch {
                let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                let kind = data
                    .get("type")
                    .and_then(Value::as_str)
                    .or(event.event.as_deref())
                    .unwrap_or_default();
                let mut usage_changed = false;
                match kind {
                    "message_start" => {
                        if let Some(u) = data.pointer("/message/usage") {
                            input = count(u, "input_tokens")
                                + count(u, "cache_creation_input_tokens")
                                + count(u, "cache_read_input_tokens");
                            output = count(u, "output_tokens");
                            usage_changed = true;
                        }
                    }
                    "content_block_start" => {
                        let block = data.get("content_block");
                        in_text_block = block.and_then(|b| b.get("type")).and_then(Value::as_str)
                            == Some("text");
                        if in_text_block {
                            let initial = block
                                .and_then(|b| b.get("text"))
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            blocks.push(initial.to_owned());
                            if !initial.is_empty() {
                                events.text(initial);
                            }
                        }
                    }
                    "content_block_delta" => {
                        let delta = data.get("delta");
                        match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                            Some("text_delta") => {
                                let t = delta
                                    .and_then(|d| d.get("text"))
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                if !in_text_block {
                                    blocks.push(String::new());
                                    in_text_block = true;
                                }
                                if let Some(last) = blocks.last_mut() {
                                    last.push_str(t);
                                }
                                events.text(t);
                            }
                            Some("thinking_delta") => {
                                let t = delta
                                    .and_then(|d| d.get("thinking"))
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                events.thinking(t);
                            }
                            _ => {}
                        }
                    }
                    "content_block_stop" => in_text_block = false,
                    "message_delta" => {
                        if let Some(reason) =
                            data.pointer("/delta/stop_reason").and_then(Value::as_str)
                        {
                            stop = Some(stop_reason(reason));
                        }
                        if let Some(u) = data.get("usage") {
                            output = count(u, "output_tokens").max(output);
                            if u.get("input_tokens").is_some() {
                                input = count(u, "input_tokens")
                                    + count(u, "cache_creation_input_tokens")
                                    + count(u, "cache_read_input_tokens");
                            }
                            usage_changed = true;
                        }
                    }
                    "message_stop" => {
                        finished = true;
                        break 'read;
                    }
                    "error" => {
                        let error_type = data
                            .pointer("/error/type")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let message = data
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .unwrap_or("error event in stream");
                        let message = format!("{error_type}: {message}");
                        let err = match error_type {
                            "authentication_error" | "permission_error" => {
                                ProviderError::auth(message)
                            }
                            _ => ProviderError::transient(message),
                        };
                        return Err(err.with_usage(usage));
                    }
                    _ => {}
                }
                if usage_changed {
                    let current = Usage {
                        input_tokens: input,
                        output_tokens: output,
                        cost: pricing.cost(input, output),
                    };
                    usage = Some(current);
                    events.emit(StreamEvent::Usage(current));
                }
            }
        }
        let (true, Some(stop_reason)) = (finished, stop) else {
            return Err(
                ProviderError::transient("stream ended before the model finished")
                    .with_usage(usage),
            );
        };
        Ok(Completion {
            text: blocks.join("\n"),
            stop_reason,
            usage: usage.unwrap_or_default(),
        })
    }
}
