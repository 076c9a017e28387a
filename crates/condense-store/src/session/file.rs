//! Reading a session file from disk: only regular files, so a FIFO or a
//! device handed to us as a session cannot hang or flood the reader.

use std::path::Path;

/// The error for a path that is not a regular file.
pub fn not_a_regular_file(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}); refusing to read it"),
    )
}

pub(super) fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        "a directory"
    } else {
        "a FIFO, socket or device"
    }
}

/// Reads a whole file, refusing anything but a regular file: opening a FIFO
/// blocks until a writer comes and a device such as `/dev/zero` never ends,
/// so both are checked before the open (by the path, symlinks followed) and
/// again on the opened handle.
pub fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_a_regular_file(kind_of(&meta)));
    }
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_a_regular_file(kind_of(&meta)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}
