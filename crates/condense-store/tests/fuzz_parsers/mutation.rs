//! Edits of a real session file's lines: the mutated copies the reader and
//! `Message::from_json` must take without panicking.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::inputs::{json_value, key};

/// One edit of a session file's lines (indices are taken modulo the line count).
#[derive(Debug, Clone)]
pub enum Mutation {
    Truncate {
        line: usize,
        at: usize,
    },
    FlipByte {
        line: usize,
        at: usize,
        xor: u8,
    },
    ChangeType {
        line: usize,
        to: &'static str,
    },
    DuplicateId {
        from: usize,
        to: usize,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    InsertGarbage {
        line: usize,
        bytes: Vec<u8>,
    },
    /// Sets a field of the line (or of its `data`/`message`/`details`, or of
    /// an object inside them) to an arbitrary value.
    SetField {
        line: usize,
        depth: usize,
        key: String,
        value: Value,
    },
    RemoveField {
        line: usize,
        depth: usize,
        key: String,
    },
    NoFinalNewline,
    CrLf,
}

const TYPES: &[&str] = &[
    "message",
    "custom",
    "custom_message",
    "compaction",
    "branch_summary",
    "session",
    "label",
    "model_change",
    "thinking_level_change",
    "session_info",
    "unknown_kind",
    "",
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let n = any::<usize>();
    prop_oneof![
        1 => (n, n).prop_map(|(line, at)| Mutation::Truncate { line, at }),
        1 => (n, n, 1u8..=255).prop_map(|(line, at, xor)| Mutation::FlipByte { line, at, xor }),
        1 => (n, prop::sample::select(TYPES)).prop_map(|(line, to)| Mutation::ChangeType { line, to }),
        1 => (n, n).prop_map(|(from, to)| Mutation::DuplicateId { from, to }),
        1 => n.prop_map(|line| Mutation::DeleteLine { line }),
        1 => n.prop_map(|line| Mutation::DuplicateLine { line }),
        1 => (n, n).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        1 => (n, prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(line, bytes)| Mutation::InsertGarbage { line, bytes }),
        3 => (n, 0usize..3, key(), json_value())
            .prop_map(|(line, depth, key, value)| Mutation::SetField { line, depth, key, value }),
        1 => (n, 0usize..3, key()).prop_map(|(line, depth, key)| Mutation::RemoveField { line, depth, key }),
        1 => Just(Mutation::NoFinalNewline),
        1 => Just(Mutation::CrLf),
    ]
}

/// The object a `SetField`/`RemoveField` of this depth edits.
fn target(v: &mut Value, depth: usize, pick: usize) -> Option<&mut Map<String, Value>> {
    if depth == 0 {
        return v.as_object_mut();
    }
    let nested: Vec<String> = v
        .as_object()?
        .iter()
        .filter(|(_, v)| v.is_object() || v.is_array())
        .map(|(k, _)| k.clone())
        .collect();
    if nested.is_empty() {
        return v.as_object_mut();
    }
    let key = nested[pick % nested.len()].clone();
    let child = v.as_object_mut()?.get_mut(&key)?;
    if let Some(len) = child.as_array().map(Vec::len).filter(|n| *n > 0) {
        return target(&mut child.as_array_mut()?[pick % len], depth - 1, pick);
    }
    target(child, depth - 1, pick)
}

pub fn apply(text: &str, mutations: &[Mutation]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    let mut final_newline = true;
    let mut crlf = false;
    for m in mutations {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match m {
            Mutation::Truncate { line, at } => {
                let l = &mut lines[line % n];
                let len = l.len();
                l.truncate(at % (len + 1));
            }
            Mutation::FlipByte { line, at, xor } => {
                let l = &mut lines[line % n];
                if !l.is_empty() {
                    let i = at % l.len();
                    l[i] ^= xor;
                }
            }
            Mutation::ChangeType { line, to } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("type".into(), Value::from(*to));
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::DuplicateId { from, to } => {
                let id = serde_json::from_slice::<Value>(&lines[from % n])
                    .ok()
                    .and_then(|v| v.get("id").cloned());
                if let (Some(id), Ok(mut v)) = (id, serde_json::from_slice::<Value>(&lines[to % n]))
                {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("id".into(), id);
                        lines[to % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::DeleteLine { line } => {
                lines.remove(line % n);
            }
            Mutation::DuplicateLine { line } => {
                let l = lines[line % n].clone();
                lines.insert(line % n, l);
            }
            Mutation::SwapLines { a, b } => lines.swap(a % n, b % n),
            Mutation::InsertGarbage { line, bytes } => {
                let bytes: Vec<u8> = bytes.iter().copied().filter(|b| *b != b'\n').collect();
                lines.insert(line % (n + 1), bytes);
            }
            Mutation::SetField {
                line,
                depth,
                key,
                value,
            } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = target(&mut v, *depth, line / n.max(1)) {
                        o.insert(key.clone(), value.clone());
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::RemoveField { line, depth, key } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = target(&mut v, *depth, line / n.max(1)) {
                        let k = if o.contains_key(key) {
                            Some(key.clone())
                        } else {
                            o.keys().nth(key.len() % o.len().max(1)).cloned()
                        };
                        if let Some(k) = k {
                            o.remove(&k);
                        }
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::NoFinalNewline => final_newline = false,
            Mutation::CrLf => crlf = true,
        }
    }
    let sep: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = lines.join(sep);
    if final_newline && !out.is_empty() {
        out.extend_from_slice(sep);
    }
    out
}
