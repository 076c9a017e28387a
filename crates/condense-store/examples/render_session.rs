//! Renders a pi session file as the model would see it: one message of JSON
//! a line, with condense's default settings.
//!
//! ```text
//! cargo run -p condense-store --example render_session -- SESSION.jsonl
//! ```

use condense_core::{render, Config, Message, Protection, RenderSettings};
use condense_store::{context::branch_messages, replay::replay_branch, session::Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: render_session SESSION.jsonl")?;
    let session = Session::open(&path)?;
    let branch = session.branch(None);
    let messages: Vec<Message> = branch_messages(&branch)
        .into_iter()
        .map(|m| m.message)
        .collect();
    let (state, _skipped) = replay_branch(&branch);
    let config = Config::default();
    let settings = RenderSettings {
        config: &config,
        protection: &Protection::new(&config),
    };
    for message in render(&messages, &state, &settings).messages(&messages) {
        println!("{}", message.json());
    }
    Ok(())
}
