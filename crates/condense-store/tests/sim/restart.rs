//! Reading the file back as a restart would (guarantee 4: only torn
//! fragments, a clean replay, every spill file present), reloads and
//! restarts, and a dump of the file for debugging.

use condense_core::render;
use condense_core::Branch;
use condense_core::{Message, Role};
use condense_store::context::build_context;
use condense_store::replay::replay_branch;
use condense_store::session::{ProblemKind, Session};
use condense_store::spill::trusted_spill_path;
use condense_store::time::parse_iso;

use super::Sim;

/// What the file says, read as a restart would.
pub(super) struct FileView {
    pub(super) session: Session,
    pub(super) messages: Vec<Message>,
    pub(super) entry_ts: Vec<Option<i64>>,
    pub(super) state: Branch,
}

impl Sim {
    pub(super) fn read_file(&self) -> Result<FileView, String> {
        let session = Session::open(&self.path).map_err(|e| format!("open: {e}"))?;
        // Guarantee 4: at most a torn last line (and the fragments of
        // earlier crashes, now malformed middle lines).
        let last_line = session
            .problems
            .iter()
            .map(|p| p.line)
            .chain(session.entries.iter().map(|e| e.line))
            .max()
            .unwrap_or(0);
        for p in &session.problems {
            let ok = match p.kind {
                ProblemKind::TornLastLine => {
                    p.line == last_line && self.torn_lines.contains(&p.line)
                }
                ProblemKind::Malformed => self.torn_lines.contains(&p.line),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "guarantee 4: the reader reports {p} ({:?})",
                    p.kind
                ));
            }
        }
        let branch = session.branch(None);
        let ctx = build_context(&branch);
        let entry_ts = ctx
            .entry_ids
            .iter()
            .map(|id| session.entry(id).and_then(|e| parse_iso(&e.timestamp)))
            .collect();
        let (state, problems) = replay_branch(&branch);
        if !problems.is_empty() {
            return Err(format!("guarantee 4: replay problems {problems:?}"));
        }
        let messages = ctx.messages;
        drop(branch);
        Ok(FileView {
            session,
            messages,
            entry_ts,
            state,
        })
    }

    /// A clean reload (pi restarted, nothing lost): re-open and replay.
    pub fn reload(&mut self) -> Result<(), String> {
        self.replace_live()
    }

    /// A compact dump of the file's branch, state and render (for debugging).
    pub fn describe(&self) -> String {
        let Ok(file) = self.read_file() else {
            return "\n(file unreadable)".into();
        };
        let mut out = format!("\nconfig: {:?}\nbranch:\n", self.config);
        let brief = |m: &Message| {
            let sk = m.skeleton();
            let calls: Vec<&str> = sk.tool_calls.iter().map(|c| c.id.as_str()).collect();
            format!(
                "{:<12} ts={:?} id={:?} name={:?} calls={calls:?} size={}{}",
                m.role().map_or("?", |r| r.as_str()),
                sk.timestamp,
                sk.tool_call_id,
                sk.tool_name,
                m.size(),
                if sk.is_synthetic_chain {
                    " synthetic"
                } else {
                    ""
                }
            )
        };
        for (i, m) in file.messages.iter().enumerate() {
            out.push_str(&format!("  [{i}] {}\n", brief(m)));
        }
        out.push_str("chains:\n");
        for c in file.state.chains() {
            out.push_str(&format!("  {c:?}\n"));
        }
        out.push_str("records:\n");
        for r in file.state.records() {
            out.push_str(&format!(
                "  {} {} spill={:?} turn={}\n",
                r.key(),
                r.tool_name,
                r.spill_path,
                r.turn_index
            ));
        }
        let r = render(&file.messages, &file.state, &self.settings());
        out.push_str(&format!("diagnostics: {:?}\nrender:\n", r.diagnostics));
        for (i, m) in r.messages(&file.messages).iter().enumerate() {
            out.push_str(&format!("  [{i}] {}\n", brief(m)));
        }
        out
    }

    /// Re-open and replay after a crash: the live view becomes what the file says.
    pub fn restart(&mut self) -> Result<(), String> {
        self.tally.restarts += 1;
        self.replace_live()
    }

    fn replace_live(&mut self) -> Result<(), String> {
        self.app = None;
        let file = self.read_file()?;
        self.check_blobs(&file.state)?;
        self.messages = file.messages;
        self.entry_ts = file.entry_ts;
        self.state = file.state;
        // Whether a task is open: the last user prompt after the last reply.
        self.open_task = self
            .messages
            .iter()
            .rev()
            .find(|m| m.is(&Role::User) || m.is_text_only_assistant())
            .is_some_and(|m| m.is(&Role::User));
        Ok(())
    }

    pub(super) fn check_blobs(&self, state: &Branch) -> Result<(), String> {
        for r in state.records() {
            let Some(path) = &r.spill_path else { continue };
            if trusted_spill_path(&self.blobs, r).is_none() {
                return Err(format!(
                    "guarantee 4: record {} points at spill file {path}, which is missing",
                    r.key()
                ));
            }
        }
        Ok(())
    }
}
