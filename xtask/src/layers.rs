//! The `layers` step: the crates' modules import only downward.
//!
//! condense-core's layers are declared once, in `docs/ARCHITECTURE.md`, as
//! a table between `<!-- layers:condense-core -->` and `<!-- /layers -->`:
//! one row per layer, the lowest first, its modules in backticks. This step
//! reads that table and every source file of the crate, and fails when
//!
//! - a module refers to a module of a higher layer;
//! - modules refer to each other in a circle (within one layer);
//! - a module is missing from the table, or the table names one that is
//!   not there.
//!
//! The other crates in [`CHECKED`] have no table; their modules must only
//! never refer to each other in a circle.
//!
//! A reference is a `crate::name` or `super::name` path in code that is
//! compiled outside tests: comments (doc links included), string literals
//! and `#[cfg(test)]` items are not read. A path through a name the crate
//! root re-exports (`crate::State`) counts as a reference to the module it
//! comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::runner::{Ctx, StepError};

/// The crates checked, and whether `docs/ARCHITECTURE.md` declares their
/// layers.
const CHECKED: &[(&str, bool)] = &[
    ("condense-core", true),
    ("condense-cli", false),
    ("condense-host-proxy", false),
];
const TABLE_DOC: &str = "docs/ARCHITECTURE.md";
const TABLE_END: &str = "<!-- /layers -->";

pub fn layers(ctx: &Ctx) -> Result<(), StepError> {
    let doc_path = ctx.root.join(TABLE_DOC);
    let doc = fs::read_to_string(&doc_path)
        .map_err(|e| StepError::new(format!("{}: {e}", doc_path.display())))?;
    let mut failed = 0;
    for &(krate, declared) in CHECKED {
        let table = if declared {
            parse_table(&doc, krate).map_err(|e| StepError::new(format!("{TABLE_DOC}: {e}")))?
        } else {
            Vec::new()
        };
        let src = ctx.root.join("crates").join(krate).join("src");
        let graph = Graph::of(&read_sources(&src)?);
        if graph.modules.len() < 4 {
            return Err(StepError::new(format!(
                "{krate}: only {} modules found under {}",
                graph.modules.len(),
                src.display()
            )));
        }
        let problems = check(declared.then_some(table.as_slice()), &graph);
        for p in &problems {
            eprintln!("layers: {krate}: {p}");
        }
        if problems.is_empty() {
            println!(
                "layers: {krate}: {} modules{}, {} references, none upward, no circle",
                graph.modules.len(),
                if declared {
                    format!(" in {} layers", table.len())
                } else {
                    String::new()
                },
                graph.edges.values().map(BTreeSet::len).sum::<usize>()
            );
        }
        failed += problems.len();
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(StepError::new(format!(
            "{failed} layering problem(s); condense-core's layers are declared in {TABLE_DOC}"
        )))
    }
}

/// One declared layer: its name and its modules.
#[derive(Debug, PartialEq, Eq)]
struct Layer {
    name: String,
    modules: Vec<String>,
}

/// The rows of `krate`'s layer table, lowest layer first.
fn parse_table(doc: &str, krate: &str) -> Result<Vec<Layer>, String> {
    let marker = format!("<!-- layers:{krate} -->");
    let start = doc
        .find(&marker)
        .ok_or_else(|| format!("no `{marker}` table"))?;
    let rest = &doc[start + marker.len()..];
    let end = rest
        .find(TABLE_END)
        .ok_or_else(|| format!("`{marker}` without `{TABLE_END}`"))?;
    let mut layers = Vec::new();
    for line in rest[..end].lines().map(str::trim) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if !line.starts_with('|') || cells.len() < 2 || cells[0].chars().all(|c| c == '-') {
            continue;
        }
        let modules: Vec<String> = cells[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        if modules.is_empty() {
            continue; // the header row
        }
        layers.push(Layer {
            name: cells[0].to_owned(),
            modules,
        });
    }
    if layers.is_empty() {
        return Err("the layer table has no rows".to_owned());
    }
    Ok(layers)
}

/// A source file: its top-level module, how deep it sits below the crate
/// root (`a.rs` and `a/mod.rs` are 1, `a/b.rs` is 2), and its text.
struct Source {
    module: String,
    depth: usize,
    path: PathBuf,
    text: String,
}

fn read_sources(src: &Path) -> Result<Vec<Source>, StepError> {
    let mut files = Vec::new();
    collect_rs(src, &mut files)
        .map_err(|e| StepError::new(format!("reading {}: {e}", src.display())))?;
    files.sort();
    let mut sources = Vec::new();
    for path in files {
        let rel = path.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let module = parts[0].trim_end_matches(".rs").to_owned();
        let depth = match parts.last().map(String::as_str) {
            Some("mod.rs") => parts.len() - 1,
            _ => parts.len(),
        };
        let text = fs::read_to_string(&path)
            .map_err(|e| StepError::new(format!("{}: {e}", path.display())))?;
        sources.push(Source {
            module,
            depth,
            path: rel.to_path_buf(),
            text,
        });
    }
    Ok(sources)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Which module refers to which, with a file that shows each reference.
struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeMap<String, BTreeSet<String>>,
    witness: BTreeMap<(String, String), PathBuf>,
}

impl Graph {
    fn of(sources: &[Source]) -> Graph {
        let root_exports = sources
            .iter()
            .find(|s| s.module == "lib")
            .map(|s| root_exports(&code_only(&s.text)))
            .unwrap_or_default();
        let modules: BTreeSet<String> = sources
            .iter()
            .map(|s| s.module.clone())
            .filter(|m| m != "lib")
            .collect();
        let mut graph = Graph {
            modules,
            edges: BTreeMap::new(),
            witness: BTreeMap::new(),
        };
        for s in sources.iter().filter(|s| s.module != "lib") {
            let code = without_test_items(&code_only(&s.text));
            for name in referenced_names(&code, s.depth) {
                // A module's own name wins: `crate::render::Gate` is the
                // module, though the root also re-exports a `render`.
                let target = match root_exports.get(&name) {
                    Some(module) if !graph.modules.contains(&name) => module.clone(),
                    _ => name,
                };
                if target != s.module && graph.modules.contains(&target) {
                    graph
                        .edges
                        .entry(s.module.clone())
                        .or_default()
                        .insert(target.clone());
                    graph
                        .witness
                        .entry((s.module.clone(), target))
                        .or_insert_with(|| s.path.clone());
                }
            }
        }
        graph
    }
}

/// Every layering problem, in a stable order: against the declared layers
/// when there are some, and the circles.
fn check(table: Option<&[Layer]>, graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(table) = table {
        problems.extend(check_table(table, graph));
    }
    for circle in circles(graph) {
        problems.push(format!(
            "modules refer to each other in a circle: {circle:?}"
        ));
    }
    problems
}

fn check_table(table: &[Layer], graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, layer) in table.iter().enumerate() {
        for m in &layer.modules {
            if layer_of.insert(m, i).is_some() {
                problems.push(format!("`{m}` is named in more than one layer"));
            }
            if !graph.modules.contains(m) {
                problems.push(format!(
                    "`{m}` (layer `{}`) is not a module of the crate",
                    layer.name
                ));
            }
        }
    }
    for m in &graph.modules {
        if !layer_of.contains_key(m.as_str()) {
            problems.push(format!("`{m}` is in no layer: add it to the table"));
        }
    }
    for (from, targets) in &graph.edges {
        for to in targets {
            let (Some(&a), Some(&b)) = (layer_of.get(from.as_str()), layer_of.get(to.as_str()))
            else {
                continue;
            };
            if b > a {
                problems.push(format!(
                    "`{from}` (layer `{}`) refers to `{to}` (layer `{}`), a higher layer, in {}",
                    table[a].name,
                    table[b].name,
                    graph.witness[&(from.clone(), to.clone())].display()
                ));
            }
        }
    }
    problems
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in &graph.modules {
        if !walk.index.contains_key(m.as_str()) {
            walk.visit(m);
        }
    }
    walk.found.sort();
    walk.found
}

/// The source with comments, string and character literals blanked out
/// (replaced by spaces, newlines kept), so that what remains is code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && next == Some(b'*') {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(next, Some(b'#') | Some(b'"')) && !ident_byte_before(b, i) {
            // A raw string: r"…" or r#…#"…"#…#.
            let mut hashes = 0;
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let closing: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body_start = j + 1;
            let end = b[body_start..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(b.len(), |p| body_start + p + closing.len());
            for &x in &b[i..end] {
                blank(&mut out, x);
            }
            i = end;
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                let step = if b[i] == b'\\' { 2 } else { 1 };
                for &x in &b[i..(i + step).min(b.len())] {
                    blank(&mut out, x);
                }
                i += step;
            }
            if i < b.len() {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if next == Some(b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 3 + p)
            } else {
                let width = next.map_or(1, utf8_width);
                (b.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
            };
            match end {
                Some(end) => {
                    out.extend(std::iter::repeat_n(b' ', end - i));
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn utf8_width(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

fn ident_byte_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The code with every `#[cfg(test)]` item removed: the attribute and the
/// item after it, up to its `;` or its balanced `{…}`.
fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let item = &rest[at + ATTR.len()..];
        let end = item_end(item);
        // Keep the line count, for nothing reads lines, but it is cheap.
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item at the start of `code` ends: after its first `;` at
/// brace depth zero, or after the `}` that closes its first `{`.
fn item_end(code: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in code.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    code.len()
}

/// The top-level names a file refers to through `crate::` and through as
/// many `super::` as lead back to the crate root (a file at `depth` needs
/// `depth` of them). A group `crate::{a::X, b}` names each of its members.
fn referenced_names(code: &str, depth: usize) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let at_word = !ident_byte_before(b, i) && (i == 0 || b[i - 1] != b':');
        let mut j = i;
        let rooted = if at_word && code[i..].starts_with("crate::") {
            j = i + "crate::".len();
            true
        } else if at_word && code[i..].starts_with("super::") {
            let mut supers = 0;
            while code[j..].starts_with("super::") {
                supers += 1;
                j += "super::".len();
            }
            supers >= depth
        } else {
            false
        };
        if !rooted {
            i += 1;
            continue;
        }
        let rest = code[j..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            for member in split_top_level(&group[..group_end(group)]) {
                if let Some(name) = leading_ident(member.trim()) {
                    names.insert(name.to_owned());
                }
            }
        } else if let Some(name) = leading_ident(rest) {
            names.insert(name.to_owned());
        }
        i = j.max(i + 1);
    }
    names
}

/// Where the group whose inside starts `after_open` closes: the index of
/// its `}`, or the end of the text.
fn group_end(after_open: &str) -> usize {
    let mut depth = 1usize;
    for (i, c) in after_open.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    after_open.len()
}

/// The members of a `{…}` group's inside, split at commas of depth zero.
fn split_top_level(inside: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in inside.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inside[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inside[start..]);
    parts
}

fn leading_ident(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The names the crate root re-exports, each mapped to the module it comes
/// from: `pub use state::{State, SummaryBody};` maps `State` and
/// `SummaryBody` to `state`; `x as y` maps `y`.
fn root_exports(code: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim();
        let Some(module) = leading_ident(path) else {
            continue;
        };
        let mut previous = "";
        for word in path
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .skip(1)
        {
            if previous == "as" || word != "as" {
                map.insert(word.to_owned(), module.to_owned());
            }
            previous = word;
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, usize, &str)]) -> Graph {
        let sources: Vec<Source> = files
            .iter()
            .map(|(module, depth, text)| Source {
                module: (*module).to_owned(),
                depth: *depth,
                path: PathBuf::from(format!("{module}.rs")),
                text: (*text).to_owned(),
            })
            .collect();
        Graph::of(&sources)
    }

    fn edges(g: &Graph) -> Vec<(String, String)> {
        g.edges
            .iter()
            .flat_map(|(a, bs)| bs.iter().map(move |b| (a.clone(), b.clone())))
            .collect()
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn references_come_from_code_outside_tests_only() {
        let g = graph(&[
            (
                "render",
                1,
                r##"
use crate::state::State;
use super::{message::Message, config};
// crate::economy in a comment
/// [`x`](crate::ledger::X)
const S: &str = "crate::budget";
const R: &str = r#"crate::flush " "#;
const C: char = '"';
fn f<'a>(x: &'a str) { let _ = crate::records::Frontier::default(); }
#[cfg(test)]
use crate::policy::Policy;
#[cfg(test)]
mod tests { use crate::query::X; fn g() { let s = "}"; } }
fn after() { crate::protect::f(); }
"##,
            ),
            ("state", 1, ""),
            ("message", 1, ""),
            ("config", 1, ""),
            ("records", 1, ""),
            ("protect", 1, ""),
            ("economy", 1, ""),
            ("ledger", 1, ""),
            ("budget", 1, ""),
            ("flush", 1, ""),
            ("policy", 1, ""),
            ("query", 1, ""),
        ]);
        assert_eq!(
            edges(&g),
            vec![
                pair("render", "config"),
                pair("render", "message"),
                pair("render", "protect"),
                pair("render", "records"),
                pair("render", "state"),
            ]
        );
    }

    #[test]
    fn super_reaches_the_root_only_from_the_right_depth() {
        let g = graph(&[
            (
                "render",
                2,
                "use super::Working; use super::super::state::X;",
            ),
            ("state", 1, ""),
            ("Working", 1, ""),
        ]);
        assert_eq!(edges(&g), vec![pair("render", "state")]);
    }

    #[test]
    fn a_root_re_export_counts_as_its_module() {
        let g = graph(&[
            (
                "lib",
                0,
                "mod state;\npub use state::{State, Other as Alias};",
            ),
            ("render", 1, "fn f(s: &crate::Alias) -> crate::State {}"),
            ("state", 1, ""),
        ]);
        assert_eq!(edges(&g), vec![pair("render", "state")]);
    }

    fn table(rows: &[(&str, &[&str])]) -> Vec<Layer> {
        rows.iter()
            .map(|(name, modules)| Layer {
                name: (*name).to_owned(),
                modules: modules.iter().map(|m| (*m).to_owned()).collect(),
            })
            .collect()
    }

    #[test]
    fn an_upward_reference_a_circle_and_a_stray_module_are_problems() {
        let g = graph(&[
            ("message", 1, "use crate::render::X;"),
            ("render", 1, "use crate::message::M; use crate::stub::S;"),
            ("stub", 1, "use crate::render::Working;"),
            ("orphan", 1, ""),
        ]);
        let t = table(&[
            ("leaves", &["message"]),
            ("phases", &["render", "stub", "gone"]),
        ]);
        let problems = check(Some(&t), &g).join("\n");
        assert!(problems.contains("`gone` (layer `phases`) is not a module"));
        assert!(problems.contains("`orphan` is in no layer"));
        assert!(problems.contains("`message` (layer `leaves`) refers to `render` (layer `phases`)"));
        assert!(problems.contains("circle: [\"message\", \"render\", \"stub\"]"));
        assert_eq!(
            check(None, &g),
            ["modules refer to each other in a circle: [\"message\", \"render\", \"stub\"]"]
        );
    }

    #[test]
    fn a_downward_graph_passes() {
        let g = graph(&[
            ("message", 1, ""),
            ("render", 1, "use crate::message::M;"),
            ("stub", 1, "use crate::{message::M, render::R};"),
        ]);
        let t = table(&[("leaves", &["message"]), ("phases", &["render", "stub"])]);
        assert_eq!(check(Some(&t), &g), Vec::<String>::new());
        assert_eq!(check(None, &g), Vec::<String>::new());
    }

    #[test]
    fn the_table_is_read_between_its_markers() {
        let doc = "intro\n<!-- layers:condense-core -->\n| layer | modules |\n|---|---|\n\
                   | leaves | `js`, `text` |\n| phases | `render` |\n<!-- /layers -->\n| x | `no` |\n";
        assert_eq!(
            parse_table(doc, "condense-core").unwrap(),
            table(&[("leaves", &["js", "text"]), ("phases", &["render"])])
        );
        assert!(parse_table(doc, "condense-cli").is_err());
    }
}
