//! The steps a session takes besides flushing: prompts, tool turns (with
//! `turn_end`'s eager spill and budget flush), replies, recovery queries,
//! messages from others, and a torn append.

use condense_core::query;
use condense_core::Message;
use condense_core::PruneOn;
use condense_core::{apply_spill, plan_spill};
use condense_core::{capture_turn, without_protected};
use condense_store::append::EntryBase;
use condense_store::spill::{read_spill, write_blob};
use serde_json::json;

use super::content::Call;
use super::flush::BrokenBlobDir;
use super::output::visible_refs;
use super::{Crash, Sim};

impl Sim {
    pub(super) fn prompt(&mut self) -> Result<(), String> {
        let text = format!("task {}: {}", self.rng.below(1000), self.text(80));
        let m = self.user_message(&text);
        let now = m.timestamp().unwrap_or(self.clock);
        let mut app = self.appender()?;
        self.push_message(&mut app, m, now)?;
        self.app = Some(app);
        self.open_task = true;
        Ok(())
    }

    pub(super) fn custom_message(&mut self) -> Result<(), String> {
        let mut app = self.appender()?;
        self.append_custom_message(&mut app)?;
        self.app = Some(app);
        Ok(())
    }

    pub(super) fn bash_message(&mut self) -> Result<(), String> {
        let ts = self.tick(100, 5_000);
        let output = self.text_between(0, 300);
        let m = Message::from_value(&json!({"role": "bashExecution", "command": "git status",
            "output": output, "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": ts}))
        .expect("bash message");
        let mut app = self.appender()?;
        self.push_message(&mut app, m, ts)?;
        self.app = Some(app);
        Ok(())
    }

    pub(super) fn tool_turn(&mut self, calls: Vec<Call>) -> Result<(), String> {
        let text = self.rng.chance(50).then(|| self.text(60));
        let assistant = self.assistant(text.as_deref(), &calls);
        let mut app = self.appender()?;
        let now = assistant.timestamp().unwrap_or(self.clock);
        self.push_message(&mut app, assistant.clone(), now)?;
        // Parallel calls can finish within one millisecond.
        let same_ts = self.rng.chance(15);
        let mut ts = self.tick(5, 2_000);
        let mut results = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            if i > 0 && !same_ts {
                ts = self.tick(1, 2_000);
            }
            if i > 0 && self.rng.chance(2) {
                // Someone else's message lands between two results: the
                // later results become orphans the render sweeps.
                self.append_custom_message(&mut app)?;
            }
            let r = self.tool_result(c, ts);
            self.push_message(&mut app, r.clone(), ts.max(self.clock))?;
            results.push(r);
        }
        self.app = Some(app);
        self.turn_end(&assistant, &results)
    }

    /// `turn_end`: eager spill, then maybe a budget flush.
    fn turn_end(&mut self, assistant: &Message, results: &[Message]) -> Result<(), String> {
        self.turn_index += 1;
        let now = self.tick(1, 20);
        let batch = without_protected(
            capture_turn(assistant, results, self.turn_index, now),
            &self.protection,
        );
        let plan = plan_spill(&batch, &self.state, &self.config);
        if !plan.spill.is_empty() || !plan.aliases.is_empty() {
            let broken = !plan.spill.is_empty() && self.fault(8);
            let guard = if broken {
                self.tally.fault("spill-write-failed");
                Some(BrokenBlobDir::new(&self.blobs))
            } else {
                None
            };
            let mut written = Vec::new();
            for &i in &plan.spill {
                let c = &batch.calls[i];
                if let Ok(b) = write_blob(&self.blobs, &c.key(), &c.result_text.to_str()) {
                    written.push(b.to_spill(i));
                }
            }
            drop(guard);
            if broken && !written.is_empty() {
                return Err("a spill write succeeded with the blob directory broken".into());
            }
            let (effects, _) = apply_spill(batch, &plan, &written, &mut self.state, &self.config);
            self.tally.spills += written.len() as u64;
            // The process may die after the blob write, before its entry.
            let crash = if !written.is_empty() && !self.no_random_crash && self.fault(4) {
                self.tally.fault("crash-after-blob-write");
                Some(Crash::After(0))
            } else {
                None
            };
            if self.write_effects(&effects, None, now, crash)? {
                return self.restart();
            }
        }
        if self.rng.chance(12) {
            let crashed = self.flush("budget", None)?;
            if crashed {
                return self.restart();
            }
        }
        Ok(())
    }

    pub(super) fn reply(&mut self) -> Result<(), String> {
        let text = self.text_between(5, 300);
        let reply = self.assistant(Some(&text), &[]);
        if self.config.prune_on == PruneOn::AgentMessage {
            // `message_end` runs before pi persists the reply.
            let crashed = self.flush("message-end", Some(&reply))?;
            if crashed {
                // pi died before persisting the reply: the task stays open.
                return self.restart();
            }
        }
        let mut app = self.appender()?;
        let now = reply.timestamp().unwrap_or(self.clock);
        self.push_message(&mut app, reply, now)?;
        self.app = Some(app);
        self.open_task = false;
        Ok(())
    }

    /// The model pages outputs back in through refs it can see.
    pub(super) fn recovery_query(&mut self) -> Result<(), String> {
        let rendered = self.render_live();
        let mut refs: Vec<String> = visible_refs(&rendered).into_iter().collect();
        refs.sort();
        let mut ids = Vec::new();
        for _ in 0..self.rng.range(1, 3) {
            if refs.is_empty() {
                break;
            }
            ids.push(refs.swap_remove(self.rng.below(refs.len() as u64) as usize));
        }
        if ids.is_empty() || self.rng.chance(10) {
            ids.push("t999999".to_owned());
        }
        self.tally.queries += 1;
        let taken = Vec::new();
        let id = self.new_id(&taken);
        let out = query(&self.state, &ids, |r| read_spill(&self.blobs, r));
        let call = Call {
            id,
            name: "context_tree_query",
            args: json!({"toolCallIds": ids}),
            text: out.text,
            is_error: false,
        };
        self.tool_turn(vec![call])
    }

    /// pi dies halfway through appending a message.
    pub(super) fn torn_append(&mut self) -> Result<(), String> {
        self.tally.fault("torn-message-append");
        let m = self.user_message("this prompt never made it to disk whole");
        let base = EntryBase {
            id: "0badf00d",
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z",
        };
        let line =
            condense_store::append::message_entry_line(&m, &base).map_err(|e| e.to_string())?;
        self.write_torn(&line)?;
        self.restart()
    }
}
