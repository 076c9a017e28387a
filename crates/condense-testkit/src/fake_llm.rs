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
//! the same scripts, non-streaming only (what the OpenCode plugin's
//! summarizer calls send).
//!
//! Every request (any method and path) is recorded with its JSON body for
//! assertions ([`FakeLlm::requests`]).
//!
//! Bounded by construction: connections are served one request each
//! (`Connection: close`) on their own thread with read and write timeouts, and
//! the accept loop stops when the [`FakeLlm`] is dropped.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{json, Value};

/// Substrings that make a request a summary request (searched in the text of
/// `user` messages).
pub const SUMMARY_MARKERS: &[&str] = &["<tool-call-batch>", "<sub-task-summaries>"];

/// The text answered when the main script has no reply left.
pub const EXHAUSTED_TEXT: &str = "fake-llm: the main script is exhausted";

/// The default answer to summary requests.
pub const DEFAULT_SUMMARY_TEXT: &str = "- Summary written by the fake LLM.";

/// Read and write timeout of every connection.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the accept loop sleeps when no connection is pending.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
const MAX_HEAD_BYTES: u64 = 64 * 1024;
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

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
    reasoning: Option<String>,
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<(u64, u64)>,
    cache: Option<(u64, u64)>,
    delay: Duration,
    http_error: Option<(u16, String)>,
    fragment_chars: usize,
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

    fn finish_reason(&self) -> &str {
        match &self.finish_reason {
            Some(reason) => reason,
            None if self.tool_calls.is_empty() => "stop",
            None => "tool_calls",
        }
    }

    fn usage_json(&self, request_bytes: usize) -> Value {
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

/// Which script answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A chat request answered from the main script.
    Main,
    /// A chat request recognised as a summarization prompt.
    Summary,
    /// Anything else (wrong path or method, unreadable body): answered 404/400.
    Other,
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// 0-based arrival order over all requests.
    pub seq: usize,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Which script answered it.
    pub kind: RequestKind,
    /// The body parsed as JSON (`Value::Null` if it was not JSON).
    pub body: Value,
    /// True if the main script was exhausted and [`EXHAUSTED_TEXT`] was sent.
    pub exhausted: bool,
    /// When the server had read the request's head (ms since the epoch).
    pub received_ms: i64,
}

impl RecordedRequest {
    /// The `messages` array of a chat request (empty if absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Texts of the messages with this role, in order.
    pub fn texts_of_role(&self, role: &str) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .map(message_text)
            .collect()
    }

    /// `(tool_call_id, text)` of every `role: "tool"` message, in order.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|m| {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                (id.to_owned(), message_text(m))
            })
            .collect()
    }

    /// The system (or developer) prompt, if any.
    pub fn system_prompt(&self) -> Option<String> {
        self.messages()
            .iter()
            .find(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("system" | "developer")
                )
            })
            .map(message_text)
    }

    /// Names of the tools declared in the request.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// True if the text of any message (any role, tool-call arguments
    /// included) contains `needle`.
    pub fn any_message_contains(&self, needle: &str) -> bool {
        self.messages()
            .iter()
            .any(|m| message_text(m).contains(needle) || tool_call_arguments(m).contains(needle))
    }
}

/// The text of a chat message: `content` when it is a string, else the
/// concatenated `text` of its parts.
pub fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The concatenated `arguments` of an assistant message's `tool_calls`.
fn tool_call_arguments(message: &Value) -> String {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/function/arguments").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

/// True if `body` looks like a summarization prompt (see [`SUMMARY_MARKERS`]).
pub fn is_summary_request(body: &Value) -> bool {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(message_text)
        .any(|text| SUMMARY_MARKERS.iter().any(|marker| text.contains(marker)))
}

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

fn accept_loop(listener: &TcpListener, state: &Arc<Mutex<State>>, shutdown: &AtomicBool) {
    while !shutdown.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let state = Arc::clone(state);
                // Connection threads are detached; the I/O timeouts bound them.
                let spawned =
                    thread::Builder::new()
                        .name("fake-llm-conn".into())
                        .spawn(move || {
                            if let Err(err) = serve_connection(stream, &state) {
                                eprintln!("fake LLM: connection error: {err}");
                            }
                        });
                if let Err(err) = spawned {
                    eprintln!("fake LLM: could not spawn a connection thread: {err}");
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(err) => {
                eprintln!("fake LLM: accept failed: {err}");
                thread::sleep(ACCEPT_POLL);
            }
        }
    }
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn serve_connection(stream: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);

    let Some(head) = read_head(&mut reader)? else {
        return Ok(()); // the client closed without sending a request
    };
    let received_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    if head
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = read_body(&mut reader, &head)?;
    let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let path = head.path.split('?').next().unwrap_or("");
    // Anthropic's Messages API (`POST …/messages`), non-streaming only.
    let anthropic = head.method == "POST" && path.ends_with("/messages");
    let is_chat = head.method == "POST"
        && (path.ends_with("/chat/completions") || anthropic)
        && body_json.is_object();
    let (kind, reply, exhausted) = if !is_chat {
        (RequestKind::Other, None, false)
    } else if is_summary_request(&body_json) {
        let (queued, responder, default) = {
            let mut st = lock(state);
            let queued = st.summaries.pop_front();
            (
                queued,
                st.summary_responder.clone(),
                st.default_summary.clone(),
            )
        };
        // The responder runs outside the lock: it may take a while.
        let reply = queued
            .or_else(|| responder.map(|answer| answer(&body_json)))
            .unwrap_or(default);
        (RequestKind::Summary, Some(reply), false)
    } else {
        match lock(state).main.pop_front() {
            Some(reply) => (RequestKind::Main, Some(reply), false),
            None => (RequestKind::Main, Some(Reply::text(EXHAUSTED_TEXT)), true),
        }
    };
    let streaming = body_json.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body_json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake-1")
        .to_owned();
    let seq = {
        let mut st = lock(state);
        let seq = st.requests.len();
        st.requests.push(RecordedRequest {
            seq,
            method: head.method.clone(),
            path: head.path.clone(),
            kind,
            body: body_json,
            exhausted,
            received_ms,
        });
        seq
    };

    let Some(reply) = reply else {
        let status = if head.method == "POST" && head.path.contains("/chat/completions") {
            400
        } else {
            404
        };
        return write_json(
            &mut out,
            status,
            &error_body("fake LLM: unsupported request"),
        );
    };
    if !reply.delay.is_zero() {
        thread::sleep(reply.delay);
    }
    if let Some((status, message)) = &reply.http_error {
        return write_json(&mut out, *status, &error_body(message));
    }
    let id = format!("chatcmpl-fake-{seq}");
    if anthropic {
        if streaming {
            return write_json(
                &mut out,
                400,
                &error_body("fake LLM: streaming Messages API is not served"),
            );
        }
        return write_json(
            &mut out,
            200,
            &anthropic_message(&reply, &id, &model, body.len()),
        );
    }
    if streaming {
        write_sse(&mut out, &reply, &id, &model, body.len())
    } else {
        write_json(
            &mut out,
            200,
            &completion_object(&reply, &id, &model, body.len()),
        )
    }
}

/// Reads the request line and headers; `None` if the peer closed first.
fn read_head(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Head>> {
    let mut limited = reader.take(MAX_HEAD_BYTES);
    let mut line = String::new();
    if limited.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(invalid(format!("bad request line {line:?}")));
    };
    let mut head = Head {
        method: method.to_owned(),
        path: path.to_owned(),
        headers: Vec::new(),
    };
    loop {
        line.clear();
        if limited.read_line(&mut line)? == 0 {
            return Err(invalid("request head truncated or too large"));
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            return Ok(Some(head));
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            head.headers
                .push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
}

/// Reads a `Content-Length` or `Transfer-Encoding: chunked` body.
fn read_body(reader: &mut BufReader<TcpStream>, head: &Head) -> io::Result<Vec<u8>> {
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if !chunked {
        let len: usize = match head.header("content-length") {
            Some(v) => v
                .parse()
                .map_err(|_| invalid(format!("bad content-length {v:?}")))?,
            None => 0,
        };
        if len > MAX_BODY_BYTES {
            return Err(invalid(format!("body of {len} bytes is too large")));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        return Ok(body);
    }
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.take(1024).read_line(&mut line)?;
        let size_text = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Skip any trailers up to the empty line.
            loop {
                line.clear();
                if reader.take(MAX_HEAD_BYTES).read_line(&mut line)? == 0 || line.trim().is_empty()
                {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("chunked body is too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "fake_llm_error", "code": null}})
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_json(out: &mut TcpStream, status: u16, body: &Value) -> io::Result<()> {
    let body = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        status_text(status),
        body.len()
    )?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// Splits `text` into pieces of at most `chars` characters.
fn fragments(text: &str, chars: usize) -> Vec<String> {
    let all: Vec<char> = text.chars().collect();
    all.chunks(chars.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The `data:` payloads of a streamed reply, without the final `[DONE]`.
fn sse_chunks(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut chunks = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    if let Some(reasoning) = &reply.reasoning {
        for piece in fragments(reasoning, reply.fragment_chars) {
            chunks.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    if let Some(text) = &reply.text {
        for piece in fragments(text, reply.fragment_chars) {
            chunks.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            Value::Null,
        ));
        for piece in fragments(&call.arguments, reply.fragment_chars) {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    chunks.push(chunk(json!({}), json!(reply.finish_reason())));
    chunks.push(json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": reply.usage_json(request_bytes),
    }));
    chunks
}

fn write_sse(
    out: &mut TcpStream,
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let events = sse_chunks(reply, id, model, request_bytes)
        .into_iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()));
    for event in events {
        write!(out, "{:x}\r\n{event}\r\n", event.len())?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// A non-streaming Anthropic Messages API answer for `reply` (its text).
fn anthropic_message(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Value {
    let usage = reply.usage_json(request_bytes);
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text.as_deref().unwrap_or("")}],
        "stop_reason": if reply.finish_reason() == "length" { "max_tokens" } else { "end_turn" },
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
        },
    })
}

/// A non-streaming `chat.completion` object for `reply`.
fn completion_object(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason()}],
        "usage": reply.usage_json(request_bytes),
    })
}
