//! Replaying a branch call by call under one policy, and pricing each call.
//!
//! Every assistant message on the branch is one LLM call. Its context is
//! what pi's `buildSessionContext` gives for the branch up to it
//! (`condense_store::context`, so compaction summaries and custom messages
//! are there as pi sends them); the policy turns that into the prompt. The
//! prompt's prefix shared with the previous call's prompt is counted by
//! whole messages equal byte for byte (providers cache at block
//! boundaries), plus the fixed overhead, unless the model changed.

use condense_core::{
    bill_call, recorded_bill, BillTotals, CallBill, CallTokens, PreviousCall, PriceProfile,
    RecordedUsage,
};
use condense_core::{Message, Role};
use condense_store::context::build_context;
use condense_store::session::{Entry, EntryType};
use condense_store::time::parse_iso;
use serde::Deserialize;

use super::policy::{CallInput, PromptSource, SummarizerWork};
use super::tokens::TokenCount;

/// What the session recorded of an assistant message.
#[derive(Debug, Default, Deserialize)]
struct AssistantFacts {
    #[serde(default)]
    usage: Option<RecordedUsage>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

/// One simulated call.
#[derive(Debug, Clone, PartialEq)]
pub struct SimCall {
    /// When it was made, if known.
    pub at_ms: Option<i64>,
    /// Prompt tokens (overhead included).
    pub prompt: u64,
    /// The prefix shared with the previous call's prompt, in tokens.
    pub shared_prefix: u64,
    /// Messages in the prompt.
    pub messages: usize,
    /// Its bill.
    pub bill: CallBill,
    /// Summarizer work done before it.
    pub summarizer: SummarizerWork,
    /// Its price, in units.
    pub summarizer_units: f64,
    /// What the provider reported, if the session recorded it.
    pub recorded: Option<RecordedUsage>,
}

/// One policy over one branch.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRun {
    /// The policy's name.
    pub policy: String,
    /// Every call, in order.
    pub calls: Vec<SimCall>,
    /// Their sum, summarizer included.
    pub totals: BillTotals,
    /// Tool results on the branch.
    pub tool_outputs: u64,
    /// Those the model can neither see nor page back in.
    pub unrecoverable_outputs: u64,
    /// Flushes that ran (engine-driven policies).
    pub flushes: u64,
    /// Switches the cache-aware policy made.
    pub switches: u64,
    /// For an engine-driven policy: whether a reload of the session the
    /// run would have left renders what the run did (`Err`: how not).
    pub reload: Option<Result<(), String>>,
}

/// When an assistant message's call was made: the message's own timestamp
/// (set when pi started the request), else its entry's.
fn call_time(entry: &Entry, message: &Message) -> Option<i64> {
    message.timestamp().or_else(|| parse_iso(&entry.timestamp))
}

/// The messages entries without a compaction add to pi's context.
fn context_of(entries: &[&Entry]) -> Vec<Message> {
    build_context(entries).messages
}

/// Replays `branch` (root first) under `policy`, pricing with `profile`.
pub fn replay(
    branch: &[&Entry],
    policy: &mut dyn PromptSource,
    tokens: &dyn TokenCount,
    profile: &PriceProfile,
) -> Result<PolicyRun, String> {
    let mut context: Vec<Message> = Vec::new();
    // Entries not yet in `context`, and not yet shown to the policy.
    let mut unsynced = 0usize;
    let mut unseen = 0usize;
    let mut prev_prompt: Vec<Message> = Vec::new();
    let mut prev_tokens: Vec<u64> = Vec::new();
    let mut prev_model: Option<(Option<String>, Option<String>)> = None;
    let mut previous: Option<PreviousCall> = None;
    let mut run = PolicyRun {
        policy: policy.name().to_owned(),
        calls: Vec::new(),
        totals: BillTotals::default(),
        tool_outputs: 0,
        unrecoverable_outputs: 0,
        flushes: 0,
        switches: 0,
        reload: None,
    };
    let mut previous_usage: Option<u64> = None;

    for (i, entry) in branch.iter().enumerate() {
        if entry.kind == EntryType::Compaction {
            context = context_of(&branch[..=i]);
            unsynced = i + 1;
            continue;
        }
        let Some(message) = entry.message.as_ref() else {
            continue;
        };
        if message.is(&Role::ToolResult) {
            run.tool_outputs += 1;
        }
        if !message.is(&Role::Assistant) {
            continue;
        }
        context.extend(context_of(&branch[unsynced..i]));
        unsynced = i;
        let at_ms = call_time(entry, message);
        let facts: AssistantFacts = serde_json::from_str(message.json()).unwrap_or_default();
        let model = match (&facts.provider, &facts.model) {
            (Some(p), Some(m)) => Some(format!("{p}/{m}")),
            (None, Some(m)) => Some(m.clone()),
            _ => None,
        };
        let prompt = policy.prompt(&CallInput {
            at_ms,
            context: &context,
            new_entries: &branch[unseen..i],
            tokens,
            model,
            previous_usage,
        })?;
        unseen = i;
        let messages = prompt.messages.as_ref();

        let shared = prev_prompt
            .iter()
            .zip(messages)
            .take_while(|(a, b)| a == b)
            .count();
        prev_tokens.truncate(shared);
        let same_model = prev_model
            .as_ref()
            .is_some_and(|m| *m == (facts.provider.clone(), facts.model.clone()));
        let shared_prefix = if same_model {
            tokens.overhead() + prev_tokens.iter().sum::<u64>()
        } else {
            0
        };
        prev_tokens.extend(messages[shared..].iter().map(|m| tokens.message(m)));
        let prompt_tokens = tokens.overhead() + prev_tokens.iter().sum::<u64>();
        let output = facts
            .usage
            .map(|u| u.output)
            .unwrap_or_else(|| tokens.message(message));
        let call = CallTokens {
            at_ms,
            prompt: prompt_tokens,
            shared_prefix,
            output,
        };
        let bill = bill_call(profile, previous, call);
        previous_usage = Some(prompt_tokens + output);
        run.totals.add_call(prompt_tokens, &bill);
        let before = run.totals.summarizer_units;
        run.totals
            .add_summarizer(profile, prompt.summarizer.input, prompt.summarizer.output);
        run.calls.push(SimCall {
            summarizer_units: run.totals.summarizer_units - before,
            at_ms,
            prompt: prompt_tokens,
            shared_prefix,
            messages: messages.len(),
            bill,
            summarizer: prompt.summarizer,
            recorded: facts.usage,
        });
        prev_prompt.clear();
        prev_prompt.extend_from_slice(messages);
        prev_model = Some((facts.provider, facts.model));
        previous = Some(PreviousCall { at_ms });
    }
    let finish = policy.finish(&branch[unseen..], previous_usage)?;
    run.totals
        .add_summarizer(profile, finish.summarizer.input, finish.summarizer.output);
    run.unrecoverable_outputs = finish.unrecoverable_outputs;
    run.flushes = finish.flushes;
    run.switches = finish.switches;
    run.reload = finish
        .reload_checked
        .then(|| finish.reload_mismatch.map_or(Ok(()), Err));
    Ok(run)
}

/// The recorded calls of a run, billed as recorded (`None`: the session
/// recorded no usage).
pub fn recorded_totals(run: &PolicyRun, profile: &PriceProfile) -> Option<BillTotals> {
    let mut totals = BillTotals::default();
    for usage in run.calls.iter().filter_map(|c| c.recorded) {
        totals.add_call(usage.prompt(), &recorded_bill(profile, &usage));
    }
    (totals.prompt_tokens > 0).then_some(totals)
}
