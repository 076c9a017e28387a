//! Where the session's learned misses are kept ([`crate::learned_misses`]):
//! read from the misses directory at start, written back as the host
//! reports usage.

use std::path::PathBuf;

use condense_core::{MissModel, MissRates, PlannedMisses};
use condense_store::misses::{read_history, write_session_misses, ProviderMisses};

use super::Engine;
use crate::learned_misses::LearnedMisses;
use crate::protocol::{Effect, Effects};

/// Where a session's counts go, and what became of the last write.
#[derive(Debug, Default)]
pub(super) struct MissesFile {
    /// The misses directory and the session's id; `None`: kept in memory.
    at: Option<(PathBuf, String)>,
    /// The session the counts in memory are this one's.
    session_id: Option<String>,
    /// A prior the caller gave ([`Engine::plan_with_miss_prior`]): the
    /// disk is neither read nor written.
    pinned: bool,
    /// A write failed and was reported; later failures are not.
    failed: bool,
    /// Usage reports since the last write.
    unsaved: u32,
    /// When the counts were last written (the host's clock, ms).
    saved_at: Option<i64>,
}

/// The counts are written at the first report, then once this many reports
/// or [`SAVE_AFTER_MS`] have passed, at shutdown and when the process turns
/// to another session: a write a call would cost a host that waits for
/// `turn.end` (OpenCode) a tenth of a millisecond, and a crash then loses
/// at most these few calls of a prior.
const SAVE_EVERY_REPORTS: u32 = 16;
const SAVE_AFTER_MS: i64 = 60_000;

impl Engine {
    /// Plans with `prior` as the other sessions' misses and keeps this
    /// session's in memory only (the simulator, which replays a corpus in
    /// order and gives each session what came before it).
    pub fn plan_with_miss_prior(&mut self, prior: ProviderMisses) {
        self.misses_file.pinned = true;
        self.misses_file.at = None;
        *self.calls.misses() = LearnedMisses::new(ProviderMisses::new(), prior);
    }

    /// A new engine for the same session takes over `from`'s misses when
    /// they were pinned ([`Engine::plan_with_miss_prior`]): what the disk
    /// would have given it back.
    pub fn carry_pinned_misses(&mut self, from: &mut Engine) {
        if from.misses_file.pinned {
            self.misses_file.pinned = true;
            self.misses_file.session_id = from.misses_file.session_id.clone();
            *self.calls.misses() = from.calls.misses().clone();
        }
    }

    /// The miss model the policy plans the next call with
    /// (`economy.missRates`), for the provider of the latest call.
    pub fn planned_miss_rates(&self) -> Option<MissRates> {
        self.calls.miss_rates(&self.config)
    }

    /// The miss model as `/pruner status` shows it.
    pub(super) fn planned_misses(&self) -> PlannedMisses {
        match self.config.economy.miss_model {
            MissModel::Ttl => PlannedMisses::Ttl,
            MissModel::Rates(r) => PlannedMisses::Set(r),
            MissModel::Learned => {
                let (here, before) = self.calls.misses_ref().counted();
                PlannedMisses::Learned {
                    here,
                    before,
                    rates: self.planned_miss_rates(),
                }
            }
        }
    }

    /// What this session counted of its provider's misses so far.
    pub fn miss_counts(&self) -> ProviderMisses {
        self.calls.misses_ref().own().clone()
    }

    /// `start` of session `session_id`: under a learned miss model, its
    /// own counts and the others' from the misses directory `dir`; without
    /// one, the counts in memory, another session's becoming the prior.
    pub(super) fn start_misses(
        &mut self,
        session_id: &str,
        dir: Option<PathBuf>,
        out: &mut Effects,
    ) {
        let same_session = self.misses_file.session_id.as_deref() == Some(session_id);
        // What the session before counted since its last write goes to its
        // own file first.
        self.save_misses(None, out);
        self.misses_file.session_id = Some(session_id.to_owned());
        self.misses_file.failed = false;
        self.misses_file.unsaved = 0;
        self.misses_file.saved_at = None;
        let learning = self.config.economy.miss_model == MissModel::Learned;
        let dir = dir.filter(|_| learning && !self.misses_file.pinned);
        let Some(dir) = dir else {
            self.misses_file.at = None;
            if !same_session {
                let seen = std::mem::take(self.calls.misses());
                *self.calls.misses() = seen.into_prior();
            }
            return;
        };
        let history = read_history(&dir, session_id);
        if let Some(first) = history.skipped.first() {
            out.push(Effect::warning(format!(
                "condense: {} of the misses files {} left out of the miss model: {first}",
                history.skipped.len(),
                if history.skipped.len() == 1 {
                    "is"
                } else {
                    "are"
                }
            )));
        }
        *self.calls.misses() = LearnedMisses::new(history.own, history.others);
        self.misses_file.at = Some((dir, session_id.to_owned()));
    }

    /// A usage report at `now_ms` changed the counts: they are written when
    /// due ([`SAVE_EVERY_REPORTS`]).
    pub(super) fn misses_reported(&mut self, now_ms: i64, out: &mut Effects) {
        if !self.calls.misses_ref().changed() {
            return;
        }
        let f = &mut self.misses_file;
        f.unsaved = f.unsaved.saturating_add(1);
        let due = f.unsaved >= SAVE_EVERY_REPORTS
            || f.saved_at
                .is_none_or(|at| now_ms.saturating_sub(at) >= SAVE_AFTER_MS);
        if due {
            self.save_misses(Some(now_ms), out);
        }
    }

    /// Writes the session's counts if they changed since the last write
    /// (shutdown, another session, or a report when due).
    pub fn save_misses(&mut self, now_ms: Option<i64>, out: &mut Effects) {
        let Some((dir, id)) = &self.misses_file.at else {
            return;
        };
        let Some(own) = self.calls.misses().take_changed() else {
            return;
        };
        self.misses_file.unsaved = 0;
        if let Some(now) = now_ms {
            self.misses_file.saved_at = Some(now);
        }
        if let Err(e) = write_session_misses(dir, id, own) {
            if !std::mem::replace(&mut self.misses_file.failed, true) {
                out.push(Effect::warning(format!(
                    "condense: the miss model's counts are not saved ({e}); this session \
                     still learns them"
                )));
            }
        }
    }
}

impl Drop for Engine {
    /// Whatever ends a session writes the misses it counted since the last
    /// write: the sidecar's input closing without `shutdown` (the host
    /// quit), a proxy conversation closed (the proxy stopping, or making
    /// room). A failure here has no one left to tell.
    fn drop(&mut self) {
        self.save_misses(None, &mut Effects::new());
    }
}
