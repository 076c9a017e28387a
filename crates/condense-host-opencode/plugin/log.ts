// condense's per-session event log inside OpenCode's data directory.
//
// OpenCode gives plugins no storage, so condense keeps the entries it would
// append to a pi session file (`context-prune-*` custom entries) in one JSONL
// file per session, each line tagged with the OpenCode message it follows
// (`after`). On resume the branch pi would hand the sidecar is rebuilt from
// the session's messages with these entries put back after their messages.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { OcMessage } from "./messages.ts";
import { isCompaction, isCompactionSummary, toPi } from "./messages.ts";

/** `$XDG_DATA_HOME/opencode/storage/plugin/condense` (where peers keep theirs). */
export function storageDir(): string {
	const data = process.env.XDG_DATA_HOME?.trim() || path.join(os.homedir(), ".local", "share");
	return path.join(data, "opencode", "storage", "plugin", "condense");
}

/**
 * One logged line: a pi session entry plus the OpenCode message it follows,
 * or (`reported`) the plugin's own mark that the assistant message `after`
 * went to the sidecar, so a new process reports exactly the rest.
 */
export interface LoggedEntry {
	type: "custom" | "custom_message" | "reported";
	id: string;
	timestamp: string;
	after: string | null;
	[key: string]: unknown;
}

/** A session id that is safe as a file name (OpenCode's are `ses_…`). */
function safeName(sessionID: string): string | undefined {
	return /^[A-Za-z0-9_-]{1,200}$/.test(sessionID) ? sessionID : undefined;
}

/** Whether `file` is absent or a regular file (symlinks followed): never a FIFO or a device. */
function regularOrMissing(file: string): boolean {
	try {
		return fs.statSync(file).isFile();
	} catch (err: any) {
		return err?.code === "ENOENT";
	}
}

export class EventLog {
	readonly dir: string;
	readonly sessionID: string;
	readonly file: string | undefined;
	private count = 0;

	constructor(dir: string, sessionID: string) {
		this.dir = dir;
		this.sessionID = sessionID;
		const name = safeName(sessionID);
		this.file = name === undefined ? undefined : path.join(dir, `${name}.jsonl`);
	}

	/** The logged entries, in order (unreadable lines skipped). */
	read(): LoggedEntry[] {
		if (!this.file) return [];
		let text: string;
		try {
			if (!regularOrMissing(this.file)) return [];
			text = fs.readFileSync(this.file, "utf8");
		} catch {
			return [];
		}
		const out: LoggedEntry[] = [];
		for (const line of text.split("\n")) {
			if (!line.trim()) continue;
			try {
				const e = JSON.parse(line) as unknown;
				if (e && typeof e === "object" && !Array.isArray(e)) out.push(e as LoggedEntry);
			} catch {
				// a torn last line (a crash mid-write) is skipped
			}
		}
		this.count = out.length;
		return out;
	}

	/** Appends entries (one write, so a batch lands whole or is torn only at its end). */
	append(entries: Omit<LoggedEntry, "id" | "timestamp">[]): void {
		if (!this.file || entries.length === 0) return;
		const lines = entries.map((e) => {
			this.count += 1;
			return JSON.stringify({ ...e, id: `condense-${this.count}`, timestamp: new Date().toISOString() });
		});
		fs.mkdirSync(this.dir, { recursive: true });
		// A FIFO in its place would block OpenCode's event loop for good.
		if (!regularOrMissing(this.file)) throw new Error(`${this.file} is not a regular file`);
		fs.appendFileSync(this.file, lines.join("\n") + "\n");
	}
}

/**
 * How many of `messages` (from the start) the sidecar gets as its branch at
 * `session.start`; the finished assistant messages after them are reported
 * as turns. With a log: up to the last message a previous process reported.
 * Without one (condense meets a session it never saw, e.g. enabled mid-way):
 * every message up to the first unfinished assistant message, so its past
 * turns are rescanned at start (one flush later) rather than replayed turn
 * by turn (a flush per closed chain, each an LLM call).
 */
export function knownCount(messages: readonly OcMessage[], logged: readonly LoggedEntry[]): number {
	if (logged.length === 0) {
		const open = messages.findIndex((m) => m.info.role === "assistant" && !m.info.time.completed);
		return open < 0 ? messages.length : open;
	}
	const reported = new Set(logged.filter((e) => e.type === "reported").map((e) => e.after));
	let upTo = 0;
	messages.forEach((m, i) => {
		if (reported.has(m.info.id)) upTo = i + 1;
	});
	return upTo;
}

/**
 * The pi branch for `session.start`: the messages as entries, the log's
 * entries after theirs. `history` is the session's every message in stored
 * order (what a compaction left out too), needed only when `messages` starts
 * with a compaction.
 *
 * After a compaction the branch is laid out as pi's would be: what the
 * compaction left out, with its entries, then OpenCode's summary and the
 * tail of recent turns it kept, with theirs, then a `compaction` entry
 * keeping from that summary on, then what came after. The summaries of what
 * was left out are out of the context, as in pi, while their records stay in
 * the state (a ref still pages back); the left-out messages keep the turns
 * numbered as the sidecar numbered them.
 */
export function buildBranch(
	messages: readonly OcMessage[],
	logged: readonly LoggedEntry[],
	history: readonly OcMessage[] = messages,
): Record<string, unknown>[] {
	const entries = logged.filter((e) => e.type !== "reported");
	const placed = new Set<LoggedEntry>();
	const out: Record<string, unknown>[] = [];
	let parentId: string | null = null;
	const push = (entry: Record<string, unknown>) => {
		out.push({ ...entry, parentId });
		parentId = entry.id as string;
	};
	const pushLogged = (wanted: (e: LoggedEntry) => boolean) => {
		for (const e of entries) {
			if (placed.has(e) || !wanted(e)) continue;
			placed.add(e);
			const { after: _after, ...entry } = e;
			push(entry);
		}
	};
	const after = (id: string | null) => (e: LoggedEntry) => e.after === id;
	let n = 0;
	/** Pushes the message's entries; returns the first one's id. */
	const pushMessage = (m: OcMessage): string => {
		const { message, results } = toPi(m);
		const first = `m${n + 1}`;
		for (const pi of [message, ...results.map((r) => r.message)]) {
			n += 1;
			const ts = typeof pi.timestamp === "number" ? pi.timestamp : 0;
			push({ type: "message", id: `m${n}`, timestamp: new Date(ts).toISOString(), message: pi });
		}
		return first;
	};
	pushLogged(after(null));
	const compaction = messages[0] !== undefined && isCompaction(messages[0]) ? messages[0] : undefined;
	let rest = messages;
	if (compaction) {
		const at = history.findIndex((m) => m.info.id === compaction.info.id);
		const before = at < 0 ? [] : history.slice(0, at);
		const earlier = new Set(before.map((m) => m.info.id));
		const listed = new Set(messages.map((m) => m.info.id));
		for (const m of before) {
			if (listed.has(m.info.id)) continue;
			pushMessage(m);
			pushLogged(after(m.info.id));
		}
		// Kept by the compaction: its summary, then the tail it kept.
		const kept = messages.slice(1);
		let k = 0;
		while (k < kept.length && ((k === 0 && isCompactionSummary(kept[0] as OcMessage)) || earlier.has((kept[k] as OcMessage).info.id))) k += 1;
		rest = kept.slice(k);
		const shown = new Set(kept.map((m) => m.info.id));
		// Entries of messages the history did not give (none when it did).
		pushLogged((e) => e.after !== compaction.info.id && !shown.has(e.after as string));
		let firstKept: string | null = null;
		for (const m of kept.slice(0, k)) {
			const id = pushMessage(m);
			firstKept ??= id;
			pushLogged(after(m.info.id));
		}
		const ts = compaction.info.time?.created ?? 0;
		push({ type: "compaction", id: "compaction", timestamp: new Date(ts).toISOString(), summary: "", tokensBefore: 0, firstKeptEntryId: firstKept });
		pushLogged(after(compaction.info.id));
	}
	for (const m of rest) {
		pushMessage(m);
		pushLogged(after(m.info.id));
	}
	// Entries after a message that is gone (a revert) go last.
	pushLogged(() => true);
	return out;
}
