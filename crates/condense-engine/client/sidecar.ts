// The connection to the sidecar (`condense sidecar`): process lifetime, JSON-lines
// framing, request ids and deadlines (docs/protocol.md).
//
// Everything that goes wrong with the sidecar (it cannot start, exits, sends
// something that is not a protocol message, misses a deadline) ends in one
// call of `onFailure`; the caller then fails open. A closed connection never
// reopens: the caller starts a new `Sidecar`.

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SIDECAR_ARGS } from "./locate.ts";
import { ProtocolError, readSidecarNotice, readSidecarRequest, SHIM_REQUESTS } from "./protocol.ts";
import type { ShimMethod, ShimNotifications, ShimRequests, SidecarNotice, SidecarRequest, SidecarResult } from "./protocol.ts";

/** Protocol major version this shim speaks. */
export const PROTOCOL_VERSION = 1;
/** This shim's version (sent in `hello`). */
export const SHIM_VERSION = "0.1.0";

/** The protocol's line limit (64 MiB; characters for lines read, bytes for lines sent). */
const MAX_LINE = 64 * 1024 * 1024;
/** How much of the sidecar's stderr is kept for failure reports. */
const STDERR_TAIL = 4096;

/** An error with a protocol error code (`auth`, `aborted`, `transient`, ...). */
export class CodedError extends Error {
	code: string;
	constructor(code: string, message: string) {
		super(message);
		this.code = code;
	}
}

export interface SidecarHooks {
	/** A request from the sidecar (`llm.complete`), params checked; resolve with the result or throw a CodedError. */
	onRequest(request: SidecarRequest, id: string | number): Promise<SidecarResult>;
	/** A notification from the sidecar (`llm.cancel`, ...), params checked. */
	onNotification(notice: SidecarNotice): void;
	/** Called once when the connection breaks for any reason other than `close()`. */
	onFailure(reason: string): void;
}

interface Pending {
	method: string;
	/** Checks the result and resolves with it (throws a ProtocolError). */
	resolve: (value: unknown) => void;
	reject: (error: Error) => void;
	timer: ReturnType<typeof setTimeout>;
}

export class Sidecar {
	readonly bin: string;
	private child: ChildProcess | undefined;
	private hooks: SidecarHooks;
	private nextId = 1;
	private pending = new Map<number, Pending>();
	private pieces: string[] = [];
	private pieceLength = 0;
	/** Time the last line's `JSON.parse` took (for `CONDENSE_PI_TIMING`). */
	lastParseMs = 0;
	private stderrTail = "";
	private logFd: number | undefined;
	private closed = false;
	private exitListener = () => this.kill();

	constructor(bin: string, hooks: SidecarHooks) {
		this.bin = bin;
		this.hooks = hooks;
		const logFile = process.env.CONDENSE_PI_LOG;
		if (logFile) {
			try {
				this.logFd = fs.openSync(logFile, "a");
			} catch {
				this.logFd = undefined;
			}
		}
		let child: ChildProcess;
		try {
			child = spawn(bin, SIDECAR_ARGS, { stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
		} catch (err) {
			// Reported asynchronously so the caller has finished wiring up.
			queueMicrotask(() => this.fail(`cannot start ${bin}: ${errorText(err)}`));
			return;
		}
		this.child = child;
		child.on("error", (err) => this.fail(`cannot run ${bin}: ${errorText(err)}`));
		child.on("exit", (code, signal) => {
			process.removeListener("exit", this.exitListener);
			this.fail(`the sidecar exited (${signal ? `signal ${signal}` : `code ${code}`})`);
		});
		child.stdin?.on("error", (err) => this.fail(`writing to the sidecar failed: ${errorText(err)}`));
		child.stdout?.setEncoding("utf8");
		child.stdout?.on("data", (chunk: string) => this.onData(chunk));
		child.stdout?.on("error", () => {});
		child.stderr?.setEncoding("utf8");
		child.stderr?.on("data", (chunk: string) => this.onStderr(chunk));
		child.stderr?.on("error", () => {});
		// The sidecar must never keep pi alive: pending requests hold their own
		// (referenced) timers, which is enough while an answer is awaited.
		child.unref();
		for (const stream of [child.stdin, child.stdout, child.stderr] as any[]) stream?.unref?.();
		process.once("exit", this.exitListener);
	}

	/** True until the connection failed or was closed. */
	get alive(): boolean {
		return !this.closed;
	}

	/** The last lines the sidecar wrote to stderr (for failure reports). */
	get stderr(): string {
		return this.stderrTail;
	}

	/**
	 * Sends a request and resolves with its result; rejects on error responses,
	 * deadlines and failures. `smaller` offers leaner params for when the line
	 * would exceed the protocol's limit.
	 */
	request<M extends ShimMethod>(
		method: M,
		params: ShimRequests[M]["params"],
		timeoutMs: number,
		smaller?: () => ShimRequests[M]["params"],
	): Promise<ShimRequests[M]["result"]> {
		if (this.closed) return Promise.reject(new CodedError("closed", "the sidecar connection is closed"));
		const id = this.nextId++;
		let line = this.encode({ id, method, params });
		if (line !== undefined && smaller && tooLong(line)) line = this.encode({ id, method, params: smaller() });
		if (line === undefined) return Promise.reject(new CodedError("failed", `${method}: cannot encode the request`));
		if (tooLong(line)) {
			// The sidecar would discard it; nothing can be kept in sync after that.
			this.fail(`${method} is larger than the protocol's ${MAX_LINE}-byte line limit`);
			return Promise.reject(new CodedError("failed", `${method}: request too large`));
		}
		const check: (value: unknown, where: string) => ShimRequests[M]["result"] = SHIM_REQUESTS[method].result;
		return new Promise<ShimRequests[M]["result"]>((resolve, reject) => {
			const timer = setTimeout(() => {
				if (!this.pending.delete(id)) return;
				reject(new CodedError("timeout", `${method}: no answer within ${timeoutMs} ms`));
				this.fail(`no answer to ${method} within ${timeoutMs} ms`);
			}, timeoutMs);
			this.pending.set(id, { method, resolve: (value) => resolve(check(value, `the ${method} answer`)), reject, timer });
			// A failed write fails the connection, which rejects this request too.
			this.write(line as string);
		});
	}

	/** Sends a notification (no answer). */
	notify<M extends keyof ShimNotifications>(method: M, params: ShimNotifications[M]): void {
		if (!this.closed) this.send({ method, params });
	}

	/** Closes the connection without reporting a failure and stops the process. */
	close(): void {
		if (this.closed) return;
		this.closed = true;
		this.rejectAll(new CodedError("closed", "the sidecar connection was closed"));
		try {
			this.child?.stdin?.end();
		} catch {
			// already gone
		}
		// Give it a moment to exit on its own after `shutdown`/EOF, then make sure.
		const child = this.child;
		const timer = setTimeout(() => {
			if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
		}, 500);
		timer.unref?.();
		this.cleanup();
	}

	private kill(): void {
		const child = this.child;
		if (child && child.exitCode === null && child.signalCode === null) {
			try {
				child.kill("SIGKILL");
			} catch {
				// already gone
			}
		}
	}

	private cleanup(): void {
		if (this.logFd !== undefined) {
			try {
				fs.closeSync(this.logFd);
			} catch {
				// ignore
			}
			this.logFd = undefined;
		}
	}

	private rejectAll(error: Error): void {
		const pending = [...this.pending.values()];
		this.pending.clear();
		for (const p of pending) {
			clearTimeout(p.timer);
			p.reject(error);
		}
	}

	/** Marks the connection broken: rejects everything, kills the process, reports once. */
	fail(reason: string): void {
		if (this.closed) return;
		this.closed = true;
		this.rejectAll(new CodedError("failed", reason));
		this.kill();
		this.cleanup();
		const tail = this.stderrTail.trim();
		this.hooks.onFailure(tail ? `${reason}; sidecar stderr: ${tail.slice(-1000)}` : reason);
	}

	private encode(message: unknown): string | undefined {
		try {
			return JSON.stringify(message) + "\n";
		} catch (err) {
			this.fail(`cannot encode a message: ${errorText(err)}`);
			return undefined;
		}
	}

	private send(message: unknown): boolean {
		const line = this.encode(message);
		if (line === undefined) return false;
		if (tooLong(line)) {
			this.fail(`a message is larger than the protocol's ${MAX_LINE}-byte line limit`);
			return false;
		}
		return this.write(line);
	}

	private write(line: string): boolean {
		try {
			const stdin = this.child?.stdin;
			if (!stdin || stdin.destroyed) {
				this.fail("the sidecar's stdin is closed");
				return false;
			}
			stdin.write(line);
			return true;
		} catch (err) {
			this.fail(`writing to the sidecar failed: ${errorText(err)}`);
			return false;
		}
	}

	private onStderr(chunk: string): void {
		if (this.logFd !== undefined) {
			try {
				fs.writeSync(this.logFd, chunk);
			} catch {
				// ignore
			}
		}
		this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
	}

	// Lines are split on "\n" only (never readline, which also splits on
	// U+2028/U+2029). A partial line is kept as pieces, joined once complete.
	private onData(chunk: string): void {
		let start = 0;
		while (!this.closed) {
			const nl = chunk.indexOf("\n", start);
			if (nl === -1) break;
			let line = chunk.slice(start, nl);
			if (this.pieces.length > 0) {
				this.pieces.push(line);
				line = this.pieces.join("");
				this.pieces = [];
				this.pieceLength = 0;
			}
			start = nl + 1;
			this.onLine(line);
		}
		if (this.closed || start >= chunk.length) return;
		const rest = chunk.slice(start);
		this.pieces.push(rest);
		this.pieceLength += rest.length;
		if (this.pieceLength > MAX_LINE) this.fail(`the sidecar sent a line longer than ${MAX_LINE} characters`);
	}

	private onLine(line: string): void {
		if (line.trim() === "") return;
		let parsed: unknown;
		try {
			const parseStart = performance.now();
			parsed = JSON.parse(line);
			this.lastParseMs = performance.now() - parseStart;
		} catch {
			this.fail(`the sidecar sent a line that is not JSON: ${line.slice(0, 200)}`);
			return;
		}
		if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
			this.fail(`the sidecar sent a line that is not a JSON object: ${line.slice(0, 200)}`);
			return;
		}
		const message = parsed as { readonly [key: string]: unknown };
		const id = message.id;
		const hasId = typeof id === "number" || typeof id === "string";
		if (typeof message.method === "string") {
			if (hasId) this.answerRequest(id, message.method, message.params ?? {});
			else {
				try {
					const notice = readSidecarNotice(message.method, message.params ?? {});
					if (notice) this.hooks.onNotification(notice);
				} catch (err) {
					logError(`condense: handling ${message.method} failed: ${errorText(err)}`);
				}
			}
			return;
		}
		if (hasId && ("result" in message || "error" in message)) {
			const pending = typeof id === "number" ? this.pending.get(id) : undefined;
			if (typeof id !== "number" || !pending) return; // an answer nobody waits for any more
			this.pending.delete(id);
			clearTimeout(pending.timer);
			if (message.error !== undefined && message.error !== null) {
				// Read field by field (not `isErrorBody`): a code without a message still counts.
				const error = message.error as { readonly code?: unknown; readonly message?: unknown };
				const code = typeof error.code === "string" ? error.code : "error";
				const text = typeof error.message === "string" ? error.message : JSON.stringify(message.error);
				pending.reject(new CodedError(code, `${pending.method}: ${text}`));
				return;
			}
			try {
				pending.resolve(message.result);
			} catch (err) {
				const reason = err instanceof ProtocolError ? err.message : errorText(err);
				pending.reject(new CodedError("garbage", `${pending.method}: ${reason}`));
				this.fail(`the sidecar answered ${pending.method} with something the shim cannot read: ${reason}`);
			}
			return;
		}
		this.fail(`the sidecar sent something that is not a protocol message: ${line.slice(0, 200)}`);
	}

	private answerRequest(id: string | number, method: string, params: unknown): void {
		let work: Promise<SidecarResult>;
		try {
			const request = readSidecarRequest(method, params);
			work = request
				? this.hooks.onRequest(request, id)
				: Promise.reject(new CodedError("unknown-method", `the shim does not handle ${method}`));
		} catch (err) {
			work = Promise.reject(err);
		}
		work.then(
			(result) => {
				if (!this.closed) this.send({ id, result });
			},
			(err) => {
				if (this.closed) return;
				const code = err instanceof CodedError ? err.code : "transient";
				this.send({ id, error: { code, message: errorText(err) } });
			},
		);
	}
}

/** True if `line` exceeds the protocol's byte limit (UTF-8 length computed only when it could). */
function tooLong(line: string): boolean {
	if (line.length * 3 <= MAX_LINE + 1) return false;
	if (line.length > MAX_LINE + 1) return true;
	return Buffer.byteLength(line, "utf8") > MAX_LINE + 1;
}

export function errorText(err: unknown): string {
	if (err instanceof Error) return err.message;
	try {
		return typeof err === "string" ? err : JSON.stringify(err);
	} catch {
		return String(err);
	}
}

/** console.error that never throws. */
export function logError(text: string): void {
	try {
		console.error(text);
	} catch {
		// nothing left to do
	}
}

/** `~/...` expansion for paths taken from the environment. */
export function expandHome(p: string): string {
	if (p === "~") return os.homedir();
	if (p.startsWith("~/")) return path.join(os.homedir(), p.slice(2));
	return p;
}
