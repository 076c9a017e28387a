//! Running a plan's jobs: bounded concurrency, job order, NotRun after the
//! first failure, cancellation and progress events (paused time).

mod support;

use std::sync::Arc;
use std::time::Duration;

use condense_core::JobResult;
use condense_summarizer::{
    CancelToken, CompletionRequest, ProgressEvent, ProviderError, RunOptions, RunReport,
    StopReason, Summarizer, SummarizerSettings,
};
use support::{jobs, Behavior, FakeProvider, USAGE};
use tokio::time::Instant;

/// The job a request is for (jobs read `file<i>.rs`).
fn job_of(request: &CompletionRequest) -> usize {
    let needle = "\"path\": \"file";
    let at = request.user.find(needle).expect("a job prompt") + needle.len();
    let digits: String = request.user[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

fn summarizer(p: &Arc<FakeProvider>) -> Summarizer {
    Summarizer::new(
        p.target("test", "model", "Model"),
        SummarizerSettings::default(),
    )
}

async fn run(p: &Arc<FakeProvider>, n: usize, options: RunOptions) -> RunReport {
    summarizer(p)
        .run_jobs(&jobs(n), options, &CancelToken::new(), &mut |_| {})
        .await
}

fn slow(secs: u64, text: String) -> Behavior {
    Behavior::Slow {
        delay: Duration::from_secs(secs),
        text,
    }
}

fn summary(i: usize) -> JobResult {
    JobResult::Summary {
        text: format!("- job {i}"),
        usage: USAGE,
    }
}

fn kinds(results: &[JobResult]) -> String {
    results
        .iter()
        .map(|r| match r {
            JobResult::Summary { .. } => 'S',
            JobResult::Unusable { .. } => 'U',
            JobResult::Failed { .. } => 'F',
            JobResult::NotRun => '-',
        })
        .collect()
}

#[test]
fn default_bound_is_eight() {
    assert_eq!(RunOptions::default().max_in_flight, 8);
    assert_eq!(RunOptions::sequential().max_in_flight, 1);
}

#[tokio::test(start_paused = true)]
async fn no_jobs_no_results() {
    let p = FakeProvider::always(Behavior::Hang);
    let report = run(&p, 0, RunOptions::default()).await;
    assert_eq!(report, RunReport::default());
    assert_eq!(p.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn results_come_back_in_job_order_with_at_most_eight_in_flight() {
    // Later jobs finish first.
    let p = FakeProvider::routed(|r| {
        let i = job_of(r);
        slow(1 + (19 - i as u64) / 2, format!("- job {i}"))
    });
    let report = run(&p, 20, RunOptions::default()).await;
    let expected: Vec<JobResult> = (0..20).map(summary).collect();
    assert_eq!(report.results, expected);
    assert_eq!(p.max_in_flight(), 8);
    assert!(report.notices.is_empty());
    assert!(!report.aborted);
}

#[tokio::test(start_paused = true)]
async fn the_bound_is_configurable() {
    for n in [1, 3, 50] {
        let p = FakeProvider::routed(|r| slow(1, format!("- job {}", job_of(r))));
        let report = run(&p, 20, RunOptions::concurrent(n)).await;
        assert_eq!(kinds(&report.results), "S".repeat(20));
        assert_eq!(p.max_in_flight(), n.min(20), "bound {n}");
    }
    let p = FakeProvider::routed(|r| slow(1, format!("- job {}", job_of(r))));
    run(&p, 3, RunOptions::concurrent(0)).await;
    assert_eq!(p.max_in_flight(), 1, "0 counts as 1");
}

#[tokio::test(start_paused = true)]
async fn a_failure_stops_later_jobs_and_cancels_running_ones() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        3 => Behavior::Fail(ProviderError::transient("boom")),
        i => slow(10, format!("- job {i}")),
    });
    let start = Instant::now();
    let report = run(&p, 20, RunOptions::default()).await;
    assert_eq!(kinds(&report.results), format!("SSSF{}", "-".repeat(16)));
    assert_eq!(&report.results[..3], &[summary(0), summary(1), summary(2)]);
    assert_eq!(p.calls(), 8, "nothing starts after the failure");
    assert!(p.all_cancelled());
    // Jobs 0-2 ran to completion; jobs 4-7 were cancelled, not awaited.
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(
        report.notices,
        vec![condense_summarizer::notice::failed("boom")]
    );
    assert!(report.discarded_usage.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_thousand_batches_with_one_early_failure_make_few_calls() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        13 => Behavior::Fail(ProviderError::transient("boom")),
        i => slow(1, format!("- job {i}")),
    });
    let report = run(&p, 1000, RunOptions::default()).await;
    assert_eq!(report.results.len(), 1000);
    assert_eq!(kinds(&report.results[..14]), format!("{}F", "S".repeat(13)));
    assert!(report.results[14..].iter().all(|r| *r == JobResult::NotRun));
    assert!(p.calls() <= 13 + 8, "{} calls", p.calls());
}

#[tokio::test(start_paused = true)]
async fn the_earliest_failure_wins_and_later_successes_are_discarded() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        2 => Behavior::Slow {
            delay: Duration::from_secs(5),
            text: String::new(),
        },
        5 => Behavior::Fail(ProviderError::transient("late job failed first")),
        i => slow(1, format!("- job {i}")),
    });
    let report = run(&p, 8, RunOptions::default()).await;
    // Job 2's empty answer is unusable: everything after it is NotRun, even
    // the jobs that succeeded and job 5's own failure.
    assert_eq!(kinds(&report.results), "SSU-----");
    assert_eq!(
        report.discarded_usage,
        vec![USAGE; 2],
        "jobs 3 and 4 were paid for"
    );
    assert_eq!(
        report.notices,
        vec![condense_summarizer::notice::failed("late job failed first")]
    );
}

#[tokio::test(start_paused = true)]
async fn unusable_and_length_stop_the_run_too() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        1 => Behavior::ReplyWith("- cut".into(), StopReason::Length),
        i => Behavior::Reply(format!("- job {i}")),
    });
    let report = run(&p, 4, RunOptions::sequential()).await;
    assert_eq!(kinds(&report.results), "SU--");
    assert_eq!(p.calls(), 2);
    assert!(report.notices.is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_run_leaves_everything_unfinished_not_run() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        0 => slow(1, "- job 0".into()),
        i => slow(10, format!("- job {i}")),
    });
    let cancel = CancelToken::new();
    let s = summarizer(&p);
    let all = jobs(20);
    let canceller = {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            cancel.cancel();
        }
    };
    let start = Instant::now();
    let mut on_progress = |_| {};
    let (report, ()) = tokio::join!(
        s.run_jobs(&all, RunOptions::default(), &cancel, &mut on_progress),
        canceller
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert!(report.aborted);
    // Job 0 finished before the abort; job 1 was the first one cut short.
    assert_eq!(kinds(&report.results), format!("S{}", "-".repeat(19)));
    assert!(report.notices.is_empty());
    assert!(p.all_cancelled());
    assert_eq!(p.calls(), 9, "job 0 freed a slot for job 8");
}

#[tokio::test(start_paused = true)]
async fn sequential_runs_report_a_clean_progress_sequence() {
    let p = FakeProvider::routed(|r| match job_of(r) {
        2 => Behavior::Fail(ProviderError::transient("boom")),
        i => Behavior::Reply(format!("- job {i}")),
    });
    let mut events = Vec::new();
    let report = summarizer(&p)
        .run_jobs(
            &jobs(4),
            RunOptions::sequential(),
            &CancelToken::new(),
            &mut |e| events.push(e),
        )
        .await;
    assert_eq!(kinds(&report.results), "SSF-");
    use ProgressEvent::*;
    let mut expected = Vec::new();
    for index in 0..2 {
        expected.extend([
            Started { index, total: 4 },
            Streaming { index, chars: 0 },
            Streaming { index, chars: 7 },
            Done {
                index,
                summary_chars: 7,
            },
        ]);
    }
    expected.extend([
        Started { index: 2, total: 4 },
        Streaming { index: 2, chars: 0 },
        Skipped { index: 2 },
    ]);
    assert_eq!(events, expected);
}

#[tokio::test(start_paused = true)]
async fn concurrent_runs_report_every_job_once() {
    let p = FakeProvider::routed(|r| {
        let i = job_of(r);
        slow(1 + (i % 3) as u64, format!("- job {i}"))
    });
    let mut events = Vec::new();
    summarizer(&p)
        .run_jobs(
            &jobs(12),
            RunOptions::concurrent(4),
            &CancelToken::new(),
            &mut |e| events.push(e),
        )
        .await;
    for i in 0..12 {
        let mine: Vec<&ProgressEvent> = events
            .iter()
            .filter(|e| match e {
                ProgressEvent::Started { index, .. }
                | ProgressEvent::Streaming { index, .. }
                | ProgressEvent::Done { index, .. }
                | ProgressEvent::Skipped { index } => *index == i,
            })
            .collect();
        assert!(matches!(
            mine.first(),
            Some(ProgressEvent::Started { total: 12, .. })
        ));
        assert!(
            matches!(mine.last(), Some(ProgressEvent::Done { .. })),
            "job {i}: {mine:?}"
        );
    }
}
