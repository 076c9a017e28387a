//! condense installed into OpenCode the way a user does it: the plugin named
//! in `opencode.json` (`"plugin": ["condense-opencode"]`), OpenCode
//! installing it from a real npm registry (verdaccio on 127.0.0.1, serving
//! the packages `cargo xtask dist` packed), on a machine with no Rust: no
//! `cargo`, no `target/` and no sidecar on `PATH`, no
//! `CONDENSE_BIN`, a temporary `HOME`. The sidecar comes from the
//! platform package; a read is stubbed on the next prompt and the query
//! brings it back.
//!
//! Needs `target/dist/*.tgz` (`cargo xtask dist`; the CI's `dist` step runs
//! it before the e2e step) and fails, never skips, without them.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};
use support::pi_env::require_pi;
use support::process::path_without_rust;
use support::registry::{dist_tarballs, node_platform, Registry};
use support::scenario::tool_result;

const SUMMARY_TEXT: &str = "- alpha.txt holds numbered ALPHA lines.";

/// About `bytes` of text with `marker` on every line.
fn big_file(marker: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "{marker} line {i:04}: nothing else of note here\n"
        ));
        i += 1;
    }
    out
}

/// Every file under `dir` (symbolic links not followed).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn plugin_by_name_from_a_registry_prunes() {
    let (Some(opencode), Some(pi)) = (require_opencode(), require_pi()) else {
        return;
    };
    let tarballs = dist_tarballs();
    // The registry runs on the e2e tests' Node 22 (the pi install's).
    let registry = Registry::start(&pi.node);
    for tarball in &tarballs {
        registry.publish(tarball);
    }

    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let mut env = OpenCodeEnv::new(opencode, &llm.base_url(), None);
    let mut extra = registry.npm_env();
    // Bun, which OpenCode installs plugins with, reads the upper-case name.
    extra.push(("NPM_CONFIG_REGISTRY".to_owned(), registry.url()));
    // The system's directories and npm's (OpenCode brings its own runtime).
    extra.push(("PATH".to_owned(), path_without_rust(&[])));
    env.use_plugin_package("condense-opencode", extra);
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    let file = env.project.join("alpha.txt");
    fs::write(&file, big_file("ALPHA-5d1c", 6000)).expect("write alpha.txt");

    // Prompt 1: a read, then a text reply (which flushes).
    llm.push(Reply::tool_call(
        "call_a",
        "read",
        json!({"filePath": file}),
    ));
    llm.push(Reply::text("I read alpha.txt."));
    let run = env.run("Read alpha.txt.", false);
    run.assert_success();
    assert!(
        !run.output.stderr.contains("sidecar was not found"),
        "the plugin found the platform package's sidecar\n{}\n--- verdaccio ---\n{}",
        run.report(),
        registry.log()
    );
    // OpenCode installed both packages inside this temporary home.
    let installed = files_under(env.root.path());
    for wanted in [
        Path::new("condense-opencode")
            .join("condense-engine")
            .join("client")
            .join("locate.ts"),
        Path::new(&format!("condense-{}", node_platform()))
            .join("bin")
            .join("condense"),
    ] {
        assert!(
            installed.iter().any(|f| f.ends_with(&wanted)),
            "no {} under {}",
            wanted.display(),
            env.root.path().display()
        );
    }
    let original = llm
        .main_requests()
        .iter()
        .find_map(|r| tool_result(r, "call_a"))
        .unwrap_or_else(|| panic!("the read reached the model\n{}", run.report()));
    assert!(original.contains("ALPHA-5d1c line 0000"), "{original}");

    // Prompt 2: the read is a stub, and the query brings the original back.
    llm.push(Reply::tool_call(
        "call_q",
        "context_tree_query",
        json!({"toolCallIds": ["t1"]}),
    ));
    llm.push(Reply::text("Recovered alpha."));
    let run2 = env.run("What did alpha.txt say exactly?", true);
    run2.assert_success();
    assert!(
        !llm.summary_requests().is_empty(),
        "the summarizer ran through the installed plugin\n{}\n{}",
        run2.report(),
        env.protocol_log()
    );
    let main = llm.main_requests();
    let first = main
        .iter()
        .find(|r| r.any_message_contains("What did alpha.txt say"))
        .unwrap_or_else(|| panic!("prompt 2 reached the model\n{}", run2.report()));
    let stub = tool_result(first, "call_a").expect("the read is still answered");
    assert!(
        stub.starts_with("[Summarized in pruner summary, ref `t1`."),
        "stubbed: {stub}\n{}\n{}",
        run2.report(),
        env.protocol_log()
    );
    assert!(!first.any_message_contains("ALPHA-5d1c line 0000"));
    let recovered = main
        .iter()
        .find_map(|r| tool_result(r, "call_q"))
        .unwrap_or_else(|| panic!("the query's result reached the model\n{}", run2.report()));
    assert!(recovered.starts_with("## toolRef: t1"), "{recovered}");
    assert!(
        recovered.contains(&original),
        "the whole original comes back:\n{recovered}"
    );
}
