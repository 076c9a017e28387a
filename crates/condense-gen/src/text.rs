//! Made-up but plausible tool output: prose, file contents, build logs,
//! test runs, grep hits, schemas, web pages and a skill file, each drawn
//! from the seeded stream so its size and look are under the caller's control.

use crate::rng::*;

pub(crate) const WORDS: &[&str] = &[
    "the", "loader", "session", "entry", "branch", "render", "pipeline", "stub", "summary",
    "index", "frontier", "chain", "window", "parser", "error", "path", "module", "test", "build",
    "cache", "token", "budget", "replay", "state", "record", "value", "field", "message", "config",
    "check", "then", "and", "with", "before", "after", "each", "result", "output", "file", "line",
    "call", "read", "write", "edit", "keeps", "drops", "returns", "expects", "handles", "missing",
];

pub(crate) fn words(rng: &mut SplitMix64, out: &mut String, chars: usize) {
    let target = out.len() + chars;
    let mut sentence = 0;
    while out.len() < target {
        let w = *rng.pick(WORDS);
        if sentence == 0 {
            let mut c = w.chars();
            if let Some(first) = c.next() {
                out.extend(first.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push_str(w);
        }
        sentence += 1;
        if sentence > 6 && rng.chance(15) {
            out.push_str(". ");
            sentence = 0;
        } else {
            out.push(' ');
        }
    }
    out.truncate(target);
}

pub(crate) fn thinking_text(rng: &mut SplitMix64, n: usize, chars: usize) -> String {
    let mut s = format!("Turn {n}: ");
    let rest = chars.saturating_sub(s.len());
    words(rng, &mut s, rest);
    s.truncate(chars);
    s
}

pub(crate) fn prose(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 8);
    words(rng, &mut s, chars.saturating_sub(1));
    let t = s.trim_end().trim_end_matches('.').to_owned();
    t + "."
}

/// An `ls -la`-style listing of `chars` chars.
pub(crate) fn listing(rng: &mut SplitMix64, n: usize, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 100);
    let mut line = 0usize;
    while s.len() < chars {
        s.push_str(&format!(
            "-rw-r--r-- 1 dev dev {:>6} Jan {:>2} 10:{:02} src/module_{n}/file_{line:03}.rs\n",
            rng.below(100_000),
            1 + rng.below(28),
            rng.below(60)
        ));
        line += 1;
    }
    s.truncate(chars);
    s
}

pub(crate) const FILES: &[&str] = &[
    "crates/engine/src/lib.rs",
    "crates/engine/src/session.rs",
    "crates/engine/src/render.rs",
    "crates/engine/src/config.rs",
    "crates/engine/src/capture.rs",
    "crates/engine/src/flush.rs",
    "crates/engine/src/state.rs",
    "crates/engine/src/protect.rs",
    "crates/engine/tests/render.rs",
    "crates/engine/tests/session.rs",
    "crates/cli/src/main.rs",
    "crates/cli/src/output.rs",
    "crates/store/src/append.rs",
    "crates/store/src/replay.rs",
    "Cargo.toml",
    "README.md",
    "docs/ARCHITECTURE.md",
];

pub(crate) const IDENTS: &[&str] = &[
    "session", "entry", "branch", "state", "record", "summary", "config", "frontier", "chain",
    "message", "index", "budget", "cache", "plan", "batch", "result",
];

/// A source file's content: stable per path, with an edit marker per version.
pub(crate) fn file_content(seed: u64, path: &str, version: u32) -> String {
    let mut rng = SplitMix64::new(seed ^ fnv1a(path));
    let chars = rng.range(1500, 9000) as usize;
    let mut s = String::with_capacity(chars + 200);
    let mut line = 0;
    let edited_line = rng.range(3, 12);
    let doc = path.ends_with(".md");
    if path.ends_with(".rs") {
        s.push_str(&format!(
            "//! {path}\n\nuse std::collections::HashMap;\n\nuse crate::error::Error;\n\n"
        ));
    }
    while s.len() < chars {
        line += 1;
        if version > 0 && line == edited_line {
            s.push_str(&format!("// edited (revision {version})\n"));
            continue;
        }
        let a = *rng.pick(IDENTS);
        let b = *rng.pick(IDENTS);
        if doc {
            s.push_str(&format!(
                "The {a} keeps its {b} until the next flush; see `{b}_{line}`.\n"
            ));
        } else {
            match rng.below(5) {
                0 => s.push_str(&format!(
                    "pub fn {a}_{line}(&self, {b}: &{}) -> Result<(), Error> {{\n",
                    capitalize(b)
                )),
                1 => s.push_str(&format!("    let {a} = self.{b}.get({line}).cloned();\n")),
                2 => s.push_str(&format!("    // {a}: {b} must stay in order ({line})\n")),
                3 => s.push_str("}\n\n"),
                _ => s.push_str(&format!(
                    "    if {a}.is_empty() {{ return Err(Error::{}({line})); }}\n",
                    capitalize(b)
                )),
            }
        }
    }
    s
}

pub(crate) fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

pub(crate) fn build_errors(rng: &mut SplitMix64, file: &str) -> String {
    let mut s = String::new();
    for krate in ["engine", "store", "cli"] {
        s.push_str(&format!(
            "   Compiling {krate} v0.1.0 (/home/dev/project/crates/{krate})\n"
        ));
    }
    let errors = rng.range(2, 6);
    for e in 0..errors {
        let line = rng.range(10, 400);
        let col = rng.range(5, 40);
        let (code, what) = *rng.pick(&[
            ("E0308", "mismatched types"),
            ("E0425", "cannot find value `frontier` in this scope"),
            (
                "E0599",
                "no method named `entry_ids` found for struct `Session`",
            ),
            (
                "E0502",
                "cannot borrow `state` as mutable because it is also borrowed as immutable",
            ),
        ]);
        s.push_str(&format!(
            "error[{code}]: {what}\n  --> {file}:{line}:{col}\n   |\n{line:>3} |         let n: u32 = text.len();\n   |                ---   ^^^^^^^^^^ expected `u32`, found `usize`\n   |                |\n   |                expected due to this\n   |\n"
        ));
        if e % 2 == 1 {
            s.push_str("help: you can convert a `usize` to a `u32` and panic if the converted value doesn't fit\n   |\n   |         let n: u32 = text.len().try_into().unwrap();\n   |                                +++++++++++++++++++++\n\n");
        }
    }
    let warnings = rng.range(0, 4);
    for _ in 0..warnings {
        s.push_str(&format!(
            "warning: unused variable: `{}`\n  --> {file}:{}:9\n   |\n   = note: `#[warn(unused_variables)]` on by default\n\n",
            rng.pick(IDENTS),
            rng.range(10, 400)
        ));
    }
    s.push_str(&format!(
        "error: could not compile `engine` (lib) due to {errors} previous errors; {warnings} warnings emitted\n\nCommand exited with code 101"
    ));
    s
}

pub(crate) fn build_ok(rng: &mut SplitMix64) -> String {
    format!(
        "   Compiling engine v0.1.0 (/home/dev/project/crates/engine)\n   Compiling store v0.1.0 (/home/dev/project/crates/store)\n   Compiling cli v0.1.0 (/home/dev/project/crates/cli)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}.{:02}s",
        rng.range(2, 40),
        rng.below(100)
    )
}

pub(crate) fn test_output(rng: &mut SplitMix64, failing: bool) -> String {
    let tests = rng.range(30, 140);
    let mut s = format!("\nrunning {tests} tests\n");
    let mut failed = Vec::new();
    for t in 0..tests {
        let name = format!("{}::tests::{}_{t}", rng.pick(IDENTS), rng.pick(IDENTS));
        if failing && rng.chance(4) {
            s.push_str(&format!("test {name} ... FAILED\n"));
            failed.push(name);
        } else {
            s.push_str(&format!("test {name} ... ok\n"));
        }
    }
    if failed.is_empty() {
        s.push_str(&format!(
            "\ntest result: ok. {tests} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{:02}s\n",
            rng.below(100)
        ));
    } else {
        s.push_str("\nfailures:\n\n");
        for name in &failed {
            s.push_str(&format!(
                "---- {name} stdout ----\nthread '{name}' panicked at crates/engine/src/render.rs:{}:5:\nassertion `left == right` failed\n  left: {}\n right: {}\n\n",
                rng.range(10, 900),
                rng.below(100),
                rng.below(100)
            ));
        }
        s.push_str(&format!(
            "\ntest result: FAILED. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out\n\nCommand exited with code 101",
            tests as usize - failed.len(),
            failed.len()
        ));
    }
    s
}

pub(crate) fn grep_output(rng: &mut SplitMix64, pattern: &str) -> String {
    let hits = rng.range(4, 40);
    let mut s = String::new();
    for _ in 0..hits {
        s.push_str(&format!(
            "{}:{}:    let {} = {pattern}(&{});\n",
            rng.pick(FILES),
            rng.range(1, 600),
            rng.pick(IDENTS),
            rng.pick(IDENTS)
        ));
    }
    s
}

pub(crate) fn schema_text(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::from("{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n  \"type\": \"object\",\n  \"properties\": {\n");
    let mut n = 0;
    while s.len() < chars {
        s.push_str(&format!(
            "    \"{}{}\": {{ \"type\": \"{}\", \"description\": \"",
            rng.pick(IDENTS),
            capitalize(rng.pick::<&str>(IDENTS)),
            rng.pick(&["string", "integer", "boolean", "number"])
        ));
        words(rng, &mut s, 60);
        s.push_str(&format!("\", \"default\": {n} }},\n"));
        n += 1;
    }
    s.push_str("    \"end\": { \"type\": \"null\" }\n  }\n}\n");
    s
}

pub(crate) fn web_page(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 400);
    let mut section = 0;
    while s.len() < chars {
        section += 1;
        s.push_str(&format!(
            "## {section}. {}\n\n",
            capitalize(rng.pick::<&str>(IDENTS))
        ));
        for _ in 0..rng.range(2, 5) {
            let n = rng.range(200, 700) as usize;
            words(rng, &mut s, n);
            s.push_str("\n\n");
        }
    }
    s
}

pub(crate) const SKILL: &str = ".agents/skills/rust-review/SKILL.md";

pub(crate) fn skill_text(rng: &mut SplitMix64) -> String {
    let mut s = String::from(
        "---\nname: rust-review\ndescription: Review Rust changes for correctness, error handling and tests.\n---\n\n# Rust review\n\n",
    );
    for i in 1..=12 {
        s.push_str(&format!("{i}. "));
        words(rng, &mut s, 160);
        s.push('\n');
    }
    s
}
