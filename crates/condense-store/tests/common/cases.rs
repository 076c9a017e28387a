//! The harness of the data-driven case suites (`flush_cases/`,
//! `render_cases.rs`): case files under `tests/cases/<kind>/`, the shape all
//! of them share, known failures, and the check that every file has a test
//! function and every area a case.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use condense_core::Branch;
use condense_core::Config;
use condense_store::replay::{replay, ReplayEntry};
use serde_json::Value;

/// One suite of case files.
pub struct Suite {
    /// The directory under `tests/cases/`, and the word in messages.
    pub kind: &'static str,
    /// The areas a case may name; each must have a case.
    pub areas: &'static [&'static str],
    /// The keys a case file may have.
    pub keys: &'static [&'static str],
}

impl Suite {
    pub fn dir(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cases")
            .join(self.kind)
    }

    pub fn load(&self, name: &str) -> Value {
        let path = self.dir().join(format!("{name}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Checks what every case file must have: known keys only, `name` equal
    /// to the file stem, a known `area`, a non-empty `about`. Panics (never
    /// "known") on a bad file.
    pub fn validate_common(&self, name: &str, case: &Value) {
        let obj = case.as_object().expect("a case is a JSON object");
        for key in obj.keys() {
            assert!(
                self.keys.contains(&key.as_str()),
                "{name}: unknown key `{key}`"
            );
        }
        assert_eq!(
            str_field(case, "name"),
            name,
            "`name` must equal the file stem"
        );
        let area = str_field(case, "area");
        assert!(self.areas.contains(&area), "{name}: unknown area `{area}`");
        assert!(
            !str_field(case, "about").is_empty(),
            "{name}: empty `about`"
        );
    }

    /// Loads, validates and runs one case. A case marked `known_failure`
    /// reports instead of failing, and says so when it starts passing.
    pub fn run_case(
        &self,
        name: &str,
        validate: impl Fn(&str, &Value),
        run: impl Fn(&Value) -> Result<(), String>,
    ) {
        let case = self.load(name);
        self.validate_common(name, &case);
        validate(name, &case);
        let kind = self.kind;
        match (case.get("known_failure").and_then(Value::as_str), run(&case)) {
            (None, Ok(())) => {}
            (None, Err(e)) => panic!(
                "{kind} case `{name}` failed\nabout: {}\n{e}",
                str_field(&case, "about")
            ),
            (Some(why), Err(e)) => notice(&format!("KNOWN FAILURE {kind} case `{name}`: {why}\n{e}")),
            (Some(why), Ok(())) => notice(&format!(
                "{kind} case `{name}` is marked known_failure ({why}) but now passes: remove the mark"
            )),
        }
    }

    /// Every case file has a test function and every test function a file;
    /// the suite keeps at least `min` cases and covers each of its areas.
    pub fn check_listed(&self, listed: &[&str], min: usize) {
        let mut on_disk: HashSet<String> = HashSet::new();
        for entry in std::fs::read_dir(self.dir()).expect("cases dir exists") {
            let path = entry.expect("readable dir entry").path();
            if path.extension().and_then(|e| e.to_str()) == Some("json") {
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .expect("utf-8 file name");
                on_disk.insert(stem.to_owned());
            }
        }
        let listed_set: HashSet<String> = listed.iter().map(|s| (*s).to_owned()).collect();
        let mut unlisted: Vec<&String> = on_disk.difference(&listed_set).collect();
        let mut missing: Vec<&String> = listed_set.difference(&on_disk).collect();
        unlisted.sort();
        missing.sort();
        assert!(
            unlisted.is_empty(),
            "case files without a test function: {unlisted:?}"
        );
        assert!(
            missing.is_empty(),
            "test functions without a case file: {missing:?}"
        );
        assert!(
            listed.len() >= min,
            "the suite shrank to {} cases",
            listed.len()
        );
        let mut per_area: BTreeMap<String, usize> = BTreeMap::new();
        for name in listed {
            let case = self.load(name);
            *per_area
                .entry(str_field(&case, "area").to_owned())
                .or_insert(0) += 1;
        }
        for area in self.areas {
            assert!(
                per_area.contains_key(*area),
                "no case for area {area}: {per_area:?}"
            );
        }
    }
}

/// The case's `config` block, which must load without warnings.
pub fn config_of(case: &Value) -> Result<Config, String> {
    let Some(block) = case.get("config") else {
        return Ok(Config::default());
    };
    let (config, warnings) = Config::from_settings_value(block);
    if !warnings.is_empty() {
        let list: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        return Err(format!("config did not load cleanly: {}", list.join("; ")));
    }
    Ok(config)
}

/// Session entries (as in a case file) replayed into a state.
pub fn replay_values(entries: &[Value]) -> Result<Branch, String> {
    static NULL: Value = Value::Null;
    let mut replayed = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let custom_type = e
            .get("customType")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("entry {i} has no customType"))?;
        match e.get("type").and_then(Value::as_str) {
            Some("custom") => replayed.push(ReplayEntry::Custom {
                custom_type,
                data: e.get("data").unwrap_or(&NULL),
            }),
            Some("custom_message") => replayed.push(ReplayEntry::CustomMessage {
                custom_type,
                content: e.get("content").unwrap_or(&NULL),
                details: e.get("details").unwrap_or(&NULL),
            }),
            other => return Err(format!("entry {i}: unsupported type {other:?}")),
        }
    }
    let (state, problems) = replay(replayed);
    if !problems.is_empty() {
        return Err(format!("replay problems: {problems:?}"));
    }
    Ok(state)
}

pub fn str_field<'a>(case: &'a Value, key: &str) -> &'a str {
    case.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("case needs a string `{key}`"))
}

/// An array field; absent or `null` is empty.
pub fn array_field<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    match v.get(key) {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => panic!("`{key}` must be an array, got {other}"),
    }
}

/// Writes straight to the process's stderr, past the test harness's output
/// capture, so known failures show up in a normal `cargo test` run.
pub fn notice(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// One `#[test]` per case name, each running `$run_case(name)`, and
/// `LISTED`, every name.
#[allow(unused_macros)]
macro_rules! case_tests {
    ($run_case:path; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $run_case(stringify!($name));
            }
        )*

        /// Every case with a test function.
        const LISTED: &[&str] = &[$(stringify!($name)),*];
    };
}
