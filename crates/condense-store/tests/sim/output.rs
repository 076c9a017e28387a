//! Readings of a message list: which results are orphans, whether a render
//! is well formed (guarantee 2), and which refs a model can read in it.

use std::collections::HashSet;

use condense_core::{Message, Role};

/// The orphan rule on the input: an assistant opens its calls, a result
/// consumes its id, anything else closes the set. A result whose id is not
/// open is an orphan (no call left to answer).
pub fn orphans(messages: &[Message]) -> Vec<bool> {
    let mut open: Vec<String> = Vec::new();
    messages
        .iter()
        .map(|m| match m.role() {
            Some(Role::Assistant) => {
                open = m
                    .skeleton()
                    .tool_calls
                    .iter()
                    .map(|c| c.id.clone())
                    .collect();
                false
            }
            Some(Role::ToolResult) => {
                let id = m.skeleton().tool_call_id.as_deref().unwrap_or("");
                match open.iter().position(|o| o == id) {
                    Some(p) => {
                        open.swap_remove(p);
                        false
                    }
                    None => true,
                }
            }
            _ => {
                open.clear();
                false
            }
        })
        .collect()
}

/// Guarantee 2: every tool result answers a call of the assistant that
/// opens its run of results, at most once; nothing starts with a result.
pub fn check_well_formed(output: &[Message]) -> Result<(), String> {
    let mut open: Option<(usize, HashSet<String>)> = None;
    let mut answered: HashSet<String> = HashSet::new();
    for (i, m) in output.iter().enumerate() {
        match m.role() {
            Some(Role::Assistant) => {
                let calls = m
                    .skeleton()
                    .tool_calls
                    .iter()
                    .map(|c| c.id.clone())
                    .collect();
                open = Some((i, calls));
                answered.clear();
            }
            Some(Role::ToolResult) => {
                let id = m.skeleton().tool_call_id.clone().unwrap_or_default();
                let Some((at, calls)) = &open else {
                    return Err(format!(
                        "guarantee 2: output[{i}] result {id} follows no assistant"
                    ));
                };
                if !calls.contains(&id) {
                    return Err(format!(
                        "guarantee 2: output[{i}] result {id} answers no call of output[{at}]"
                    ));
                }
                if !answered.insert(id.clone()) {
                    return Err(format!("guarantee 2: output[{i}] answers {id} twice"));
                }
            }
            _ => open = None,
        }
    }
    Ok(())
}

/// The refs a model can read in a render: stub refs, chain `tools` lists,
/// summary footers and deterministic bodies.
pub fn visible_refs(output: &[Message]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in output {
        let v = m.to_value().unwrap();
        let text = match m.role() {
            Some(Role::ToolResult) | Some(Role::User) | Some(Role::Custom) => {
                let mut t = String::new();
                if let Some(s) = v["content"].as_str() {
                    t.push_str(s);
                }
                for b in v["content"].as_array().into_iter().flatten() {
                    if let Some(s) = b["text"].as_str() {
                        t.push_str(s);
                        t.push('\n');
                    }
                }
                t
            }
            _ => continue,
        };
        let mut rest = text.as_str();
        while let Some(p) = rest.find("ref `") {
            rest = &rest[p + 5..];
            if let Some(end) = rest.find('`') {
                out.insert(rest[..end].to_owned());
            }
        }
        for line in text.lines() {
            let listed = line
                .strip_prefix("**Summarized tool refs**:")
                .or_else(|| line.strip_prefix("Refs:"));
            if let Some(list) = listed {
                out.extend(
                    list.split(',')
                        .map(|r| r.trim().trim_matches('`'))
                        .filter(|r| !r.is_empty())
                        .map(str::to_owned),
                );
            }
            if let Some(p) = line.find("tools=\"") {
                let list = &line[p + 7..];
                if let Some(end) = list.find('"') {
                    out.extend(
                        list[..end]
                            .split(',')
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    );
                }
            }
        }
    }
    out
}
