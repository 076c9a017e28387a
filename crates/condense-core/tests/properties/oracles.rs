//! The oracles the properties check outputs against, computed from the
//! input branch or read off the output.

use std::collections::HashSet;

use condense_core::Render;
use condense_core::{Message, Role};

use crate::build::Built;
use crate::support::{Branch, Kind, Meta};

/// The orphan rule, on the input: walking forward, an assistant message opens
/// the set of its tool-call ids, a tool result consumes its id from the open
/// set, and any other message empties it. A tool result whose id is not open
/// when it is reached is an orphan (no open call answers to it).
pub fn orphans(branch: &Branch) -> Vec<bool> {
    let mut open: HashSet<&str> = HashSet::new();
    branch
        .meta
        .iter()
        .map(|m| match m.kind {
            Kind::Assistant => {
                open = m.calls.iter().map(|c| c.id.as_str()).collect();
                false
            }
            Kind::ToolResult => !open.remove(m.call_id.as_str()),
            _ => {
                open.clear();
                false
            }
        })
        .collect()
}

/// The texts of the `<compressed-chain>` synthetics of an output.
pub fn synthetic_texts(output: &[Message]) -> Vec<String> {
    output
        .iter()
        .filter(|m| m.is(&Role::User) && m.skeleton().is_synthetic_chain)
        .filter_map(|m| {
            m.to_value().unwrap()["content"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

pub fn relocated(synthetics: &[String], m: &Meta) -> bool {
    let block = format!(
        "<protected-output tool=\"{}\">\n{}\n</protected-output>",
        m.tool_name.replace('"', "&quot;"),
        condense_core::neutralize_closing_tags(&m.text)
    );
    synthetics.iter().any(|s| s.contains(&block))
}

pub fn output_of(built: &Built, r: &Render) -> (Vec<Message>, HashSet<String>) {
    let out = r.messages(&built.messages);
    let jsons = out.iter().map(|m| m.json().to_string()).collect();
    (out, jsons)
}
