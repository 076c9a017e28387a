//! What a host does at the harness's events that end in a flush: the
//! engine's call, then the flush its trigger asks for, through
//! [`run_flush`]. The pi sidecar and the simulator (`condense simulate`)
//! both go through these, so the trigger-to-flush sequence exists once.
//!
//! The engine sits behind an [`EngineLock`], taken only between the LLM
//! calls, never across an `.await`.

use condense_core::{Message, TriggerKind};
use condense_summarizer::{CancelToken, RunOptions, Summarizer};

use crate::flush::run_flush;
use crate::protocol::{Delivery, Effect, Effects};
use crate::session::{EngineFlush, EngineLock};

/// `turn_end` as the harness reports it.
#[derive(Debug, Clone, Copy)]
pub struct TurnEnd<'a> {
    /// The turn's index in the agent run.
    pub turn_index: i64,
    /// The turn's assistant message.
    pub message: &'a Message,
    /// Its tool results.
    pub results: &'a [Message],
    /// The context's tokens as the harness estimates them, if it can.
    pub tokens: Option<u64>,
    /// The model's context window (`0`: unknown).
    pub context_window: u64,
    /// The host's clock (ms).
    pub now: i64,
}

/// Runs a flush end to end and returns its effects: the summarizer's
/// notices first, as they happened, then the flush's. Nothing when a flush
/// is already running or this one was cancelled.
pub async fn flush<L: EngineLock + ?Sized>(
    lock: &L,
    trigger: TriggerKind,
    delivery: Delivery,
    closing: Option<Message>,
    summarizer: &Summarizer,
    clock: &(dyn Fn() -> i64 + Sync),
) -> Effects {
    let Some(flush) = lock.engine().begin_flush(trigger, closing, clock()) else {
        return Effects::new();
    };
    let options = match delivery {
        Delivery::Runtime => RunOptions::sequential(),
        Delivery::Session => RunOptions::default(),
    };
    let steps = EngineFlush { lock, delivery };
    let cancel = CancelToken::new();
    match run_flush(
        &steps,
        flush,
        summarizer,
        options,
        &cancel,
        &mut |_| {},
        clock,
    )
    .await
    {
        Ok((notices, done)) => notices
            .iter()
            .map(|n| Effect::notify(n.level, n.text.clone()))
            .chain(done.effects)
            .collect(),
        Err(_) => Effects::new(),
    }
}

/// `turn_end`: capture, the budget gates, and the flush a trigger fired
/// (its entries written to the session). `summarizer` is built only when a
/// flush runs.
pub async fn turn_end<L: EngineLock + ?Sized>(
    lock: &L,
    turn: TurnEnd<'_>,
    summarizer: impl FnOnce() -> Summarizer,
    clock: &(dyn Fn() -> i64 + Sync),
) -> Effects {
    let (mut effects, trigger) = lock.engine().turn_end(
        turn.turn_index,
        turn.message,
        turn.results,
        turn.tokens,
        turn.context_window,
        turn.now,
    );
    if let Some(t) = trigger {
        let summarizer = summarizer();
        effects.extend(flush(lock, t, Delivery::Session, None, &summarizer, clock).await);
    }
    effects
}

/// `message_end`: an assistant reply the pruning mode flushes on, with the
/// reply threaded in as the closing message.
pub async fn message_end<L: EngineLock + ?Sized>(
    lock: &L,
    message: Message,
    summarizer: impl FnOnce() -> Summarizer,
    clock: &(dyn Fn() -> i64 + Sync),
) -> Effects {
    let trigger = lock.engine().message_end(&message);
    match trigger {
        Some(t) => {
            let summarizer = summarizer();
            flush(
                lock,
                t,
                Delivery::Session,
                Some(message),
                &summarizer,
                clock,
            )
            .await
        }
        None => Effects::new(),
    }
}

/// The start of an agent run: the flush a reply left for it (see
/// [`crate::Engine::agent_start`]), before the run's first call. Its
/// messages go through the harness's runtime (pi adds them to the agent's
/// messages and the session, ahead of the prompt it has not persisted yet,
/// and after whatever pi added since the reply, such as a compaction's
/// rebuilt list), so the run's first call holds them; the engine shows
/// them itself until the host's list does (OpenCode's never does).
pub async fn agent_start<L: EngineLock + ?Sized>(
    lock: &L,
    summarizer: impl FnOnce() -> Summarizer,
    clock: &(dyn Fn() -> i64 + Sync),
) -> Effects {
    let trigger = lock.engine().agent_start(clock());
    match trigger {
        Some(t) => {
            let summarizer = summarizer();
            flush(lock, t, Delivery::Runtime, None, &summarizer, clock).await
        }
        None => Effects::new(),
    }
}

/// The host compacted the context (see [`crate::Engine::compacted`]):
/// `keep` and `append` are its list after the compaction, `now` the
/// host's clock. Runs the flush
/// that pays at the cold call the compaction makes, its entries written to
/// the session (pi rebuilt its list before this event, so the engine
/// shows them until the host's list holds them, as a turn end's).
pub async fn compacted<L: EngineLock + ?Sized>(
    lock: &L,
    keep: usize,
    append: Vec<Message>,
    now: i64,
    summarizer: impl FnOnce() -> Summarizer,
    clock: &(dyn Fn() -> i64 + Sync),
) -> Effects {
    let trigger = lock.engine().compacted(keep, append, now);
    match trigger {
        Some(t) => {
            let summarizer = summarizer();
            let mut effects = vec![Effect::info(
                "pruner: after the compaction — compacting the kept turns' outputs".to_owned(),
            )];
            effects.extend(flush(lock, t, Delivery::Session, None, &summarizer, clock).await);
            effects
        }
        None => Effects::new(),
    }
}
