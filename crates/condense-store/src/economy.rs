//! A branch's recorded economics: the usage pi stored on each assistant
//! message and the `context-prune-switch` entries, as core's
//! [`SessionEconomy`] (priced and shown by the status commands).

use condense_core::{RecordedUsage, SessionEconomy, SwitchReason, SwitchRecord};

use crate::entries::{SwitchEntryData, CUSTOM_TYPE_SWITCH};
use crate::session::Entry;

/// The figures a switch entry carries.
pub fn switch_record(data: &SwitchEntryData) -> SwitchRecord {
    SwitchRecord {
        reason: data.reason.clone(),
        prompt_tokens: data.prompt_tokens,
        removed_tokens: data.removed_tokens,
        rewrite_cost: data.rewrite_cost,
        projected_saving: data.projected_saving,
    }
}

/// The recorded calls and switches of `branch` (root first), in order. Every
/// assistant message is a call, before or after a compaction; a switch entry
/// whose payload does not parse is left out (replay reports it), and so is
/// the start switch, which changes nothing the model sees.
pub fn session_economy(branch: &[&Entry]) -> SessionEconomy {
    let mut economy = SessionEconomy::new();
    for entry in branch {
        if let Some(usage) = entry.message.as_ref().and_then(RecordedUsage::of_message) {
            economy.add_call(usage);
        } else if entry.is_custom(CUSTOM_TYPE_SWITCH) {
            match entry.payload::<SwitchEntryData>() {
                // The start switch shows nothing new: it is no decision.
                Some(Ok(data)) if !data.reason.is(SwitchReason::Start) => {
                    economy.add_switch(switch_record(&data));
                }
                _ => {}
            }
        }
    }
    economy
}

/// The ids of `branch`'s assistant messages whose recorded usage is refused
/// ([`RecordedUsage::refused`]), so left out of [`session_economy`].
pub fn refused_usage<'a>(branch: &[&'a Entry]) -> Vec<&'a str> {
    branch
        .iter()
        .filter(|e| e.message.as_ref().is_some_and(RecordedUsage::refused))
        .map(|e| e.id.as_str())
        .collect()
}

/// A problem line for the calls [`refused_usage`] names.
pub fn refused_usage_problem(ids: &[&str]) -> Option<String> {
    let first = ids.first()?;
    Some(format!(
        "{} call(s) left out of the economics: their recorded usage is not a whole number of \
         tokens up to {} (first: entry {first})",
        ids.len(),
        condense_core::MAX_RECORDED_TOKENS
    ))
}
