//! `/pruner compact`: compress every eligible closed chain now.

use crate::{Effect, Effects};
use condense_core::{js_len, NoticeLevel, OccurrenceKey};

use super::{notice_effects, plural, run_command_flush, CommandHost};

/// `/pruner compact`: every eligible closed chain, K = 0, whether or not
/// `chainCompression.enabled`.
pub(super) async fn compact(host: &dyn CommandHost) -> Effects {
    let flush = host.engine().begin_compact();
    let Some(flush) = flush else {
        return vec![Effect::warning(
            "pruner: compact failed: a flush is running; try again when it is done",
        )];
    };
    let Ok((notices, done)) = run_command_flush(host, flush, &mut |_| {}).await else {
        return vec![Effect::warning("pruner: compact failed: cancelled")];
    };
    let mut out = notice_effects(&notices);
    out.extend(done.effects);
    let report = done.report;
    // The chain compression's own "compressed" notice is replaced by ours.
    out.extend(notice_effects(
        report
            .chain_notices
            .iter()
            .filter(|n| n.level != NoticeLevel::Info),
    ));
    let compressed = &report.compressed;
    if compressed.is_empty() {
        let skipped = report.skipped_chains;
        out.push(Effect::info(if skipped > 0 {
            format!(
                "pruner: no chains eligible for compaction ({skipped} skipped — no per-batch summary available)"
            )
        } else {
            "pruner: no chains eligible for compaction".to_owned()
        }));
        return out;
    }
    // A rough proxy, as in pi-condense: the dropped results' original sizes.
    let e = host.engine();
    let dropped: u64 = compressed
        .iter()
        .flat_map(|c| c.dropped_occurrence_keys.iter().flatten())
        .map(|k| OccurrenceKey::parse(k))
        .filter_map(|k| e.state().record_for(&k.id, k.result_timestamp))
        .map(|r| js_len(&r.result_text.to_str()) as u64)
        .sum();
    let ids: Vec<&str> = compressed.iter().map(|c| c.block_id.as_str()).collect();
    out.push(Effect::info(format!(
        "pruner: compacted {} chain{} ({}), reclaimed ~{} tokens",
        ids.len(),
        plural(ids.len() as u64),
        ids.join(", "),
        dropped.div_ceil(4)
    )));
    out
}
