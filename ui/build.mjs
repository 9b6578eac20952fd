// Builds ui/dist/ (git-ignored; crates/code-runner/build.rs runs this when it
// is missing or stale, and the binary embeds the result):
//   code-runner/page.js      console:script  setup(host); React from the console's import map
//   code-runner/styles.css   console:style   every rule under [data-iii-ui="code-runner"]
//   playground/playground.js GET /           the playground, with its own React
//   playground/playground.css, playground/index.html
// `node build.mjs --watch` rebuilds on change (pair it with III_CODE_RUNNER_UI_WATCH=1).

import { context, build } from "esbuild";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, "dist");
const watch = process.argv.includes("--watch");

// The only bare imports the console's import map resolves (README §4b).
const consoleProvided = ["react", "react/jsx-runtime", "react-dom", "react-dom/client", "@iii-dev/console-ui", "@iii/console"];

const common = {
  bundle: true,
  jsx: "automatic",
  target: ["es2022"],
  logLevel: "warning",
  legalComments: "none",
};

const targets = [
  {
    ...common,
    entryPoints: [join(root, "src/page.tsx")],
    outfile: join(dist, "code-runner/page.js"),
    format: "esm",
    external: consoleProvided,
    // Readable in the console's devtools; it is small.
    minify: false,
  },
  {
    ...common,
    entryPoints: [join(root, "src/styles.css")],
    outfile: join(dist, "code-runner/styles.css"),
  },
  {
    ...common,
    entryPoints: [join(root, "src/playground/main.tsx")],
    outfile: join(dist, "playground/playground.js"),
    format: "esm",
    minify: true,
    define: { "process.env.NODE_ENV": '"production"' },
  },
  {
    ...common,
    entryPoints: [join(root, "src/playground/playground.css")],
    outfile: join(dist, "playground/playground.css"),
    minify: true,
  },
];

/** Writes `contents` to `path` unless it already holds exactly that, so an
 * unchanged asset keeps its time and cargo does not rebuild the binary for it. */
async function writeIfChanged(path, contents) {
  const before = await readFile(path).catch(() => null);
  if (before && Buffer.compare(before, Buffer.from(contents)) === 0) return;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, contents);
}

async function copyHtml() {
  await writeIfChanged(join(dist, "playground/index.html"), await readFile(join(root, "src/playground/index.html")));
}

if (watch) {
  await copyHtml();
  const contexts = await Promise.all(targets.map((options) => context(options)));
  await Promise.all(contexts.map((ctx) => ctx.watch()));
  console.log("watching ui/src; rebuilt assets land in ui/dist/");
} else {
  const results = await Promise.all(targets.map((options) => build({ ...options, write: false })));
  for (const file of results.flatMap((result) => result.outputFiles)) await writeIfChanged(file.path, file.contents);
  await copyHtml();
  for (const file of ["code-runner/page.js", "code-runner/styles.css", "playground/playground.js", "playground/playground.css", "playground/index.html"]) {
    const { size } = await stat(join(dist, file));
    console.log(`ui/dist/${file}  ${(size / 1024).toFixed(1)} KB`);
  }
}
