//! The fallback state machine on its own, with a manual clock
//! (pi-condense's summarizer-fallback area).

use std::sync::Arc;
use std::time::Duration;

use condense_core::ModelRef;
use condense_summarizer::{
    FallbackController, ManualClock, Route, TargetChoice, Transition, PROBE_COOLDOWN,
};

const PRIMARY: TargetChoice = TargetChoice {
    route: Route::Primary,
    probe: false,
};
const PROBE: TargetChoice = TargetChoice {
    route: Route::Primary,
    probe: true,
};
const FALLBACK: TargetChoice = TargetChoice {
    route: Route::Fallback,
    probe: false,
};

fn controller_at(t: Duration) -> (Arc<ManualClock>, FallbackController) {
    let clock = Arc::new(ManualClock::at(t));
    (clock.clone(), FallbackController::new(clock))
}

fn controller() -> FallbackController {
    controller_at(Duration::ZERO).1
}

#[test]
fn distinct_fallback_needs_two_different_models() {
    let haiku = ModelRef::new("anthropic", "claude-haiku").named("Haiku");
    let sonnet = ModelRef::new("anthropic", "claude-sonnet").named("Sonnet");
    let cases: &[(Option<&ModelRef>, Option<&ModelRef>, bool)] = &[
        (Some(&haiku), Some(&haiku), false),
        (None, Some(&sonnet), false),
        (Some(&haiku), None, false),
        (Some(&haiku), Some(&sonnet), true),
    ];
    for (p, s, distinct) in cases {
        assert_eq!(ModelRef::is_distinct(*p, *s), *distinct, "{p:?} {s:?}");
    }
    let a = ModelRef::new("a", "m");
    let b = ModelRef::new("b", "m");
    assert!(
        ModelRef::is_distinct(Some(&a), Some(&b)),
        "same id, other provider"
    );
}

#[test]
fn targets_primary_when_not_in_fallback() {
    let c = controller();
    assert_eq!(c.choose_target(), PRIMARY);
    assert_eq!(c.choose_target(), PRIMARY);
}

#[test]
fn targets_fallback_while_in_fallback_before_cooldown() {
    let (clock, c) = controller_at(Duration::from_secs(1_000));
    c.on_primary_fail_fallback_ok(false);
    assert!(c.in_fallback());
    clock.advance(PROBE_COOLDOWN - Duration::from_millis(1));
    assert_eq!(c.choose_target(), FALLBACK);
}

#[test]
fn exactly_one_probe_per_cooldown() {
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_primary_fail_fallback_ok(false);
    clock.set(PROBE_COOLDOWN);
    assert_eq!(c.choose_target(), PROBE);
    // Siblings of the same flush see the claimed probe.
    assert_eq!(c.choose_target(), FALLBACK);
    assert_eq!(c.choose_target(), FALLBACK);
    // The next cooldown brings the next probe.
    clock.advance(PROBE_COOLDOWN);
    assert_eq!(c.choose_target(), PROBE);
}

#[test]
fn first_rescued_failure_enters_and_the_rest_are_silent() {
    let c = controller();
    assert_eq!(c.on_primary_fail_fallback_ok(false), Transition::Enter);
    assert!(c.in_fallback());
    assert_eq!(c.on_primary_fail_fallback_ok(false), Transition::None);
    assert_eq!(c.on_primary_fail_fallback_ok(false), Transition::None);
}

#[test]
fn probe_success_recovers_and_clears_state() {
    let c = controller();
    c.on_primary_fail_fallback_ok(false);
    assert_eq!(c.on_primary_success(true), Transition::Recover);
    assert!(!c.in_fallback());
    assert_eq!(c.choose_target(), PRIMARY);
}

#[test]
fn non_probe_primary_success_changes_nothing() {
    let c = controller();
    assert_eq!(c.on_primary_success(false), Transition::None);
    assert!(!c.in_fallback());
    // Even in fallback, only the probe recovers.
    c.on_primary_fail_fallback_ok(false);
    assert_eq!(c.on_primary_success(false), Transition::None);
    assert!(c.in_fallback());
}

#[test]
fn rescued_probe_failure_stays_in_fallback_silently() {
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_primary_fail_fallback_ok(false);
    clock.set(PROBE_COOLDOWN);
    assert!(c.choose_target().probe);
    clock.advance(Duration::from_millis(5));
    assert_eq!(c.on_primary_fail_fallback_ok(true), Transition::None);
    assert!(c.in_fallback());
}

#[test]
fn both_down_owes_the_enter_notice_to_the_first_fallback_success() {
    let c = controller();
    c.on_both_down();
    assert!(c.in_fallback());
    assert_eq!(c.on_fallback_success(), Transition::Enter);
    assert_eq!(c.on_fallback_success(), Transition::None);
}

#[test]
fn both_down_while_in_fallback_owes_nothing() {
    let c = controller();
    c.on_primary_fail_fallback_ok(false);
    c.on_both_down();
    assert_eq!(c.on_fallback_success(), Transition::None);
}

#[test]
fn owed_notice_is_paid_by_a_rescued_primary_failure_too() {
    let c = controller();
    c.on_both_down();
    assert_eq!(c.on_primary_fail_fallback_ok(false), Transition::Enter);
    assert_eq!(c.on_fallback_success(), Transition::None);
}

#[test]
fn recovery_clears_an_owed_notice() {
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_both_down();
    clock.set(PROBE_COOLDOWN);
    assert_eq!(c.choose_target(), PROBE);
    assert_eq!(c.on_primary_success(true), Transition::Recover);
    assert!(!c.in_fallback());
    assert_eq!(c.on_fallback_success(), Transition::None);
}

#[test]
fn an_unusable_probe_does_not_recover() {
    // An unusable answer reports nothing to the controller: the claimed
    // probe simply passes and the session stays in fallback.
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_primary_fail_fallback_ok(false);
    clock.set(PROBE_COOLDOWN);
    assert!(c.choose_target().probe);
    assert!(c.in_fallback());
    assert_eq!(c.choose_target(), FALLBACK);
}

#[test]
fn fallback_only_failures_do_not_starve_the_probe() {
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_primary_fail_fallback_ok(false);
    // The session model keeps failing every minute...
    for _ in 0..9 {
        clock.advance(Duration::from_secs(60));
        assert_eq!(c.choose_target(), FALLBACK);
        c.on_fallback_only_fail();
    }
    // ...and the probe still comes due ten minutes after entering.
    clock.advance(Duration::from_secs(60));
    assert_eq!(c.choose_target(), PROBE);
}

#[test]
fn both_down_restarts_the_cooldown() {
    let (clock, c) = controller_at(Duration::ZERO);
    c.on_primary_fail_fallback_ok(false);
    clock.set(PROBE_COOLDOWN);
    assert!(c.choose_target().probe);
    clock.advance(Duration::from_secs(30));
    c.on_both_down();
    clock.advance(PROBE_COOLDOWN - Duration::from_secs(1));
    assert_eq!(c.choose_target(), FALLBACK);
    clock.advance(Duration::from_secs(1));
    assert_eq!(c.choose_target(), PROBE);
}

#[test]
fn reset_clears_everything() {
    let c = controller_at(Duration::from_millis(5)).1;
    c.on_both_down();
    c.reset();
    assert!(!c.in_fallback());
    assert_eq!(c.on_fallback_success(), Transition::None);
    assert_eq!(c.choose_target(), PRIMARY);
}
