//! One conversation seen through the proxy: the engine, the event log it
//! persists to, and the list of messages the engine holds, kept in step
//! with the history each request carries.
//!
//! The log is a pi session file (`<dir>/<key>.jsonl`): a `message` entry
//! for each view message the first time a request carries it, and the
//! entries the engine appends (index records, summaries, switches), so a
//! restarted proxy replays it with the store as any host's session and
//! renders the same bytes, and `condense render`/`query`/`status` read it.
//!
//! Claude Code sends no events, only the whole history each call. What is
//! new since the last request stands for pi's events, in pi's order: a new
//! assistant message is `message_end`, its results `turn_end` before the
//! call, a new prompt `agent_start` (after `agent_end` of the run its
//! previous reply ended).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use condense_core::{Message, ModelRef, Role, SummarizerModel};
use condense_engine::host::{self, TurnEnd};
use condense_engine::protocol::Effect;
use condense_engine::session::EngineLock;
use condense_engine::{CallFacts, Engine, StartParams};
use condense_store::append::{Appender, LockMode};
use condense_store::session::Session;
use condense_summarizer::{
    Anthropic, AnthropicConfig, ApiKey, Extractive, FallbackController, OpenAiCompatible,
    OpenAiConfig, Provider, Summarizer, SummarizerSettings, Target, TokioClock,
};
use serde_json::Value;

use crate::anthropic::{self, WireRequest};
use crate::log_text::{LogText, PARK_BYTES};
use crate::openai;
use crate::query_tool::QueryArgs;
use crate::render::{self, Api, HostList, WireBody};
use crate::span::Spliced;
use crate::view::{self, Part, Unit};

/// The context window assumed for a turn's budget gates when the model
/// does not say otherwise (Claude models' standard window).
const CONTEXT_WINDOW: u64 = 200_000;

/// The context window of a request's model: a Claude model asked for its
/// 1M window (the `context-1m` beta, or a `[1m]` model id), an OpenAI
/// model by family, else [`CONTEXT_WINDOW`].
fn context_window(api: Api, model: Option<&str>, beta: Option<&str>) -> u64 {
    let model = model.unwrap_or_default();
    match api {
        Api::Anthropic => {
            if beta.is_some_and(|b| b.contains("context-1m")) || model.contains("[1m]") {
                1_000_000
            } else {
                CONTEXT_WINDOW
            }
        }
        // What a prompt may hold, not the model's total: the gpt-5 family's
        // 400k includes 128k kept for output (Codex reports 95% of the rest,
        // 258,400, as its window).
        Api::OpenAi => [
            ("gpt-4.1", 1_047_576),
            ("gpt-4o", 128_000),
            ("gpt-5", 272_000),
        ]
        .iter()
        .find(|(family, _)| model.starts_with(family))
        .map_or(CONTEXT_WINDOW, |(_, window)| *window),
    }
}

/// A message the engine's list holds.
#[derive(Debug, Clone)]
struct Held {
    /// The log entry it came from.
    entry_id: String,
    /// It came from the wire (not a message condense wrote).
    wire: bool,
}

/// The turn in progress: an assistant message and the results after it.
struct Turn {
    message: Message,
    results: Vec<Message>,
    /// The call's tokens (prompt and output) as the provider reported them.
    tokens: Option<u64>,
}

/// The conversation's previous request, as the next one reads after it.
#[derive(Debug, Clone)]
struct Memo {
    wire: WireMemo,
    /// What was sent for it, cut from its body (`None`: the body as the
    /// client wrote it): a retry of the same body is sent the same bytes.
    sent: Option<Spliced>,
    /// Its units, without their views.
    units: Vec<Unit>,
    /// Where each unit is held.
    at: Vec<Option<usize>>,
}

/// The previous request's body and what was read of it, in its format.
#[derive(Debug, Clone)]
enum WireMemo {
    Anthropic(anthropic::WireMemo),
    OpenAi(openai::ItemsMemo),
}

impl WireMemo {
    /// Whether `body` is the previous request's body, byte for byte.
    fn is(&self, body: &str) -> bool {
        match self {
            WireMemo::Anthropic(w) => w.is(body),
            WireMemo::OpenAi(w) => w.is(body),
        }
    }
}

/// What a request becomes.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The body to send upstream; `None`: the request as the client sent
    /// it.
    pub body: Option<String>,
    /// What to tell the user (the proxy's log).
    pub notices: Vec<String>,
}

/// How sessions are set up.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The settings.json value (its `contextPrune` block is the config).
    pub settings: Value,
    /// The query tool's name as the model sees it.
    pub query_tool: String,
    /// Where an Anthropic conversation's summaries go (the proxy's
    /// upstream, with the client's credentials); `None`: the extractive
    /// summarizer only.
    pub upstream: Option<String>,
    /// Where an OpenAI conversation's summaries go (the OpenAI upstream's
    /// root, `/v1/chat/completions` appended); `None`: extractive only.
    pub openai_upstream: Option<String>,
    /// The HTTP client summaries are sent with.
    pub client: reqwest::Client,
}

impl SessionOptions {
    /// Options with no upstream for summaries (the extractive summarizer).
    pub fn offline(settings: Value, query_tool: &str) -> SessionOptions {
        SessionOptions {
            settings,
            query_tool: query_tool.to_owned(),
            upstream: None,
            openai_upstream: None,
            client: reqwest::Client::new(),
        }
    }
}

/// The summarizer model when `summarizerModel` is `default`: the provider's
/// cheaper model.
pub const DEFAULT_SUMMARIZER_MODEL: &str = "claude-haiku-4-5";

/// [`DEFAULT_SUMMARIZER_MODEL`] for an OpenAI conversation.
pub const DEFAULT_OPENAI_SUMMARIZER_MODEL: &str = "gpt-5-mini";

/// The client's credentials of one request, for the summaries its flushes
/// send upstream. Held in memory for that request only, never written.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// `x-api-key`.
    pub api_key: Option<String>,
    /// `authorization` (an OAuth bearer token).
    pub authorization: Option<String>,
    /// `anthropic-beta`, sent with a bearer token (OAuth needs its beta).
    pub beta: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

impl Credentials {
    fn any(&self) -> bool {
        self.api_key.is_some() || self.authorization.is_some()
    }
}

/// A model's input price, by family, in dollars per million tokens (for
/// the summarizer's price against the session model's). The most specific
/// family comes first.
fn family_price(model: &str) -> Option<f64> {
    [
        ("opus", 5.0),
        ("sonnet", 3.0),
        ("haiku", 1.0),
        ("gpt-5-nano", 0.05),
        ("gpt-5-mini", 0.25),
        ("gpt-5", 1.25),
        ("gpt-4.1-nano", 0.1),
        ("gpt-4.1-mini", 0.4),
        ("gpt-4.1", 2.0),
        ("gpt-4o-mini", 0.15),
        ("gpt-4o", 2.5),
    ]
    .iter()
    .find(|(family, _)| model.contains(family))
    .map(|(_, price)| *price)
}

/// One conversation (see the module docs).
pub struct ProxySession {
    key: String,
    path: PathBuf,
    options: SessionOptions,
    engine: Mutex<Engine>,
    log: Appender,
    /// The log opened for reading, where parked messages are read back
    /// (`None` if it could not be: then nothing is parked).
    log_reader: Option<Arc<std::fs::File>>,
    /// Tool results the log now holds, parked once the engine has seen
    /// them (`log_text`): each with where its JSON is in the log.
    to_park: Vec<(Message, std::ops::Range<u64>)>,
    messages: Vec<Message>,
    held: Vec<Held>,
    /// The text each message condense wrote is sent as (`None` for the
    /// client's own).
    texts: Vec<Option<String>>,
    /// How many of `messages` the engine's copy holds.
    engine_len: usize,
    turn: Option<Turn>,
    turn_index: i64,
    /// The credentials of the request being prepared.
    credentials: Credentials,
    /// What the last answer's call billed, for the assistant message the
    /// next request brings.
    usage: Option<view::Usage>,
    /// What the next request of the conversation reads after.
    memo: Option<Memo>,
    /// The API the conversation speaks (where its summaries go).
    api: Api,
    /// The context window of the model the last request named.
    context_window: u64,
    fallback: Arc<FallbackController>,
}

impl std::fmt::Debug for ProxySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxySession")
            .field("key", &self.key)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

/// Why a session could not be opened.
#[derive(Debug)]
pub struct SessionError(pub String);

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionError {}

fn header_line(key: &str, now_ms: i64) -> String {
    serde_json::json!({
        "type": "session",
        "version": 3,
        "id": key,
        "timestamp": condense_store::time::format_iso(now_ms),
        "cwd": "",
    })
    .to_string()
}

/// Creates `dir` (and its parents) if it is missing, the directory itself
/// readable by its owner only.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// What [`ProxySession::prepare_with`] gives for a request sent as the
/// client wrote it: the notices saying why, and where its units stand.
fn unchanged(
    notices: Vec<String>,
    at: Option<Vec<Option<usize>>>,
) -> (Prepared, Option<Spliced>, Option<Vec<Option<usize>>>) {
    (
        Prepared {
            body: None,
            notices,
        },
        None,
        at,
    )
}

/// Where the history a conversation is first seen with ends, from unit
/// `from`, for [`ProxySession::bootstrap`]: before its newest assistant
/// message, whose turn the engine sees end (capturing the history with
/// it), or before the last reply up to it, which asks for the flush the
/// replies before it would have; and before the first query placeholder,
/// answered with the engine holding what came before it.
fn bootstrap_end(units: &[Unit], from: usize) -> usize {
    let Some(newest) = units
        .iter()
        .rposition(|u| u.part == Part::Assistant)
        .filter(|n| *n >= from)
    else {
        return from;
    };
    let is_reply = |i: usize| !matches!(units.get(i + 1).map(|u| u.part), Some(Part::Result(_)));
    let ahead = &units[from..=newest];
    let reply = ahead
        .iter()
        .enumerate()
        .rposition(|(i, u)| u.part == Part::Assistant && is_reply(from + i));
    let query = ahead.iter().position(|u| u.pending_query.is_some());
    from + [reply, query]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(newest - from)
}

fn is_wire_role(m: &Message) -> bool {
    m.is(&Role::User) || m.is(&Role::Assistant) || m.is(&Role::ToolResult)
}

impl ProxySession {
    /// Opens (or creates) the session `key` under `dir`: a log that exists
    /// is replayed, so the engine is where it was when the proxy stopped.
    pub fn open(
        dir: &Path,
        key: &str,
        options: SessionOptions,
        now_ms: i64,
    ) -> Result<ProxySession, SessionError> {
        let path = dir.join(format!("{key}.jsonl"));
        let fail = |e: &dyn std::fmt::Display| SessionError(format!("{}: {e}", path.display()));
        // The logs hold whole conversations: readable by their owner only.
        private_dir(dir).map_err(|e| fail(&e))?;
        if std::fs::symlink_metadata(&path).is_err() {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&path).map_err(|e| fail(&e))?;
            use std::io::Write;
            writeln!(file, "{}", header_line(key, now_ms)).map_err(|e| fail(&e))?;
        }
        // Synced after the request has gone upstream, off its path
        // (`ProxySession::sync_log`).
        let log = Appender::open(&path, LockMode::Try)
            .map_err(|e| fail(&e))?
            .without_sync_each();
        let log_reader = log.reader().ok().map(Arc::new);
        let mut session = ProxySession {
            key: key.to_owned(),
            path,
            options,
            engine: Mutex::new(Engine::default()),
            log,
            log_reader,
            to_park: Vec::new(),
            messages: Vec::new(),
            held: Vec::new(),
            texts: Vec::new(),
            engine_len: 0,
            turn: None,
            turn_index: 0,
            credentials: Credentials::default(),
            usage: None,
            memo: None,
            api: Api::default(),
            context_window: CONTEXT_WINDOW,
            fallback: Arc::new(FallbackController::new(Arc::new(TokioClock::new()))),
        };
        let branch_leaf = session.log.leaf_id().map(str::to_owned);
        session.restart(branch_leaf.as_deref())?;
        Ok(session)
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The messages the engine's list holds.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// How many of [`ProxySession::messages`] are parked in the log (read
    /// back from it when their text is needed, not held in memory).
    pub fn parked(&self) -> usize {
        self.messages.iter().filter(|m| m.is_parked()).count()
    }

    /// Rebuilds the list and the engine from the log's branch ending at
    /// `leaf` (the whole file's leaf, or where a fork continues).
    fn restart(&mut self, leaf: Option<&str>) -> Result<(), SessionError> {
        let session = Session::open(&self.path)
            .map_err(|e| SessionError(format!("{}: {e}", self.path.display())))?;
        let branch = match leaf {
            Some(id) => session.branch(Some(id)),
            None => Vec::new(),
        };
        let context = condense_store::context::build_context(&branch);
        self.held = context
            .entry_ids
            .iter()
            .zip(&context.messages)
            .map(|(id, m)| Held {
                entry_id: id.clone(),
                wire: is_wire_role(m),
            })
            .collect();
        self.messages = context.messages;
        self.texts = self
            .messages
            .iter()
            .zip(&self.held)
            .map(|(m, h)| (!h.wire).then(|| render::wire_text(m, &self.options.query_tool)))
            .collect();
        self.engine_len = 0;
        self.to_park.clear();
        self.turn = None;
        self.turn_index = 0;
        self.memo = None;
        let effects = self.engine().start(StartParams {
            settings: self.options.settings.clone(),
            session_id: self.key.clone(),
            session_dir: self.path.parent().map(Path::to_path_buf),
            misses_dir: None,
            session_file: Some(self.path.clone()),
            branch: condense_engine::jsonl(branch.iter().map(|e| e.raw())),
            tree: false,
        });
        // Start's effects are warnings and the footer: nothing to persist.
        drop(effects);
        Ok(())
    }

    fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.engine()
    }

    /// The summarizer model's id (`summarizerModel`, its provider left
    /// out; `default`: [`DEFAULT_SUMMARIZER_MODEL`]).
    fn summarizer_model(&self) -> String {
        let config = self.engine().config().clone();
        match config.summarizer() {
            SummarizerModel::HostDefault => match self.api {
                Api::Anthropic => DEFAULT_SUMMARIZER_MODEL,
                Api::OpenAi => DEFAULT_OPENAI_SUMMARIZER_MODEL,
            }
            .to_owned(),
            SummarizerModel::Named(spec) => {
                spec.split_once('/').map_or(spec, |(_, id)| id).to_owned()
            }
        }
    }

    /// Summaries go upstream with the client's credentials, to the
    /// summarizer model; the extractive summarizer stands in when that
    /// fails (and is all there is with no upstream or no credentials).
    fn summarizer(&self) -> Summarizer {
        let settings = SummarizerSettings::from_config(self.engine().config());
        let extractive = Target::new(
            Arc::new(Extractive::new()),
            ModelRef::new("condense", "extractive"),
        );
        let upstream = match self.api {
            Api::Anthropic => self.options.upstream.as_ref(),
            Api::OpenAi => self.options.openai_upstream.as_ref(),
        };
        let Some(upstream) = upstream.filter(|_| self.credentials.any()) else {
            return Summarizer::new(extractive, settings);
        };
        let provider: Arc<dyn Provider> = match self.api {
            Api::Anthropic => Arc::new(self.anthropic_provider(upstream)),
            Api::OpenAi => Arc::new(self.openai_provider(upstream)),
        };
        Summarizer::new(
            Target::new(
                provider,
                ModelRef::new(self.api.provider(), self.summarizer_model()),
            ),
            settings,
        )
        .with_session_fallback(extractive, self.fallback.clone())
    }

    /// Anthropic's API with the request's credentials.
    fn anthropic_provider(&self, upstream: &str) -> Anthropic {
        let mut extra = Vec::new();
        if let Some(a) = &self.credentials.authorization {
            extra.push(("authorization".to_owned(), a.clone()));
            if let Some(b) = &self.credentials.beta {
                extra.push(("anthropic-beta".to_owned(), b.clone()));
            }
        }
        Anthropic::with_client(
            AnthropicConfig {
                base_url: upstream.to_owned(),
                api_key: self
                    .credentials
                    .api_key
                    .clone()
                    .map_or(ApiKey::None, ApiKey::Value),
                extra_headers: extra,
                ..AnthropicConfig::default()
            },
            self.options.client.clone(),
        )
    }

    /// An OpenAI-compatible API with the request's bearer token.
    fn openai_provider(&self, upstream: &str) -> OpenAiCompatible {
        let token = self
            .credentials
            .authorization
            .as_deref()
            .map(|a| a.strip_prefix("Bearer ").unwrap_or(a).to_owned())
            .or_else(|| self.credentials.api_key.clone());
        OpenAiCompatible::with_client(
            OpenAiConfig {
                base_url: format!("{}/v1", upstream.trim_end_matches('/')),
                api_key: token.map_or(ApiKey::None, ApiKey::Value),
                pricing: None,
            },
            self.options.client.clone(),
        )
    }

    /// The summarizer's input price over the call's model's, when both are
    /// models whose family prices are known.
    fn summarizer_price(&self, model: Option<&str>) -> Option<f64> {
        let summarizer = family_price(&self.summarizer_model())?;
        let model = family_price(model?)?;
        Some(summarizer / model)
    }

    /// Carries out the engine's effects: entries go to the log, and a
    /// message the model is to see joins the list.
    fn apply(&mut self, effects: Vec<Effect>, now_ms: i64, notices: &mut Vec<String>) {
        for effect in effects {
            match effect {
                Effect::Append {
                    custom_type, data, ..
                } => {
                    if let Err(e) = self.log.append_custom(&custom_type, &data, now_ms) {
                        notices.push(format!("condense: writing the session log: {e}"));
                    }
                }
                Effect::AppendMessage {
                    custom_type,
                    content,
                    display,
                    details,
                    ..
                } => {
                    match self.log.append_custom_message(
                        &custom_type,
                        &content,
                        display,
                        &details,
                        now_ms,
                    ) {
                        Ok(id) => {
                            let m = condense_store::context::custom_message(
                                &custom_type,
                                &content,
                                display,
                                &details,
                                now_ms,
                            );
                            if let Some(m) = m {
                                self.texts
                                    .push(Some(render::wire_text(&m, &self.options.query_tool)));
                                self.messages.push(m);
                                self.held.push(Held {
                                    entry_id: id,
                                    wire: false,
                                });
                            }
                        }
                        Err(e) => notices.push(format!("condense: writing the session log: {e}")),
                    }
                }
                Effect::Notify { text, .. } => notices.push(text),
                _ => {}
            }
        }
    }

    /// Closes the turn in progress: `turn_end`, and `agent_end` when it
    /// ended its run.
    async fn close_turn(&mut self, now_ms: i64, notices: &mut Vec<String>) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        let summarizer = self.summarizer();
        let effects = host::turn_end(
            &self.engine,
            TurnEnd {
                turn_index: self.turn_index,
                message: &turn.message,
                results: &turn.results,
                tokens: turn.tokens,
                context_window: self.context_window,
                now: now_ms,
            },
            || summarizer,
            &move || now_ms,
        )
        .await;
        self.apply(effects, now_ms, notices);
        // The engine has captured the turn's results: their texts can live
        // in the log from now on.
        self.park(notices);
        self.turn_index += 1;
        if turn.message.is_text_only_assistant() || turn.results.is_empty() {
            let effects = self.engine().agent_end();
            self.apply(effects, now_ms, notices);
            self.turn_index = 0;
        }
    }

    /// Matches the request's view with the list: for each unit, the held
    /// message it is. Returns the first unit not held, and where the list
    /// stops matching when the history diverged from it (an edit, a
    /// rewind).
    fn match_units(
        &self,
        units: &[Unit],
        known: &[Option<usize>],
    ) -> (Vec<Option<usize>>, usize, Option<usize>) {
        let mut at = vec![None; units.len()];
        at[..known.len()].copy_from_slice(known);
        let mut h = known.iter().rev().find_map(|h| *h).map_or(0, |h| h + 1);
        for (u, unit) in units.iter().enumerate().skip(known.len()) {
            while h < self.messages.len() && !self.held[h].wire {
                h += 1;
            }
            if h == self.messages.len() {
                return (at, u, None);
            }
            let held = &self.messages[h];
            // By call first: a parked result is then not read back.
            let same = (unit.matches_by_call()
                && held.is(&Role::ToolResult)
                && held.skeleton().tool_call_id.as_deref() == unit.call_id.as_deref())
                || view::holds(&held.json(), &unit.view);
            if same {
                at[u] = Some(h);
                h += 1;
            } else if !unit.cleared {
                return (at, u, Some(h));
            }
        }
        (at, units.len(), None)
    }

    /// Starts a new branch of the log where the history diverged from the
    /// list (at held message `h`): the list and the engine go back to what
    /// the log holds before it.
    fn fork(&mut self, h: usize) -> Result<(), SessionError> {
        let session = Session::open(&self.path)
            .map_err(|e| SessionError(format!("{}: {e}", self.path.display())))?;
        let entry = &self.held[h].entry_id;
        let parent = session.entry(entry).and_then(|e| e.parent_id.clone());
        self.log
            .set_leaf(parent.as_deref())
            .map_err(|e| SessionError(e.to_string()))?;
        self.restart(parent.as_deref())
    }

    /// Brings the list in step with `request` and renders it: the body to
    /// send upstream.
    pub async fn prepare(
        &mut self,
        mut request: WireRequest<'_>,
        mut units: Vec<Unit>,
        credentials: &Credentials,
        now_ms: i64,
    ) -> Prepared {
        if let Some(retry) = self.retry(request.body) {
            return retry;
        }
        request.forget_result_texts();
        self.memo = None;
        self.credentials = credentials.clone();
        let (prepared, sent, at) = self.prepare_with(&request, &mut units, &[], now_ms).await;
        self.credentials = Credentials::default();
        self.remember(request, units, at, sent);
        prepared
    }

    /// Names the query tool as the client lists it, in what condense writes
    /// from now on (stubs, summaries).
    pub fn name_query_tool(&mut self, name: &str) {
        if self.options.query_tool == name {
            return;
        }
        self.options.query_tool = name.to_owned();
        for h in 0..self.messages.len() {
            if !self.held[h].wire {
                self.texts[h] = Some(render::wire_text(&self.messages[h], name));
            }
        }
    }

    /// [`ProxySession::prepare`] of an OpenAI request read whole, with
    /// its units (all of them).
    pub async fn prepare_read(
        &mut self,
        request: openai::ItemsRequest<'_>,
        units: Vec<Unit>,
        credentials: &Credentials,
        now_ms: i64,
    ) -> Prepared {
        if let Some(retry) = self.retry(request.body) {
            return retry;
        }
        self.memo = None;
        self.prepare_openai(request, units, Vec::new(), credentials, now_ms)
            .await
    }

    /// [`ProxySession::prepare`] of an OpenAI body, read after the
    /// conversation's previous request: the items it shares with that one
    /// are neither read, viewed nor matched again.
    pub async fn prepare_items(
        &mut self,
        body: &str,
        format: openai::Format,
        credentials: &Credentials,
        now_ms: i64,
    ) -> Result<Prepared, crate::WireError> {
        if let Some(retry) = self.retry(body) {
            return Ok(retry);
        }
        let (wire, mut units, mut known) = match self.memo.take() {
            Some(Memo {
                wire: WireMemo::OpenAi(w),
                units,
                at,
                ..
            }) => (Some(w), units, at),
            _ => Default::default(),
        };
        let request = openai::read_request_after(body, format, wire)?;
        let first_group = request
            .groups
            .iter()
            .position(|g| g.start >= request.reused)
            .unwrap_or(request.groups.len());
        let n = units.iter().take_while(|u| u.message < first_group).count();
        units.truncate(n);
        known.truncate(n);
        units.extend(openai::units_from(&request, first_group));
        Ok(self
            .prepare_openai(request, units, known, credentials, now_ms)
            .await)
    }

    async fn prepare_openai(
        &mut self,
        mut request: openai::ItemsRequest<'_>,
        mut units: Vec<Unit>,
        known: Vec<Option<usize>>,
        credentials: &Credentials,
        now_ms: i64,
    ) -> Prepared {
        // Stubs are only shown a model that can page the originals back.
        let Some(tool) = request.query_tool() else {
            return Prepared::default();
        };
        request.forget_output_texts();
        self.name_query_tool(&tool);
        self.credentials = credentials.clone();
        let (prepared, sent, at) = self
            .prepare_with(&request, &mut units, &known, now_ms)
            .await;
        self.credentials = Credentials::default();
        // The items through the first user prompt identify the
        // conversation (`sessions::openai_session_key`).
        let head = units
            .iter()
            .find(|u| u.opens_run)
            .map_or(1, |u| request.groups[u.message].end);
        self.memo = at.map(|mut at| {
            for u in &mut units {
                u.view = String::new();
            }
            units.shrink_to_fit();
            at.shrink_to_fit();
            Memo {
                wire: WireMemo::OpenAi(openai::ItemsMemo::from_request(request, head)),
                sent,
                units,
                at,
            }
        });
        prepared
    }

    /// [`ProxySession::prepare`] of a body, read after the conversation's
    /// previous request: the messages it shares with that one are neither
    /// read nor matched again.
    pub async fn prepare_text(
        &mut self,
        body: &str,
        credentials: &Credentials,
        now_ms: i64,
    ) -> Result<Prepared, crate::WireError> {
        if let Some(retry) = self.retry(body) {
            return Ok(retry);
        }
        let (wire, mut units, mut known) = match self.memo.take() {
            Some(Memo {
                wire: WireMemo::Anthropic(w),
                units,
                at,
                ..
            }) => (Some(w), units, at),
            _ => Default::default(),
        };
        let request = anthropic::read_request_after(body, wire)?;
        let n = units
            .iter()
            .take_while(|u| u.message < request.reused)
            .count();
        units.truncate(n);
        known.truncate(n);
        units.extend(anthropic::units_from(&request, request.reused));
        self.credentials = credentials.clone();
        let (prepared, sent, at) = self
            .prepare_with(&request, &mut units, &known, now_ms)
            .await;
        self.credentials = Credentials::default();
        self.remember(request, units, at, sent);
        Ok(prepared)
    }

    /// A retry: the body the previous request carried, byte for byte, is
    /// sent what that one was. The engine is not asked again (the first
    /// send is a fact it has learnt from; a client retrying after an error
    /// must not get other bytes, nor turn events twice).
    fn retry(&self, body: &str) -> Option<Prepared> {
        let memo = self.memo.as_ref()?;
        memo.wire.is(body).then(|| Prepared {
            // Not cut from this body only on a print collision: fail open.
            body: memo.sent.as_ref().and_then(|s| s.write(body)),
            notices: Vec::new(),
        })
    }

    /// Keeps what the next request of the conversation reads after: the
    /// request, its units without their views, and where each is held.
    fn remember(
        &mut self,
        request: WireRequest<'_>,
        mut units: Vec<Unit>,
        at: Option<Vec<Option<usize>>>,
        sent: Option<Spliced>,
    ) {
        self.memo = at.map(|mut at| {
            for u in &mut units {
                u.view = String::new();
            }
            units.shrink_to_fit();
            at.shrink_to_fit();
            Memo {
                wire: WireMemo::Anthropic(anthropic::WireMemo::from_request(request)),
                sent,
                units,
                at,
            }
        });
    }

    /// The body's bytes through its first message, as the last request
    /// sent them (`None` before one).
    pub fn head(&self) -> Option<&str> {
        self.memo.as_ref().map(|m| match &m.wire {
            WireMemo::Anthropic(w) => w.head(),
            WireMemo::OpenAi(w) => w.head(),
        })
    }

    async fn prepare_with(
        &mut self,
        request: &(dyn WireBody + Sync),
        units: &mut [Unit],
        known: &[Option<usize>],
        now_ms: i64,
    ) -> (Prepared, Option<Spliced>, Option<Vec<Option<usize>>>) {
        self.api = request.api();
        self.context_window =
            context_window(self.api, request.model(), self.credentials.beta.as_deref());
        let mut notices = Vec::new();
        let (mut at, mut first_new, diverged) = self.match_units(units, known);
        if let Some(h) = diverged {
            if let Err(e) = self.fork(h) {
                notices.push(format!("condense: {e}"));
                return unchanged(notices, None);
            }
            // The fork keeps the list before `h`, where the known units are.
            (at, first_new, _) = self.match_units(units, known);
        }
        // Queries answered before show the answer they were given.
        let mut answers: HashMap<usize, String> = HashMap::new();
        for (u, unit) in units.iter().enumerate().take(first_new) {
            if let (Some(_), Some(h)) = (&unit.pending_query, at[u]) {
                answers.insert(u, render::text_of(&self.messages[h]));
            }
        }
        // The last answer's usage belongs to the newest assistant message
        // (the one that answer was).
        let newest_assistant = units.iter().rposition(|x| x.part == Part::Assistant);
        // A conversation first seen with a history takes it in one step
        // (`bootstrap`): replayed turn by turn, each turn's end would cost
        // the engine the whole branch before it. The last reply and the
        // prompt after it go through as events, so the flush a reply asks
        // for is asked for once.
        let fresh = self.messages.is_empty() && known.is_empty();
        // Before this, no unit is taken in one step again (a unit that
        // reads as no message stops a bootstrap and goes through alone).
        let mut booted = 0;
        let mut next = first_new;
        while next < units.len() {
            if fresh && next >= booted && (next == 0 || units[next - 1].opens_run) {
                let end = bootstrap_end(units, next);
                if end > next {
                    let taken = self.bootstrap(
                        &mut units[next..end],
                        &mut at[next..end],
                        now_ms,
                        &mut notices,
                    );
                    match taken {
                        Ok(taken) => next += taken,
                        Err(e) => {
                            notices.push(format!("condense: {e}"));
                            return unchanged(notices, None);
                        }
                    }
                    booted = end;
                    continue;
                }
            }
            let u = next;
            next += 1;
            if units[u].cleared {
                continue;
            }
            if let Some(args) = units[u].pending_query.clone() {
                let text = self.answer(&args);
                let unit = &mut units[u];
                unit.view = view::result_view(
                    unit.call_id.as_deref().unwrap_or_default(),
                    view::MCP_QUERY_TOOL,
                    &[&text],
                    false,
                );
                answers.insert(u, text);
            }
            let unit = &units[u];
            let usage = if newest_assistant == Some(u) {
                self.usage.take()
            } else {
                None
            };
            let starts_run = unit.opens_run;
            let part = unit.part;
            // The message is made from the view, which the call needs no
            // more: a first call would otherwise hold its history twice.
            let view = std::mem::take(&mut units[u].view);
            let json = view::with_facts(&view, usage.as_ref(), now_ms);
            drop(view);
            let Ok(message) = Message::from_json(&json) else {
                continue;
            };
            drop(json);
            if starts_run {
                self.close_turn(now_ms, &mut notices).await;
                let summarizer = self.summarizer();
                let effects = host::agent_start(&self.engine, || summarizer, &move || now_ms).await;
                self.apply(effects, now_ms, &mut notices);
            }
            let entry_id = match self.log.append_message_at(&message, now_ms) {
                Ok((id, range)) => {
                    if let Some(range) = range.filter(|_| {
                        message.is(&Role::ToolResult) && message.json().len() >= PARK_BYTES
                    }) {
                        self.to_park.push((message.clone(), range));
                    }
                    id
                }
                Err(e) => {
                    notices.push(format!("condense: writing the session log: {e}"));
                    return unchanged(notices, None);
                }
            };
            at[u] = Some(self.messages.len());
            self.messages.push(message.clone());
            self.texts.push(None);
            self.held.push(Held {
                entry_id,
                wire: true,
            });
            match part {
                Part::Assistant => {
                    self.close_turn(now_ms, &mut notices).await;
                    let summarizer = self.summarizer();
                    let effects = host::message_end(
                        &self.engine,
                        message.clone(),
                        || summarizer,
                        &move || now_ms,
                    )
                    .await;
                    self.apply(effects, now_ms, &mut notices);
                    self.turn = Some(Turn {
                        message,
                        results: Vec::new(),
                        tokens: usage.map(|u| {
                            u.input
                                .saturating_add(u.cache_read)
                                .saturating_add(u.cache_write)
                                .saturating_add(u.output)
                        }),
                    });
                }
                Part::Result(_) => {
                    if let Some(turn) = &mut self.turn {
                        turn.results.push(message);
                    }
                }
                Part::Prompt => {}
            }
        }
        if self.turn.as_ref().is_some_and(|t| !t.results.is_empty()) {
            self.close_turn(now_ms, &mut notices).await;
        }

        let call = CallFacts {
            now_ms: Some(now_ms),
            model: request
                .model()
                .map(|m| format!("{}/{m}", request.api().provider())),
            summarizer_price: self.summarizer_price(request.model()),
        };
        let keep = self.engine_len;
        let append = self.messages[keep..].to_vec();
        let (steps, effects) = self.engine().context_at(keep, append, &call);
        let held = self.messages.len();
        self.engine_len = held;
        self.apply(effects, now_ms, &mut notices);
        self.park(&mut notices);
        let steps = match steps {
            Some(s) => s,
            None if !answers.is_empty() => vec![condense_core::PlanStep::Keep(0..held)],
            None => return unchanged(notices, Some(at)),
        };
        let mut unit_of = vec![None; held];
        for (u, h) in at.iter().enumerate() {
            if let Some(h) = h.filter(|h| *h < held) {
                unit_of[h] = Some(u);
            }
        }
        let host = HostList {
            messages: &self.messages[..held],
            units: &unit_of,
            texts: &self.texts[..held],
        };
        match request.rebuild(units, &host, &steps, &answers, &self.options.query_tool) {
            Ok(sent) => (
                Prepared {
                    body: sent.as_ref().and_then(|s| s.write(request.body())),
                    notices,
                },
                sent,
                Some(at),
            ),
            Err(e) => {
                notices.push(format!("condense: sent unchanged: {e}"));
                unchanged(notices, Some(at))
            }
        }
    }

    /// Takes `units`, a history the session has not seen, into the log and
    /// the list without the events each of its turns would send: the
    /// engine is handed them at once ([`Engine::appended`]) and queues
    /// their work as their turns' ends would have, oversized outputs
    /// spilled. Sets `at` for each
    /// unit, and stops before a unit that reads as no message (it goes
    /// through as an event). Returns how many units were taken.
    fn bootstrap(
        &mut self,
        units: &mut [Unit],
        at: &mut [Option<usize>],
        now_ms: i64,
        notices: &mut Vec<String>,
    ) -> Result<usize, SessionError> {
        let taken = self.take_history(units, at, now_ms);
        // What was taken, the engine holds too, whatever stopped the rest.
        let keep = self.engine_len;
        let append = self.messages[keep..].to_vec();
        let effects = self.engine().appended(keep, append, now_ms);
        self.engine_len = self.messages.len();
        self.apply(effects, now_ms, notices);
        taken
    }

    /// [`ProxySession::bootstrap`]'s log and list.
    fn take_history(
        &mut self,
        units: &mut [Unit],
        at: &mut [Option<usize>],
        now_ms: i64,
    ) -> Result<usize, SessionError> {
        let mut taken = 0;
        for (unit, at) in units.iter_mut().zip(at) {
            if unit.cleared {
                taken += 1;
                continue;
            }
            let Ok(message) = Message::from_json(&view::with_facts(&unit.view, None, now_ms))
            else {
                break;
            };
            let (entry_id, range) = self
                .log
                .append_message_at(&message, now_ms)
                .map_err(|e| SessionError(format!("writing the session log: {e}")))?;
            taken += 1;
            // The message holds the view's text now: not twice.
            drop(std::mem::take(&mut unit.view));
            // Turns counted within their run, as their ends would have.
            if message.is_text_only_assistant() {
                self.turn_index = 0;
            } else if message.is(&Role::Assistant) {
                self.turn_index += 1;
            }
            if let Some(range) = range
                .filter(|_| message.is(&Role::ToolResult) && message.json().len() >= PARK_BYTES)
            {
                self.to_park.push((message.clone(), range));
            }
            *at = Some(self.messages.len());
            self.messages.push(message);
            self.texts.push(None);
            self.held.push(Held {
                entry_id,
                wire: true,
            });
        }
        Ok(taken)
    }

    /// Parks the tool results the log holds now that the engine has seen
    /// them (captured their calls, weighed them): from now on they are read
    /// back from the log when the engine needs their text.
    fn park(&mut self, notices: &mut Vec<String>) {
        let Some(log) = &self.log_reader else {
            self.to_park.clear();
            return;
        };
        for (message, range) in self.to_park.drain(..) {
            if let Err(e) = LogText::park(log, &message, range) {
                notices.push(format!("condense: a tool result stays in memory: {e}"));
            }
        }
    }

    /// Records what the last answer billed (the provider's own report).
    pub fn record_usage(&mut self, usage: view::Usage) {
        self.usage = Some(usage);
    }

    /// The answer to a `context_tree_query` call with these arguments.
    fn answer(&self, args: &str) -> String {
        let args = QueryArgs::from_json(args);
        let answer = self.engine().query(&args.tool_call_ids, args.page());
        answer["text"].as_str().unwrap_or_default().to_owned()
    }

    /// Syncs the log to disk (after a request went upstream).
    pub fn sync_log(&self) {
        let _ = self.log.sync();
    }

    /// `context_tree_query`'s answer in this session.
    pub fn query(&self, ids: &[String], page: condense_core::PageRequest) -> Value {
        self.engine().query(ids, page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_window_follows_the_model() {
        assert_eq!(
            context_window(Api::Anthropic, Some("claude-sonnet-4-5"), None),
            200_000
        );
        assert_eq!(
            context_window(
                Api::Anthropic,
                Some("claude-sonnet-4-5"),
                Some("oauth-2025-04-20,context-1m-2025-08-07")
            ),
            1_000_000
        );
        assert_eq!(
            context_window(Api::Anthropic, Some("claude-opus-4-7[1m]"), None),
            1_000_000
        );
        assert_eq!(context_window(Api::OpenAi, Some("gpt-5.5"), None), 272_000);
        assert_eq!(
            context_window(Api::OpenAi, Some("gpt-4.1-mini"), None),
            1_047_576
        );
        assert_eq!(context_window(Api::OpenAi, Some("llama-3"), None), 200_000);
    }
}
