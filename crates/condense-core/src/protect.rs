//! Protection: tool names and `args.path` globs whose outputs are never pruned.
//!
//! A call is protected when its tool name is in `protectedTools`, or when its
//! `args.path` is a string matching one of the `protectedPaths` globs. The glob
//! contract (from the protected-paths spec):
//!
//! - `*` matches any run of characters within one path segment (no `/`), `?`
//!   exactly one such character;
//! - `**` matches across segments; `**/` also matches zero directories, so
//!   `**/SKILL.md` matches a bare `SKILL.md`. A run of three or more `*` acts
//!   as `**`;
//! - every other character is literal (`[`, `]`, `{`, `}`, `,` and `\`
//!   included), and matching is case-sensitive;
//! - the pattern must match the whole path, after each `\` in the path has
//!   been turned into `/`.
//!
//! Patterns are compiled once, by [`Protection::compile`], into one
//! [`globset::GlobSet`]. globset's own syntax differs from the contract (it
//! has classes and alternations, and reads a `**` not bounded by `/` as `*`),
//! so each pattern is translated first: special characters are escaped and a
//! free-standing `**` becomes an alternation that crosses segments.
//!
//! One known difference: globset matches bytes, so `?` matches one byte of
//! UTF-8 rather than one character. For ASCII paths the two agree; for a
//! non-ASCII character use `*`.

use std::borrow::Cow;
use std::collections::HashSet;

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::Value;

use crate::config::Config;

/// Most `protectedPaths` patterns compiled; the rest are ignored with a
/// warning. globset's compiled set grows with every pattern (100,000
/// patterns took 1.1 GB), so the cap bounds it (1,000 patterns: a few MB).
pub const MAX_PROTECTED_PATTERNS: usize = 1000;

/// A compiled protection predicate. Build once per config.
///
/// [`Protection::default`] protects nothing; it is not the protection of
/// [`Config::default`] (which protects `**/skills/**/*.md`).
#[derive(Debug, Clone, Default)]
pub struct Protection {
    tools: HashSet<String>,
    paths: GlobSet,
    fingerprint: u64,
}

impl Protection {
    /// Compiles the protection rules of a config, dropping any pattern that
    /// does not compile (see [`Protection::compile`] for the reports).
    pub fn new(config: &Config) -> Self {
        Self::compile(config).0
    }

    /// Compiles the protection rules of a config, with one human-readable
    /// message per pattern that was dropped or can never match.
    ///
    /// Bad patterns are never fatal: the rest still protect.
    pub fn compile(config: &Config) -> (Self, Vec<String>) {
        let mut warnings = Vec::new();
        let mut builder = GlobSetBuilder::new();
        let mut seen = HashSet::new();
        let distinct: Vec<&String> = config
            .protected_paths
            .iter()
            .filter(|p| seen.insert(p.as_str()))
            .collect();
        if distinct.len() > MAX_PROTECTED_PATTERNS {
            warnings.push(format!(
                "contextPrune.protectedPaths: {} distinct patterns; only the first \
                 {MAX_PROTECTED_PATTERNS} are used (the rest are ignored, which bounds memory)",
                distinct.len()
            ));
        }
        for pattern in distinct.into_iter().take(MAX_PROTECTED_PATTERNS) {
            if pattern.contains('\\') {
                warnings.push(format!(
                    "contextPrune.protectedPaths: pattern {} contains `\\`, which never \
                     matches (paths are compared with `\\` turned into `/`); use `/`",
                    Value::from(pattern.as_str())
                ));
            }
            match compile_pattern(pattern) {
                Ok(glob) => {
                    builder.add(glob);
                }
                Err(err) => warnings.push(format!(
                    "contextPrune.protectedPaths: pattern {} ignored: {err}",
                    Value::from(pattern.as_str())
                )),
            }
        }
        let paths = builder.build().unwrap_or_else(|err| {
            warnings.push(format!(
                "contextPrune.protectedPaths: patterns ignored: {err}"
            ));
            GlobSet::empty()
        });
        let tools = config.protected_tools.iter().cloned().collect();
        let fingerprint = fingerprint_of(&config.protected_tools, &config.protected_paths);
        (
            Protection {
                tools,
                paths,
                fingerprint,
            },
            warnings,
        )
    }

    /// Identifies the rules (tools and patterns), so results cached under one
    /// set of rules are not reused under another.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// True iff the call's tool name is protected or its `args.path` matches a glob.
    ///
    /// A missing or non-string `args.path` (or non-object `args`) never
    /// matches a glob.
    pub fn is_protected(&self, tool_name: &str, args: &Value) -> bool {
        self.is_protected_call(tool_name, args.get("path").and_then(Value::as_str))
    }

    /// [`Protection::is_protected`] of a call whose `args.path` is `path`
    /// (`None`: missing or not a string), all the rules read of its
    /// arguments.
    pub fn is_protected_call(&self, tool_name: &str, path: Option<&str>) -> bool {
        self.is_protected_tool(tool_name) || path.is_some_and(|path| self.is_protected_path(path))
    }

    /// True iff `tool_name` is one of `protectedTools` (exact, case-sensitive).
    pub fn is_protected_tool(&self, tool_name: &str) -> bool {
        self.tools.contains(tool_name)
    }

    /// True iff `path`, with `\` turned into `/`, matches one of the
    /// `protectedPaths` globs.
    pub fn is_protected_path(&self, path: &str) -> bool {
        if self.paths.is_empty() {
            return false;
        }
        let path: Cow<'_, str> = if path.contains('\\') {
            Cow::Owned(path.replace('\\', "/"))
        } else {
            Cow::Borrowed(path)
        };
        self.paths
            .is_match_candidate(&Candidate::new(path.as_ref()))
    }
}

/// Compiles one contract glob with globset.
/// A deterministic hash of the rules (tools sorted; patterns in order).
fn fingerprint_of(tools: &[String], paths: &[String]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut sorted: Vec<&String> = tools.iter().collect();
    sorted.sort();
    let mut h = rustc_hash::FxHasher::default();
    sorted.hash(&mut h);
    paths.hash(&mut h);
    // Never 0, so a default (empty) Protection is told apart from compiled rules.
    h.finish() | 1
}

fn compile_pattern(pattern: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(&to_globset_syntax(pattern))
        .literal_separator(true)
        .backslash_escape(true)
        .empty_alternates(true)
        .case_insensitive(false)
        .build()
}

/// Rewrites a contract glob into globset syntax with the same meaning.
///
/// globset reads `**` as "any path" only when it is bounded by `/` or the
/// pattern's ends (`**/x`, `x/**/y`, `x/**`, `**`); elsewhere it is `*`. In
/// the contract, `**/` is `(.*/)?` and any other `**` is `.*` wherever it
/// stands, so the unbounded forms are spelled out:
///
/// - `**/` after a non-`/` becomes `{,*/**/}` (nothing, or anything ending
///   in `/`);
/// - any other unbounded `**` becomes `{*,*/**/*}` (anything without a `/`,
///   or anything with one).
///
/// `[`, `]`, `{`, `}`, `,` and `\` are escaped so that they stay literal.
///
/// A pattern ending in `.` ends in the class `[.]` instead. globset reads a
/// literal tail such as `.`, `..` or `.md` as an extension or a base name it
/// may check alone, and it gives a path whose last segment is `..` neither
/// (`?.`, `**/..`, `**/*.` and `a**.` all missed `..` or `x/..`); no tail
/// but `.` can match `..`, and a class leaves the pattern to its regex.
fn to_globset_syntax(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' => {
                let start = i;
                while i < chars.len() && chars[i] == '*' {
                    i += 1;
                }
                if i - start == 1 {
                    out.push('*');
                    continue;
                }
                // globset sees a `**` as bounded when the character before it
                // *in its own input* is `/` (or there is none), so look at
                // what was emitted, not at the source: after a `{...}` group
                // a `**` must be spelled out again.
                let bounded_before = out.is_empty() || out.ends_with('/');
                match chars.get(i) {
                    Some('/') => {
                        i += 1;
                        out.push_str(if bounded_before { "**/" } else { "{,*/**/}" });
                    }
                    None if bounded_before => out.push_str("**"),
                    _ => out.push_str("{*,*/**/*}"),
                }
                continue;
            }
            '[' | ']' | '{' | '}' | ',' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            // A final `.` as a class: see the function's doc.
            '.' if i + 1 == chars.len() => out.push_str("[.]"),
            _ => out.push(c),
        }
        i += 1;
    }
    // A pattern made only of `**/` is one recursive prefix to globset, which
    // it treats as "match everything"; the contract wants "empty, or ending
    // in `/`".
    if !out.is_empty() && out.as_bytes().chunks(3).all(|c| c == b"**/") {
        return "{,*/**/}".to_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::to_globset_syntax;

    #[test]
    fn translation_keeps_bounded_double_stars_and_escapes_specials() {
        assert_eq!(to_globset_syntax("**/skills/**/*.md"), "**/skills/**/*.md");
        assert_eq!(to_globset_syntax("a/**"), "a/**");
        assert_eq!(to_globset_syntax("**"), "**");
        assert_eq!(to_globset_syntax("a**b"), "a{*,*/**/*}b");
        assert_eq!(to_globset_syntax("a**/b"), "a{,*/**/}b");
        assert_eq!(to_globset_syntax("***/x"), "**/x");
        assert_eq!(to_globset_syntax("a**/**/b"), "a{,*/**/}{,*/**/}b");
        assert_eq!(to_globset_syntax("a/**/**/b"), "a/**/**/b");
        assert_eq!(to_globset_syntax("**/"), "{,*/**/}");
        assert_eq!(to_globset_syntax("**/**/"), "{,*/**/}");
        assert_eq!(to_globset_syntax("[a]{b,c}\\"), "\\[a\\]\\{b\\,c\\}\\\\");
        assert_eq!(to_globset_syntax("?."), "?[.]");
        assert_eq!(to_globset_syntax("**/.."), "**/.[.]");
        assert_eq!(to_globset_syntax("a.b"), "a.b");
    }
}
