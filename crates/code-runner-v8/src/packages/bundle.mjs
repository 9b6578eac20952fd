// Bundles installed npm packages into ESM for code-runner's V8 runtimes.
// Run by the worker with the host's node (never by a guest), after
// `npm install --ignore-scripts` and the worker's checks:
//
//   node bundle.mjs <esbuild entry> <project dir> <out dir> <name>...
//
// Every listed package becomes one entry for its root and one per subpath
// export it declares (wildcards and non-JavaScript targets left out), all
// in one esbuild build with code splitting, so what two entries share is one
// chunk. The platform is a worker's: `worker`/`browser` conditions, Node's
// built-in modules left as imports (the runtime provides node:buffer,
// node:events, node:path, node:process and node:util, and refuses the rest
// by name), `process` and `Buffer` injected from those when a package uses
// them, `process.env.NODE_ENV` "production". Writes `<out>/files/*.js` and
// `<out>/map.json`: {"modules": {specifier: file}}.
import { builtinModules } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [esbuildEntry, project, out, ...names] = process.argv.slice(2);
const loaded = await import(esbuildEntry);
const esbuild = loaded.build ? loaded : loaded.default;

/** The most entries one list bundles (date-fns declares some 750). */
const MAX_ENTRIES = 4000;

function subpaths(name) {
  const manifest = JSON.parse(fs.readFileSync(path.join(project, "node_modules", name, "package.json"), "utf8"));
  const found = ["."];
  const exportsField = manifest.exports;
  if (exportsField && typeof exportsField === "object" && !Array.isArray(exportsField)) {
    for (const [key, target] of Object.entries(exportsField)) {
      if (key === "." || !key.startsWith("./") || key.includes("*")) continue;
      if (/\.(map|json|css|d\.ts|d\.mts|d\.cts|node|wasm)$/.test(key)) continue;
      if (!/\.[mc]?js"/.test(JSON.stringify(target))) continue;
      found.push(key);
    }
  }
  return found;
}

const entries = [];
const modules = {};
for (const name of names) {
  for (const sub of subpaths(name)) {
    const specifier = sub === "." ? name : `${name}/${sub.slice(2)}`;
    const file = `e${entries.length}`;
    entries.push({ in: specifier, out: file });
    modules[specifier] = `${file}.js`;
  }
}
if (entries.length > MAX_ENTRIES) {
  console.error(`the list declares ${entries.length} entry points (at most ${MAX_ENTRIES})`);
  process.exit(2);
}

const shim = path.join(project, "code-runner-shim.mjs");
fs.writeFileSync(shim, 'export { process } from "node:process";\nexport { Buffer } from "node:buffer";\n');
const builtins = [...builtinModules, ...builtinModules.map((name) => `node:${name}`)];

await esbuild.build({
  absWorkingDir: project,
  entryPoints: entries,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "browser",
  conditions: ["worker"],
  target: "es2024",
  outdir: path.join(out, "files"),
  chunkNames: "c-[hash]",
  external: builtins,
  inject: [shim],
  define: { "process.env.NODE_ENV": '"production"', global: "globalThis" },
  loader: { ".json": "json" },
  legalComments: "none",
  logLevel: "error",
  metafile: false,
});
fs.writeFileSync(path.join(out, "map.json"), JSON.stringify({ modules }));
