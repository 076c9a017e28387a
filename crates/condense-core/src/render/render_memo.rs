//! The last renders, kept for a repeat of the same render.
//!
//! Under the cache-aware policy the host renders up to three times before
//! one LLM call: what the model sees now and what it would see after a
//! switch (to price the switch), then the render it sends, which is one of
//! the two. The render is a function of the messages, the state, the gate
//! and the settings, so the last two are kept under exactly those: the very
//! messages (by identity), the state's content generation (a switch changes
//! only what the gate captures), the gate, the config and the protection
//! rules' fingerprint. A render never depends on the memo
//! being warm: a miss renders again.

use std::sync::Mutex;

use crate::config::Config;
use crate::message::Message;

use super::{Gate, Render};

/// The render memo, one of a branch's [`RenderMemos`](super::RenderMemos).
/// A clone starts empty (it belongs to one state value).
#[derive(Debug, Default)]
pub(crate) struct RenderMemo {
    /// Newest first.
    last: Mutex<Vec<LastRender>>,
}

/// How many renders are kept.
const KEPT: usize = 2;

impl Clone for RenderMemo {
    fn clone(&self) -> Self {
        RenderMemo::default()
    }
}

#[derive(Debug)]
struct LastRender {
    generation: u64,
    gate: Gate,
    config: Config,
    protection: u64,
    messages: Vec<Message>,
    render: Render,
}

impl LastRender {
    fn fits(
        &self,
        generation: u64,
        gate: Gate,
        config: &Config,
        protection: u64,
        messages: &[Message],
    ) -> bool {
        self.generation == generation
            && self.gate == gate
            && self.protection == protection
            && self.messages.len() == messages.len()
            && self.messages.iter().zip(messages).all(|(a, b)| a.same(b))
            && self.config == *config
    }
}

impl RenderMemo {
    /// The render for these inputs, kept or made by `make`.
    pub(crate) fn get_or_make(
        &self,
        generation: u64,
        gate: Gate,
        config: &Config,
        protection: u64,
        messages: &[Message],
        make: impl FnOnce() -> Render,
    ) -> Render {
        if let Ok(last) = self.last.lock() {
            if let Some(l) = last
                .iter()
                .find(|l| l.fits(generation, gate, config, protection, messages))
            {
                return l.render.clone();
            }
        }
        let render = make();
        if let Ok(mut last) = self.last.lock() {
            last.truncate(KEPT - 1);
            last.insert(
                0,
                LastRender {
                    generation,
                    gate,
                    config: config.clone(),
                    protection,
                    messages: messages.to_vec(),
                    render: render.clone(),
                },
            );
        }
        render
    }
}
