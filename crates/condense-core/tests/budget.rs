//! Budget triggers: the threshold with its 300k ceiling, the per-turn delta
//! on an unclamped fraction, null-token turns, reload reset, the
//! consecutive-turn rule, and the flush decision.

use condense_core::{
    budget_hit, flush_trigger, usage_fraction, BudgetDecision, BudgetGate, TriggerKind,
    MAX_BUDGET_WINDOW,
};

#[test]
fn ceiling_is_300k() {
    assert_eq!(MAX_BUDGET_WINDOW, 300_000);
}

#[test]
fn budget_hit_table() {
    // (name, tokens, window, threshold, hit?)
    type Row = (&'static str, Option<u64>, u64, Option<f64>, bool);
    let cases: &[Row] = &[
        ("threshold off", Some(900), 1000, None, false),
        ("threshold 0 is off", Some(900), 1000, Some(0.0), false),
        (
            "negative threshold is off",
            Some(900),
            1000,
            Some(-0.5),
            false,
        ),
        (
            "threshold above 1 is off",
            Some(900),
            1000,
            Some(1.5),
            false,
        ),
        (
            "NaN threshold is off",
            Some(900),
            1000,
            Some(f64::NAN),
            false,
        ),
        (
            "null tokens (after a compaction)",
            None,
            1000,
            Some(0.8),
            false,
        ),
        ("zero window", Some(900), 0, Some(0.8), false),
        ("exactly at the threshold", Some(800), 1000, Some(0.8), true),
        ("over the threshold", Some(900), 1000, Some(0.8), true),
        ("one under the threshold", Some(799), 1000, Some(0.8), false),
        ("threshold 1: at 100%", Some(1000), 1000, Some(1.0), true),
        ("threshold 1: one under", Some(999), 1000, Some(1.0), false),
        // 0.8 × 200k = 160k < 300k: the window's own limit.
        (
            "below the ceiling: at 160k",
            Some(160_000),
            200_000,
            Some(0.8),
            true,
        ),
        (
            "below the ceiling: one under",
            Some(159_999),
            200_000,
            Some(0.8),
            false,
        ),
        // 0.8 × 1M = 800k > 300k: the ceiling.
        (
            "1M window: ceiling at 300k",
            Some(300_000),
            1_000_000,
            Some(0.8),
            true,
        ),
        (
            "1M window: one under the ceiling",
            Some(299_999),
            1_000_000,
            Some(0.8),
            false,
        ),
        (
            "1M window: 53.7% is far past the ceiling",
            Some(537_000),
            1_000_000,
            Some(0.8),
            true,
        ),
        // 0.8 × 375k = 300k: both limits coincide.
        (
            "375k window: limits coincide",
            Some(300_000),
            375_000,
            Some(0.8),
            true,
        ),
        (
            "375k window: one under",
            Some(299_999),
            375_000,
            Some(0.8),
            false,
        ),
        // 0.5 × 1M = 500k > 300k.
        (
            "threshold 0.5 on 1M: ceiling",
            Some(300_000),
            1_000_000,
            Some(0.5),
            true,
        ),
    ];
    for (name, tokens, window, threshold, hit) in cases {
        assert_eq!(budget_hit(*tokens, *window, *threshold), *hit, "{name}");
    }
}

#[test]
fn usage_fraction_table() {
    // (name, tokens, window, fraction)
    let cases: &[(&str, Option<u64>, u64, Option<f64>)] = &[
        ("null tokens", None, 1000, None),
        ("zero window", Some(10), 0, None),
        ("no tokens yet", Some(0), 1000, Some(0.0)),
        (
            "below the ceiling: tokens / window",
            Some(150_000),
            200_000,
            Some(0.75),
        ),
        (
            "above the ceiling: tokens / 300k",
            Some(150_000),
            1_000_000,
            Some(0.5),
        ),
        (
            "unclamped: 600k on 1M is 2.0",
            Some(600_000),
            1_000_000,
            Some(2.0),
        ),
        (
            "unclamped: over a small window",
            Some(1500),
            1000,
            Some(1.5),
        ),
    ];
    for (name, tokens, window, fraction) in cases {
        assert_eq!(usage_fraction(*tokens, *window), *fraction, "{name}");
    }
}

/// One turn: (tokens, window) in, expected (budget, delta, previous after).
type Turn = (Option<u64>, u64, bool, bool, Option<f64>);

struct Sequence {
    name: &'static str,
    threshold: Option<f64>,
    delta: Option<f64>,
    turns: &'static [Turn],
}

#[test]
fn gate_sequences() {
    // Windows of 1024 keep fractions exact in binary (256 → 0.25).
    let cases = [
        Sequence {
            name: "delta off never fires, but fractions are still recorded",
            threshold: None,
            delta: None,
            turns: &[
                (Some(0), 1024, false, false, Some(0.0)),
                (Some(1024), 1024, false, false, Some(1.0)),
            ],
        },
        Sequence {
            name: "the first turn cannot fire a delta",
            threshold: None,
            delta: Some(0.25),
            turns: &[(Some(1024), 1024, false, false, Some(1.0))],
        },
        Sequence {
            name: "a jump of exactly the delta fires; one token less does not",
            threshold: None,
            delta: Some(0.25),
            turns: &[
                (Some(256), 1024, false, false, Some(0.25)),
                (Some(512), 1024, false, true, Some(0.5)),
                (Some(767), 1024, false, false, Some(767.0 / 1024.0)),
            ],
        },
        Sequence {
            name: "a drop never fires",
            threshold: None,
            delta: Some(0.25),
            turns: &[
                (Some(1024), 1024, false, false, Some(1.0)),
                (Some(0), 1024, false, false, Some(0.0)),
            ],
        },
        Sequence {
            name: "null tokens leave the previous fraction unchanged",
            threshold: Some(0.9),
            delta: Some(0.25),
            turns: &[
                (Some(256), 1024, false, false, Some(0.25)),
                (None, 1024, false, false, Some(0.25)),
                (Some(512), 1024, false, true, Some(0.5)),
            ],
        },
        Sequence {
            name: "a zero window is like null tokens",
            threshold: Some(0.9),
            delta: Some(0.25),
            turns: &[
                (Some(256), 1024, false, false, Some(0.25)),
                (Some(999), 0, false, false, Some(0.25)),
                (Some(512), 1024, false, true, Some(0.5)),
            ],
        },
        Sequence {
            name: "delta measured against the 300k ceiling on a 1M window",
            threshold: None,
            delta: Some(0.25),
            turns: &[
                // 75k / 300k = 0.25 (not 0.075); 150k / 300k = 0.5.
                (Some(75_000), 1_000_000, false, false, Some(0.25)),
                (Some(150_000), 1_000_000, false, true, Some(0.5)),
            ],
        },
        Sequence {
            name: "unclamped fraction: a jump past 1.0 still measures",
            threshold: None,
            delta: Some(1.0),
            turns: &[
                (Some(300_000), 1_000_000, false, false, Some(1.0)),
                (Some(600_000), 1_000_000, false, true, Some(2.0)),
            ],
        },
        Sequence {
            name: "budget and delta in the same turn",
            threshold: Some(0.5),
            delta: Some(0.25),
            turns: &[
                (Some(256), 1024, false, false, Some(0.25)),
                (Some(768), 1024, true, true, Some(0.75)),
            ],
        },
        Sequence {
            name: "an invalid delta is off, fractions still recorded",
            threshold: None,
            delta: Some(1.5),
            turns: &[
                (Some(0), 1024, false, false, Some(0.0)),
                (Some(1024), 1024, false, false, Some(1.0)),
            ],
        },
        Sequence {
            name: "consecutive turns: slow growth never adds up to a delta",
            threshold: None,
            delta: Some(0.25),
            turns: &[
                (Some(128), 1024, false, false, Some(0.125)),
                (Some(256), 1024, false, false, Some(0.25)),
                (Some(384), 1024, false, false, Some(0.375)),
                (Some(512), 1024, false, false, Some(0.5)),
                (Some(640), 1024, false, false, Some(0.625)),
            ],
        },
    ];
    for case in cases {
        let mut gate = BudgetGate::new();
        for (i, (tokens, window, budget, delta, previous)) in case.turns.iter().enumerate() {
            let d = gate.on_turn_end(*tokens, *window, case.threshold, case.delta);
            assert_eq!(
                d,
                BudgetDecision {
                    budget_hit: *budget,
                    delta_hit: *delta
                },
                "{} (turn {i})",
                case.name
            );
            assert_eq!(
                gate.previous_fraction(),
                *previous,
                "{} (turn {i})",
                case.name
            );
        }
    }
}

#[test]
fn reset_forgets_the_previous_fraction() {
    let mut gate = BudgetGate::new();
    gate.on_turn_end(Some(256), 1024, None, Some(0.25));
    gate.reset();
    assert_eq!(gate.previous_fraction(), None);
    // The first turn after a reload cannot fire a delta, however large.
    let d = gate.on_turn_end(Some(1024), 1024, None, Some(0.25));
    assert!(!d.delta_hit);
    assert_eq!(gate.previous_fraction(), Some(1.0));
    // The threshold still applies on that turn.
    gate.reset();
    assert!(
        gate.on_turn_end(Some(1024), 1024, Some(0.8), Some(0.25))
            .budget_hit
    );
}

#[test]
fn delta_is_between_consecutive_turns_not_since_the_last_batch() {
    // Usage per turn; only turns 0 and 4 queued a batch.
    let usage = [128u64, 256, 384, 512, 640];
    let batch_turns = [0usize, 4];

    // condense: the gate sees every turn; the last step is 0.125 → no delta.
    let mut every = BudgetGate::new();
    let mut fired = Vec::new();
    for (i, tokens) in usage.iter().enumerate() {
        if every
            .on_turn_end(Some(*tokens), 1024, None, Some(0.25))
            .delta_hit
        {
            fired.push(i);
        }
    }
    assert!(fired.is_empty());

    // pi-condense fed its gate only on batch turns, so turn 4 compared
    // 0.625 with 0.125 (turn 0) and fired on slow growth.
    let mut batch_only = BudgetGate::new();
    let mut fired = Vec::new();
    for &i in &batch_turns {
        if batch_only
            .on_turn_end(Some(usage[i]), 1024, None, Some(0.25))
            .delta_hit
        {
            fired.push(i);
        }
    }
    assert_eq!(fired, vec![4]);
}

#[test]
fn flush_trigger_table() {
    // (name, pending, rearmed, flushing, budget, delta, trigger)
    type Row = (
        &'static str,
        usize,
        bool,
        bool,
        bool,
        bool,
        Option<TriggerKind>,
    );
    let cases: &[Row] = &[
        (
            "nothing queued, not rearmed",
            0,
            false,
            false,
            true,
            true,
            None,
        ),
        ("rearmed but no trigger", 0, true, false, false, false, None),
        (
            "rearmed, budget",
            0,
            true,
            false,
            true,
            false,
            Some(TriggerKind::Rearmed),
        ),
        (
            "rearmed, delta",
            0,
            true,
            false,
            false,
            true,
            Some(TriggerKind::Rearmed),
        ),
        (
            "queued, budget",
            2,
            false,
            false,
            true,
            false,
            Some(TriggerKind::Budget),
        ),
        (
            "queued, delta",
            2,
            false,
            false,
            false,
            true,
            Some(TriggerKind::Delta),
        ),
        (
            "queued, both: budget wins",
            2,
            false,
            false,
            true,
            true,
            Some(TriggerKind::Budget),
        ),
        (
            "queued and rearmed: the queue names it",
            1,
            true,
            false,
            false,
            true,
            Some(TriggerKind::Delta),
        ),
        ("queued, no trigger", 3, false, false, false, false, None),
        ("already flushing", 2, false, true, true, true, None),
        ("rearmed while flushing", 0, true, true, true, false, None),
    ];
    for (name, pending, rearmed, flushing, budget, delta, expected) in cases {
        let decision = BudgetDecision {
            budget_hit: *budget,
            delta_hit: *delta,
        };
        assert_eq!(
            flush_trigger(*pending, *rearmed, *flushing, decision),
            *expected,
            "{name}"
        );
    }
}

#[test]
fn trigger_wire_names() {
    let cases = [
        (TriggerKind::Budget, "budget"),
        (TriggerKind::Delta, "delta"),
        (TriggerKind::MessageEnd, "message-end"),
        (TriggerKind::Manual, "manual"),
        (TriggerKind::Rearmed, "rearmed"),
    ];
    for (kind, name) in cases {
        assert_eq!(kind.as_str(), name);
        assert_eq!(serde_json::to_value(kind).unwrap(), serde_json::json!(name));
        let back: TriggerKind = serde_json::from_value(serde_json::json!(name)).unwrap();
        assert_eq!(back, kind);
    }
}
