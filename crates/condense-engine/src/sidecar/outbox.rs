//! The sidecar's outgoing side: lines to the shim, written whole under a
//! lock by whoever sends them, our own requests (`llm.complete`) waiting for
//! their answers, and [`ShimProvider`], the summarizer's LLM calls run by the
//! host through the shim.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use condense_core::Usage;
use condense_summarizer::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, StopReason,
};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::protocol::{CompletionModel, LlmCancelParams, LlmCompleteParams};

/// Our requests waiting for the shim's answer, by id.
pub(crate) type Pending = Arc<Mutex<HashMap<String, (oneshot::Sender<Value>, EventSink)>>>;
/// The shim's end of the pipe, shared by everyone who sends a line.
pub(crate) type LineWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// Sends lines to the shim and tracks our own requests.
#[derive(Clone)]
pub(crate) struct Outbox {
    pub(crate) out: LineWriter,
    pub(crate) pending: Pending,
    pub(crate) next: Arc<AtomicU64>,
}

impl Outbox {
    pub(crate) fn send(&self, v: &Value) {
        self.send_line(&v.to_string());
    }

    /// Sends a notification with typed params.
    pub(crate) fn notify<P: Serialize>(&self, method: &str, params: &P) {
        self.send(&json!({"method": method, "params": params}));
    }

    /// Writes one whole line. A failed write (the shim is gone) is dropped:
    /// the reading loop ends on the closed input.
    pub(crate) fn send_line(&self, line: &str) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out
                .write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .and_then(|()| out.flush());
        }
    }

    /// Sends a request; the answer (`result` or `error` object) arrives on the receiver.
    pub(crate) fn request(
        &self,
        method: &str,
        params: Value,
        events: EventSink,
    ) -> (String, oneshot::Receiver<Value>) {
        let id = format!("s{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), (tx, events));
        self.send(&json!({"id": id, "method": method, "params": params}));
        (id, rx)
    }
}

/// A [`Provider`] that runs completions through pi (the shim's model
/// registry and pi-ai), so every provider and login pi supports works.
pub struct ShimProvider {
    pub(crate) outbox: Outbox,
    /// The model the shim resolves.
    pub(crate) model: CompletionModel,
}

fn usage_of(v: &Value) -> Usage {
    Usage {
        input_tokens: v.get("input").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: v.get("output").and_then(Value::as_u64).unwrap_or(0),
        cost: v.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
    }
}

/// `llm.complete`'s params for `request` to the model `spec` names. The
/// thinking level is resolved to an effort here, so no host holds a copy
/// of the rule.
fn complete_params(model: &CompletionModel, request: &CompletionRequest) -> LlmCompleteParams {
    LlmCompleteParams {
        model: model.clone(),
        reasoning_effort: request
            .thinking
            .effort()
            .map(|level| level.as_str().to_owned()),
        system: request.system.clone(),
        user: request.user.clone(),
        max_tokens: request.max_tokens,
    }
}

#[async_trait]
impl Provider for ShimProvider {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let params = json!(complete_params(&self.model, &request));
        let (id, rx) = self.outbox.request("llm.complete", params, events.clone());
        let answer = tokio::select! {
            a = rx => a.map_err(|_| ProviderError::transient("the shim went away"))?,
            () = request.cancel.cancelled() => {
                self.outbox.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                self.outbox.notify("llm.cancel", &LlmCancelParams { request_id: id });
                return Err(ProviderError::aborted());
            }
        };
        if let Some(err) = answer.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("llm call failed")
                .to_owned();
            return Err(match err.get("code").and_then(Value::as_str) {
                Some("auth") => ProviderError::auth(message),
                Some("aborted") => ProviderError::aborted(),
                _ => ProviderError::transient(message),
            });
        }
        let r = answer.get("result").cloned().unwrap_or(Value::Null);
        let stop_reason = match r.get("stopReason").and_then(Value::as_str) {
            Some("length") => StopReason::Length,
            Some("toolUse") => StopReason::ToolUse,
            Some("error") | Some("aborted") => {
                let message = r
                    .get("errorMessage")
                    .and_then(Value::as_str)
                    .unwrap_or("llm call failed");
                return Err(ProviderError::transient(message));
            }
            Some("stop") | None => StopReason::Stop,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        Ok(Completion {
            text: r
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            stop_reason,
            usage: usage_of(r.get("usage").unwrap_or(&Value::Null)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Config;
    use condense_summarizer::SummarizerSettings;
    use serde_json::json;

    /// `summarizerThinking` as a settings file spells it, to the effort
    /// `llm.complete` carries, for the session model (`default`) and a named
    /// one: the rule the shim used to apply itself (no effort for `default`,
    /// `off` and anything that is not a level, the level itself otherwise).
    #[test]
    fn llm_complete_carries_the_resolved_effort() {
        let cases = [
            ("default", None),
            ("off", None),
            ("minimal", Some("minimal")),
            ("low", Some("low")),
            ("medium", Some("medium")),
            ("high", Some("high")),
            ("xhigh", Some("xhigh")),
            ("", None),
            ("max", None),
            ("HIGH", None),
        ];
        for spec in ["default", "openai/gpt-4.1-mini"] {
            for (thinking, effort) in cases {
                let (config, _) = Config::from_settings_value(&json!({
                    "summarizerModel": spec,
                    "summarizerThinking": thinking,
                }));
                let request = CompletionRequest {
                    thinking: SummarizerSettings::from_config(&config).thinking,
                    max_tokens: Some(512),
                    ..CompletionRequest::new("gpt-4.1-mini", "the batch")
                };
                let model = CompletionModel::from(config.summarizer());
                assert_eq!(
                    model == CompletionModel::Session,
                    spec == "default",
                    "{spec} names the session's model only as `default`"
                );
                let params = json!(complete_params(&model, &request));
                assert_eq!(
                    serde_json::from_value::<LlmCompleteParams>(params.clone())
                        .expect("the shim's side reads it")
                        .model,
                    model
                );
                assert_eq!(
                    params,
                    json!({
                        "model": spec,
                        "reasoningEffort": effort,
                        "system": null,
                        "user": "the batch",
                        "maxTokens": 512,
                    }),
                    "{spec} with summarizerThinking {thinking:?}"
                );
            }
        }
    }
}
