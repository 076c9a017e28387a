//! The cache-aware policy's decisions, on cases computed by hand.
//!
//! Prices as Anthropic bills them with the 5-minute TTL: writes 1.25, reads
//! 0.1 (units of one uncached input token).

use condense_core::{
    calls_before_compaction, cold_share, decide_summarize, decide_switch, expected_calls,
    CacheTerms, ColdEvent, Policy, SummarizeInputs, SwitchInputs, SwitchReason,
};

const ANTHROPIC_5M: CacheTerms = CacheTerms {
    ttl_ms: 300_000,
    write: 1.25,
    read: 0.1,
    min_cacheable_tokens: 0,
};

/// A warm call 10 s after the previous one: S = 10,000, P = 4,000.
fn warm() -> SwitchInputs {
    SwitchInputs {
        now_ms: 1_000_000,
        previous_call_ms: Some(990_000),
        cold_event: None,
        prices: ANTHROPIC_5M,
        prompt_tokens: 50_000,
        suffix_tokens: 10_000,
        new_tokens: 0,
        removed_tokens: 4_000,
        expected_calls: 10,
        cold_share: 0.0,
        context_window: Some(200_000),
        pressure_share: 0.8,
        budget_triggered: false,
        within_bound: true,
        miss_share: 0.0,
    }
}

#[test]
fn a_switch_the_provider_is_likely_to_miss_anyway_costs_its_expected_rewrite() {
    // Warm, the rewrite is 6,500; cold it saves P·w = 5,000. With a miss
    // at one chance in two: 0.5 · 6,500 − 0.5 · 5,000 = 750, which 9
    // later calls at 400 repay.
    let likely = SwitchInputs {
        miss_share: 0.5,
        ..warm()
    };
    let d = decide_switch(&likely);
    assert_eq!(d.switch, Some(SwitchReason::Pays));
    assert!((d.rewrite_cost - 750.0).abs() < 1e-9);
    // The same call with no miss expected waits (the test below).
    assert_eq!(decide_switch(&warm()).switch, None);
    // A miss model never makes a switch the bound cannot pay.
    let d = decide_switch(&SwitchInputs {
        within_bound: false,
        ..likely
    });
    assert_eq!(d.switch, None);
}

#[test]
fn a_warm_switch_waits_until_the_calls_after_it_repay_the_rewrite() {
    // Rewrite now: (10,000 − 4,000)·1.25 − 10,000·0.1 = 7,500 − 1,000 = 6,500.
    // Saving with R = 10: 9 later calls · 4,000 · 0.1 = 3,600 < 6,500.
    let d = decide_switch(&warm());
    assert_eq!(d.switch, None);
    assert!((d.rewrite_cost - 6_500.0).abs() < 1e-9);
    assert!((d.projected_saving - 3_600.0).abs() < 1e-9);

    // R = 17: 16 · 400 = 6,400, still short; R = 18: 17 · 400 = 6,800 > 6,500.
    let d = decide_switch(&SwitchInputs {
        expected_calls: 17,
        ..warm()
    });
    assert_eq!(d.switch, None);
    let d = decide_switch(&SwitchInputs {
        expected_calls: 18,
        ..warm()
    });
    assert_eq!(d.switch, Some(SwitchReason::Pays));
    assert!((d.projected_saving - 6_800.0).abs() < 1e-9);
}

#[test]
fn what_the_previous_call_did_not_send_is_no_part_of_the_rewrite() {
    // N = 3,000 of the suffix is new: S' = 7,000.
    // Rewrite: (7,000 − 4,000)·1.25 − 7,000·0.1 = 3,750 − 700 = 3,050.
    // R = 10: 9 · 400 = 3,600 > 3,050: the switch pays now.
    let d = decide_switch(&SwitchInputs {
        new_tokens: 3_000,
        ..warm()
    });
    assert_eq!(d.switch, Some(SwitchReason::Pays));
    assert!((d.rewrite_cost - 3_050.0).abs() < 1e-9);
    // The whole suffix new: the switch only removes (P capped at S' = 0).
    let d = decide_switch(&SwitchInputs {
        new_tokens: 10_000,
        expected_calls: 1,
        ..warm()
    });
    assert_eq!(d.rewrite_cost, 0.0);
}

#[test]
fn expected_cold_rewrites_count_at_the_write_price() {
    // c = 0.5: per later call 4,000 · (0.5·0.1 + 0.5·1.25) = 2,700;
    // R = 3: 2 · 2,700 = 5,400 < 6,500; R = 4: 8,100 > 6,500.
    let three = SwitchInputs {
        expected_calls: 3,
        cold_share: 0.5,
        ..warm()
    };
    assert_eq!(decide_switch(&three).switch, None);
    let four = SwitchInputs {
        expected_calls: 4,
        ..three
    };
    let d = decide_switch(&four);
    assert_eq!(d.switch, Some(SwitchReason::Pays));
    assert!((d.projected_saving - 8_100.0).abs() < 1e-9);
}

#[test]
fn a_cold_cache_switches_for_free() {
    // A gap of exactly the TTL is still warm; one millisecond more is not.
    let at_ttl = SwitchInputs {
        previous_call_ms: Some(700_000),
        expected_calls: 1,
        ..warm()
    };
    assert_eq!(decide_switch(&at_ttl).switch, None);
    let past = SwitchInputs {
        previous_call_ms: Some(699_999),
        ..at_ttl.clone()
    };
    let d = decide_switch(&past);
    assert_eq!(d.switch, Some(SwitchReason::IdleExpiry));
    assert_eq!(d.rewrite_cost, 0.0);

    let resumed = SwitchInputs {
        cold_event: Some(ColdEvent::Resume),
        ..at_ttl.clone()
    };
    assert_eq!(decide_switch(&resumed).switch, Some(SwitchReason::Resume));
    let model = SwitchInputs {
        cold_event: Some(ColdEvent::ModelChange),
        ..at_ttl.clone()
    };
    assert_eq!(
        decide_switch(&model).switch,
        Some(SwitchReason::ModelChange)
    );
    // After pi's compaction the prompt is written anew from its start: a
    // switch costs nothing, even outside the bound.
    let compacted = SwitchInputs {
        cold_event: Some(ColdEvent::Compaction),
        within_bound: false,
        ..at_ttl
    };
    let d = decide_switch(&compacted);
    assert_eq!(d.switch, Some(SwitchReason::Compaction));
    assert_eq!(d.rewrite_cost, 0.0);
}

#[test]
fn pressure_switches_whatever_it_costs() {
    // 0.8 · 200,000 = 160,000 tokens.
    let below = SwitchInputs {
        prompt_tokens: 159_999,
        expected_calls: 1,
        ..warm()
    };
    assert_eq!(decide_switch(&below).switch, None);
    let at = SwitchInputs {
        prompt_tokens: 160_000,
        ..below.clone()
    };
    assert_eq!(decide_switch(&at).switch, Some(SwitchReason::Pressure));
    let budget = SwitchInputs {
        budget_triggered: true,
        context_window: None,
        ..below
    };
    assert_eq!(decide_switch(&budget).switch, Some(SwitchReason::Pressure));
}

#[test]
fn nothing_to_remove_never_switches() {
    let d = decide_switch(&SwitchInputs {
        removed_tokens: 0,
        cold_event: Some(ColdEvent::Resume),
        budget_triggered: true,
        ..warm()
    });
    assert_eq!(d.switch, None);
}

fn flush() -> SummarizeInputs {
    SummarizeInputs {
        prices: ANTHROPIC_5M,
        summarizer_input_price: 1.0,
        summarizer_output_price: 5.0,
        summarizer_input_tokens: 5_000,
        summarizer_output_tokens: 500,
        suffix_tokens: 10_000,
        removed_tokens: 4_000,
        expected_calls: 30,
        cold_share: 0.0,
        prompt_tokens: 50_000,
        context_window: Some(200_000),
        pressure_share: 0.8,
        budget_triggered: false,
        headroom: 1e12,
        bound_cost: 5_000.0,
        headroom_ahead: 0.0,
    }
}

#[test]
fn summarizing_waits_until_showing_would_repay_the_summarizer() {
    // Summarizer: 5,000 · 1 + 500 · 5 = 7,500. Rewrite at a warm switch: 6,500.
    // R = 30: 30 · 400 − 6,500 = 5,500 < 7,500: defer.
    let d = decide_summarize(&flush());
    assert!(!d.summarize);
    assert!((d.summarizer_cost - 7_500.0).abs() < 1e-9);
    assert!((d.net_saving - 5_500.0).abs() < 1e-9);
    // R = 40: 16,000 − 6,500 = 9,500 > 7,500: summarize.
    let d = decide_summarize(&SummarizeInputs {
        expected_calls: 40,
        ..flush()
    });
    assert!(d.summarize);
    assert!((d.net_saving - 9_500.0).abs() < 1e-9);
}

#[test]
fn pressure_summarizes_whatever_it_costs_but_never_for_nothing() {
    let pressed = SummarizeInputs {
        prompt_tokens: 170_000,
        ..flush()
    };
    assert!(decide_summarize(&pressed).summarize);
    let empty = SummarizeInputs {
        removed_tokens: 0,
        budget_triggered: true,
        ..flush()
    };
    assert!(!decide_summarize(&empty).summarize);
}

#[test]
fn estimates_from_the_session_so_far() {
    // Three times the calls so far, at least as many as one call's.
    assert_eq!(expected_calls(0), 3);
    assert_eq!(expected_calls(1), 3);
    assert_eq!(expected_calls(12), 36);
    // Capped by pi's compaction: 100,000 tokens in 20 calls (5,000 a
    // call) leave (200,000 − 16,384 − 100,000) / 5,000 = 16 calls, and this one.
    assert_eq!(
        calls_before_compaction(100_000, 20, Some(200_000)),
        Some(17)
    );
    assert_eq!(calls_before_compaction(190_000, 20, Some(200_000)), Some(1));
    assert_eq!(calls_before_compaction(100_000, 20, None), None);
    assert_eq!(cold_share(0, 0), 0.0);
    assert_eq!(cold_share(1, 4), 0.25);
    assert_eq!(cold_share(9, 4), 1.0);
}

#[test]
fn policy_names_round_trip() {
    for p in Policy::ALL {
        assert_eq!(Policy::from_name(p.name()), Some(p));
    }
    assert_eq!(Policy::from_name("Reference"), None);
    assert_eq!(
        Policy::ALL[0],
        condense_core::Config::default().economy.policy,
        "the default first"
    );
    assert!(Policy::CacheAware.gates_on_switch());
    assert!(!Policy::Reference.gates_on_switch());
    for r in [
        SwitchReason::IdleExpiry,
        SwitchReason::Resume,
        SwitchReason::ModelChange,
        SwitchReason::Compaction,
        SwitchReason::Pressure,
        SwitchReason::Pays,
        SwitchReason::Start,
        SwitchReason::User,
    ] {
        assert_eq!(SwitchReason::from_name(r.as_str()), Some(r));
    }
}

fn msg(v: serde_json::Value) -> condense_core::Message {
    condense_core::Message::from_value(&v).expect("a message")
}

#[test]
fn switch_sizes_measure_from_the_first_changed_message() {
    // Tokens are chars / 4 of what reaches the model: the content, not
    // pi's `details` beside it.
    let user = msg(serde_json::json!({"role": "user", "content": "x".repeat(390)}));
    let raw = msg(serde_json::json!({"role": "toolResult", "toolCallId": "c",
        "content": "y".repeat(3950), "details": {"fullOutput": "y".repeat(3950)}}));
    let stub = msg(
        serde_json::json!({"role": "toolResult", "toolCallId": "c", "content": "s".repeat(350)}),
    );
    let tail = msg(serde_json::json!({"role": "user", "content": "z".repeat(790)}));
    let t = condense_core::Message::prompt_tokens;
    assert_eq!(t(&raw), 988);
    let current = [user.clone(), raw.clone(), tail.clone()];
    let shown = [user.clone(), stub.clone(), tail.clone()];
    let sizes = condense_core::switch_sizes(&current, &shown);
    assert_eq!(sizes.prompt_tokens, t(&user) + t(&raw) + t(&tail));
    assert_eq!(sizes.suffix_tokens, t(&raw) + t(&tail));
    assert_eq!(sizes.removed_tokens, t(&raw) - t(&stub));
    assert_eq!(t(&raw) - t(&stub), 900);
    let none = condense_core::switch_sizes(&current, &current);
    assert_eq!((none.suffix_tokens, none.removed_tokens), (0, 0));
}

#[test]
fn call_history_counts_calls_after_idle_gaps() {
    let a = |ts: i64| msg(serde_json::json!({"role": "assistant", "content": [], "timestamp": ts}));
    let u = msg(serde_json::json!({"role": "user", "content": "go", "timestamp": 1}));
    // Gaps: 100 s (warm), exactly 300 s (warm), 300.001 s (cold).
    let messages = [u, a(0), a(100_000), a(400_000), a(700_001)];
    assert_eq!(condense_core::call_history(&messages, 300_000), (4, 1));
}

#[test]
fn the_cache_aware_budget_threshold_is_at_most_the_pressure_share() {
    use condense_core::budget_threshold;
    // The reference policy keeps pi-condense's setting, off by default.
    assert_eq!(budget_threshold(Policy::Reference, None, 0.8), None);
    assert_eq!(
        budget_threshold(Policy::Reference, Some(0.9), 0.8),
        Some(0.9)
    );
    // The cache-aware policy flushes by 0.95 of the pressure share at the
    // latest: 0.76 of the window, room for the turn before the switch.
    let latest = budget_threshold(Policy::CacheAware, None, 0.8).unwrap();
    assert!((latest - 0.76).abs() < 1e-12);
    assert_eq!(
        budget_threshold(Policy::CacheAware, Some(0.9), 0.8),
        Some(latest)
    );
    assert_eq!(
        budget_threshold(Policy::CacheAware, Some(0.5), 0.8),
        Some(0.5)
    );
}

#[test]
fn a_switch_that_would_pay_later_waits_until_the_savings_so_far_cover_it() {
    // Repays over 100 calls (99 · 400 = 39,600 > 6,500), but the session
    // could end here and the rewrite would be lost: held.
    let pays = SwitchInputs {
        expected_calls: 100,
        ..warm()
    };
    assert_eq!(decide_switch(&pays).switch, Some(SwitchReason::Pays));
    let unfunded = SwitchInputs {
        within_bound: false,
        ..pays.clone()
    };
    assert_eq!(decide_switch(&unfunded).switch, None);
    // A cold cache switches whatever the bound; pressure only within it
    // (unpruned, the prompt goes to pi's compaction, as with no pruning).
    let cold = SwitchInputs {
        now_ms: 2_000_000,
        ..unfunded.clone()
    };
    assert_eq!(decide_switch(&cold).switch, Some(SwitchReason::IdleExpiry));
    let pressed = SwitchInputs {
        prompt_tokens: 170_000,
        ..unfunded
    };
    assert_eq!(decide_switch(&pressed).switch, None);
    let pressed_within = SwitchInputs {
        within_bound: true,
        ..pressed
    };
    assert_eq!(
        decide_switch(&pressed_within).switch,
        Some(SwitchReason::Pressure)
    );
}

#[test]
fn a_summary_that_would_pay_later_waits_until_the_savings_so_far_pay_it() {
    let pays = SummarizeInputs {
        expected_calls: 40,
        ..flush()
    };
    assert!(decide_summarize(&pays).summarize);
    // The summarizer costs 7,500, of which the bound is charged its input,
    // 5,000 (its output is charged once written). The warm switch that
    // will show the summaries rewrites 6,500: the headroom must pay both,
    // or the summaries would sit in every later prompt beside the outputs
    // they summarize.
    let summarizer_only = SummarizeInputs {
        headroom: 5_000.0,
        ..pays.clone()
    };
    let d = decide_summarize(&summarizer_only);
    assert!(!d.summarize);
    assert_eq!(d.held, Some(condense_core::Hold::AllowanceSpent));
    // The headroom the calls until then are expected to add may pay the
    // switch; never the summarizer, paid now.
    let switch_paid_later = SummarizeInputs {
        headroom_ahead: 6_500.0,
        ..summarizer_only.clone()
    };
    assert!(decide_summarize(&switch_paid_later).summarize);
    let summarizer_unpaid = SummarizeInputs {
        headroom: 4_999.0,
        headroom_ahead: 1e12,
        ..pays.clone()
    };
    assert!(!decide_summarize(&summarizer_unpaid).summarize);
    let short = SummarizeInputs {
        headroom: 11_499.0,
        ..pays.clone()
    };
    assert!(!decide_summarize(&short).summarize);
    let enough = SummarizeInputs {
        headroom: 11_500.0,
        ..pays.clone()
    };
    assert!(decide_summarize(&enough).summarize);
    let pressed = SummarizeInputs {
        budget_triggered: true,
        ..short
    };
    assert!(!decide_summarize(&pressed).summarize);
    let pressed_within = SummarizeInputs {
        headroom: 11_500.0,
        expected_calls: 1,
        ..pressed
    };
    assert!(decide_summarize(&pressed_within).summarize);
}

/// Each decision says why it holds back what it could act on, and says
/// nothing when it acts or has nothing to act on.
#[test]
fn a_held_decision_says_why() {
    use condense_core::Hold;
    assert_eq!(decide_switch(&warm()).held, Some(Hold::ColdCache));
    let outside = SwitchInputs {
        within_bound: false,
        ..warm()
    };
    assert_eq!(decide_switch(&outside).held, Some(Hold::AllowanceSpent));
    let pays = SwitchInputs {
        expected_calls: 18,
        ..warm()
    };
    assert_eq!(decide_switch(&pays).held, None);
    let nothing = SwitchInputs {
        removed_tokens: 0,
        ..warm()
    };
    assert_eq!(decide_switch(&nothing).held, None);

    assert_eq!(decide_summarize(&flush()).held, Some(Hold::NotRepaid));
    let no_headroom = SummarizeInputs {
        headroom: 4_999.0,
        expected_calls: 40,
        ..flush()
    };
    assert_eq!(
        decide_summarize(&no_headroom).held,
        Some(Hold::AllowanceSpent)
    );
    let repaid = SummarizeInputs {
        expected_calls: 40,
        ..flush()
    };
    assert_eq!(decide_summarize(&repaid).held, None);
    assert_eq!(Hold::ColdCache.as_str(), "waiting for a cold cache");
}
