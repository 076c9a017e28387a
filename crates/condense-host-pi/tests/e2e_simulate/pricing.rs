//! The prompts the server received, counted with the simulator's token model
//! and priced call by call with core's `bill_call`.

use condense_core::{bill_call, BillTotals, CallTokens, PreviousCall, PriceProfile};
use condense_summarizer::Extractive;
use serde_json::Value;

pub use crate::support::fake_llm::measure::{conversation, fixed_part, js_len};
use crate::support::fake_llm::{message_text, RecordedRequest, RequestKind};
use crate::{MODEL, PER_CHAR};

/// Their tokens: the overhead `simulate` is told.
pub fn overhead_tokens(request: &RecordedRequest) -> u64 {
    MODEL.overhead_tokens(request)
}

/// A text's tokens as the simulator counts a summarizer prompt or answer.
pub fn text_tokens(text: &str) -> u64 {
    (PER_CHAR * js_len(text) as f64).max(0.0).round() as u64
}

/// What the summarizer was sent (its system and user texts) and answered:
/// the answer is the extractive summarizer's for the user text, as the
/// server's responder gave it.
pub fn summarizer_work(request: &RecordedRequest) -> (u64, u64) {
    let mut input = 0;
    let mut user = String::new();
    for m in request.messages() {
        let text = message_text(m);
        input += text_tokens(&text);
        if m["role"] == "user" {
            user.push_str(&text);
        }
    }
    (input, text_tokens(&Extractive::answer(&user)))
}

/// The received prompts priced call by call: the shared prefix is the
/// overhead plus the leading messages equal to the previous prompt's; the
/// summarizer's prompts at the profile's summarizer ratio, never cached.
pub fn price_received(
    requests: &[RecordedRequest],
    profile: &PriceProfile,
    overhead: u64,
) -> Received {
    let mut totals = BillTotals::default();
    let mut calls = Vec::new();
    for request in requests.iter().filter(|r| r.kind == RequestKind::Summary) {
        let (input, output) = summarizer_work(request);
        totals.add_summarizer(profile, input, output);
    }
    let requests: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Main)
        .collect();
    let mut previous: Option<(i64, Vec<&Value>)> = None;
    for request in requests {
        let messages = conversation(request);
        let tokens: Vec<u64> = messages.iter().map(|m| MODEL.message_tokens(m)).collect();
        let prompt = overhead + tokens.iter().sum::<u64>();
        let shared_prefix = previous.as_ref().map_or(0, |(_, before)| {
            let shared = before
                .iter()
                .zip(&messages)
                .take_while(|(a, b)| a == b)
                .count();
            overhead + tokens[..shared].iter().sum::<u64>()
        });
        let bill = bill_call(
            profile,
            previous
                .as_ref()
                .map(|(at, _)| PreviousCall { at_ms: Some(*at) }),
            CallTokens {
                at_ms: Some(request.received_ms),
                prompt,
                shared_prefix,
                output: 0,
            },
        );
        totals.add_call(prompt, &bill);
        calls.push(ReceivedCall {
            prompt,
            shared_prefix,
            messages: messages
                .iter()
                .zip(&tokens)
                .map(|(m, t)| format!("{} {t}", m["role"].as_str().unwrap_or("?")))
                .collect(),
        });
        previous = Some((request.received_ms, messages));
    }
    Received { totals, calls }
}

/// One received prompt: its tokens, the prefix shared with the previous
/// one, and each message's role and tokens (for a mismatch's report).
pub struct ReceivedCall {
    pub prompt: u64,
    pub shared_prefix: u64,
    pub messages: Vec<String>,
}

/// The received prompts, priced.
pub struct Received {
    pub totals: BillTotals,
    pub calls: Vec<ReceivedCall>,
}
