//! pi's messages as raw JSON plus a small parsed skeleton.
//!
//! A branch is mostly text condense never looks at. Each [`Message`] keeps its
//! JSON text exactly as it came (so unknown fields, roles and block types
//! round-trip byte for byte) beside a [`Skeleton`] of the few facts the
//! pipeline inspects: role, timestamp, tool-call ids and names, error flag,
//! thinking blocks, and the serialized size. Bodies are parsed in full only
//! where a mechanism needs them (a result being captured, arguments purged).

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::js::js_len;
use crate::parked::{JsonStr, OwnText, ParkedText};

mod call_args;
mod prompt_text;
mod result_text;
mod skeleton;

pub use prompt_text::{visit_prompt_text, IMAGE_PROMPT_CHARS};

use result_text::result_text_of;
pub use result_text::tool_result_text;
use skeleton::parse_skeleton;

/// The `customType` of condense's per-batch summary messages.
pub const SUMMARY_CUSTOM_TYPE: &str = "context-prune-summary";

/// A message's role. Unknown roles are kept by name and pass through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `toolResult`
    ToolResult,
    /// `custom` (extension messages; sent to the model as user text)
    Custom,
    /// `bashExecution`
    BashExecution,
    /// `compactionSummary`
    CompactionSummary,
    /// `branchSummary`
    BranchSummary,
    /// Any other role, or none.
    Other(String),
}

impl Role {
    fn from_name(name: &str) -> Role {
        match name {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "toolResult" => Role::ToolResult,
            "custom" => Role::Custom,
            "bashExecution" => Role::BashExecution,
            "compactionSummary" => Role::CompactionSummary,
            "branchSummary" => Role::BranchSummary,
            other => Role::Other(other.to_owned()),
        }
    }

    /// The role's wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
            Role::Custom => "custom",
            Role::BashExecution => "bashExecution",
            Role::CompactionSummary => "compactionSummary",
            Role::BranchSummary => "branchSummary",
            Role::Other(name) => name,
        }
    }
}

/// A `toolCall` block of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallBlock {
    /// The provider's tool-call id.
    pub id: String,
    /// The tool's name (empty if absent).
    pub name: String,
}

/// A ref carried by a per-batch summary message (`details.toolCallRefs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSummaryRef {
    /// The tool-call id the ref points at.
    pub tool_call_id: String,
    /// The result's timestamp, when the ref records one.
    pub result_timestamp: Option<i64>,
}

/// The facts about a message the pipeline inspects.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Skeleton {
    /// The role; `None` when the message has no string `role`.
    pub role: Option<Role>,
    /// The message's numeric timestamp (ms), if it has an integral one.
    pub timestamp: Option<i64>,
    /// The raw JSON of a `timestamp` that is present but not an integer
    /// (kept so messages condense rebuilds carry it unchanged).
    pub timestamp_other: Option<Box<str>>,
    /// `toolCallId` of a tool result.
    pub tool_call_id: Option<String>,
    /// `toolName` of a tool result.
    pub tool_name: Option<String>,
    /// `isError === true` of a tool result.
    pub is_error: bool,
    /// `toolCall` blocks that carry an id, in order.
    pub tool_calls: Vec<ToolCallBlock>,
    /// True when any content block has `type: "toolCall"` (with or without id).
    pub has_tool_call_block: bool,
    /// Number of `thinking` blocks.
    pub thinking_blocks: usize,
    /// `customType` of a custom message.
    pub custom_type: Option<String>,
    /// `details.toolCallRefs` of a per-batch summary message.
    pub summary_refs: Vec<MessageSummaryRef>,
    /// For user messages whose first text block starts with
    /// `<compressed-chain id="…"`: that block id.
    pub compressed_chain_id: Option<String>,
    /// True for a user message whose first text (trimmed at the start) begins
    /// with `<compressed-chain` (the chain detector's passthrough test).
    pub is_synthetic_chain: bool,
}

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// The text is not JSON.
    #[error("message is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The JSON is not an object.
    #[error("message is not a JSON object")]
    NotAnObject,
}

/// One message of a branch: its JSON text and its skeleton.
///
/// Cloning is cheap (the text is shared).
#[derive(Debug, Clone)]
pub struct Message(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    json: JsonText,
    skeleton: Skeleton,
    size: usize,
    /// What protection reads of the tool calls' arguments, parsed on first
    /// use: chain detection and context metrics read them at every flush
    /// over the whole branch, and a message never changes.
    call_args: OnceLock<Vec<CallArgs>>,
    /// [`Message::prompt_len`], measured on first use: the economics weigh
    /// every prompt at every call.
    prompt_len: OnceLock<Option<usize>>,
}

/// A `toolCall` block as protection reads it (see [`Message::call_args`]):
/// of its arguments only `path`, so a long session does not hold every
/// call's arguments parsed a second time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallArgs {
    /// The call's id.
    pub(crate) id: String,
    /// The tool's name.
    pub(crate) name: String,
    /// The arguments' `path`, when it is a string.
    pub(crate) path: Option<String>,
}

/// A message's JSON: `buf[range]` of a buffer it shares (the session file
/// a reader loaded), so a long branch is not held twice, or a text of its
/// own, which the host may park ([`crate::parked`]). Either way the text is
/// behind an `Arc`, so what is read out of it (a tool output's literal) can
/// be kept as a window instead of a copy.
#[derive(Debug)]
enum JsonText {
    Window {
        buf: Arc<String>,
        range: std::ops::Range<usize>,
    },
    Own(Arc<OwnText>),
}

impl JsonText {
    fn own(json: String) -> JsonText {
        JsonText::Own(Arc::new(OwnText::new(json)))
    }
}

impl PartialEq for Message {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        // Most compares are of the very same message: that path stays
        // small enough to inline.
        Arc::ptr_eq(&self.0, &other.0) || self.same_text(other)
    }
}

impl Message {
    /// Whether two distinct messages have the same JSON text.
    #[inline(never)]
    fn same_text(&self, other: &Message) -> bool {
        // Equal texts have equal sizes: most messages that differ are told
        // apart without reading either text.
        if self.0.size != other.0.size {
            return false;
        }
        match (&self.0.json, &other.0.json) {
            (JsonText::Window { buf: a, range: ra }, JsonText::Window { buf: b, range: rb }) => {
                a[ra.clone()] == b[rb.clone()]
            }
            _ => self.json() == other.json(),
        }
    }

    /// True when both are the very same message (one shared text), not
    /// merely equal: what render memos key on. Unchanged messages keep
    /// their identity through a render, so a caller can memoize what it
    /// derives from one while it holds it.
    pub fn same(&self, other: &Message) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// How many leading messages of `now` are the very ones of `kept`
    /// ([`Message::same`]): where a memo over `kept` must roll back to.
    pub(crate) fn same_prefix(kept: &[Message], now: &[Message]) -> usize {
        kept.iter().zip(now).take_while(|(a, b)| a.same(b)).count()
    }

    /// An address unique among live messages (see [`Message::same`]).
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// True when no other handle to this very message exists: a memo
    /// holding the only one keeps a message nothing else can render again.
    pub(crate) fn is_unshared(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    /// The message's own JSON text, for a text read out of the JSON to
    /// share ([`SharedText`](crate::SharedText)). `None` for a window on a
    /// larger buffer (a session file a reader loaded): a text kept past the
    /// message would keep all of that alive.
    pub(crate) fn own_json_buffer(&self) -> Option<&Arc<OwnText>> {
        match &self.0.json {
            JsonText::Own(own) => Some(own),
            JsonText::Window { .. } => None,
        }
    }

    /// Moves the message's JSON out of memory: from now on it is read back
    /// from `source`, which must give back exactly the bytes of
    /// [`Message::json`]. It is read once here to check that; a source that
    /// does not, a message that is a window on a loaded buffer, or one
    /// already parked stays as it is, and the error says why. Every handle
    /// on the message, and every text read out of it, sees the change.
    pub fn park(&self, source: Arc<dyn ParkedText>) -> Result<(), String> {
        match &self.0.json {
            JsonText::Own(own) => own.park(source),
            JsonText::Window { .. } => Err("a window on a loaded buffer is not parked".to_owned()),
        }
    }

    /// Whether the message's JSON is parked ([`Message::park`]).
    pub fn is_parked(&self) -> bool {
        matches!(&self.0.json, JsonText::Own(own) if own.is_parked())
    }

    /// Reads a message from its JSON text. The text is kept as given.
    pub fn from_json(json: &str) -> Result<Message, MessageError> {
        let skeleton = parse_skeleton(json)?;
        Ok(Message(Arc::new(Inner {
            size: js_len(json),
            json: JsonText::own(json.to_owned()),
            skeleton,
            call_args: OnceLock::new(),
            prompt_len: OnceLock::new(),
        })))
    }

    /// Reads a message whose JSON is `buf[range]`, sharing the buffer
    /// instead of copying the text: for a reader that holds a whole session
    /// file in one buffer (condense-store). Otherwise use
    /// [`Message::from_json`].
    pub fn from_shared(
        buf: &Arc<String>,
        range: std::ops::Range<usize>,
    ) -> Result<Message, MessageError> {
        let json = buf.get(range.clone()).ok_or(MessageError::NotAnObject)?;
        let skeleton = parse_skeleton(json)?;
        Ok(Message(Arc::new(Inner {
            size: js_len(json),
            json: JsonText::Window {
                buf: Arc::clone(buf),
                range,
            },
            skeleton,
            call_args: OnceLock::new(),
            prompt_len: OnceLock::new(),
        })))
    }

    /// The same message holding its own copy of the text: a message read
    /// with [`Message::from_shared`] keeps its whole buffer alive, so a
    /// caller that keeps a few messages of a large buffer detaches them to
    /// let the buffer go. A message that owns its text is returned as is.
    pub fn detached(&self) -> Message {
        if let JsonText::Own(_) = self.0.json {
            return self.clone();
        }
        Message(Arc::new(Inner {
            size: self.0.size,
            json: JsonText::own(self.json().to_string()),
            skeleton: self.0.skeleton.clone(),
            call_args: self.0.call_args.clone(),
            prompt_len: self.0.prompt_len.clone(),
        }))
    }

    /// A message whose skeleton the caller built alongside the JSON (for
    /// messages condense writes itself, such as stubs, to skip a re-parse).
    pub(crate) fn from_parts(json: String, skeleton: Skeleton) -> Message {
        Message(Arc::new(Inner {
            size: js_len(&json),
            json: JsonText::own(json),
            skeleton,
            call_args: OnceLock::new(),
            prompt_len: OnceLock::new(),
        }))
    }

    /// Builds a message from a JSON value (serialized compactly, keys in order).
    pub fn from_value(value: &Value) -> Result<Message, MessageError> {
        if !value.is_object() {
            return Err(MessageError::NotAnObject);
        }
        let json = serde_json::to_string(value)?;
        Message::from_json(&json)
    }

    /// Each `toolCall` block with a non-empty string id, in order, parsed
    /// once per message (the arguments are `input` when present and not
    /// null, else `arguments`, else null).
    pub(crate) fn call_args(&self) -> &[CallArgs] {
        self.0
            .call_args
            .get_or_init(|| call_args::parse_tool_call_args(self))
    }

    /// The message's JSON text. A parked message's is read back; if that
    /// fails, the text is a message of the same role and call whose content
    /// says what could not be read (the error is not the engine's to stop
    /// on: the host decided where to park it).
    pub fn json(&self) -> JsonStr<'_> {
        match &self.0.json {
            JsonText::Window { buf, range } => JsonStr::borrowed(&buf[range.clone()]),
            JsonText::Own(own) => JsonStr::held(
                own.get()
                    .unwrap_or_else(|e| Arc::new(unreadable_json(&self.0.skeleton, own.len(), &e))),
            ),
        }
    }

    /// The parsed skeleton.
    pub fn skeleton(&self) -> &Skeleton {
        &self.0.skeleton
    }

    /// The message as a JSON value (parses the full body), for reading its
    /// text: a lone surrogate escape (`"\ud83d"`, which `JSON.stringify`
    /// writes for a string cut inside a pair) reads as U+FFFD. An error only
    /// for JSON a `Value` cannot hold at all (a number out of range).
    pub fn to_value(&self) -> Result<Value, MessageError> {
        let json = self.json();
        let json = &*json;
        match serde_json::from_str(json) {
            Ok(v) => Ok(v),
            Err(e) => match crate::surrogates::replace_lone_surrogates(json) {
                Some(fixed) => Ok(serde_json::from_str(&fixed)?),
                None => Err(e.into()),
            },
        }
    }

    /// The message as a JSON value exactly as written, for rebuilding it:
    /// an error when any string holds a lone surrogate, since a rebuilt
    /// message could not carry pi's bytes (such a message passes through).
    pub fn to_exact_value(&self) -> Result<Value, MessageError> {
        Ok(serde_json::from_str(&self.json())?)
    }

    /// The text a tool result carries, as [`tool_result_text`] reads it
    /// from the full value, but reading only `content`: a field elsewhere
    /// that a `Value` cannot hold (a number out of range) does not hide it,
    /// and a lone surrogate escape in a text block reads as U+FFFD.
    pub fn result_text(&self) -> String {
        let json = self.json();
        result_text_of(&json)
            .or_else(|| {
                crate::surrogates::replace_lone_surrogates(&json).and_then(|f| result_text_of(&f))
            })
            .unwrap_or_default()
    }

    /// The length of what of the message reaches the model, in JavaScript
    /// string units: its content's texts, thinking, tool-call names and
    /// arguments, and pi's `summary`, `command` and `output`; not `details`,
    /// usage or any other field ([`visit_prompt_text`]). `None` for a
    /// message the host does not send (a failed assistant message, a bash
    /// run excluded from the context). What prompts bill, and so what
    /// pruning saves, is weighed on this, not on [`Message::size`].
    pub fn prompt_len(&self) -> Option<usize> {
        *self
            .0
            .prompt_len
            .get_or_init(|| prompt_text::prompt_len_of(&self.json()))
    }

    /// [`Message::prompt_len`] in tokens, at four characters a token (0
    /// for a message the host does not send).
    pub fn prompt_tokens(&self) -> u64 {
        crate::token_estimate::chars_to_tokens(self.prompt_len().unwrap_or(0))
    }

    /// Size of the JSON serialization in UTF-16 units (JavaScript's
    /// `JSON.stringify(message).length` for compact input).
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// The role, if the message has one.
    pub fn role(&self) -> Option<&Role> {
        self.0.skeleton.role.as_ref()
    }

    /// True if the role is `r`.
    pub fn is(&self, r: &Role) -> bool {
        self.0.skeleton.role.as_ref() == Some(r)
    }

    /// The numeric timestamp, if any.
    pub fn timestamp(&self) -> Option<i64> {
        self.0.skeleton.timestamp
    }

    /// True for a condense per-batch summary message (`custom` with
    /// `customType: "context-prune-summary"`).
    pub fn is_summary_message(&self) -> bool {
        self.is(&Role::Custom)
            && self.0.skeleton.custom_type.as_deref() == Some(SUMMARY_CUSTOM_TYPE)
    }

    /// True for an assistant message with no `toolCall` block.
    pub fn is_text_only_assistant(&self) -> bool {
        self.is(&Role::Assistant) && !self.0.skeleton.has_tool_call_block
    }
}

/// What a parked message reads as when its text cannot be read back: the
/// same role, call and error flag, and a text that says so.
fn unreadable_json(skeleton: &Skeleton, len: usize, error: &str) -> String {
    let text = format!(
        "[condense: this message ({len} bytes) was parked and cannot be read back: {error}]"
    );
    let mut m = serde_json::Map::new();
    let role = skeleton.role.as_ref().map_or("user", Role::as_str);
    m.insert("role".into(), role.into());
    if let Some(id) = &skeleton.tool_call_id {
        m.insert("toolCallId".into(), id.as_str().into());
    }
    if let Some(name) = &skeleton.tool_name {
        m.insert("toolName".into(), name.as_str().into());
    }
    m.insert(
        "content".into(),
        serde_json::json!([{"type": "text", "text": text}]),
    );
    if skeleton.role == Some(Role::ToolResult) {
        m.insert("isError".into(), skeleton.is_error.into());
    }
    if let Some(t) = skeleton.timestamp {
        m.insert("timestamp".into(), t.into());
    }
    Value::Object(m).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_path_is_what_its_arguments_hold() {
        let m = Message::from_json(
            r#"{"role":"assistant","content":[
            {"type":"toolCall","id":"a","name":"read","arguments":{"path":"x","path":"y"}},
            {"type":"toolCall","id":"b","name":"edit","input":null,"arguments":{"path":"z"}},
            {"type":"toolCall","id":"c","name":"bash","input":{"path":"i"},"arguments":{"path":"j"}},
            {"type":"toolCall","id":"d","name":"bash","arguments":{"path":7}},
            {"type":"toolCall","id":"","name":"bash","arguments":{"path":"e"}},
            {"type":"toolCall","id":"f","name":"bash","arguments":"{\"path\":\"s\"}"}]}"#,
        )
        .unwrap();
        let calls: Vec<(&str, &str, Option<&str>)> = m
            .call_args()
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.path.as_deref()))
            .collect();
        assert_eq!(
            calls,
            [
                ("a", "read", Some("y")),
                ("b", "edit", Some("z")),
                ("c", "bash", Some("i")),
                ("d", "bash", None),
                ("f", "bash", None),
            ]
        );
    }

    #[test]
    fn a_detached_message_lets_its_buffer_go() {
        let line = r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}],"timestamp":5}"#;
        let buf = Arc::new(format!("{line}\n{line}\n"));
        let shared = Message::from_shared(&buf, 0..line.len()).unwrap();
        let _ = shared.call_args();
        let detached = shared.detached();
        drop(shared);
        assert_eq!(Arc::strong_count(&buf), 1, "nothing holds the buffer");
        assert_eq!(detached.json(), line);
        assert_eq!(detached, Message::from_json(line).unwrap());
        assert_eq!(
            detached.skeleton(),
            Message::from_json(line).unwrap().skeleton()
        );
        assert_eq!(detached.size(), js_len(line));
        assert_eq!(detached.call_args().len(), 1);
        // One that owns its text is itself.
        assert!(detached.detached().same(&detached));
    }

    #[test]
    fn skeleton_of_assistant_with_calls_and_thinking() {
        let m = Message::from_json(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"x","thinkingSignature":"s"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}},{"type":"toolCall","name":"noid"}],"timestamp":12,"usage":{"input":1}}"#,
        )
        .unwrap();
        let sk = m.skeleton();
        assert_eq!(sk.role, Some(Role::Assistant));
        assert_eq!(sk.timestamp, Some(12));
        assert_eq!(sk.thinking_blocks, 1);
        assert!(sk.has_tool_call_block);
        assert_eq!(
            sk.tool_calls,
            vec![ToolCallBlock {
                id: "c1".into(),
                name: "read".into()
            }]
        );
    }

    #[test]
    fn skeleton_of_tool_result_and_summary() {
        let m = Message::from_json(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"x"}],"isError":true,"timestamp":5}"#,
        )
        .unwrap();
        assert_eq!(m.skeleton().tool_call_id.as_deref(), Some("c1"));
        assert!(m.skeleton().is_error);
        let s = Message::from_json(
            r#"{"role":"custom","customType":"context-prune-summary","content":"s","display":false,"details":{"toolCallRefs":[{"shortId":"t1","toolCallId":"c1","resultTimestamp":5},{"shortId":"t2","toolCallId":"c2"}]},"timestamp":9}"#,
        )
        .unwrap();
        assert!(s.is_summary_message());
        assert_eq!(s.skeleton().summary_refs.len(), 2);
        assert_eq!(s.skeleton().summary_refs[1].result_timestamp, None);
    }

    #[test]
    fn synthetic_chain_user_message() {
        let m = Message::from_json(
            r#"{"role":"user","content":[{"type":"text","text":"<compressed-chain id=\"b3\" tools=\"\">\nx\n</compressed-chain>"}],"timestamp":1}"#,
        )
        .unwrap();
        assert_eq!(m.skeleton().compressed_chain_id.as_deref(), Some("b3"));
        assert!(m.skeleton().is_synthetic_chain);
    }

    #[test]
    fn unknown_roles_and_fields_round_trip() {
        let text = r#"{"role":"system","weird":{"a":[1,2]},"content":[{"type":"hologram","x":1}],"timestamp":1.5}"#;
        let m = Message::from_json(text).unwrap();
        assert_eq!(m.json(), text);
        assert_eq!(m.role(), Some(&Role::Other("system".into())));
        assert_eq!(m.timestamp(), None);
    }

    #[test]
    fn rejects_non_objects() {
        assert!(matches!(
            Message::from_json("[1]"),
            Err(MessageError::NotAnObject)
        ));
        assert!(matches!(
            Message::from_json("{"),
            Err(MessageError::Json(_))
        ));
    }
}
