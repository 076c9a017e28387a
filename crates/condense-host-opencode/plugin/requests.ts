// The plugin's requests to a sidecar, each logged when debugging
// (`$CONDENSE_OPENCODE_DEBUG`), and the protocol's JSON read field by field.

import * as fs from "node:fs";
import type { Json, ShimMethod, ShimRequests } from "../../condense-engine/client/protocol.ts";
import { CodedError, errorText, Sidecar } from "../../condense-engine/client/sidecar.ts";

/** `$CONDENSE_OPENCODE_DEBUG`: a file that gets one line per request and answer. */
const DEBUG_FILE = process.env.CONDENSE_OPENCODE_DEBUG;

/** Logs `text()` when debugging (built only then: a request can be megabytes). */
export function debug(text: () => string): void {
	if (!DEBUG_FILE) return;
	try {
		fs.appendFileSync(DEBUG_FILE, `${new Date().toISOString()} ${text()}\n`);
	} catch {
		// debugging only
	}
}

/** Messages and entries as the protocol's JSON: they are plain data read from OpenCode's JSON messages. */
export function asJson<T extends object>(value: T): T extends unknown[] ? Json[] : Json {
	return value as never;
}

/** An answer's fields: the answer is read field by field, never trusted whole. */
export type Answer = { readonly [key: string]: unknown };

export function asAnswer(value: unknown): Answer {
	return value && typeof value === "object" && !Array.isArray(value) ? (value as Answer) : {};
}

/** A request to the sidecar, logged when debugging. */
export async function ask<M extends ShimMethod>(sidecar: Sidecar, method: M, params: ShimRequests[M]["params"], timeoutMs: number): Promise<Answer> {
	debug(() => `-> ${method} ${JSON.stringify(params).slice(0, 2000)}`);
	try {
		const res = asAnswer(await sidecar.request(method, params, timeoutMs));
		debug(() => `<- ${method} ${JSON.stringify(res).slice(0, 2000)}`);
		return res;
	} catch (err) {
		debug(() => `<- ${method} failed: ${errorText(err)}`);
		throw err;
	}
}

/**
 * Carries out the answers to `sent`, in order, as each arrives. False
 * when one says the sidecar's copy is not what the keys describe. A failed
 * request does not stop the answers after it, which the sidecar acted on
 * (their log entries must be written): its error is thrown once all are
 * carried out.
 */
export async function settle(sent: readonly Sent[]): Promise<boolean> {
	let inStep = true;
	let failure: { readonly error: unknown } | undefined;
	for (const s of sent) {
		try {
			inStep = s.apply(await s.answer) && inStep;
		} catch (error) {
			failure ??= { error };
			inStep = false;
		}
	}
	if (failure) throw failure.error;
	return inStep;
}

/** A request sent ahead of a call's `context`, and what its answer asks of the session's link. */
export interface Sent {
	readonly answer: Promise<Answer>;
	/** Carries out the answer; false when the keys no longer describe the sidecar's copy. */
	readonly apply: (answer: Answer) => boolean;
}

/** A request whose answer is read later ([`settle`]): its failure is not unhandled meanwhile. */
export function sentAhead(answer: Promise<Answer>): Promise<Answer> {
	answer.catch(() => undefined);
	return answer;
}

/**
 * `answer`, or a `timeout` error once `ms` have passed from now: the
 * `context` deadline, counted from when the requests sent ahead of it are
 * answered (until then it waits with theirs), so a render that never
 * answers still fails open.
 */
export function within(answer: Promise<Answer>, ms: number, what: string): Promise<Answer> {
	let timer: ReturnType<typeof setTimeout> | undefined;
	const deadline = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new CodedError("timeout", `${what}: no answer within ${ms} ms`)), ms);
	});
	return Promise.race([answer, deadline]).finally(() => clearTimeout(timer));
}
