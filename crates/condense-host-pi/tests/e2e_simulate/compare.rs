//! The comparison: the preconditions of the run, then the simulator's
//! billing against the received prompts priced, call by call and in total.

use condense_core::PriceProfile;
use serde_json::Value;

use crate::pricing::{fixed_part, Received};
use crate::support::fake_llm::RecordedRequest;
use crate::{COLD_AFTER_MS, TTL_S, WARM_WITHIN_MS};

/// The preconditions the comparison rests on: one fixed part for every
/// call, and no gap near the TTL. Returns the number of cold calls after
/// the first.
pub fn check_the_run(requests: &[RecordedRequest]) -> usize {
    let first = fixed_part(&requests[0]);
    for r in requests {
        assert_eq!(
            fixed_part(r),
            first,
            "the system prompt or tools changed between calls"
        );
    }
    let mut cold = 0;
    for pair in requests.windows(2) {
        let gap = pair[1].received_ms - pair[0].received_ms;
        assert!(
            gap <= WARM_WITHIN_MS || gap >= COLD_AFTER_MS,
            "a gap of {gap} ms is too close to the {TTL_S} s TTL to compare"
        );
        cold += usize::from(gap >= COLD_AFTER_MS);
    }
    cold
}

/// Asserts the simulator's billing of `policy` equals the received prompts
/// priced the same way. Token counts are integers computed the same way on
/// both sides and must be equal; units are sums of the same products in the
/// same order, compared to 1e-6.
pub fn assert_agrees(policy: &str, simulated: &Value, received: &Received, profile: &PriceProfile) {
    eprintln!(
        "{policy}: simulated prompt {} (read {}, written {}), summarizer {} in / {} out, billed input {}; received prompt {} (read {}, written {}), summarizer {} in / {} out, billed input {:.1}",
        simulated["prompt_tokens"],
        simulated["cache_read_tokens"],
        simulated["cache_write_tokens"],
        simulated["summarizer_input_tokens"],
        simulated["summarizer_output_tokens"],
        simulated["billed_input_units"],
        received.totals.prompt_tokens,
        received.totals.cache_read,
        received.totals.cache_write,
        received.totals.summarizer_input,
        received.totals.summarizer_output,
        received.totals.billed_input_units(profile),
    );
    // Call by call first, so a mismatch names the call and what it held.
    let detail = simulated["calls_detail"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, (sim, got)) in detail.iter().zip(&received.calls).enumerate() {
        let pair = |v: &Value| {
            (
                v["prompt_tokens"].as_u64(),
                v["shared_prefix_tokens"].as_u64(),
            )
        };
        assert_eq!(
            pair(sim),
            (Some(got.prompt), Some(got.shared_prefix)),
            "{policy}: call {i}: simulated (left) vs received (right) prompt and shared prefix; \
             simulated {} messages, received (role tokens): {:?}",
            sim["messages"],
            got.messages
        );
    }
    let received = &received.totals;
    let field = |k: &str| {
        simulated[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {simulated}"))
    };
    assert_eq!(
        [
            field("calls"),
            field("prompt_tokens"),
            field("peak_prompt_tokens"),
            field("cache_read_tokens"),
            field("cache_write_tokens"),
            field("uncached_tokens"),
        ],
        [
            received.calls,
            received.prompt_tokens,
            received.peak_prompt,
            received.cache_read,
            received.cache_write,
            received.uncached,
        ],
        "{policy}: simulated (left) vs received (right): calls, prompt, peak, read, write, uncached"
    );
    assert_eq!(
        [
            field("summarizer_input_tokens"),
            field("summarizer_output_tokens")
        ],
        [received.summarizer_input, received.summarizer_output],
        "{policy}: summarizer input and output, simulated (left) vs received (right)"
    );
    let units = simulated["input_units"].as_f64().expect("input_units");
    assert!(
        (units - received.input_units).abs() < 1e-6,
        "{policy}: input units simulated {units} vs received {}",
        received.input_units
    );
    let billed = simulated["billed_input_units"]
        .as_f64()
        .expect("billed_input_units");
    assert!(
        (billed - received.billed_input_units(profile)).abs() < 1e-6,
        "{policy}: billed input simulated {billed} vs received {}",
        received.billed_input_units(profile)
    );
    eprintln!(
        "{policy}: {} calls, {} prompt tokens (read {}, written {}, uncached {}), summarizer {} in / {} out, billed input {:.1} units: simulated = received",
        received.calls,
        received.prompt_tokens,
        received.cache_read,
        received.cache_write,
        received.uncached,
        received.summarizer_input,
        received.summarizer_output,
        received.billed_input_units(profile)
    );
}
