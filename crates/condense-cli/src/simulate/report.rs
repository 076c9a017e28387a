//! `condense simulate`'s report: a table per session, totals and
//! per-session distributions for a directory, or one JSON object.

use condense_core::{BillTotals, PriceProfile};
use serde_json::{json, Map, Value};

use super::fidelity::Fidelity;
use super::misses::Misses;
use super::replay::{recorded_totals, PolicyRun, SimCall};
use super::tokens::Coefficients;
use super::SessionSim;
use crate::jobs::percentile;
use condense_core::MissRates;

/// How far the no-pruning replay's total may be from the recorded prompts
/// before the report suggests `--calibrate` (the pi-mono sessions land
/// within 0.3%).
const FAR_FROM_RECORDED: f64 = 0.2;

/// The skipped lines the text report names; a file of malformed lines
/// would otherwise print one report line each.
const LISTED_PROBLEMS: usize = 20;

/// Everything the report shows.
pub struct Report<'a> {
    /// The price profile in force.
    pub profile: &'a PriceProfile,
    /// The token model in force.
    pub coefficients: &'a Coefficients,
    /// The sessions simulated.
    pub sims: &'a [SessionSim],
    /// Sessions that could not be simulated, as messages.
    pub failures: &'a [String],
    /// A directory (totals and distributions) rather than one session.
    pub corpus: bool,
    /// List every call in the JSON.
    pub per_call: bool,
    /// The miss rates the calls were billed at (`--miss-rates`).
    pub miss_rates: Option<&'a MissRates>,
}

fn totals_json(t: &BillTotals, profile: &PriceProfile) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("calls".into(), json!(t.calls));
    m.insert("prompt_tokens".into(), json!(t.prompt_tokens));
    m.insert("peak_prompt_tokens".into(), json!(t.peak_prompt));
    m.insert("cache_read_tokens".into(), json!(t.cache_read));
    m.insert("cache_write_tokens".into(), json!(t.cache_write));
    m.insert("uncached_tokens".into(), json!(t.uncached));
    m.insert("cache_hit_share".into(), json!(t.cache_hit_share()));
    m.insert("output_tokens".into(), json!(t.output));
    m.insert(
        "billed_input_units".into(),
        json!(t.billed_input_units(profile)),
    );
    m.insert("input_units".into(), json!(t.input_units));
    m.insert("output_units".into(), json!(t.output_units));
    m.insert("summarizer_input_tokens".into(), json!(t.summarizer_input));
    m.insert(
        "summarizer_output_tokens".into(),
        json!(t.summarizer_output),
    );
    m.insert("summarizer_units".into(), json!(t.summarizer_units));
    m.insert("total_units".into(), json!(t.total_units()));
    m.insert("cost_usd".into(), json!(t.usd(profile)));
    m
}

fn call_json(c: &SimCall) -> Value {
    json!({
        "at_ms": c.at_ms,
        "prompt_tokens": c.prompt,
        "shared_prefix_tokens": c.shared_prefix,
        "messages": c.messages,
        "cache_read_tokens": c.bill.cache_read,
        "cache_write_tokens": c.bill.cache_write,
        "uncached_tokens": c.bill.uncached,
        "output_tokens": c.bill.output,
        "input_units": c.bill.input_units,
        "output_units": c.bill.output_units,
        "summarizer_input_tokens": c.summarizer.input,
        "summarizer_output_tokens": c.summarizer.output,
        "compaction": c.compaction.as_ref().map(|k| json!({
            "reason": k.reason,
            "first_kept_entry_id": k.first_kept_entry_id,
            "tokens_before": k.tokens_before,
            "input_tokens": k.work.input,
            "output_tokens": k.work.output,
        })),
        "recorded": c.recorded.map(|r| json!({
            "input": r.input, "cache_read": r.cache_read, "cache_write": r.cache_write, "output": r.output,
        })),
    })
}

fn run_json(run: &PolicyRun, profile: &PriceProfile, per_call: bool) -> Value {
    let mut m = totals_json(&run.totals, profile);
    if per_call {
        m.insert(
            "calls_detail".into(),
            run.calls.iter().map(call_json).collect(),
        );
    }
    m.insert("tool_outputs".into(), json!(run.tool_outputs));
    m.insert(
        "outputs_recoverable".into(),
        json!(run.tool_outputs.saturating_sub(run.unrecoverable_outputs)),
    );
    m.insert("flushes".into(), json!(run.flushes));
    m.insert("switches".into(), json!(run.switches));
    m.insert("compactions".into(), json!(run.compactions));
    m.insert(
        "compaction_input_tokens".into(),
        json!(run.compaction_work.input),
    );
    m.insert(
        "compaction_output_tokens".into(),
        json!(run.compaction_work.output),
    );
    if let Some(reload) = &run.reload {
        m.insert("reload_renders_the_same".into(), json!(reload.is_ok()));
        if let Err(why) = reload {
            m.insert("reload_mismatch".into(), json!(why));
        }
    }
    Value::Object(m)
}

fn none_run(sim: &SessionSim) -> Option<&PolicyRun> {
    sim.runs.iter().find(|r| r.policy == "none")
}

fn profile_json(p: &PriceProfile) -> Value {
    json!({
        "name": p.name,
        "cache": p.cache.map(|c| json!({
            "ttl_seconds": c.ttl_ms as f64 / 1000.0,
            "write": c.write,
            "read": c.read,
            "min_cacheable_tokens": c.min_cacheable_tokens,
        })),
        "output": p.output,
        "summarizer": p.summarizer,
        "usd_per_mtok_input": p.usd_per_mtok_input,
    })
}

/// The policies in the order the first session ran them.
fn policy_names(sims: &[SessionSim]) -> Vec<String> {
    sims.first()
        .map(|s| s.runs.iter().map(|r| r.policy.clone()).collect())
        .unwrap_or_default()
}

fn distribution(mut values: Vec<f64>) -> Value {
    values.sort_by(f64::total_cmp);
    json!({
        "p50": percentile(&values, 50),
        "p90": percentile(&values, 90),
        "max": values.last(),
    })
}

impl Report<'_> {
    fn policy_totals(&self, name: &str) -> (BillTotals, u64, u64) {
        let mut t = BillTotals::default();
        let (mut outputs, mut lost) = (0, 0);
        for run in self.runs_of(name) {
            t.merge(&run.totals);
            outputs += run.tool_outputs;
            lost += run.unrecoverable_outputs;
        }
        (t, outputs, lost)
    }

    fn runs_of<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s PolicyRun> + 's {
        self.sims
            .iter()
            .flat_map(|s| &s.runs)
            .filter(move |r| r.policy == name)
    }

    /// Synthesized compactions of a policy, and their summary calls' input
    /// and output tokens.
    fn compactions(&self, name: &str) -> (u64, u64, u64) {
        self.runs_of(name).fold((0, 0, 0), |(n, i, o), r| {
            (
                n + r.compactions,
                i + r.compaction_work.input,
                o + r.compaction_work.output,
            )
        })
    }

    fn recorded(&self) -> Option<BillTotals> {
        let mut t = BillTotals::default();
        let mut any = false;
        for r in self
            .sims
            .iter()
            .filter_map(|s| recorded_totals(none_run(s)?, self.profile))
        {
            t.merge(&r);
            any = true;
        }
        any.then_some(t)
    }

    fn fidelity(&self) -> Option<Fidelity> {
        Fidelity::of(
            self.sims
                .iter()
                .filter_map(none_run)
                .flat_map(|r| &r.calls)
                .filter_map(|c| c.recorded.map(|u| (c.prompt, u.prompt()))),
        )
    }

    /// The miss rates the calls were billed at, or else those the recorded
    /// usage shows, as `--miss-rates` takes them.
    fn miss_rates(&self) -> Option<String> {
        match self.miss_rates {
            Some(given) => Some(given.arg()),
            None => self.misses().map(|m| m.rates().arg()),
        }
    }

    /// The provider's cache misses over every session's no-pruning replay
    /// (`None` when no call the replay reads from the cache recorded usage).
    fn misses(&self) -> Option<Misses> {
        let mut pooled = Misses::default();
        for run in self.sims.iter().filter_map(none_run) {
            pooled.add(&Misses::of(&run.calls));
        }
        pooled.any().then_some(pooled)
    }

    /// The JSON object docs/cli.md describes.
    pub fn to_json(&self) -> Value {
        let profile = self.profile;
        let sessions: Vec<Value> = self
            .sims
            .iter()
            .map(|s| {
                let policies: Map<String, Value> = s
                    .runs
                    .iter()
                    .map(|r| (r.policy.clone(), run_json(r, profile, self.per_call)))
                    .collect();
                let none = none_run(s);
                json!({
                    "path": s.path.display().to_string(),
                    "problems": s.problems,
                    "policies": policies,
                    "recorded": none.and_then(|r| recorded_totals(r, profile)).map(|t| totals_json(&t, profile)),
                    "fidelity": none.and_then(|r| Fidelity::of_calls(&r.calls)).map(|f| f.to_json()),
                    "cache_misses": none.map(|r| Misses::of(&r.calls).to_json()),
                })
            })
            .collect();
        let names = policy_names(self.sims);
        let totals: Map<String, Value> = names
            .iter()
            .map(|n| {
                let (t, outputs, lost) = self.policy_totals(n);
                let mut m = totals_json(&t, profile);
                let (compactions, input, output) = self.compactions(n);
                m.insert("compactions".into(), json!(compactions));
                m.insert("compaction_input_tokens".into(), json!(input));
                m.insert("compaction_output_tokens".into(), json!(output));
                m.insert("tool_outputs".into(), json!(outputs));
                m.insert(
                    "outputs_recoverable".into(),
                    json!(outputs - lost.min(outputs)),
                );
                (n.clone(), Value::Object(m))
            })
            .collect();
        let distributions: Map<String, Value> = names
            .iter()
            .map(|n| {
                let runs: Vec<&PolicyRun> = self
                    .sims
                    .iter()
                    .flat_map(|s| &s.runs)
                    .filter(|r| &r.policy == n)
                    .collect();
                let of = |f: &dyn Fn(&BillTotals) -> f64| {
                    distribution(runs.iter().map(|r| f(&r.totals)).collect())
                };
                (
                    n.clone(),
                    json!({
                        "calls": of(&|t| t.calls as f64),
                        "prompt_tokens": of(&|t| t.prompt_tokens as f64),
                        "peak_prompt_tokens": of(&|t| t.peak_prompt as f64),
                        "billed_input_units": of(&|t| t.billed_input_units(profile)),
                        "cache_hit_share": of(&|t| t.cache_hit_share()),
                        "cost_usd": of(&|t| t.usd(profile)),
                    }),
                )
            })
            .collect();
        json!({
            "profile": profile_json(profile),
            "token_model": {
                "tokens_per_char": self.coefficients.per_unit,
                "tokens_per_message": self.coefficients.per_message,
                "overhead_tokens": self.coefficients.overhead,
            },
            "sessions": sessions,
            "unreadable": self.failures,
            "totals": totals,
            "recorded": self.recorded().map(|t| totals_json(&t, profile)),
            "fidelity": self.fidelity().map(|f| f.to_json()),
            "cache_misses": self.misses().map(|m| m.to_json()),
            "miss_rates": self.miss_rates(),
            "distributions": distributions,
        })
    }

    /// The text report.
    pub fn text(&self) -> String {
        let p = self.profile;
        let mut out = String::new();
        out.push_str(&format!("profile: {}", p.name));
        match p.cache {
            Some(c) => out.push_str(&format!(
                " (TTL {}s, write {}x, read {}x, min {} tokens",
                c.ttl_ms / 1000,
                c.write,
                c.read,
                c.min_cacheable_tokens
            )),
            None => out.push_str(" (no caching"),
        }
        out.push_str(&format!(
            ", output {}x, summarizer {}x, ${}/MTok input)\n",
            p.output, p.summarizer, p.usd_per_mtok_input
        ));
        let c = self.coefficients;
        out.push_str(&format!(
            "tokens: {} per prompt + {:.4} per char of content + {:.2} per message\n",
            c.overhead, c.per_unit, c.per_message
        ));
        if self.corpus {
            out.push_str(&format!("sessions: {}", self.sims.len()));
            if !self.failures.is_empty() {
                out.push_str(&format!(" ({} unreadable)", self.failures.len()));
            }
            out.push('\n');
        } else if let Some(s) = self.sims.first() {
            out.push_str(&format!("session: {}\n", s.path.display()));
            for problem in s.problems.iter().take(LISTED_PROBLEMS) {
                out.push_str(&format!("  skipped: {problem}\n"));
            }
            if s.problems.len() > LISTED_PROBLEMS {
                out.push_str(&format!(
                    "  and {} more skipped (--json lists them all)\n",
                    s.problems.len() - LISTED_PROBLEMS
                ));
            }
        }
        out.push('\n');
        out.push_str(&format!(
            "{:<10} {:>7} {:>14} {:>14} {:>11} {:>6} {:>12} {:>11} {:>11}\n",
            "policy",
            "calls",
            "prompt tokens",
            "billed input",
            "cost",
            "cache",
            "summarizer",
            "peak prompt",
            "recoverable"
        ));
        let row = |name: &str, t: &BillTotals, recoverable: String| {
            format!(
                "{:<10} {:>7} {:>14} {:>14.0} {:>11} {:>5.1}% {:>12} {:>11} {:>11}\n",
                name,
                t.calls,
                t.prompt_tokens,
                t.billed_input_units(p),
                format!("${:.2}", t.usd(p)),
                100.0 * t.cache_hit_share(),
                t.summarizer_input + t.summarizer_output,
                t.peak_prompt,
                recoverable
            )
        };
        for name in policy_names(self.sims) {
            let (t, outputs, lost) = self.policy_totals(&name);
            out.push_str(&row(
                &name,
                &t,
                format!("{}/{}", outputs - lost.min(outputs), outputs),
            ));
        }
        if let Some(t) = self.recorded() {
            out.push_str(&row("recorded", &t, "-".into()));
        }
        let compacted: Vec<String> = policy_names(self.sims)
            .iter()
            .filter_map(|name| {
                let (n, input, output) = self.compactions(name);
                (n > 0).then(|| format!("{name} {n} ({input} in, {output} out)"))
            })
            .collect();
        if !compacted.is_empty() {
            out.push_str(&format!(
                "\npi's compactions (summarizer tokens, in the summarizer column): {}\n",
                compacted.join(", ")
            ));
        }
        if let Some(f) = self.fidelity() {
            out.push_str(&format!("\nnone vs recorded prompts: {}\n", f.text()));
            if f.recorded > 0
                && (f.simulated as f64 / f.recorded as f64 - 1.0).abs() > FAR_FROM_RECORDED
            {
                // An OpenCode session's fixed part is several times pi's,
                // which the default coefficients were fitted on.
                out.push_str(
                    "  (far from what was recorded: `--calibrate` fits the token model to these sessions)\n",
                );
            }
        }
        if let Some(m) = self.misses() {
            out.push_str(&format!(
                "cache misses the replay does not model (the provider read under half the prefix it reads), by the gap since the previous call: {}\n",
                m.text(),
            ));
            if self.miss_rates.is_none() {
                out.push_str(&format!(
                    "  (to bill them: --miss-rates {})\n",
                    m.rates().arg()
                ));
            }
        }
        if self.corpus && self.sims.len() > 1 {
            out.push_str("\nper session (p50 / p90 / max):\n");
            for name in policy_names(self.sims) {
                let mut billed: Vec<f64> = self
                    .sims
                    .iter()
                    .flat_map(|s| &s.runs)
                    .filter(|r| r.policy == name)
                    .map(|r| r.totals.billed_input_units(p))
                    .collect();
                billed.sort_by(f64::total_cmp);
                let pct = |q| percentile(&billed, q).unwrap_or(0.0);
                out.push_str(&format!(
                    "  {name}: billed input {:.0} / {:.0} / {:.0}\n",
                    pct(50),
                    pct(90),
                    billed.last().copied().unwrap_or(0.0)
                ));
            }
        }
        for sim in self.sims {
            for run in &sim.runs {
                if let Some(Err(why)) = &run.reload {
                    out.push_str(&format!(
                        "reload differs: {} under {}: {why}\n",
                        sim.path.display(),
                        run.policy
                    ));
                }
            }
        }
        for failure in self.failures {
            out.push_str(&format!("unreadable: {failure}\n"));
        }
        out
    }
}
