//! The rule of each kind of value the block holds, one reader a kind:
//! what is accepted, what is used instead, and when that is reported.

use serde_json::{Map, Value};

use super::load::Normalizer;

/// What an integer key does with a value below its minimum.
#[derive(Clone, Copy)]
pub(super) enum BelowMin {
    /// Use the default (pi-condense's rule for most keys).
    Default,
    /// Use the minimum (`thinkingStrip.keepLastTurns`).
    Clamp,
}

/// The rule of one integer key.
#[derive(Clone, Copy)]
pub(super) struct IntRule {
    pub(super) default: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) below_min: BelowMin,
}

impl IntRule {
    /// `>= 0`, default on negatives, saturating at `u64::MAX`.
    pub(super) const fn non_negative(default: u64) -> Self {
        IntRule {
            default,
            min: 0,
            max: u64::MAX,
            below_min: BelowMin::Default,
        }
    }

    /// `>= 0`, default on negatives, saturating at `u32::MAX`.
    pub(super) const fn u32_non_negative(default: u32) -> Self {
        IntRule {
            default: default as u64,
            min: 0,
            max: u32::MAX as u64,
            below_min: BelowMin::Default,
        }
    }

    /// `>= 1`, saturating at `u32::MAX`.
    pub(super) const fn u32_at_least_one(default: u32, below_min: BelowMin) -> Self {
        IntRule {
            default: default as u64,
            min: 1,
            max: u32::MAX as u64,
            below_min,
        }
    }
}

impl Normalizer {
    /// The value of `path`'s last segment in `obj`, if both exist.
    pub(super) fn lookup<'v>(obj: Option<&'v Map<String, Value>>, path: &str) -> Option<&'v Value> {
        let field = path.rsplit('.').next().unwrap_or(path);
        obj?.get(field)
    }

    pub(super) fn boolean(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: bool,
    ) -> bool {
        match Self::lookup(obj, key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(bad) => {
                self.warn(key, bad, default.into());
                default
            }
        }
    }

    pub(super) fn string(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: &str,
    ) -> String {
        match Self::lookup(obj, key) {
            None => default.to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(bad) => {
                self.warn(key, bad, default.into());
                default.to_owned()
            }
        }
    }

    /// A string that must be one of a fixed set of names.
    pub(super) fn choice<T: Copy, S: Into<String>>(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: T,
        parse: impl Fn(&str) -> Option<T>,
        name: impl Fn(T) -> S,
    ) -> T {
        match Self::lookup(obj, key) {
            None => default,
            Some(v) => match v.as_str().and_then(&parse) {
                Some(t) => t,
                None => {
                    self.warn(key, v, Value::String(name(default).into()));
                    default
                }
            },
        }
    }

    /// An array of strings: a non-array gives the default, non-string
    /// elements are dropped. Either is reported.
    pub(super) fn string_list(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: &[String],
    ) -> Vec<String> {
        match Self::lookup(obj, key) {
            None => default.to_vec(),
            Some(list @ Value::Array(items)) => {
                let kept: Vec<String> = items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                if kept.len() != items.len() {
                    self.warn(key, list, kept.clone().into());
                }
                kept
            }
            Some(bad) => {
                self.warn(key, bad, default.to_vec().into());
                default.to_vec()
            }
        }
    }

    /// A fraction in `(0, 1]` or off: `null` and `0` mean off silently;
    /// anything else outside the range is off with a warning.
    pub(super) fn fraction(&mut self, obj: Option<&Map<String, Value>>, key: &str) -> Option<f64> {
        match Self::lookup(obj, key) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                Some(f) if (0.0..=1.0).contains(&f) => (f > 0.0).then_some(f),
                _ => {
                    self.warn(key, v, Value::Null);
                    None
                }
            },
        }
    }

    /// An integer key: numbers are floored, then checked against the rule;
    /// non-numbers take the default. Any change is reported.
    pub(super) fn integer(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        rule: IntRule,
    ) -> u64 {
        let Some(v) = Self::lookup(obj, key) else {
            return rule.default;
        };
        let below = match rule.below_min {
            BelowMin::Default => rule.default,
            BelowMin::Clamp => rule.min,
        };
        let used = match v {
            Value::Number(n) => {
                let floored = if let Some(u) = n.as_u64() {
                    Some(u)
                } else if n.as_i64().is_some() {
                    None // negative integer
                } else {
                    let f = n.as_f64().unwrap_or(-1.0);
                    if f < 0.0 {
                        None
                    } else if f.floor() >= u64::MAX as f64 {
                        Some(u64::MAX)
                    } else {
                        Some(f.floor() as u64)
                    }
                };
                match floored {
                    None => below,
                    Some(x) if x < rule.min => below,
                    Some(x) => x.min(rule.max),
                }
            }
            _ => rule.default,
        };
        // Silent only when the value already was exactly `used`.
        let exact = v.as_u64() == Some(used)
            || (v.is_f64()
                && v.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f == used as f64));
        if !exact {
            self.warn(key, v, used.into());
        }
        used
    }
}
