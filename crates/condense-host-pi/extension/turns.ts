// Which turns' `turn_end` handlers have started, so a `context` handler can
// wait for the one of the turn it is about to send. pi 0.73/0.74 run
// extension handlers on a queue the agent loop does not wait for: the next
// LLM call's `context` may run before that turn's `turn_end` handler, and a
// flush there would reach the model one call late (docs/reliability.md).

/** How many started `turn_end` handlers are remembered (`context` asks about the latest). */
const REMEMBERED = 8;

/**
 * The key `context` and `turn_end` both know an assistant message by:
 * its timestamp and, when the provider gave one, its response id (pi hands
 * `context` a deep copy, so the object itself cannot be compared).
 */
export function turnKey(message: unknown): string | undefined {
	if (!message || typeof message !== "object") return undefined;
	const m = message as Record<string, unknown>;
	if (m.role !== "assistant" || typeof m.timestamp !== "number") return undefined;
	return typeof m.responseId === "string" ? `${m.timestamp} ${m.responseId}` : `${m.timestamp}`;
}

function asksForTools(message: Record<string, unknown>): boolean {
	return Array.isArray(message.content) && message.content.some((b: any) => b?.type === "toolCall");
}

/**
 * The key of the completed tool turn `messages` end with: the last assistant
 * message asked for tools and only tool results, at least one, follow it.
 * `undefined` otherwise: a user prompt, a steering message, or an aborted or
 * failed turn at the end means no `turn_end` is due before this call.
 */
export function toolTurnAtEnd(messages: readonly unknown[]): string | undefined {
	let i = messages.length - 1;
	while (i >= 0 && (messages[i] as any)?.role === "toolResult") i--;
	if (i < 0 || i === messages.length - 1) return undefined;
	const m = messages[i];
	if (!m || typeof m !== "object") return undefined;
	const assistant = m as Record<string, unknown>;
	if (assistant.role !== "assistant" || !asksForTools(assistant)) return undefined;
	return turnKey(assistant);
}

/** What `TurnEnds.settled` had to do before the `turn_end` work it waited for. */
export type TurnEndWait =
	/** The tail is no tool turn, or its handler had started already. */
	| "ready"
	/** The tail's handler had not started; it did within the bound. */
	| "arrived"
	/** The tail's handler did not start within the bound: carrying on without it. */
	| "timeout";

interface Started {
	key: string | undefined;
	/** Settles when the handler finishes (it never rejects: handlers are guarded, and rejections are ignored anyway). */
	done: Promise<unknown>;
}

export class TurnEnds {
	private started: Started[] = [];
	private waiters = new Set<{ key: string; wake: () => void }>();

	/**
	 * Records that the `turn_end` handler for `message` (the event's
	 * assistant message) started. Call it before the handler can return
	 * early, so `context` never waits for a handler that already ran.
	 */
	record(message: unknown, done: Promise<unknown>): void {
		const key = turnKey(message);
		this.started.push({ key, done });
		if (this.started.length > REMEMBERED) this.started.shift();
		if (key === undefined) return;
		for (const waiter of this.waiters) if (waiter.key === key) waiter.wake();
	}

	/** True if the `turn_end` handler of the turn keyed `key` has started. */
	has(key: string): boolean {
		return this.started.some((s) => s.key === key);
	}

	/**
	 * Settles once the `turn_end` work `context` must see is done: when
	 * `messages` end with a tool turn whose handler has not started, first
	 * waits up to `waitMs` for it to start; then waits for the latest
	 * started handler to finish.
	 */
	async settled(messages: readonly unknown[], waitMs: number): Promise<TurnEndWait> {
		const key = toolTurnAtEnd(messages);
		let outcome: TurnEndWait = "ready";
		if (key !== undefined && !this.has(key)) outcome = (await this.startOf(key, waitMs)) ? "arrived" : "timeout";
		const latest = this.started[this.started.length - 1];
		if (latest) await latest.done.catch(() => undefined);
		return outcome;
	}

	/** Resolves `true` when the handler of `key` starts, `false` after `waitMs` without it. */
	private startOf(key: string, waitMs: number): Promise<boolean> {
		return new Promise((resolve) => {
			const waiter = {
				key,
				wake: () => {
					clearTimeout(timer);
					this.waiters.delete(waiter);
					resolve(true);
				},
			};
			const timer = setTimeout(() => {
				this.waiters.delete(waiter);
				resolve(false);
			}, waitMs);
			this.waiters.add(waiter);
		});
	}
}
