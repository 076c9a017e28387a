//! The summarizer around its providers: fallback, timeouts, classification
//! and notices, with scripted and mocked providers under paused time
//! (pi-condense's summarizer-wiring area and more).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use condense_core::{JobResult, Usage};
use condense_core::{Notice, NoticeLevel, ThinkingLevel};
use condense_summarizer::{
    CancelToken, Completion, FailureKind, FallbackController, JobOutcome, ProviderError,
    StopReason, Summarizer, SummarizerSettings, Target, Timeouts, TokioClock,
};
use support::{reply, small_batch, transient, Behavior, FakeProvider, MockProvider, USAGE};
use tokio::time::Instant;

const PRIMARY: (&str, &str, &str) = ("provider-a", "primary-model", "Primary");
const SESSION: (&str, &str, &str) = ("provider-b", "session-model", "Session");

fn settings(timeouts: Timeouts) -> SummarizerSettings {
    SummarizerSettings {
        timeouts,
        ..SummarizerSettings::default()
    }
}

fn target(p: &Arc<FakeProvider>, (provider, id, name): (&str, &str, &str)) -> Target {
    p.target(provider, id, name)
}

fn mock_target(mock: MockProvider, (provider, id, name): (&str, &str, &str)) -> Target {
    Target::new(
        Arc::new(mock),
        condense_core::ModelRef::new(provider, id).named(name),
    )
}

fn controller() -> Arc<FallbackController> {
    Arc::new(FallbackController::new(Arc::new(TokioClock::new())))
}

/// Primary and session providers behind one summarizer with a fresh
/// controller.
fn pair(
    primary: &Arc<FakeProvider>,
    session: &Arc<FakeProvider>,
    timeouts: Timeouts,
) -> (Summarizer, Arc<FallbackController>) {
    let c = controller();
    let s = Summarizer::new(target(primary, PRIMARY), settings(timeouts))
        .with_session_fallback(target(session, SESSION), c.clone());
    (s, c)
}

async fn run(s: &Summarizer) -> JobOutcome {
    s.summarize_batch(&small_batch(), &CancelToken::new(), &mut |_| {})
        .await
}

fn levels(o: &JobOutcome, level: NoticeLevel) -> Vec<&Notice> {
    o.notices.iter().filter(|n| n.level == level).collect()
}

fn summary_text(o: &JobOutcome) -> &str {
    match &o.result {
        JobResult::Summary { text, .. } => text,
        other => panic!("expected a summary, got {other:?}"),
    }
}

fn failure_message(o: &JobOutcome) -> &str {
    match &o.result {
        JobResult::Failed { message, .. } => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

// --- same model: the controller is never consulted -------------------------

#[tokio::test(start_paused = true)]
async fn same_model_transient_failure_is_an_error_notice_and_no_fallback() {
    let p = FakeProvider::always(transient("provider overloaded"));
    let c = controller();
    let s = Summarizer::new(target(&p, PRIMARY), settings(Timeouts::default()))
        .with_session_fallback(target(&p, PRIMARY), c.clone());
    assert!(s.fallback().is_none());
    let o = run(&s).await;
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(failure_message(&o), "provider overloaded");
    assert_eq!(
        o.notices,
        vec![Notice::error(
            "pruner: summarization failed: provider overloaded"
        )]
    );
    assert!(!c.in_fallback());
    assert_eq!(p.calls(), 1);
}

// --- entering, staying, recovering ------------------------------------------

#[tokio::test(start_paused = true)]
async fn primary_transient_fallback_ok_enters_with_one_warning() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(reply("- fallback summary"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- fallback summary");
    assert!(c.in_fallback());
    assert_eq!(
        o.notices,
        vec![Notice::warning(
            "condense: summarizer model Primary failing, using session model Session until it recovers"
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn steady_state_goes_to_the_session_model_only() {
    let mut mock = MockProvider::new();
    // Exactly one primary call: the first, failing one.
    mock.expect_complete()
        .times(1)
        .returning(|_, _| Err(ProviderError::transient("down")));
    let session = FakeProvider::always(reply("- ok"));
    let c = controller();
    let s = Summarizer::new(mock_target(mock, PRIMARY), settings(Timeouts::default()))
        .with_session_fallback(target(&session, SESSION), c.clone());
    run(&s).await;
    assert_eq!(session.calls(), 1);
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(60)).await;
        let o = run(&s).await;
        assert_eq!(summary_text(&o), "- ok");
        assert!(o.notices.is_empty());
    }
    assert_eq!(session.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn both_down_is_silent_about_fallback_then_owes_the_warning() {
    let primary = FakeProvider::always(transient("everything down"));
    let session = FakeProvider::always(transient("everything down"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert!(c.in_fallback());
    assert!(levels(&o, NoticeLevel::Warning).is_empty());
    assert_eq!(levels(&o, NoticeLevel::Error).len(), 1);

    // Next flush: the session model works again; the owed warning fires once.
    session.set(reply("- rescued"));
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- rescued");
    assert_eq!(levels(&o, NoticeLevel::Warning).len(), 1);
    let o = run(&s).await;
    assert!(o.notices.is_empty());
    assert_eq!(primary.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn probe_after_cooldown_recovers_with_an_info_notice() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    run(&s).await;
    assert!(c.in_fallback());
    primary.set(reply("- primary"));

    tokio::time::advance(Duration::from_secs(599)).await;
    assert_eq!(summary_text(&run(&s).await), "- session");
    tokio::time::advance(Duration::from_secs(1)).await;
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- primary");
    assert_eq!(
        o.notices,
        vec![Notice::info("condense: summarizer model Primary recovered")]
    );
    assert!(!c.in_fallback());
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- primary");
    assert!(o.notices.is_empty());
}

#[tokio::test(start_paused = true)]
async fn failed_probe_is_rescued_silently_and_stays_in_fallback() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    run(&s).await;
    tokio::time::advance(Duration::from_secs(600)).await;
    let o = run(&s).await;
    assert_eq!(primary.calls(), 2, "the probe went to the primary");
    assert_eq!(summary_text(&o), "- session");
    assert!(o.notices.is_empty());
    assert!(c.in_fallback());
    run(&s).await;
    assert_eq!(primary.calls(), 2, "no second probe within the cooldown");
}

#[tokio::test(start_paused = true)]
async fn concurrent_calls_after_the_cooldown_probe_once() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(reply("- session"));
    let (s, _c) = pair(&primary, &session, Timeouts::default());
    run(&s).await;
    primary.set(Behavior::Slow {
        delay: Duration::from_secs(1),
        text: "- primary".into(),
    });
    tokio::time::advance(Duration::from_secs(600)).await;
    let outcomes = tokio::join!(run(&s), run(&s), run(&s), run(&s));
    assert_eq!(primary.calls(), 2, "one probe among four concurrent calls");
    let recovered = [&outcomes.0, &outcomes.1, &outcomes.2, &outcomes.3]
        .iter()
        .filter(|o| !levels(o, NoticeLevel::Info).is_empty())
        .count();
    assert_eq!(recovered, 1);
}

#[tokio::test(start_paused = true)]
async fn fallback_only_failure_notifies_and_keeps_the_probe_clock() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    run(&s).await;
    session.set(transient("session hiccup"));
    tokio::time::advance(Duration::from_secs(300)).await;
    let o = run(&s).await;
    assert_eq!(
        o.notices,
        vec![condense_summarizer::notice::failed("session hiccup")]
    );
    assert!(c.in_fallback());
    assert_eq!(primary.calls(), 1);
    // Had that failure restarted the cooldown, this would not probe.
    primary.set(reply("- primary"));
    tokio::time::advance(Duration::from_secs(300)).await;
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- primary");
    assert_eq!(primary.calls(), 2);
}

// --- failures that never touch the fallback -----------------------------------

#[tokio::test(start_paused = true)]
async fn auth_failure_notifies_and_never_falls_back() {
    let primary = FakeProvider::always(Behavior::Fail(ProviderError::auth("no key")));
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(o.failure, Some(FailureKind::Auth));
    assert_eq!(
        o.notices,
        vec![condense_summarizer::notice::failed("no key")]
    );
    assert!(!c.in_fallback());
    assert_eq!(session.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn unusable_answers_are_silent_soft_failures() {
    let cases = [
        ("", StopReason::Stop),
        ("  \n\t ", StopReason::Stop),
        ("- partial", StopReason::Length),
    ];
    for (text, stop) in cases {
        let primary = FakeProvider::always(Behavior::ReplyWith(text.into(), stop.clone()));
        let session = FakeProvider::always(reply("- session"));
        let (s, c) = pair(&primary, &session, Timeouts::default());
        let o = run(&s).await;
        assert_eq!(
            o.result,
            JobResult::Unusable { usage: Some(USAGE) },
            "{text:?}"
        );
        assert_eq!(o.failure, Some(FailureKind::Unusable));
        assert!(o.notices.is_empty());
        assert!(!c.in_fallback());
        assert_eq!(session.calls(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn unusable_fallback_retry_changes_nothing() {
    let primary = FakeProvider::always(transient("down"));
    let session = FakeProvider::always(Behavior::ReplyWith(String::new(), StopReason::Stop));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(o.failure, Some(FailureKind::Unusable));
    assert!(o.notices.is_empty());
    assert!(!c.in_fallback());
}

#[tokio::test(start_paused = true)]
async fn a_provider_side_abort_counts_as_transient() {
    let primary = FakeProvider::always(Behavior::Fail(ProviderError::aborted()));
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- session");
    assert!(c.in_fallback());
}

// --- aborts -------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn pre_aborted_calls_nothing_and_says_nothing() {
    let mut mock = MockProvider::new();
    mock.expect_complete().times(0);
    let session = FakeProvider::always(Behavior::Hang);
    let c = controller();
    let s = Summarizer::new(mock_target(mock, PRIMARY), settings(Timeouts::default()))
        .with_session_fallback(target(&session, SESSION), c.clone());
    let cancel = CancelToken::new();
    cancel.cancel();
    let o = s
        .summarize_batch(&small_batch(), &cancel, &mut |_| {})
        .await;
    assert!(o.is_aborted());
    assert!(o.notices.is_empty());
    assert!(!c.in_fallback());
    assert_eq!(session.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn aborting_mid_call_is_not_a_timeout() {
    let primary = FakeProvider::always(Behavior::Hang);
    let session = FakeProvider::always(reply("- session"));
    let (s, c) = pair(&primary, &session, Timeouts::default());
    let cancel = CancelToken::new();
    let start = Instant::now();
    let canceller = {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            cancel.cancel();
        }
    };
    let b = small_batch();
    let mut on_chars = |_| {};
    let (o, ()) = tokio::join!(s.summarize_batch(&b, &cancel, &mut on_chars), canceller);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert!(o.is_aborted());
    assert!(o.notices.is_empty());
    assert!(!c.in_fallback());
    assert_eq!(session.calls(), 0);
    assert!(primary.all_cancelled());
}

// --- timeouts -------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn idle_timeout_is_a_warning_and_cancels_the_call() {
    let p = FakeProvider::always(Behavior::Hang);
    let s = Summarizer::new(
        target(&p, PRIMARY),
        settings(Timeouts::from_millis(20_000, 0)),
    );
    let start = Instant::now();
    let o = run(&s).await;
    assert_eq!(start.elapsed(), Duration::from_secs(20));
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(
        failure_message(&o),
        "summarizer Primary stalled (no output for 20s)"
    );
    assert_eq!(
        o.notices,
        vec![Notice::warning(
            "condense: summarizer Primary stalled (no output for 20s); summarizer call abandoned"
        )]
    );
    assert!(p.all_cancelled());
}

#[tokio::test(start_paused = true)]
async fn ceiling_timeout_with_idle_disabled() {
    let p = FakeProvider::always(Behavior::Hang);
    let s = Summarizer::new(
        target(&p, PRIMARY),
        settings(Timeouts::from_millis(0, 180_000)),
    );
    let start = Instant::now();
    let o = run(&s).await;
    assert_eq!(start.elapsed(), Duration::from_secs(180));
    assert_eq!(
        failure_message(&o),
        "summarizer Primary exceeded 180s ceiling"
    );
    assert_eq!(levels(&o, NoticeLevel::Warning).len(), 1);
    assert!(levels(&o, NoticeLevel::Error).is_empty());
}

#[tokio::test(start_paused = true)]
async fn fractional_seconds_print_like_javascript() {
    let p = FakeProvider::always(Behavior::Hang);
    let s = Summarizer::new(target(&p, PRIMARY), settings(Timeouts::from_millis(20, 0)));
    let o = run(&s).await;
    assert_eq!(
        failure_message(&o),
        "summarizer Primary stalled (no output for 0.02s)"
    );
}

#[tokio::test(start_paused = true)]
async fn primary_idle_timeout_rescued_by_the_session_model() {
    let primary = FakeProvider::always(Behavior::Hang);
    let session = FakeProvider::always(reply("- rescued"));
    let (s, c) = pair(&primary, &session, Timeouts::from_millis(20_000, 0));
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- rescued");
    assert!(c.in_fallback());
    // Only the generic enter warning: the primary's timeout is not reported.
    assert_eq!(levels(&o, NoticeLevel::Warning).len(), 1);
    assert!(o.notices[0].text.contains("failing, using session model"));
    assert!(levels(&o, NoticeLevel::Error).is_empty());
}

#[tokio::test(start_paused = true)]
async fn both_time_out_one_warning() {
    let primary = FakeProvider::always(Behavior::Hang);
    let session = FakeProvider::always(Behavior::Hang);
    let (s, c) = pair(&primary, &session, Timeouts::from_millis(20_000, 0));
    let start = Instant::now();
    let o = run(&s).await;
    assert_eq!(start.elapsed(), Duration::from_secs(40));
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(
        o.notices,
        vec![condense_summarizer::notice::timed_out(
            "summarizer Session stalled (no output for 20s)"
        )]
    );
    assert!(c.in_fallback());
}

#[tokio::test(start_paused = true)]
async fn both_timeouts_disabled_never_fire() {
    let p = FakeProvider::always(Behavior::Slow {
        delay: Duration::from_secs(3_600),
        text: "- slow but fine".into(),
    });
    let s = Summarizer::new(target(&p, PRIMARY), settings(Timeouts::disabled()));
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- slow but fine");
    assert!(o.notices.is_empty());
}

#[tokio::test(start_paused = true)]
async fn thinking_events_keep_a_flowing_stream_alive() {
    // Six events 10 s apart: 60 s in all, against a 15 s idle window.
    let p = FakeProvider::always(Behavior::Drip {
        events: 6,
        gap: Duration::from_secs(10),
        text: "- flowing summary".into(),
    });
    let s = Summarizer::new(
        target(&p, PRIMARY),
        settings(Timeouts::from_millis(15_000, 0)),
    );
    let o = run(&s).await;
    assert_eq!(summary_text(&o), "- flowing summary");
    assert!(o.notices.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_ceiling_bounds_a_flowing_stream() {
    let p = FakeProvider::always(Behavior::Drip {
        events: 10,
        gap: Duration::from_secs(10),
        text: "- too late".into(),
    });
    let s = Summarizer::new(
        target(&p, PRIMARY),
        settings(Timeouts::from_millis(15_000, 45_000)),
    );
    let start = Instant::now();
    let o = run(&s).await;
    assert_eq!(start.elapsed(), Duration::from_secs(45));
    assert_eq!(
        failure_message(&o),
        "summarizer Primary exceeded 45s ceiling"
    );
}

#[tokio::test(start_paused = true)]
async fn a_gap_longer_than_the_idle_window_stalls() {
    let p = FakeProvider::always(Behavior::Drip {
        events: 3,
        gap: Duration::from_secs(30),
        text: "- never".into(),
    });
    let s = Summarizer::new(
        target(&p, PRIMARY),
        settings(Timeouts::from_millis(20_000, 0)),
    );
    let start = Instant::now();
    let o = run(&s).await;
    assert_eq!(start.elapsed(), Duration::from_secs(20));
    assert!(failure_message(&o).contains("stalled"));
}

// --- what goes out, what comes back ----------------------------------------------

#[tokio::test(start_paused = true)]
async fn requests_carry_model_thinking_cap_and_the_prompt() {
    let p = FakeProvider::always(reply("- ok"));
    let s = Summarizer::new(
        target(&p, PRIMARY),
        SummarizerSettings {
            thinking: ThinkingLevel::Low,
            max_tokens: Some(512),
            timeouts: Timeouts::default(),
        },
    );
    run(&s).await;
    s.summarize_range(&["- a `t1`", "- b `t2`"], &CancelToken::new())
        .await;
    let requests = p.requests();
    assert_eq!(requests[0].model, "primary-model");
    assert_eq!(requests[0].thinking, ThinkingLevel::Low);
    assert_eq!(requests[0].max_tokens, Some(512));
    assert_eq!(requests[0].system, None);
    assert_eq!(
        requests[0].user,
        condense_summarizer::prompt::batch_user_message(&small_batch())
    );
    assert!(requests[1]
        .user
        .ends_with("<sub-task-summaries>\n- a `t1`\n\n- b `t2`\n</sub-task-summaries>"));
}

#[tokio::test(start_paused = true)]
async fn usage_of_a_failed_primary_is_added_to_the_rescue() {
    let primary = FakeProvider::always(Behavior::Fail(
        ProviderError::transient("down").with_usage(Some(Usage {
            input_tokens: 100,
            output_tokens: 0,
            cost: 1.0,
        })),
    ));
    let session = FakeProvider::always(reply("- rescued"));
    let (s, _) = pair(&primary, &session, Timeouts::default());
    let o = run(&s).await;
    assert_eq!(
        o.result,
        JobResult::Summary {
            text: "- rescued".into(),
            usage: Usage {
                input_tokens: 110,
                output_tokens: 2,
                cost: 1.5,
            },
        }
    );
}

#[tokio::test(start_paused = true)]
async fn streamed_chars_are_reported_in_utf16_units() {
    let mut mock = MockProvider::new();
    mock.expect_complete().returning(|_, events| {
        events.text("- h\u{e9}");
        events.thinking("hmm");
        events.text(" \u{1f600}");
        Ok(Completion {
            text: "- h\u{e9} \u{1f600}".into(),
            stop_reason: StopReason::Stop,
            usage: Usage::default(),
        })
    });
    let s = Summarizer::new(mock_target(mock, PRIMARY), settings(Timeouts::default()));
    let seen = Mutex::new(Vec::new());
    let mut on_chars = |n| seen.lock().unwrap().push(n);
    let o = s
        .summarize_batch(&small_batch(), &CancelToken::new(), &mut on_chars)
        .await;
    assert_eq!(summary_text(&o), "- h\u{e9} \u{1f600}");
    assert_eq!(*seen.lock().unwrap(), vec![0, 4, 7]);
}
