//! Messages the session log holds, read back from it by position: what the
//! proxy parks its tool results with ([`Message::park`]), so a long
//! conversation's outputs are held by the log on disk, not a second time in
//! memory. The engine reads a parked output back only when it needs the
//! text itself: a flush summarizing it, a query paging it back, a dedup.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use condense_core::{Message, ParkedText};
use xxhash_rust::xxh3::xxh3_64;

/// Tool results whose JSON is shorter stay in memory: reading one back
/// would cost more than the bytes it saves.
pub(crate) const PARK_BYTES: usize = 512;

/// A message's JSON at `range` of the log, with the hash it had when it
/// was written there.
pub(crate) struct LogText {
    log: Arc<File>,
    range: Range<u64>,
    hash: u64,
}

impl LogText {
    /// Parks `message`, whose JSON the log holds at `range`. A message the
    /// log does not give back exactly stays in memory; the error says why.
    pub(crate) fn park(
        log: &Arc<File>,
        message: &Message,
        range: Range<u64>,
    ) -> Result<(), String> {
        let hash = xxh3_64(message.json().as_bytes());
        message.park(Arc::new(LogText {
            log: Arc::clone(log),
            range,
            hash,
        }))
    }
}

impl std::fmt::Debug for LogText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the session log at bytes {}..{}",
            self.range.start, self.range.end
        )
    }
}

impl ParkedText for LogText {
    fn read(&self) -> Result<String, String> {
        let len = usize::try_from(self.range.end.saturating_sub(self.range.start))
            .map_err(|e| format!("{self:?}: {e}"))?;
        let mut bytes = vec![0; len];
        read_at(&self.log, &mut bytes, self.range.start)
            .map_err(|e| format!("reading {self:?}: {e}"))?;
        if xxh3_64(&bytes) != self.hash {
            return Err(format!("{self:?} changed since it was written"));
        }
        String::from_utf8(bytes).map_err(|e| format!("{self:?}: {e}"))
    }

    /// Compares a chunk at a time: parking a long conversation's first
    /// call would otherwise read every output back into memory at once.
    fn holds(&self, text: &str) -> Result<(), String> {
        let len = self.range.end.saturating_sub(self.range.start);
        if len != text.len() as u64 {
            return Err(format!("{self:?} is not {} bytes long", text.len()));
        }
        let mut chunk = [0u8; 8192];
        for (i, want) in text.as_bytes().chunks(chunk.len()).enumerate() {
            let got = &mut chunk[..want.len()];
            read_at(&self.log, got, self.range.start + (i * 8192) as u64)
                .map_err(|e| format!("reading {self:?}: {e}"))?;
            if got != want {
                return Err(format!("{self:?} does not hold the text"));
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut at: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, at)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(not(any(unix, windows)))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn log_with(text: &str) -> (tempfile::NamedTempFile, Arc<File>) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let log = Arc::new(file.reopen().unwrap());
        (file, log)
    }

    #[test]
    fn a_message_parked_in_the_log_reads_back_until_the_log_changes() {
        let json = r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false}"#;
        let (file, log) = log_with(&format!("head\n{json}\n"));
        let m = Message::from_json(json).unwrap();
        // A range that holds other bytes parks nothing.
        assert!(LogText::park(&log, &m, 0..json.len() as u64).is_err());
        assert!(!m.is_parked());
        LogText::park(&log, &m, 5..5 + json.len() as u64).unwrap();
        assert!(m.is_parked());
        assert_eq!(m.json(), json);

        // Bytes changed under it: the message says so instead of lying.
        let changed = json.replace("out", "OUT");
        std::fs::write(file.path(), format!("head\n{changed}\n")).unwrap();
        let read = m.json().to_string();
        assert!(read.contains("changed since it was written"), "{read}");
        // Cut short: the same.
        std::fs::write(file.path(), "head\n").unwrap();
        assert!(m.json().contains("cannot be read back"), "{}", m.json());
    }
}
