// The host's side of the incremental `context` exchange with one sidecar
// (docs/protocol.md, "context"): what the sidecar's copy of the branch
// holds (`keep`), and the last render applied, which the next answer may
// build on (`base`). Both hosts drive every `context` request through one.

import { answerSteps, applySteps, heldIntact, holdAnswer, KeyTable } from "./sync.ts";
import type { HeldAnswer } from "./sync.ts";

/** The fields of a `context` answer this reads (the rest is the host's). */
export interface ContextAnswer {
	readonly unchanged?: unknown;
	readonly seq?: unknown;
	readonly steps?: unknown;
	readonly reuse?: unknown;
}

/** What an answer made of the messages it was asked about. */
export type Applied =
	| { readonly kind: "unchanged" }
	| { readonly kind: "rendered"; readonly messages: unknown[]; readonly steps: number }
	| { readonly kind: "malformed" };

export class ContextClient {
	/**
	 * One key per message the sidecar's copy holds; `undefined` while that
	 * copy is unknown (after an error answer), so the next request sends
	 * everything.
	 */
	keys: KeyTable | undefined;
	private held: HeldAnswer | undefined;
	private heldFrom: unknown;

	/** How many leading `messages` the sidecar's copy holds as they are. */
	keep(messages: readonly unknown[]): number {
		return this.keys ? this.keys.commonPrefix(messages) : 0;
	}

	/**
	 * What a request may carry as `keep` before the branch is read
	 * (`KeyTable.grownPrefix`): 0 for an unknown copy, `undefined` when the
	 * branch did not simply grow.
	 */
	grownPrefix(messages: readonly unknown[]): number | undefined {
		return this.keys ? this.keys.grownPrefix(messages) : 0;
	}

	/** The sidecar's copy is now `messages`, of which it had the first `keep`. */
	sync(keep: number, messages: readonly unknown[]): void {
		if (!this.keys) this.keys = new KeyTable();
		this.keys.sync(keep, messages);
	}

	/**
	 * The answer number the next request may build on: the held one, when
	 * `sidecar` sent it and nothing changed its messages since.
	 */
	base(sidecar: unknown): number | undefined {
		if (this.held && (this.heldFrom !== sidecar || !heldIntact(this.held))) this.held = undefined;
		return this.held?.seq;
	}

	/**
	 * Applies `sidecar`'s answer to the messages the request carried
	 * (`base` as [`base`] gave it), and holds its steps for the next. A
	 * malformed answer forgets the held steps; the caller fails open.
	 */
	apply(messages: readonly unknown[], base: number | undefined, answer: ContextAnswer, sidecar: unknown): Applied {
		if (answer.unchanged === true) return { kind: "unchanged" };
		const steps = answerSteps(this.held, base, answer);
		const out = steps && applySteps(messages, steps);
		if (!steps || !out) {
			this.held = undefined;
			return { kind: "malformed" };
		}
		const reused = typeof answer.reuse === "number" ? answer.reuse : 0;
		this.held = holdAnswer(answer.seq, steps, this.held, reused);
		this.heldFrom = sidecar;
		return { kind: "rendered", messages: out, steps: steps.length };
	}

	/** The sidecar's copy is unknown: the next request sends everything. */
	forgetCopy(): void {
		this.keys = undefined;
	}

	/** Forgets the copy and the held render (an error answer, a new sidecar). */
	reset(): void {
		this.keys = undefined;
		this.held = undefined;
	}
}
