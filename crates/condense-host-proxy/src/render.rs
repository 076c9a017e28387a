//! What every wire format's rebuild shares: the engine's list as the
//! request holds it ([`HostList`]), the texts condense writes, and the
//! layout of a plan (`layout`): which view message goes where, which
//! results show new text, which calls lost their arguments.

use std::borrow::Cow;
use std::collections::HashMap;

use condense_core::{Message, PlanStep, Role};
use serde_json::Value;

use crate::span::Spliced;
use crate::view::{Part, Unit};

/// Why a render could not be written onto the wire.
#[derive(Debug, PartialEq, Eq)]
pub struct RebuildError(pub String);

impl std::fmt::Display for RebuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The engine's list as the request holds it: for each message the engine
/// holds, the view message it is ([`Unit`] index), or `None` for one
/// condense wrote (a summary) that the client never sent.
pub struct HostList<'a> {
    /// The messages, in the engine's (host) coordinates.
    pub messages: &'a [Message],
    /// Each message's unit in the request.
    pub units: &'a [Option<usize>],
    /// The text of each message condense wrote, as the model is sent it
    /// ([`wire_text`]); `None` for the others.
    pub texts: &'a [Option<String>],
}

/// The text a message condense wrote is sent as: its text, the query tool
/// named as the model sees it.
pub fn wire_text(m: &Message, query_tool: &str) -> String {
    name_query_tool(&text_of(m), query_tool)
}

/// The text of a message condense wrote: its content string, or its text
/// blocks joined by newlines.
pub(crate) fn text_of(m: &Message) -> String {
    let v: Value = serde_json::from_str(&m.json()).unwrap_or_default();
    match v.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => v
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Arguments condense's error purge left (`{"_purged": "<purged-errored-args …/>"}`).
pub(crate) fn purged_arguments(m: &Message) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&m.json()).unwrap_or_default();
    let Some(blocks) = v.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .filter_map(|b| {
            let id = b.get("id")?.as_str()?;
            let args = b.get("arguments")?.as_object()?;
            let purged = args.len() == 1
                && args
                    .get("_purged")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with("<purged-errored-args"));
            purged.then(|| (id.to_owned(), Value::Object(args.clone()).to_string()))
        })
        .collect()
}

/// Names the query tool as the model sees it in a text condense wrote.
pub fn name_query_tool(text: &str, tool: &str) -> String {
    if tool == condense_core::QUERY_TOOL_NAME {
        return text.to_owned();
    }
    let prefix = tool
        .strip_suffix(condense_core::QUERY_TOOL_NAME)
        .unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(condense_core::QUERY_TOOL_NAME) {
        let before = &rest[..at];
        out.push_str(before);
        // A name already in the client's form stays as it is.
        if before.ends_with("mcp__condense__") || (!prefix.is_empty() && before.ends_with(prefix)) {
            out.push_str(condense_core::QUERY_TOOL_NAME);
        } else {
            out.push_str(tool);
        }
        rest = &rest[at + condense_core::QUERY_TOOL_NAME.len()..];
    }
    out.push_str(rest);
    // Kept for the session (`ProxySession::texts`): without the slack the
    // longer names left.
    out.shrink_to_fit();
    out
}

/// One message of the output: a view message of the request, or text
/// condense wrote.
pub(crate) enum Slot<'a> {
    Unit(usize),
    Synthetic(Cow<'a, str>),
}

/// A plan laid out on the request's units.
pub(crate) struct Layout<'a> {
    /// The output, in order.
    pub slots: Vec<Slot<'a>>,
    /// The text each result unit now shows (a stub, an answered query).
    pub content: HashMap<usize, String>,
    /// Each assistant unit's calls whose arguments were purged: the call
    /// id and the arguments it shows (JSON).
    pub purged: HashMap<usize, Vec<(String, String)>>,
    /// Whether each unit is a message the engine holds.
    pub in_host: Vec<bool>,
    /// Whether each unit is in the output.
    pub present: Vec<bool>,
}

impl Layout<'_> {
    /// Whether a unit's part of the wire is kept: it is in the output, or
    /// the engine never held it (it follows where it was).
    pub fn kept(&self, u: usize) -> bool {
        self.present[u] || !self.in_host[u]
    }
}

/// Lays `steps` (computed on `host`) out on `units`.
pub(crate) fn layout<'a>(
    units: &[Unit],
    host: &'a HostList<'_>,
    steps: &[PlanStep],
    answers: &HashMap<usize, String>,
    query_tool: &str,
) -> Layout<'a> {
    let mut result_unit: HashMap<&str, usize> = HashMap::new();
    let mut assistant_unit: HashMap<&str, usize> = HashMap::new();
    for (h, u) in host.units.iter().enumerate() {
        let Some(u) = *u else { continue };
        let unit = &units[u];
        match unit.part {
            Part::Result(_) => {
                if let Some(c) = &unit.call_id {
                    result_unit.insert(c, u);
                }
            }
            Part::Assistant => {
                for c in &host.messages[h].skeleton().tool_calls {
                    assistant_unit.insert(c.id.as_str(), u);
                }
            }
            Part::Prompt => {}
        }
    }
    let mut slots = Vec::new();
    let mut content: HashMap<usize, String> = HashMap::new();
    let mut purged: HashMap<usize, Vec<(String, String)>> = HashMap::new();
    for step in steps {
        match step {
            PlanStep::Keep(r) => {
                for h in r.clone().take_while(|h| *h < host.messages.len()) {
                    match (host.units[h], host.texts.get(h).and_then(Option::as_deref)) {
                        (Some(u), _) => slots.push(Slot::Unit(u)),
                        (None, Some(text)) => slots.push(Slot::Synthetic(text.into())),
                        (None, None) => slots.push(Slot::Synthetic(
                            wire_text(&host.messages[h], query_tool).into(),
                        )),
                    }
                }
            }
            PlanStep::New(m) => {
                let call = m.skeleton().tool_call_id.as_deref();
                if let Some(u) = call
                    .filter(|_| m.is(&Role::ToolResult))
                    .and_then(|c| result_unit.get(c))
                {
                    if !units[*u].frozen {
                        content.insert(*u, name_query_tool(&text_of(m), query_tool));
                    }
                    slots.push(Slot::Unit(*u));
                    continue;
                }
                if m.is(&Role::Assistant) {
                    let at = m
                        .skeleton()
                        .tool_calls
                        .iter()
                        .find_map(|c| assistant_unit.get(c.id.as_str()));
                    if let Some(u) = at {
                        let args = purged_arguments(m);
                        if !args.is_empty() {
                            purged.insert(*u, args);
                        }
                        slots.push(Slot::Unit(*u));
                        continue;
                    }
                }
                slots.push(Slot::Synthetic(wire_text(m, query_tool).into()));
            }
        }
    }
    // A query the proxy answered shows its answer wherever it is sent as is.
    for (u, text) in answers {
        content.entry(*u).or_insert_with(|| text.clone());
    }
    let mut in_host = vec![false; units.len()];
    for u in host.units.iter().flatten() {
        in_host[*u] = true;
    }
    let mut present = vec![false; units.len()];
    for slot in &slots {
        if let Slot::Unit(u) = slot {
            present[*u] = true;
        }
    }
    Layout {
        slots,
        content,
        purged,
        in_host,
        present,
    }
}

/// The API family a request speaks: where its summaries go and how its
/// models are priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Api {
    /// The Anthropic Messages API.
    #[default]
    Anthropic,
    /// OpenAI's Responses or Chat Completions API.
    OpenAi,
}

impl Api {
    /// The provider's name in a model reference (`anthropic/…`).
    pub fn provider(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
        }
    }
}

/// A request read in one wire format, as a session renders it: what the
/// session needs of it besides its [`Unit`]s.
pub trait WireBody {
    /// The API family.
    fn api(&self) -> Api;
    /// The model the request names.
    fn model(&self) -> Option<&str>;
    /// The request's body.
    fn body(&self) -> &str;
    /// Writes `steps` (computed on `host`) onto the request: the body to
    /// send, cut from [`WireBody::body`]. `Ok(None)`: the output is the
    /// request as sent.
    fn rebuild(
        &self,
        units: &[Unit],
        host: &HostList<'_>,
        steps: &[PlanStep],
        answers: &HashMap<usize, String>,
        query_tool: &str,
    ) -> Result<Option<Spliced>, RebuildError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MCP_QUERY: &str = crate::view::MCP_QUERY_TOOL;

    #[test]
    fn the_query_tool_is_named_as_the_client_lists_it_once() {
        let text = "Use `context_tree_query`; mcp__condense__context_tree_query; condense_context_tree_query";
        assert_eq!(
            name_query_tool(text, "condense_context_tree_query"),
            "Use `condense_context_tree_query`; mcp__condense__context_tree_query; condense_context_tree_query"
        );
        assert_eq!(
            name_query_tool(
                "Use `context_tree_query`; mcp__condense__context_tree_query",
                MCP_QUERY
            ),
            "Use `mcp__condense__context_tree_query`; mcp__condense__context_tree_query"
        );
        assert!(crate::view::is_query_tool("condense_context_tree_query"));
        assert!(crate::view::is_query_tool(
            "mcp__condense__context_tree_query"
        ));
        assert!(!crate::view::is_query_tool("other_context_tree_query"));
    }
}
