//! Flushes as the sidecar runs them, with the scripted summarizer's and
//! range fusion's failures, spill-write failures and crashes part-way
//! through writing the entries (guarantees 4 and 5 are checked here).

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use condense_core::capture_pending;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::{apply_chains, plan_chains, FusionJob};
use condense_core::{
    apply_flush, plan_flush, FlushEffect, FlushOutcome, JobResult, SummaryJob, Usage, WrittenSpill,
};
use condense_store::append::{custom_entry_line, Appender, EntryBase, LockMode};
use condense_store::effects::{entry_for, NewEntry};
use condense_store::replay::replay_branch;
use condense_store::session::Session;
use condense_store::spill::write_blob;
use serde_json::{json, Value};

use super::compare::{facet_difference, facets};
use super::{Crash, Sim};

impl Sim {
    /// The scripted summarizer, with its failure modes.
    fn summarize(&mut self, job: &SummaryJob) -> JobResult {
        let usage = Usage {
            input_tokens: 100 + job.batch.raw_chars() as u64 / 4,
            output_tokens: 20,
            cost: 0.001,
        };
        if self.fault(5) {
            self.tally.fault("summary-failed");
            let message = if self.rng.chance(50) {
                "summarizer timed out after 20s"
            } else {
                "429 rate limited"
            };
            return JobResult::Failed {
                message: message.into(),
                usage: self.rng.chance(50).then_some(usage),
            };
        }
        if self.fault(4) {
            self.tally.fault("summary-unusable");
            return JobResult::Unusable {
                usage: self.rng.chance(50).then_some(usage),
            };
        }
        if self.fault(3) {
            self.tally.fault("summary-not-run");
            return JobResult::NotRun;
        }
        let text = if self.fault(4) {
            self.tally.fault("summary-oversized");
            "x".repeat(job.batch.raw_chars() + 50)
        } else {
            job.batch
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    format!(
                        "- [[{}:{}]] {} chars",
                        i + 1,
                        c.tool_name,
                        c.result_text.to_str().len()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        JobResult::Summary { text, usage }
    }

    fn fuse(&mut self, job: &FusionJob) -> JobResult {
        if self.fault(8) {
            self.tally.fault("fusion-failed");
            return match self.rng.below(3) {
                0 => JobResult::Failed {
                    message: "timeout".into(),
                    usage: None,
                },
                1 => JobResult::Unusable { usage: None },
                _ => JobResult::Summary {
                    text: "  ".into(),
                    usage: Usage::default(),
                },
            };
        }
        JobResult::Summary {
            text: format!("- fused {} summaries", job.summaries.len()),
            usage: Usage {
                input_tokens: 50,
                output_tokens: 10,
                cost: 0.0005,
            },
        }
    }

    /// One flush: capture, plan, summarize, apply, chains, entries.
    /// Returns true when the process "died" during it.
    pub(super) fn flush(
        &mut self,
        trigger: &str,
        closing: Option<&Message>,
    ) -> Result<bool, String> {
        self.tally.flushes += 1;
        let now = self.tick(2, 50);
        let batches = capture_pending(
            &self.messages,
            &self.entry_ts,
            0,
            &self.state,
            &self.protection,
            self.config.batching_mode,
            now,
        );
        let captured = batches.len();
        let plan = plan_flush(batches, &self.state, &self.config);
        let empty = plan.is_empty();
        let results: Vec<JobResult> = plan.jobs.iter().map(|j| self.summarize(j)).collect();
        let r = apply_flush(plan, results, &mut self.state, &self.config);
        self.tally.summarized_calls += r.summarized_calls as u64;
        let restored: Vec<OccurrenceKey> = r
            .restored
            .iter()
            .flat_map(|b| b.calls.iter().map(|c| c.key()))
            .collect();
        let mut effects = r.effects.clone();
        if self.config.chain_compression.enabled && !empty {
            let cplan = plan_chains(
                &self.messages,
                closing,
                &self.state,
                &self.config,
                &self.protection,
                self.config.chain_compression.rolling_window,
            );
            let wanted = cplan.spills(&self.config);
            let broken = !wanted.is_empty() && self.fault(10);
            let guard = broken.then(|| {
                self.tally.fault("chain-spill-failed");
                BrokenBlobDir::new(&self.blobs)
            });
            let mut spills: Vec<(usize, usize, WrittenSpill)> = Vec::new();
            for (w, i, rec) in wanted {
                if let Ok(b) = write_blob(&self.blobs, &rec.key(), &rec.result_text.to_str()) {
                    spills.push((w, i, b.to_spill(i)));
                }
            }
            drop(guard);
            self.tally.spills += spills.len() as u64;
            let fusion: Vec<JobResult> = cplan.fusion_jobs.iter().map(|j| self.fuse(j)).collect();
            let at = self.tick(1, 20);
            let cr = apply_chains(cplan, fusion, &spills, &mut self.state, &self.config, at);
            self.tally.chains += cr.compressed.len() as u64;
            effects.extend(cr.effects);
        }
        self.tally.dedup_aliases += effects
            .iter()
            .filter(|e| matches!(e, FlushEffect::DedupAlias { .. }))
            .count() as u64;
        let outcome = match &r.outcome {
            FlushOutcome::Empty => "empty".to_owned(),
            FlushOutcome::Processed(o) => o.as_str().to_owned(),
            FlushOutcome::SummarizerFailed(_) => "error".to_owned(),
        };
        let metrics = json!({"ts": now, "trigger": trigger, "capturedBatches": captured,
            "processedBatches": r.processed_batches, "outcome": outcome,
            "metrics": {"openCycleThinkingTokens": 0, "largestChainSharePct": 0, "frontierGapTokens": 0}});
        let n = effects.len() + 1;
        let crash = match self.forced_crash.take() {
            Some(c) => Some(c),
            None if !self.no_random_crash && self.fault(10) => {
                let k = self.rng.below(n as u64 + 1) as usize;
                if k < n && self.rng.chance(50) {
                    self.tally.fault("crash-torn-entry");
                    Some(Crash::Torn(k))
                } else {
                    self.tally.fault("crash-between-entries");
                    Some(Crash::After(k))
                }
            }
            None => None,
        };
        if let Some(c) = crash {
            self.log(format!("  flush ({trigger}) of {n} entries crashes: {c:?}"));
        }
        let crashed = self.write_effects(&effects, Some(metrics), now, crash)?;
        if crashed {
            return Ok(true);
        }
        // Guarantee 5: a failed job's batches stay unpruned and pending.
        if !restored.is_empty() {
            let pending: HashSet<OccurrenceKey> = capture_pending(
                &self.messages,
                &self.entry_ts,
                0,
                &self.state,
                &self.protection,
                self.config.batching_mode,
                now,
            )
            .iter()
            .flat_map(|b| b.calls.iter().map(|c| c.key()))
            .collect();
            for k in &restored {
                if self.state.is_summarized(&k.id, k.result_timestamp) {
                    continue; // deduplicated against an indexed output
                }
                if !pending.contains(k) {
                    return Err(format!(
                        "guarantee 5: {k} went back to pending after a summarizer failure but the next capture does not retry it"
                    ));
                }
            }
        }
        Ok(false)
    }

    /// Appends a flush's entries in order (plus the metrics entry), the
    /// summaries joining the live messages as pi adds them. With a crash,
    /// stops where it says. Returns true when it crashed.
    pub(super) fn write_effects(
        &mut self,
        effects: &[FlushEffect],
        metrics: Option<Value>,
        now: i64,
        crash: Option<Crash>,
    ) -> Result<bool, String> {
        let mut entries: Vec<NewEntry> = effects.iter().map(entry_for).collect();
        if let Some(m) = metrics {
            entries.push(NewEntry::Custom {
                custom_type: "context-prune-flush-metrics",
                data: m,
            });
        }
        let snapshot = match crash {
            Some(_) => Some(std::fs::read(&self.path).map_err(|e| e.to_string())?),
            None => None,
        };
        let mut app = self.appender()?;
        for (i, e) in entries.iter().enumerate() {
            match crash {
                Some(Crash::After(k)) if k == i => {
                    drop(app);
                    self.check_crash_state(snapshot.as_deref(), &entries[..k])?;
                    return Ok(true);
                }
                Some(Crash::Torn(k)) if k == i => {
                    let base = EntryBase {
                        id: "0badf00d",
                        parent_id: app.leaf_id(),
                        timestamp: "2026-01-01T00:00:00.000Z",
                    };
                    let line = match e {
                        NewEntry::Custom { custom_type, data } => {
                            custom_entry_line(custom_type, data, &base)
                        }
                        NewEntry::CustomMessage {
                            custom_type,
                            content,
                            display,
                            details,
                        } => condense_store::append::custom_message_entry_line(
                            custom_type,
                            content,
                            *display,
                            details,
                            &base,
                        ),
                    }
                    .map_err(|e| e.to_string())?;
                    drop(app);
                    self.write_torn(&line)?;
                    self.check_crash_state(snapshot.as_deref(), &entries[..k])?;
                    return Ok(true);
                }
                _ => {}
            }
            match e {
                NewEntry::Custom { custom_type, data } => {
                    app.append_custom(custom_type, data, now)
                        .map_err(|e| format!("append {custom_type}: {e}"))?;
                }
                NewEntry::CustomMessage {
                    custom_type,
                    content,
                    display,
                    details,
                } => {
                    app.append_custom_message(custom_type, content, *display, details, now)
                        .map_err(|e| format!("append {custom_type}: {e}"))?;
                    let m = Message::from_value(&json!({"role": "custom", "customType": custom_type,
                        "content": content, "display": display, "details": details, "timestamp": now}))
                    .expect("summary message");
                    self.messages.push(m);
                    self.entry_ts.push(Some(now));
                }
            }
        }
        let crashed = matches!(crash, Some(Crash::After(k)) if k >= entries.len());
        if crashed {
            drop(app);
            self.check_crash_state(snapshot.as_deref(), &entries)?;
        } else {
            self.app = Some(app);
        }
        Ok(crashed)
    }

    /// Guarantee 4 after a crash: the file replays to exactly the state of
    /// the session before the flush plus the entries written whole (the same
    /// entries appended to a copy without a crash).
    fn check_crash_state(
        &mut self,
        before: Option<&[u8]>,
        written: &[NewEntry],
    ) -> Result<(), String> {
        let Some(before) = before else {
            return Ok(());
        };
        let expected_path = self.dir.path().join("expected.jsonl");
        std::fs::write(&expected_path, before).map_err(|e| e.to_string())?;
        {
            let mut app =
                Appender::open(&expected_path, LockMode::Try).map_err(|e| e.to_string())?;
            for e in written {
                match e {
                    NewEntry::Custom { custom_type, data } => {
                        app.append_custom(custom_type, data, 0)
                            .map_err(|e| e.to_string())?;
                    }
                    NewEntry::CustomMessage {
                        custom_type,
                        content,
                        display,
                        details,
                    } => {
                        app.append_custom_message(custom_type, content, *display, details, 0)
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
        }
        let expected = Session::open(&expected_path).map_err(|e| e.to_string())?;
        let (expected, _) = replay_branch(&expected.branch(None));
        let crashed = self.read_file()?;
        std::fs::remove_file(&expected_path).map_err(|e| e.to_string())?;
        if let Some(d) = facet_difference(&facets(&expected, true), &facets(&crashed.state, true)) {
            return Err(format!(
                "guarantee 4: after a crash with {} entries written the file replays to another state {d}",
                written.len()
            ));
        }
        Ok(())
    }

    /// Appends the first half of `line` (no newline): a torn last line.
    pub(super) fn write_torn(&mut self, line: &str) -> Result<(), String> {
        self.app = None;
        let mut cut = 1 + self.rng.below(line.len().saturating_sub(1).max(1) as u64) as usize;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| e.to_string())?;
        let text = std::fs::read(&self.path).map_err(|e| e.to_string())?;
        // A torn line right after another torn line glues onto it.
        let mut bytes = Vec::new();
        if text.last() != Some(&b'\n') {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&line.as_bytes()[..cut.max(1)]);
        f.write_all(&bytes).map_err(|e| e.to_string())?;
        let lines = text.split(|b| *b == b'\n').count() + usize::from(text.last() != Some(&b'\n'));
        // The fragment is the file's last line; once something is appended
        // after it, it reads as a malformed middle line.
        self.torn_lines.insert(lines);
        Ok(())
    }
}

/// Replaces the blob directory by a plain file while it lives, so every
/// spill write fails; puts the directory back when dropped.
pub(super) struct BrokenBlobDir {
    blobs: PathBuf,
    aside: PathBuf,
    moved: bool,
}

impl BrokenBlobDir {
    pub(super) fn new(blobs: &Path) -> BrokenBlobDir {
        let aside = blobs.with_extension("aside");
        let moved = blobs.exists();
        if moved {
            std::fs::rename(blobs, &aside).expect("move the blob dir aside");
        }
        std::fs::write(blobs, "not a directory").expect("a file where the blob dir was");
        BrokenBlobDir {
            blobs: blobs.to_path_buf(),
            aside,
            moved,
        }
    }
}

impl Drop for BrokenBlobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.blobs);
        if self.moved {
            std::fs::rename(&self.aside, &self.blobs).expect("restore the blob dir");
        }
    }
}
