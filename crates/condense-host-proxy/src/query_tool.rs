//! `context_tree_query` as an MCP tool: its name, description and
//! arguments, shared by `condense mcp` (which lists it) and the proxy
//! (which answers it).
//!
//! The MCP server is a separate process that cannot tell which
//! conversation a call comes from, so it answers with a placeholder
//! ([`pending_text`]); the proxy, which sees the conversation, puts the
//! session's answer in its place before the model reads it, in that
//! request and every later one (the answer is logged with the result, so
//! it is the same bytes each time and after a restart).

use serde::Deserialize;

/// The tool's name on the MCP server.
pub const TOOL_NAME: &str = "context_tree_query";

/// The tool's description, as every host gives it.
pub const DESCRIPTION: &str = "Retrieve the original, full output of tool calls whose results were replaced by a pruner summary stub. Pass the short refs shown in the stubs or summaries, e.g. {\"toolCallIds\": [\"t3\", \"t4\"]}; raw tool call ids also work.";

/// The start of the placeholder the MCP server answers with.
pub const PENDING_MARKER: &str = "[condense: context_tree_query answer pending]";

/// The placeholder for a call (what the model reads if no proxy is in the
/// way).
pub fn pending_text() -> String {
    format!(
        "{PENDING_MARKER} The condense proxy puts the answer here before the model reads it. If you read this, requests are not going through the proxy: start the agent with `condense claude` or `condense codex`, or point its API base URL at `condense proxy`."
    )
}

/// The tool's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryArgs {
    /// Short refs (`t12`) or raw tool-call ids.
    #[serde(default)]
    pub tool_call_ids: Vec<String>,
    /// The line each output starts from (1-based).
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many lines of each output.
    #[serde(default)]
    pub limit: Option<u64>,
}

impl QueryArgs {
    /// Reads the arguments of a call (lenient: what does not read is no
    /// ref and the whole first page).
    pub fn from_json(input: &str) -> QueryArgs {
        serde_json::from_str(input).unwrap_or_default()
    }

    /// The page asked for (a non-positive number is no window).
    pub fn page(&self) -> condense_core::PageRequest {
        condense_core::PageRequest {
            offset: self.offset.filter(|n| *n > 0),
            limit: self.limit.filter(|n| *n > 0),
        }
    }
}

/// The tool's input schema (JSON Schema), as the other hosts declare it.
pub fn input_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "toolCallIds": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Short refs such as \"t12\" (from pruner stubs and summaries) or raw tool call ids."
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "Line number to start each output from (1-indexed); a cut output says which offset continues it."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Maximum number of lines to show of each output (at most 2000)."
            }
        },
        "required": ["toolCallIds"]
    })
}
