//! Shared test doubles: scripted providers, a mockall mock, batch builders
//! and a scripted HTTP/1.1 server on 127.0.0.1.
#![allow(dead_code)]

pub mod server;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use condense_core::ModelRef;
use condense_core::{CapturedBatch, CapturedCall};
use condense_core::{SummaryJob, Usage};
use condense_summarizer::{
    CancelToken, Completion, CompletionRequest, EventSink, JobOutcome, Provider, ProviderError,
    StopReason, Summarizer, SummarizerSettings, Target, Timeouts,
};
use serde_json::json;

mockall::mock! {
    pub Provider {}

    #[async_trait]
    impl Provider for Provider {
        async fn complete(
            &self,
            request: CompletionRequest,
            events: &EventSink,
        ) -> Result<Completion, ProviderError>;
    }
}

/// The usage every scripted reply reports.
pub const USAGE: Usage = Usage {
    input_tokens: 10,
    output_tokens: 2,
    cost: 0.5,
};

/// What a [`FakeProvider`] does with one call.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// Answers `text` at once, stop reason `stop`.
    Reply(String),
    /// Answers `text` with this stop reason.
    ReplyWith(String, StopReason),
    /// Fails.
    Fail(ProviderError),
    /// Never answers; returns `Aborted` once cancelled.
    Hang,
    /// Streams `events` thinking deltas `gap` apart, then answers `text`.
    Drip {
        events: usize,
        gap: Duration,
        text: String,
    },
    /// Waits `delay` (cancellable), then answers `text`.
    Slow { delay: Duration, text: String },
}

/// `Behavior::Reply`.
pub fn reply(text: &str) -> Behavior {
    Behavior::Reply(text.to_owned())
}

/// A transient failure.
pub fn transient(message: &str) -> Behavior {
    Behavior::Fail(ProviderError::transient(message))
}

type Router = Box<dyn Fn(&CompletionRequest) -> Behavior + Send + Sync>;

/// A scripted provider: behaviours in order, then `repeat` forever (or
/// chosen per request by a router).
pub struct FakeProvider {
    route: Option<Router>,
    script: Mutex<VecDeque<Behavior>>,
    repeat: Mutex<Option<Behavior>>,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    tokens: Mutex<Vec<CancelToken>>,
    requests: Mutex<Vec<CompletionRequest>>,
}

impl FakeProvider {
    /// The same behaviour for every call.
    pub fn always(b: Behavior) -> Arc<FakeProvider> {
        FakeProvider::new(Vec::new(), Some(b))
    }

    /// These behaviours in order; panics when they run out.
    pub fn script(bs: Vec<Behavior>) -> Arc<FakeProvider> {
        FakeProvider::new(bs, None)
    }

    /// These behaviours in order, then `repeat`.
    pub fn new(bs: Vec<Behavior>, repeat: Option<Behavior>) -> Arc<FakeProvider> {
        Arc::new(FakeProvider {
            route: None,
            script: Mutex::new(bs.into()),
            repeat: Mutex::new(repeat),
            calls: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            tokens: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// Behaviour chosen per request by `route`.
    pub fn routed(
        route: impl Fn(&CompletionRequest) -> Behavior + Send + Sync + 'static,
    ) -> Arc<FakeProvider> {
        let mut p = FakeProvider::new(Vec::new(), None);
        Arc::get_mut(&mut p).unwrap().route = Some(Box::new(route));
        p
    }

    /// Replaces the repeated behaviour (and drops what is left of the script).
    pub fn set(&self, b: Behavior) {
        self.script.lock().unwrap().clear();
        *self.repeat.lock().unwrap() = Some(b);
    }

    /// Calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Most calls that were in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// Whether every request's cancel token has fired.
    pub fn all_cancelled(&self) -> bool {
        self.tokens
            .lock()
            .unwrap()
            .iter()
            .all(CancelToken::is_cancelled)
    }

    /// The requests received.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// A target for this provider.
    pub fn target(self: &Arc<Self>, provider: &str, id: &str, name: &str) -> Target {
        Target::new(self.clone(), ModelRef::new(provider, id).named(name))
    }
}

struct InFlight<'a>(&'a FakeProvider);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn completion(text: String, stop_reason: StopReason) -> Completion {
    Completion {
        text,
        stop_reason,
        usage: USAGE,
    }
}

#[async_trait]
impl Provider for FakeProvider {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let _guard = InFlight(self);
        self.tokens.lock().unwrap().push(request.cancel.clone());
        self.requests.lock().unwrap().push(request.clone());
        let behavior = if let Some(route) = &self.route {
            route(&request)
        } else {
            let next = self.script.lock().unwrap().pop_front();
            next.or_else(|| self.repeat.lock().unwrap().clone())
                .expect("FakeProvider script ran out")
        };
        let cancel = request.cancel;
        match behavior {
            Behavior::Reply(text) => {
                events.text(text.clone());
                Ok(completion(text, StopReason::Stop))
            }
            Behavior::ReplyWith(text, stop) => Ok(completion(text, stop)),
            Behavior::Fail(e) => Err(e),
            Behavior::Hang => {
                cancel.cancelled().await;
                Err(ProviderError::aborted())
            }
            Behavior::Drip {
                events: n,
                gap,
                text,
            } => {
                for _ in 0..n {
                    tokio::select! {
                        () = cancel.cancelled() => return Err(ProviderError::aborted()),
                        () = tokio::time::sleep(gap) => events.thinking("…"),
                    }
                }
                events.text(text.clone());
                Ok(completion(text, StopReason::Stop))
            }
            Behavior::Slow { delay, text } => {
                tokio::select! {
                    () = cancel.cancelled() => Err(ProviderError::aborted()),
                    () = tokio::time::sleep(delay) => {
                        events.text(text.clone());
                        Ok(completion(text, StopReason::Stop))
                    }
                }
            }
        }
    }
}

/// A call with a short result.
pub fn call(id: &str, tool: &str, args: serde_json::Value, result: &str) -> CapturedCall {
    CapturedCall {
        tool_call_id: id.to_owned(),
        tool_name: tool.to_owned(),
        args: args.into(),
        result_text: result.into(),
        is_error: false,
        result_timestamp: Some(1_000),
    }
}

/// A batch of `calls` with no assistant prose.
pub fn batch(calls: Vec<CapturedCall>) -> CapturedBatch {
    CapturedBatch {
        turn_index: 0,
        timestamp: 0,
        assistant_text: String::new(),
        calls,
        user_turn_group: None,
    }
}

/// A one-call batch reading `x` fifty times.
pub fn small_batch() -> CapturedBatch {
    batch(vec![call("c1", "read", json!({}), &"x".repeat(50))])
}

/// [`small_batch`] summarized through `target` alone, with `timeouts` and
/// otherwise default settings.
pub async fn summarize_small_batch(target: Target, timeouts: Timeouts) -> JobOutcome {
    let s = Summarizer::new(
        target,
        SummarizerSettings {
            timeouts,
            ..SummarizerSettings::default()
        },
    );
    s.summarize_batch(&small_batch(), &CancelToken::new(), &mut |_| {})
        .await
}

/// `n` one-call jobs; job `i` reads `file<i>.rs`.
pub fn jobs(n: usize) -> Vec<SummaryJob> {
    (0..n)
        .map(|i| SummaryJob {
            batch: batch(vec![call(
                &format!("c{i}"),
                "read",
                json!({ "path": format!("file{i}.rs") }),
                &format!("contents of file {i}"),
            )]),
        })
        .collect()
}

/// An HTTP client for the scripted server (no proxies).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Collects what a provider reported.
pub fn event_sink() -> (
    EventSink,
    tokio::sync::mpsc::UnboundedReceiver<condense_summarizer::StreamEvent>,
) {
    EventSink::channel()
}

/// Everything received so far on `rx`.
pub fn drain(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<condense_summarizer::StreamEvent>,
) -> Vec<condense_summarizer::StreamEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}
