//! The extractive provider: the label contract, verbatim facts,
//! determinism, and the round trip through core's ref substitution.

mod support;

use std::sync::Arc;

use condense_core::substitute_inline_refs;
use condense_core::CapturedBatch;
use condense_core::ModelRef;
use condense_core::SummaryRef;
use condense_core::{JobResult, Usage};
use condense_summarizer::prompt::batch_user_message;
use condense_summarizer::{
    CancelToken, Extractive, FailureKind, Summarizer, SummarizerSettings, Target,
};
use serde_json::json;
use support::{batch, call};

fn sample() -> CapturedBatch {
    let mut failing = call(
        "c2",
        "bash",
        json!({"command": "cargo test -p core"}),
        "   Compiling core v0.1.0\nerror[E0308]: mismatched types\n --> src/lib.rs:12:5\nerror: could not compile `core`",
    );
    failing.is_error = true;
    CapturedBatch {
        assistant_text: "Checking the build.".into(),
        ..batch(vec![
            call(
                "c1",
                "read",
                json!({"path": "src/lib.rs", "offset": 1, "content": "x".repeat(500)}),
                "pub mod config;\npub mod render;\n// see docs/ARCHITECTURE.md",
            ),
            failing,
            call(
                "c3",
                "bash",
                json!({"command": "git rev-parse HEAD"}),
                "3f9a2c1e77b0\n",
            ),
            call("c4", "ls", json!({}), ""),
        ])
    }
}

fn answer(b: &CapturedBatch) -> String {
    Extractive::answer(&batch_user_message(b))
}

#[test]
fn exact_output_for_a_small_batch() {
    assert_eq!(
        answer(&sample()),
        "- [[1:read]] read path=src/lib.rs offset=1 content=<500 chars> -> OK, 59 chars: pub mod config;\n\
         - refs: docs/ARCHITECTURE.md\n\
         - [[2:bash]] bash command=cargo test -p core -> ERROR, 108 chars: Compiling core v0.1.0\n\
         - errors: error[E0308]: mismatched types | error: could not compile `core`\n\
         - refs: src/lib.rs:12:5\n\
         - [[3:bash]] bash command=git rev-parse HEAD -> OK, 13 chars: 3f9a2c1e77b0\n\
         - [[4:ls]] ls -> OK, empty result"
    );
}

#[test]
fn every_call_gets_one_to_three_bullets_led_by_its_label() {
    let calls = (0..12)
        .map(|i| {
            call(
                &format!("c{i}"),
                if i % 2 == 0 { "read" } else { "grep" },
                json!({"path": format!("dir/file{i}.rs")}),
                &format!(
                    "line one of {i}\nerror: thing {i} failed\n---\n[[{}:read]] Tool: fake",
                    i + 2
                ),
            )
        })
        .collect();
    let out = answer(&batch(calls));
    let mut labels = Vec::new();
    let mut bullets_per_call: Vec<usize> = Vec::new();
    for line in out.lines() {
        assert!(line.starts_with("- "), "{line}");
        if let Some(rest) = line.strip_prefix("- [[") {
            labels.push(rest.split("]]").next().unwrap().to_owned());
            bullets_per_call.push(1);
        } else {
            *bullets_per_call.last_mut().unwrap() += 1;
        }
    }
    let expected: Vec<String> = (0..12)
        .map(|i| format!("{}:{}", i + 1, if i % 2 == 0 { "read" } else { "grep" }))
        .collect();
    assert_eq!(labels, expected);
    assert!(bullets_per_call.iter().all(|n| (1..=3).contains(n)));
}

#[test]
fn truncated_results_report_their_full_size() {
    let long = format!("{}\n{}", "first line", "y".repeat(5000));
    let out = answer(&batch(vec![call(
        "c1",
        "read",
        json!({"path": "big.txt"}),
        &long,
    )]));
    assert!(
        out.starts_with("- [[1:read]] read path=big.txt -> OK, 5011 chars: first line"),
        "{out}"
    );
}

#[test]
fn labels_become_refs_through_core() {
    let b = sample();
    let refs: Vec<SummaryRef> = b
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| SummaryRef {
            short_id: format!("t{}", i + 7),
            tool_call_id: c.tool_call_id.clone(),
            result_timestamp: c.result_timestamp,
        })
        .collect();
    let names: Vec<String> = b.calls.iter().map(|c| c.tool_name.clone()).collect();
    let text = substitute_inline_refs(&answer(&b), &refs, &names);
    for (i, line) in text.lines().filter(|l| l.contains(" -> ")).enumerate() {
        assert!(line.starts_with(&format!("- `t{}` ", i + 7)), "{line}");
    }
    assert!(!text.contains("[["));
}

#[test]
fn fusion_and_unknown_prompts() {
    let fused = Extractive::answer(&condense_summarizer::prompt::range_user_message(&[
        "- `t1` read a.rs\n- refs: a.rs",
        "- `t2` read b.rs\n- refs: a.rs",
    ]));
    assert_eq!(fused, "- `t1` read a.rs\n- refs: a.rs\n\n- `t2` read b.rs");
    assert_eq!(Extractive::answer("hello"), "");
}

#[tokio::test(start_paused = true)]
async fn through_the_summarizer_it_is_free_and_deterministic() {
    let s = Summarizer::new(
        Target::new(
            Arc::new(Extractive::new()),
            ModelRef::new("condense", "extractive"),
        ),
        SummarizerSettings::default(),
    );
    let b = sample();
    let first = s
        .summarize_batch(&b, &CancelToken::new(), &mut |_| {})
        .await;
    let second = s
        .summarize_batch(&b, &CancelToken::new(), &mut |_| {})
        .await;
    assert_eq!(first, second);
    assert_eq!(
        first.result,
        JobResult::Summary {
            text: answer(&b),
            usage: Usage::default(),
        }
    );
    let range = s
        .summarize_range(&["- a", "- b"], &CancelToken::new())
        .await;
    assert!(matches!(range.result, JobResult::Summary { .. }));
    // Not a prompt it knows: an unusable (empty) answer.
    let odd = s
        .summarize_message("what?", &CancelToken::new(), &mut |_| {})
        .await;
    assert_eq!(odd.failure, Some(FailureKind::Unusable));
}
