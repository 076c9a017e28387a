//! The messages a flush's session entries add to the context before the
//! host's own list holds them.
//!
//! A summary written straight to the session file (`Delivery::Session`:
//! every flush at a turn's end or a reply) is in what a reload renders, but
//! pi's running agent never reads the file back, so the list it hands
//! `context` lacks it until pi rebuilds from the file (a reload, a
//! compaction). The engine therefore keeps each such message in its own
//! copy of the context, at its branch position (after the messages the copy
//! held when the flush ran), and renders that: the model is sent what a
//! reload renders. A summary delivered through the harness's runtime
//! (`pi.sendMessage`) is kept the same way until the host's list holds it:
//! pi's does at its next `context`, OpenCode's never. The host still
//! speaks in its own list's coordinates (`keep`, `append`, the plan's
//! `Keep` ranges); [`Injected`] translates.
//!
//! An injected message is dropped once the host's list is cut before it
//! (the host no longer holds what preceded it), or once the host's list
//! holds the same message itself (matched by `customType` and `details`,
//! which name the summarized calls).

use std::ops::Range;

use condense_core::{Message, PlanStep, Role};
use serde::Deserialize;
use serde_json::Value;

/// What identifies a custom message the host may come to hold.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    #[serde(default)]
    custom_type: Option<String>,
    #[serde(default)]
    details: Value,
}

impl Identity {
    fn of(message: &Message) -> Option<Identity> {
        if !message.is(&Role::Custom) {
            return None;
        }
        serde_json::from_str(&message.json()).ok()
    }
}

/// A condense summary's identity (the messages the engine may inject).
fn summary_identity(message: &Message) -> Option<Identity> {
    let summary =
        message.skeleton().custom_type.as_deref() == Some(condense_core::SUMMARY_CUSTOM_TYPE);
    summary.then(|| Identity::of(message)).flatten()
}

/// One injected message: where it sits in the engine's copy.
#[derive(Debug, Clone)]
struct Slot {
    at: usize,
    identity: Identity,
}

/// The injected messages of the engine's copy, in order of position.
#[derive(Debug, Clone, Default)]
pub(crate) struct Injected {
    slots: Vec<Slot>,
}

impl Injected {
    /// Forgets every injected message (the copy was rebuilt from the
    /// branch, which holds them).
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }

    /// Whether none is injected.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many messages are injected.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Adds `message` at the end of the copy.
    pub(crate) fn push(
        &mut self,
        messages: &mut Vec<Message>,
        entry_ts: &mut Vec<Option<i64>>,
        message: Message,
    ) {
        let Some(identity) = Identity::of(&message) else {
            return;
        };
        self.slots.push(Slot {
            at: messages.len(),
            identity,
        });
        messages.push(message);
        entry_ts.push(None);
    }

    /// The host's messages in the copy (the injected ones skipped).
    pub(crate) fn host_messages<'a>(
        &'a self,
        messages: &'a [Message],
    ) -> impl Iterator<Item = &'a Message> + 'a {
        let mut slots = self.slots.iter().peekable();
        messages.iter().enumerate().filter_map(move |(i, m)| {
            if slots.next_if(|s| s.at == i).is_some() {
                None
            } else {
                Some(m)
            }
        })
    }

    /// Syncs the copy with the host's list: its first `keep` messages still
    /// match (in the host's coordinates), then `append`. Injected messages
    /// right after the first `keep` host messages stay. What the host sends
    /// again is walked against the copy first (the first `context` after a
    /// restart sends everything): the messages it still holds are kept, and
    /// a condense summary the host's list lacks (OpenCode's list never has
    /// them) becomes an injected one, so it is shown where a reload puts it.
    pub(crate) fn sync(
        &mut self,
        messages: &mut Vec<Message>,
        entry_ts: &mut Vec<Option<i64>>,
        keep: usize,
        append: Vec<Message>,
    ) {
        let keep = keep.min(messages.len().saturating_sub(self.slots.len()));
        let mut at = keep;
        for slot in &self.slots {
            if slot.at <= at {
                at += 1;
            } else {
                break;
            }
        }
        let mut taken = 0;
        let mut next_slot = self.slots.partition_point(|s| s.at < at);
        while at < messages.len() {
            if self.slots.get(next_slot).is_some_and(|s| s.at == at) {
                at += 1;
                next_slot += 1;
                continue;
            }
            let held = &messages[at];
            if append.get(taken).is_some_and(|m| m.json() == held.json()) {
                at += 1;
                taken += 1;
                continue;
            }
            let lacked = summary_identity(held).filter(|identity| {
                !append[taken..]
                    .iter()
                    .any(|m| Identity::of(m).as_ref() == Some(identity))
            });
            let Some(identity) = lacked else {
                break;
            };
            self.slots.insert(next_slot, Slot { at, identity });
            next_slot += 1;
            at += 1;
        }
        self.slots.retain(|s| s.at < at);
        messages.truncate(at);
        entry_ts.truncate(at);
        let append: Vec<Message> = append.into_iter().skip(taken).collect();
        if !self.slots.is_empty() {
            for identity in append.iter().filter_map(Identity::of) {
                self.forget(messages, entry_ts, &identity);
            }
        }
        entry_ts.extend(std::iter::repeat_n(None, append.len()));
        messages.extend(append);
    }

    /// The host now holds this message itself: the engine's copy goes.
    fn forget(
        &mut self,
        messages: &mut Vec<Message>,
        entry_ts: &mut Vec<Option<i64>>,
        identity: &Identity,
    ) {
        let Some(i) = self.slots.iter().position(|s| s.identity == *identity) else {
            return;
        };
        let at = self.slots.remove(i).at;
        if at < messages.len() {
            messages.remove(at);
            entry_ts.remove(at);
        }
        for later in &mut self.slots[i..] {
            later.at -= 1;
        }
    }

    /// A render plan over the copy, in the host's coordinates: kept runs
    /// split around the injected messages, which become new messages.
    /// `None` (the copy unchanged) is a plan too when something is injected.
    pub(crate) fn host_steps(
        &self,
        steps: Option<Vec<PlanStep>>,
        messages: &[Message],
    ) -> Option<Vec<PlanStep>> {
        if self.slots.is_empty() {
            return steps;
        }
        let steps = steps.unwrap_or_else(|| vec![PlanStep::Keep(0..messages.len())]);
        let mut out = Vec::with_capacity(steps.len() + 2 * self.slots.len());
        for step in steps {
            match step {
                PlanStep::Keep(range) => self.split(range, messages, &mut out),
                new => out.push(new),
            }
        }
        Some(out)
    }

    /// How many injected messages sit before position `i` of the copy.
    fn before(&self, i: usize) -> usize {
        self.slots.partition_point(|s| s.at < i)
    }

    fn split(&self, range: Range<usize>, messages: &[Message], out: &mut Vec<PlanStep>) {
        let mut start = range.start;
        let first = self.before(range.start);
        for slot in self.slots[first..].iter().take_while(|s| s.at < range.end) {
            if slot.at > start {
                let shift = self.before(start);
                out.push(PlanStep::Keep(start - shift..slot.at - shift));
            }
            if let Some(m) = messages.get(slot.at) {
                out.push(PlanStep::New(m.clone()));
            }
            start = slot.at + 1;
        }
        if range.end > start {
            let shift = self.before(start);
            out.push(PlanStep::Keep(start - shift..range.end - shift));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::from_json(&serde_json::json!({"role": "user", "content": text}).to_string())
            .expect("valid")
    }

    fn summary(n: u64) -> Message {
        Message::from_json(
            &serde_json::json!({"role": "custom", "customType": "context-prune-summary",
                "content": format!("summary {n}"), "display": false, "details": {"n": n}, "timestamp": n})
            .to_string(),
        )
        .expect("valid")
    }

    /// `n` host messages, `m0` to `m<n-1>`.
    fn host_list(n: usize) -> Vec<Message> {
        (0..n).map(|i| user(&format!("m{i}"))).collect()
    }

    /// What the engine holds: the injected slots, its copy of the context
    /// and the copy's entry timestamps.
    #[derive(Default)]
    struct Held {
        inj: Injected,
        copy: Vec<Message>,
        ts: Vec<Option<i64>>,
    }

    impl Held {
        /// The host's first two messages, then a flush's `summary(1)`.
        fn two_then_a_summary(host: &[Message]) -> Held {
            let mut held = Held::default();
            held.sync(0, &host[..2]);
            held.push(summary(1));
            held
        }

        fn sync(&mut self, keep: usize, append: &[Message]) {
            self.inj
                .sync(&mut self.copy, &mut self.ts, keep, append.to_vec());
        }

        fn push(&mut self, message: Message) {
            self.inj.push(&mut self.copy, &mut self.ts, message);
        }
    }

    #[test]
    fn the_plan_in_host_coordinates_shows_the_copy() {
        let host = host_list(5);
        let mut held = Held::two_then_a_summary(&host);
        held.sync(2, &host[2..4]);
        held.push(summary(2));
        held.push(summary(3));
        held.sync(4, &host[4..]);
        let Held { inj, copy, ts } = held;
        assert_eq!(copy.len(), 8);
        assert_eq!(ts.len(), 8);
        let hosts: Vec<&Message> = inj.host_messages(&copy).collect();
        assert_eq!(hosts, host.iter().collect::<Vec<_>>());
        let steps = inj.host_steps(None, &copy).expect("a plan");
        assert_eq!(condense_core::apply_steps(&steps, &host), copy);
        // A plan replacing one host message and keeping the rest.
        let steps = vec![
            PlanStep::Keep(0..3),
            PlanStep::New(user("stub")),
            PlanStep::Keep(4..8),
        ];
        let mut want = copy.clone();
        want[3] = user("stub");
        assert_eq!(
            condense_core::apply_steps(&inj.host_steps(Some(steps), &copy).expect("a plan"), &host),
            want
        );
    }

    #[test]
    fn a_host_sending_everything_again_keeps_what_it_still_holds() {
        let host = host_list(3);
        let mut held = Held::two_then_a_summary(&host);
        // A restarted shim holds no keys: it sends its whole list.
        held.sync(0, &host);
        assert_eq!(
            held.copy,
            vec![
                host[0].clone(),
                host[1].clone(),
                summary(1),
                host[2].clone()
            ]
        );
        // A copy rebuilt from a log that holds the summary, and a host whose
        // list never does (OpenCode): the summary is kept, injected.
        let mut held = Held {
            copy: vec![host[0].clone(), summary(2), host[1].clone()],
            ts: vec![None; 3],
            ..Held::default()
        };
        held.sync(0, &host);
        assert_eq!(
            held.copy,
            vec![
                host[0].clone(),
                summary(2),
                host[1].clone(),
                host[2].clone()
            ]
        );
        let steps = held.inj.host_steps(None, &held.copy).expect("a plan");
        assert_eq!(condense_core::apply_steps(&steps, &host), held.copy);
        // A message the host changed cuts there: what followed it goes.
        let mut changed = host.to_vec();
        changed[0] = user("m0 edited");
        held.sync(0, &changed);
        assert_eq!(held.copy, changed);
        assert_eq!(held.ts.len(), held.copy.len());
    }

    #[test]
    fn a_cut_drops_what_followed_it_and_the_host_copy_replaces_ours() {
        let host = host_list(4);
        let mut held = Held::two_then_a_summary(&host);
        held.sync(2, &host[2..3]);
        held.push(summary(2));
        // The host keeps its first two: the first summary stays, the second goes.
        held.sync(2, &host[3..]);
        let kept = vec![
            host[0].clone(),
            host[1].clone(),
            summary(1),
            host[3].clone(),
        ];
        assert_eq!(held.copy, kept);
        // The host rebuilt its list from the file: it holds the summary now.
        let rebuilt = kept;
        held.sync(2, &rebuilt[2..]);
        assert!(held.inj.is_empty());
        assert_eq!(held.copy, rebuilt);
        assert_eq!(held.ts.len(), held.copy.len());
        assert_eq!(held.inj.host_steps(None, &held.copy), None);
    }
}
