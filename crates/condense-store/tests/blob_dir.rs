//! The blob directory and its files under hostile or unlucky conditions: a
//! blob directory that is a symlink (read and write side), temporary files a
//! crashed writer left, session ids too long for a file name, special files
//! where a session should be, and the hold a running pi's sidecar keeps.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use condense_core::OccurrenceKey;
use condense_core::ToolCallRecord;
use condense_store::append::{AppendError, Appender, LockMode, SessionHold};
use condense_store::session::Session;
use condense_store::spill::{
    blob_dir, read_spill, remove_stale_temps, write_blob, STALE_TEMP_ANY, STALE_TEMP_DEAD_WRITER,
};
use serde_json::json;

const SECRET: &str = "SECRET outside the session directory";

fn record(id: &str, spill_path: &str) -> ToolCallRecord {
    serde_json::from_value(json!({
        "toolCallId": id, "toolName": "bash", "args": {"command": "cat"},
        "resultText": "", "isError": false, "turnIndex": 0, "timestamp": 1,
        "resultTimestamp": 2, "spillPath": spill_path, "spillBytes": 9, "resultPreview": "PREVIEW"
    }))
    .expect("record")
}

fn session_text(id: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "session", "version": 3, "id": id,
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    )
}

#[test]
fn a_blob_directory_that_is_a_symlink_is_never_read_through() {
    let root = tempfile::tempdir().expect("tempdir");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), SECRET).expect("secret");
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("sessions");
    let path = sessions.join("s1.jsonl");
    std::fs::write(&path, session_text("s1")).expect("session");
    let blobs = blob_dir(&path, "s1");

    // `<id>-blobs -> /`: /etc/passwd is "inside" the link's target.
    std::os::unix::fs::symlink("/", &blobs).expect("symlink to /");
    assert_eq!(read_spill(&blobs, &record("a", "/etc/passwd")), None);
    assert_eq!(read_spill(&blobs, &record("b", "etc/passwd")), None);
    std::fs::remove_file(&blobs).expect("unlink");

    // A link to another directory holding a file of the recorded name.
    std::os::unix::fs::symlink(&outside, &blobs).expect("symlink");
    let through = blobs.join("secret.txt");
    assert_eq!(
        read_spill(&blobs, &record("c", &through.display().to_string())),
        None
    );
    assert_eq!(read_spill(&blobs, &record("d", "secret.txt")), None);

    // The same file in a real blob directory is read.
    std::fs::remove_file(&blobs).expect("unlink");
    std::fs::create_dir(&blobs).expect("real blob dir");
    std::fs::write(blobs.join("secret.txt"), "A REAL BLOB").expect("blob");
    assert_eq!(
        read_spill(&blobs, &record("e", "secret.txt")).as_deref(),
        Some("A REAL BLOB")
    );
}

#[test]
fn a_blob_directory_that_is_a_symlink_is_never_written_through() {
    let root = tempfile::tempdir().expect("tempdir");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    let path = root.path().join("s1.jsonl");
    let blobs = blob_dir(&path, "s1");
    std::os::unix::fs::symlink(&outside, &blobs).expect("symlink");

    let err = write_blob(&blobs, &OccurrenceKey::new("call_1", Some(2)), "OUTPUT")
        .expect_err("a symlinked blob directory is refused");
    assert!(err.to_string().contains("symlink"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&outside).expect("outside").collect();
    assert!(written.is_empty(), "nothing written through the link");
    assert!(std::fs::symlink_metadata(&blobs)
        .expect("still there")
        .file_type()
        .is_symlink());

    // A dangling link (a target that does not exist yet) is refused too.
    std::fs::remove_file(&blobs).expect("unlink");
    std::os::unix::fs::symlink(root.path().join("elsewhere"), &blobs).expect("symlink");
    assert!(write_blob(&blobs, &OccurrenceKey::new("call_1", Some(2)), "OUTPUT").is_err());
    assert!(!root.path().join("elsewhere").exists());
}

/// A pid no process has: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    pid
}

fn temp_file(dir: &Path, pid: u32, n: u32, age: Duration) -> PathBuf {
    let path = dir.join(format!(".call_{n}@7.{pid}.{n}.tmp"));
    let file = std::fs::File::create(&path).expect("temp");
    file.set_modified(SystemTime::now() - age).expect("mtime");
    path
}

#[test]
fn temporary_files_of_crashed_writers_are_removed_and_live_ones_kept() {
    let root = tempfile::tempdir().expect("tempdir");
    let blobs = blob_dir(&root.path().join("s1.jsonl"), "s1");
    std::fs::create_dir_all(&blobs).expect("blob dir");
    let dead = dead_pid();
    let minute = STALE_TEMP_DEAD_WRITER + Duration::from_secs(5);
    let crashed = temp_file(&blobs, dead, 1, minute);
    let just_crashed = temp_file(&blobs, dead, 2, Duration::ZERO);
    let live_writer = temp_file(&blobs, 1, 3, minute);
    let ancient = temp_file(&blobs, 1, 4, STALE_TEMP_ANY + Duration::from_secs(5));
    let mine = temp_file(&blobs, std::process::id(), 5, STALE_TEMP_ANY * 2);
    let not_a_temp = blobs.join("call_6@7.txt");
    std::fs::write(&not_a_temp, "a blob").expect("blob");
    std::fs::File::open(&not_a_temp)
        .expect("blob")
        .set_modified(SystemTime::now() - STALE_TEMP_ANY * 2)
        .expect("mtime");

    // Any blob write cleans up first.
    write_blob(&blobs, &OccurrenceKey::new("call_9", Some(7)), "new").expect("write");
    assert!(!crashed.exists(), "a dead writer's old temp is removed");
    assert!(!ancient.exists(), "a day-old temp is removed");
    assert!(just_crashed.exists(), "a fresh temp may still be written");
    assert!(live_writer.exists(), "a live writer's temp is kept");
    assert!(mine.exists(), "this process's temps are its own");
    assert!(not_a_temp.exists(), "blobs are never touched");
    assert_eq!(remove_stale_temps(&blobs, SystemTime::now()), 0);
    assert_eq!(
        remove_stale_temps(&blobs, SystemTime::now() + minute),
        1,
        "the dead writer's fresh temp once it is old enough"
    );
}

#[test]
fn a_session_id_too_long_for_a_file_name_still_spills_and_reads_back() {
    let root = tempfile::tempdir().expect("tempdir");
    let path = root.path().join("long.jsonl");
    let long = "x".repeat(300);
    let other = format!("{long}y");
    let blobs = blob_dir(&path, &long);
    let name = blobs.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(name.len() <= 200 && name.ends_with("-blobs"), "{name}");
    assert_ne!(
        blobs,
        blob_dir(&path, &other),
        "long ids keep their own directory"
    );
    assert_eq!(
        blobs,
        blob_dir(&path, &long),
        "the reader finds the writer's directory"
    );

    let key = OccurrenceKey::new("call_1", Some(2));
    let written = write_blob(&blobs, &key, "THE LONG SESSION'S OUTPUT").expect("spill");
    let rec = record("call_1", &written.path.display().to_string());
    assert_eq!(
        read_spill(&blob_dir(&path, &long), &rec).as_deref(),
        Some("THE LONG SESSION'S OUTPUT")
    );
}

#[test]
fn special_files_are_not_read_as_sessions() {
    let root = tempfile::tempdir().expect("tempdir");
    let fifo = root.path().join("fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let paths = [
        fifo.clone(),
        PathBuf::from("/dev/zero"),
        root.path().to_path_buf(),
    ];
    std::thread::spawn(move || {
        for p in paths {
            let session = Session::open(&p).map(|_| ()).map_err(|e| e.to_string());
            let appender = Appender::open(&p, LockMode::Try)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let _ = tx.send((p, session, appender));
        }
    });
    for _ in 0..3 {
        let (p, session, appender) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a special file must not hang the reader");
        for result in [session, appender] {
            let err = result.expect_err("refused");
            assert!(err.contains("not a regular file"), "{}: {err}", p.display());
        }
    }
}

#[test]
fn a_held_session_cannot_be_appended_to() {
    let root = tempfile::tempdir().expect("tempdir");
    let path = root.path().join("s1.jsonl");
    let mut hold = SessionHold::default();
    hold.set(Some(path.clone()));
    assert!(!hold.is_held(), "pi has not created the file yet");
    std::fs::write(&path, session_text("s1")).expect("session");
    hold.refresh();
    assert!(hold.is_held());
    assert!(matches!(
        Appender::open(&path, LockMode::Try),
        Err(AppendError::Locked(_))
    ));
    // Another reader's hold is compatible.
    let mut second = SessionHold::default();
    second.set(Some(path.clone()));
    assert!(second.is_held());
    drop(second);
    hold.set(None);
    assert!(!hold.is_held());
    Appender::open(&path, LockMode::Try).expect("released");
}
