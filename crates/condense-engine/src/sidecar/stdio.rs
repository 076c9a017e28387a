//! The sidecar's stdin, read on the calling thread.
//!
//! tokio's own `stdin()` runs every read on its blocking pool, a thread
//! hand-over per read; at one `context` request per LLM call such hand-overs
//! cost more than the render. [`serve`] reads on the thread that `block_on`s
//! it, where a blocking read stalls nothing else (tasks run on the runtime's
//! workers). Its output is a plain `std::io::Write` for the same reason.
//!
//! [`serve`]: super::server::serve

use std::io::BufRead;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};

/// Standard input as an `AsyncBufRead` whose reads block the polling thread.
pub struct BlockingStdin(std::io::BufReader<std::io::Stdin>);

impl BlockingStdin {
    /// Standard input behind a 64 KiB buffer.
    pub fn new() -> Self {
        BlockingStdin(std::io::BufReader::with_capacity(1 << 16, std::io::stdin()))
    }
}

impl Default for BlockingStdin {
    fn default() -> Self {
        Self::new()
    }
}

impl AsyncRead for BlockingStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let n = {
            let available = match this.0.fill_buf() {
                Ok(a) => a,
                Err(e) => return Poll::Ready(Err(e)),
            };
            let n = available.len().min(buf.remaining());
            buf.put_slice(&available[..n]);
            n
        };
        this.0.consume(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncBufRead for BlockingStdin {
    fn poll_fill_buf(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        Poll::Ready(self.get_mut().0.fill_buf())
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().0.consume(amt)
    }
}
