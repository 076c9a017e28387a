//! What a driven run is checked for afterwards: the outputs it left out
//! that `context_tree_query` cannot give back whole, and whether a reload of the
//! session it leaves renders as the live engine did.

use condense_core::{Message, QueryOptions};
use condense_store::session::Entry;
use serde_json::Value;

use super::written::{branch_with_written, parse_branch};
use super::Driver;
use crate::session::EngineLock;

impl Driver {
    /// Tool outputs some prompt left out that `context_tree_query` cannot
    /// give back whole: each is queried as the live tool answers it (the
    /// index when it knows the key, else the whole branch the session file
    /// holds) and its full text (spilled or inline) compared with the
    /// recorded output.
    pub fn unrecoverable(&self) -> u64 {
        let engine = self.engine.engine();
        let blob_dir = self.blob_dir.clone().unwrap_or_default();
        // Asked as its stub names it: the occurrence (a dedup alias
        // resolves to its original only so), not the bare id, which finds
        // an alias only on the branch.
        let keys: Vec<(String, &Message)> = self
            .removed
            .iter()
            .map(|(id, original)| {
                let key = original
                    .timestamp()
                    .map_or_else(|| id.clone(), |ts| format!("{id}@{ts}"));
                (key, original)
            })
            .collect();
        // A key the index knows is answered from the index alone (a message
        // the context still holds is never read); one it does not know from
        // the branch, where pi's compaction leaves an output only in the file.
        let unknown = keys
            .iter()
            .any(|(key, _)| engine.state().records_for_query(key).is_empty());
        let history = if unknown {
            self.branch_history()
        } else {
            Vec::new()
        };
        let lost = keys.iter().filter(|(key, original)| {
            let out = condense_core::query_with(
                engine.state(),
                std::slice::from_ref(key),
                QueryOptions {
                    page: Default::default(),
                    branch: &history,
                },
                |r| condense_store::spill::read_spill(&blob_dir, r),
            );
            let want = original.result_text();
            !out.results.iter().any(|(_, record)| {
                let text = if record.spill_path.is_some() {
                    condense_store::spill::read_spill(&blob_dir, record)
                } else {
                    Some(record.result_text.to_string())
                };
                text.as_deref() == Some(want.as_str())
            })
        });
        lost.count() as u64
    }

    /// The messages of the branch the session file holds (the recorded
    /// entries fed; the run's own entries add none), those a compaction
    /// left out of the context included.
    fn branch_history(&self) -> Vec<Message> {
        let session = parse_branch(&crate::jsonl(&self.fed));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        condense_store::context::branch_history(&branch)
    }
}

impl Driver {
    /// Whether a reload of the session the live run would have left (the
    /// entries fed, with [`Driver::written`] in their places) renders what
    /// the live engine renders: the context pi rebuilds from that file
    /// (as far as the engine's copy reaches) under the replayed state, against
    /// the engine's copy under the live state.
    pub fn reload_renders_the_same(&self) -> Result<(), String> {
        let session = parse_branch(&branch_with_written(&self.fed, &self.written));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        let (reloaded, _problems) = condense_store::replay::replay_branch(&branch);
        // The engine is told of every compaction fed, the last one too
        // (pi compacts after a session's last run), and follows pi's list
        // rebuilt at it, as the context built from the file does.
        let rebuilt = condense_store::context::build_context(&branch).messages;
        let engine = self.engine.engine();
        let settings = condense_core::RenderSettings {
            config: engine.config(),
            protection: engine.protection(),
        };
        let messages = engine.messages();
        let rebuilt = rebuilt.get(..messages.len()).unwrap_or(&rebuilt);
        let live = condense_core::render(messages, engine.state(), &settings).messages(messages);
        let again = condense_core::render(rebuilt, &reloaded, &settings).messages(rebuilt);
        // The rebuilt file's recorded lines were re-serialized (`9e-6` for
        // `0.000009`): messages are the same when their JSON values are.
        let same = |a: &Message, b: &Message| {
            a.json() == b.json()
                || serde_json::from_str::<Value>(&a.json()).ok()
                    == serde_json::from_str::<Value>(&b.json()).ok()
        };
        let differ = live.iter().zip(&again).position(|(a, b)| !same(a, b));
        if differ.is_none() && live.len() == again.len() {
            return Ok(());
        }
        let at = differ.unwrap_or(live.len().min(again.len()));
        // From a little before the first character that differs.
        let from = live
            .get(at)
            .zip(again.get(at))
            .map(|(a, b)| {
                let (a, b) = (a.json(), b.json());
                let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                (0..=same.saturating_sub(40))
                    .rev()
                    .find(|&i| a.is_char_boundary(i))
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        let head = |ms: &[Message]| {
            ms.get(at)
                .and_then(|m| {
                    m.json()
                        .get(from..)
                        .map(|t| t.chars().take(160).collect::<String>())
                })
                .unwrap_or_default()
        };
        Err(format!(
            "the reload renders differently from message {at} ({} messages live, {} reloaded), from its character {from}: live {} | reloaded {}",
            live.len(),
            again.len(),
            head(&live),
            head(&again)
        ))
    }
}
