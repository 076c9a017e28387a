// pi's own modules, declared minimally so `tsc --noEmit` checks the shim
// without pi installed next to it (tests/shim_typecheck.rs). The shim
// feature-detects pi's API at runtime (pi 0.73 through 1.x), so these stay
// loose on purpose: only the sidecar protocol (`protocol.ts`) is typed
// strictly.
declare module "@mariozechner/pi-coding-agent" {
	export type ExtensionAPI = any;
	export type ExtensionContext = any;
}
