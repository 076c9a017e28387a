// condense.json, OpenCode's counterpart of pi's `contextPrune` block.

import * as fs from "node:fs";
import * as path from "node:path";

import type { Json } from "../../condense-engine/client/protocol.ts";
import { errorText } from "../../condense-engine/client/sidecar.ts";

/** The config directories searched, global first: the later one's keys win. */
export function configDirs(directory: string, env: NodeJS.ProcessEnv = process.env): string[] {
	const globalDir = path.join(env.XDG_CONFIG_HOME?.trim() || path.join(env.HOME ?? "", ".config"), "opencode");
	return [globalDir, path.join(directory, ".opencode")];
}

/**
 * condense.json from `dirs`, merged key by key. A file that is missing is
 * skipped silently; one that is not a regular file (a FIFO would block
 * OpenCode's event loop for good, `/dev/zero` would never end), not JSON or
 * not an object is skipped with a line to `warn`, so OpenCode always starts.
 */
export function readConfig(dirs: string[], warn: (line: string) => void): { [key: string]: Json } {
	const merged: { [key: string]: Json } = {};
	for (const dir of dirs) {
		const file = path.join(dir, "condense.json");
		let text: string;
		try {
			if (!fs.statSync(file).isFile()) {
				warn(`condense: ${file} is not a regular file; ignored`);
				continue;
			}
			text = fs.readFileSync(file, "utf8");
		} catch (err: any) {
			if (err?.code !== "ENOENT" && err?.code !== "ENOTDIR") warn(`condense: ${file} cannot be read (${errorText(err)}); ignored`);
			continue;
		}
		try {
			const v = JSON.parse(text) as unknown;
			if (v && typeof v === "object" && !Array.isArray(v)) Object.assign(merged, v as { [key: string]: Json });
			else warn(`condense: ${file} is not a JSON object; ignored`);
		} catch (err) {
			warn(`condense: ${file} is not valid JSON (${errorText(err)}); ignored`);
		}
	}
	return merged;
}
