//! The provider's cache misses each session saw: `condense-misses/<session
//! id>.json` in a directory the host names (pi's agent directory, else the
//! session directory), one small file a session, replaced whole as its
//! usage comes in. A new session starts its miss model from what the
//! user's other sessions saw of the same provider (`economy.missRates:
//! "learn"`); a restarted one takes up its own counts where it left them.
//!
//! One file per session, each written only by its session's process, so
//! two harnesses running side by side never lose each other's counts, and a
//! process killed mid-write leaves the old file (the write goes through a
//! temporary file and a rename). Everything read is untrusted: the
//! directory must be a real one (no symlink), and a
//! file too large, malformed or holding counts past `u32` is skipped and
//! named, never read in part.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use condense_core::{MissCounts, GAP_EDGES_S};
use serde::{Deserialize, Serialize};

use crate::spill::{blob_stem, checked_dir, created_dir, remove_stale_temps, replace_file};

/// The directory name, inside a session directory.
pub const MISSES_DIR: &str = "condense-misses";
/// A file larger than this is no misses file condense wrote.
pub const MAX_FILE_BYTES: u64 = 16 * 1024;
/// The newest files read for a prior; older sessions say less of how the
/// provider caches today.
pub const MAX_FILES: usize = 64;
/// Directory entries looked at, at most (a directory of millions of files
/// is not scanned whole).
pub const MAX_ENTRIES: usize = 4096;
/// How errors name the directory.
const WHAT: &str = "misses directory";
/// Providers a file may name, and the longest name kept.
const MAX_PROVIDERS: usize = 16;
const MAX_PROVIDER_BYTES: usize = 200;

/// Miss counts by provider (`anthropic`, `openai`, … as the model's
/// `provider/id` names it).
pub type ProviderMisses = BTreeMap<String, MissCounts>;

/// What a session directory says of the misses: this session's own counts
/// (a restart), the other sessions' added up, and the files skipped.
#[derive(Debug, Default, Clone)]
pub struct MissHistory {
    /// The counts this session wrote before.
    pub own: ProviderMisses,
    /// The other sessions' counts, summed per provider.
    pub others: ProviderMisses,
    /// Files that could not be read, each with why.
    pub skipped: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct MissFile {
    version: u32,
    providers: BTreeMap<String, [[u32; 2]; GAP_EDGES_S.len() + 1]>,
}

const VERSION: u32 = 1;

/// The provider a model (`provider/id`) goes to, as the counts are keyed:
/// the part before the first `/`; empty when the host did not say.
pub fn provider_of(model: Option<&str>) -> &str {
    model.map_or("", |m| m.split('/').next().unwrap_or(""))
}

/// The misses directory of the session directory `session_dir`.
pub fn misses_dir_in(session_dir: &Path) -> PathBuf {
    session_dir.join(MISSES_DIR)
}

/// Replaces session `session_id`'s file in `dir` with `misses`, creating
/// the directory when needed (never through a symlink). Not synced: a
/// power loss may cost the latest counts, which a prior can spare.
pub fn write_session_misses(
    dir: &Path,
    session_id: &str,
    misses: &ProviderMisses,
) -> std::io::Result<PathBuf> {
    let dir = created_dir(dir, WHAT)?;
    let file = MissFile {
        version: VERSION,
        providers: misses
            .iter()
            .take(MAX_PROVIDERS)
            .map(|(p, c)| (cut(p), c.buckets.map(|(calls, m)| [calls, m])))
            .collect(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    replace_file(&dir, &blob_stem(session_id), "json", &bytes, false)
}

/// The history `dir` holds for session `session_id`. A directory that is
/// missing gives an empty history; one that is not a real directory, an
/// empty history and why.
pub fn read_history(dir: &Path, session_id: &str) -> MissHistory {
    let mut history = MissHistory::default();
    if !dir.exists() && dir.symlink_metadata().is_err() {
        return history;
    }
    let dir = match checked_dir(dir, WHAT) {
        Ok(d) => d,
        Err(e) => {
            history.skipped.push(e.to_string());
            return history;
        }
    };
    remove_stale_temps(&dir, SystemTime::now());
    let own_name = format!("{}.json", blob_stem(session_id));
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => {
            history.skipped.push(format!("{}: {e}", dir.display()));
            return history;
        }
    };
    let mut files: Vec<(SystemTime, PathBuf, bool)> = Vec::new();
    for entry in entries.flatten().take(MAX_ENTRIES) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        // `DirEntry::metadata` does not follow a symlink: one is skipped.
        if !meta.file_type().is_file() {
            continue;
        }
        if meta.len() > MAX_FILE_BYTES {
            history.skipped.push(format!(
                "{}: larger than {MAX_FILE_BYTES} bytes",
                entry.path().display()
            ));
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        files.push((modified, entry.path(), name == own_name));
    }
    // The newest first; the session's own file whatever its age.
    files.sort_by(|a, b| b.2.cmp(&a.2).then(b.0.cmp(&a.0)));
    let own_count = usize::from(files.first().is_some_and(|f| f.2));
    files.truncate(MAX_FILES + own_count);
    for (_, path, own) in files {
        match read_file(&path) {
            Ok(counts) => {
                let into = if own {
                    &mut history.own
                } else {
                    &mut history.others
                };
                for (provider, c) in counts {
                    into.entry(provider).or_default().add(&c);
                }
            }
            Err(why) => history.skipped.push(format!("{}: {why}", path.display())),
        }
    }
    history
}

fn read_file(path: &Path) -> Result<ProviderMisses, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    let file: MissFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a misses file: {e}"))?;
    if file.version != VERSION {
        return Err(format!(
            "version {} (this condense reads {VERSION})",
            file.version
        ));
    }
    Ok(file
        .providers
        .into_iter()
        .take(MAX_PROVIDERS)
        .map(|(p, b)| (cut(&p), MissCounts::from_pairs(b.map(|[c, m]| (c, m)))))
        .collect())
}

/// A provider's name, cut on a character boundary to the longest kept.
fn cut(provider: &str) -> String {
    let mut end = provider.len().min(MAX_PROVIDER_BYTES);
    while !provider.is_char_boundary(end) {
        end -= 1;
    }
    provider[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(calls: u32, misses: u32) -> MissCounts {
        MissCounts::from_pairs([(calls, misses), (0, 0), (0, 0), (0, 0), (calls, calls)])
    }

    fn one(provider: &str, c: MissCounts) -> ProviderMisses {
        [(provider.to_owned(), c)].into_iter().collect()
    }

    #[test]
    fn a_session_reads_its_own_counts_and_the_others_summed() {
        let root = tempfile::tempdir().unwrap();
        let dir = misses_dir_in(root.path());
        assert!(
            read_history(&dir, "a").others.is_empty(),
            "no directory yet"
        );
        write_session_misses(&dir, "a", &one("anthropic", counts(10, 2))).unwrap();
        write_session_misses(&dir, "b", &one("anthropic", counts(5, 5))).unwrap();
        let mut both = one("anthropic", counts(1, 0));
        both.insert("openai".into(), counts(7, 1));
        write_session_misses(&dir, "c", &both).unwrap();
        // Rewritten whole: the older counts of `a` are gone.
        write_session_misses(&dir, "a", &one("anthropic", counts(12, 3))).unwrap();
        let h = read_history(&dir, "a");
        assert!(h.skipped.is_empty(), "{:?}", h.skipped);
        assert_eq!(h.own["anthropic"], counts(12, 3));
        assert_eq!(h.others["anthropic"].buckets[0], (6, 5));
        assert_eq!(h.others["openai"], counts(7, 1));
        let fresh = read_history(&dir, "d");
        assert!(fresh.own.is_empty());
        assert_eq!(fresh.others["anthropic"].buckets[0], (18, 8));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 3, "no temporary file left: {names:?}");
    }

    #[test]
    fn files_that_are_not_counts_are_skipped_and_named() {
        let root = tempfile::tempdir().unwrap();
        let dir = misses_dir_in(root.path());
        write_session_misses(&dir, "good", &one("anthropic", counts(4, 1))).unwrap();
        std::fs::write(dir.join("torn.json"), b"{\"version\":1,\"provi").unwrap();
        std::fs::write(
            dir.join("absurd.json"),
            br#"{"version":1,"providers":{"x":[[1e30,0],[0,0],[0,0],[0,0],[0,0]]}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("future.json"), br#"{"version":9,"providers":{}}"#).unwrap();
        std::fs::write(
            dir.join("big.json"),
            vec![b' '; MAX_FILE_BYTES as usize + 1],
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), b"ignored").unwrap();
        std::fs::create_dir(dir.join("sub.json")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.join("good.json"), dir.join("link.json")).unwrap();
        let h = read_history(&dir, "new");
        assert_eq!(
            h.others["anthropic"],
            counts(4, 1),
            "the good file counted once"
        );
        assert_eq!(h.others.len(), 1);
        let mut skipped = h.skipped.join("\n");
        for name in ["torn.json", "absurd.json", "future.json", "big.json"] {
            assert!(skipped.contains(name), "{name} not named in {skipped}");
            skipped = skipped.replace(name, "");
        }
        assert_eq!(h.skipped.len(), 4, "{:?}", h.skipped);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_directory_is_neither_read_nor_written() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let dir = misses_dir_in(root.path());
        std::os::unix::fs::symlink(elsewhere.path(), &dir).unwrap();
        assert!(write_session_misses(&dir, "a", &one("p", counts(1, 0))).is_err());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        let h = read_history(&dir, "a");
        assert!(h.others.is_empty());
        assert_eq!(h.skipped.len(), 1, "{:?}", h.skipped);
    }

    #[test]
    fn only_the_newest_files_make_the_prior() {
        let root = tempfile::tempdir().unwrap();
        let dir = misses_dir_in(root.path());
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for i in 0..MAX_FILES + 3 {
            let path =
                write_session_misses(&dir, &format!("s{i}"), &one("p", counts(1, 0))).unwrap();
            if i < 3 {
                let f = std::fs::File::options().write(true).open(&path).unwrap();
                f.set_modified(old).unwrap();
            }
        }
        let h = read_history(&dir, "s0");
        assert_eq!(h.own["p"], counts(1, 0), "its own file, however old");
        assert_eq!(h.others["p"].buckets[0].0 as usize, MAX_FILES);
    }

    #[test]
    fn provider_names_are_cut_to_length() {
        let long = "é".repeat(150);
        assert_eq!(cut(&long).len(), 200);
        assert_eq!(cut("anthropic"), "anthropic");
    }
}
