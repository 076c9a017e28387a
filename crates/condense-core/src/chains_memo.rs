//! What chain detection keeps between flushes.
//!
//! Every flush detects the branch's chains to pick the ones to compress,
//! and the branch only grows between flushes: a chain, once closed or
//! interrupted, stays as it was detected. The spans found so far and the
//! walk's position are kept with the very messages they were read from; a
//! detection compares the branch with them by identity, rolls back to the
//! first message that differs (to the last span ended before it, where the
//! walk had no open chain or had just opened one) and walks on from there.
//! The result never depends on the memo being warm.

use std::sync::{Arc, Mutex};

use crate::chains::{Detector, Span};
use crate::message::Message;
use crate::protect::Protection;

/// The detection memo, kept beside a state by its
/// [`Branch`](crate::branch::Branch). A clone starts empty (it belongs to
/// one state value).
#[derive(Debug, Default)]
pub(crate) struct ChainsMemo {
    walk: Mutex<Walk>,
}

impl Clone for ChainsMemo {
    fn clone(&self) -> Self {
        ChainsMemo::default()
    }
}

#[derive(Debug, Default)]
struct Walk {
    /// The protection rules' fingerprint the spans were detected under.
    protection: Option<u64>,
    /// The messages walked.
    walked: Vec<Message>,
    /// The spans ended so far, each with the index of the message that
    /// ended it.
    spans: Arc<Vec<(usize, Span)>>,
    /// The walk's state after `walked`.
    detector: Detector,
}

impl Walk {
    fn reset(&mut self, protection: u64) {
        *self = Walk {
            protection: Some(protection),
            ..Walk::default()
        };
    }

    /// Rolls back to the longest prefix of `messages` the walk can resume
    /// from, at most `same` messages long.
    fn roll_back(&mut self, same: usize) {
        let spans = Arc::make_mut(&mut self.spans);
        while spans.last().is_some_and(|(at, _)| *at >= same) {
            spans.pop();
        }
        // A closed span ends at its final assistant, after which no chain is
        // open; an interrupted one at the user message that opened the next
        // chain, which the walk reads again.
        let resume = match spans.last() {
            Some((at, span)) if span.range.is_closed() => at + 1,
            Some((at, _)) => *at,
            None => 0,
        };
        self.walked.truncate(resume);
        self.detector = Detector::default();
    }
}

impl ChainsMemo {
    /// Every closed or interrupted span of `messages` (see
    /// [`detect_chains`](crate::detect_chains)), each with the index of the
    /// message that ended it.
    pub(crate) fn spans(
        &self,
        messages: &[Message],
        protection: &Protection,
    ) -> Arc<Vec<(usize, Span)>> {
        let Ok(mut walk) = self.walk.lock() else {
            return Arc::new(walk_from_scratch(messages, protection));
        };
        if walk.protection != Some(protection.fingerprint()) {
            walk.reset(protection.fingerprint());
        }
        let same = Message::same_prefix(&walk.walked, messages);
        if same < walk.walked.len() {
            walk.roll_back(same);
        }
        let walk = &mut *walk;
        for (i, m) in messages.iter().enumerate().skip(walk.walked.len()) {
            if let Some(span) = walk.detector.step(i, m, Some(protection)) {
                Arc::make_mut(&mut walk.spans).push((i, span));
            }
            walk.walked.push(m.clone());
        }
        Arc::clone(&walk.spans)
    }
}

fn walk_from_scratch(messages: &[Message], protection: &Protection) -> Vec<(usize, Span)> {
    let mut detector = Detector::default();
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| detector.step(i, m, Some(protection)).map(|s| (i, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::ChainsMemo;
    use crate::chains::detect_spans;
    use crate::config::Config;
    use crate::message::Message;
    use crate::metrics_memo::tests::message;
    use crate::protect::Protection;

    #[derive(Debug, Clone)]
    enum Step {
        Append(Vec<(u8, u8)>),
        /// Drops the messages from this share of the branch on.
        Truncate(u8),
        /// Replaces one message by an equal copy (another identity).
        Copy(u8),
        /// Detects under these rules.
        Detect(bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => proptest::collection::vec((0u8..8, 0u8..9), 1..12).prop_map(Step::Append),
            1 => (0u8..=100).prop_map(Step::Truncate),
            1 => (0u8..=100).prop_map(Step::Copy),
            3 => proptest::bool::ANY.prop_map(Step::Detect),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// On a branch that grows, is cut back and has messages replaced
        /// between detections, the memo's spans are a fresh walk's, each
        /// ended where the walk ends it.
        #[test]
        fn the_memo_agrees_with_a_fresh_walk(steps in proptest::collection::vec(step(), 1..24)) {
            let memo = ChainsMemo::default();
            let mut branch: Vec<Message> = Vec::new();
            let mut ts = 1i64;
            for s in steps {
                match s {
                    Step::Append(ms) => {
                        for (kind, n) in ms {
                            ts += 1;
                            branch.push(message(kind, n, ts));
                        }
                    }
                    Step::Truncate(share) => {
                        branch.truncate(branch.len() * usize::from(share) / 100);
                    }
                    Step::Copy(share) => {
                        let i = branch.len() * usize::from(share) / 100;
                        if let Some(m) = branch.get(i) {
                            let v: Value = serde_json::from_str(&m.json()).expect("json");
                            branch[i] = Message::from_value(&v).expect("a message");
                        }
                    }
                    Step::Detect(protect_read) => {
                        let config = Config {
                            protected_tools: vec!["todo".to_owned()],
                            protected_paths: if protect_read {
                                vec!["src/1.rs".to_owned()]
                            } else {
                                Vec::new()
                            },
                            ..Config::default()
                        };
                        let (protection, _) = Protection::compile(&config);
                        let spans = memo.spans(&branch, &protection);
                        let fresh = detect_spans(&branch, Some(&protection));
                        let memo_spans: Vec<_> = spans.iter().map(|(_, s)| s.clone()).collect();
                        prop_assert_eq!(&memo_spans, &fresh);
                        for (at, span) in spans.iter() {
                            let last = span.range.last_index;
                            prop_assert!(*at == last || *at == last + 1, "{} ends {}", at, last);
                        }
                    }
                }
            }
        }
    }
}
