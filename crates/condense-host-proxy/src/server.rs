//! The HTTP side: every request is forwarded to the upstream with the
//! client's headers (its credentials included) untouched; a Messages API
//! call's body is first rendered through its conversation's session. The
//! answer streams back chunk by chunk as it arrives, read on the way for
//! its usage.
//!
//! Fail open: a body the proxy cannot read, an engine error or a panic
//! sends the request as the client wrote it; an upstream's error answer
//! goes back as the upstream gave it; only an upstream that cannot be
//! reached is answered by the proxy (502, in the API's error shape), or
//! one that goes quiet before its answer's headers (504).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::openai::Format;
use crate::session::{Credentials, SessionOptions};
use crate::sessions::Sessions;
use crate::usage::UsageTee;

/// The default upstream: Anthropic's API.
pub const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";

/// The default upstream for OpenAI's APIs.
pub const DEFAULT_OPENAI_UPSTREAM: &str = "https://api.openai.com";

/// Where `/backend-api/…` calls go by default (Codex signed in with
/// ChatGPT).
pub const DEFAULT_CHATGPT_UPSTREAM: &str = "https://chatgpt.com";

/// The largest request body the proxy reads (a 1M-token conversation is
/// a few MB); a larger one is refused with 413.
const MAX_BODY: usize = 256 << 20;

/// Headers that belong to one hop, never forwarded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The Anthropic upstream's base URL (no trailing slash needed).
    pub upstream: String,
    /// The OpenAI upstream's base URL, without `/v1`.
    pub openai_upstream: String,
    /// Where Codex signed in with ChatGPT goes (`/backend-api/…` paths):
    /// the ChatGPT backend's origin.
    pub chatgpt_upstream: String,
    /// Where the session logs go.
    pub dir: PathBuf,
    /// The settings.json value (its `contextPrune` block).
    pub settings: Value,
    /// The query tool's name as the model sees it.
    pub query_tool: String,
    /// Where notices go (a file, appended); `None`: standard error.
    pub log: Option<PathBuf>,
    /// How long a quiet peer is waited for.
    pub timeouts: Timeouts,
}

/// How long the proxy waits on a peer that has gone quiet before it gives
/// up on the request: a client or upstream that stalls would otherwise
/// hold its connection, and the request's memory, until it goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A client's request line and headers, whole (the connection is then
    /// closed).
    pub client_headers: Duration,
    /// The longest gap in a request body (answered 408).
    pub client_body_gap: Duration,
    /// Connecting to an upstream (answered 502).
    pub upstream_connect: Duration,
    /// The longest gap in an upstream's answer, its headers included
    /// (before them, answered 504; after, the answer is cut short). Ten
    /// minutes, as Anthropic's SDKs allow a call without streaming.
    pub upstream_gap: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            client_headers: Duration::from_secs(30),
            client_body_gap: Duration::from_secs(60),
            upstream_connect: Duration::from_secs(30),
            upstream_gap: Duration::from_secs(600),
        }
    }
}

struct Shared {
    sessions: Sessions,
    client: reqwest::Client,
    upstream: String,
    openai_upstream: String,
    chatgpt_upstream: String,
    log: Option<PathBuf>,
    body_gap: Duration,
}

impl Shared {
    /// Tells the user something: on standard error, or in the log file
    /// (when an agent's terminal UI owns standard error).
    fn notice(&self, text: &str) {
        match &self.log {
            None => eprintln!("{text}"),
            Some(path) => {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "{text}");
                }
            }
        }
    }
}

/// What `GET /condense/health` answers: who listens, and where it forwards
/// (so `condense claude` reuses a proxy that is running).
pub const HEALTH_PATH: &str = "/condense/health";

type Body = BoxBody<Bytes, std::io::Error>;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn full(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An error in the Messages API's shape.
fn api_error(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "api_error", "message": message},
    });
    full(status, body.to_string())
}

/// Serves on `listener` until the process ends.
pub async fn serve(listener: TcpListener, config: ProxyConfig) -> std::io::Result<()> {
    let timeouts = config.timeouts;
    let client = reqwest::Client::builder()
        .connect_timeout(timeouts.upstream_connect)
        .read_timeout(timeouts.upstream_gap)
        .build()
        .map_err(std::io::Error::other)?;
    let shared = Arc::new(Shared {
        sessions: Sessions::new(
            config.dir,
            SessionOptions {
                settings: config.settings,
                query_tool: config.query_tool,
                upstream: Some(config.upstream.trim_end_matches('/').to_owned()),
                openai_upstream: Some(config.openai_upstream.trim_end_matches('/').to_owned()),
                client: client.clone(),
            },
        ),
        client,
        upstream: config.upstream.trim_end_matches('/').to_owned(),
        openai_upstream: config.openai_upstream.trim_end_matches('/').to_owned(),
        chatgpt_upstream: config.chatgpt_upstream.trim_end_matches('/').to_owned(),
        log: config.log,
        body_gap: timeouts.client_body_gap,
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                shared.notice(&format!("condense proxy: accept: {e}"));
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let for_service = shared.clone();
            let service = hyper::service::service_fn(move |req| handle(for_service.clone(), req));
            // hyper times the headers only with a timer.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeouts.client_headers)
                .serve_connection(TokioIo::new(stream), service);
            // A keep-alive connection left idle past the header timeout is
            // closed as a slow one is: no news.
            if let Err(e) = conn.await {
                if !e.is_incomplete_message() && !e.is_timeout() {
                    shared.notice(&format!("condense proxy: connection: {e}"));
                }
            }
        });
    }
}

/// Binds `addr` and serves (see [`serve`]).
pub async fn bind_and_serve(addr: SocketAddr, config: ProxyConfig) -> std::io::Result<()> {
    serve(TcpListener::bind(addr).await?, config).await
}

/// The session a body belongs to (after a panic, to close it).
fn session_key_of(route: Route, headers: &hyper::HeaderMap, body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(format) = route.format() {
        let request = crate::openai::read_request(text, format).ok()?;
        let units = crate::openai::units(&request);
        return Some(crate::sessions::openai_session_key(
            header("session-id"),
            &request,
            &units,
        ));
    }
    let request = crate::anthropic::read_request(text).ok()?;
    Some(crate::sessions::session_key(
        header("x-claude-code-session-id"),
        &request,
        &crate::anthropic::units(&request),
    ))
}

/// Where a request goes, and what condense does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// To the Anthropic upstream; a Messages API call is rendered.
    Anthropic { renders: bool },
    /// To the OpenAI upstream; a Responses or Chat Completions call is
    /// rendered.
    OpenAi { renders: Option<Format> },
    /// To the ChatGPT backend (Codex signed in with ChatGPT); its Responses
    /// call is rendered.
    ChatGpt { renders: bool },
}

impl Route {
    fn renders(self) -> bool {
        self.format().is_some() || matches!(self, Route::Anthropic { renders: true })
    }

    /// The OpenAI format of a call this route renders.
    fn format(self) -> Option<Format> {
        match self {
            Route::OpenAi { renders } => renders,
            Route::ChatGpt { renders: true } => Some(Format::Responses),
            _ => None,
        }
    }
}

/// Where Codex signed in with ChatGPT sends its calls (`base_url` of a
/// provider with `requires_openai_auth`, as `condense codex` sets it).
pub const CHATGPT_PREFIX: &str = "/backend-api/";

/// The base URL path Codex signed in with ChatGPT is given (its calls are
/// this, then `/responses`, `/models`, …).
pub const CHATGPT_CODEX_BASE: &str = "/backend-api/codex";

/// Codex's Responses call to the ChatGPT backend.
const CHATGPT_RESPONSES: &str = "/backend-api/codex/responses";

/// The route of a request: an OpenAI API path (`/v1/…` other than
/// `/v1/messages…`, with no `anthropic-version` header) goes to the OpenAI
/// upstream, a ChatGPT backend path (`/backend-api/…`) to the ChatGPT
/// upstream, everything else to Anthropic's.
fn route(method: &hyper::Method, path: &str, headers: &hyper::HeaderMap) -> Route {
    let post = method == hyper::Method::POST;
    if path.starts_with(CHATGPT_PREFIX) {
        return Route::ChatGpt {
            renders: post && path == CHATGPT_RESPONSES,
        };
    }
    if path == "/v1/messages" {
        return Route::Anthropic { renders: post };
    }
    let openai = path.starts_with("/v1/")
        && !path.starts_with("/v1/messages")
        && !headers.contains_key("anthropic-version");
    if !openai {
        return Route::Anthropic { renders: false };
    }
    let renders = match path {
        "/v1/responses" if post => Some(Format::Responses),
        "/v1/chat/completions" if post => Some(Format::Chat),
        _ => None,
    };
    Route::OpenAi { renders }
}

/// The request body whole, gathered into one buffer as its chunks arrive
/// (sized by its `content-length` up to 64 MiB, growing past that to
/// [`MAX_BODY`]): collecting the chunks and then joining them would hold a
/// long conversation twice, and a header alone reserves no more than that.
/// A body that stops arriving for `gap` is given up.
async fn read_body(
    body: Incoming,
    length: Option<usize>,
    gap: Duration,
) -> Result<Bytes, Response<Body>> {
    let mut body = http_body_util::Limited::new(body, MAX_BODY);
    let mut whole = Vec::with_capacity(length.unwrap_or(0).min(64 << 20));
    loop {
        let frame = match tokio::time::timeout(gap, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(Bytes::from(whole)),
            Err(_) => {
                return Err(api_error(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "condense proxy: the request body stopped arriving for {} s",
                        gap.as_secs_f64()
                    ),
                ))
            }
        };
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    whole.extend_from_slice(&data);
                }
            }
            Err(e) => {
                let status = if e.is::<http_body_util::LengthLimitError>() {
                    StatusCode::PAYLOAD_TOO_LARGE
                } else {
                    StatusCode::BAD_REQUEST
                };
                return Err(api_error(
                    status,
                    &format!("condense proxy: reading the request: {e}"),
                ));
            }
        }
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.method() == hyper::Method::GET && req.uri().path() == HEALTH_PATH {
        let body = serde_json::json!({
            "condense": "proxy",
            "version": env!("CARGO_PKG_VERSION"),
            "upstream": shared.upstream,
            "openaiUpstream": shared.openai_upstream,
            "chatgptUpstream": shared.chatgpt_upstream,
        });
        return Ok(full(StatusCode::OK, body.to_string()));
    }
    let (parts, body) = req.into_parts();
    let route = route(&parts.method, parts.uri.path(), &parts.headers);
    let length = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let body = match read_body(body, length, shared.body_gap).await {
        Ok(b) => b,
        Err(answer) => return Ok(answer),
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut out = body.clone();
    let mut session_key = None;
    if route.renders() {
        let text = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let header = match route {
            Route::OpenAi { .. } | Route::ChatGpt { .. } => text("session-id"),
            Route::Anthropic { .. } => text("x-claude-code-session-id"),
        };
        // A ChatGPT sign-in's token is for the ChatGPT backend alone: its
        // summaries are extractive rather than sent to the OpenAI API.
        let credentials = match route {
            Route::ChatGpt { .. } => Credentials::default(),
            _ => Credentials {
                api_key: text("x-api-key"),
                authorization: text("authorization"),
                beta: text("anthropic-beta"),
            },
        };
        let task_shared = shared.clone();
        let task_body = body.clone();
        let task = tokio::spawn(async move {
            let text = std::str::from_utf8(&task_body).ok()?;
            let sessions = &task_shared.sessions;
            Some(match route.format() {
                Some(format) => {
                    sessions
                        .prepare_openai(header.as_deref(), &credentials, text, format, now_ms())
                        .await
                }
                _ => {
                    sessions
                        .prepare(header.as_deref(), &credentials, text, now_ms())
                        .await
                }
            })
        });
        match task.await {
            Ok(Some((key, prepared))) => {
                for n in &prepared.notices {
                    shared.notice(n);
                }
                if let Some(b) = prepared.body {
                    out = Bytes::from(b);
                }
                session_key = key;
            }
            Ok(None) => shared.notice("condense: request sent unchanged: not UTF-8"),
            Err(e) => {
                shared.notice(&format!(
                    "condense: request sent unchanged: the engine failed: {e}"
                ));
                if let Some(key) = session_key_of(route, &parts.headers, &body) {
                    shared.sessions.close(&key);
                }
            }
        }
    }

    let upstream_root = match route {
        Route::Anthropic { .. } => &shared.upstream,
        Route::OpenAi { .. } => &shared.openai_upstream,
        Route::ChatGpt { .. } => &shared.chatgpt_upstream,
    };
    let url = format!("{upstream_root}{path_and_query}");
    let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes())
        .unwrap_or(reqwest::Method::POST);
    let mut upstream = shared.client.request(method, &url);
    // The answer to a rendered call comes uncompressed, so its usage can
    // be read on the way (the client takes either).
    let rendered = route.renders();
    for (name, value) in &parts.headers {
        if HOP_BY_HOP.contains(&name.as_str())
            || name == hyper::header::CONTENT_LENGTH
            || (rendered && name == hyper::header::ACCEPT_ENCODING)
        {
            continue;
        }
        upstream = upstream.header(name.as_str(), value.as_bytes());
    }
    let answer = upstream.body(out).send().await;
    // The log goes to disk once the request is on its way, not before.
    if let Some(key) = session_key.clone() {
        let shared = shared.clone();
        tokio::spawn(async move { shared.sessions.sync(&key).await });
    }
    let answer = match answer {
        Ok(a) => a,
        Err(e) if e.is_timeout() && !e.is_connect() => {
            return Ok(api_error(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("condense proxy: the upstream {url} did not answer: {e}"),
            ))
        }
        Err(e) => {
            return Ok(api_error(
                StatusCode::BAD_GATEWAY,
                &format!("condense proxy: the upstream {url} could not be reached: {e}"),
            ))
        }
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            response = response.header(n, v);
        }
    }
    // A successful answer in a session is read for its usage on the way;
    // the session gets it before the answer's last bytes go out, so the
    // client's next request finds it. hyper stops polling a body once it
    // has sent its `content-length`, so such a body's end is counted, not
    // awaited; one cut short gives what it read when dropped.
    let length = answer.content_length();
    let tee = session_key
        .filter(|_| answer.status().is_success())
        .map(|key| UsageOnEnd {
            key,
            tee: match route {
                Route::OpenAi { .. } | Route::ChatGpt { .. } => UsageTee::openai(),
                Route::Anthropic { .. } => UsageTee::default(),
            },
            read: 0,
            shared,
        });
    let tee = Arc::new(std::sync::Mutex::new(tee));
    let at_end = tee.clone();
    let chunks = answer.bytes_stream().then(move |chunk| {
        let tee = tee.clone();
        async move {
            let bytes = chunk.map_err(std::io::Error::other)?;
            let whole = {
                let mut guard = tee
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                guard.as_mut().is_some_and(|t| {
                    t.tee.feed(&bytes);
                    t.read += bytes.len() as u64;
                    length.is_some_and(|l| t.read >= l)
                })
            };
            if whole {
                UsageOnEnd::record(&tee).await;
            }
            Ok(Frame::data(bytes))
        }
    });
    let end = futures_util::stream::once(async move {
        UsageOnEnd::record(&at_end).await;
        None
    })
    .filter_map(|x: Option<Result<Frame<Bytes>, std::io::Error>>| async move { x });
    let body: Body = BodyExt::boxed(StreamBody::new(chunks.chain(end)));
    Ok(response
        .body(body)
        .unwrap_or_else(|e| api_error(StatusCode::BAD_GATEWAY, &e.to_string())))
}

/// An answer's usage as it passes, given to its session at the answer's
/// end, or when its body is dropped first (cut short by the client).
struct UsageOnEnd {
    key: String,
    tee: UsageTee,
    /// The answer's bytes read.
    read: u64,
    shared: Arc<Shared>,
}

impl UsageOnEnd {
    /// Gives the session the usage read, once.
    async fn record(slot: &std::sync::Mutex<Option<UsageOnEnd>>) {
        let taken = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mut t) = taken {
            if let Some(usage) = std::mem::take(&mut t.tee).finish() {
                t.shared.sessions.record_usage(&t.key, usage).await;
            }
        }
    }
}

impl Drop for UsageOnEnd {
    fn drop(&mut self) {
        let Some(usage) = std::mem::take(&mut self.tee).finish() else {
            return;
        };
        // Outside a runtime (the process stopping) nothing is recorded.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (shared, key) = (self.shared.clone(), std::mem::take(&mut self.key));
            runtime.spawn(async move { shared.sessions.record_usage(&key, usage).await });
        }
    }
}
