//! The economics of a session's LLM calls: what prompt caching bills.
//!
//! Pure arithmetic over token counts and timestamps the caller supplies:
//! [`price`] holds the named price profiles, [`bill`] prices one call given
//! the prefix it shares with the previous call's prompt, and the time since
//! that call. Counting tokens and deciding what each prompt holds are the
//! caller's (the simulator's) business.

mod bill;
mod price;

pub use bill::{bill_call, BillTotals, CallBill, CallTokens, PreviousCall};
pub use price::{CacheTerms, PriceProfile, ProfileError, ProfileOverrides, PROFILE_NAMES};
