//! A scripted OpenAI-compatible chat-completions server for end-to-end tests.
//!
//! [`FakeLlm::start`] binds 127.0.0.1 on a random port and serves
//! `POST …/chat/completions` (pi's `openai-completions` API sends
//! `POST {baseUrl}/chat/completions`; point `baseUrl` at [`FakeLlm::base_url`],
//! which ends in `/v1`). Each request is answered from a script:
//!
//! * **Summary requests** — any `user` message whose text contains one of the
//!   [`SUMMARY_MARKERS`] (`<tool-call-batch>`, `<sub-task-summaries>`: the
//!   markers of pi-condense's summarizer prompts) — take the next reply queued
//!   with [`FakeLlm::push_summary`], or, when that queue is empty, the
//!   answer of the summary responder if one is set
//!   ([`FakeLlm::set_summary_responder`]), else the default summary
//!   ([`FakeLlm::set_default_summary`]). They never consume the main script.
//! * **Every other chat request** takes the next reply of the main script.
//!   When the script is exhausted the server answers a short text
//!   ([`EXHAUSTED_TEXT`]) and marks the request, so that
//!   [`FakeLlm::assert_script_consumed`] fails the test.
//!
//! Streaming requests (`"stream": true`, which is all pi sends) get SSE chunks
//! the way OpenAI sends them: a role delta, `reasoning_content` deltas, text
//! deltas, tool calls whose `arguments` arrive as string fragments, a chunk
//! with `finish_reason`, a final `choices: []` chunk with `usage`, then
//! `data: [DONE]`. Non-streaming requests get one `chat.completion` object.
//!
//! `POST …/messages` is Anthropic's Messages API, answered the same way from
//! the same scripts: one message, or (`"stream": true`, what Claude Code
//! sends) its server-sent events with text and `tool_use` blocks.
//! `POST …/responses` is OpenAI's Responses API (what Codex sends): one
//! `response` object, or its server-sent events, with reasoning (an opaque
//! `encrypted_content`), a message and `function_call` items (a call named
//! `mcp__<server>__<tool>` in the namespace `mcp__<server>`; one named
//! `tool_search` as a client-side `tool_search_call`).
//!
//! Every request (any method and path) is recorded with its JSON body for
//! assertions ([`FakeLlm::requests`]).
//!
//! Bounded by construction: connections are served one request each
//! (`Connection: close`) on their own thread with read and write timeouts, and
//! the accept loop stops when the [`FakeLlm`] is dropped.
//!
//! One concern a file: this one holds the server handle and its scripts;
//! `reply.rs` the scripted replies, `request.rs` the recorded requests and
//! how a summary request is told apart, `server.rs` the HTTP/1.1 side (one
//! bounded request a connection), `wire.rs` the answer bodies (SSE chunks,
//! a `chat.completion`, an Anthropic message).

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use serde_json::Value;

pub mod measure;
mod reply;
mod request;
mod server;
mod wire;

pub use reply::{Reply, ToolCall};
pub use request::{is_summary_request, message_text, RecordedRequest, RequestKind};

use server::accept_loop;

/// Substrings that make a request a summary request (searched in the text of
/// `user` messages).
pub const SUMMARY_MARKERS: &[&str] = &["<tool-call-batch>", "<sub-task-summaries>"];

/// The text answered when the main script has no reply left.
pub const EXHAUSTED_TEXT: &str = "fake-llm: the main script is exhausted";

/// The default answer to summary requests.
pub const DEFAULT_SUMMARY_TEXT: &str = "- Summary written by the fake LLM.";

/// Answers a summary request from its body (see
/// [`FakeLlm::set_summary_responder`]).
pub type SummaryResponder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct State {
    main: VecDeque<Reply>,
    summaries: VecDeque<Reply>,
    default_summary: Reply,
    summary_responder: Option<SummaryResponder>,
    requests: Vec<RecordedRequest>,
}

/// The running server. Dropping it stops the accept loop.
pub struct FakeLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeLlm {
    /// Starts a server whose main script is `replies`, in order.
    ///
    /// Panics if 127.0.0.1 cannot be bound (a test can do nothing useful then).
    pub fn start(replies: impl IntoIterator<Item = Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("fake LLM: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("fake LLM: set_nonblocking");
        let addr = listener.local_addr().expect("fake LLM: local_addr");
        let state = Arc::new(Mutex::new(State {
            main: replies.into_iter().collect(),
            summaries: VecDeque::new(),
            default_summary: Reply::text(DEFAULT_SUMMARY_TEXT),
            summary_responder: None,
            requests: Vec::new(),
        }));
        let shutdown = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let state = Arc::clone(&state);
            let shutdown = Arc::clone(&shutdown);
            thread::Builder::new()
                .name("fake-llm-accept".into())
                .spawn(move || accept_loop(&listener, &state, &shutdown))
                .expect("fake LLM: spawn accept thread")
        };
        Self {
            addr,
            state,
            shutdown,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:<port>/v1`: the `baseUrl` for pi's models.json.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a reply to the main script.
    pub fn push(&self, reply: Reply) {
        self.lock().main.push_back(reply);
    }

    /// Queues a reply for the next summary request.
    pub fn push_summary(&self, reply: Reply) {
        self.lock().summaries.push_back(reply);
    }

    /// The reply for summary requests once the summary queue is empty
    /// (initially the text [`DEFAULT_SUMMARY_TEXT`]).
    pub fn set_default_summary(&self, reply: Reply) {
        self.lock().default_summary = reply;
    }

    /// Answers summary requests, once the summary queue is empty, with
    /// `responder`'s reply to the request body (instead of the default
    /// summary): e.g. what a given summarizer would answer that prompt.
    pub fn set_summary_responder(
        &self,
        responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) {
        self.lock().summary_responder = Some(Arc::new(responder));
    }

    /// Main-script replies not yet used.
    pub fn remaining(&self) -> usize {
        self.lock().main.len()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// The requests answered from the main script, in order.
    pub fn main_requests(&self) -> Vec<RecordedRequest> {
        self.requests_of(RequestKind::Main)
    }

    /// The requests recognised as summarization prompts, in order.
    pub fn summary_requests(&self) -> Vec<RecordedRequest> {
        self.requests_of(RequestKind::Summary)
    }

    fn requests_of(&self, kind: RequestKind) -> Vec<RecordedRequest> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.kind == kind)
            .cloned()
            .collect()
    }

    /// Panics unless every main-script reply was used, no request found the
    /// script exhausted, and no request went to an unknown endpoint.
    pub fn assert_script_consumed(&self) {
        let state = self.lock();
        let exhausted = state.requests.iter().filter(|r| r.exhausted).count();
        let other: Vec<_> = state
            .requests
            .iter()
            .filter(|r| r.kind == RequestKind::Other)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            state.main.is_empty() && exhausted == 0 && other.is_empty(),
            "fake LLM script mismatch: {} scripted replies unused, {} requests found the script \
             exhausted, unexpected requests: {other:?}",
            state.main.len(),
            exhausted,
        );
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        if let Some(handle) = self.acceptor.take() {
            let _ = handle.join();
        }
    }
}

/// Locks the state even if a connection thread panicked while holding it.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
