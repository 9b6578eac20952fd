// code-runner/page.js: the console:script asset. The console imports it and
// calls `setup(host)`; React comes from the console's import map (never bundled).

import { createRenderer } from "./function-trigger-message";
import { setHostTheme, type Theme } from "./lib/theme";

/** The part of the console's `host` this module uses (feature-detected). */
interface Host {
  functionTriggers?: { register(renderer: unknown): (() => void) | void };
  functionCalls?: { register(renderer: unknown): (() => void) | void };
  useTheme?: () => Theme;
}

/** Registers the cards; returns the teardown the console runs on reload. */
export default function setup(host: Host): () => void {
  // The shipped console calls it functionTriggers; the spec draft functionCalls.
  const registry = host.functionTriggers ?? host.functionCalls;
  if (typeof host.useTheme === "function") setHostTheme(host.useTheme);
  const unregister = registry?.register(createRenderer());
  return () => {
    if (typeof unregister === "function") unregister();
    setHostTheme(undefined);
  };
}
