//! The pruning state: what has been indexed, under which refs, which chains
//! are compressed, and where the last flush stopped.
//!
//! Everything here is rebuilt by folding a branch's entries (see
//! `condense-store`'s replay) and extended by flushes. Lookups that run on
//! every render take borrowed ids, so rendering allocates no keys.
//!
//! Identity rules (pi-condense ≥ 2.6):
//! - a record is keyed by its [`OccurrenceKey`] `id@resultTimestamp`, or by the
//!   bare id for legacy records;
//! - [`State::is_summarized`] is strict: an exact key in the index or a dedup
//!   alias, nothing else;
//! - the legacy bare fallback applies only when the bare id has an indexed
//!   bare record and no indexed occurrence siblings (fail closed);
//! - [`State::resolve`] tries exact key → dedup alias → short ref → a bare id
//!   with exactly one occurrence.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::chains_memo::ChainsMemo;
use crate::fxhash::FxHashMap;
use crate::message::Message;
use crate::metrics_memo::MetricsMemo;
use crate::render::chain_memo::ChainMemo;
use crate::render::purge_memo::PurgeMemo;
use crate::render::render_memo::RenderMemo;

use crate::occurrence::{split_occurrence, OccurrenceKey};
use crate::records::{ChainEntry, Frontier, SummarizerStats, SummaryRef, ToolCallRecord};

/// A record's content hash: the persisted one, else computed.
fn record_hash(r: &ToolCallRecord) -> String {
    r.content_hash
        .clone()
        .unwrap_or_else(|| crate::dedup::content_hash(&r.tool_name, &r.result_text.to_str()))
}

/// Per-occurrence facts, grouped under the bare id.
#[derive(Debug, Clone, Default)]
struct Occurrence {
    ts: Option<i64>,
    record: Option<usize>,
    alias_of: Option<OccurrenceKey>,
    short_ref: Option<String>,
    summary_bodies: Vec<usize>,
    stub: StubCell,
    /// The number of switches recorded when this occurrence was first
    /// summarized (indexed or aliased): it is shown once a later switch
    /// exists (under the cache-aware policy).
    since: Option<u64>,
    /// The number of switches recorded when its own record was first
    /// indexed: later than `since` for a dedup alias an uncovered chain
    /// backfilled, whose stub shows the alias until a switch shows the record.
    record_since: Option<u64>,
}

/// The last stub rendered for an occurrence, tagged with the state
/// generation and protection fingerprint it was built under. Renders run
/// before every LLM call with the same state, so rebuilding ~1,000 identical
/// stubs each time is the main cost of a render; this makes a repeat render
/// a lookup. A cell is only ever a cache: a miss just builds the stub.
#[derive(Debug, Default)]
pub(crate) struct StubCell(Mutex<Option<CachedStub>>);

#[derive(Debug, Clone)]
pub(crate) struct CachedStub {
    pub(crate) generation: u64,
    pub(crate) protection: u64,
    /// `None`: the record is protected, the result stays verbatim.
    pub(crate) stub: Option<Message>,
}

impl Clone for StubCell {
    fn clone(&self) -> Self {
        StubCell::default()
    }
}

impl StubCell {
    pub(crate) fn get(&self, generation: u64, protection: u64) -> Option<Option<Message>> {
        let guard = self.0.lock().ok()?;
        let c = guard.as_ref()?;
        (c.generation == generation && c.protection == protection).then(|| c.stub.clone())
    }

    pub(crate) fn set(&self, value: CachedStub) {
        if let Ok(mut guard) = self.0.lock() {
            *guard = Some(value);
        }
    }
}

/// What the stub phase needs to know about a tool result's occurrence, found
/// with one lookup.
pub(crate) struct StubTarget<'a> {
    /// The record behind it (its own, or its dedup original's).
    pub(crate) record: Option<&'a ToolCallRecord>,
    /// Its short ref.
    pub(crate) short_ref: Option<&'a str>,
    /// The cache cell (exact occurrences only).
    pub(crate) cell: Option<&'a StubCell>,
    /// The switch count when the occurrence was first summarized.
    pub(crate) since: Option<u64>,
    /// A dedup alias that later got a record of its own (an uncovered
    /// chain's backfill, with a ref of its own): the switch count when that
    /// record was indexed, and the alias's view (the original's record and
    /// ref), which a stub shows until a switch shows the record.
    pub(crate) aliased_before: Option<AliasView<'a>>,
}

/// What a dedup alias's stub showed before the occurrence was indexed itself.
pub(crate) struct AliasView<'a> {
    /// The switch count when the occurrence's own record was indexed.
    pub(crate) record_since: Option<u64>,
    /// The original's record.
    pub(crate) record: Option<&'a ToolCallRecord>,
    /// The original's short ref.
    pub(crate) short_ref: Option<&'a str>,
}

/// A per-batch summary body and the occurrences it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryBody {
    /// The occurrences the summary covers.
    pub keys: Vec<OccurrenceKey>,
    /// The summary's markdown text (with its refs footer).
    pub text: String,
}

/// The pruning state of one branch.
#[derive(Debug, Clone, Default)]
pub struct State {
    records: Vec<ToolCallRecord>,
    by_id: FxHashMap<String, Vec<Occurrence>>,
    generation: u64,
    /// Increases with `generation` on every change but a switch.
    content_generation: u64,
    chain_memo: ChainMemo,
    purge_memo: PurgeMemo,
    metrics_memo: MetricsMemo,
    render_memo: RenderMemo,
    chains_memo: ChainsMemo,
    short_refs: HashMap<String, OccurrenceKey>,
    next_short_ref: u64,
    /// Records that seed dedup, in indexing order; hashed on first lookup
    /// (a reload that never flushes never pays for SHA-1 over every output).
    dedup_seeds: Vec<usize>,
    content_hashes: OnceLock<FxHashMap<String, OccurrenceKey>>,
    summary_bodies: Vec<SummaryBody>,
    chains: BTreeMap<i64, ChainEntry>,
    /// Per chain start: the switch count when it was first compressed.
    chain_since: BTreeMap<i64, u64>,
    next_block: u64,
    /// Switch entries recorded on the branch so far.
    switches: u64,
    /// The number of messages the context held at the last switch.
    purge_horizon: Option<usize>,
    /// The last attempted prune boundary.
    frontier: Option<Frontier>,
    /// Cumulative summarizer usage.
    stats: SummarizerStats,
}

impl State {
    /// An empty state.
    pub fn new() -> Self {
        State {
            next_short_ref: 1,
            next_block: 1,
            ..State::default()
        }
    }

    // ---- switches (the cache-aware display policy) ---------------------------

    /// Records a switch (`context-prune-switch`): everything summarized,
    /// aliased or compressed so far is shown from now on under the
    /// cache-aware policy, and failed calls among the first `messages`
    /// messages of the context may have their arguments purged.
    pub fn record_switch(&mut self, messages: usize) {
        self.render_memo.carry(self.generation, self.generation + 1);
        // What is shown changes, not what the state holds.
        self.generation += 1;
        self.switches += 1;
        self.purge_horizon = Some(messages);
    }

    /// Switch entries recorded so far.
    pub fn switch_count(&self) -> u64 {
        self.switches
    }

    /// The number of messages the context held at the last switch.
    pub fn purge_horizon(&self) -> Option<usize> {
        self.purge_horizon
    }

    /// Occurrences and chains added since the last switch: what the next
    /// switch would show under the cache-aware policy.
    pub fn pending_count(&self) -> usize {
        let occurrences = self
            .by_id
            .values()
            .flat_map(|v| v.iter())
            .filter(|o| o.since.is_some_and(|s| s >= self.switches))
            .count();
        let chains = self
            .chain_since
            .values()
            .filter(|s| **s >= self.switches)
            .count();
        occurrences + chains
    }

    /// The switch count when the chain starting at this timestamp was first
    /// compressed.
    pub(crate) fn chain_since(&self, start_user_timestamp: i64) -> Option<u64> {
        self.chain_since.get(&start_user_timestamp).copied()
    }

    // ---- frontier and stats --------------------------------------------------

    /// The last attempted prune boundary, if a flush ever attempted one.
    pub fn frontier(&self) -> Option<&Frontier> {
        self.frontier.as_ref()
    }

    /// Records the last attempted prune boundary (replacing the previous one).
    pub fn set_frontier(&mut self, frontier: Frontier) {
        self.frontier = Some(frontier);
    }

    /// Cumulative summarizer usage.
    pub fn stats(&self) -> &SummarizerStats {
        &self.stats
    }

    /// Replaces the cumulative summarizer usage (with a persisted snapshot).
    pub fn set_stats(&mut self, stats: SummarizerStats) {
        self.stats = stats;
    }

    /// The cumulative usage, for a flush to add its calls to.
    pub(crate) fn stats_mut(&mut self) -> &mut SummarizerStats {
        &mut self.stats
    }

    fn occurrence(&self, id: &str, ts: Option<i64>) -> Option<&Occurrence> {
        self.by_id.get(id)?.iter().find(|o| o.ts == ts)
    }

    fn occurrence_mut(&mut self, key: &OccurrenceKey) -> &mut Occurrence {
        self.changed();
        // Looked up before inserting so a known id is not copied again.
        if !self.by_id.contains_key(key.id.as_str()) {
            self.by_id.insert(key.id.clone(), Vec::new());
        }
        let list = self.by_id.get_mut(key.id.as_str()).expect("inserted above");
        let pos = match list.iter().position(|o| o.ts == key.result_timestamp) {
            Some(p) => p,
            None => {
                // Nearly every id has one occurrence: grow one at a time
                // rather than to `Vec`'s first capacity of four.
                list.reserve_exact(1);
                list.push(Occurrence {
                    ts: key.result_timestamp,
                    ..Occurrence::default()
                });
                list.len() - 1
            }
        };
        &mut list[pos]
    }

    // ---- records ------------------------------------------------------------

    /// Indexes a record (a later record with the same key replaces the earlier
    /// one, as a map would). `seed_dedup` makes it a dedup canonical when no
    /// record with the same content hash is known yet (backfilled records never
    /// are). Returns the record's key.
    pub fn add_record(&mut self, record: ToolCallRecord, seed_dedup: bool) -> OccurrenceKey {
        let key = record.key();
        let idx = self.records.len();
        if seed_dedup {
            match self.content_hashes.get_mut() {
                // Already hashed: keep it current (first seen still wins).
                Some(map) => {
                    map.entry(record_hash(&record))
                        .or_insert_with(|| key.clone());
                }
                None => self.dedup_seeds.push(idx),
            }
        }
        self.records.push(record);
        let switches = self.switches;
        let occ = self.occurrence_mut(&key);
        occ.record = Some(idx);
        occ.since.get_or_insert(switches);
        occ.record_since.get_or_insert(switches);
        key
    }

    /// Every indexed record, in indexing order (replaced ones included).
    pub fn records(&self) -> &[ToolCallRecord] {
        &self.records
    }

    /// Number of distinct indexed occurrences.
    pub fn indexed_count(&self) -> usize {
        self.by_id
            .values()
            .flat_map(|v| v.iter())
            .filter(|o| o.record.is_some())
            .count()
    }

    /// The record stored under exactly this key.
    pub fn record_exact(&self, id: &str, ts: Option<i64>) -> Option<&ToolCallRecord> {
        self.occurrence(id, ts)?.record.map(|i| &self.records[i])
    }

    /// True if exactly this occurrence is indexed or a dedup alias.
    pub fn is_summarized(&self, id: &str, ts: Option<i64>) -> bool {
        self.occurrence(id, ts)
            .is_some_and(|o| o.record.is_some() || o.alias_of.is_some())
    }

    /// True if the bare id has an indexed legacy record and no indexed
    /// occurrence siblings.
    pub fn has_legacy_bare_record(&self, id: &str) -> bool {
        let Some(list) = self.by_id.get(id) else {
            return false;
        };
        let bare = list.iter().any(|o| o.ts.is_none() && o.record.is_some());
        let siblings = list.iter().any(|o| o.ts.is_some() && o.record.is_some());
        bare && !siblings
    }

    /// The key a tool result at (`id`, `ts`) is stubbed under, if any: its
    /// exact occurrence when summarized, else the legacy bare record.
    pub fn lookup_key_for_result(&self, id: &str, ts: Option<i64>) -> Option<Option<i64>> {
        if self.is_summarized(id, ts) {
            Some(ts)
        } else if self.has_legacy_bare_record(id) {
            Some(None)
        } else {
            None
        }
    }

    /// The record behind an occurrence: its own, or its dedup original's.
    pub fn record_for(&self, id: &str, ts: Option<i64>) -> Option<&ToolCallRecord> {
        let occ = self.occurrence(id, ts)?;
        if let Some(i) = occ.record {
            return Some(&self.records[i]);
        }
        let orig = occ.alias_of.as_ref()?;
        self.record_exact(&orig.id, orig.result_timestamp)
    }

    /// One lookup for the stub phase: the key a result at (`id`, `ts`) is
    /// stubbed under, with its record, short ref and cache cell.
    pub(crate) fn stub_target(&self, id: &str, ts: Option<i64>) -> Option<StubTarget<'_>> {
        let list = self.by_id.get(id)?;
        let exact = list
            .iter()
            .find(|o| o.ts == ts && (o.record.is_some() || o.alias_of.is_some()));
        let (occ, cell) = match exact {
            Some(o) => (o, Some(&o.stub)),
            None => {
                let bare = list.iter().find(|o| o.ts.is_none() && o.record.is_some())?;
                if list.iter().any(|o| o.ts.is_some() && o.record.is_some()) {
                    return None;
                }
                (bare, None)
            }
        };
        let record = match (occ.record, &occ.alias_of) {
            (Some(i), _) => Some(&self.records[i]),
            (None, Some(orig)) => self.record_exact(&orig.id, orig.result_timestamp),
            (None, None) => None,
        };
        let aliased_before = match (occ.record, &occ.alias_of) {
            (Some(_), Some(orig)) => {
                let original = self.occurrence(&orig.id, orig.result_timestamp);
                Some(AliasView {
                    record_since: occ.record_since,
                    record: self.record_exact(&orig.id, orig.result_timestamp),
                    short_ref: original.and_then(|o| o.short_ref.as_deref()),
                })
            }
            _ => None,
        };
        Some(StubTarget {
            record,
            short_ref: occ.short_ref.as_deref(),
            cell,
            since: occ.since,
            aliased_before,
        })
    }

    /// The chain phase's memo.
    pub(crate) fn chain_memo(&self) -> &ChainMemo {
        &self.chain_memo
    }

    /// The error purge's memo.
    pub(crate) fn purge_memo(&self) -> &PurgeMemo {
        &self.purge_memo
    }

    /// Chain detection's memo.
    pub(crate) fn chains_memo(&self) -> &ChainsMemo {
        &self.chains_memo
    }

    /// The last render.
    pub(crate) fn render_memo(&self) -> &RenderMemo {
        &self.render_memo
    }

    /// The context metrics' memo.
    pub(crate) fn metrics_memo(&self) -> &MetricsMemo {
        &self.metrics_memo
    }

    /// Increases on every change that can alter a render.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Increases on every change but a switch: what the state holds, as
    /// opposed to what it shows (a chain's text depends on this alone).
    pub(crate) fn content_generation(&self) -> u64 {
        self.content_generation
    }

    fn changed(&mut self) {
        self.generation += 1;
        self.content_generation += 1;
    }

    /// The short ref registered for an occurrence.
    pub fn short_ref(&self, id: &str, ts: Option<i64>) -> Option<&str> {
        self.occurrence(id, ts)?.short_ref.as_deref()
    }

    /// Resolves a query id (occurrence key text, dedup alias, short ref, or a
    /// bare id with exactly one occurrence) to the key of its record.
    pub fn resolve(&self, text: &str) -> Option<OccurrenceKey> {
        let key = OccurrenceKey::parse(text);
        if let Some(occ) = self.occurrence(&key.id, key.result_timestamp) {
            if occ.record.is_some() {
                return Some(key);
            }
            if let Some(orig) = &occ.alias_of {
                return Some(orig.clone());
            }
        }
        if let Some(target) = self.short_refs.get(text) {
            return Some(self.canonical(target));
        }
        if key.result_timestamp.is_none() {
            let list = self.by_id.get(text)?;
            let mut found = list.iter().filter(|o| o.ts.is_some() && o.record.is_some());
            if let (Some(only), None) = (found.next(), found.next()) {
                return Some(OccurrenceKey::new(text, only.ts));
            }
        }
        None
    }

    /// Follows a dedup alias to its original.
    fn canonical(&self, key: &OccurrenceKey) -> OccurrenceKey {
        match self.occurrence(&key.id, key.result_timestamp) {
            Some(o) if o.record.is_none() => o.alias_of.clone().unwrap_or_else(|| key.clone()),
            _ => key.clone(),
        }
    }

    /// Every record a query id names. A bare id with several occurrences
    /// (dedup-alias occurrences included, each labelled with its own result
    /// timestamp) expands to all of them, oldest first; otherwise a single
    /// [`resolve`](Self::resolve) result.
    pub fn records_for_query(&self, text: &str) -> Vec<ToolCallRecord> {
        if split_occurrence(text).is_none() && !self.short_refs.contains_key(text) {
            if let Some(list) = self.by_id.get(text) {
                let mut out: Vec<ToolCallRecord> = list
                    .iter()
                    .filter_map(|o| {
                        if let Some(i) = o.record {
                            return Some(self.records[i].clone());
                        }
                        let orig = o.alias_of.as_ref()?;
                        let mut r = self.record_exact(&orig.id, orig.result_timestamp)?.clone();
                        r.tool_call_id = text.to_owned();
                        r.result_timestamp = o.ts;
                        Some(r)
                    })
                    .collect();
                if out.len() > 1 {
                    out.sort_by_key(|r| r.result_timestamp.unwrap_or(r.timestamp));
                    return out;
                }
            }
        }
        self.resolve(text)
            .and_then(|k| self.record_exact(&k.id, k.result_timestamp).cloned())
            .into_iter()
            .collect()
    }

    // ---- refs ---------------------------------------------------------------

    /// Registers short refs read from a summary (or allocated by a flush).
    /// A ref whose short id equals its tool-call id (legacy) registers no alias.
    pub fn register_summary_refs(&mut self, refs: &[SummaryRef]) {
        for r in refs {
            if r.short_id.is_empty() || r.tool_call_id.is_empty() {
                continue;
            }
            if r.short_id != r.tool_call_id {
                let key = r.key();
                self.short_refs.insert(r.short_id.clone(), key.clone());
                self.occurrence_mut(&key).short_ref = Some(r.short_id.clone());
            }
            if let Some(n) = r.short_id.strip_prefix('t').and_then(|d| {
                (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| d.parse::<u64>().ok())
                    .flatten()
            }) {
                self.next_short_ref = self.next_short_ref.max(n + 1);
            }
        }
    }

    /// Allocates the next `count` short refs (`t<N>`, monotonic) for keys, in order.
    pub fn allocate_short_refs(&mut self, keys: &[OccurrenceKey]) -> Vec<SummaryRef> {
        keys.iter()
            .map(|k| {
                let n = self.next_short_ref;
                self.next_short_ref += 1;
                SummaryRef {
                    short_id: format!("t{n}"),
                    tool_call_id: k.id.clone(),
                    result_timestamp: k.result_timestamp,
                }
            })
            .collect()
    }

    /// The number the next short ref will carry.
    pub fn next_short_ref(&self) -> u64 {
        self.next_short_ref
    }

    /// Registers `new` as a duplicate of `original`: it is summarized, resolves
    /// to the original's record and reuses the original's short ref.
    pub fn register_dedup_alias(&mut self, new: &OccurrenceKey, original: &OccurrenceKey) {
        let switches = self.switches;
        self.register_dedup_alias_since(new, original, switches);
    }

    /// [`register_dedup_alias`](Self::register_dedup_alias) for an alias
    /// persisted when `since` switches had been recorded (replay applies
    /// aliases after the walk, but each is shown by its own position).
    pub(crate) fn register_dedup_alias_since(
        &mut self,
        new: &OccurrenceKey,
        original: &OccurrenceKey,
        since: u64,
    ) {
        if new == original {
            return;
        }
        let short = self
            .occurrence(&original.id, original.result_timestamp)
            .and_then(|o| o.short_ref.clone());
        let occ = self.occurrence_mut(new);
        // Replay applies aliases after its walk, so an index record of the
        // same occurrence written *after* the alias (a later flush indexing
        // it) is already there: live, that record came second and set the
        // short ref, and the alias's earlier position decided when it was
        // shown. So the earliest position wins, and a record's own short ref
        // stays. (Live, an occurrence with a record is never aliased after.)
        occ.since = Some(occ.since.map_or(since, |s| s.min(since)));
        let own_record = occ.record.is_some();
        occ.alias_of = Some(original.clone());
        if let Some(s) = short.filter(|_| !own_record) {
            occ.short_ref = Some(s);
        }
    }

    /// The dedup original of an occurrence, if it is an alias.
    pub fn dedup_original(&self, id: &str, ts: Option<i64>) -> Option<&OccurrenceKey> {
        self.occurrence(id, ts)?.alias_of.as_ref()
    }

    /// The canonical record key for identical content, if an earlier flush
    /// indexed it.
    pub fn lookup_by_hash(&self, hash: &str) -> Option<&OccurrenceKey> {
        self.content_hashes
            .get_or_init(|| {
                let mut map = FxHashMap::default();
                for &i in &self.dedup_seeds {
                    let r = &self.records[i];
                    map.entry(record_hash(r)).or_insert_with(|| r.key());
                }
                map
            })
            .get(hash)
    }

    // ---- summaries ----------------------------------------------------------

    /// Stores a per-batch summary body keyed by the occurrences it covers.
    pub fn register_summary_body(&mut self, keys: Vec<OccurrenceKey>, text: String) {
        self.changed();
        if text.is_empty() || keys.is_empty() {
            return;
        }
        let idx = self.summary_bodies.len();
        for k in &keys {
            let occ = self.occurrence_mut(k);
            if occ.summary_bodies.last() != Some(&idx) {
                occ.summary_bodies.push(idx);
            }
        }
        self.summary_bodies.push(SummaryBody { keys, text });
    }

    /// Every summary body, in registration order.
    pub fn summary_bodies(&self) -> &[SummaryBody] {
        &self.summary_bodies
    }

    /// The distinct per-batch summary texts covering any of `keys` (key texts,
    /// matched exactly), in registration order.
    pub fn summaries_covering<'a, I>(&self, keys: I) -> Vec<&str>
    where
        I: IntoIterator<Item = &'a str>,
    {
        let mut idxs: Vec<usize> = Vec::new();
        for text in keys {
            let k = OccurrenceKey::parse(text);
            if let Some(o) = self.occurrence(&k.id, k.result_timestamp) {
                idxs.extend_from_slice(&o.summary_bodies);
            }
        }
        idxs.sort_unstable();
        idxs.dedup();
        let mut seen = HashSet::new();
        idxs.into_iter()
            .map(|i| self.summary_bodies[i].text.as_str())
            .filter(|t| seen.insert(*t))
            .collect()
    }

    // ---- chains -------------------------------------------------------------

    /// Registers a compressed chain (keyed by its start timestamp; last wins).
    pub fn register_chain(&mut self, entry: ChainEntry) {
        self.changed();
        if let Some(n) = entry
            .block_id
            .strip_prefix('b')
            .and_then(|d| d.parse::<u64>().ok())
        {
            self.next_block = self.next_block.max(n + 1);
        }
        self.chain_since
            .entry(entry.start_user_timestamp)
            .or_insert(self.switches);
        self.chains.insert(entry.start_user_timestamp, entry);
    }

    /// Compressed chains sorted by start timestamp.
    pub fn chains(&self) -> impl ExactSizeIterator<Item = &ChainEntry> {
        self.chains.values()
    }

    /// The chain entry with a block id.
    pub fn chain_by_block(&self, block_id: &str) -> Option<&ChainEntry> {
        self.chains.values().find(|c| c.block_id == block_id)
    }

    /// True if a chain starting at this user timestamp is compressed.
    pub fn is_chain_compressed(&self, start_user_timestamp: i64) -> bool {
        self.chains.contains_key(&start_user_timestamp)
    }

    /// Allocates the next block id (`b<N>`).
    pub fn allocate_block_id(&mut self) -> String {
        let n = self.next_block;
        self.next_block += 1;
        format!("b{n}")
    }

    /// The text a compressed chain renders as: its range summary, else the
    /// distinct per-batch summaries of its dropped occurrences joined by a
    /// blank line.
    pub fn chain_body(&self, entry: &ChainEntry) -> String {
        if let Some(t) = &entry.range_summary_text {
            return t.clone();
        }
        let keys: Vec<&str> = match &entry.dropped_occurrence_keys {
            Some(k) => k.iter().map(String::as_str).collect(),
            None => entry
                .dropped_tool_call_ids
                .iter()
                .map(String::as_str)
                .collect(),
        };
        self.summaries_covering(keys).join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: &str, ts: Option<i64>, text: &str) -> ToolCallRecord {
        serde_json::from_value(json!({
            "toolCallId": id, "toolName": "bash", "args": {}, "resultText": text,
            "isError": false, "turnIndex": 0, "timestamp": 1000,
            "resultTimestamp": ts,
        }))
        .unwrap()
    }

    fn sref(short: &str, id: &str, ts: Option<i64>) -> SummaryRef {
        SummaryRef {
            short_id: short.into(),
            tool_call_id: id.into(),
            result_timestamp: ts,
        }
    }

    #[test]
    fn occurrences_of_a_reused_id_stay_apart() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "FIRST"), true);
        s.add_record(rec("bash_23", Some(2150), "SECOND"), true);
        assert!(s.is_summarized("bash_23", Some(1150)));
        assert!(!s.is_summarized("bash_23", Some(3150)));
        assert!(!s.is_summarized("bash_23", None));
        assert_eq!(s.resolve("bash_23"), None, "ambiguous bare id");
        let all = s.records_for_query("bash_23");
        assert_eq!(
            all.iter()
                .map(|r| r.result_text.to_str())
                .collect::<Vec<_>>(),
            ["FIRST", "SECOND"]
        );
    }

    #[test]
    fn single_occurrence_resolves_from_bare_id_but_is_not_summarized_by_it() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "FIRST"), true);
        assert!(!s.is_summarized("bash_23", None));
        assert_eq!(s.resolve("bash_23").unwrap().to_string(), "bash_23@1150");
    }

    #[test]
    fn legacy_bare_fallback_fails_closed_when_mixed() {
        let mut s = State::new();
        s.add_record(rec("b1", None, "OLD"), true);
        assert!(s.has_legacy_bare_record("b1"));
        s.add_record(rec("b3", None, "OLD"), true);
        s.add_record(rec("b3", Some(2150), "NEW"), true);
        assert!(!s.has_legacy_bare_record("b3"));
        s.add_record(rec("b2", Some(1), "NEW"), true);
        assert!(!s.has_legacy_bare_record("b2"));
    }

    #[test]
    fn short_refs_and_dedup_aliases() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "SAME"), true);
        s.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        s.register_dedup_alias(
            &OccurrenceKey::parse("bash_99@4150"),
            &OccurrenceKey::parse("bash_23@1150"),
        );
        assert!(s.is_summarized("bash_99", Some(4150)));
        assert_eq!(s.short_ref("bash_99", Some(4150)), Some("t1"));
        assert_eq!(s.resolve("t1").unwrap().to_string(), "bash_23@1150");
        assert_eq!(
            s.resolve("bash_99@4150").unwrap().to_string(),
            "bash_23@1150"
        );
        assert_eq!(s.next_short_ref(), 2);
        let refs = s.allocate_short_refs(&[OccurrenceKey::parse("x@1")]);
        assert_eq!(refs[0].short_id, "t2");
    }

    /// Live: an output is aliased to an earlier one (at capture), a switch
    /// shows it, and a later flush indexes the same occurrence with a short
    /// ref of its own. Replay applies the alias after its walk, so it sees
    /// the record first: the alias's earlier position and the record's ref
    /// must still win, or a reload renders a pending output and another ref.
    #[test]
    fn an_alias_replayed_after_a_later_record_of_its_occurrence_keeps_the_live_order() {
        let new = OccurrenceKey::parse("bash_99@4150");
        let original = OccurrenceKey::parse("bash_23@1150");
        let mut live = State::new();
        live.add_record(rec("bash_23", Some(1150), "SAME"), true);
        live.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        live.register_dedup_alias(&new, &original);
        live.record_switch(10);
        live.add_record(rec("bash_99", Some(4150), "SAME"), true);
        live.register_summary_refs(&[sref("t2", "bash_99", Some(4150))]);
        live.record_switch(20);

        let mut replay = State::new();
        replay.add_record(rec("bash_23", Some(1150), "SAME"), true);
        replay.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        replay.record_switch(10);
        replay.add_record(rec("bash_99", Some(4150), "SAME"), true);
        replay.register_summary_refs(&[sref("t2", "bash_99", Some(4150))]);
        replay.record_switch(20);
        // The alias entry sat before the first switch.
        replay.register_dedup_alias_since(&new, &original, 0);

        for s in [&live, &replay] {
            let target = s.stub_target("bash_99", Some(4150)).unwrap();
            assert_eq!(target.since, Some(0));
            assert_eq!(target.short_ref, Some("t2"));
        }
    }

    #[test]
    fn alias_occurrence_of_same_bare_id_is_listed_with_its_own_timestamp() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "SAME"), true);
        s.register_dedup_alias(
            &OccurrenceKey::parse("bash_23@9150"),
            &OccurrenceKey::parse("bash_23@1150"),
        );
        let all = s.records_for_query("bash_23");
        assert_eq!(
            all.iter().map(|r| r.result_timestamp).collect::<Vec<_>>(),
            [Some(1150), Some(9150)]
        );
    }

    #[test]
    fn summary_bodies_are_occurrence_keyed_and_distinct() {
        let mut s = State::new();
        s.register_summary_body(vec![OccurrenceKey::parse("a@1")], "S1".into());
        s.register_summary_body(
            vec![OccurrenceKey::parse("b@2"), OccurrenceKey::parse("c@3")],
            "S2".into(),
        );
        s.register_summary_body(vec![OccurrenceKey::parse("c@3")], "S1".into());
        assert_eq!(s.summaries_covering(["a@1", "c@3"]), ["S1", "S2"]);
        assert!(s.summaries_covering(["a@9"]).is_empty());
        assert!(s.summaries_covering(["a"]).is_empty());
    }

    #[test]
    fn block_ids_continue_after_the_highest() {
        let mut s = State::new();
        let chain: ChainEntry = serde_json::from_value(json!({
            "blockId": "b7", "startUserTimestamp": 1, "droppedToolCallIds": [],
            "finalAssistantTimestamp": 2, "toolRefs": [], "compressedAt": 3
        }))
        .unwrap();
        s.register_chain(chain);
        assert_eq!(s.allocate_block_id(), "b8");
    }
}
