//! The economics of a session's LLM calls: what prompt caching bills.
//!
//! Pure arithmetic over token counts and timestamps the caller supplies:
//! [`price`] holds the named price profiles, [`bill`] prices one call given
//! the prefix it shares with the previous call's prompt, and the time since
//! that call. Counting tokens and deciding what each prompt holds are the
//! caller's (the simulator's) business. [`recorded`] prices what a session
//! recorded instead (pi's `usage` per call). [`misses`] is a miss model: how
//! often the provider drops a cached prefix before its TTL. [`bound`] keeps
//! the cache-aware policy's promise that pruning never bills more than not
//! pruning.
//!
//! Nothing here reads the configuration, so the configuration can name
//! price profiles; adding a session's calls up under the configured policy
//! is the `ledger` module's.

mod bill;
mod bound;
mod misses;
mod price;
mod recorded;

pub use bill::{bill_call, BillTotals, CallBill, CallTokens, PreviousCall};
pub use bound::{prompt_units, NoPruningBound, PromptShape};
pub use misses::{gap_bucket, MissCounts, MissRates, GAP_EDGES_S};
pub use price::{
    CacheTerms, PriceProfile, ProfileError, ProfileOverrides, MAX_OVERRIDE, PROFILE_NAMES,
};
pub use recorded::{recorded_bill, RecordedUsage, MAX_RECORDED_TOKENS};
