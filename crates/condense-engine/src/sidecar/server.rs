//! The sidecar's async layer: JSON lines on stdio (docs/protocol.md), the
//! engine behind a lock, and LLM calls forwarded to the shim.
//!
//! The reading loop routes each incoming line: `context` is answered right
//! there (pi waits for it before every LLM call), the shim's other requests
//! are handled on their own tasks (so a `context` is answered while a flush
//! waits for the LLM). Those that change the session are handled one after
//! another in the order they came, and an `ordered` `context` after them,
//! so a shim may send a turn's requests without waiting for each answer.
//! Responses to our `llm.complete` requests and their
//! `llm.event` notifications go to the waiting provider call. Lines out are
//! written whole, under a lock, by whoever sends them: no writer task to hand
//! them to. The engine lock is never held across an `.await`.
//!
//! Every request is answered: a handler that panics is answered with an
//! `internal` error (its own task, or `catch_unwind` for `context`), and no
//! lock is left poisoned for the next one.

use std::collections::HashMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use condense_core::{Message, ModelRef, SummarizerModel, HOST_DEFAULT_MODEL};
use condense_store::append::SessionHold;
use condense_summarizer::{
    Extractive, FallbackController, Provider, Summarizer, SummarizerSettings, Target, TokioClock,
};
use serde_json::{json, Value};
use tokio::io::AsyncBufRead;
use tokio::sync::oneshot;

use super::answer::ContextAnswers;
use super::commands::{self, CommandEnv, CommandHost};
use super::lines::{
    error_line, failure_text, out_of_sync_line, panic_text, read_line, read_messages, request_id,
    MAX_LINE, OUT_OF_SYNC,
};
use super::outbox::{LineWriter, Outbox, ShimProvider};
use crate::protocol::{
    CompletionModel, EffectsResult, ErrorBody, HelloResult, ProtocolErrorParams, TurnEndResult,
    UiEffectsParams, PROTOCOL_VERSION,
};
use crate::request::{ContextParams, Incoming, LlmEventKind, Request};
use crate::session::EngineLock;
use crate::{host, jsonl, CallFacts, Effects, Engine, StartParams};

/// The protocol version this sidecar speaks.
pub const PROTOCOL: u64 = PROTOCOL_VERSION;

/// Shared state of the server.
pub struct Server {
    engine: Mutex<Engine>,
    /// The last `context` answer, for incremental answers.
    answers: Mutex<ContextAnswers>,
    outbox: Outbox,
    fallback: Arc<FallbackController>,
    session_model: Mutex<Option<ModelRef>>,
    /// The shared lock on the session file pi runs, so `condense compact`
    /// refuses it (see `condense_store::append::SessionHold`).
    session_hold: Mutex<SessionHold>,
}

/// Syncs and renders for a `context` request and writes the answer object:
/// the plan's new messages go out as their JSON text as is (never rebuilt
/// into `Value` trees; this runs before every LLM call), and only the steps
/// after those the shim already holds from answer `base`.
pub fn context_answer(
    engine: &mut Engine,
    answers: &mut ContextAnswers,
    keep: usize,
    append: Vec<Message>,
    base: Option<u64>,
    call: &CallFacts,
) -> String {
    let (steps, effects) = engine.context_at(keep, append, call);
    let effects = serde_json::to_string(&effects).unwrap_or_else(|_| "[]".into());
    answers.write(base, steps, &effects)
}

/// What a `context` request says about its LLM call.
fn call_facts(p: &crate::request::ContextParams) -> CallFacts {
    CallFacts {
        now_ms: p.now,
        model: p.model.clone(),
        summarizer_price: p.summarizer_price,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The messages of a `context` request the engine's copy can honour:
/// every one readable and `keep` within the host messages it holds. `Err`
/// says why not: the sidecar answers `out-of-sync`, and the host passes its
/// messages unchanged and sends its whole list next time, so no plan ever
/// addresses a message the host does not hold.
pub fn checked_context(
    engine: &Engine,
    keep: usize,
    append: &[crate::request::Raw],
) -> Result<Vec<Message>, String> {
    let append = read_messages(append, "append")?;
    let held = engine.host_len();
    if keep > held {
        return Err(keep_past(keep, held));
    }
    Ok(append)
}

/// The error a request the sidecar's copy cannot match gets: the shim
/// then resyncs.
fn out_of_sync(why: String) -> ErrorBody {
    ErrorBody {
        code: OUT_OF_SYNC.to_owned(),
        message: why,
    }
}

/// Why a `keep` cannot be honoured.
fn keep_past(keep: usize, held: usize) -> String {
    format!("keep {keep} is past the {held} messages the sidecar holds; send the whole context")
}

fn message_of(raw: Option<&serde_json::value::RawValue>) -> Option<Message> {
    raw.and_then(|m| Message::from_json(m.get()).ok())
}

impl Server {
    fn summarizer(&self) -> Summarizer {
        let config = self.engine.engine().config().clone();
        let session = self
            .session_model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let shim = |model: CompletionModel| -> Arc<dyn Provider> {
            Arc::new(ShimProvider {
                outbox: self.outbox.clone(),
                model,
            })
        };
        // The name stats and prices go by; the shim resolves the model.
        let unnamed = || ModelRef::new("session", HOST_DEFAULT_MODEL);
        let wanted = config.summarizer();
        let primary = match wanted {
            SummarizerModel::HostDefault => session.clone().unwrap_or_else(unnamed),
            SummarizerModel::Named(spec) => ModelRef::parse(spec).unwrap_or_else(unnamed),
        };
        let s = Summarizer::new(
            Target::new(shim(wanted.into()), primary),
            SummarizerSettings::from_config(&config),
        );
        // The outage fallback: the session model, or, when the host named
        // none (OpenCode's plugin answers for its provider itself), the
        // extractive summarizer, so an offline session still summarizes.
        let fallback = match session {
            Some(session) => Target::new(shim(CompletionModel::Session), session),
            None => Target::new(
                Arc::new(Extractive::new()),
                ModelRef::new("condense", "extractive"),
            ),
        };
        s.with_session_fallback(fallback, self.fallback.clone())
    }

    /// [`Server::context_raw`] of a request the sidecar's copy can honour:
    /// every message readable and `keep` within the messages it holds;
    /// otherwise why not (an `out-of-sync` error answer).
    fn context_checked(
        &self,
        keep: usize,
        append: &[crate::request::Raw],
        base: Option<u64>,
        call: &CallFacts,
    ) -> Result<String, String> {
        let append = checked_context(&self.engine.engine(), keep, append)?;
        Ok(self.context_raw(keep, append, base, call))
    }

    /// `context`, answered as a pre-serialized `result` (see [`context_answer`]).
    fn context_raw(
        &self,
        keep: usize,
        append: Vec<Message>,
        base: Option<u64>,
        call: &CallFacts,
    ) -> String {
        let mut engine = self.engine.engine();
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        context_answer(&mut engine, &mut answers, keep, append, base, call)
    }

    /// Holds the session file pi now runs (`sessionFile` of `session.start`;
    /// `None` for an in-memory session), releasing the previous one.
    fn hold_session(&self, file: Option<&str>) {
        self.session_hold
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set(file.map(PathBuf::from));
    }

    /// Takes the session file's hold once pi has created the file.
    fn refresh_hold(&self) {
        self.session_hold
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .refresh();
    }

    /// `session.start`: the session model (`null` clears it, absent keeps
    /// it), the fallback state, and the engine rebuilt from the branch.
    fn start_session(&self, model: Option<&Value>, p: StartParams) -> Value {
        if let Some(m) = model {
            let r = m
                .get("provider")
                .and_then(Value::as_str)
                .zip(m.get("id").and_then(Value::as_str))
                .map(|(p, i)| ModelRef::new(p, i));
            *self
                .session_model
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = r;
        }
        if !p.tree {
            self.fallback.reset();
        }
        let effects = self.engine.engine().start(p);
        json!(EffectsResult { effects })
    }

    async fn handle(&self, request: Request) -> Result<Value, ErrorBody> {
        match request {
            Request::Hello(p) => {
                if p.protocol != PROTOCOL {
                    return Err(ErrorBody {
                        code: "protocol-mismatch".into(),
                        message: format!("shim speaks protocol {}, sidecar {PROTOCOL}", p.protocol),
                    });
                }
                Ok(json!(HelloResult {
                    protocol: PROTOCOL,
                    sidecar: env!("CARGO_PKG_VERSION").to_owned(),
                    commands: commands::listed(),
                }))
            }
            Request::SessionStart(p) => {
                self.hold_session(p.session_file.as_deref());
                let params = StartParams {
                    settings: p.settings,
                    session_id: p.session_id.unwrap_or_default(),
                    session_dir: p.session_dir.map(Into::into),
                    misses_dir: p.misses_dir.map(Into::into),
                    session_file: p.session_file.map(Into::into),
                    branch: jsonl(p.branch.iter().map(|e| e.get())),
                    tree: p.tree,
                };
                self.engine.engine().set_compacts_on_request(p.can_compact);
                Ok(self.start_session(p.model.as_ref(), params))
            }
            Request::TurnEnd(p) => {
                self.refresh_hold();
                let Some(message) = message_of(p.message.as_deref()) else {
                    return Ok(json!(EffectsResult { effects: vec![] }));
                };
                let results = read_messages(&p.tool_results, "toolResults").map_err(out_of_sync)?;
                let turn = host::TurnEnd {
                    turn_index: p.turn_index,
                    message: &message,
                    results: &results,
                    tokens: p.usage.tokens,
                    context_window: p.usage.context_window,
                    now: p.now.unwrap_or_else(now_ms),
                };
                let effects =
                    host::turn_end(&self.engine, turn, || self.summarizer(), &now_ms).await;
                Ok(json!(TurnEndResult {
                    effects,
                    synced: true
                }))
            }
            Request::MessageEnd(p) => {
                self.refresh_hold();
                let Some(message) = message_of(p.message.as_deref()) else {
                    return Ok(json!(EffectsResult { effects: vec![] }));
                };
                let effects =
                    host::message_end(&self.engine, message, || self.summarizer(), &now_ms).await;
                Ok(json!(EffectsResult { effects }))
            }
            Request::AgentStart => {
                self.refresh_hold();
                let effects = host::agent_start(&self.engine, || self.summarizer(), &now_ms).await;
                Ok(json!(EffectsResult { effects }))
            }
            Request::SessionCompact(p) => {
                self.refresh_hold();
                let append = read_messages(&p.append, "append").map_err(out_of_sync)?;
                let held = self.engine.engine().host_len();
                if p.keep > held {
                    return Err(out_of_sync(keep_past(p.keep, held)));
                }
                let effects = host::compacted(
                    &self.engine,
                    p.keep,
                    append,
                    p.now.unwrap_or_else(now_ms),
                    || self.summarizer(),
                    &now_ms,
                )
                .await;
                Ok(json!(EffectsResult { effects }))
            }
            Request::AgentEnd => {
                self.refresh_hold();
                Ok(json!(EffectsResult {
                    effects: self.engine.engine().agent_end()
                }))
            }
            Request::Query(p) => {
                // Optional 1-based line window; anything but a positive
                // integer is ignored (the whole first page).
                let page = condense_core::PageRequest {
                    offset: p.offset.filter(|n| *n > 0),
                    limit: p.limit.filter(|n| *n > 0),
                };
                Ok(self.engine.engine().query(&p.tool_call_ids, page))
            }
            Request::Command(p) => {
                let env = CommandEnv {
                    utc_offset_minutes: p.utc_offset_minutes,
                };
                Ok(json!(EffectsResult {
                    effects: self.command(p.args.trim(), env).await
                }))
            }
            // `context` is answered as it is read (`serve`), never here.
            Request::Context(_) => Err(ErrorBody {
                code: "internal".into(),
                message: "`context` is answered as it is read".into(),
            }),
            Request::Shutdown => {
                // The learned misses not written yet; a failure was said
                // at the write before, or has no one left to read it.
                self.engine.engine().save_misses(None, &mut Effects::new());
                Ok(json!({}))
            }
            Request::Unknown(other) => Err(ErrorBody {
                code: "unknown-method".into(),
                message: format!("unknown method {other}"),
            }),
        }
    }

    /// `/pruner <args>` (see the `commands` module).
    async fn command(&self, args: &str, env: CommandEnv) -> Effects {
        commands::run(self, args, env).await
    }
}

impl EngineLock for Server {
    fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.engine()
    }
}

impl CommandHost for Server {
    fn summarizer(&self) -> Summarizer {
        Server::summarizer(self)
    }

    fn ui(&self, effects: Effects) {
        self.outbox
            .notify("ui.effects", &UiEffectsParams { effects });
    }
}

/// Renders a `context` request and sends its answer (an `out-of-sync` or
/// `internal` error when it cannot be honoured or its render panics).
fn answer_context(server: &Server, id: &str, p: &ContextParams) {
    let started = std::time::Instant::now();
    let rendered = std::panic::catch_unwind(AssertUnwindSafe(|| {
        server.context_checked(p.keep, &p.append, p.base, &call_facts(p))
    }));
    let mut result = match rendered {
        Ok(Ok(result)) => result,
        Ok(Err(why)) => {
            server.outbox.send_line(&out_of_sync_line(id, &why));
            return;
        }
        Err(panic) => {
            let text = format!("the request failed: {}", panic_text(&*panic));
            server.outbox.send_line(&error_line(id, &text));
            return;
        }
    };
    if p.timing {
        // The answer is an object: insert the field before its closing brace.
        result.pop();
        result.push_str(&format!(r#","micros":{}}}"#, started.elapsed().as_micros()));
    }
    server
        .outbox
        .send_line(&format!(r#"{{"id":{id},"result":{result}}}"#));
}

/// Whether `request` changes the session, so that it is handled after the
/// shim's requests of that kind before it (`query`, `command` and `hello`
/// answer at once, even during a flush; `context` follows them only when
/// it asks to).
fn changes_the_session(request: &Request) -> bool {
    matches!(
        request,
        Request::SessionStart(_)
            | Request::MessageEnd(_)
            | Request::TurnEnd(_)
            | Request::AgentStart
            | Request::AgentEnd
            | Request::SessionCompact(_)
    )
}

/// The order of the requests that change the session: each waits for the
/// one before it to be answered.
#[derive(Default)]
struct Sequence {
    /// Closed once the latest of them is answered.
    last: Option<oneshot::Receiver<()>>,
}

impl Sequence {
    /// What the next of them must wait for: `None` when the latest is
    /// answered already.
    fn after(&mut self) -> Option<oneshot::Receiver<()>> {
        let mut last = self.last.take()?;
        match last.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => Some(last),
            _ => None,
        }
    }

    /// Makes the next of them the latest: dropping what this returns marks
    /// it answered.
    fn push(&mut self) -> oneshot::Sender<()> {
        let (done, answered) = oneshot::channel();
        self.last = Some(answered);
        done
    }
}

/// Serves the protocol on `input`/`output` until `shutdown` or end of input.
pub async fn serve<R, W>(input: R, output: W)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: Write + Send + 'static,
{
    let out: LineWriter = Arc::new(Mutex::new(Box::new(output)));
    let outbox = Outbox {
        out: out.clone(),
        pending: Arc::new(Mutex::new(HashMap::new())),
        next: Arc::new(AtomicU64::new(0)),
    };
    let server = Arc::new(Server {
        engine: Mutex::new(Engine::default()),
        answers: Mutex::new(ContextAnswers::default()),
        outbox: outbox.clone(),
        fallback: Arc::new(FallbackController::new(Arc::new(TokioClock::new()))),
        session_model: Mutex::new(None),
        session_hold: Mutex::new(SessionHold::default()),
    });
    let mut input = input;
    let mut order = Sequence::default();
    loop {
        let line = match read_line(&mut input).await {
            Ok(Some(Ok(l))) => l,
            Ok(Some(Err(()))) => {
                outbox.notify(
                    "protocol.error",
                    &ProtocolErrorParams {
                        message: format!("line longer than {MAX_LINE} bytes discarded"),
                    },
                );
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        if line.trim().is_empty() {
            continue;
        }
        // One read of the line: `params` go straight into the request's
        // typed form, messages and branch entries as raw JSON slices.
        let incoming = match Incoming::parse(&line) {
            Ok(incoming) => incoming,
            // Valid JSON serde refuses (a lone surrogate escape, nesting
            // past its depth limit) still gets its answer when its id can
            // be read, so the shim's request does not wait for ever.
            Err(e) => {
                match request_id(&line) {
                    Some(id) => outbox.send_line(&error_line(
                        id,
                        &format!("the request could not be read: {e}"),
                    )),
                    None => outbox.notify(
                        "protocol.error",
                        &ProtocolErrorParams {
                            message: "unparseable line".into(),
                        },
                    ),
                }
                continue;
            }
        };
        match incoming {
            Incoming::Request {
                id,
                request: Request::Context(p),
            } => {
                // Answered right here, not on a task: pi waits for it before
                // every LLM call, and a hand-over to another thread costs
                // more than the render (the engine lock is never held
                // across an await, so this cannot stall behind a flush).
                // Unless it asks to follow a request still being handled:
                // then after that one, as its own task.
                match p.ordered.then(|| order.after()).flatten() {
                    None => answer_context(&server, id.get(), &p),
                    Some(previous) => {
                        let done = order.push();
                        let server = server.clone();
                        tokio::spawn(async move {
                            let _ = previous.await;
                            answer_context(&server, id.get(), &p);
                            drop(done);
                        });
                    }
                }
            }
            Incoming::Request { id, request } => {
                let server = server.clone();
                let is_shutdown = matches!(request, Request::Shutdown);
                // A request that changes the session waits for the one
                // before it, so a shim may send a turn's `message.end`,
                // `turn.end` and the next `context` without waiting.
                let sequenced =
                    changes_the_session(&request).then(|| (order.after(), order.push()));
                let task = tokio::spawn(async move {
                    let (previous, done) = sequenced.unzip();
                    if let Some(Some(previous)) = previous {
                        let _ = previous.await;
                    }
                    // Its own task, so a panic in it is this request's
                    // failure: answered, and the sidecar keeps serving.
                    let handler = server.clone();
                    let handled = tokio::spawn(async move { handler.handle(request).await }).await;
                    let id = id.get();
                    server.outbox.send_line(&match handled {
                        Ok(Ok(result)) => format!(r#"{{"id":{id},"result":{result}}}"#),
                        Ok(Err(error)) => {
                            format!(r#"{{"id":{id},"error":{}}}"#, json!(error))
                        }
                        Err(e) => error_line(id, &failure_text(e)),
                    });
                    drop(done);
                });
                if is_shutdown {
                    let _ = task.await;
                    break;
                }
            }
            Incoming::LlmEvent(p) => {
                let pending = outbox
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if let Some((_, sink)) = pending.get(&p.request_id) {
                    match p.kind {
                        LlmEventKind::Thinking => sink.thinking(p.delta),
                        LlmEventKind::Text => sink.text(p.delta),
                        // Usage and unknown kinds still show the call is alive.
                        LlmEventKind::Usage | LlmEventKind::Other => sink.thinking(String::new()),
                    }
                }
            }
            Incoming::Response { id, result, error } => {
                let key = match serde_json::from_str::<Value>(id.get()) {
                    Ok(Value::String(s)) => s,
                    _ => id.get().to_owned(),
                };
                let answer = outbox
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
                if let Some((tx, _)) = answer {
                    let mut msg = serde_json::Map::new();
                    if let Some(r) = result {
                        msg.insert("result".into(), r);
                    }
                    if let Some(e) = error {
                        msg.insert("error".into(), e);
                    }
                    let _ = tx.send(Value::Object(msg));
                }
            }
            Incoming::Notification(_) | Incoming::Other => {}
        }
    }
    // Input is gone: fail the LLM calls still waiting, then let the tasks
    // still running finish and send what they have (bounded): each holds a
    // handle on the writer until it ends.
    outbox
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    drop(server);
    drop(outbox);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while Arc::strong_count(&out) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
