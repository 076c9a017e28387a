//! Architecture invariant: within the crates listed here, no top-level
//! module imports another that imports it back (directly or around a
//! circle). A module is a file `src/<m>.rs` or a directory `src/<m>/`; an
//! import is any `crate::<m>` path in code (not comments), `use
//! crate::{<m>, …}` included.
//!
//! condense-core is not listed yet: its modules form one circle
//! (docs/ARCHITECTURE.md, issue 36).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules are layered.
const LAYERED: [&str; 2] = ["condense-cli", "condense-host-proxy"];

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The names `crate::` paths in `text` start with.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e}}`: the names at depth one.
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        out.insert(ident(&group[i..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

/// Each top-level module's imports of the crate's other modules.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let module_of = |p: &Path| -> Option<String> {
        let rel = p.strip_prefix(src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
        Some(first.trim_end_matches(".rs").to_owned())
    };
    let files = rust_files(src);
    let modules: BTreeSet<String> = files.iter().filter_map(|p| module_of(p)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(m) = module_of(f) else { continue };
        if m == "main" || m == "lib" {
            continue;
        }
        // Code only: a doc link to another module is no import.
        let text: String = std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let deps = g.entry(m.clone()).or_default();
        for name in crate_paths(&text) {
            if name != m && modules.contains(&name) && name != "main" && name != "lib" {
                deps.insert(name);
            }
        }
    }
    g
}

/// A circle of `g`, if it has one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap();
                let mut c = path[at..].to_vec();
                c.push(n.to_owned());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_owned(), 1);
        path.push(n.to_owned());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_module_imports_around_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in LAYERED {
        let g = graph(&root.join("crates").join(krate).join("src"));
        assert!(g.len() > 3, "{krate}: its modules were found");
        if let Some(c) = circle(&g) {
            panic!(
                "{krate}: modules import around a circle: {}",
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn the_check_finds_a_circle_and_reads_grouped_imports() {
    assert_eq!(
        crate_paths("use crate::{a, b::c, d::{e, f}};\nlet x = crate::g::h();"),
        ["a", "b", "d", "g"].map(str::to_owned).into()
    );
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(circle(&g).unwrap().len(), 4);
    let mut acyclic = g.clone();
    acyclic.get_mut("c").unwrap().clear();
    assert_eq!(circle(&acyclic), None);
}
