//! Comparing what two runs hold: message lists byte for byte, states by
//! their facets.

use condense_core::Branch;
use condense_core::Message;

/// The first position where two message lists differ (byte for byte).
pub fn first_difference(a: &[Message], b: &[Message]) -> Option<usize> {
    let common = a.iter().zip(b).position(|(x, y)| x.json() != y.json());
    match common {
        Some(i) => Some(i),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

/// What a state holds, for comparing the live state with a replay. (The
/// short-ref counter is left out: an oversized summary burns refs that are
/// never written, so a restart may number later refs lower; refs in use are
/// compared through the renders.)
pub fn facets(s: &Branch, exact_cost: bool) -> Vec<String> {
    let mut out: Vec<String> = s
        .records()
        .iter()
        .map(|r| format!("record {r:?}"))
        .collect();
    out.extend(s.summary_bodies().iter().map(|b| format!("body {b:?}")));
    out.extend(s.chains().map(|c| format!("chain {c:?}")));
    out.push(format!("frontier {:?}", s.frontier()));
    let mut stats = s.stats().clone();
    if !exact_cost {
        // Known issue: serde_json parses floats to within one ulp unless its
        // `float_roundtrip` feature is on, so a replayed `totalCost` may be
        // one ulp off the written one.
        stats.total_cost = (stats.total_cost * 1e9).round() / 1e9;
    }
    out.push(format!("stats {stats:?}"));
    out.push(format!("indexed {}", s.indexed_count()));
    out
}

/// The first line two facet lists differ in.
pub(super) fn facet_difference(a: &[String], b: &[String]) -> Option<String> {
    let at = a.iter().zip(b).position(|(x, y)| x != y);
    match at {
        Some(i) => Some(format!(
            "at {i}:\n live: {:.600}\n file: {:.600}",
            a[i], b[i]
        )),
        None if a.len() != b.len() => Some(format!(
            "lengths {} vs {}; extra: {:.600}",
            a.len(),
            b.len(),
            a.get(b.len()).or(b.get(a.len())).map_or("", String::as_str)
        )),
        None => None,
    }
}
