//! Cooperative cancellation for summarizer calls.
//!
//! A [`CancelToken`] is a cheap, cloneable flag that can be awaited. Tokens
//! form a tree: cancelling a token cancels every token derived from it with
//! [`CancelToken::child`], never its parent. The summarizer gives every
//! provider call its own child of the caller's token, so a timeout can stop
//! one call without cancelling the flush, and cancelling the flush stops
//! every call.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::watch;

struct Inner {
    flag: watch::Sender<bool>,
    children: Mutex<Vec<Weak<Inner>>>,
}

impl Inner {
    fn new() -> Arc<Inner> {
        Arc::new(Inner {
            flag: watch::Sender::new(false),
            children: Mutex::new(Vec::new()),
        })
    }

    fn cancel(&self) {
        // Set the flag first: a concurrent `child()` either sees it, or has
        // already registered its child under the lock taken below.
        if self.flag.send_replace(true) {
            return;
        }
        let children =
            std::mem::take(&mut *self.children.lock().unwrap_or_else(|e| e.into_inner()));
        for child in children.iter().filter_map(Weak::upgrade) {
            child.cancel();
        }
    }
}

/// A cancellation flag shared by a caller and the work it started.
///
/// Clones share one flag. [`cancel`](Self::cancel) is idempotent; once
/// cancelled a token stays cancelled.
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl CancelToken {
    /// A new token, not cancelled, with no parent.
    pub fn new() -> CancelToken {
        CancelToken {
            inner: Inner::new(),
        }
    }

    /// Cancels this token and every token derived from it.
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// Whether this token (or one of its ancestors) was cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.inner.flag.borrow()
    }

    /// Completes once the token is cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        let mut rx = self.inner.flag.subscribe();
        // The sender lives as long as `self`, so this only returns on `true`.
        let _ = rx.wait_for(|cancelled| *cancelled).await;
    }

    /// A new token that is cancelled when this one is (but not the reverse).
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        {
            let mut children = self
                .inner
                .children
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !self.is_cancelled() {
                children.retain(|w| w.strong_count() > 0);
                children.push(Arc::downgrade(&child.inner));
                return child;
            }
        }
        child.cancel();
        child
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_reaches_children_not_parents() {
        let root = CancelToken::new();
        let child = root.child();
        let grandchild = child.child();
        let sibling = root.child();
        child.cancel();
        assert!(child.is_cancelled());
        assert!(grandchild.is_cancelled());
        assert!(!root.is_cancelled());
        assert!(!sibling.is_cancelled());
        root.cancel();
        assert!(sibling.is_cancelled());
    }

    #[test]
    fn child_of_cancelled_is_cancelled() {
        let root = CancelToken::new();
        root.cancel();
        assert!(root.child().is_cancelled());
    }

    #[tokio::test]
    async fn cancelled_wakes_waiters() {
        let root = CancelToken::new();
        let child = root.child();
        let waiter = tokio::spawn({
            let child = child.clone();
            async move { child.cancelled().await }
        });
        tokio::task::yield_now().await;
        root.cancel();
        waiter.await.unwrap();
        // Already cancelled: returns at once.
        child.cancelled().await;
    }
}
