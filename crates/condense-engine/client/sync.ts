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

/** The messages pi hands to `context` handlers: all but `system` ones (pi 1.6). */
export function withoutSystemMessages(messages: unknown): unknown[] | undefined {
	if (!Array.isArray(messages)) return undefined;
	return messages.filter((m) => !(m && typeof m === "object" && (m as Record<string, unknown>).role === "system"));
}

/**
 * The keys of the messages the sidecar holds, one column per field: the
 * `context` handler compares them with every message pi hands it before
 * every LLM call, and contiguous columns keep that walk to pi's objects'
 * cache misses alone. Same fields and comparisons as [`Key`].
 */
export class KeyTable {
	private readonly roles: unknown[] = [];
	private readonly ts: unknown[] = [];
	private readonly ids: unknown[] = [];
	private readonly sizes: number[] = [];
	private readonly alts: number[] = [];

	static of(messages: readonly unknown[]): KeyTable {
		const table = new KeyTable();
		table.append(messages, 0);
		return table;
	}

	get length(): number {
		return this.roles.length;
	}

	/** Appends the keys of `messages[from..]`. */
	append(messages: readonly unknown[], from: number): void {
		for (let i = from; i < messages.length; i++) {
			const k = messageKey(messages[i]);
			this.roles.push(k.role);
			this.ts.push(k.ts);
			this.ids.push(k.id);
			this.sizes.push(k.size);
			this.alts.push(k.alt);
		}
	}

	/** Keeps the first `n` keys. */
	truncate(n: number): void {
		if (n >= this.roles.length) return;
		this.roles.length = n;
		this.ts.length = n;
		this.ids.length = n;
		this.sizes.length = n;
		this.alts.length = n;
	}

	/**
	 * Length of the prefix of `messages` that still has these keys, in one
	 * walk: each message's header and content are read while its object is
	 * in the cache.
	 */
	commonPrefix(messages: readonly unknown[]): number {
		const { roles, ts, ids, sizes, alts } = this;
		const n = Math.min(roles.length, messages.length);
		let i = 0;
		for (; i < n; i++) {
			const m = messages[i];
			if (!m || typeof m !== "object") {
				if (sizes[i] === -2 && roles[i] === typeof m) continue;
				break;
			}
			const r = m as Record<string, unknown>;
			if (roles[i] !== r.role || ts[i] !== r.timestamp || ids[i] !== r.toolCallId) break;
			if (sizes[i] !== contentSize(r.content) || alts[i] !== altSize(r)) break;
		}
		return i;
	}

	/**
	 * How many messages the `context` handler can send on before it reads
	 * the branch: all the keys, when `messages` is at least as long and
	 * its message under the last key still has that key (the branch grew
	 * at its end, the usual case between two calls); `undefined` when that
	 * does not hold (a compaction, a navigation), and the handler finds the
	 * prefix first. An edit inside the prefix that this misses is found by
	 * [`commonPrefix`] during the round trip, and the handler sends again
	 * from it.
	 */
	grownPrefix(messages: readonly unknown[]): number | undefined {
		const n = this.roles.length;
		if (n === 0) return 0;
		if (messages.length < n) return undefined;
		const m = messages[n - 1];
		const key: Key = { role: this.roles[n - 1], ts: this.ts[n - 1], id: this.ids[n - 1], size: this.sizes[n - 1], alt: this.alts[n - 1] };
		return sameKey(key, m) ? n : undefined;
	}

	/** After a sync: the first `keep` keys kept, keys for what follows. */
	sync(keep: number, messages: readonly unknown[]): void {
		this.truncate(keep);
		this.append(messages, keep);
	}
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

/**
 * The last steps answer the shim applied, which the next answer may build on
 * ("the first `reuse` steps of answer `seq`, then these"). Its messages are
 * handed to pi on every call; `keys` (one per step, `undefined` for `keep`
 * steps) tells whether anything changed them since (another extension's
 * handler, say), in which case they are not reused.
 */
export interface HeldAnswer {
	readonly seq: number;
	readonly steps: readonly unknown[];
	readonly keys: readonly (Key | undefined)[];
}

function stepKey(step: unknown): Key | undefined {
	const m = (step as Record<string, unknown>).message;
	return m === undefined ? undefined : messageKey(m);
}

/**
 * Keeps a steps answer for the next call; the keys of the `reused` steps
 * taken from the answer it was built on were checked just before.
 */
export function holdAnswer(seq: unknown, steps: readonly unknown[], base?: HeldAnswer, reused = 0): HeldAnswer | undefined {
	if (typeof seq !== "number" || !Number.isSafeInteger(seq)) return undefined;
	const keys = base && reused > 0 ? base.keys.slice(0, reused) : [];
	for (let i = keys.length; i < steps.length; i++) keys.push(stepKey(steps[i]));
	return { seq, steps, keys };
}

/** True if none of the held answer's messages was changed since it was applied. */
export function heldIntact(held: HeldAnswer): boolean {
	for (let i = 0; i < held.steps.length; i++) {
		const key = held.keys[i];
		if (key !== undefined && !sameKey(key, (held.steps[i] as Record<string, unknown>).message)) return false;
	}
	return true;
}

/**
 * The whole step list of an answer: its own steps after the first `reuse`
 * steps of the held answer. `undefined` if the answer builds on something
 * the shim does not hold (the caller fails open).
 */
export function answerSteps(held: HeldAnswer | undefined, base: number | undefined, answer: { readonly seq?: unknown; readonly steps?: unknown; readonly reuse?: unknown }): unknown[] | undefined {
	const steps = answer.steps;
	if (!Array.isArray(steps)) return undefined;
	const reuse = answer.reuse;
	if (reuse === undefined || reuse === 0) return steps;
	if (!held || base !== held.seq || !Number.isInteger(reuse) || (reuse as number) < 0 || (reuse as number) > held.steps.length) return undefined;
	return held.steps.slice(0, reuse as number).concat(steps);
}
