// The incremental `context` protocol: cheap per-message keys, the common
// prefix with what the sidecar holds, and applying the render steps it
// answers with (docs/protocol.md, "Incremental messages" and "Render steps").

/**
 * A message's key: role, timestamp, tool-call id and content size, kept as
 * plain fields so comparing a message with its key allocates nothing (this
 * runs over the whole branch before every LLM call).
 */
export interface Key {
	readonly role: unknown;
	readonly ts: unknown;
	readonly id: unknown;
	/** Content size: string length, or block count and total text length for arrays; -1 if neither. */
	readonly size: number;
	/** Length of `summary` / `output` for pi's roles without `content`. */
	readonly alt: number;
}

function contentSize(content: unknown): number {
	if (typeof content === "string") return content.length;
	if (!Array.isArray(content)) return -1;
	let chars = 0;
	for (const block of content) {
		if (!block || typeof block !== "object") continue;
		const b = block as Record<string, unknown>;
		if (typeof b.text === "string") chars += b.text.length;
		else if (typeof b.thinking === "string") chars += b.thinking.length;
		else if (typeof b.data === "string") chars += b.data.length;
	}
	// Block count in the high part, text length in the low part.
	return content.length * 4294967296 + chars;
}

function altSize(m: Record<string, unknown>): number {
	if (typeof m.summary === "string") return m.summary.length;
	if (typeof m.output === "string") return m.output.length;
	return -1;
}

export function messageKey(message: unknown): Key {
	if (!message || typeof message !== "object") return { role: typeof message, ts: undefined, id: undefined, size: -2, alt: -2 };
	const m = message as Record<string, unknown>;
	return { role: m.role, ts: m.timestamp, id: m.toolCallId, size: contentSize(m.content), alt: altSize(m) };
}

/** True if `message` still has `key`. */
export function sameKey(key: Key, message: unknown): boolean {
	if (!message || typeof message !== "object") return key.size === -2 && key.role === typeof message;
	const m = message as Record<string, unknown>;
	return (
		key.role === m.role &&
		key.ts === m.timestamp &&
		key.id === m.toolCallId &&
		key.size === contentSize(m.content) &&
		key.alt === altSize(m)
	);
}

export function messageKeys(messages: readonly unknown[]): Key[] {
	const keys = new Array<Key>(messages.length);
	for (let i = 0; i < messages.length; i++) keys[i] = messageKey(messages[i]);
	return keys;
}

/** Length of the prefix of `messages` that still has the held `keys`. */
export function commonPrefix(keys: readonly Key[], messages: readonly unknown[]): number {
	const n = Math.min(keys.length, messages.length);
	let i = 0;
	while (i < n && sameKey(keys[i], messages[i])) i++;
	return i;
}

/** The keys after a sync: the held prefix kept, keys built only for what follows. */
export function syncedKeys(keys: readonly Key[], keep: number, messages: readonly unknown[]): Key[] {
	const out = keys.slice(0, keep);
	for (let i = keep; i < messages.length; i++) out.push(messageKey(messages[i]));
	return out;
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
