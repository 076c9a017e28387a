//! Message texts a host may move out of memory once it has persisted them
//! ("park" them), read back whole when asked.
//!
//! A long session is mostly tool outputs the engine seldom reads again: a
//! flush reads a pending one once, a query or a dedup lookup one at a time.
//! A host that writes every message to a log of its own (the proxy) parks
//! them there, so a long conversation costs its skeletons and indexes in
//! memory, not its outputs a second time.
//!
//! Parking acts on the buffer every handle shares (the [`Message`] and each
//! [`SharedText`] window read out of it), so it changes no message's
//! identity and rolls back no memo.
//!
//! [`Message`]: crate::Message
//! [`SharedText`]: crate::SharedText

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

/// Where a parked message's JSON can be read back: given by the host that
/// persisted it, so the core does no I/O of its own.
pub trait ParkedText: Send + Sync + fmt::Debug {
    /// The text exactly as it was parked, or why it cannot be read.
    fn read(&self) -> Result<String, String>;

    /// Whether the source gives back exactly `text`: checked once, before
    /// a text is parked. The default reads it back whole; a source can
    /// compare without holding a second copy.
    fn holds(&self, text: &str) -> Result<(), String> {
        match self.read()? == text {
            true => Ok(()),
            false => Err(format!("{self:?} does not give back the text")),
        }
    }
}

/// A message's own JSON text: in memory, or parked with a [`ParkedText`]
/// that gives it back.
pub(crate) struct OwnText {
    resident: Mutex<Option<Arc<String>>>,
    parked: OnceLock<Arc<dyn ParkedText>>,
    len: usize,
}

impl OwnText {
    pub(crate) fn new(text: String) -> OwnText {
        OwnText {
            len: text.len(),
            resident: Mutex::new(Some(Arc::new(text))),
            parked: OnceLock::new(),
        }
    }

    /// The text's length in bytes, without reading it back.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The text: the copy in memory, or the one `read` gives back. Reading
    /// back does not keep the text: the caller holds it while it needs it.
    pub(crate) fn get(&self) -> Result<Arc<String>, String> {
        if let Some(text) = self.resident().as_ref() {
            return Ok(Arc::clone(text));
        }
        let source = self
            .parked
            .get()
            .ok_or("a parked text has no source to read it from")?;
        let text = source.read()?;
        if text.len() != self.len {
            return Err(format!(
                "{source:?} gave back {} bytes, not the {} parked",
                text.len(),
                self.len
            ));
        }
        Ok(Arc::new(text))
    }

    /// Whether the text is parked.
    pub(crate) fn is_parked(&self) -> bool {
        self.resident().is_none()
    }

    /// Parks the text with `source`, once `source` has given back exactly
    /// these bytes; otherwise (or when already parked) keeps it in memory
    /// and says why.
    pub(crate) fn park(&self, source: Arc<dyn ParkedText>) -> Result<(), String> {
        let mut resident = self.resident();
        let Some(text) = resident.as_ref() else {
            return Err("already parked".to_owned());
        };
        source.holds(text)?;
        if self.parked.set(source).is_err() {
            return Err("already parked".to_owned());
        }
        *resident = None;
        Ok(())
    }

    fn resident(&self) -> std::sync::MutexGuard<'_, Option<Arc<String>>> {
        // A panic while the lock was held cannot leave the option half set.
        self.resident.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for OwnText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parked.get().filter(|_| self.is_parked()) {
            Some(source) => write!(f, "parked in {source:?} ({} bytes)", self.len),
            None => match self.get() {
                Ok(text) => fmt::Debug::fmt(&*text, f),
                Err(e) => write!(f, "unreadable: {e}"),
            },
        }
    }
}

/// A message's JSON text as [`Message::json`](crate::Message::json) gives
/// it: borrowed from a loaded buffer, or a handle on the message's own text
/// (read back when it is parked). Reads as a `str`.
#[derive(Clone)]
pub struct JsonStr<'a>(JsonRepr<'a>);

#[derive(Clone)]
enum JsonRepr<'a> {
    Borrowed(&'a str),
    Held(Arc<String>),
}

impl<'a> JsonStr<'a> {
    pub(crate) fn borrowed(text: &'a str) -> JsonStr<'a> {
        JsonStr(JsonRepr::Borrowed(text))
    }

    pub(crate) fn held(text: Arc<String>) -> JsonStr<'static> {
        JsonStr(JsonRepr::Held(text))
    }
}

impl Deref for JsonStr<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.0 {
            JsonRepr::Borrowed(s) => s,
            JsonRepr::Held(s) => s,
        }
    }
}

impl AsRef<str> for JsonStr<'_> {
    fn as_ref(&self) -> &str {
        self
    }
}

impl PartialEq for JsonStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<str> for JsonStr<'_> {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for JsonStr<'_> {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl PartialEq<String> for JsonStr<'_> {
    fn eq(&self, other: &String) -> bool {
        **self == **other
    }
}

impl fmt::Debug for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A source that gives back a fixed text, or fails.
    #[derive(Debug)]
    pub(crate) struct Fixed(pub(crate) Result<String, String>);

    impl ParkedText for Fixed {
        fn read(&self) -> Result<String, String> {
            self.0.clone()
        }
    }

    #[test]
    fn a_parked_text_is_read_back_and_not_kept() {
        let own = OwnText::new("abc".to_owned());
        own.park(Arc::new(Fixed(Ok("abc".to_owned())))).unwrap();
        assert!(own.is_parked());
        assert_eq!(own.get().unwrap().as_str(), "abc");
        assert!(own.is_parked(), "reading back does not keep the text");
        assert_eq!(
            own.park(Arc::new(Fixed(Ok("abc".to_owned())))).unwrap_err(),
            "already parked"
        );
    }

    #[test]
    fn a_source_that_does_not_give_the_text_back_parks_nothing() {
        let own = OwnText::new("abc".to_owned());
        assert!(own.park(Arc::new(Fixed(Ok("abd".to_owned())))).is_err());
        assert!(own.park(Arc::new(Fixed(Err("gone".to_owned())))).is_err());
        assert!(!own.is_parked());
        assert_eq!(own.get().unwrap().as_str(), "abc");
    }

    #[test]
    fn a_source_that_later_changes_is_an_error_not_a_wrong_text() {
        #[derive(Debug)]
        struct Flaky(Mutex<Vec<String>>);
        impl ParkedText for Flaky {
            fn read(&self) -> Result<String, String> {
                self.0
                    .lock()
                    .unwrap()
                    .pop()
                    .ok_or_else(|| "gone".to_owned())
            }
        }
        let own = OwnText::new("abc".to_owned());
        let source = Flaky(Mutex::new(vec!["ab".to_owned(), "abc".to_owned()]));
        own.park(Arc::new(source)).unwrap();
        assert!(own
            .get()
            .unwrap_err()
            .contains("gave back 2 bytes, not the 3 parked"));
        assert_eq!(own.get().unwrap_err(), "gone");
    }
}
