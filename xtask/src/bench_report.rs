//! `cargo xtask bench --report` and `--report-only`: the criterion section of
//! docs/benchmarks.md, regenerated from criterion's own estimates so that
//! those figures come from a command instead of being copied by hand.
//!
//! The section sits between the [`START`] and [`END`] marker lines; the rest
//! of the file is left byte for byte. Reading criterion's output
//! ([`read_rows`], [`parse_row`]), rendering ([`render`]) and splicing
//! ([`splice`]) are plain functions; the processes run and the files
//! written are in [`run`] and [`Header::capture`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::runner::{self, Ctx};
use serde_json::Value;

/// The line after which the generated section starts.
pub const START: &str = "<!-- criterion-report:start -->";
/// The line before which the generated section ends.
pub const END: &str = "<!-- criterion-report:end -->";
/// The file holding the section, relative to the workspace root.
pub const REPORT: &str = "docs/benchmarks.md";

/// One benchmark's estimates, in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Criterion's `group_id`.
    pub group: String,
    /// Criterion's `full_id` (`group/function/value`), what `cargo bench --
    /// <filter>` matches and criterion's console prints.
    pub id: String,
    pub median_ns: f64,
    pub mean_ns: f64,
}

/// Where and from what the figures were produced: the line above the tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu: Option<String>,
    /// The number of `processor` entries in `/proc/cpuinfo`.
    pub cores: Option<usize>,
    /// `uname -sr`.
    pub os: Option<String>,
    /// `git rev-parse --short HEAD`.
    pub commit: Option<String>,
    /// Whether tracked files other than the report itself differ from HEAD.
    pub dirty: bool,
    /// The xtask command line.
    pub command: String,
}

/// The whole command: optionally runs the benches as `cargo xtask bench`
/// does (with `ctx.extra_args`), then rewrites the section from
/// `target/criterion`. The header is captured before the run, so it names
/// the commit the benches were built from.
pub fn run(ctx: &Ctx, run_benches: bool) -> ExitCode {
    let header = Header::capture(ctx, command_line(run_benches, &ctx.extra_args));
    if run_benches {
        let code = runner::run_steps("bench", ctx, crate::steps::BENCH_STEPS);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    match write_report(ctx, &header) {
        Ok(message) => {
            eprintln!("xtask: {message}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Criterion's output directory: `$CRITERION_HOME`, else
/// `<target dir>/criterion`, as criterion itself decides.
fn criterion_dir(ctx: &Ctx) -> PathBuf {
    match std::env::var_os("CRITERION_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => ctx.root.join(dir),
        None => crate::dist::target_dir(ctx).join("criterion"),
    }
}

/// Reads the estimates, renders them and splices them into [`REPORT`].
fn write_report(ctx: &Ctx, header: &Header) -> Result<String, String> {
    let dir = criterion_dir(ctx);
    let rows = read_rows(&dir)?;
    if rows.is_empty() {
        return Err(format!(
            "no criterion estimates under {}; run `cargo xtask bench --report` first",
            dir.display()
        ));
    }
    let path = ctx.root.join(REPORT);
    let doc =
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let new = splice(&doc, &render(header, &rows)).map_err(|e| {
        format!(
            "{}: {e}; the generated section goes between a `{START}` line and an `{END}` line",
            path.display()
        )
    })?;
    if new == doc {
        return Ok(format!(
            "{REPORT} is up to date ({} benchmarks)",
            rows.len()
        ));
    }
    fs::write(&path, new).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!("wrote {} benchmarks to {REPORT}", rows.len()))
}

impl Header {
    /// Reads the machine from `/proc` and `uname`, the commit from git.
    fn capture(ctx: &Ctx, command: String) -> Header {
        let (cpu, cores) = fs::read_to_string("/proc/cpuinfo")
            .map(|text| parse_cpuinfo(&text))
            .unwrap_or((None, None));
        let os = stdout(ctx.command("uname").arg("-sr"))
            .filter(|s| !s.is_empty())
            .or_else(|| {
                let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
                Some(format!("Linux {}", release.trim()))
            });
        let git = |args: &[&str]| stdout(ctx.command("git").args(args));
        let commit = git(&["rev-parse", "--short", "HEAD"]).filter(|s| !s.is_empty());
        let exclude = format!(":(exclude){REPORT}");
        let changes = git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            &exclude,
        ]);
        Header {
            cpu,
            cores,
            os,
            commit,
            dirty: changes.is_some_and(|s| !s.is_empty()),
            command,
        }
    }

    /// `Machine: … Commit: … Command: ….`
    fn line(&self) -> String {
        let cores = self.cores.map_or("unknown".to_owned(), |n| n.to_string());
        let commit = match (&self.commit, self.dirty) {
            (None, _) => "unknown".to_owned(),
            (Some(c), false) => format!("`{c}`"),
            (Some(c), true) => format!("`{c}` + uncommitted changes"),
        };
        format!(
            "Machine: {} ({cores} logical cores), {}. Commit: {commit}. Command: `{}`.\n",
            self.cpu.as_deref().unwrap_or("unknown CPU"),
            self.os.as_deref().unwrap_or("unknown OS"),
            self.command,
        )
    }
}

/// A command's trimmed stdout, if it ran and succeeded.
fn stdout(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The CPU's model name and the number of logical cores in `/proc/cpuinfo`.
fn parse_cpuinfo(text: &str) -> (Option<String>, Option<usize>) {
    let field = |line: &str, name: &str| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().to_owned())
    };
    let cpu = text
        .lines()
        .find_map(|l| field(l, "model name"))
        .filter(|m| !m.is_empty());
    let cores = text
        .lines()
        .filter(|l| field(l, "processor").is_some())
        .count();
    (cpu, (cores > 0).then_some(cores))
}

/// The command as a user would type it, arguments quoted for a shell where
/// needed.
fn command_line(run_benches: bool, extra: &[String]) -> String {
    if !run_benches {
        return "cargo xtask bench --report-only".to_owned();
    }
    let mut line = "cargo xtask bench --report".to_owned();
    for arg in extra {
        let plain = !arg.is_empty()
            && arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c));
        line.push(' ');
        if plain {
            line.push_str(arg);
        } else {
            line.push_str(&format!("'{}'", arg.replace('\'', r"'\''")));
        }
    }
    line
}

/// Every benchmark under a criterion output directory whose latest run left
/// estimates: each `new/` directory holding both `benchmark.json` and
/// `estimates.json` (baselines, `base/` and named ones, and `report/` are
/// skipped, as criterion itself does). No directory gives no rows.
pub fn read_rows(dir: &Path) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    if dir.is_dir() {
        visit(dir, &mut rows)?;
    }
    Ok(rows)
}

fn visit(dir: &Path, rows: &mut Vec<Row>) -> Result<(), String> {
    let read = |path: &Path| {
        fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if !path.is_dir() {
            continue;
        }
        let benchmark = path.join("benchmark.json");
        let estimates = path.join("estimates.json");
        if path.ends_with("new") && benchmark.is_file() && estimates.is_file() {
            let row = parse_row(&read(&benchmark)?, &read(&estimates)?)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            rows.push(row);
        } else {
            visit(&path, rows)?;
        }
    }
    Ok(())
}

/// One row from the texts of a `new/benchmark.json` and its
/// `new/estimates.json`.
pub fn parse_row(benchmark: &str, estimates: &str) -> Result<Row, String> {
    let id: Value = serde_json::from_str(benchmark).map_err(|e| format!("benchmark.json: {e}"))?;
    let est: Value = serde_json::from_str(estimates).map_err(|e| format!("estimates.json: {e}"))?;
    let text = |key: &str| {
        id.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("benchmark.json has no string `{key}`"))
    };
    let point = |stat: &str| {
        est.get(stat)
            .and_then(|s| s.get("point_estimate"))
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("estimates.json has no number `{stat}.point_estimate`"))
    };
    Ok(Row {
        group: text("group_id")?,
        id: text("full_id")?,
        median_ns: point("median")?,
        mean_ns: point("mean")?,
    })
}

/// The generated section: the header line, then one table per group
/// (groups by name, rows by id, numeric id parts compared as numbers so
/// `20000` comes before `1000000`). Ends with a single newline.
pub fn render(header: &Header, rows: &[Row]) -> String {
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| (&a.group, id_key(&a.id)).cmp(&(&b.group, id_key(&b.id))));
    let mut out = header.line();
    let mut group = None;
    for row in rows {
        if group != Some(&row.group) {
            group = Some(&row.group);
            out.push_str(&format!(
                "\n### `{}`\n\n| bench | median | mean |\n|---|---:|---:|\n",
                row.group
            ));
        }
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            row.id.replace('|', "\\|"),
            format_ns(row.median_ns),
            format_ns(row.mean_ns)
        ));
    }
    out
}

/// Sort key of a bench id: its `/`-separated parts, numbers by value.
fn id_key(id: &str) -> Vec<(Option<u64>, &str)> {
    id.split('/')
        .map(|part| (part.parse().ok(), part))
        .collect()
}

/// A duration in nanoseconds to three significant digits in ns, µs, ms or s,
/// the unit chosen after rounding (999.6 ns is `1.00 µs`).
pub fn format_ns(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "n/a".to_owned();
    }
    let sci = format!("{ns:.2e}");
    let (mantissa, exponent) = sci.split_once('e').expect("LowerExp has an exponent");
    let mantissa: f64 = mantissa.parse().expect("LowerExp mantissa");
    let exponent: i32 = exponent.parse().expect("LowerExp exponent");
    let unit = exponent.div_euclid(3).clamp(0, 3);
    let shift = exponent - 3 * unit;
    let decimals = usize::try_from(2 - shift).unwrap_or(0);
    format!(
        "{:.*} {}",
        decimals,
        mantissa * 10f64.powi(shift),
        ["ns", "µs", "ms", "s"][unit as usize]
    )
}

/// `doc` with the lines between its [`START`] and [`END`] lines replaced by
/// `section`, framed by one blank line on each side. Everything else is
/// kept byte for byte; each marker must appear exactly once, on a line of
/// its own, in that order.
pub fn splice(doc: &str, section: &str) -> Result<String, String> {
    let (mut start, mut end) = (None, None);
    let mut offset = 0;
    for line in doc.split_inclusive('\n') {
        let slot = match line.trim() {
            START => Some(&mut start),
            END => Some(&mut end),
            _ => None,
        };
        if let Some(slot) = slot {
            if slot.is_some() {
                return Err(format!("more than one `{}` line", line.trim()));
            }
            *slot = Some((offset, offset + line.len()));
        }
        offset += line.len();
    }
    match (start, end) {
        (None, _) => Err(format!("no `{START}` line")),
        (_, None) => Err(format!("no `{END}` line")),
        (Some((_, body)), Some((tail, _))) if body <= tail => {
            Ok(format!("{}\n{section}\n{}", &doc[..body], &doc[tail..]))
        }
        _ => Err(format!("`{END}` comes before `{START}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(group: &str, id: &str, median_ns: f64, mean_ns: f64) -> Row {
        Row {
            group: group.into(),
            id: id.into(),
            median_ns,
            mean_ns,
        }
    }

    fn header() -> Header {
        Header {
            cpu: Some("AMD EPYC".into()),
            cores: Some(2),
            os: Some("Linux 6.1.0".into()),
            commit: Some("abc1234".into()),
            dirty: false,
            command: "cargo xtask bench --report -- --quick".into(),
        }
    }

    /// A fresh, empty directory under the system temp dir.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `benchmark.json` and, with `median`, `estimates.json` as
    /// criterion 0.5 does (compact serde_json, `slope` null in flat mode).
    fn write_bench(dir: &Path, group: &str, full_id: &str, median: Option<f64>) {
        fs::create_dir_all(dir).unwrap();
        let function = full_id
            .strip_prefix(group)
            .and_then(|f| f.strip_prefix('/'))
            .map_or("null".to_owned(), crate::packages::json_string);
        fs::write(
            dir.join("benchmark.json"),
            format!(
                r#"{{"group_id":{},"function_id":{function},"value_str":null,"throughput":null,"full_id":{},"directory_name":"x","title":{}}}"#,
                crate::packages::json_string(group),
                crate::packages::json_string(full_id),
                crate::packages::json_string(full_id),
            ),
        )
        .unwrap();
        if let Some(m) = median {
            let estimate = |p: f64| {
                format!(
                    r#"{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{},"upper_bound":{}}},"point_estimate":{p},"standard_error":1.5}}"#,
                    p - 1.0,
                    p + 1.0
                )
            };
            fs::write(
                dir.join("estimates.json"),
                format!(
                    r#"{{"mean":{},"median":{},"median_abs_dev":{},"slope":null,"std_dev":{}}}"#,
                    estimate(m + 10.0),
                    estimate(m),
                    estimate(3.0),
                    estimate(4.0)
                ),
            )
            .unwrap();
        }
    }

    #[test]
    fn reads_the_latest_run_of_each_benchmark() {
        let root = temp_dir("read-rows");
        // `bench_function("tool_turns/plan")`: the slash is replaced in the
        // directory name, not in the id.
        write_bench(
            &root.join("render/tool_turns_plan/new"),
            "render",
            "render/tool_turns/plan",
            Some(2.0e5),
        );
        write_bench(
            &root.join("render/tool_turns_plan/base"),
            "render",
            "render/tool_turns/plan",
            Some(9.0e9),
        );
        write_bench(
            &root.join("render/tool_turns_plan/mine"),
            "render",
            "render/tool_turns/plan",
            Some(9.0e9),
        );
        write_bench(
            &root.join("prepare/20000/new"),
            "prepare",
            "prepare/20000",
            Some(5.0e6),
        );
        // Started but never analysed: no estimates, so no row.
        write_bench(
            &root.join("flush/capture/new"),
            "flush",
            "flush/capture",
            None,
        );
        // `c.bench_function("solo")`: group and id are the same.
        write_bench(&root.join("solo/new"), "solo", "solo", Some(7.0));
        fs::create_dir_all(root.join("render/report")).unwrap();
        fs::write(root.join("render/report/index.html"), "<html>").unwrap();

        let mut rows = read_rows(&root).unwrap();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(
            rows,
            [
                row("prepare", "prepare/20000", 5.0e6, 5.0e6 + 10.0),
                row("render", "render/tool_turns/plan", 2.0e5, 2.0e5 + 10.0),
                row("solo", "solo", 7.0, 17.0),
            ]
        );

        fs::write(root.join("solo/new/estimates.json"), "{\"mean\":").unwrap();
        let err = read_rows(&root).unwrap_err();
        assert!(
            err.contains("solo/new") && err.contains("estimates.json"),
            "{err}"
        );

        assert_eq!(read_rows(&root.join("absent")), Ok(Vec::new()));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_row_needs_its_ids_and_both_estimates() {
        let est = r#"{"mean":{"point_estimate":2.5},"median":{"point_estimate":2.0}}"#;
        let id = r#"{"group_id":"g","full_id":"g/f"}"#;
        assert_eq!(parse_row(id, est), Ok(row("g", "g/f", 2.0, 2.5)));
        assert!(parse_row(r#"{"group_id":"g"}"#, est)
            .unwrap_err()
            .contains("full_id"));
        let no_mean = r#"{"median":{"point_estimate":2.0}}"#;
        assert!(parse_row(id, no_mean)
            .unwrap_err()
            .contains("mean.point_estimate"));
        assert!(parse_row(
            id,
            r#"{"mean":{"point_estimate":null},"median":{"point_estimate":2}}"#
        )
        .is_err());
    }

    #[test]
    fn units_switch_after_rounding_to_three_digits() {
        let cases = [
            (0.0, "0.00 ns"),
            (0.25, "0.250 ns"),
            (42.0, "42.0 ns"),
            (999.4, "999 ns"),
            (999.6, "1.00 µs"),
            (1_000.0, "1.00 µs"),
            (12_345.0, "12.3 µs"),
            (999_400.0, "999 µs"),
            (999_600.0, "1.00 ms"),
            (123_456_789.0, "123 ms"),
            (999_999_999.0, "1.00 s"),
            (1.5e9, "1.50 s"),
            (1.234_5e12, "1230 s"),
            (f64::NAN, "n/a"),
        ];
        for (ns, want) in cases {
            assert_eq!(format_ns(ns), want, "{ns} ns");
        }
    }

    #[test]
    fn renders_one_sorted_table_per_group() {
        let rows = [
            row(
                "render",
                "render/tool_turns/plan_cold",
                625_000.0,
                640_000.0,
            ),
            row("prepare", "prepare/1000000", 2.5e7, 2.6e7),
            row("render", "render/tool_turns/plan", 221_000.0, 230_100.0),
            row("prepare", "prepare/20000", 812.0, 999.7),
            row("odd", "odd/a|b", 1.0e9, 1.0e9),
        ];
        assert_eq!(
            render(&header(), &rows),
            "\
Machine: AMD EPYC (2 logical cores), Linux 6.1.0. Commit: `abc1234`. Command: `cargo xtask bench --report -- --quick`.

### `odd`

| bench | median | mean |
|---|---:|---:|
| `odd/a\\|b` | 1.00 s | 1.00 s |

### `prepare`

| bench | median | mean |
|---|---:|---:|
| `prepare/20000` | 812 ns | 1.00 µs |
| `prepare/1000000` | 25.0 ms | 26.0 ms |

### `render`

| bench | median | mean |
|---|---:|---:|
| `render/tool_turns/plan` | 221 µs | 230 µs |
| `render/tool_turns/plan_cold` | 625 µs | 640 µs |
"
        );
    }

    #[test]
    fn the_header_says_what_it_does_not_know() {
        let mut h = header();
        h.dirty = true;
        assert!(h
            .line()
            .contains("Commit: `abc1234` + uncommitted changes."));
        let unknown = Header {
            cpu: None,
            cores: None,
            os: None,
            commit: None,
            dirty: true,
            command: "cargo xtask bench --report-only".into(),
        };
        assert_eq!(
            unknown.line(),
            "Machine: unknown CPU (unknown logical cores), unknown OS. Commit: unknown. \
             Command: `cargo xtask bench --report-only`.\n"
        );
    }

    #[test]
    fn cpuinfo_gives_model_and_logical_cores() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\n\
                    processor\t: 1\nmodel name\t: AMD EPYC\n";
        assert_eq!(parse_cpuinfo(text), (Some("AMD EPYC".into()), Some(2)));
        // aarch64 names no model.
        assert_eq!(
            parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n"),
            (None, Some(1))
        );
        assert_eq!(parse_cpuinfo(""), (None, None));
    }

    #[test]
    fn command_line_quotes_what_a_shell_would_split() {
        assert_eq!(command_line(false, &[]), "cargo xtask bench --report-only");
        let extra = [
            "--bench",
            "render",
            "--",
            "--measurement-time",
            "5",
            "a b",
            "it's",
        ];
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            command_line(true, &extra),
            r"cargo xtask bench --report --bench render -- --measurement-time 5 'a b' 'it'\''s'"
        );
    }

    const DOC: &str = "# Title\r\nintro\n\n<!-- criterion-report:start -->\nold\n  stuff\n<!-- criterion-report:end -->\ntrailing  \nno newline";

    #[test]
    fn splicing_keeps_everything_outside_the_markers() {
        let out = splice(DOC, "new\n").unwrap();
        assert_eq!(
            out,
            "# Title\r\nintro\n\n<!-- criterion-report:start -->\n\nnew\n\n<!-- criterion-report:end -->\ntrailing  \nno newline"
        );
        let (head, tail) = DOC.split_once("old").unwrap();
        assert!(out.starts_with(head));
        assert!(out.ends_with(&tail["\n  stuff\n".len()..]));
        assert_eq!(splice(&out, "new\n").unwrap(), out, "not idempotent");
        assert_eq!(splice(&splice(&out, "x\n").unwrap(), "new\n").unwrap(), out);
    }

    #[test]
    fn splicing_needs_both_markers_once_in_order() {
        assert!(splice("no markers\n", "x\n").unwrap_err().contains(START));
        assert!(splice(&format!("{START}\nx\n"), "x\n")
            .unwrap_err()
            .contains(END));
        assert!(splice(&format!("{END}\n{START}\n"), "x\n")
            .unwrap_err()
            .contains("before"));
        assert!(splice(&format!("{START}\n{END}\n{START}\n"), "x\n")
            .unwrap_err()
            .contains("more than one"));
        // A marker inside a line is not a marker.
        assert!(splice(&format!("see `{START}`\n{END}\n"), "x\n").is_err());
    }
}
