//! Every `contextPrune` setting `/pruner` changes, as one table.
//!
//! A row of [`SETTINGS`] says everything about one setting: its key, its
//! label, how a value is typed and chosen ([`Kind`]), and, for the settings
//! that have a subcommand of their own (`/pruner thinking`, `/pruner dedup`,
//! ...), pi-condense's texts for showing, changing and refusing it
//! ([`Subcommand`]). One path parses a value, sets it in the saved block and
//! lets [`Config`]'s normalization decide whether it is valid; the settings
//! dialog and the subcommands differ only in their texts.

use crate::{Effect, Effects, Engine};
use condense_core::{Config, ThinkingLevel};
use serde_json::Value;

mod table;

use table::THINKING_CHOICES;
pub(super) use table::{BATCHING_CHOICES, PRUNE_ON_CHOICES, SETTINGS};

use super::{change, input, select, split_word};

/// How a setting's value is typed and chosen.
#[derive(Clone, Copy)]
enum Kind {
    Bool,
    /// Fixed values (the saved spelling, a label).
    Choice(&'static [(&'static str, &'static str)]),
    /// A whole non-negative integer: presets (value, label), any other by input.
    Int(&'static [(u64, &'static str)]),
    /// An integer in milliseconds (shown in seconds).
    Millis(&'static [(u64, &'static str)]),
    /// A fraction in (0, 1], or off.
    Fraction(&'static [(&'static str, &'static str)]),
    /// `default` or `provider/id`, optionally with a `:thinking` suffix that
    /// sets `summarizerThinking` too.
    Model,
    /// A list of strings (comma or space separated; `none` or `clear` empties it).
    List,
}

/// The `/pruner <name> [value]` subcommand of a setting, with pi-condense's
/// texts.
struct Subcommand {
    name: &'static str,
    /// What the subcommand says with no argument.
    show: fn(&Config) -> String,
    /// The dialog offered after `show`: a picker for a [`Kind::Choice`], an
    /// input for a [`Kind::List`]; its title.
    ask: Option<&'static str>,
    /// The confirmation, from the new config and the accepted argument.
    changed: fn(&Config, &str) -> String,
    /// The warning for a refused argument.
    invalid: fn(&str) -> String,
}

/// One setting.
pub(super) struct Setting {
    /// The key in the `contextPrune` block (dotted for nested objects).
    pub(super) key: &'static str,
    /// Its label in the settings dialog.
    pub(super) label: &'static str,
    kind: Kind,
    command: Option<Subcommand>,
}

// ---- values for people ------------------------------------------------------------

/// A choice's label, or the value itself when it is not one of `choices`.
pub(super) fn label_of(choices: &[(&str, &'static str)], value: &str) -> String {
    choices
        .iter()
        .find(|(v, _)| *v == value)
        .map_or_else(|| value.to_owned(), |(_, l)| (*l).to_owned())
}

/// The saved spellings, joined by `, `.
fn names(choices: &[(&str, &str)]) -> String {
    choices
        .iter()
        .map(|(v, _)| *v)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn thinking_label(level: &str) -> String {
    label_of(THINKING_CHOICES, level)
}

/// `20s`, `12.5s`, or `disabled` for 0.
pub(super) fn seconds(ms: u64) -> String {
    if ms == 0 {
        "disabled".to_owned()
    } else {
        format!("{}s", ms as f64 / 1000.0)
    }
}

pub(super) fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// `(none)` or the items joined by `, `.
fn list_display(list: &[String]) -> String {
    if list.is_empty() {
        "(none)".to_owned()
    } else {
        list.join(", ")
    }
}

/// The saved JSON value of a dotted key.
fn current_value(config: &Config, key: &str) -> Value {
    let block = config.to_settings_value(&Value::Null);
    let mut v = &block;
    for part in key.split('.') {
        v = v.get(part).unwrap_or(&Value::Null);
    }
    v.clone()
}

/// A setting's value for people.
fn display(s: &Setting, v: &Value) -> String {
    match (s.kind, v) {
        (Kind::Choice(choices), Value::String(x)) => label_of(choices, x),
        (Kind::Millis(_), Value::Number(n)) => seconds(n.as_u64().unwrap_or(0)),
        (Kind::Int(_), Value::Number(n)) if n.as_u64() == Some(0) => "0 (disabled)".to_owned(),
        (Kind::Fraction(_), Value::Null) => "Off".to_owned(),
        (Kind::Fraction(_), Value::Number(n)) => {
            format!("{}%", (n.as_f64().unwrap_or(0.0) * 100.0).round())
        }
        (Kind::List, Value::Array(items)) => {
            let items: Vec<String> = items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect();
            list_display(&items)
        }
        (_, Value::String(x)) => x.clone(),
        (_, other) => other.to_string(),
    }
}

// ---- parse and change -------------------------------------------------------------

/// A list argument: split on commas and whitespace; `none`, `clear` or
/// nothing at all is the empty list.
fn parse_list(text: &str) -> Vec<String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("clear") {
        return Vec::new();
    }
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A whole non-negative integer (`12abc` is refused, where `parseInt` read 12).
fn parse_count(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// Parses typed text into the keys it sets and their saved JSON values.
fn parse(s: &Setting, text: &str) -> Option<Vec<(&'static str, Value)>> {
    let t = text.trim();
    let value = match s.kind {
        Kind::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" => Value::Bool(true),
            "false" | "off" | "no" => Value::Bool(false),
            _ => return None,
        },
        Kind::Choice(choices) => {
            let (v, _) = choices.iter().find(|(v, _)| *v == t)?;
            Value::from(*v)
        }
        Kind::Int(_) | Kind::Millis(_) => Value::from(parse_count(t)?),
        Kind::Fraction(_) => {
            let lower = t.to_ascii_lowercase();
            if ["off", "none", "null", "0", "0%"].contains(&lower.as_str()) {
                Value::Null
            } else {
                let f = match lower.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().ok()? / 100.0,
                    None => lower.parse::<f64>().ok()?,
                };
                Value::Number(serde_json::Number::from_f64(f)?)
            }
        }
        Kind::Model => {
            let Some((model, suffix)) = t.rsplit_once(':') else {
                return (!t.is_empty()).then(|| vec![(s.key, Value::from(t))]);
            };
            let level = ThinkingLevel::parse(suffix).filter(|_| !model.is_empty())?;
            return Some(vec![
                (s.key, Value::from(model)),
                ("summarizerThinking", Value::from(level.as_str())),
            ]);
        }
        Kind::List => Value::from(parse_list(t)),
    };
    Some(vec![(s.key, value)])
}

/// The config with `text` set for `s`, or `None` when it is refused: the
/// config's own normalization decides what is valid (an out-of-range value
/// is refused, not clamped).
fn with_value(e: &Engine, s: &Setting, text: &str) -> Option<Config> {
    let changes = parse(s, text)?;
    let original = e
        .settings()
        .get("contextPrune")
        .cloned()
        .unwrap_or(Value::Null);
    let mut block = e.config().to_settings_value(&original);
    for (key, value) in &changes {
        let mut slot = &mut block;
        let (parents, last) = key.rsplit_once('.').map_or(("", *key), |(p, l)| (p, l));
        for part in parents.split('.').filter(|p| !p.is_empty()) {
            slot = &mut slot[part];
        }
        slot[last] = value.clone();
    }
    let (config, warnings) = Config::from_settings_value(&block);
    let refused = warnings
        .iter()
        .any(|w| changes.iter().any(|(key, _)| w.key == *key));
    (!refused).then_some(config)
}

// ---- the subcommands --------------------------------------------------------------

/// `/pruner <name> [value]` for a setting's subcommand; `None` when `name`
/// is not one.
pub(super) fn subcommand(e: &mut Engine, name: &str, arg: &str) -> Option<Effects> {
    let (s, cmd) = SETTINGS.iter().find_map(|s| {
        s.command
            .as_ref()
            .filter(|c| c.name == name)
            .map(|c| (s, c))
    })?;
    let text = match s.kind {
        // A list takes the whole argument; `--input` is the dialog's answer,
        // where nothing at all clears the list.
        Kind::List => match arg.strip_prefix("--input") {
            Some(answer) => answer.to_owned(),
            None if arg.is_empty() => return Some(show(e, s, cmd)),
            None => arg.to_owned(),
        },
        Kind::Bool => {
            let word = split_word(arg).0.to_ascii_lowercase();
            if word.is_empty() || word == "status" {
                return Some(show(e, s, cmd));
            }
            word
        }
        _ => {
            let word = split_word(arg).0;
            if word.is_empty() {
                return Some(show(e, s, cmd));
            }
            word.to_owned()
        }
    };
    Some(match with_value(e, s, &text) {
        Some(config) => {
            let confirmation = Effect::info((cmd.changed)(&config, &text));
            change(e, config, confirmation)
        }
        None => vec![Effect::warning((cmd.invalid)(&text))],
    })
}

/// The current value, and the dialog to change it when the setting has one.
fn show(e: &Engine, s: &Setting, cmd: &Subcommand) -> Effects {
    let c = e.config();
    let mut out = vec![Effect::info((cmd.show)(c))];
    match (s.kind, cmd.ask) {
        (Kind::Choice(choices), Some(title)) => out.push(select(
            title,
            choices.iter().map(|(v, l)| format!("{v} — {l}")).collect(),
            choices.iter().map(|(v, _)| (*v).to_owned()).collect(),
            cmd.name,
        )),
        (Kind::List, Some(title)) => {
            let current = current_value(c, s.key);
            let items: Vec<&str> = current
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            out.push(input(
                title,
                &items.join(", "),
                &format!("{} --input", cmd.name),
            ));
        }
        _ => {}
    }
    out
}

// ---- the settings dialog ----------------------------------------------------------

fn setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key.eq_ignore_ascii_case(key))
}

/// The settings list: every setting with its current value.
fn menu(e: &Engine) -> Effect {
    let width = SETTINGS
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    select(
        "pruner settings",
        SETTINGS
            .iter()
            .map(|s| {
                let label = format!("{}:", s.label);
                format!(
                    "{label:w$} {}",
                    display(s, &current_value(e.config(), s.key)),
                    w = width + 1
                )
            })
            .collect(),
        SETTINGS
            .iter()
            .map(|s| format!("settings edit {}", s.key))
            .collect(),
        "",
    )
}

/// The dialog for one setting: its values, or a text input.
fn edit(e: &Engine, s: &Setting) -> Effect {
    let now = display(s, &current_value(e.config(), s.key));
    let title = format!("{} (now {now})", s.label);
    let pick = |v: &str| format!("settings pick {} {v}", s.key);
    let mut options: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    match s.kind {
        Kind::Bool => {
            for b in ["true", "false"] {
                options.push(b.to_owned());
                values.push(pick(b));
            }
        }
        Kind::Choice(choices) | Kind::Fraction(choices) => {
            for (v, l) in choices {
                options.push(format!("{v} — {l}"));
                values.push(pick(v));
            }
        }
        Kind::Int(presets) | Kind::Millis(presets) => {
            for (v, l) in presets {
                options.push((*l).to_owned());
                values.push(pick(&v.to_string()));
            }
            options.push("other value…".to_owned());
            values.push(format!("settings input {}", s.key));
        }
        Kind::Model | Kind::List => return edit_input(e, s),
    }
    select(&title, options, values, "")
}

fn edit_input(e: &Engine, s: &Setting) -> Effect {
    let v = current_value(e.config(), s.key);
    let (hint, placeholder) = match s.kind {
        Kind::Model => ("\"default\" or provider/id".to_owned(), display(s, &v)),
        Kind::List => (
            "comma-separated; empty or 'none' to clear".to_owned(),
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default(),
        ),
        Kind::Millis(_) => ("milliseconds; 0 disables".to_owned(), v.to_string()),
        Kind::Fraction(_) => ("a fraction such as 0.75, or off".to_owned(), display(s, &v)),
        _ => ("a non-negative integer".to_owned(), v.to_string()),
    };
    input(
        &format!("{} ({hint})", s.label),
        &placeholder,
        &format!("settings pick {}", s.key),
    )
}

/// `settings set|pick <key> <value>`.
fn set(e: &mut Engine, s: &Setting, text: &str) -> Effects {
    match with_value(e, s, text) {
        Some(config) => {
            let shown = display(s, &current_value(&config, s.key));
            change(
                e,
                config,
                Effect::info(format!("{} set to: {shown}", s.label)),
            )
        }
        None => vec![Effect::warning(format!(
            "Invalid value for {}: \"{}\".",
            s.key,
            text.trim()
        ))],
    }
}

/// `/pruner settings [edit|input|set|pick <key> [value]]`.
pub(super) fn dialog(e: &mut Engine, rest: &str) -> Effects {
    let (verb, rest) = split_word(rest);
    if verb.is_empty() {
        return vec![menu(e)];
    }
    let (key, value) = split_word(rest);
    if !matches!(verb, "edit" | "input" | "set" | "pick") {
        return vec![Effect::warning(format!(
            "Unknown settings action: \"{verb}\". Run /pruner settings, or /pruner settings set <key> <value>."
        ))];
    }
    let Some(s) = setting(key) else {
        return vec![Effect::warning(format!(
            "Unknown setting: \"{key}\". Run /pruner settings for the list."
        ))];
    };
    match verb {
        "edit" => vec![edit(e, s)],
        "input" => vec![edit_input(e, s)],
        "set" => set(e, s, value),
        _ => {
            let mut out = set(e, s, value);
            out.push(menu(e));
            out
        }
    }
}
