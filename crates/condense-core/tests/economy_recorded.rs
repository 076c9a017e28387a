//! A session's economics from its recorded usage, against hand-computed
//! cases: what `/pruner status` and `condense status` show.

use condense_core::{
    AgainstNoPruning, MissRates, PlannedMisses, Policy, PriceProfile, RecordedReason,
    RecordedUsage, SessionEconomy, SwitchRecord,
};

/// `(input, cacheRead, cacheWrite, output)` of each recorded call; each
/// costs $0.002 as pi recorded it.
const CALLS: [(u64, u64, u64, u64); 4] = [
    (0, 0, 2000, 100),
    (0, 2000, 1000, 50),
    (200, 0, 0, 10),
    // Aborted before the provider answered: no prompt, not a billed call.
    (0, 0, 0, 0),
];

fn ledger() -> SessionEconomy {
    let mut e = SessionEconomy::new();
    for (input, cache_read, cache_write, output) in CALLS {
        e.add_call(RecordedUsage {
            input,
            cache_read,
            cache_write,
            output,
            cost: 0.002,
        });
    }
    e
}

struct Case {
    profile: &'static str,
    /// (read, write, uncached) tokens as billed.
    split: (u64, u64, u64),
    /// Billed input units, worked out by hand.
    input_units: f64,
    /// Output units.
    output_units: f64,
    /// `1 − billed / no caching`.
    saved: f64,
}

/// Calls 3 (the zero-prompt one is left out), prompt 2000 + 3000 + 200 =
/// 5200 tokens, no caching 5200 units, output 160 tokens.
fn cases() -> Vec<Case> {
    vec![
        Case {
            profile: "anthropic-5m",
            split: (2000, 3000, 200),
            // 200 + 3000 · 1.25 + 2000 · 0.1
            input_units: 4150.0,
            output_units: 800.0,
            saved: 1.0 - 4150.0 / 5200.0,
        },
        Case {
            profile: "anthropic-1h",
            split: (2000, 3000, 200),
            // 200 + 3000 · 2 + 2000 · 0.1: the writes cost more than caching saved
            input_units: 6400.0,
            output_units: 800.0,
            saved: 1.0 - 6400.0 / 5200.0,
        },
        Case {
            profile: "openai",
            split: (2000, 3000, 200),
            // 200 + 3000 · 1 + 2000 · 0.1
            input_units: 3400.0,
            output_units: 160.0 * 8.0,
            saved: 1.0 - 3400.0 / 5200.0,
        },
        Case {
            profile: "no-cache",
            // Every prompt token is plain input.
            split: (0, 0, 5200),
            input_units: 5200.0,
            output_units: 800.0,
            saved: 0.0,
        },
    ]
}

#[test]
fn recorded_usage_is_billed_at_each_profile_as_worked_out_by_hand() {
    for case in cases() {
        let profile = PriceProfile::named(case.profile).unwrap();
        let r = ledger().report(&profile, Policy::Reference, 0);
        let t = &r.recorded;
        assert_eq!((t.calls, t.prompt_tokens, t.peak_prompt), (3, 5200, 3000));
        assert_eq!(
            (t.cache_read, t.cache_write, t.uncached),
            case.split,
            "{}",
            case.profile
        );
        assert_eq!(t.output, 160);
        assert!(
            (t.input_units - case.input_units).abs() < 1e-9,
            "{}: {}",
            case.profile,
            t.input_units
        );
        assert!((t.output_units - case.output_units).abs() < 1e-9);
        assert_eq!(r.uncached_units, 5200.0);
        assert!(
            (r.saved_share() - case.saved).abs() < 1e-12,
            "{}",
            case.profile
        );
        assert!((r.recorded_cost - 0.006).abs() < 1e-12);
        assert!(
            (r.billed_input_usd() - case.input_units * profile.usd_per_mtok_input / 1e6).abs()
                < 1e-12
        );
    }
}

fn switch(reason: &str, removed: u64, rewrite: f64, saving: f64) -> SwitchRecord {
    SwitchRecord {
        reason: reason.into(),
        prompt_tokens: Some(5000),
        removed_tokens: Some(removed),
        rewrite_cost: Some(rewrite),
        projected_saving: Some(saving),
    }
}

#[test]
fn a_reason_round_trips_as_written_known_or_not() {
    for name in ["pays", "idle-expiry", "start", "a-future-reason"] {
        let reason: RecordedReason =
            serde_json::from_str(&format!("\"{name}\"")).expect("a string");
        assert_eq!(reason.as_str(), name);
        assert_eq!(
            serde_json::to_string(&reason).expect("json"),
            format!("\"{name}\"")
        );
    }
    assert!(RecordedReason::from("start").is(condense_core::SwitchReason::Start));
    assert_eq!(
        RecordedReason::from("a-future-reason"),
        RecordedReason::Unknown("a-future-reason".to_owned())
    );
}

#[test]
fn switches_are_counted_by_reason_and_their_figures_summed() {
    let mut e = ledger();
    e.add_switch(switch("idle-expiry", 1200, 0.0, 500.5));
    e.add_switch(switch("pays", 800, 300.0, 900.0));
    e.add_switch(SwitchRecord {
        reason: "idle-expiry".into(),
        // An entry without figures (another writer's) counts, adds nothing.
        prompt_tokens: None,
        removed_tokens: None,
        rewrite_cost: None,
        projected_saving: None,
    });
    let profile = PriceProfile::default();
    let r = e.report(&profile, Policy::CacheAware, 3);
    assert_eq!(r.switches, 3);
    assert_eq!(
        r.reasons,
        [("idle-expiry".to_owned(), 2), ("pays".to_owned(), 1)]
    );
    assert_eq!(r.removed_tokens, 2000);
    assert_eq!((r.rewrite_cost, r.projected_saving), (300.0, 1400.5));
    assert_eq!(r.pending, 3);
    // The reference policy shows everything at once: nothing is pending.
    assert_eq!(e.report(&profile, Policy::Reference, 3).pending, 0);
}

#[test]
fn status_lines_golden() {
    let mut e = ledger();
    e.add_switch(switch("idle-expiry", 1200, 0.0, 500.5));
    e.add_switch(switch("pays", 800, 300.0, 900.0));
    let r = e.report(&PriceProfile::default(), Policy::CacheAware, 3);
    // Shares of 5200: 2000 → 38.5%, 3000 → 57.7%, 200 → 3.8%; 4150 units at
    // $3/MTok is $0.01245; 1400.5 units round to 1401.
    let expected = [
        "--- cache (anthropic-5m) ---",
        "calls:        3",
        "prompt:       5.2k tokens",
        "cache:        read 38.5% · written 57.7% · uncached 3.8%",
        "hit share:    38.5%",
        "billed input: 4.2k units ($0.012)",
        "no caching:   5.2k units (caching saved 20.2%)",
        "pi's cost:    $0.006",
        "--- policy ---",
        "policy:       cache-aware",
        "switches:     2 (idle-expiry 1, pays 1)",
        "decided:      removed 2.0k tokens · rewrite 300 units · projected saving 1.4k units",
        "not shown:    3 summarized, pending the next switch",
    ];
    assert_eq!(r.lines(), expected);

    // With the live engine's estimate against no pruning, two more lines.
    let with_priced = |saved_units: f64, max_excess: Option<f64>, summarizer_price: f64| {
        let mut r = r.clone();
        r.against_no_pruning = Some(AgainstNoPruning {
            saved_units,
            max_excess,
            summarizer_price,
        });
        let lines = r.lines();
        assert_eq!(lines.len(), expected.len() + 2);
        lines[expected.len()..].to_vec()
    };
    let with = |saved_units: f64, max_excess: Option<f64>| {
        with_priced(saved_units, max_excess, 1.0)[0].clone()
    };
    assert_eq!(
        with_priced(0.0, Some(0.0), 1.0)[1],
        "summaries:    charged at 1x the model's input price"
    );
    assert_eq!(
        with_priced(0.0, Some(0.0), 1.0 / 3.0)[1],
        "summaries:    charged at 0.33x the model's input price"
    );
    assert_eq!(
        with_priced(0.0, Some(0.0), 0.25)[1],
        "summaries:    charged at 0.25x the model's input price"
    );
    assert_eq!(
        with(12_345.4, Some(0.0)),
        "no pruning:   saved 12.3k units (estimate); bound: never above it"
    );
    assert_eq!(
        with(-250.0, Some(0.05)),
        "no pruning:   cost 250 units more (estimate); bound: at most 5.0% above it"
    );
    assert_eq!(
        with(0.0, None),
        "no pruning:   saved 0 units (estimate); no bound"
    );

    // The miss model the engine plans with, one line.
    let with_misses = |m: PlannedMisses| {
        let mut r = r.clone();
        r.misses = Some(m);
        r.lines().last().cloned().unwrap()
    };
    let rates = MissRates::from_shares(&[0.0, 0.04, 0.05, 0.32]).unwrap();
    let shares = "0% under 10 s · 4% under 30 s · 5% under 1 min · 32% under 5 min · 32% later";
    assert_eq!(
        with_misses(PlannedMisses::Ttl),
        "misses:       none planned: the cache holds for its TTL"
    );
    assert_eq!(
        with_misses(PlannedMisses::Set(rates)),
        format!("misses:       as set: {shares}")
    );
    assert_eq!(
        with_misses(PlannedMisses::Learned {
            here: 12,
            before: 400,
            rates: Some(rates)
        }),
        format!("misses:       learned from 12 calls here and 400 before: {shares}")
    );
    assert_eq!(
        with_misses(PlannedMisses::Learned {
            here: 3,
            before: 0,
            rates: None
        }),
        "misses:       learning (3 calls here, 0 before): the TTL until there are enough"
    );

    // Nothing recorded, reference policy: no switch or pending lines.
    let empty = SessionEconomy::new().report(&PriceProfile::default(), Policy::Reference, 5);
    assert_eq!(
        empty.lines(),
        [
            "--- cache (anthropic-5m) ---",
            "(no recorded usage yet)",
            "--- policy ---",
            "policy:       reference",
        ]
    );
}
