// The built assets keep the console's rules: no second React, every CSS rule scoped.
// `npm test` builds first; a missing ui/dist/ fails here rather than passing vacuously.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const dist = join(__dirname, "..", "dist");
const read = (file: string) => readFileSync(join(dist, file), "utf8");

/** Every selector of a stylesheet, with the at-rule it sits in. */
function selectors(css: string): { selector: string; within: string }[] {
  const found: { selector: string; within: string }[] = [];
  const source = css.replace(/\/\*[^]*?\*\//g, "");
  const walk = (text: string, within: string) => {
    let at = 0;
    while (at < text.length) {
      const open = text.indexOf("{", at);
      if (open < 0) break;
      const prelude = text.slice(at, open).trim();
      let depth = 1;
      let close = open + 1;
      for (; close < text.length && depth > 0; close += 1) {
        if (text[close] === "{") depth += 1;
        else if (text[close] === "}") depth -= 1;
      }
      const body = text.slice(open + 1, close - 1);
      if (prelude.startsWith("@media") || prelude.startsWith("@supports") || prelude.startsWith("@scope")) walk(body, prelude);
      else if (!prelude.startsWith("@keyframes")) for (const selector of prelude.split(",")) found.push({ selector: selector.trim(), within });
      at = close;
    }
  };
  walk(source, "");
  return found;
}

describe("code-runner/page.js", () => {
  const page = read("code-runner/page.js");

  /// A second React in page.js breaks every hook in the console ("Invalid hook call").
  it("imports React from the console's import map and bundles no copy of it", () => {
    const imports = [...page.matchAll(/^\s*import\s[^;]*?from\s*"([^"]+)"/gm)].map((match) => match[1]);
    expect(imports.length).toBeGreaterThan(0);
    for (const specifier of imports) expect(["react", "react/jsx-runtime"]).toContain(specifier);
    expect(page).not.toMatch(/__CLIENT_INTERNALS_DO_NOT_USE|__SECRET_INTERNALS|react\.production|ReactCurrentDispatcher/);
  });

  /// The console calls the module's default export.
  it("default-exports setup", () => {
    expect(page).toMatch(/export\s*\{[^}]*\bsetup as default\b/);
  });
});

describe("code-runner/styles.css", () => {
  /// An unscoped rule restyles the whole console.
  it("scopes every rule under [data-iii-ui=\"code-runner\"]", () => {
    const all = selectors(read("code-runner/styles.css"));
    expect(all.length).toBeGreaterThan(20);
    for (const { selector, within } of all) {
      // esbuild may drop the attribute value's quotes; both forms match the same elements.
      expect(/^\[data-iii-ui="?code-runner"?\](\s|$)/.test(selector), `${within} ${selector}`).toBe(true);
    }
  });
});
