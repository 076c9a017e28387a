//! The sticky summarizer-outage fallback.
//!
//! Provider outages are often per model: a cheap summarizer model can be
//! down while the session's own model works. When a distinct summarizer
//! model is configured, [`FallbackController`] decides which model each call
//! goes to:
//!
//! - Normally every call goes to the summarizer model (the *primary*).
//! - A transient failure of the primary is retried once on the session model
//!   (the *fallback*). If the retry works, the session enters fallback and
//!   the user is told once ([`Transition::Enter`]). If both fail, it enters
//!   fallback silently and owes that notice to the first fallback success.
//! - In fallback every call goes to the session model, except one *probe* of
//!   the primary per [`PROBE_COOLDOWN`]. The probe is claimed synchronously
//!   in [`choose_target`](FallbackController::choose_target), so among calls
//!   made at once only one probes. A successful probe leaves fallback
//!   ([`Transition::Recover`]); a failed one stays.
//! - Failures of the session model while in fallback do not move the probe
//!   clock (pi-condense 2.2.1 fixed probes starving that way).
//! - Auth failures, unusable summaries and aborts never change the state.
//!
//! State is in memory only: nothing is persisted, and the host calls
//! [`reset`](FallbackController::reset) when a session starts. Time comes
//! from an injected [`Clock`], so tests drive the cooldown with a
//! [`ManualClock`] or tokio's paused time ([`TokioClock`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Time between probes of a failing summarizer model. Deliberately not
/// configurable.
pub const PROBE_COOLDOWN: Duration = Duration::from_secs(10 * 60);

/// A monotonic clock.
pub trait Clock: Send + Sync {
    /// Time elapsed since an arbitrary fixed origin; never decreases.
    fn now(&self) -> Duration;
}

/// The tokio clock: real time, or test time under `tokio::time::pause`.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.origin)
    }
}

/// A clock that only moves when told to (for synchronous tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    millis: AtomicU64,
}

impl ManualClock {
    /// A clock at `t`.
    pub fn at(t: Duration) -> ManualClock {
        ManualClock {
            millis: AtomicU64::new(t.as_millis() as u64),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.millis
            .fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Sets the clock to `t` (callers keep it monotonic).
    pub fn set(&self, t: Duration) {
        self.millis.store(t.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.millis.load(Ordering::SeqCst))
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
}

/// Which model a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The configured summarizer model.
    Primary,
    /// The session's model.
    Fallback,
}

/// The controller's answer to "where does this call go?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetChoice {
    /// The model to call.
    pub route: Route,
    /// Whether this call is the cooldown's probe of the primary.
    pub probe: bool,
}

/// A change the user should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Nothing to report.
    None,
    /// Calls now go to the session model (warn once).
    Enter,
    /// The summarizer model works again (inform once).
    Recover,
}

#[derive(Debug, Default)]
struct State {
    in_fallback: bool,
    last_probe: Option<Duration>,
    owed_enter_notice: bool,
}

/// The session-scoped fallback state machine. Share it (`Arc`) across the
/// flushes of one session; every method takes `&self`.
pub struct FallbackController {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl std::fmt::Debug for FallbackController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackController")
            .field("state", &*self.lock())
            .finish()
    }
}

impl Default for FallbackController {
    fn default() -> Self {
        FallbackController::new(Arc::new(TokioClock::new()))
    }
}

impl FallbackController {
    /// A controller reading time from `clock`, not in fallback.
    pub fn new(clock: Arc<dyn Clock>) -> FallbackController {
        FallbackController {
            clock,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets everything (a session started).
    pub fn reset(&self) {
        *self.lock() = State::default();
    }

    /// Whether calls currently go to the session model.
    pub fn in_fallback(&self) -> bool {
        self.lock().in_fallback
    }

    /// Picks the model for the next call. While in fallback, the first
    /// caller after the cooldown claims the probe (and restarts the
    /// cooldown) before returning, so concurrent callers route to the
    /// fallback.
    pub fn choose_target(&self) -> TargetChoice {
        let now = self.clock.now();
        let mut s = self.lock();
        if !s.in_fallback {
            return TargetChoice {
                route: Route::Primary,
                probe: false,
            };
        }
        let due = match s.last_probe {
            None => true,
            Some(last) => now.saturating_sub(last) >= PROBE_COOLDOWN,
        };
        if due {
            s.last_probe = Some(now);
            TargetChoice {
                route: Route::Primary,
                probe: true,
            }
        } else {
            TargetChoice {
                route: Route::Fallback,
                probe: false,
            }
        }
    }

    /// The primary (first call or probe) failed transiently and the retry
    /// on the session model worked. [`Transition::Enter`] when this puts the
    /// session into fallback or pays an owed notice.
    pub fn on_primary_fail_fallback_ok(&self, _probe: bool) -> Transition {
        let now = self.clock.now();
        let mut s = self.lock();
        s.last_probe = Some(now);
        if s.owed_enter_notice || !s.in_fallback {
            s.owed_enter_notice = false;
            s.in_fallback = true;
            return Transition::Enter;
        }
        Transition::None
    }

    /// The primary and the retry on the session model both failed
    /// transiently. Enters fallback silently, owing the notice.
    pub fn on_both_down(&self) {
        let now = self.clock.now();
        let mut s = self.lock();
        s.last_probe = Some(now);
        if !s.in_fallback {
            s.in_fallback = true;
            s.owed_enter_notice = true;
        }
    }

    /// A call routed to the session model while in fallback failed
    /// transiently. Changes nothing: in particular the probe clock keeps
    /// running.
    pub fn on_fallback_only_fail(&self) {}

    /// A primary call succeeded. Leaves fallback only if it was the probe.
    pub fn on_primary_success(&self, probe: bool) -> Transition {
        let mut s = self.lock();
        if probe && s.in_fallback {
            s.in_fallback = false;
            s.owed_enter_notice = false;
            return Transition::Recover;
        }
        Transition::None
    }

    /// A call routed to the session model succeeded. Pays an owed enter
    /// notice.
    pub fn on_fallback_success(&self) -> Transition {
        let mut s = self.lock();
        if s.owed_enter_notice {
            s.owed_enter_notice = false;
            return Transition::Enter;
        }
        Transition::None
    }
}
