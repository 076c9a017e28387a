//! The pricing model against hand-computed cases.

use condense_core::{
    bill_call, BillTotals, CallBill, CallTokens, PreviousCall, PriceProfile, ProfileOverrides,
};

const MIN: i64 = 60_000;

struct Case {
    what: &'static str,
    profile: &'static str,
    /// Minutes between the previous call and this one (`None`: no previous call;
    /// `Some(None)`: a previous call with no timestamp).
    gap_min: Option<Option<f64>>,
    prompt: u64,
    shared: u64,
    output: u64,
    /// (read, write, uncached, input units, output units), worked out by hand.
    expect: (u64, u64, u64, f64, f64),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "first call writes everything",
            profile: "anthropic-5m",
            gap_min: None,
            prompt: 2000,
            shared: 0,
            output: 100,
            // 2000 · 1.25; 100 · 5
            expect: (0, 2000, 0, 2500.0, 500.0),
        },
        Case {
            what: "warm call reads the shared prefix",
            profile: "anthropic-5m",
            gap_min: Some(Some(1.0)),
            prompt: 3000,
            shared: 2000,
            output: 0,
            // 2000 · 0.1 + 1000 · 1.25
            expect: (2000, 1000, 0, 1450.0, 0.0),
        },
        Case {
            what: "exactly the TTL is still warm",
            profile: "anthropic-5m",
            gap_min: Some(Some(5.0)),
            prompt: 3000,
            shared: 2000,
            output: 0,
            expect: (2000, 1000, 0, 1450.0, 0.0),
        },
        Case {
            what: "past the TTL the cache is cold",
            profile: "anthropic-5m",
            gap_min: Some(Some(5.02)),
            prompt: 3000,
            shared: 2000,
            output: 0,
            // 3000 · 1.25
            expect: (0, 3000, 0, 3750.0, 0.0),
        },
        Case {
            what: "a prompt below the minimum is plain input",
            profile: "anthropic-5m",
            gap_min: Some(Some(1.0)),
            prompt: 800,
            shared: 700,
            output: 10,
            expect: (0, 0, 800, 800.0, 50.0),
        },
        Case {
            what: "a shared prefix below the minimum is not read",
            profile: "anthropic-5m",
            gap_min: Some(Some(1.0)),
            prompt: 5000,
            shared: 900,
            output: 0,
            // 5000 · 1.25
            expect: (0, 5000, 0, 6250.0, 0.0),
        },
        Case {
            what: "the 1-hour TTL survives a half-hour gap",
            profile: "anthropic-1h",
            gap_min: Some(Some(30.0)),
            prompt: 10_000,
            shared: 8000,
            output: 0,
            // 8000 · 0.1 + 2000 · 2
            expect: (8000, 2000, 0, 4800.0, 0.0),
        },
        Case {
            what: "the 1-hour TTL goes cold after an hour",
            profile: "anthropic-1h",
            gap_min: Some(Some(61.0)),
            prompt: 10_000,
            shared: 8000,
            output: 0,
            expect: (0, 10_000, 0, 20_000.0, 0.0),
        },
        Case {
            what: "openai writes at no premium",
            profile: "openai",
            gap_min: Some(Some(2.0)),
            prompt: 3000,
            shared: 2000,
            output: 100,
            // 2000 · 0.1 + 1000 · 1; 100 · 8
            expect: (2000, 1000, 0, 1200.0, 800.0),
        },
        Case {
            what: "no caching bills every token at 1",
            profile: "no-cache",
            gap_min: Some(Some(0.5)),
            prompt: 3000,
            shared: 2999,
            output: 2,
            expect: (0, 0, 3000, 3000.0, 10.0),
        },
        Case {
            what: "an unknown gap counts as warm",
            profile: "anthropic-5m",
            gap_min: Some(None),
            prompt: 4000,
            shared: 3000,
            output: 0,
            // 3000 · 0.1 + 1000 · 1.25
            expect: (3000, 1000, 0, 1550.0, 0.0),
        },
        Case {
            what: "a negative gap (clock skew) counts as warm",
            profile: "anthropic-5m",
            gap_min: Some(Some(-3.0)),
            prompt: 4000,
            shared: 3000,
            output: 0,
            expect: (3000, 1000, 0, 1550.0, 0.0),
        },
        Case {
            what: "a shared prefix longer than the prompt is the prompt",
            profile: "anthropic-5m",
            gap_min: Some(Some(1.0)),
            prompt: 2000,
            shared: 5000,
            output: 0,
            // 2000 · 0.1
            expect: (2000, 0, 0, 200.0, 0.0),
        },
    ]
}

#[test]
fn calls_bill_as_worked_out_by_hand() {
    let now = 1_700_000_000_000i64;
    for case in cases() {
        let profile = PriceProfile::named(case.profile).unwrap();
        let previous = case.gap_min.map(|gap| PreviousCall {
            at_ms: gap.map(|g| now - (g * MIN as f64).round() as i64),
        });
        let bill = bill_call(
            &profile,
            previous,
            CallTokens {
                at_ms: Some(now),
                prompt: case.prompt,
                shared_prefix: case.shared,
                output: case.output,
            },
        );
        let (read, write, uncached, input_units, output_units) = case.expect;
        assert_eq!(
            bill,
            CallBill {
                cache_read: read,
                cache_write: write,
                uncached,
                output: case.output,
                input_units,
                output_units
            },
            "{}",
            case.what
        );
        assert_eq!(
            read + write + uncached,
            case.prompt,
            "{}: parts add up to the prompt",
            case.what
        );
    }
}

#[test]
fn a_session_adds_up_with_the_summarizer_at_its_ratio() {
    // Three calls one minute apart, growing 2000 → 3000 → 3500 tokens, then a
    // summarizer batch of 1000 in / 100 out at half the main model's price.
    let profile = PriceProfile::named("anthropic-5m")
        .unwrap()
        .with_overrides(&ProfileOverrides {
            summarizer: Some(0.5),
            ..Default::default()
        })
        .unwrap();
    let mut totals = BillTotals::default();
    let mut previous = None;
    let mut prev_prompt = 0;
    for (i, prompt) in [2000u64, 3000, 3500].into_iter().enumerate() {
        let at = Some(i as i64 * MIN);
        let bill = bill_call(
            &profile,
            previous,
            CallTokens {
                at_ms: at,
                prompt,
                shared_prefix: prev_prompt,
                output: 10,
            },
        );
        totals.add_call(prompt, &bill);
        previous = Some(PreviousCall { at_ms: at });
        prev_prompt = prompt;
    }
    totals.add_summarizer(&profile, 1000, 100);
    // input: 2000·1.25 + (2000·0.1 + 1000·1.25) + (3000·0.1 + 500·1.25) = 2500 + 1450 + 925
    assert_eq!(totals.input_units, 4875.0);
    assert_eq!(totals.output_units, 150.0);
    // 0.5 · (1000 + 100 · 5)
    assert_eq!(totals.summarizer_units, 750.0);
    // 4875 + 0.5 · 1000
    assert_eq!(totals.billed_input_units(&profile), 5375.0);
    assert_eq!(
        (totals.calls, totals.prompt_tokens, totals.peak_prompt),
        (3, 8500, 3500)
    );
    assert_eq!(totals.cache_hit_share(), 5000.0 / 8500.0);
    // (4875 + 150 + 750) units at $3 per million
    assert!((totals.usd(&profile) - 5775.0 * 3.0 / 1e6).abs() < 1e-12);

    // pi's compaction summarizes with the session model: its price, not
    // the summarizer's half. 750 + (2000 + 200 · 5)
    totals.add_compaction(&profile, 2000, 200);
    assert_eq!(totals.summarizer_units, 3750.0);
    assert_eq!(
        (totals.summarizer_input, totals.summarizer_output),
        (3000, 300)
    );
    // 5375 + 2000
    assert_eq!(totals.billed_input_units(&profile), 7375.0);
}
