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

use std::borrow::Cow;

use super::compaction::{self, Boundary, CompactionSettings, Moment, Synthesized};
use super::policy::{CallInput, PromptSource, SummarizerWork};
use super::tokens::TokenCount;
use condense_core::MissRates;
use condense_store::misses::provider_of;

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
    /// Summarizer work done before it (a compaction's summary calls
    /// included).
    pub summarizer: SummarizerWork,
    /// The compaction pi made before it, when the session did not record
    /// one there (synthesized).
    pub compaction: Option<CompactionFacts>,
    /// Its price, in units.
    pub summarizer_units: f64,
    /// What the provider reported, if the session recorded it.
    pub recorded: Option<RecordedUsage>,
}

/// A compaction the replay synthesized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionFacts {
    /// Why pi compacted: `threshold` (after a run), `requested` (after a
    /// run, asked by the policy) or `overflow` (the provider refused the
    /// prompt).
    pub reason: &'static str,
    /// The entry it kept from.
    pub first_kept_entry_id: String,
    /// pi's estimate of the context before it.
    pub tokens_before: u64,
    /// Its summary calls.
    pub work: SummarizerWork,
}

impl CompactionFacts {
    fn of(reason: &'static str, s: &Synthesized, tokens_before: u64) -> CompactionFacts {
        CompactionFacts {
            reason,
            first_kept_entry_id: s.first_kept_id.clone(),
            tokens_before,
            work: s.work,
        }
    }
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
    /// The provider of the calls from each index on (`provider` of their
    /// model's `provider/id`), one entry where it changes: what keys their
    /// cache misses.
    pub providers: Vec<(usize, String)>,
    /// Compactions pi made that the session did not record (synthesized).
    pub compactions: u64,
    /// Their summary calls' tokens (also in the summarizer totals).
    pub compaction_work: SummarizerWork,
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

/// The previous call's prompt, to count the prefix the next one shares.
#[derive(Default)]
struct PromptHistory {
    messages: Vec<Message>,
    tokens: Vec<u64>,
}

impl PromptHistory {
    fn shared(&self, messages: &[Message]) -> usize {
        self.messages
            .iter()
            .zip(messages)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// `messages` against the previous prompt: the messages shared, and
    /// the tokens of the others.
    ///
    /// After a switch most of the suffix is the previous prompt's messages
    /// again, in order and by identity (a render keeps what it does not
    /// change), so their counts are taken from it rather than measured
    /// anew: measuring parses a message's JSON.
    fn measure(&self, messages: &[Message], tokens: &dyn TokenCount) -> Measured {
        let shared = self.shared(messages);
        let mut next_old = shared;
        let new_tokens = messages[shared..]
            .iter()
            .map(|m| {
                let found = self.messages[next_old..].iter().position(|o| o.same(m));
                match found.map(|k| next_old + k) {
                    Some(j) if j < self.tokens.len() => {
                        next_old = j + 1;
                        self.tokens[j]
                    }
                    _ => tokens.message(m),
                }
            })
            .collect();
        Measured { shared, new_tokens }
    }

    /// The measured prompt's tokens, overhead included.
    fn total(&self, measured: &Measured, tokens: &dyn TokenCount) -> u64 {
        tokens.overhead()
            + self
                .tokens
                .get(..measured.shared)
                .unwrap_or_default()
                .iter()
                .sum::<u64>()
            + measured.new_tokens.iter().sum::<u64>()
    }

    /// Keeps `messages` (measured) as the previous prompt: its tokens, the
    /// prefix (in tokens, overhead included) it shares with the one before,
    /// and its length.
    fn keep(
        &mut self,
        messages: &[Message],
        measured: Measured,
        tokens: &dyn TokenCount,
    ) -> (u64, u64, usize) {
        self.tokens.truncate(measured.shared);
        let shared_tokens = tokens.overhead() + self.tokens.iter().sum::<u64>();
        self.tokens.extend(measured.new_tokens);
        self.messages.clear();
        self.messages.extend_from_slice(messages);
        (
            tokens.overhead() + self.tokens.iter().sum::<u64>(),
            shared_tokens,
            messages.len(),
        )
    }
}

/// A prompt measured against the previous one.
struct Measured {
    shared: usize,
    new_tokens: Vec<u64>,
}

/// Whether the call at `branch[call]` ended its agent run: a reply without
/// tool calls, or tool calls that got no results (`since`: the entries
/// after it).
fn ended_run(branch: &[&Entry], call: usize, since: &[&Entry]) -> bool {
    let text_only = branch[call]
        .message
        .as_ref()
        .is_some_and(Message::is_text_only_assistant);
    text_only
        || !since
            .iter()
            .any(|e| e.message.as_ref().is_some_and(|m| m.is(&Role::ToolResult)))
}

/// `entries` with `synthesized` before the recorded entry `offset + at`.
fn with_compaction<'e>(
    entries: &'e [&'e Entry],
    offset: usize,
    synthesized: Option<&'e Synthesized>,
) -> Cow<'e, [&'e Entry]> {
    let Some(s) = synthesized else {
        return Cow::Borrowed(entries);
    };
    let at = s.at.saturating_sub(offset).min(entries.len());
    let mut out = Vec::with_capacity(entries.len() + 1);
    out.extend_from_slice(&entries[..at]);
    out.push(&s.entry);
    out.extend_from_slice(&entries[at..]);
    Cow::Owned(out)
}

/// pi's compactions over one replay: the settings, the latest boundary,
/// and the ones synthesized so far.
struct Compactions<'s> {
    settings: Option<&'s CompactionSettings>,
    boundary: Boundary,
    made: u64,
    work: SummarizerWork,
}

impl Compactions<'_> {
    /// The compaction pi makes before `branch[at]`, if it makes one there.
    fn make(
        &mut self,
        branch: &[&Entry],
        at: usize,
        tokens_before: u64,
        tokens: &dyn TokenCount,
    ) -> Option<Synthesized> {
        let settings = self.settings?;
        // pi compacts right after the entry before it (a run's reply, or the
        // tool results before a refused call).
        let timestamp = at
            .checked_sub(1)
            .and_then(|i| branch.get(i))
            .map(|e| e.timestamp.as_str())
            .unwrap_or_default();
        let s = compaction::synthesize(
            settings,
            &self.boundary,
            &Moment {
                branch,
                at,
                tokens_before,
                timestamp,
                serial: self.made as usize,
            },
            tokens,
        )?;
        self.boundary.first_kept = s.first_kept;
        self.boundary.previous_summary_chars = Some(s.summary_chars);
        self.boundary.marks.push(at);
        self.made += 1;
        self.work.input += s.work.input;
        self.work.output += s.work.output;
        Some(s)
    }

    /// pi's check after the run the call at `branch[call]` ended: the
    /// compaction it makes right after that run's entries (`since`: the
    /// entries recorded after the call). None where the recording itself
    /// compacted before the next call.
    fn after_run(
        &mut self,
        branch: &[&Entry],
        call: usize,
        usage: u64,
        since: &[&Entry],
        tokens: &dyn TokenCount,
    ) -> Option<Synthesized> {
        let settings = self.settings?;
        if !settings.over_threshold(usage) || !self.checks_after(branch, call, since) {
            return None;
        }
        self.make(branch, call + 1, usage, tokens)
    }

    /// Whether the call at `branch[call]` ended its run and pi checks
    /// for a compaction after it (`since`: the entries recorded after the
    /// call; none where the recording compacted there itself).
    fn checks_after(&self, branch: &[&Entry], call: usize, since: &[&Entry]) -> bool {
        self.settings.is_some()
            && ended_run(branch, call, since)
            && !since.iter().any(|e| e.kind == EntryType::Compaction)
    }

    /// The compaction pi makes after the run the call at `branch[call]`
    /// ended when pi's own check does not: the run's entries `run` (those
    /// the policy has not seen, through the call) go to the policy at the
    /// run's end, and pi compacts right after them when it asks to (pi's
    /// `ctx.compact` from an `agent_end` handler).
    fn on_request(
        &mut self,
        branch: &[&Entry],
        call: usize,
        run: &[&Entry],
        usage: u64,
        policy: &mut dyn PromptSource,
        tokens: &dyn TokenCount,
    ) -> Result<Option<Synthesized>, String> {
        if !policy.end_run(run, Some(usage))? {
            return Ok(None);
        }
        Ok(self.make(branch, call + 1, usage, tokens))
    }
}

/// Replays `branch` (root first) under `policy`, pricing with `profile`;
/// with `compaction`, pi compacts where it would (see
/// [`super::compaction`]); with `misses`, a call the cache would serve is
/// billed at what it costs given the provider's chance of missing it.
pub fn replay(
    branch: &[&Entry],
    policy: &mut dyn PromptSource,
    tokens: &dyn TokenCount,
    profile: &PriceProfile,
    compaction: Option<&CompactionSettings>,
    misses: Option<&MissRates>,
) -> Result<PolicyRun, String> {
    let mut context: Vec<Message> = Vec::new();
    // Entries not yet in `context`, and not yet shown to the policy.
    let mut unsynced = 0usize;
    let mut unseen = 0usize;
    let mut history = PromptHistory::default();
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
        providers: Vec::new(),
        compactions: 0,
        compaction_work: SummarizerWork::default(),
        reload: None,
    };
    let mut previous_usage: Option<u64> = None;
    let mut last_call: Option<usize> = None;
    let mut compactions = Compactions {
        settings: compaction,
        boundary: Boundary::default(),
        made: 0,
        work: SummarizerWork::default(),
    };

    for (i, entry) in branch.iter().enumerate() {
        if entry.kind == EntryType::Compaction {
            context = context_of(&branch[..=i]);
            unsynced = i + 1;
            compactions.boundary.recorded(branch, i);
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
        let mut compaction_work = compactions.work;
        let previous_usage_before = previous_usage;
        let mut after_run = match (last_call, previous_usage) {
            (Some(call), Some(usage)) => {
                compactions.after_run(branch, call, usage, &branch[call + 1..i], tokens)
            }
            _ => None,
        };
        let mut requested = false;
        if let (None, Some(call), Some(usage)) = (&after_run, last_call, previous_usage) {
            if compactions.checks_after(branch, call, &branch[call + 1..i]) {
                let run = &branch[unseen..=call];
                unseen = call + 1;
                after_run = compactions.on_request(branch, call, run, usage, policy, tokens)?;
                requested = after_run.is_some();
            }
        }
        if let Some(s) = &after_run {
            context.extend(context_of(&branch[unsynced..s.at]));
            context = compaction::context_after(branch, s);
            unsynced = s.at;
        }
        context.extend(context_of(&branch[unsynced..i]));
        unsynced = i;
        let at_ms = call_time(entry, message);
        let facts: AssistantFacts = serde_json::from_str(&message.json()).unwrap_or_default();
        let model = match (&facts.provider, &facts.model) {
            (Some(p), Some(m)) => Some(format!("{p}/{m}")),
            (None, Some(m)) => Some(m.clone()),
            _ => None,
        };
        let provider = provider_of(model.as_deref());
        if run.providers.last().is_none_or(|(_, p)| p != provider) {
            run.providers.push((run.calls.len(), provider.to_owned()));
        }
        let same_model = prev_model
            .as_ref()
            .is_some_and(|m| *m == (facts.provider.clone(), facts.model.clone()));
        let new_entries = with_compaction(&branch[unseen..i], unseen, after_run.as_ref());
        // pi sends the prompt; a provider refuses one longer than the
        // window, and pi compacts and sends the call again.
        let (kept, mut summarizer, refused, refused_size) = {
            let prompt = policy.prompt(&CallInput {
                at_ms,
                context: &context,
                new_entries: &new_entries,
                tokens,
                model: model.clone(),
                previous_usage,
            })?;
            let measured = history.measure(&prompt.messages, tokens);
            let size = history.total(&measured, tokens);
            let refused = compaction
                .filter(|c| c.overflows(size))
                .and_then(|_| compactions.make(branch, i, size, tokens));
            let kept = refused
                .is_none()
                .then(|| history.keep(&prompt.messages, measured, tokens));
            (kept, prompt.summarizer, refused, size)
        };
        unseen = i;
        let (prompt_tokens, shared_prefix, messages) = match (kept, &refused) {
            (Some(kept), _) => kept,
            (None, Some(s)) => {
                context = compaction::context_after(branch, s);
                let entries = [&s.entry];
                let prompt = policy.prompt(&CallInput {
                    at_ms,
                    context: &context,
                    new_entries: &entries,
                    tokens,
                    model,
                    previous_usage,
                })?;
                summarizer.input += prompt.summarizer.input;
                summarizer.output += prompt.summarizer.output;
                let measured = history.measure(&prompt.messages, tokens);
                history.keep(&prompt.messages, measured, tokens)
            }
            (None, None) => return Err("a refused prompt without a compaction".to_owned()),
        };
        compaction_work.input = compactions.work.input - compaction_work.input;
        compaction_work.output = compactions.work.output - compaction_work.output;
        let shared_prefix = if same_model { shared_prefix } else { 0 };
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
        let bill = match (misses, previous.and_then(|p| p.at_ms), at_ms) {
            (Some(rates), Some(before), Some(now)) if bill.cache_read > 0 => {
                let cold = bill_call(profile, None, call);
                MissRates::expected(&bill, &cold, rates.at(now.saturating_sub(before)))
            }
            _ => bill,
        };
        previous_usage = Some(prompt_tokens + output);
        run.totals.add_call(prompt_tokens, &bill);
        let before = run.totals.summarizer_units;
        run.totals
            .add_summarizer(profile, summarizer.input, summarizer.output);
        run.totals
            .add_compaction(profile, compaction_work.input, compaction_work.output);
        summarizer.input += compaction_work.input;
        summarizer.output += compaction_work.output;
        run.calls.push(SimCall {
            summarizer_units: run.totals.summarizer_units - before,
            at_ms,
            prompt: prompt_tokens,
            shared_prefix,
            messages,
            bill,
            summarizer,
            compaction: refused
                .as_ref()
                .map(|s| CompactionFacts::of("overflow", s, refused_size))
                .or_else(|| {
                    after_run
                        .as_ref()
                        .zip(previous_usage_before)
                        .map(|(s, usage)| {
                            let reason = if requested { "requested" } else { "threshold" };
                            CompactionFacts::of(reason, s, usage)
                        })
                }),
            recorded: facts.usage,
        });
        prev_model = Some((facts.provider, facts.model));
        previous = Some(PreviousCall { at_ms });
        last_call = Some(i);
    }
    let before = compactions.work;
    let mut after_last = match (last_call, previous_usage) {
        (Some(call), Some(usage)) => {
            compactions.after_run(branch, call, usage, &branch[call + 1..], tokens)
        }
        _ => None,
    };
    if let (None, Some(call), Some(usage)) = (&after_last, last_call, previous_usage) {
        if compactions.checks_after(branch, call, &branch[call + 1..]) {
            let run = &branch[unseen..=call];
            unseen = call + 1;
            after_last = compactions.on_request(branch, call, run, usage, policy, tokens)?;
        }
    }
    let trailing = with_compaction(&branch[unseen..], unseen, after_last.as_ref());
    let finish = policy.finish(&trailing, previous_usage)?;
    run.totals
        .add_summarizer(profile, finish.summarizer.input, finish.summarizer.output);
    run.totals.add_compaction(
        profile,
        compactions.work.input - before.input,
        compactions.work.output - before.output,
    );
    run.compactions = compactions.made;
    run.compaction_work = compactions.work;
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
