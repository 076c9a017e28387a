//! A sidecar restarted mid-session: a new engine started from the session
//! file the run has left so far, as after a crash or a resume.

use super::written::branch_with_written;
use super::Driver;
use crate::session::{EngineLock, StartParams};
use crate::Engine;

impl Driver {
    /// Replaces the engine with one started from the session file the live
    /// run has left so far (the entries fed, with [`Driver::written`] in
    /// their places), as a host starts the sidecar's session again after a
    /// crash or a resume. The turn fed last is closed first (its
    /// `turn_end` reached the old engine), and pi's list becomes the
    /// context it rebuilds from that file, summaries in their places.
    pub fn restart(&mut self) {
        self.close_turn();
        let branch = branch_with_written(&self.fed, &self.written);
        let settings = self.engine.engine().settings().clone();
        let mut engine = Engine::default();
        engine.carry_pinned_misses(&mut self.engine.engine());
        // Its effects are the footer and the boot widget: nothing written.
        engine.start(StartParams {
            settings,
            session_id: super::SESSION_ID.to_owned(),
            session_dir: self.session_dir.clone(),
            misses_dir: None,
            session_file: None,
            branch,
            tree: false,
        });
        *self.engine.engine() = engine;
        self.rebuild_pi_list(0);
    }
}
