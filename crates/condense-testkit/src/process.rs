//! Child processes with a deadline: output captured, the whole process
//! group killed if it outlives its timeout.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Finds `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// A `PATH` of `dirs`, `npm`'s directory and the system's (`/usr/bin`,
/// `/bin`), in that order and without repeats: what a machine with Node but
/// no Rust has. Fails the calling test if one of them holds `cargo` or a
/// `condense`, which the install must bring.
pub fn path_without_rust(dirs: &[&Path]) -> String {
    let npm = which("npm").expect("`npm` on PATH");
    let mut path: Vec<PathBuf> = Vec::new();
    for dir in dirs
        .iter()
        .copied()
        .chain(npm.parent())
        .map(Path::to_path_buf)
        .chain(["/usr/bin", "/bin"].map(PathBuf::from))
    {
        if !path.contains(&dir) {
            path.push(dir);
        }
    }
    for dir in &path {
        assert!(
            !dir.join("cargo").exists() && !dir.join("condense").exists(),
            "{} holds cargo or a condense: this test needs a PATH without Rust",
            dir.display()
        );
    }
    std::env::join_paths(path)
        .expect("a PATH")
        .to_string_lossy()
        .into_owned()
}

/// The last `max` bytes of `text` (from a character boundary).
pub fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// What a bounded child process did.
#[derive(Debug, Clone)]
pub struct BoundedOutput {
    /// The exit status (`None` only if it could not be collected).
    pub status: Option<ExitStatus>,
    /// True if the timeout ran out and the process group was killed.
    pub timed_out: bool,
    /// Captured stdout (lossy UTF-8).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8).
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl BoundedOutput {
    /// Exited with status 0 within the timeout.
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// The exit code, if the process exited normally.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// How it ended, for a failure message.
    pub fn describe_status(&self) -> String {
        match (self.timed_out, self.status) {
            (true, _) => format!("timed out after {:.0}s", self.elapsed.as_secs_f64()),
            (false, Some(status)) => status.to_string(),
            (false, None) => "status unknown".to_owned(),
        }
    }
}

/// Runs `cmd` in its own process group with stdin closed and output
/// captured; kills that process group if it outlives `timeout`.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> std::io::Result<BoundedOutput> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let readers: Vec<(bool, Box<dyn Read + Send>)> = [
        child
            .stdout
            .take()
            .map(|s| (true, Box::new(s) as Box<dyn Read + Send>)),
        child
            .stderr
            .take()
            .map(|s| (false, Box::new(s) as Box<dyn Read + Send>)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let pipes = readers.len();
    for (is_stdout, mut pipe) in readers {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send((is_stdout, buf));
        });
    }
    drop(tx);

    let deadline = started + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait()? {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => {
                timed_out = true;
                // Kill the whole group we created (pid == pgid), then the child.
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                let _ = child.kill();
                break child.wait().ok();
            }
            None => thread::sleep(Duration::from_millis(20)),
        }
    };
    let elapsed = started.elapsed();

    // Collect output; a grandchild that escaped the group may hold a pipe
    // open, so wait only a bounded time for the readers.
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let collect_deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..pipes {
        let left = collect_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, buf)) => stdout = buf,
            Ok((false, buf)) => stderr = buf,
            Err(_) => break,
        }
    }
    Ok(BoundedOutput {
        status,
        timed_out,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed,
    })
}
