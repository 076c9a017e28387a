//! Golden outputs of the binary on every fixture session of condense-store.
//!
//! - `render --json`: the fixtures' own `*.render.json` files, which were
//!   derived by hand from the behaviour reference (and, for
//!   `pi-condense-2.9.1`, produced by pi-condense itself), never from
//!   condense's output;
//! - `query`: `tests/golden/<fixture>.query-<ref>.txt`, written from the
//!   fixtures' `context-prune-index` records in pi-condense's
//!   `context_tree_query` format (`## toolRef: <label>`, `Tool:`, `Args:` as
//!   `JSON.stringify(args, null, 2)`, `Status:`, `Turn:`, a blank line, the
//!   result text; blocks joined by `\n\n---\n\n`; a bare id with several
//!   occurrences lists each, oldest first, labelled `id@resultTimestamp`,
//!   a legacy record first with its `Occurrence: legacy` line);
//! - `status --json` on the pi-condense fixture:
//!   `tests/golden/pi-condense-2.9.1.status.json`, each value explained in
//!   [`status_json_golden`].

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use support::{fixtures_dir, process_dir};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Runs `condense` with an empty agent dir so no user settings leak in.
fn condense(args: &[&str]) -> Output {
    support::condense(&process_dir("golden"), args)
}

fn ok(out: &Output) -> &[u8] {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    &out.stdout
}

fn fixture_sessions() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn render_json_of_every_fixture_matches_its_expected_render() {
    let names = fixture_sessions();
    assert!(names.len() >= 4, "{names:?}");
    for name in names {
        let session = fixtures_dir().join(format!("{name}.jsonl"));
        let expected = fixtures_dir().join(format!("{name}.render.json"));
        assert!(
            expected.exists(),
            "{name}: every fixture session has an expected render"
        );
        let out = condense(&["render", "--json", session.to_str().unwrap()]);
        let ours: Value = serde_json::from_slice(ok(&out)).unwrap();
        let theirs: Value =
            serde_json::from_str(&std::fs::read_to_string(&expected).unwrap()).unwrap();
        assert_eq!(ours, theirs, "{name}");
        // One message array on one line, then a newline: pipe-friendly.
        assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}

#[test]
fn query_goldens() {
    for (fixture, refs, file) in [
        (
            "pi-condense-2.9.1",
            &["t2"][..],
            fixtures_dir().join("pi-condense-2.9.1.query-t2.txt"),
        ),
        (
            "reused-ids",
            &["bash_1"],
            golden("reused-ids.query-bash_1.txt"),
        ),
        (
            "legacy-bare-ids",
            &["c_d"],
            golden("legacy-bare-ids.query-c_d.txt"),
        ),
        (
            "legacy-bare-ids",
            &["t2"],
            golden("legacy-bare-ids.query-t2.txt"),
        ),
        (
            "torn-last-line",
            &["t1"],
            golden("torn-last-line.query-t1.txt"),
        ),
    ] {
        let session = fixtures_dir().join(format!("{fixture}.jsonl"));
        let mut args = vec!["query", session.to_str().unwrap()];
        args.extend(refs);
        let out = condense(&args);
        let expected = std::fs::read(&file).unwrap();
        assert_eq!(
            String::from_utf8_lossy(ok(&out)),
            String::from_utf8_lossy(&expected),
            "{fixture} {refs:?}"
        );
    }
}

/// `status --json` on the pi-condense 2.9.1 fixture, with no settings file
/// (so `Config::default()`):
///
/// - `session`: the path as given (replaced by `<session>` for the golden);
/// - `config`: pi-condense's defaults: `enabled` false (pi-condense ships
///   disabled; the CLI prunes regardless), model and thinking `"default"`,
///   `pruneOn` `agent-message`, `batchingMode` `turn`, dedup on, idle 20 s,
///   max 180 s, chain compression on with a rolling window of 3, error
///   purge on;
/// - `summarizer`: the last `context-prune-stats` entry: 6 calls, 4,175
///   input and 120 output tokens, cost 0, 3 chains compressed, 1 range
///   summarized;
/// - `context`: open-cycle thinking 0 (the branch ends with a text-only
///   assistant, so the open segment is empty), largest-chain share 27 (the
///   last task with its 11 KB recovered `t2` output, ~12.9k of the branch's
///   ~48k chars, as the last flush-metrics entry also recorded), frontier
///   gap 0 (no tool result after the frontier's call);
/// - `frontier`: the last `context-prune-frontier` entry, verbatim: `call_12`
///   (`context_tree_query`), turn 12 (the 13th assistant), summarized;
/// - `pending`: nothing (every result is indexed or behind the frontier);
/// - `totals`: 33 messages (6 user, 14 assistant, 8 tool results and the 5
///   per-batch summary messages), 6 indexed tool calls (`call_0`, `_1`,
///   `_3`, `_6`, `_8`, `_12`), nothing spilled, the 3 chain entries, and the
///   live reclaim 48,016 -> 18,153 chars (`render --diff`'s total; tokens
///   are `round(chars / 4)`);
/// - `economy`: the 14 assistant messages' recorded usage: 42,018 prompt
///   tokens, all plain input (the fake provider reported no caching), so
///   billed input and the no-caching price are both 42,018 units ($0.126 at
///   $3/MTok), 280 output tokens, cost 0 as pi recorded it; the default
///   cache-aware policy, no switch (pi-condense wrote none), nothing
///   pending: a branch without a switch shows everything.
#[test]
fn status_json_golden() {
    let session = fixtures_dir().join("pi-condense-2.9.1.jsonl");
    let out = condense(&["status", "--json", session.to_str().unwrap()]);
    let mut ours: Value = serde_json::from_slice(ok(&out)).unwrap();
    assert_eq!(ours["session"], session.to_str().unwrap());
    ours["session"] = Value::String("<session>".into());
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(golden("pi-condense-2.9.1.status.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ours, expected);
}

/// `status` on `tests/golden/economy-status.jsonl` under the cache-aware
/// policy: three calls with recorded usage (2,000 written; 2,000 read and
/// 1,000 written; 200 plain; an aborted call with no prompt is not counted)
/// and two switch entries. The economy section is worked out in
/// `crates/condense-core/tests/economy_recorded.rs` (`status_lines_golden`)
/// from the same figures; the JSON is checked here value by value.
#[test]
fn status_with_recorded_usage_and_switches_golden() {
    let session = golden("economy-status.jsonl");
    let settings = golden("economy-status.settings.json");
    let args = [
        "status",
        "--settings",
        settings.to_str().unwrap(),
        session.to_str().unwrap(),
    ];
    let out = condense(&args);
    let text = String::from_utf8_lossy(ok(&out)).into_owned();
    let (first, rest) = text.split_once('\n').unwrap();
    assert_eq!(first, format!("condense status: {}", session.display()));
    let expected = std::fs::read_to_string(golden("economy-status.status.txt")).unwrap();
    assert_eq!(rest, expected);

    let mut json_args = args.to_vec();
    json_args.insert(1, "--json");
    let v: Value = serde_json::from_slice(ok(&condense(&json_args))).unwrap();
    let e = &v["economy"];
    assert_eq!(e["profile"], "anthropic-5m");
    assert_eq!(
        [
            &e["calls"],
            &e["promptTokens"],
            &e["cacheReadTokens"],
            &e["cacheWriteTokens"],
            &e["uncachedTokens"],
            &e["outputTokens"]
        ],
        [3, 5200, 2000, 3000, 200, 160]
    );
    // 200 + 3000 · 1.25 + 2000 · 0.1
    assert_eq!(e["billedInputUnits"], 4150.0);
    assert_eq!(e["noCachingUnits"], 5200.0);
    assert_eq!(e["policy"], "cache-aware");
    assert_eq!(e["switches"], 2);
    assert_eq!(
        e["switchReasons"],
        serde_json::json!({"idle-expiry": 1, "pays": 1})
    );
    assert_eq!(e["removedTokens"], 2000);
    assert_eq!(e["rewriteCostUnits"], 300.0);
    assert_eq!(e["projectedSavingUnits"], 1400.5);
    assert_eq!(e["pending"], 0);
}
