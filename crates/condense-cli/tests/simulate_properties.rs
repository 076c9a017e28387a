//! Properties of the engine-driven policies over generated sessions with
//! random idle gaps (`condense gen --idle-gaps`), checked through
//! `condense simulate --json`: every output a prompt left out is read back
//! whole, and a reload of the session the run would have left renders what
//! the run rendered.
//!
//! The default, `cache-aware` bounded by `economy.maxExcess`
//! ([`DEFAULT_MAX_EXCESS`]), bills in total (prompts, outputs and the
//! summarizer: the report's `total_units`) at most that share above no
//! pruning; with `maxExcess: 0` it never bills more. Unbounded
//! (`maxExcess: null`) it bets on its projections, and a session that ends
//! before a bet repays bills more: that property is kept here, ignored,
//! with the smallest counterexample proptest found (the argument and
//! figures in docs/economy.md).

mod support;

use std::path::{Path, PathBuf};

use condense_core::DEFAULT_MAX_EXCESS;
use proptest::prelude::*;
use serde_json::Value;

use support::{condense, generate, Generated};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "condense-simulate-properties-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn simulate(seed: u64, tokens: u64, gaps: u64, shape: &str) -> Value {
    simulate_with(seed, tokens, gaps, shape, &[])
}

/// Writes the session `condense gen` makes of these parameters into `dir`,
/// its file name starting with `prefix`.
fn generated(dir: &Path, prefix: &str, seed: u64, tokens: u64, gaps: u64, shape: &str) -> PathBuf {
    generated_missing(dir, prefix, seed, tokens, gaps, shape, None)
}

/// [`generated`], its usage reporting the cache misses `miss_rates` draws.
fn generated_missing(
    dir: &Path,
    prefix: &str,
    seed: u64,
    tokens: u64,
    gaps: u64,
    shape: &str,
    miss_rates: Option<&str>,
) -> PathBuf {
    let file = dir.join(format!("{prefix}{seed}-{tokens}-{gaps}-{shape}.jsonl"));
    generate(
        dir,
        &file,
        &Generated {
            tokens,
            seed,
            idle_gaps: gaps,
            shape: Some(shape),
            miss_rates,
        },
    );
    file
}

/// `simulate --json` of one generated session, with `extra` arguments.
fn simulate_with(seed: u64, tokens: u64, gaps: u64, shape: &str, extra: &[&str]) -> Value {
    simulate_missing(seed, tokens, gaps, shape, None, extra)
}

/// [`simulate_with`] of a session whose usage reports the misses
/// `miss_rates` draws.
fn simulate_missing(
    seed: u64,
    tokens: u64,
    gaps: u64,
    shape: &str,
    miss_rates: Option<&str>,
    extra: &[&str],
) -> Value {
    let dir = dir();
    let file = generated_missing(&dir, "s", seed, tokens, gaps, shape, miss_rates);
    let mut args = vec!["simulate", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = condense(&dir, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&file);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn shape() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["realistic", "tasks"])
}

/// Every shape the generator writes, autonomous runs (`tool-turns`) too:
/// a run can stop right after a tool outlived the cache.
fn any_shape() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["realistic", "tasks", "tool-turns"])
}

/// A generated run cut off at a tool result that came back after the cache
/// expired (the last of its seven calls at 16:12:18, the result at 16:26:28).
/// The turn's end used to flush for a call the recording does not hold,
/// and the default billed 19,127 units against 15,017 without pruning.
#[test]
fn a_run_cut_off_after_a_slow_tool_bills_no_more_than_no_pruning() {
    let v = simulate(72_051, 6_331, 45, "tool-turns");
    let p = &v["sessions"][0]["policies"];
    assert_eq!(p["cache-aware"]["calls"], 7);
    assert_eq!(p["cache-aware"]["summarizer_input_tokens"], 0);
    assert!(total(&v, "cache-aware") <= total(&v, "none"));
}

/// A summarizer at five times the main model's price (a `summarizerModel`
/// dearer than the session's). The simulated engine planned at the default
/// ratio of 1 whatever the run billed, and the default billed 337,491
/// units against 276,902 without pruning; priced right, its summaries never
/// pay here.
#[test]
fn a_summarizer_dearer_than_the_model_bills_no_more_than_no_pruning() {
    let terms = ["--summarizer-price", "5"];
    let v = simulate_with(8_826, 45_000, 40, "tool-turns", &terms);
    default_within_allowance(&v, &terms).unwrap();
}

/// A summarizer at five times the model's price under OpenAI's terms,
/// whose output costs eight times its input. When the bound weighed a
/// flush's summarizer input alone, the summaries' output (2,735 tokens)
/// cost more than the outputs they replaced saved, and the default billed
/// 460,457 units against 417,187 without pruning. The bound now charges
/// each flush the output its summaries are expected to write.
#[test]
fn a_dear_summarizers_output_stays_within_no_pruning_in_total() {
    let terms = ["--profile", "openai", "--summarizer-price", "5"];
    let v = simulate_with(8_823, 60_000, 40, "realistic", &terms);
    default_within_allowance(&v, &terms).unwrap();
    let strict = simulate_strict(8_823, 60_000, 40, "realistic", &terms);
    strictly_within_no_pruning(&strict, &terms).unwrap();
}

/// A first flush of twelve calls, merged, whose summaries the extractive
/// summarizer wrote at 156 tokens a call. Projected at a merged summary's
/// 100 tokens a call, the flush passed the allowance by the difference at
/// the output price (eight times input, the summarizer at three times the
/// model), and the default billed 261,889 units against 250,562 (+4.5%).
#[test]
fn a_first_flush_is_charged_a_summary_a_call_before_the_session_wrote_one() {
    let terms = ["--profile", "openai", "--summarizer-price", "3"];
    let v = simulate_with(93_043, 38_253, 44, "realistic", &terms);
    default_within_allowance(&v, &terms).unwrap();
}

/// Anthropic's one-hour cache, whose writes cost twice an input token. The
/// simulated engine planned with the five-minute terms, and the default
/// billed 68,786 units against 64,690 without pruning.
#[test]
fn the_one_hour_cache_bills_no_more_than_no_pruning() {
    let terms = ["--profile", "anthropic-1h"];
    let v = simulate_with(8_832, 15_000, 40, "realistic", &terms);
    default_within_allowance(&v, &terms).unwrap();
}

/// A long session with no idle gap that pi compacts without pruning, its
/// summarizer at five times the model's price. The bound weighs the same
/// calls unpruned and uncompacted, so it never sees what pi's compaction
/// saves no pruning (docs/economy.md, "What is not guaranteed"). When a
/// flush took all that was pending or nothing, the default flushed late
/// and dear and billed 2,141,840 units against 2,091,413 (+2.41%); flushing
/// the newest run alone when the rest does not pay, it bills 1,560,124
/// (−25.4%).
#[test]
fn a_session_that_runs_into_pis_compaction_bills_within_the_allowance() {
    let terms = ["--profile", "openai", "--summarizer-price", "5"];
    let v = simulate_with(43, 180_517, 0, "realistic", &terms);
    let none = &v["sessions"][0]["policies"]["none"];
    assert!(
        none["compactions"].as_u64() > Some(0),
        "pi compacts it unpruned"
    );
    default_within_allowance(&v, &terms).unwrap();
}

/// A session that pi compacts without pruning, with the summarizer at the
/// model's price. With the bound at `maxExcess: 0` the default flushed
/// near the second compaction point, which left its prompt just under
/// pi's threshold when the task ended, and billed 3,592,042 units of
/// billed input against 3,535,937 (+1.6%). With the allowance it prunes
/// from the first run and saves a fifth.
#[test]
fn a_session_pi_compacts_bills_within_the_allowance_with_a_summarizer_at_the_models_price() {
    let terms = ["--profile", "openai", "--summarizer-price", "1"];
    let v = simulate_with(40, 276_760, 0, "tasks", &terms);
    let none = &v["sessions"][0]["policies"]["none"];
    assert!(
        none["compactions"].as_u64() > Some(0),
        "pi compacts it unpruned"
    );
    default_within_allowance(&v, &terms).unwrap();
}

/// A session that pi compacts twice unpruned and the default once: after no
/// pruning's second compaction, its prompts are a summary and the newest
/// messages. Weighed against the same calls uncompacted (prompts past the
/// window), the bound counted savings no pruning never paid for and spent
/// them on eight flushes at five times the model's price: 5,687,972 units
/// against 5,556,656 (+2.36%, g2 of docs/economy.md's "the 60"). Priced
/// after no pruning's compaction, they are not paid for.
#[test]
fn the_bound_prices_no_pruning_after_its_own_compaction() {
    let terms = ["--profile", "openai", "--summarizer-price", "5"];
    let v = simulate_with(2, 320_000, 30, "tasks", &terms);
    let none = &v["sessions"][0]["policies"]["none"];
    assert_eq!(
        none["compactions"].as_u64(),
        Some(2),
        "pi compacts it twice unpruned"
    );
    default_within_allowance(&v, &terms).unwrap();
}

/// A session that pi compacts unpruned at call 131, the strict bound at a
/// one-hour cache and the summarizer at three times the model's price. At
/// the call where no pruning compacts, a pressure switch rewrote 141,000
/// tokens, paid with savings that the 30 calls to the session's own
/// compaction, its prompt that much longer than no pruning's, gave back:
/// 2,742,714 units against 2,422,067 (+13.2%, s89 of docs/economy.md's
/// "no gaps"). Those calls' excess is kept out of the headroom.
#[test]
fn what_a_longer_prompt_owes_after_no_prunings_compaction_is_not_bet() {
    let terms = ["--profile", "anthropic-1h", "--summarizer-price", "3"];
    let v = simulate_strict(89, 184_791, 0, "realistic", &terms);
    let none = &v["sessions"][0]["policies"]["none"];
    assert_eq!(
        none["compactions"].as_u64(),
        Some(1),
        "pi compacts it unpruned"
    );
    strictly_within_no_pruning(&v, &terms).unwrap();
}

/// A session that pi compacts unpruned at call 116, the strict bound at a
/// one-hour cache and the summarizer at three times the model's price
/// (s87 of docs/economy.md's "no gaps"). Its one flush, at call 19, saved
/// 285,000 units by call 116; running on to its own compaction at call 139
/// with a prompt longer than no pruning's gave them back and more: +3.7%
/// over no pruning. Once what the calls ahead owe passes what the bound
/// has left, at a run's end, the engine asks pi to compact, and the
/// simulator compacts there as pi does when asked.
#[test]
fn a_pruned_session_compacts_where_running_on_would_pass_the_bound() {
    let terms = ["--profile", "anthropic-1h", "--summarizer-price", "3"];
    let mut args = terms.to_vec();
    args.push("--per-call");
    let v = simulate_strict(87, 168_953, 0, "realistic", &args);
    let policies = &v["sessions"][0]["policies"];
    let reasons = |policy: &str| -> Vec<String> {
        policies[policy]["calls_detail"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["compaction"]["reason"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(reasons("none"), ["threshold"], "pi compacts it unpruned");
    assert_eq!(
        reasons("settings"),
        ["requested"],
        "the pruned session compacts when asked, never by pi's own check"
    );
    strictly_within_no_pruning(&v, &terms).unwrap();
}

/// The total a policy billed: prompts, outputs and the summarizer.
fn total(v: &Value, policy: &str) -> f64 {
    v["sessions"][0]["policies"][policy]["total_units"]
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// The property of the default: in total it billed at most its allowance
/// above no pruning (`terms`: the run's price flags, for the message).
fn default_within_allowance(v: &Value, terms: &[&str]) -> Result<(), TestCaseError> {
    policy_within_allowance(v, "cache-aware", terms)
}

/// [`default_within_allowance`] for the default as `policy` ran it.
fn policy_within_allowance(v: &Value, policy: &str, terms: &[&str]) -> Result<(), TestCaseError> {
    let (default, none) = (total(v, policy), total(v, "none"));
    prop_assert!(
        default <= none * (1.0 + DEFAULT_MAX_EXCESS),
        "the default {} > none {} by {:+.2}% at {:?}",
        default,
        none,
        100.0 * (default / none - 1.0),
        terms
    );
    Ok(())
}

/// `simulate --json` of one generated session under `terms`, the default
/// policy set to `maxExcess: 0` and planning at those terms, as `settings`.
fn simulate_strict(seed: u64, tokens: u64, gaps: u64, shape: &str, terms: &[&str]) -> Value {
    let settings = settings_at(terms, "strict", r#""maxExcess": 0, "#);
    let mut args = terms.to_vec();
    let settings = settings.to_str().unwrap().to_owned();
    args.extend(["--policy", "none,settings", "--settings", &settings]);
    simulate_with(seed, tokens, gaps, shape, &args)
}

/// A settings file whose `cache-aware` policy plans at `terms`' profile and
/// summarizer price, with `economy` (keys and their trailing commas) added.
fn settings_at(terms: &[&str], name: &str, economy: &str) -> PathBuf {
    let flag = |name: &str| {
        terms
            .iter()
            .position(|t| *t == name)
            .map(|i| terms[i + 1].to_owned())
    };
    let profile = flag("--profile").unwrap_or_else(|| "anthropic-5m".to_owned());
    let price = flag("--summarizer-price").unwrap_or_else(|| "1".to_owned());
    let settings = dir().join(format!("{name}-{profile}-{price}.json"));
    std::fs::write(
        &settings,
        format!(
            r#"{{"contextPrune": {{"enabled": true, "economy": {{"policy": "cache-aware", {economy}"profile": "{profile}", "summarizerPrice": {price}}}}}}}"#
        ),
    )
    .unwrap();
    settings
}

/// The strict bound's property: in total it billed at most no pruning.
fn strictly_within_no_pruning(v: &Value, terms: &[&str]) -> Result<(), TestCaseError> {
    let (strict, none) = (total(v, "settings"), total(v, "none"));
    prop_assert!(
        strict <= none,
        "maxExcess 0 billed {} > none {} at {:?}",
        strict,
        none,
        terms
    );
    Ok(())
}

/// `simulate --json` of one generated session as written, and of the same
/// session with each tool result carrying pi's `details` (here the output
/// again, as a truncated read's full output): text the model never reads.
fn simulate_with_and_without_details(
    seed: u64,
    tokens: u64,
    gaps: u64,
    shape: &str,
) -> (Value, Value) {
    let dir = dir();
    let file = generated(&dir, "d", seed, tokens, gaps, shape);
    let text = std::fs::read_to_string(&file).unwrap();
    let (mut plain, mut detailed) = (String::new(), String::new());
    for line in text.lines() {
        let mut entry: Value = serde_json::from_str(line).unwrap();
        plain.push_str(&entry.to_string());
        plain.push('\n');
        if let Some(message) = entry.get_mut("message") {
            if message["role"] == "toolResult" {
                let output = message["content"].clone();
                message["details"] = serde_json::json!({ "fullOutput": output });
            }
        }
        detailed.push_str(&entry.to_string());
        detailed.push('\n');
    }
    let run = |name: &str, text: &str| {
        let path = dir.join(format!("{name}-{seed}-{tokens}-{gaps}-{shape}.jsonl"));
        std::fs::write(&path, text).unwrap();
        let out = condense(&dir, &["simulate", path.to_str().unwrap(), "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_file(&path);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let _ = std::fs::remove_file(&file);
    (run("plain", &plain), run("detailed", &detailed))
}

/// The provider's terms a run is priced at: every profile, with the
/// summarizer at a quarter of the model's price up to five times it.
/// One to five miss shares, as `--miss-rates` takes them.
fn miss_rates() -> impl Strategy<Value = String> {
    prop::collection::vec(0.0f64..=1.0, 1..=5).prop_map(|rates| {
        rates
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn price_terms() -> impl Strategy<Value = Vec<&'static str>> {
    let profile = prop::sample::select(vec!["anthropic-5m", "anthropic-1h", "openai"]);
    let price = prop::sample::select(vec!["0.25", "1", "3", "5"]);
    (profile, price)
        .prop_map(|(profile, price)| vec!["--profile", profile, "--summarizer-price", price])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_output_left_out_is_recoverable_and_a_reload_renders_the_same(
        seed in 1u64..10_000,
        tokens in 15_000u64..90_000,
        gaps in 0u64..70,
        shape in shape(),
    ) {
        let v = simulate(seed, tokens, gaps, shape);
        let p = &v["sessions"][0]["policies"];
        for name in ["reference", "cache-aware"] {
            prop_assert_eq!(&p[name]["outputs_recoverable"], &p[name]["tool_outputs"], "{}", name);
            prop_assert_eq!(&p[name]["reload_renders_the_same"], &Value::Bool(true), "{}", name);
        }
    }

    /// What of a message the model never reads (pi's `details`) changes
    /// nothing a policy decides or bills: the engine weighs prompts, and
    /// what a stub removes, on what reaches the model, as the bill does.
    #[test]
    fn what_the_model_never_reads_changes_nothing_a_policy_decides(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
    ) {
        let (plain, detailed) = simulate_with_and_without_details(seed, tokens, gaps, shape);
        let (plain, detailed) = (
            &plain["sessions"][0]["policies"],
            &detailed["sessions"][0]["policies"],
        );
        for name in ["none", "reference", "cache-aware"] {
            for field in ["total_units", "prompt_tokens", "summarizer_units", "flushes", "switches"] {
                prop_assert_eq!(&plain[name][field], &detailed[name][field], "{} {}", name, field);
            }
        }
    }

    /// The default policy: `cache-aware` bounded at its allowance.
    #[test]
    fn the_default_bills_within_its_allowance_of_no_pruning(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
    ) {
        default_within_allowance(&simulate(seed, tokens, gaps, shape), &[])?;
    }

    /// The default configured for the provider's terms (the simulator
    /// passes the terms it prices at to the engine, as `economy.profile`
    /// and the price keys beside it).
    #[test]
    fn the_default_bills_within_its_allowance_at_any_price_terms(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
        terms in price_terms(),
    ) {
        default_within_allowance(&simulate_with(seed, tokens, gaps, shape, &terms), &terms)?;
    }

    /// The default under a provider that misses cached prefixes before
    /// their TTL (`--miss-rates`, each call billed at its expected cost):
    /// the simulator passes the miss model to the engine
    /// (`economy.missRates`), which plans with it, and the allowance holds
    /// on the expected bill.
    #[test]
    fn the_default_bills_within_its_allowance_under_a_miss_model(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
        terms in price_terms(),
        rates in miss_rates(),
    ) {
        let mut terms: Vec<&str> = terms;
        terms.extend(["--miss-rates", rates.as_str()]);
        default_within_allowance(&simulate_with(seed, tokens, gaps, shape, &terms), &terms)?;
    }

    /// The default as configured, learning the misses from the usage the
    /// session reports (`"missRates": "learn"`), under a provider that
    /// misses as drawn, billed at those misses' expected cost: within its
    /// allowance, though what it learned is not the rates drawn.
    #[test]
    fn the_default_learning_the_misses_bills_within_its_allowance(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
        terms in price_terms(),
        rates in miss_rates(),
    ) {
        let settings = settings_at(&terms, "default", "");
        let mut args: Vec<&str> = terms.clone();
        let settings = settings.to_str().unwrap().to_owned();
        args.extend(["--miss-rates", rates.as_str(), "--policy", "none,settings", "--settings", &settings]);
        let v = simulate_missing(seed, tokens, gaps, shape, Some(&rates), &args);
        policy_within_allowance(&v, "settings", &args)?;
    }

    /// `maxExcess: 0`, the strict bound, at any terms: never above no
    /// pruning in total.
    #[test]
    fn with_no_allowance_it_never_bills_more_than_no_pruning_at_any_price_terms(
        seed in 1u64..100_000,
        tokens in 4_000u64..90_000,
        gaps in 0u64..70,
        shape in any_shape(),
        terms in price_terms(),
    ) {
        strictly_within_no_pruning(&simulate_strict(seed, tokens, gaps, shape, &terms), &terms)?;
    }

    #[test]
    #[ignore = "not possible for a policy that bets on its projections (docs/economy.md, the issue's targets; bounded, the default, it holds: the test above): seed 8888, 15,000 tokens, no gaps, tasks bills 68,640 unbounded (77,260 under reference) against 65,533 without pruning"]
    fn unbounded_cache_aware_never_bills_more_than_no_pruning(
        seed in 1u64..10_000,
        tokens in 15_000u64..90_000,
        gaps in 0u64..70,
        shape in shape(),
    ) {
        let settings = dir().join("unbounded.json");
        std::fs::write(
            &settings,
            r#"{"contextPrune": {"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": null}}}"#,
        )
        .unwrap();
        let v = simulate_with(seed, tokens, gaps, shape, &["--settings", settings.to_str().unwrap()]);
        let p = &v["sessions"][0]["policies"];
        let billed = |name: &str| p[name]["billed_input_units"].as_f64().unwrap_or(f64::NAN);
        prop_assert!(
            billed("settings") <= billed("none"),
            "unbounded {} > none {}", billed("settings"), billed("none")
        );
    }
}
