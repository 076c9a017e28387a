//! `context_tree_query` over a session: the index, then the branch.
//!
//! An id the index does not know (a raw tool-call id or `id@timestamp`
//! of an output no flush indexed) is looked up among the branch's tool
//! results. The context a host sends is not the whole branch once pi has
//! compacted: the outputs before the compaction are only in the session
//! file. So such an id is looked up on the whole branch as the file holds
//! it, read when the query needs it (never on a `context` call), and the
//! live sidecar, a reloaded one and `condense query` answer alike. Without
//! a readable file (a session held in memory, a host that writes none) the
//! context is the branch.

use std::path::Path;

use condense_core::{Message, PageRequest, QueryOptions, QueryOutput, State};

/// Answers `ids` from `state`'s index, and an id it does not know from the
/// branch: the whole branch of `session_file` when there is one to read,
/// else `context`. Spilled outputs are read from `blob_dir`.
pub fn answer(
    state: &State,
    ids: &[String],
    page: PageRequest,
    context: &[Message],
    session_file: Option<&Path>,
    blob_dir: &Path,
) -> QueryOutput {
    let history = session_file
        .filter(|_| ids.iter().any(|id| state.records_for_query(id).is_empty()))
        .and_then(branch_history);
    let options = QueryOptions {
        page,
        branch: history.as_deref().unwrap_or(context),
    };
    condense_core::query_with(state, ids, options, |record| {
        condense_store::spill::read_spill(blob_dir, record)
    })
}

/// The messages of the branch `file` holds, root first. The branch ends at
/// the file's last entry: pi appends the assistant message that calls the
/// tool before the tool runs, so that entry is on the branch pi is on.
fn branch_history(file: &Path) -> Option<Vec<Message>> {
    let session = condense_store::session::Session::open(file).ok()?;
    let branch = session.branch(None);
    (!branch.is_empty()).then(|| condense_store::context::branch_history(&branch))
}
