//! `--svg`: prompt size and cumulative billed cost per call, one line per
//! policy (and the recorded figures when the session has them), drawn with
//! plotters' SVG backend.

use std::path::Path;

use condense_core::{recorded_bill, PriceProfile};
use plotters::prelude::*;

use super::replay::PolicyRun;
use super::SessionSim;

/// One line of each panel: (call number, prompt tokens) and (call number,
/// cumulative units).
struct Series {
    name: String,
    prompts: Vec<(u32, u64)>,
    costs: Vec<(u32, f64)>,
}

fn policy_series(run: &PolicyRun) -> Series {
    let mut total = 0.0;
    let mut s = Series {
        name: run.policy.clone(),
        prompts: Vec::new(),
        costs: Vec::new(),
    };
    for (i, c) in run.calls.iter().enumerate() {
        total += c.bill.input_units + c.bill.output_units + c.summarizer_units;
        s.prompts.push((i as u32 + 1, c.prompt));
        s.costs.push((i as u32 + 1, total));
    }
    s
}

/// The recorded calls priced by `profile`; a call that recorded no prompt
/// (aborted before the provider answered) is left out of the prompt line.
fn recorded_series(run: &PolicyRun, profile: &PriceProfile) -> Option<Series> {
    let mut total = 0.0;
    let mut s = Series {
        name: "recorded".into(),
        prompts: Vec::new(),
        costs: Vec::new(),
    };
    for (i, c) in run.calls.iter().enumerate() {
        let usage = c.recorded.unwrap_or_default();
        let bill = recorded_bill(profile, &usage);
        total += bill.input_units + bill.output_units;
        if usage.prompt() > 0 {
            s.prompts.push((i as u32 + 1, usage.prompt()));
        }
        s.costs.push((i as u32 + 1, total));
    }
    (!s.prompts.is_empty()).then_some(s)
}

/// Writes the chart of one session to `path`.
pub fn write_svg(path: &Path, sims: &[SessionSim], profile: &PriceProfile) -> Result<(), String> {
    let [sim] = sims else {
        return Err("--svg charts one session; name a session file, not a directory".into());
    };
    let mut series: Vec<Series> = sim.runs.iter().map(policy_series).collect();
    if let Some(recorded) = sim
        .runs
        .iter()
        .find(|r| r.policy == "none")
        .and_then(|r| recorded_series(r, profile))
    {
        series.push(recorded);
    }
    let title = sim
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    draw(path, &title, &series, profile)
        .map_err(|e| format!("{}: drawing the chart: {e}", path.display()))
}

fn draw(
    path: &Path,
    title: &str,
    series: &[Series],
    profile: &PriceProfile,
) -> Result<(), Box<dyn std::error::Error>> {
    let calls = series
        .iter()
        .map(|s| s.costs.len())
        .max()
        .unwrap_or(0)
        .max(2) as u32;
    let max_prompt = series
        .iter()
        .flat_map(|s| &s.prompts)
        .map(|p| p.1)
        .max()
        .unwrap_or(0)
        .max(1);
    let max_cost = series
        .iter()
        .flat_map(|s| &s.costs)
        .map(|p| p.1 * profile.usd_per_mtok_input / 1e6)
        .fold(0.0, f64::max)
        .max(1e-6);
    let root = SVGBackend::new(path, (960, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("{title} · {} pricing", profile.name),
        ("sans-serif", 22),
    )?;
    let (top, bottom) = root.split_vertically(340);
    let colors = [BLUE, RED, GREEN, MAGENTA, BLACK];

    let mut prompt_chart = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(72)
        .caption("prompt tokens per call", ("sans-serif", 16))
        .build_cartesian_2d(1u32..calls, 0u64..max_prompt + max_prompt / 20)?;
    prompt_chart
        .configure_mesh()
        .x_desc("call")
        .disable_mesh()
        .draw()?;
    for (s, color) in series.iter().zip(colors.iter().cycle()) {
        let style = if s.name == "recorded" {
            color.stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        prompt_chart
            .draw_series(LineSeries::new(s.prompts.iter().copied(), style))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    prompt_chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;

    let mut cost_chart = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(72)
        .caption(
            "cumulative billed cost (US$: prompts, outputs, summarizer)",
            ("sans-serif", 16),
        )
        .build_cartesian_2d(1u32..calls, 0f64..max_cost * 1.05)?;
    cost_chart
        .configure_mesh()
        .x_desc("call")
        .disable_mesh()
        .draw()?;
    for (s, color) in series.iter().zip(colors.iter().cycle()) {
        let usd = profile.usd_per_mtok_input / 1e6;
        cost_chart.draw_series(LineSeries::new(
            s.costs.iter().map(|p| (p.0, p.1 * usd)),
            color.stroke_width(2),
        ))?;
    }
    root.present()?;
    Ok(())
}
