//! HTTP providers: OpenAI-compatible chat completions and Anthropic
//! Messages, both streaming server-sent events over reqwest (rustls).
//!
//! Both classify failures the same way: a missing API key or an HTTP 401 or
//! 403 is an auth failure; every other HTTP error status, a network error,
//! an error event in the stream or a stream that ends before the model
//! finished is transient. Neither retries or times out on its own.

mod anthropic;
mod openai;
mod sse;

use std::fmt;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::provider::ProviderError;

pub use anthropic::{Anthropic, AnthropicConfig};
pub use openai::{OpenAiCompatible, OpenAiConfig};

use sse::{SseEvent, SseParser};

/// Where an HTTP provider's API key comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum ApiKey {
    /// No key is sent (local servers).
    None,
    /// Read from this environment variable at every call; unset or empty is
    /// an auth failure.
    Env(String),
    /// This key.
    Value(String),
}

impl ApiKey {
    /// The key to send, if any.
    pub fn resolve(&self) -> Result<Option<String>, ProviderError> {
        match self {
            ApiKey::None => Ok(None),
            ApiKey::Value(key) => Ok(Some(key.clone())),
            ApiKey::Env(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Ok(Some(key)),
                _ => Err(ProviderError::auth(format!(
                    "no API key: environment variable {var} is not set"
                ))),
            },
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKey::None => f.write_str("None"),
            ApiKey::Env(var) => f.debug_tuple("Env").field(var).finish(),
            ApiKey::Value(_) => f.write_str("Value(<redacted>)"),
        }
    }
}

/// Prices used to fill in [`Usage::cost`](condense_core::Usage::cost).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pricing {
    /// Dollars per million input tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output tokens.
    pub output_per_mtok: f64,
}

impl Pricing {
    /// The cost of a call.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_mtok + output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// The error text of a failed response: the API's `error.message` when the
/// body is JSON, else the body itself, shortened.
fn error_text(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// POSTs `body` and returns the response if its status is a success.
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
    cancel: &CancelToken,
) -> Result<reqwest::Response, ProviderError> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = tokio::select! {
        () = cancel.cancelled() => return Err(ProviderError::aborted()),
        r = request.send() => r.map_err(|e| ProviderError::transient(format!("request to {url} failed: {e}")))?,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = tokio::select! {
        () = cancel.cancelled() => return Err(ProviderError::aborted()),
        b = response.text() => b.unwrap_or_default(),
    };
    let message = format!("HTTP {}: {}", status.as_u16(), error_text(&body));
    if status.as_u16() == 401 || status.as_u16() == 403 {
        Err(ProviderError::auth(message))
    } else {
        Err(ProviderError::transient(message))
    }
}

/// Reads the next piece of an SSE response: `Ok(None)` at the end of the
/// body, else the events completed by that piece (possibly none).
async fn next_events(
    response: &mut reqwest::Response,
    parser: &mut SseParser,
    cancel: &CancelToken,
) -> Result<Option<Vec<SseEvent>>, ProviderError> {
    let chunk = tokio::select! {
        () = cancel.cancelled() => return Err(ProviderError::aborted()),
        c = response.chunk() => c.map_err(|e| ProviderError::transient(format!("stream interrupted: {e}")))?,
    };
    Ok(chunk.map(|bytes| {
        let mut events = Vec::new();
        parser.push(&bytes, &mut events);
        events
    }))
}

/// `base` and `path` joined by exactly one `/`.
fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_prefers_the_api_message() {
        assert_eq!(
            error_text(r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#),
            "slow down"
        );
        assert_eq!(error_text("  upstream exploded \n"), "upstream exploded");
        assert_eq!(error_text(&"x".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn api_keys() {
        assert_eq!(ApiKey::None.resolve(), Ok(None));
        assert_eq!(ApiKey::Value("k".into()).resolve(), Ok(Some("k".into())));
        let err = ApiKey::Env("CONDENSE_TEST_SURELY_UNSET_KEY".into())
            .resolve()
            .unwrap_err();
        assert_eq!(err.kind, crate::provider::ProviderErrorKind::Auth);
        assert!(err.message.contains("CONDENSE_TEST_SURELY_UNSET_KEY"));
        assert_eq!(
            format!("{:?}", ApiKey::Value("secret".into())),
            "Value(<redacted>)"
        );
    }

    #[test]
    fn pricing_and_urls() {
        let p = Pricing {
            input_per_mtok: 1.0,
            output_per_mtok: 5.0,
        };
        assert!((p.cost(1_000_000, 200_000) - 2.0).abs() < 1e-12);
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
    }
}
