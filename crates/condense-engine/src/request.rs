//! The requests a host's shim sends, typed (docs/protocol.md, "Shim →
//! sidecar requests").
//!
//! A line is read once: [`Incoming`] takes `id` and `method`, and `params`
//! straight into the [`Request`] variant `method` names (shims write
//! `method` before `params`; a line in another order keeps `params` as raw
//! JSON and reads it after). Messages and branch entries stay raw JSON
//! text: a `context` or `session.start` line can be 10 MB, and a `Value`
//! tree of it would cost more than everything done with it.
//!
//! Reading is lenient the way the shim's older versions need: a field that
//! is absent, `null` or of another type reads as its default, and params
//! that are not an object read as all defaults, so a request is never
//! refused for its params.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// A raw JSON text.
pub type Raw = Box<RawValue>;

/// A field read as its default when it is absent or of another type.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let raw = <Raw as Deserialize>::deserialize(d)?;
    Ok(serde_json::from_str(raw.get()).unwrap_or_default())
}

/// A list of raw JSON values, read in one pass (empty when the field is
/// not a list).
fn raw_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Raw>, D::Error> {
    d.deserialize_any(RawList)
}

struct RawList;

impl<'de> Visitor<'de> for RawList {
    type Value = Vec<Raw>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Raw>, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Raw>()? {
            out.push(item);
        }
        Ok(out)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Raw>, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Vec::new())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<Raw>, E> {
        Ok(Vec::new())
    }
}

/// A value read with each lone surrogate escape as U+FFFD. One serde
/// cannot hold at all (nesting past its limit) refuses the request, as
/// reading it as a `Value` did.
fn lossy_value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    let raw = <Raw as Deserialize>::deserialize(d)?;
    condense_core::parse_json_lossy(raw.get()).map_err(de::Error::custom)
}

/// `Some` for a field that is there, `null` included.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as Deserialize>::deserialize(d).map(Some)
}

/// `hello`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct HelloParams {
    /// The protocol major version the shim speaks.
    #[serde(default, deserialize_with = "lenient")]
    pub protocol: u64,
    /// The shim's version.
    #[serde(default, deserialize_with = "lenient")]
    pub shim: Option<String>,
    /// The harness the shim runs in.
    #[serde(default, deserialize_with = "lenient")]
    pub host: Option<HostInfo>,
}

/// The harness a shim runs in, and its version when the shim can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Which harness.
    pub name: HostName,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The harnesses a shim is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostName {
    /// pi (`condense-host-pi`'s extension).
    Pi,
    /// OpenCode (`condense-host-opencode`'s plugin).
    Opencode,
    /// A harness this sidecar does not know.
    #[serde(other)]
    Other,
}

/// `session.start`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStartParams {
    /// Why the session started (pi's reason; informational).
    #[serde(default, deserialize_with = "lenient")]
    pub reason: Option<String>,
    /// The whole `settings.json` value, or `null`. A lone surrogate
    /// escape in it (valid JSON, which serde refuses) reads as U+FFFD, so
    /// a stray one in a hand-edited file does not refuse the session.
    #[serde(default, deserialize_with = "lossy_value")]
    pub settings: Value,
    /// The session model `{provider, id}`: absent keeps the one held,
    /// present (`null` included) replaces it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<Value>,
    /// The session file (informational).
    #[serde(default, deserialize_with = "lenient")]
    pub session_file: Option<String>,
    /// The session directory (spill blobs go beside the session).
    #[serde(default, deserialize_with = "lenient")]
    pub session_dir: Option<String>,
    /// Where the sessions' cache-miss counts go, shared by every session
    /// the host keeps (absent: `condense-misses/` in the session directory).
    #[serde(default, deserialize_with = "lenient")]
    pub misses_dir: Option<String>,
    /// The session id.
    #[serde(default, deserialize_with = "lenient")]
    pub session_id: Option<String>,
    /// The branch's entries, root first, as raw JSON.
    #[serde(default, deserialize_with = "raw_list")]
    pub branch: Vec<Raw>,
    /// `true` for `session_tree` (no config reload, no fallback reset).
    #[serde(default, deserialize_with = "lenient")]
    pub tree: bool,
    /// The host compacts its context when asked ([`crate::Effect::Compact`];
    /// pi's `ctx.compact`).
    #[serde(default, deserialize_with = "lenient")]
    pub can_compact: bool,
}

/// `context`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ContextParams {
    /// How many leading messages of the sidecar's copy still match.
    #[serde(default, deserialize_with = "lenient")]
    pub keep: usize,
    /// The messages after them, as raw JSON.
    #[serde(default, deserialize_with = "raw_list")]
    pub append: Vec<Raw>,
    /// The `seq` of the steps answer the shim holds.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub base: Option<u64>,
    /// Asks for the sidecar's own time in the answer (`micros`).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub timing: bool,
    /// Answered after the requests before it that change the session
    /// (`message.end`, `turn.end`, `agent.start`, …), as they are answered
    /// in order: a shim may then send a turn's requests and this one
    /// without waiting for each answer. Without it, `context` is answered
    /// at once, even while a flush waits for the summarizer.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub ordered: bool,
    /// The shim's clock at the call (ms): the cache-aware policy's time.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub now: Option<i64>,
    /// The model the call goes to (`provider/id`), for the cache-aware
    /// policy (a model change finds the cache cold).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<String>,
    /// The summarizer model's input price over that model's, when the
    /// host prices that model and they differ (pi's model registry,
    /// OpenCode's provider list).
    #[serde(
        default,
        rename = "summarizerPrice",
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub summarizer_price: Option<f64>,
}

/// `session.compact`: the host's list after its compaction, sent as
/// `context` sends it.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CompactParams {
    /// How many leading messages of the sidecar's copy still match.
    #[serde(default, deserialize_with = "lenient")]
    pub keep: usize,
    /// The messages after them, as raw JSON.
    #[serde(default, deserialize_with = "raw_list")]
    pub append: Vec<Raw>,
    /// The shim's clock (ms); the sidecar's when absent.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub now: Option<i64>,
}

/// `turn.end`'s `usage`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnUsage {
    /// Context tokens pi measured, if it knows.
    #[serde(default, deserialize_with = "lenient")]
    pub tokens: Option<u64>,
    /// The model's context window.
    #[serde(default, deserialize_with = "lenient")]
    pub context_window: u64,
}

/// `turn.end`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEndParams {
    /// pi's turn index.
    #[serde(default, deserialize_with = "lenient")]
    pub turn_index: i64,
    /// The turn's assistant message, as raw JSON.
    #[serde(default)]
    pub message: Option<Raw>,
    /// Its tool results, as raw JSON.
    #[serde(default, deserialize_with = "raw_list")]
    pub tool_results: Vec<Raw>,
    /// Context usage after the turn.
    #[serde(default, deserialize_with = "lenient")]
    pub usage: TurnUsage,
    /// The shim's clock (ms); the sidecar's when absent.
    #[serde(default, deserialize_with = "lenient")]
    pub now: Option<i64>,
}

/// `message.end`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct MessageEndParams {
    /// The message, as raw JSON.
    #[serde(default)]
    pub message: Option<Raw>,
    /// The shim's clock (ms).
    #[serde(default, deserialize_with = "lenient")]
    pub now: Option<i64>,
}

/// `query`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryParams {
    /// Refs or tool-call ids to recover (non-strings are skipped).
    #[serde(default, deserialize_with = "strings")]
    pub tool_call_ids: Vec<String>,
    /// First line of each output to show (1-based); not a number: none.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub offset: Option<u64>,
    /// Most lines of each output to show; not a number: none.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub limit: Option<u64>,
}

/// The strings of a list (other items skipped; not a list: empty).
fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items: Vec<Raw> = raw_list(d)?;
    Ok(items
        .iter()
        .filter_map(|i| serde_json::from_str(i.get()).ok())
        .collect())
}

/// `command`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandParams {
    /// The text after `/pruner`.
    #[serde(default, deserialize_with = "lenient")]
    pub args: String,
    /// Minutes to add to UTC for the user's local time.
    #[serde(default, deserialize_with = "lenient")]
    pub utc_offset_minutes: i64,
}

/// One request of the shim, by method.
#[derive(Debug)]
pub enum Request {
    /// `hello`: the handshake.
    Hello(HelloParams),
    /// `session.start`: rebuild the session from its branch.
    SessionStart(SessionStartParams),
    /// `context`: sync the messages and render.
    Context(ContextParams),
    /// `turn.end`: capture the turn; maybe flush.
    TurnEnd(TurnEndParams),
    /// `message.end`: maybe flush on the agent's text reply.
    MessageEnd(MessageEndParams),
    /// `agent.start`: a run begins (before its first call); runs the flush
    /// a reply left for it under the cache-aware policy.
    AgentStart,
    /// `agent.end`: the footer.
    AgentEnd,
    /// `session.compact`: the host compacted the context; its list after.
    SessionCompact(CompactParams),
    /// `query`: `context_tree_query`.
    Query(QueryParams),
    /// `command`: `/pruner <args>`.
    Command(CommandParams),
    /// `shutdown`: answer, then exit.
    Shutdown,
    /// A method this sidecar does not know.
    Unknown(String),
}

/// The methods a shim sends, each named once ([`Method::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `hello`.
    Hello,
    /// `session.start`.
    SessionStart,
    /// `context`.
    Context,
    /// `turn.end`.
    TurnEnd,
    /// `message.end`.
    MessageEnd,
    /// `agent.start`.
    AgentStart,
    /// `agent.end`.
    AgentEnd,
    /// `session.compact`.
    SessionCompact,
    /// `query`.
    Query,
    /// `command`.
    Command,
    /// `shutdown`.
    Shutdown,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 11] = [
        Method::Hello,
        Method::SessionStart,
        Method::Context,
        Method::TurnEnd,
        Method::MessageEnd,
        Method::AgentStart,
        Method::AgentEnd,
        Method::SessionCompact,
        Method::Query,
        Method::Command,
        Method::Shutdown,
    ];

    /// The method's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Hello => "hello",
            Method::SessionStart => "session.start",
            Method::Context => "context",
            Method::TurnEnd => "turn.end",
            Method::MessageEnd => "message.end",
            Method::AgentStart => "agent.start",
            Method::AgentEnd => "agent.end",
            Method::SessionCompact => "session.compact",
            Method::Query => "query",
            Method::Command => "command",
            Method::Shutdown => "shutdown",
        }
    }

    /// The method named `name`, if this sidecar knows it.
    pub fn named(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl Request {
    /// The method, `None` for one this sidecar does not know.
    pub fn kind(&self) -> Option<Method> {
        Some(match self {
            Request::Hello(_) => Method::Hello,
            Request::SessionStart(_) => Method::SessionStart,
            Request::Context(_) => Method::Context,
            Request::TurnEnd(_) => Method::TurnEnd,
            Request::MessageEnd(_) => Method::MessageEnd,
            Request::AgentStart => Method::AgentStart,
            Request::AgentEnd => Method::AgentEnd,
            Request::SessionCompact(_) => Method::SessionCompact,
            Request::Query(_) => Method::Query,
            Request::Command(_) => Method::Command,
            Request::Shutdown => Method::Shutdown,
            Request::Unknown(_) => return None,
        })
    }

    /// The method's name on the wire.
    pub fn method(&self) -> &str {
        match self {
            Request::Unknown(method) => method,
            known => known.kind().map_or("", Method::name),
        }
    }

    /// The params as the shim writes them (`{}` for a method without
    /// params).
    pub fn params(&self) -> serde_json::Result<Value> {
        match self {
            Request::Hello(p) => serde_json::to_value(p),
            Request::SessionStart(p) => serde_json::to_value(p),
            Request::Context(p) => serde_json::to_value(p),
            Request::TurnEnd(p) => serde_json::to_value(p),
            Request::MessageEnd(p) => serde_json::to_value(p),
            Request::SessionCompact(p) => serde_json::to_value(p),
            Request::Query(p) => serde_json::to_value(p),
            Request::Command(p) => serde_json::to_value(p),
            Request::AgentStart | Request::AgentEnd | Request::Shutdown | Request::Unknown(_) => {
                Ok(Value::Object(Default::default()))
            }
        }
    }

    /// The params of `method`, read from `d` (absent or unreadable params
    /// read as defaults).
    fn read<'de, D: Deserializer<'de>>(method: &str, d: D) -> Result<Request, D::Error> {
        fn params<'de, T: Deserialize<'de> + Default, D: Deserializer<'de>>(
            d: D,
        ) -> Result<T, D::Error> {
            d.deserialize_any(LenientParams(std::marker::PhantomData))
        }
        Ok(match Method::named(method) {
            Some(Method::Hello) => Request::Hello(params(d)?),
            Some(Method::SessionStart) => Request::SessionStart(params(d)?),
            Some(Method::Context) => Request::Context(params(d)?),
            Some(Method::TurnEnd) => Request::TurnEnd(params(d)?),
            Some(Method::MessageEnd) => Request::MessageEnd(params(d)?),
            Some(Method::SessionCompact) => Request::SessionCompact(params(d)?),
            Some(Method::Query) => Request::Query(params(d)?),
            Some(Method::Command) => Request::Command(params(d)?),
            Some(Method::AgentStart | Method::AgentEnd | Method::Shutdown) | None => {
                de::IgnoredAny::deserialize(d)?;
                Request::without_params(method)
            }
        })
    }

    /// The request of a method with no params.
    fn without_params(method: &str) -> Request {
        match Method::named(method) {
            Some(Method::Hello) => Request::Hello(HelloParams::default()),
            Some(Method::SessionStart) => Request::SessionStart(SessionStartParams::default()),
            Some(Method::Context) => Request::Context(ContextParams::default()),
            Some(Method::TurnEnd) => Request::TurnEnd(TurnEndParams::default()),
            Some(Method::MessageEnd) => Request::MessageEnd(MessageEndParams::default()),
            Some(Method::AgentStart) => Request::AgentStart,
            Some(Method::AgentEnd) => Request::AgentEnd,
            Some(Method::SessionCompact) => Request::SessionCompact(CompactParams::default()),
            Some(Method::Query) => Request::Query(QueryParams::default()),
            Some(Method::Command) => Request::Command(CommandParams::default()),
            Some(Method::Shutdown) => Request::Shutdown,
            None => Request::Unknown(method.to_owned()),
        }
    }
}

/// Params read from an object; anything else reads as the defaults.
struct LenientParams<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de> + Default> Visitor<'de> for LenientParams<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("params")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

impl Incoming {
    /// Reads a line. A line the one-pass read refuses (a duplicate field,
    /// say) but that is a JSON object is read again through a `Value`, so
    /// every request serde can read at all is answered.
    pub fn parse(line: &str) -> serde_json::Result<Incoming> {
        serde_json::from_str(line).or_else(|first| {
            let Ok(Value::Object(mut o)) = serde_json::from_str::<Value>(line) else {
                return Err(first);
            };
            let method = o.get("method").and_then(Value::as_str).map(str::to_owned);
            let id = match o.get("id") {
                Some(id) => Some(RawValue::from_string(id.to_string())?),
                None => None,
            };
            let params = o.remove("params").unwrap_or(Value::Null);
            Ok(match (id, method) {
                (Some(id), Some(m)) => Incoming::Request {
                    request: Request::read(&m, params)
                        .unwrap_or_else(|_| Request::without_params(&m)),
                    id,
                },
                (Some(id), None) => Incoming::Response {
                    id,
                    result: o.remove("result"),
                    error: o.remove("error"),
                },
                (None, Some(m)) if m == "llm.event" => {
                    Incoming::LlmEvent(serde_json::from_value(params).unwrap_or_default())
                }
                (None, Some(m)) => Incoming::Notification(m),
                (None, None) => Incoming::Other,
            })
        })
    }
}

/// `llm.event` (a notification): a completion streams.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmEventParams {
    /// The `llm.complete` request it belongs to.
    #[serde(default, deserialize_with = "lenient")]
    pub request_id: String,
    /// What the delta is.
    #[serde(default, deserialize_with = "lenient")]
    pub kind: LlmEventKind,
    /// The streamed text.
    #[serde(default, deserialize_with = "lenient")]
    pub delta: String,
}

/// What an `llm.event` streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmEventKind {
    /// Reply text.
    Text,
    /// Thinking.
    Thinking,
    /// The call's usage.
    Usage,
    /// A kind this sidecar does not know (the call is still alive).
    #[default]
    #[serde(other)]
    Other,
}

/// One line from the shim.
#[derive(Debug)]
pub enum Incoming {
    /// A request (it has an `id` and a `method`).
    Request {
        /// The id's JSON text, repeated in the answer.
        id: Raw,
        /// What it asks.
        request: Request,
    },
    /// An answer to one of the sidecar's requests (an `id`, no `method`).
    Response {
        /// The id's JSON text.
        id: Raw,
        /// `result`, if it succeeded.
        result: Option<Value>,
        /// `error` (`{code, message}`), if it failed.
        error: Option<Value>,
    },
    /// `llm.event`.
    LlmEvent(LlmEventParams),
    /// Any other notification (ignored).
    Notification(String),
    /// An object with neither `id` nor `method`.
    Other,
}

impl<'de> Deserialize<'de> for Incoming {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Incoming, D::Error> {
        d.deserialize_map(IncomingVisitor)
    }
}

struct IncomingVisitor;

/// `params` met before `method` (kept raw, read once the method is known).
enum Params {
    None,
    Raw(Raw),
    Read(Box<Request>),
}

impl<'de> Visitor<'de> for IncomingVisitor {
    type Value = Incoming;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a protocol message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Incoming, A::Error> {
        let mut id: Option<Raw> = None;
        let mut method: Option<String> = None;
        let mut params = Params::None;
        let mut result = None;
        let mut error = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "id" => id = Some(map.next_value()?),
                "method" => method = map.next_value::<Value>()?.as_str().map(str::to_owned),
                "params" => {
                    params = match &method {
                        Some(m) if m != "llm.event" => {
                            Params::Read(Box::new(map.next_value_seed(ParamsSeed(m))?))
                        }
                        _ => Params::Raw(map.next_value()?),
                    }
                }
                "result" => result = Some(map.next_value()?),
                "error" => error = Some(map.next_value()?),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let request = |m: &str, params: Params| -> Request {
            match params {
                Params::Read(r) => *r,
                Params::Raw(raw) => {
                    let mut de = serde_json::Deserializer::from_str(raw.get());
                    Request::read(m, &mut de).unwrap_or_else(|_| Request::without_params(m))
                }
                Params::None => Request::without_params(m),
            }
        };
        Ok(match (id, method) {
            (Some(id), Some(m)) => Incoming::Request {
                request: request(&m, params),
                id,
            },
            (Some(id), None) => Incoming::Response { id, result, error },
            (None, Some(m)) if m == "llm.event" => Incoming::LlmEvent(match params {
                Params::Raw(raw) => serde_json::from_str(raw.get()).unwrap_or_default(),
                _ => LlmEventParams::default(),
            }),
            (None, Some(m)) => Incoming::Notification(m),
            (None, None) => Incoming::Other,
        })
    }
}

struct ParamsSeed<'a>(&'a str);

impl<'de> de::DeserializeSeed<'de> for ParamsSeed<'_> {
    type Value = Request;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Request, D::Error> {
        Request::read(self.0, d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_named_once_and_read_back_as_itself() {
        for method in Method::ALL {
            assert_eq!(Method::named(method.name()), Some(method));
            let request = Request::without_params(method.name());
            assert_eq!(request.kind(), Some(method));
            assert_eq!(request.method(), method.name());
            let line = format!(r#"{{"id":1,"method":"{}","params":{{}}}}"#, method.name());
            match Incoming::parse(&line).expect("a line") {
                Incoming::Request { request, .. } => assert_eq!(request.kind(), Some(method)),
                other => panic!("{} read as {other:?}", method.name()),
            }
        }
        assert_eq!(Method::named("nope"), None);
        assert_eq!(Request::without_params("nope").method(), "nope");
    }

    #[test]
    fn an_unknown_harness_or_event_kind_reads_as_other() {
        let hello: HelloParams =
            serde_json::from_str(r#"{"protocol":1,"host":{"name":"zed","version":"1"}}"#)
                .expect("hello");
        assert_eq!(hello.host.map(|h| h.name), Some(HostName::Other));
        let opencode: HelloParams =
            serde_json::from_str(r#"{"protocol":1,"host":{"name":"opencode"}}"#).expect("hello");
        assert_eq!(
            opencode.host,
            Some(HostInfo {
                name: HostName::Opencode,
                version: None
            })
        );
        // An older shim's `pi` field is no harness, and no error.
        let older: HelloParams =
            serde_json::from_str(r#"{"protocol":1,"pi":"0.83.0"}"#).expect("hello");
        assert_eq!(older.host, None);
        let event: LlmEventParams =
            serde_json::from_str(r#"{"requestId":"s1","kind":"audio","delta":""}"#).expect("event");
        assert_eq!(event.kind, LlmEventKind::Other);
        let event: LlmEventParams =
            serde_json::from_str(r#"{"requestId":"s1","kind":"text","delta":"a"}"#).expect("event");
        assert_eq!(event.kind, LlmEventKind::Text);
    }
}
