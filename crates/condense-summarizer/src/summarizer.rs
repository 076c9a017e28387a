//! One summarization: a provider call wrapped with timeouts, the
//! usable-summary guard, failure classification and the sticky fallback.

use std::sync::Arc;
use std::time::Duration;

use condense_core::js_len;
use condense_core::CapturedBatch;
use condense_core::Config;
use condense_core::{JobResult, Usage};
use tokio::time::{sleep_until, Instant};

use crate::cancel::CancelToken;
use crate::fallback::{FallbackController, Route, Transition};
use crate::notice;
use crate::prompt::{batch_user_message, range_user_message};
use crate::provider::{
    CompletionRequest, EventSink, Provider, ProviderErrorKind, StopReason, StreamEvent,
};
use condense_core::Notice;
use condense_core::{ModelRef, ThinkingLevel};

/// The idle and ceiling timeouts of one provider call.
///
/// The idle timer starts with the call and restarts on every stream event
/// (text, thinking or usage); the ceiling bounds the whole call. A timeout
/// cancels the call and counts as a transient failure, so it can engage the
/// fallback. `None` disables a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest silence allowed between events.
    pub idle: Option<Duration>,
    /// Longest a call may take in total.
    pub ceiling: Option<Duration>,
}

impl Timeouts {
    /// Default idle timeout (`summarizerIdleTimeoutMs` = 20,000).
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(20);
    /// Default ceiling (`summarizerMaxTimeoutMs` = 180,000).
    pub const DEFAULT_CEILING: Duration = Duration::from_secs(180);

    /// From the config's milliseconds; `0` disables a timer.
    pub fn from_millis(idle_ms: u64, ceiling_ms: u64) -> Timeouts {
        let opt = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));
        Timeouts {
            idle: opt(idle_ms),
            ceiling: opt(ceiling_ms),
        }
    }

    /// No timeouts at all.
    pub fn disabled() -> Timeouts {
        Timeouts {
            idle: None,
            ceiling: None,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            idle: Some(Timeouts::DEFAULT_IDLE),
            ceiling: Some(Timeouts::DEFAULT_CEILING),
        }
    }
}

/// How every call of a [`Summarizer`] is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SummarizerSettings {
    /// Thinking effort (`summarizerThinking`).
    pub thinking: ThinkingLevel,
    /// Output-token cap; `None` leaves it to the provider.
    pub max_tokens: Option<u32>,
    /// Idle and ceiling timeouts.
    pub timeouts: Timeouts,
}

impl SummarizerSettings {
    /// The settings a config asks for (an unknown thinking level means
    /// `default`).
    pub fn from_config(config: &Config) -> SummarizerSettings {
        SummarizerSettings {
            thinking: ThinkingLevel::parse(&config.summarizer_thinking).unwrap_or_default(),
            max_tokens: None,
            timeouts: Timeouts::from_millis(
                config.summarizer_idle_timeout_ms,
                config.summarizer_max_timeout_ms,
            ),
        }
    }
}

/// A model and the provider that serves it.
#[derive(Clone)]
pub struct Target {
    /// Who answers.
    pub provider: Arc<dyn Provider>,
    /// Which model (its id goes into the request, its label into notices).
    pub model: ModelRef,
}

impl Target {
    /// `model` served by `provider`.
    pub fn new(provider: Arc<dyn Provider>, model: ModelRef) -> Target {
        Target { provider, model }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("model", &self.model)
            .finish()
    }
}

/// How a summarization failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// Credentials missing or refused. Error notice; fallback untouched.
    Auth,
    /// The model answered, but with empty or whitespace-only text, or
    /// truncated by the token cap. Silent; fallback untouched.
    Unusable,
    /// An outage-shaped failure or a timeout. Notice (a warning for
    /// timeouts, an error otherwise); feeds the fallback.
    Transient,
    /// The caller cancelled. Silent; fallback untouched.
    Aborted,
}

/// What one summarization produced.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOutcome {
    /// The result for `condense_core::apply_flush`.
    pub result: JobResult,
    /// How it failed, if it did.
    pub failure: Option<FailureKind>,
    /// What to tell the user, in order.
    pub notices: Vec<Notice>,
}

impl JobOutcome {
    /// Whether the caller cancelled the call.
    pub fn is_aborted(&self) -> bool {
        self.failure == Some(FailureKind::Aborted)
    }
}

/// The usable-summary guard: text with something besides whitespace, and
/// not cut short by the token cap.
pub fn is_usable_summary(text: &str, stop_reason: &StopReason) -> bool {
    *stop_reason != StopReason::Length
        && !text
            .trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .is_empty()
}

/// Seconds as JavaScript prints `ms / 1000` (`20`, `0.5`).
fn seconds(d: Duration) -> String {
    (d.as_millis() as f64 / 1000.0).to_string()
}

fn add_usage(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Usage {
            input_tokens: a.input_tokens + b.input_tokens,
            output_tokens: a.output_tokens + b.output_tokens,
            cost: a.cost + b.cost,
        }),
        (a, b) => a.or(b),
    }
}

/// A failed attempt on one target.
#[derive(Debug)]
struct Failure {
    kind: FailureKind,
    message: String,
    usage: Option<Usage>,
    timed_out: bool,
}

impl Failure {
    fn aborted(usage: Option<Usage>) -> Failure {
        Failure {
            kind: FailureKind::Aborted,
            message: "summarization aborted".into(),
            usage,
            timed_out: false,
        }
    }

    fn timeout(message: String, usage: Option<Usage>) -> Failure {
        Failure {
            kind: FailureKind::Transient,
            message,
            usage,
            timed_out: true,
        }
    }
}

/// A successful attempt.
struct Success {
    text: String,
    usage: Usage,
}

/// Progress of the text being streamed: UTF-16 units received so far.
type CharsFn<'a> = &'a mut (dyn FnMut(usize) + Send);

/// Runs summarizations: builds the prompt, calls the right model with
/// timeouts, guards the answer and applies the fallback policy.
///
/// Cheap to clone (providers and the controller are shared).
#[derive(Clone, Debug)]
pub struct Summarizer {
    primary: Target,
    fallback: Option<(Target, Arc<FallbackController>)>,
    settings: SummarizerSettings,
}

impl Summarizer {
    /// A summarizer calling `primary` only.
    pub fn new(primary: Target, settings: SummarizerSettings) -> Summarizer {
        Summarizer {
            primary,
            fallback: None,
            settings,
        }
    }

    /// Adds the session model as the outage fallback, governed by the
    /// session's `controller`. Ignored (and the controller never consulted)
    /// unless `session` is a different model from the primary.
    pub fn with_session_fallback(
        mut self,
        session: Target,
        controller: Arc<FallbackController>,
    ) -> Summarizer {
        if ModelRef::is_distinct(Some(&self.primary.model), Some(&session.model)) {
            self.fallback = Some((session, controller));
        } else {
            self.fallback = None;
        }
        self
    }

    /// The settings.
    pub fn settings(&self) -> &SummarizerSettings {
        &self.settings
    }

    /// The summarizer model.
    pub fn primary(&self) -> &Target {
        &self.primary
    }

    /// The fallback model, when one is in use.
    pub fn fallback(&self) -> Option<&Target> {
        self.fallback.as_ref().map(|(t, _)| t)
    }

    /// Summarizes one batch. `on_chars` hears the length of the text
    /// received so far (UTF-16 units), from `0` at the start of each attempt.
    pub async fn summarize_batch(
        &self,
        batch: &CapturedBatch,
        cancel: &CancelToken,
        on_chars: CharsFn<'_>,
    ) -> JobOutcome {
        self.summarize_message(&batch_user_message(batch), cancel, on_chars)
            .await
    }

    /// Fuses a closed chain's per-batch summaries into one.
    pub async fn summarize_range<S: AsRef<str> + Sync>(
        &self,
        summaries: &[S],
        cancel: &CancelToken,
    ) -> JobOutcome {
        self.summarize_message(&range_user_message(summaries), cancel, &mut |_| {})
            .await
    }

    /// Summarizes with a ready-made user message (see [`crate::prompt`]).
    pub async fn summarize_message(
        &self,
        user: &str,
        cancel: &CancelToken,
        on_chars: CharsFn<'_>,
    ) -> JobOutcome {
        let mut notices = Vec::new();
        let Some((session, controller)) = &self.fallback else {
            let attempt = self.attempt(&self.primary, user, cancel, on_chars).await;
            return finish(attempt, None, notices);
        };
        let choice = controller.choose_target();
        if choice.route == Route::Fallback {
            let attempt = self.attempt(session, user, cancel, on_chars).await;
            match &attempt {
                Ok(_) => {
                    if controller.on_fallback_success() == Transition::Enter {
                        notices.push(self.entered_notice(session));
                    }
                }
                Err(f) if f.kind == FailureKind::Transient => controller.on_fallback_only_fail(),
                Err(_) => {}
            }
            return finish(attempt, None, notices);
        }
        let first = self.attempt(&self.primary, user, cancel, on_chars).await;
        match first {
            Ok(success) => {
                if controller.on_primary_success(choice.probe) == Transition::Recover {
                    notices.push(notice::fallback_recovered(&self.primary.model.label()));
                }
                finish(Ok(success), None, notices)
            }
            Err(f) if f.kind == FailureKind::Transient => {
                let retry = self.attempt(session, user, cancel, on_chars).await;
                match &retry {
                    Ok(_) => {
                        if controller.on_primary_fail_fallback_ok(choice.probe) == Transition::Enter
                        {
                            notices.push(self.entered_notice(session));
                        }
                    }
                    Err(g) if g.kind == FailureKind::Transient => controller.on_both_down(),
                    Err(_) => {}
                }
                finish(retry, f.usage, notices)
            }
            Err(f) => finish(Err(f), None, notices),
        }
    }

    fn entered_notice(&self, session: &Target) -> Notice {
        notice::fallback_entered(&self.primary.model.label(), &session.model.label())
    }

    /// One call to `target`, with timeouts and the usable-summary guard.
    async fn attempt(
        &self,
        target: &Target,
        user: &str,
        cancel: &CancelToken,
        on_chars: CharsFn<'_>,
    ) -> Result<Success, Failure> {
        if cancel.is_cancelled() {
            return Err(Failure::aborted(None));
        }
        let call = cancel.child();
        let request = CompletionRequest {
            model: target.model.id.clone(),
            system: None,
            user: user.to_owned(),
            thinking: self.settings.thinking,
            max_tokens: self.settings.max_tokens,
            cancel: call.clone(),
        };
        let (sink, mut rx) = EventSink::channel();
        let Timeouts { idle, ceiling } = self.settings.timeouts;
        let label = target.model.label();
        let mut progress = Progress {
            chars: 0,
            usage: None,
            on_chars,
        };
        (progress.on_chars)(0);

        let outcome = {
            let call_future = target.provider.complete(request, &sink);
            tokio::pin!(call_future);
            let start = Instant::now();
            // A disabled timer's sleep is never polled, so never registered.
            let far = Duration::from_secs(86_400 * 365);
            let idle_sleep = sleep_until(start + idle.unwrap_or(far));
            let ceiling_sleep = sleep_until(start + ceiling.unwrap_or(far));
            tokio::pin!(idle_sleep, ceiling_sleep);
            loop {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => break Err(Failure::aborted(progress.usage)),
                    result = &mut call_future => break Ok(result),
                    Some(event) = rx.recv() => {
                        if let Some(idle) = idle {
                            idle_sleep.as_mut().reset(Instant::now() + idle);
                        }
                        progress.note(event);
                    }
                    () = &mut idle_sleep, if idle.is_some() => {
                        let secs = seconds(idle.unwrap_or_default());
                        break Err(Failure::timeout(
                            format!("summarizer {label} stalled (no output for {secs}s)"),
                            progress.usage,
                        ));
                    }
                    () = &mut ceiling_sleep, if ceiling.is_some() => {
                        let secs = seconds(ceiling.unwrap_or_default());
                        break Err(Failure::timeout(
                            format!("summarizer {label} exceeded {secs}s ceiling"),
                            progress.usage,
                        ));
                    }
                }
            }
        };
        // The call is over either way: tell anything it left running to stop.
        call.cancel();
        while let Ok(event) = rx.try_recv() {
            progress.note(event);
        }
        let completion = match outcome? {
            Ok(completion) => completion,
            Err(e) => {
                let usage = e.usage.or(progress.usage);
                return Err(match e.kind {
                    _ if cancel.is_cancelled() => Failure::aborted(usage),
                    ProviderErrorKind::Auth => Failure {
                        kind: FailureKind::Auth,
                        message: e.message,
                        usage,
                        timed_out: false,
                    },
                    // A provider-side abort the caller did not ask for is an
                    // outage like any other.
                    ProviderErrorKind::Transient | ProviderErrorKind::Aborted => Failure {
                        kind: FailureKind::Transient,
                        message: e.message,
                        usage,
                        timed_out: false,
                    },
                });
            }
        };
        if cancel.is_cancelled() {
            return Err(Failure::aborted(Some(completion.usage)));
        }
        let final_chars = js_len(&completion.text);
        if final_chars != progress.chars {
            (progress.on_chars)(final_chars);
        }
        if !is_usable_summary(&completion.text, &completion.stop_reason) {
            return Err(Failure {
                kind: FailureKind::Unusable,
                message: format!("summarizer {label} returned an empty or truncated summary"),
                usage: Some(completion.usage),
                timed_out: false,
            });
        }
        Ok(Success {
            text: completion.text,
            usage: completion.usage,
        })
    }
}

struct Progress<'a, 'b> {
    chars: usize,
    usage: Option<Usage>,
    on_chars: &'a mut (dyn FnMut(usize) + Send + 'b),
}

impl Progress<'_, '_> {
    fn note(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta(delta) => {
                let n = js_len(&delta);
                if n > 0 {
                    self.chars += n;
                    (self.on_chars)(self.chars);
                }
            }
            StreamEvent::ThinkingDelta(_) => {}
            StreamEvent::Usage(usage) => self.usage = Some(usage),
        }
    }
}

/// Turns the last attempt (plus the usage of an earlier failed one) into a
/// job outcome, adding the failure notice the classification calls for.
fn finish(
    attempt: Result<Success, Failure>,
    earlier_usage: Option<Usage>,
    mut notices: Vec<Notice>,
) -> JobOutcome {
    match attempt {
        Ok(Success { text, usage }) => JobOutcome {
            result: JobResult::Summary {
                text,
                usage: add_usage(Some(usage), earlier_usage).unwrap_or(usage),
            },
            failure: None,
            notices,
        },
        Err(f) => {
            let usage = add_usage(f.usage, earlier_usage);
            let result = match f.kind {
                FailureKind::Unusable => JobResult::Unusable { usage },
                _ => JobResult::Failed {
                    message: f.message.clone(),
                    usage,
                },
            };
            match f.kind {
                FailureKind::Transient if f.timed_out => {
                    notices.push(notice::timed_out(&f.message))
                }
                FailureKind::Transient | FailureKind::Auth => {
                    notices.push(notice::failed(&f.message))
                }
                FailureKind::Unusable | FailureKind::Aborted => {}
            }
            JobOutcome {
                result,
                failure: Some(f.kind),
                notices,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_summary_guard() {
        let cases: &[(&str, StopReason, bool)] = &[
            ("- did a thing", StopReason::Stop, true),
            ("", StopReason::Stop, false),
            ("   \n\t ", StopReason::Stop, false),
            ("\u{feff}\u{a0}", StopReason::Stop, false),
            ("- partial", StopReason::Length, false),
            ("- wanted a tool", StopReason::ToolUse, true),
            ("- odd", StopReason::Other("refusal".into()), true),
        ];
        for (text, stop, usable) in cases {
            assert_eq!(is_usable_summary(text, stop), *usable, "{text:?} {stop:?}");
        }
    }

    #[test]
    fn timeouts_from_config_millis() {
        assert_eq!(Timeouts::from_millis(0, 0), Timeouts::disabled());
        assert_eq!(Timeouts::from_millis(20_000, 180_000), Timeouts::default());
        let t = Timeouts::from_millis(1, 0);
        assert_eq!(t.idle, Some(Duration::from_millis(1)));
        assert_eq!(t.ceiling, None);
    }

    #[test]
    fn settings_from_default_config() {
        let s = SummarizerSettings::from_config(&Config::default());
        assert_eq!(s.thinking, ThinkingLevel::Default);
        assert_eq!(s.timeouts, Timeouts::default());
    }

    #[tokio::test(start_paused = true)]
    async fn the_request_is_built_from_target_and_settings() {
        use crate::provider::{Completion, MockProvider};
        let mut mock = MockProvider::new();
        mock.expect_complete()
            .withf(|r, _| {
                r.model == "m-1"
                    && r.thinking == ThinkingLevel::High
                    && r.max_tokens == Some(64)
                    && r.user.starts_with(crate::prompt::RANGE_PROMPT)
                    && !r.cancel.is_cancelled()
            })
            .times(1)
            .returning(|_, _| {
                Ok(Completion {
                    text: "- fused".into(),
                    stop_reason: StopReason::Stop,
                    usage: Usage::default(),
                })
            });
        let s = Summarizer::new(
            Target::new(Arc::new(mock), ModelRef::new("p", "m-1")),
            SummarizerSettings {
                thinking: ThinkingLevel::High,
                max_tokens: Some(64),
                timeouts: Timeouts::default(),
            },
        );
        let o = s
            .summarize_range(&["- a", "- b"], &CancelToken::new())
            .await;
        assert_eq!(
            o.result,
            JobResult::Summary {
                text: "- fused".into(),
                usage: Usage::default()
            }
        );
    }

    #[test]
    fn seconds_print_like_javascript() {
        assert_eq!(seconds(Duration::from_secs(20)), "20");
        assert_eq!(seconds(Duration::from_millis(20)), "0.02");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
    }
}
