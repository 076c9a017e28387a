//! How closely a replay reproduces the usage a session recorded, and the
//! calibration of the token model on it.
//!
//! Only calls whose recorded prompt is non-zero count: pi records zero
//! usage for a request that was aborted or failed before the provider
//! answered, and those tell nothing about prompt size. Errors are relative
//! to the recorded prompt, `(simulated − recorded) / recorded`.

use serde_json::{json, Value};

use super::replay::SimCall;
use super::tokens::{fit_two, Coefficients};
use super::SessionSim;
use crate::jobs::percentile;

/// Simulated against recorded prompt sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Fidelity {
    /// Calls compared (those that recorded a prompt).
    pub calls: usize,
    /// Their simulated prompt tokens, summed.
    pub simulated: u64,
    /// Their recorded prompt tokens, summed.
    pub recorded: u64,
    /// Per-call relative errors, sorted.
    pub errors: Vec<f64>,
}

impl Fidelity {
    /// Compares pairs of (simulated, recorded) prompt sizes; `None` when no
    /// call recorded a prompt.
    pub fn of(pairs: impl IntoIterator<Item = (u64, u64)>) -> Option<Fidelity> {
        let mut f = Fidelity {
            calls: 0,
            simulated: 0,
            recorded: 0,
            errors: Vec::new(),
        };
        for (sim, rec) in pairs {
            if rec == 0 {
                continue;
            }
            f.calls += 1;
            f.simulated += sim;
            f.recorded += rec;
            f.errors.push((sim as f64 - rec as f64) / rec as f64);
        }
        f.errors.sort_by(f64::total_cmp);
        (f.calls > 0).then_some(f)
    }

    /// The calls of a run that recorded usage.
    pub fn of_calls(calls: &[SimCall]) -> Option<Fidelity> {
        Fidelity::of(
            calls
                .iter()
                .filter_map(|c| c.recorded.map(|r| (c.prompt, r.prompt()))),
        )
    }

    /// `(Σ simulated − Σ recorded) / Σ recorded`.
    pub fn total_error(&self) -> f64 {
        (self.simulated as f64 - self.recorded as f64) / self.recorded as f64
    }

    /// Mean absolute per-call error.
    pub fn mean_abs_error(&self) -> f64 {
        self.errors.iter().map(|e| e.abs()).sum::<f64>() / self.errors.len() as f64
    }

    /// The nearest-rank percentile of the per-call errors.
    pub fn error_percentile(&self, p: u32) -> f64 {
        percentile(&self.errors, p).unwrap_or(0.0)
    }

    /// The JSON object docs/cli.md describes.
    pub fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "simulated_prompt_tokens": self.simulated,
            "recorded_prompt_tokens": self.recorded,
            "total_error": self.total_error(),
            "per_call_error": {
                "p10": self.error_percentile(10),
                "p50": self.error_percentile(50),
                "p90": self.error_percentile(90),
                "mean_abs": self.mean_abs_error(),
            },
        })
    }

    /// One line of text.
    pub fn text(&self) -> String {
        format!(
            "{} calls, total {:+.1}% ({} simulated vs {} recorded); per call p10 {:+.1}%, median {:+.1}%, p90 {:+.1}%, mean |error| {:.1}%",
            self.calls,
            100.0 * self.total_error(),
            self.simulated,
            self.recorded,
            100.0 * self.error_percentile(10),
            100.0 * self.error_percentile(50),
            100.0 * self.error_percentile(90),
            100.0 * self.mean_abs_error()
        )
    }
}

/// The token model fitted on recorded usage, and how well it and the
/// model in use reproduce it.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Sessions that recorded usage.
    pub sessions: usize,
    /// What content was measured in (`char`, or a BPE tokenizer).
    pub unit: String,
    /// The fitted coefficients (`None`: too few calls to fit).
    pub fitted: Option<Coefficients>,
    /// Their fidelity over every call.
    pub fitted_fidelity: Option<Fidelity>,
    /// The coefficients in use, when they count the same unit.
    pub current: Option<Coefficients>,
    /// Their fidelity.
    pub current_fidelity: Option<Fidelity>,
    /// Per session: its path and the fitted model's fidelity on it.
    pub per_session: Vec<(String, Fidelity)>,
}

/// One recorded call: the content units and the messages sent of its
/// context (from two `none` replays, one counting one token per unit, the
/// other one token per message sent) and the recorded prompt.
#[derive(Debug, Clone, Copy)]
struct Point {
    units: u64,
    messages: u64,
    recorded: u64,
}

fn none_calls(sim: &SessionSim) -> &[super::replay::SimCall] {
    sim.runs
        .iter()
        .find(|r| r.policy == "none")
        .map_or(&[], |r| &r.calls)
}

fn points(units: &SessionSim, messages: &SessionSim) -> Vec<Point> {
    none_calls(units)
        .iter()
        .zip(none_calls(messages))
        .filter_map(|(u, m)| {
            let recorded = u.recorded?.prompt();
            (recorded > 0).then_some(Point {
                units: u.prompt,
                messages: m.prompt,
                recorded,
            })
        })
        .collect()
}

fn predict(c: &Coefficients, p: &Point) -> u64 {
    c.overhead.saturating_add(
        (c.per_unit * p.units as f64 + c.per_message * p.messages as f64)
            .max(0.0)
            .round() as u64,
    )
}

fn fidelity_of(c: &Coefficients, pts: &[Point]) -> Option<Fidelity> {
    Fidelity::of(pts.iter().map(|p| (predict(c, p), p.recorded)))
}

/// The overhead is searched on a grid (every `OVERHEAD_STEP` tokens up to
/// the smallest recorded prompt, which holds it), the two rates fitted by
/// least squares for each; the fit with the smallest mean relative error per
/// call wins. A free intercept would minimize squared error, which the
/// longest prompts dominate, and lands below zero on these sessions.
const OVERHEAD_STEP: u64 = 25;

/// The most overheads the grid tries: past `OVERHEAD_STEP * MAX_GRID`
/// tokens the step widens, so an absurd recorded prompt (a billion tokens,
/// a u64's worth) costs no more than a large real one.
const MAX_GRID: u64 = 4_000;

fn fit(pts: &[Point]) -> Option<Coefficients> {
    let smallest = pts.iter().map(|p| p.recorded).min()?;
    let step = OVERHEAD_STEP.max(smallest / MAX_GRID + 1);
    let mut best: Option<(f64, Coefficients)> = None;
    for overhead in (0..=smallest).step_by(usize::try_from(step).unwrap_or(usize::MAX)) {
        let rows: Vec<(f64, f64, f64)> = pts
            .iter()
            .map(|p| {
                (
                    p.units as f64,
                    p.messages as f64,
                    p.recorded as f64 - overhead as f64,
                )
            })
            .collect();
        let Some((per_unit, per_message)) = fit_two(&rows) else {
            continue;
        };
        let c = Coefficients {
            per_unit,
            per_message,
            overhead,
        };
        let Some(f) = fidelity_of(&c, pts) else {
            continue;
        };
        let err = f.mean_abs_error();
        if best.as_ref().is_none_or(|(e, _)| err < *e) {
            best = Some((err, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Fits the token model on the recorded prompts of the sessions replayed
/// twice: `units` counting content units, `messages` counting messages sent
/// (the same sessions, in the same order).
pub fn calibrate(
    units: &[SessionSim],
    messages: &[SessionSim],
    unit: &str,
    current: Option<&Coefficients>,
) -> Calibration {
    let per: Vec<(String, Vec<Point>)> = units
        .iter()
        .zip(messages)
        .map(|(u, m)| (u.path.display().to_string(), points(u, m)))
        .filter(|(_, pts)| !pts.is_empty())
        .collect();
    let all: Vec<Point> = per.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let fitted = fit(&all);
    let current = current.copied();
    Calibration {
        sessions: per.len(),
        unit: unit.to_owned(),
        fitted_fidelity: fitted.as_ref().and_then(|c| fidelity_of(c, &all)),
        per_session: per
            .iter()
            .filter_map(|(path, pts)| Some((path.clone(), fidelity_of(fitted.as_ref()?, pts)?)))
            .collect(),
        fitted,
        current_fidelity: current.as_ref().and_then(|c| fidelity_of(c, &all)),
        current,
    }
}

fn coefficients_json(c: &Coefficients) -> Value {
    json!({ "per_unit": c.per_unit, "per_message": c.per_message, "overhead_tokens": c.overhead })
}

fn coefficients_text(c: &Coefficients, unit: &str) -> String {
    format!(
        "{} + {:.4} tokens/{unit} + {:.2} tokens/message",
        c.overhead, c.per_unit, c.per_message
    )
}

impl Calibration {
    /// The JSON object docs/cli.md describes.
    pub fn to_json(&self) -> Value {
        json!({
            "sessions": self.sessions,
            "unit": self.unit,
            "fitted": self.fitted.as_ref().map(coefficients_json),
            "fitted_fidelity": self.fitted_fidelity.as_ref().map(Fidelity::to_json),
            "current": self.current.as_ref().map(coefficients_json),
            "current_fidelity": self.current_fidelity.as_ref().map(Fidelity::to_json),
            "per_session": self.per_session.iter().map(|(p, f)| json!({"path": p, "fidelity": f.to_json()})).collect::<Vec<_>>(),
        })
    }

    /// The text report.
    pub fn text(&self, failures: &[String]) -> String {
        let mut out = format!(
            "sessions with recorded usage: {}; content measured in {}s\n",
            self.sessions, self.unit
        );
        match (&self.fitted, &self.fitted_fidelity) {
            (Some(c), Some(f)) => out.push_str(&format!(
                "fitted:  {}\n         {}\n",
                coefficients_text(c, &self.unit),
                f.text()
            )),
            _ => out.push_str("fitted:  too few calls with recorded usage\n"),
        }
        for (path, f) in &self.per_session {
            out.push_str(&format!("  {path}: {}\n", f.text()));
        }
        if let (Some(c), Some(f)) = (&self.current, &self.current_fidelity) {
            out.push_str(&format!(
                "current: {}\n         {}\n",
                coefficients_text(c, &self.unit),
                f.text()
            ));
        }
        for failure in failures {
            out.push_str(&format!("unreadable: {failure}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_relative_to_the_recorded_prompt_and_skip_empty_records() {
        let f = Fidelity::of([(110, 100), (90, 100), (0, 0), (300, 200)]).unwrap();
        assert_eq!((f.calls, f.simulated, f.recorded), (3, 500, 400));
        assert_eq!(f.errors, vec![-0.1, 0.1, 0.5]);
        assert!((f.total_error() - 0.25).abs() < 1e-12);
        assert!((f.mean_abs_error() - 0.7 / 3.0).abs() < 1e-12);
        assert_eq!(f.error_percentile(50), 0.1);
        assert_eq!(Fidelity::of([(5, 0)]), None);
    }
}
