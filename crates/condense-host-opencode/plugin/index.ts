// The plugin's entry when OpenCode loads it by package name. For a plugin
// folder, a file there does the same with this directory's `plugin.ts`:
//
//   import { tool } from "@opencode-ai/plugin";
//   import { condensePlugin } from "<this directory>/plugin.ts";
//   export const CondensePlugin = condensePlugin(tool);
//
// (OpenCode calls every function a plugin module exports, so the module
// exports the plugin only.)

import { tool } from "@opencode-ai/plugin";
import { condensePlugin } from "./plugin.ts";

export const CondensePlugin = condensePlugin(tool);
