//! Spill paths read from a crafted session never leave the session's blob
//! directory (docs/reliability.md), through core's query and through
//! `condense query`; nor do blob names written for crafted tool-call ids or
//! the blob directory named after a crafted session id.

use std::path::{Path, PathBuf};

use condense_core::query;
use condense_core::OccurrenceKey;
use condense_store::replay::replay_branch;
use condense_store::session::Session;
use condense_store::spill::{blob_dir, read_spill, write_blob};
use serde_json::{json, Value};

const SECRET: &str = "TOP SECRET outside the blob dir";

/// A session whose index points spill paths outside its blob directory:
/// an absolute path, `..` traversals (absolute and relative), and a symlink
/// inside the blob directory pointing outside. `ok` is a legitimate blob.
struct Crafted {
    _dir: tempfile::TempDir,
    path: PathBuf,
    blobs: PathBuf,
    ids: Vec<(&'static str, String)>,
}

fn crafted_session() -> Crafted {
    let dir = tempfile::tempdir().expect("tempdir");
    let session_id = "0190f5a1-0000-7000-8000-00000000c0de";
    let path = dir.path().join(format!("{session_id}.jsonl"));
    let blobs = blob_dir(&path, session_id);
    std::fs::create_dir_all(&blobs).expect("blob dir");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, SECRET).expect("secret");
    std::fs::write(blobs.join("ok@2.txt"), "THE LEGITIMATE BLOB").expect("blob");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, blobs.join("link@2.txt")).expect("symlink");
    let ids = vec![
        ("abs", "/etc/passwd".to_owned()),
        ("abs2", secret.display().to_string()),
        ("traversal", format!("{}/../secret.txt", blobs.display())),
        ("relative", "../secret.txt".to_owned()),
        ("link", blobs.join("link@2.txt").display().to_string()),
        ("ok", blobs.join("ok@2.txt").display().to_string()),
    ];
    let records: Vec<Value> = ids
        .iter()
        .map(|(id, spill)| {
            json!({"toolCallId": id, "toolName": "bash", "args": {"command": "cat"}, "resultText": "",
                "isError": false, "turnIndex": 0, "timestamp": 1, "resultTimestamp": 2,
                "spillPath": spill, "spillBytes": 99, "resultPreview": format!("PREVIEW of {id}")})
        })
        .collect();
    let header = json!({"type": "session", "version": 3, "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let index = json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": records}, "id": "0000aaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z"});
    std::fs::write(&path, format!("{header}\n{index}\n")).expect("session");
    Crafted {
        _dir: dir,
        path,
        blobs,
        ids,
    }
}

fn expected_body(id: &str) -> String {
    if id == "ok" {
        "THE LEGITIMATE BLOB".to_owned()
    } else {
        format!("PREVIEW of {id}")
    }
}

#[test]
fn crafted_spill_paths_are_refused_by_the_core_query() {
    let c = crafted_session();
    let session = Session::open(&c.path).expect("opens");
    let (state, problems) = replay_branch(&session.branch(None));
    assert!(problems.is_empty(), "{problems:?}");
    for (id, spill) in &c.ids {
        let out = query(&state, &[(*id).to_owned()], |r| read_spill(&c.blobs, r));
        assert!(
            !out.text.contains(SECRET) && !out.text.contains("root:"),
            "{spill} leaked"
        );
        assert!(
            out.text.ends_with(&expected_body(id)),
            "{id} ({spill}): {}",
            out.text
        );
    }
}

/// The `condense` binary next to this test's (built by `cargo test
/// --workspace`); `None` when only this package was built.
fn condense_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    let bin = dir.join(format!("condense{}", std::env::consts::EXE_SUFFIX));
    bin.is_file().then_some(bin)
}

#[test]
fn crafted_spill_paths_are_refused_by_condense_query() {
    let Some(bin) = condense_binary() else {
        eprintln!("skipped: the condense binary is not built (cargo test --workspace builds it)");
        return;
    };
    let c = crafted_session();
    let agent = tempfile::tempdir().expect("agent dir");
    for (id, spill) in &c.ids {
        let out = std::process::Command::new(&bin)
            .args(["query", c.path.to_str().expect("utf-8"), id])
            .env("PI_CODING_AGENT_DIR", agent.path())
            .output()
            .expect("condense runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains(SECRET) && !text.contains("root:"),
            "{spill} leaked"
        );
        assert!(
            text.trim_end().ends_with(&expected_body(id)),
            "{id} ({spill}): {text}"
        );
    }
}

/// Crafted tool-call ids never put a blob outside the blob directory.
#[test]
fn blob_names_stay_inside_the_blob_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = dir.path().join("s-blobs");
    for id in [
        "../../etc/passwd",
        "/abs/path",
        "..",
        ".",
        "",
        ".hidden",
        "a/../../b",
        "c:\\windows\\x",
        "nul\u{0}byte",
        "é😀",
    ] {
        for ts in [None, Some(5)] {
            let key = OccurrenceKey::new(id, ts);
            let b = write_blob(&blobs, &key, "x").unwrap_or_else(|e| panic!("{id:?}: {e}"));
            assert_eq!(
                b.path.parent(),
                Some(blobs.canonicalize().expect("blob dir").as_path()),
                "{id:?}"
            );
            let name = b.path.file_name().and_then(|n| n.to_str()).expect("name");
            assert!(!name.starts_with('.'), "{id:?} gives a hidden name {name}");
        }
    }
}

/// Two different occurrences never share a blob file: sanitizing must not
/// map two keys to one name (a second spill would replace the first's
/// output, and the first record would read back someone else's text).
#[test]
fn different_keys_never_share_a_blob() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = dir.path().join("s-blobs");
    let keys = [
        "w/1",
        "w:1",
        "w_1",
        "w|1",
        "w\\1",
        "call_1|fc_1",
        "call_1_fc_1",
    ];
    let mut paths = Vec::new();
    for k in keys {
        let key = OccurrenceKey::new(k, Some(7));
        let b = write_blob(&blobs, &key, &format!("output of {k}")).expect("write");
        paths.push(b.path);
    }
    for (k, p) in keys.iter().zip(&paths) {
        assert_eq!(
            std::fs::read_to_string(p).expect("blob"),
            format!("output of {k}"),
            "{k}'s blob was overwritten"
        );
    }
    // A very long id still spills (file names are limited to 255 bytes).
    let long = "x".repeat(400);
    let b =
        write_blob(&blobs, &OccurrenceKey::new(long.as_str(), Some(1)), "long").expect("long id");
    assert_eq!(std::fs::read_to_string(b.path).expect("blob"), "long");
}

/// The blob directory comes from the session id in the file's header, which
/// a crafted session controls: it must stay beside the session file.
#[test]
fn a_crafted_session_id_keeps_the_blob_directory_beside_the_session() {
    let session = Path::new("/sessions/project/s.jsonl");
    for id in [
        "/etc/x",
        "../../x",
        "a/b",
        "..",
        "0190f5a1-0000-7000-8000-00000000c0de",
    ] {
        let dir = blob_dir(session, id);
        assert_eq!(
            dir.parent(),
            Some(Path::new("/sessions/project")),
            "{id}: {}",
            dir.display()
        );
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            name.ends_with("-blobs") && !name.starts_with('.'),
            "{id}: {name}"
        );
    }
}
