// The incremental `context` protocol: cheap per-message keys, the common
// prefix with what the sidecar holds, and applying the render steps it
// answers with (docs/protocol.md, "Incremental messages" and "Render steps").

/** Length part of a key: text length for strings; block count plus total text length for arrays. */
function contentSize(content: unknown): string {
	if (typeof content === "string") return `s${content.length}`;
	if (!Array.isArray(content)) return "-";
	let chars = 0;
	for (const block of content) {
		if (!block || typeof block !== "object") continue;
		const b = block as Record<string, unknown>;
		if (typeof b.text === "string") chars += b.text.length;
		else if (typeof b.thinking === "string") chars += b.thinking.length;
		else if (typeof b.data === "string") chars += b.data.length;
	}
	return `a${content.length}.${chars}`;
}

/** A key per message: role, timestamp, tool-call id and content size. */
export function messageKey(message: unknown): string {
	if (!message || typeof message !== "object") return `?${typeof message}`;
	const m = message as Record<string, unknown>;
	let size = contentSize(m.content);
	// pi's own roles without `content` carry their text elsewhere.
	if (size === "-") {
		if (typeof m.summary === "string") size = `y${m.summary.length}`;
		else if (typeof m.output === "string") size = `o${m.output.length}`;
	}
	const id = typeof m.toolCallId === "string" ? m.toolCallId : "";
	return `${String(m.role)}\u0000${String(m.timestamp)}\u0000${id}\u0000${size}`;
}

export function messageKeys(messages: readonly unknown[]): string[] {
	const keys = new Array<string>(messages.length);
	for (let i = 0; i < messages.length; i++) keys[i] = messageKey(messages[i]);
	return keys;
}

/** Length of the common prefix of two key lists. */
export function commonPrefix(a: readonly string[], b: readonly string[]): number {
	const n = Math.min(a.length, b.length);
	let i = 0;
	while (i < n && a[i] === b[i]) i++;
	return i;
}

/**
 * Builds the output list from the steps: `{keep: [start, end]}` copies the
 * very input objects `start..end`, `{message}` inserts the sidecar's message.
 * Returns `undefined` if the steps are malformed (the caller fails open).
 */
export function applySteps(input: readonly unknown[], steps: unknown): unknown[] | undefined {
	if (!Array.isArray(steps)) return undefined;
	const out: unknown[] = [];
	for (const step of steps) {
		if (!step || typeof step !== "object") return undefined;
		const s = step as Record<string, unknown>;
		if (Array.isArray(s.keep)) {
			const [start, end] = s.keep as unknown[];
			if (
				s.keep.length !== 2 ||
				!Number.isInteger(start) ||
				!Number.isInteger(end) ||
				(start as number) < 0 ||
				(end as number) < (start as number) ||
				(end as number) > input.length
			) {
				return undefined;
			}
			for (let i = start as number; i < (end as number); i++) out.push(input[i]);
		} else if (s.message && typeof s.message === "object" && !Array.isArray(s.message)) {
			out.push(s.message);
		} else {
			return undefined;
		}
	}
	return out;
}
