// pi's settings.json: read for `session.start`, and the atomic write behind
// the `saveSettings` effect (only the `contextPrune` key changes).

import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Json } from "../../condense-engine/client/protocol.ts";
import { expandHome } from "../../condense-engine/client/sidecar.ts";

/** `PI_CODING_AGENT_DIR`, else `~/.pi/agent`. */
export function agentDir(): string {
	const env = process.env.PI_CODING_AGENT_DIR;
	if (env && env.trim() !== "") return path.resolve(expandHome(env.trim()));
	return path.join(os.homedir(), ".pi", "agent");
}

export function settingsPath(): string {
	return path.join(agentDir(), "settings.json");
}

/** The whole settings.json value, or null when it is missing or unreadable. */
export function readSettings(): Json {
	try {
		return JSON.parse(fs.readFileSync(settingsPath(), "utf8"));
	} catch {
		return null;
	}
}

/**
 * Replaces `contextPrune` in settings.json, keeping every other key: the new
 * text goes to a temporary file next to it, then is renamed over it. A file
 * that exists but is not a JSON object is left alone (an error is thrown) so a
 * user's broken settings are never overwritten with ours.
 */
export function saveContextPrune(block: unknown): void {
	const file = settingsPath();
	let current: Record<string, unknown> = {};
	let text: string | undefined;
	try {
		text = fs.readFileSync(file, "utf8");
	} catch (err: any) {
		if (err?.code !== "ENOENT") throw err;
	}
	if (text !== undefined && text.trim() !== "") {
		const parsed = JSON.parse(text);
		if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
			throw new Error(`${file} does not hold a JSON object; not overwriting it`);
		}
		current = parsed;
	}
	const next = { ...current, contextPrune: block };
	fs.mkdirSync(path.dirname(file), { recursive: true });
	const tmp = `${file}.${randomBytes(8).toString("hex")}.tmp`;
	try {
		// Flushed to disk before the rename, so a crash never leaves an empty
		// or partial settings.json in place of the old one.
		let mode = 0o644; // pi's own default, before the umask
		try {
			mode = fs.statSync(file).mode & 0o777; // keep the file's permissions
		} catch {
			// no file yet
		}
		const fd = fs.openSync(tmp, "w", mode);
		try {
			fs.writeFileSync(fd, JSON.stringify(next, null, 2) + "\n", "utf8");
			fs.fsyncSync(fd);
		} finally {
			fs.closeSync(fd);
		}
		fs.renameSync(tmp, file);
	} catch (err) {
		try {
			fs.unlinkSync(tmp);
		} catch {
			// not created
		}
		throw err;
	}
}
