// What both hosts agree on with the sidecar: the deadlines of their
// requests and the names the model and the session files see.

/** Deadline for `context` answers (the host waits for them before every LLM call). */
export const CONTEXT_TIMEOUT_MS = 2_000;
/** Deadline for every other request (a flush may run summarizer calls). */
export const REQUEST_TIMEOUT_MS = 300_000;
/** Deadline for the `hello` handshake. */
export const HELLO_TIMEOUT_MS = 30_000;
/** The recovery tool, as the sidecar's stubs name it. */
export const QUERY_TOOL = "context_tree_query";
/** The custom type of the summary messages a flush writes. */
export const SUMMARY_TYPE = "context-prune-summary";
