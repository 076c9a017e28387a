// Carrying out a `compact` effect (docs/protocol.md, "Effects"). pi's
// `ctx.compact` aborts whatever the agent is doing and compacts in the
// background, as `/compact` does. So it is called only once pi is idle after
// the run whose end asked for it, with no message queued, and never after
// another run has started: a run the user started goes on uncompacted
// (condense's bound then pays for the longer context), never aborted.

import type { ExtensionContext } from "@mariozechner/pi-coding-agent";
import { errorText, logError } from "../../condense-engine/client/sidecar.ts";

/** How long a `compact` effect waits for pi to be idle. */
const IDLE_WAIT_MS = 5_000;
/** How often it looks. */
const IDLE_POLL_MS = 50;

let runsStarted = 0;

/** A run started (`before_agent_start`): a compaction still waiting is dropped. */
export function noteRunStart(): void {
	runsStarted += 1;
}

type Compact = (options: { onError: (err: unknown) => void }) => void;

/** pi's `ctx.compact`, where this pi has it. */
export function compactOf(ctx: ExtensionContext | undefined): Compact | undefined {
	try {
		const compact = (ctx as any)?.compact;
		return typeof compact === "function" ? (options) => compact.call(ctx, options) : undefined;
	} catch {
		// a stale ctx throws on every access
		return undefined;
	}
}

function idle(ctx: ExtensionContext): boolean {
	try {
		const c = ctx as any;
		return c.isIdle?.() === true && c.hasPendingMessages?.() !== true;
	} catch {
		return false;
	}
}

/** Compacts once pi is idle after this run (within `IDLE_WAIT_MS`), unless another run starts first. */
export function compactWhenIdle(ctx: ExtensionContext | undefined): void {
	const compact = compactOf(ctx);
	if (!ctx || !compact) return;
	const run = runsStarted;
	const deadline = Date.now() + IDLE_WAIT_MS;
	const attempt = () => {
		if (runsStarted !== run) return;
		if (idle(ctx)) {
			compact({ onError: (err) => logError(`condense: the compaction condense asked for failed: ${errorText(err)}`) });
			return;
		}
		if (Date.now() < deadline) setTimeout(attempt, IDLE_POLL_MS).unref?.();
	};
	setTimeout(attempt, 0).unref?.();
}
