//! The miss model a session learns from the usage its host reports
//! (`economy.missRates: "learn"`, the default) is kept beside the session:
//! a restart takes it up again, and a new session in the same directory
//! plans with what the sessions before it saw.

mod support;

use condense_core::MissCounts;
use condense_store::misses::{misses_dir_in, read_history, write_session_misses, ProviderMisses};
use serde_json::{json, Value};
use support::{driver_in, play_watching, read_turn, session_of, MIN, T0};

/// `turns` tool turns and a reply, two minutes apart, each call reporting
/// that the provider read nothing from its cache: a miss, every call the
/// cache should have served.
fn missing_session(turns: usize) -> condense_store::session::Session {
    missing_session_every(turns, 2 * MIN)
}

/// [`missing_session`] with `gap_ms` between the calls.
fn missing_session_every(turns: usize, gap_ms: i64) -> condense_store::session::Session {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    for n in 0..turns {
        let at = T0 + 1_000 + gap_ms * n as i64;
        let mut turn = read_turn(&format!("c{n}"), &format!("f{n}.txt"), "x", at);
        turn[0]["usage"] = json!({"input": 30_000, "output": 40, "cacheRead": 0, "cacheWrite": 0});
        messages.extend(turn);
    }
    let at = T0 + 1_000 + gap_ms * turns as i64;
    messages.push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"}],
        "stopReason": "stop", "timestamp": at, "provider": "anthropic", "model": "claude-x",
        "usage": {"input": 30_000, "output": 40, "cacheRead": 0, "cacheWrite": 0}}),
    );
    session_of("s", "e", messages)
}

fn played(dir: &std::path::Path, restart_at: Option<usize>) -> ProviderMisses {
    let session = missing_session(30);
    let branch = session.branch(None);
    let mut d = driver_in("cache-aware", dir);
    play_watching(
        &mut d,
        &branch,
        |d, prompts: &[Vec<condense_core::Message>]| {
            if Some(prompts.len()) == restart_at {
                d.restart();
            }
        },
    );
    let counts = d.engine().miss_counts();
    counts
}

#[test]
fn a_session_keeps_its_misses_beside_it_and_takes_them_up_on_a_restart() {
    let once = tempfile::tempdir().unwrap();
    let whole = played(once.path(), None);
    let seen = whole["anthropic"];
    // Every call after the first was expected to read the prefix, 60 to
    // 300 s after the one before, and read nothing.
    assert_eq!(seen.buckets[3], (30, 30), "{seen:?}");
    assert_eq!(seen.calls(), 30);
    let on_disk = read_history(&misses_dir_in(once.path()), "another");
    assert_eq!(on_disk.others, whole, "written as they came");
    assert!(on_disk.skipped.is_empty());

    let restarted = tempfile::tempdir().unwrap();
    let resumed = played(restarted.path(), Some(12));
    // The restarted engine takes up the counts from the file; at most the
    // call in flight at the restart is not counted.
    let resumed = resumed["anthropic"];
    assert!(resumed.calls() >= 29, "{resumed:?}");
    assert_eq!(resumed.buckets[3].0, resumed.buckets[3].1);
}

#[test]
fn a_new_session_plans_with_the_misses_the_sessions_beside_it_saw() {
    let root = tempfile::tempdir().unwrap();
    let dir = misses_dir_in(root.path());
    let earlier = MissCounts::from_pairs([(300, 0), (0, 0), (0, 0), (200, 100), (0, 0)]);
    let other = MissCounts::from_pairs([(0, 0), (0, 0), (0, 0), (300, 300), (0, 0)]);
    let prior: ProviderMisses = [("anthropic".into(), earlier), ("openai".into(), other)]
        .into_iter()
        .collect();
    write_session_misses(&dir, "earlier", &prior).unwrap();

    let session = missing_session(3);
    let branch = session.branch(None);
    let mut planned = Vec::new();
    let mut d = driver_in("cache-aware", root.path());
    play_watching(&mut d, &branch, |d, _| {
        planned.push(d.engine().planned_miss_rates())
    });
    // Before any call names its model, the policy plans for the provider
    // the directory counted most calls of: anthropic's misses from the
    // earlier session (its 500 calls weighed as 100), the session's own
    // added as they come; openai's are not anthropic's.
    assert_eq!(planned[0], planned[1]);
    let second = planned[1].expect("planned with the prior").0;
    assert_eq!((second[0], second[3]), (0.0, 0.5));
    // After the session's three calls that the cache should have served.
    let last = d
        .engine()
        .planned_miss_rates()
        .expect("planned with the prior")
        .0;
    let expected = (100.0 * 100.0 / 500.0 + 3.0) / (100.0 * 200.0 / 500.0 + 3.0);
    assert!(
        (last[3] - expected).abs() < 1e-9,
        "{last:?} against {expected}"
    );

    // Without the earlier session, three calls are too few to learn from.
    let alone = tempfile::tempdir().unwrap();
    let mut d = driver_in("cache-aware", alone.path());
    let mut planned: Vec<Option<Value>> = Vec::new();
    play_watching(&mut d, &branch, |d, _| {
        planned.push(d.engine().planned_miss_rates().map(|r| json!(r.0)))
    });
    assert!(planned.iter().all(Option::is_none), "{planned:?}");
}

/// A host that waits for `turn.end` should not pay a write a call: the
/// counts go to disk at the first report, then every 16 reports (or once a
/// minute has passed), and whatever is left at shutdown.
#[test]
fn the_counts_are_written_at_the_first_report_then_in_batches() {
    let root = tempfile::tempdir().unwrap();
    let dir = misses_dir_in(root.path());
    let on_disk = || {
        read_history(&dir, "another")
            .others
            .values()
            .map(MissCounts::calls)
            .sum::<u64>()
    };
    // Calls 5 s apart: a minute passes every 12 reports.
    let minutes = tempfile::tempdir().unwrap();
    let mut d = driver_in("cache-aware", minutes.path());
    let mut seen = Vec::new();
    let session = missing_session_every(40, 5_000);
    play_watching(&mut d, &session.branch(None), |_, _| {
        seen.push(
            read_history(&misses_dir_in(minutes.path()), "another")
                .others
                .values()
                .map(MissCounts::calls)
                .sum::<u64>(),
        )
    });
    seen.dedup();
    assert_eq!(seen, [0, 1, 13, 25, 37], "written each minute");
    // An engine that goes away without `shutdown` (the host quit, the
    // proxy closed the conversation) writes the rest as it drops.
    let counted = d.engine().miss_counts()["anthropic"].calls();
    drop(d);
    let dropped = read_history(&misses_dir_in(minutes.path()), "another");
    assert_eq!(dropped.others["anthropic"].calls(), counted);
    assert_eq!(counted, 40);
    // Calls 2 s apart: every 16 reports.
    let session = missing_session_every(40, 2_000);
    let branch = session.branch(None);
    let mut d = driver_in("cache-aware", root.path());
    let mut seen = Vec::new();
    play_watching(&mut d, &branch, |_, _| seen.push(on_disk()));
    seen.dedup();
    assert_eq!(
        seen,
        [0, 1, 17, 33],
        "written when due, not at every report"
    );
    let counted = d.engine().miss_counts()["anthropic"].calls();
    assert_eq!(counted, 40);
    assert!(on_disk() < counted);
    d.engine().save_misses(None, &mut Default::default());
    assert_eq!(on_disk(), counted, "the rest at shutdown");
}

/// A host that keeps a session directory per project (pi) names one misses
/// directory for all: a project's first session plans with what the
/// user's other projects saw, and writes its own counts there too.
#[test]
fn a_shared_misses_directory_gives_a_new_projects_session_the_users_prior() {
    use condense_engine::{Engine, StartParams};

    let root = tempfile::tempdir().unwrap();
    let shared = root.path().join("agent").join("condense-misses");
    let earlier = MissCounts::from_pairs([(300, 0), (0, 0), (0, 0), (200, 100), (0, 0)]);
    let prior: ProviderMisses = [("anthropic".into(), earlier)].into_iter().collect();
    write_session_misses(&shared, "in-another-project", &prior).unwrap();
    let project = root.path().join("sessions").join("--new-project--");
    std::fs::create_dir_all(&project).unwrap();
    let started = |misses_dir: Option<std::path::PathBuf>| {
        let mut e = Engine::default();
        let effects = e.start(StartParams {
            settings: json!({"contextPrune": {"enabled": true}}),
            session_id: "first-here".into(),
            session_dir: Some(project.clone()),
            misses_dir,
            session_file: None,
            branch: String::new(),
            tree: false,
        });
        assert!(
            effects.iter().all(|e| !format!("{e:?}").contains("misses")),
            "{effects:?}"
        );
        e
    };
    let with_shared = started(Some(shared.clone()));
    let rates = with_shared
        .planned_miss_rates()
        .expect("planned with the other project's misses")
        .0;
    assert_eq!((rates[0], rates[3]), (0.0, 0.5));
    // Without it, the project's own directory has nothing to start from.
    assert_eq!(started(None).planned_miss_rates(), None);
    assert!(!misses_dir_in(&project).exists());
}
