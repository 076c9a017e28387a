//! `batch_user_message_len` counts exactly what `batch_user_message` of the
//! merged batch writes, for any arguments, prose and results.

use condense_core::{js_len, merge_runs, CapturedBatch, CapturedCall};
use condense_summarizer::prompt::{batch_user_message, batch_user_message_len, RESULT_CUT};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Strings with what serialization treats apart: quotes, backslashes,
/// control characters, DEL, two-, three- and four-byte characters.
fn text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just("\n\r\t\u{8}\u{c}".to_owned()),
        Just("\u{0}\u{1f}\u{7f}".to_owned()),
        Just("é".to_owned()),
        Just("→".to_owned()),
        Just("😀".to_owned()),
        "[a-z /]{0,12}",
        any::<String>(),
    ];
    prop::collection::vec(pieces, 0..6).prop_map(|p| p.concat())
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        prop_oneof![Just(1e21), Just(1.5e-7), Just(-0.0), Just(0.5)]
            .prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Results around the cut, some with a four-byte character across it.
fn result() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        (0..4usize, text()).prop_map(|(k, t)| format!("{}😀{t}", "x".repeat(RESULT_CUT - 2 + k))),
        (0..3000usize).prop_map(|n| "y".repeat(n)),
    ]
}

fn call() -> impl Strategy<Value = CapturedCall> {
    ("[a-z_]{0,8}", json(), result(), any::<bool>()).prop_map(|(name, args, result, err)| {
        CapturedCall {
            tool_call_id: "c".to_owned(),
            tool_name: name,
            args: args.into(),
            result_text: result.into(),
            is_error: err,
            result_timestamp: None,
        }
    })
}

fn batch() -> impl Strategy<Value = CapturedBatch> {
    (
        prop_oneof![Just(String::new()), text()],
        prop::collection::vec(call(), 0..4),
    )
        .prop_map(|(assistant_text, calls)| CapturedBatch {
            turn_index: 0,
            timestamp: 0,
            assistant_text,
            calls,
            user_turn_group: Some(0),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_length_of_a_merged_message_is_counted_exactly(
        batches in prop::collection::vec(batch(), 1..4),
    ) {
        let merged = merge_runs(batches.clone(), usize::MAX, 0);
        prop_assert_eq!(merged.len(), 1);
        prop_assert_eq!(
            batch_user_message_len(&batches),
            js_len(&batch_user_message(&merged[0]))
        );
        prop_assert_eq!(
            batch_user_message_len(std::slice::from_ref(&batches[0])),
            js_len(&batch_user_message(&batches[0]))
        );
    }
}
