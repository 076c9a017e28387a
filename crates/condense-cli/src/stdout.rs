//! Writing a command's output: all of it, flushed; a reader that went away
//! (`condense … | head`) is not an error.

use std::io::Write;

use crate::CliError;

fn out() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

/// Writes `text` to standard output.
pub fn write_all(text: &str) -> Result<(), CliError> {
    let mut o = out();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| CliError::Data(format!("writing output: {e}")))
}
