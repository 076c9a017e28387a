//! Format migration on read (v1 → v2 → v3) the way pi does it, so every
//! caller sees version-3 entries and [`Session::to_jsonl`] gives what pi
//! would write back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use condense_core::{Message, Role};
use serde_json::{Map, Value};

use super::entry::*;
use super::reader::*;
use super::CURRENT_SESSION_VERSION;

/// Deterministic 8-hex ids for the v1 → v2 migration (not persisted unless
/// the caller writes [`Session::to_jsonl`] back).
pub(super) fn migration_ids() -> impl FnMut(&HashSet<String>) -> String {
    let mut state: u64 = 0x5eed_c0de_0000_0001;
    move |taken| loop {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let id = format!("{:08x}", z as u32);
        if !taken.contains(&id) {
            return id;
        }
    }
}

/// Re-serializes a migrated line into its own buffer.
pub(super) fn replace_line(entry: &mut Entry, map: &Map<String, Value>) {
    let text = crate::json::to_string(map).expect("a JSON map always serializes");
    let len = text.len();
    entry.raw = RawLine {
        buf: Arc::new(text),
        range: 0..len,
    };
    // Point the spans at the same fields of the new text.
    let line = entry.raw();
    entry.spans = serde_json::from_str::<EntryFields>(line)
        .map(|fields| Spans::of(&entry.kind, line, &fields))
        .unwrap_or_default();
}

/// Brings v1/v2 entries to v3 as pi's `migrateToCurrentVersion` does.
pub(super) fn migrate(reader: &mut Reader, version: u32) {
    if let Some(header) = &mut reader.header {
        if let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(&header.raw) {
            map.insert("version".into(), Value::from(CURRENT_SESSION_VERSION));
            header.raw = crate::json::to_string(&map).expect("a JSON map always serializes");
        }
    }

    let mut new_ids = migration_ids();
    let mut taken: HashSet<String> = HashSet::new();
    if version < 2 {
        // Position (among parsed lines) → entry index, for firstKeptEntryIndex.
        let by_position: HashMap<usize, usize> = reader
            .positions
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, i))
            .collect();
        let mut previous: Option<String> = None;
        for i in 0..reader.entries.len() {
            let id = new_ids(&taken);
            taken.insert(id.clone());
            let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(reader.entries[i].raw())
            else {
                continue;
            };
            let parent = previous.replace(id.clone());
            map.insert("id".into(), Value::String(id.clone()));
            map.insert(
                "parentId".into(),
                parent.clone().map_or(Value::Null, Value::String),
            );
            if reader.entries[i].kind == EntryType::Compaction {
                if let Some(index) = map.get("firstKeptEntryIndex").and_then(Value::as_f64) {
                    // Only entries up to this one have ids yet, as in pi.
                    let target = (index >= 0.0 && index.fract() == 0.0)
                        .then(|| by_position.get(&(index as usize)).copied())
                        .flatten()
                        .filter(|&t| t <= i);
                    if let Some(t) = target {
                        let target_id = if t == i {
                            id.clone()
                        } else {
                            reader.entries[t].id.clone()
                        };
                        map.insert("firstKeptEntryId".into(), Value::String(target_id));
                    }
                    map.shift_remove("firstKeptEntryIndex");
                }
            }
            let entry = &mut reader.entries[i];
            entry.id = id;
            entry.parent_id = parent;
            if entry.kind == EntryType::Message {
                rename_hook_message(entry, &mut map);
            }
            replace_line(entry, &map);
        }
    } else {
        for entry in &mut reader.entries {
            let is_hook = entry.message.as_ref().and_then(Message::role)
                == Some(&Role::Other("hookMessage".into()));
            if !is_hook {
                continue;
            }
            let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(entry.raw()) else {
                continue;
            };
            rename_hook_message(entry, &mut map);
            replace_line(entry, &map);
        }
    }
}

/// v2 → v3: a message of role `hookMessage` becomes role `custom`.
pub(super) fn rename_hook_message(entry: &mut Entry, map: &mut Map<String, Value>) {
    let Some(Value::Object(message)) = map.get_mut("message") else {
        return;
    };
    if message.get("role").and_then(Value::as_str) != Some("hookMessage") {
        return;
    }
    message.insert("role".into(), Value::String("custom".into()));
    let text = crate::json::to_string(message).expect("a JSON map always serializes");
    entry.message = Message::from_json(&text).ok();
}
