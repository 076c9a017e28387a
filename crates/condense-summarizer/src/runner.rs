//! Running a flush plan's jobs.
//!
//! Jobs start in order with at most [`RunOptions::max_in_flight`] calls at a
//! time (pi-condense started every batch at once: on a 1,000-batch flush one
//! early failure left 987 batches pending, all of them already paid for).
//! Since `apply_flush` stops at the first job that did not produce a
//! summary, a failure at job `f` means no later result can be used: no
//! further job starts, calls already running for jobs after `f` are
//! cancelled, and jobs before `f` still finish. Results come back in job
//! order, one per job, with [`JobResult::NotRun`] for every job after the
//! first failure (and for jobs cut short by the caller's cancellation).
//!
//! With `max_in_flight = 1` ([`RunOptions::sequential`]) jobs run one after
//! the other and the [`ProgressEvent`]s form a clean per-job sequence for a
//! progress widget.

use std::collections::HashMap;

use condense_core::js_len;
use condense_core::{JobResult, SummaryJob, Usage};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::cancel::CancelToken;
use crate::notice;
use crate::prompt::batch_user_message;
use crate::summarizer::{FailureKind, JobOutcome, Summarizer};
use condense_core::Notice;

/// How a plan's jobs are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Most calls in flight at once (`0` counts as `1`).
    pub max_in_flight: usize,
}

impl RunOptions {
    /// The default bound on calls in flight.
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;

    /// One job at a time (what `/pruner now` uses, with a progress widget).
    pub fn sequential() -> RunOptions {
        RunOptions { max_in_flight: 1 }
    }

    /// Up to `n` jobs at a time.
    pub fn concurrent(n: usize) -> RunOptions {
        RunOptions { max_in_flight: n }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions::concurrent(RunOptions::DEFAULT_MAX_IN_FLIGHT)
    }
}

/// Progress of a run, for a progress widget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent {
    /// Job `index` (of `total`) started.
    Started {
        /// The job's position in the plan.
        index: usize,
        /// Number of jobs in the plan.
        total: usize,
    },
    /// Job `index` has received `chars` UTF-16 units of summary text.
    Streaming {
        /// The job's position in the plan.
        index: usize,
        /// Summary text received so far (restarts at 0 on a fallback retry).
        chars: usize,
    },
    /// Job `index` produced a usable summary of `summary_chars` units.
    Done {
        /// The job's position in the plan.
        index: usize,
        /// Length of the summary text.
        summary_chars: usize,
    },
    /// Job `index` started but produced no usable summary (failed,
    /// unusable, or cancelled).
    Skipped {
        /// The job's position in the plan.
        index: usize,
    },
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunReport {
    /// One result per job, in job order.
    pub results: Vec<JobResult>,
    /// What to tell the user, grouped by job in job order.
    pub notices: Vec<Notice>,
    /// Whether the caller's token was cancelled during the run.
    pub aborted: bool,
    /// Usage of calls that completed but whose results were replaced by
    /// [`JobResult::NotRun`] (they came after the first failure). Add them
    /// to the stats: the calls were paid for.
    pub discarded_usage: Vec<Usage>,
}

fn result_usage(result: &JobResult) -> Option<Usage> {
    match result {
        JobResult::Summary { usage, .. } => Some(*usage),
        JobResult::Unusable { usage } | JobResult::Failed { usage, .. } => *usage,
        JobResult::NotRun => None,
    }
}

impl Summarizer {
    /// Runs `jobs` (see the [module docs](crate::runner)). `progress` is
    /// called from the calling task.
    pub async fn run_jobs(
        &self,
        jobs: &[SummaryJob],
        options: RunOptions,
        cancel: &CancelToken,
        progress: &mut (dyn FnMut(ProgressEvent) + Send),
    ) -> RunReport {
        let total = jobs.len();
        let max = options.max_in_flight.max(1);
        let mut outcomes: Vec<Option<JobOutcome>> = vec![None; total];
        let mut running: HashMap<usize, CancelToken> = HashMap::new();
        let mut task_index = HashMap::new();
        let mut first_failure: Option<usize> = None;
        let mut next = 0;
        let mut set = JoinSet::new();
        let (chars_tx, mut chars_rx) = mpsc::unbounded_channel::<(usize, usize)>();

        loop {
            while set.len() < max
                && next < total
                && first_failure.is_none()
                && !cancel.is_cancelled()
            {
                let index = next;
                next += 1;
                let token = cancel.child();
                running.insert(index, token.clone());
                let summarizer = self.clone();
                let message = batch_user_message(&jobs[index].batch);
                let chars_tx = chars_tx.clone();
                progress(ProgressEvent::Started { index, total });
                let handle = set.spawn(async move {
                    let mut on_chars = |chars| {
                        let _ = chars_tx.send((index, chars));
                    };
                    let outcome = summarizer
                        .summarize_message(&message, &token, &mut on_chars)
                        .await;
                    (index, outcome)
                });
                task_index.insert(handle.id(), index);
            }
            if set.is_empty() {
                break;
            }
            tokio::select! {
                Some((index, chars)) = chars_rx.recv() => {
                    progress(ProgressEvent::Streaming { index, chars });
                }
                Some(joined) = set.join_next_with_id() => {
                    // A task's progress was sent before it finished: report it first.
                    while let Ok((index, chars)) = chars_rx.try_recv() {
                        progress(ProgressEvent::Streaming { index, chars });
                    }
                    let (index, outcome) = match joined {
                        Ok((_, pair)) => pair,
                        Err(e) => {
                            let index = task_index[&e.id()];
                            (index, JobOutcome {
                                result: JobResult::Failed {
                                    message: format!("summarizer task failed: {e}"),
                                    usage: None,
                                },
                                failure: Some(FailureKind::Transient),
                                notices: vec![notice::failed("summarizer task failed")],
                            })
                        }
                    };
                    running.remove(&index);
                    match &outcome.result {
                        JobResult::Summary { text, .. } => progress(ProgressEvent::Done {
                            index,
                            summary_chars: js_len(text),
                        }),
                        _ => {
                            progress(ProgressEvent::Skipped { index });
                            if !matches!(first_failure, Some(f) if f < index) {
                                first_failure = Some(index);
                                for (i, token) in &running {
                                    if *i > index {
                                        token.cancel();
                                    }
                                }
                            }
                        }
                    }
                    outcomes[index] = Some(outcome);
                }
            }
        }

        let mut report = RunReport {
            aborted: cancel.is_cancelled(),
            ..RunReport::default()
        };
        let mut stopped = false;
        for outcome in outcomes {
            let Some(outcome) = outcome else {
                stopped = true;
                report.results.push(JobResult::NotRun);
                continue;
            };
            report.notices.extend(outcome.notices);
            if stopped {
                report.discarded_usage.extend(result_usage(&outcome.result));
                report.results.push(JobResult::NotRun);
                continue;
            }
            if !matches!(outcome.result, JobResult::Summary { .. }) {
                stopped = true;
            }
            if outcome.failure == Some(FailureKind::Aborted) {
                report.discarded_usage.extend(result_usage(&outcome.result));
                report.results.push(JobResult::NotRun);
            } else {
                report.results.push(outcome.result);
            }
        }
        report
    }
}
