//! Protection by tool name and by `args.path` glob, per the protected-paths
//! spec: `*`/`?` within a segment, `**` across, `**/` also zero directories,
//! everything else literal, `\` in paths read as `/`, full-path,
//! case-sensitive.

use condense_core::Config;
use condense_core::Protection;
use proptest::prelude::*;
use serde_json::{json, Value};

fn with_paths(patterns: &[&str]) -> Protection {
    let config = Config {
        protected_paths: patterns.iter().map(|p| (*p).to_owned()).collect(),
        ..Config::default()
    };
    let (protection, warnings) = Protection::compile(&config);
    assert!(warnings.is_empty(), "{warnings:?}");
    protection
}

fn matches(pattern: &str, path: &str) -> bool {
    with_paths(&[pattern]).is_protected("read", &json!({ "path": path }))
}

/// (pattern, path, protected?)
const GLOB_CASES: &[(&str, &str, bool)] = &[
    // `**/` matches zero or more directories.
    ("**/SKILL.md", "SKILL.md", true),
    ("**/SKILL.md", "a/SKILL.md", true),
    ("**/SKILL.md", "/home/u/a/b/SKILL.md", true),
    ("**/SKILL.md", "/SKILL.md", true),
    ("**/SKILL.md", "xSKILL.md", false),
    ("**/SKILL.md", "SKILL.mdx", false),
    ("a/**/b", "a/b", true),
    ("a/**/b", "a/x/y/b", true),
    ("a/**/b", "ab", false),
    ("a/**/b", "a/xb", false),
    // `**` crosses segments wherever it stands.
    ("docs/**", "docs/a/b/c.txt", true),
    ("docs/**", "docs/a", true),
    ("docs/**", "docs", false),
    ("docs/**", "other/docs/a", false),
    ("**", "", true),
    ("**", "any/thing/at/all", true),
    ("a**z", "az", true),
    ("a**z", "a/b/c/z", true),
    ("a**z", "ab/cz", true),
    ("a**z", "a/b/c/y", false),
    ("**.md", "x/y/z.md", true),
    ("**.md", "z.md", true),
    ("src/**.rs", "src/a/b.rs", true),
    ("a**/b", "ab", true),
    ("a**/b", "ax/y/b", true),
    ("a**/b", "a/b", true),
    ("a**/b", "axb", false),
    ("a**/**/b", "ab", true),
    ("a**/**/b", "ax/y/b", true),
    ("***/x", "x", true),
    ("***/x", "a/b/x", true),
    // `*` stays inside one segment.
    ("src/*.rs", "src/main.rs", true),
    ("src/*.rs", "src/.rs", true),
    ("src/*.rs", "src/a/main.rs", false),
    ("*", "file", true),
    ("*", "dir/file", false),
    ("*/*", "dir/file", true),
    ("skills/*.md", "x/skills/a.md", false),
    // `?` is exactly one non-`/` character.
    ("a?c", "abc", true),
    ("a?c", "ac", false),
    ("a?c", "abbc", false),
    ("a?c", "a/c", false),
    ("???", "abc", true),
    // Other characters are literal, including glob and regex syntax.
    ("file[1].md", "file[1].md", true),
    ("file[1].md", "file1.md", false),
    ("[ab].md", "a.md", false),
    ("[!a].md", "[!a].md", true),
    ("{a,b}.md", "{a,b}.md", true),
    ("{a,b}.md", "a.md", false),
    ("a,b", "a,b", true),
    ("a.b", "axb", false),
    ("a+b(c)|d$^", "a+b(c)|d$^", true),
    // A last segment `..` is a name like any other (globset gives such a
    // path no base name or extension, which patterns ending in `.` relied on).
    ("?.", "..", true),
    ("x/?.", "x/..", true),
    ("?.", "a/..", false),
    ("*.", "..", true),
    ("*.", ".", true),
    ("**/..", "..", true),
    ("**/..", "a/b/..", true),
    ("**/*.", "a/..", true),
    ("a**.", "a/..", true),
    ("**/.", "a/.", true),
    ("..", "..", true),
    ("x.md", "X.MD", false),
    ("**/Skills/**", "a/skills/b", false),
    ("é/*.md", "é/x.md", true),
    // Full-path match, no-match cases.
    ("skills/a.md", "skills/a.md", true),
    ("skills/a.md", "skills/a.md/", false),
    ("skills/a.md", "./skills/a.md", false),
    ("**/skills/a.md", "./skills/a.md", true),
    ("a/b", "a/b/c", false),
    ("", "", true),
    ("", "a", false),
];

#[test]
fn glob_contract() {
    let failures: Vec<String> = GLOB_CASES
        .iter()
        .filter(|(p, s, want)| matches(p, s) != *want)
        .map(|(p, s, want)| format!("{p:?} vs {s:?}: want {want}"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn backslashes_in_the_path_read_as_slashes() {
    assert!(matches(
        "**/skills/**/*.md",
        r"C:\Users\u\.agents\skills\x\SKILL.md"
    ));
    assert!(matches("a/b/*.txt", r"a\b\c.txt"));
    assert!(matches("a/b/*.txt", r"a/b\c.txt"));
    assert!(!matches("a/*", r"a\b\c"));
}

#[test]
fn a_backslash_in_a_pattern_is_literal_and_reported() {
    let config = Config {
        protected_paths: vec![r"a\b".into(), "ok/**".into()],
        ..Config::default()
    };
    let (p, warnings) = Protection::compile(&config);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(r#""a\\b""#), "{}", warnings[0]);
    // It cannot match: the path's `\` has become `/`.
    assert!(!p.is_protected_path(r"a\b"));
    assert!(!p.is_protected_path("a/b"));
    // The other pattern still protects.
    assert!(p.is_protected_path("ok/x"));
    // `new` keeps the same patterns, silently.
    assert!(Protection::new(&config).is_protected_path("ok/x"));
}

#[test]
fn the_default_protects_skill_markdown_anywhere() {
    let p = Protection::new(&Config::default());
    let read = |path: &str| p.is_protected("read", &json!({ "path": path }));
    assert!(read("/home/u/.agents/skills/x/SKILL.md"));
    assert!(read("skills/a/b.md"));
    assert!(read("skills/a.md"));
    assert!(read(".agents/skills/writing-plans/SKILL.md"));
    assert!(read("/p/superpowers/skills/tdd/reference.md"));
    assert!(!read("skills/a.txt"));
    assert!(!read("skill/a.md"));
    assert!(!read("myskills/a.md"));
    assert!(!read("docs/README.md"));
    assert!(!read("skills/a.MD"));
}

#[test]
fn tool_name_or_path() {
    let config = Config {
        protected_tools: vec!["memory".into()],
        protected_paths: vec!["**/*.lock".into()],
        ..Config::default()
    };
    let p = Protection::new(&config);
    assert!(p.is_protected("memory", &json!({})));
    assert!(p.is_protected("memory", &Value::Null));
    assert!(p.is_protected("memory", &json!({"path": "x.txt"})));
    assert!(p.is_protected("read", &json!({"path": "a/Cargo.lock"})));
    assert!(p.is_protected("write", &json!({"path": "Cargo.lock", "content": ""})));
    assert!(!p.is_protected("read", &json!({"path": "a/Cargo.toml"})));
    assert!(
        !p.is_protected("Memory", &json!({})),
        "names are case-sensitive"
    );
    assert!(p.is_protected_tool("memory"));
    assert!(!p.is_protected_tool("read"));
}

#[test]
fn only_a_string_path_can_match() {
    let p = with_paths(&["**"]);
    assert!(p.is_protected("read", &json!({"path": "anything"})));
    for args in [
        json!({}),
        json!({"path": null}),
        json!({"path": 5}),
        json!({"path": ["a"]}),
        json!({"path": {"p": "a"}}),
        json!({"file_path": "a"}),
        json!({"args": {"path": "a"}}),
        json!("a"),
        json!(["a"]),
        Value::Null,
    ] {
        assert!(!p.is_protected("read", &args), "{args}");
    }
}

#[test]
fn an_empty_config_protects_nothing() {
    let config = Config {
        protected_tools: vec![],
        protected_paths: vec![],
        ..Config::default()
    };
    let (p, warnings) = Protection::compile(&config);
    assert!(warnings.is_empty());
    assert!(!p.is_protected("read", &json!({"path": "skills/a/SKILL.md"})));
    assert!(!p.is_protected("", &json!({"path": ""})));

    let d = Protection::default();
    assert!(!d.is_protected("read", &json!({"path": "skills/a/SKILL.md"})));
}

#[test]
fn the_kill_switch_from_settings_turns_path_protection_off() {
    let (config, _) = Config::from_settings_value(&json!({ "protectedPaths": [] }));
    let p = Protection::new(&config);
    assert!(!p.is_protected("read", &json!({"path": "skills/a/SKILL.md"})));
}

#[test]
fn several_patterns_any_match() {
    let p = with_paths(&["a/*", "**/b.md", "c?"]);
    assert!(p.is_protected_path("a/x"));
    assert!(p.is_protected_path("x/y/b.md"));
    assert!(p.is_protected_path("cd"));
    assert!(!p.is_protected_path("d"));
}

/// The contract as a direct backtracking matcher, to check the globset
/// translation against.
mod reference {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Tok {
        Lit(char),
        Star,
        Quest,
        /// `**/`: nothing, or anything ending in `/`.
        AnyDirs,
        /// Any other `**`: anything.
        Any,
    }

    fn tokens(pattern: &str) -> Vec<Tok> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    let start = i;
                    while i < chars.len() && chars[i] == '*' {
                        i += 1;
                    }
                    if i - start == 1 {
                        out.push(Tok::Star);
                    } else if chars.get(i) == Some(&'/') {
                        i += 1;
                        out.push(Tok::AnyDirs);
                    } else {
                        out.push(Tok::Any);
                    }
                    continue;
                }
                '?' => out.push(Tok::Quest),
                c => out.push(Tok::Lit(c)),
            }
            i += 1;
        }
        out
    }

    fn go(t: &[Tok], s: &[char]) -> bool {
        let Some((first, rest)) = t.split_first() else {
            return s.is_empty();
        };
        match *first {
            Tok::Lit(c) => s.first() == Some(&c) && go(rest, &s[1..]),
            Tok::Quest => s.first().is_some_and(|c| *c != '/') && go(rest, &s[1..]),
            Tok::Star => {
                for k in 0..=s.len() {
                    if go(rest, &s[k..]) {
                        return true;
                    }
                    if k < s.len() && s[k] == '/' {
                        break;
                    }
                }
                false
            }
            Tok::Any => (0..=s.len()).any(|k| go(rest, &s[k..])),
            Tok::AnyDirs => {
                go(rest, s) || (1..=s.len()).any(|k| s[k - 1] == '/' && go(rest, &s[k..]))
            }
        }
    }

    pub fn is_match(pattern: &str, path: &str) -> bool {
        let path: Vec<char> = path.replace('\\', "/").chars().collect();
        go(&tokens(pattern), &path)
    }
}

#[test]
fn reference_matcher_agrees_with_the_table() {
    for (p, s, want) in GLOB_CASES {
        assert_eq!(reference::is_match(p, s), *want, "{p:?} vs {s:?}");
    }
}

/// Compiles `pattern` alone and compares with the reference on `path`.
fn check_against_reference(pattern: &str, path: &str) -> Result<(), TestCaseError> {
    let config = Config {
        protected_paths: vec![pattern.to_owned()],
        ..Config::default()
    };
    let (p, warnings) = Protection::compile(&config);
    // The only report is the "`\` never matches" hint: no pattern fails.
    prop_assert_eq!(
        warnings.len(),
        usize::from(pattern.contains('\\')),
        "{:?}",
        warnings
    );
    prop_assert_eq!(
        p.is_protected_path(path),
        reference::is_match(pattern, path),
        "pattern {:?} path {:?}",
        pattern,
        path
    );
    Ok(())
}

/// 3,000 cases unless `PROPTEST_CASES` says otherwise.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Stars, `?`, `/` and `.` only, over short paths: the wildcard
    /// semantics, segments `.` and `..` included.
    #[test]
    fn wildcards_match_the_contract(
        pattern in "[ab/.*?]{0,7}",
        path in "[ab/.]{0,7}",
    ) {
        check_against_reference(&pattern, &path)?;
    }

    /// Characters globset would read as syntax stay literal.
    #[test]
    fn special_characters_match_the_contract(
        pattern in "[ab/*?.\\[\\]{},!\\\\]{0,8}",
        path in "[abA/.\\[\\]{},!\\\\]{0,8}",
    ) {
        check_against_reference(&pattern, &path)?;
    }
}

#[test]
fn protected_patterns_are_capped_with_a_warning() {
    use condense_core::MAX_PROTECTED_PATTERNS;
    let config = Config {
        protected_paths: (0..100_000)
            .map(|i| format!("dir{i}/**/*.{}", ["rs", "md", "txt"][i % 3]))
            .chain(std::iter::once("dir0/**/*.rs".to_owned()))
            .collect(),
        ..Config::default()
    };
    let (protection, warnings) = Protection::compile(&config);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("100000 distinct patterns"),
        "{warnings:?}"
    );
    assert!(protection.is_protected_path("dir0/a/b.rs"));
    let last = MAX_PROTECTED_PATTERNS - 1;
    let ext = ["rs", "md", "txt"][last % 3];
    assert!(protection.is_protected_path(&format!("dir{last}/x.{ext}")));
    let first_ignored = MAX_PROTECTED_PATTERNS;
    let ext = ["rs", "md", "txt"][first_ignored % 3];
    assert!(!protection.is_protected_path(&format!("dir{first_ignored}/x.{ext}")));
    let few = Config {
        protected_paths: vec!["a/*.rs".into(); 5000],
        ..Config::default()
    };
    let (protection, warnings) = Protection::compile(&few);
    assert!(warnings.is_empty(), "duplicates count once: {warnings:?}");
    assert!(protection.is_protected_path("a/b.rs"));
}
