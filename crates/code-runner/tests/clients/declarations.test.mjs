// code-runner::describe's declarations through the official checkers: the
// TypeScript through `tsc --noEmit --strict` (npm's typescript, the UI's
// version) and the Python stubs through `mypy --strict` (PyPI's mypy, in a
// venv made on first use under the target directory), each with a usage
// snippet calling through iii.fn whose correct payloads must pass and whose
// wrong one must be reported. The schemas are real-world shapes, and the
// worker's own operations (schemars' schemas) are declared with them.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "./harness.mjs";
import { FUNCTIONS, PY_USAGE, PY_WRONG, TS_USAGE } from "./schemas.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "../../../..");
/** mypy's pinned release, installed from PyPI into TARGET/mypy-venv. */
const MYPY = "2.4.1";

/** The venv's mypy, made (python3 -m venv, pip install mypy==MYPY) when missing. */
function mypy() {
  const venv = join(process.env.CARGO_TARGET_DIR ?? join(ROOT, "target"), "mypy-venv");
  const bin = join(venv, "bin", "mypy");
  const version = existsSync(bin) ? spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout : "";
  if (!version.startsWith(`mypy ${MYPY} `)) {
    console.error(`declarations.test: installing mypy ${MYPY} from PyPI into ${venv}`);
    execFileSync("python3", ["-m", "venv", "--clear", venv], { stdio: "inherit" });
    const pip = [join(venv, "bin", "pip"), ["install", "--quiet", "--retries", "5", `mypy==${MYPY}`]];
    execFileSync(...pip, { stdio: "inherit", timeout: 600_000 });
  }
  return bin;
}

/** Runs `command` with `args` in `cwd`; resolves to { status, output }. */
function check(command, args, cwd) {
  const done = spawnSync(command, args, { cwd, encoding: "utf8", timeout: 300_000 });
  if (done.error) throw done.error;
  return { status: done.status, output: `${done.stdout}${done.stderr}` };
}

describe("describe's declarations through tsc --strict and mypy --strict", () => {
  let server;
  let url;
  let dataDir;
  let work;
  let mypyBin;
  const declared = {};
  // Everything slow and synchronous (mypy's install from PyPI, tsc, mypy)
  // happens while no request is on the wire: mypy is installed before the
  // server starts and both languages' declarations are fetched in one go,
  // so a keep-alive connection the server closed while a child ran is never
  // reused (the fresh-machine flake of issue 45).
  before(async () => {
    mypyBin = mypy();
    dataDir = mkdtempSync(join(tmpdir(), "code-runner-decl-"));
    work = mkdtempSync(join(tmpdir(), "code-runner-decl-check-"));
    ({ server, url } = await serve(dataDir));
    for (const f of FUNCTIONS) {
      const answer = await callFn("code-runner::register_function", {
        lang: "python",
        source: "def handler(payload):\n    return payload\n",
        ...f,
      });
      assert.equal(answer.registered, true, JSON.stringify(answer));
    }
    for (const lang of ["typescript", "python"]) declared[lang] = await declarations(lang);
  });
  after(async () => {
    server.kill("SIGTERM");
    await new Promise((done) => server.once("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });
  async function callFn(id, payload) {
    const res = await fetch(`${url}/v1/call/${id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
    });
    return res.json();
  }
  async function declarations(lang) {
    const answer = await callFn("code-runner::describe", { lang });
    const ids = answer.functions.map((f) => f.function_id);
    for (const f of FUNCTIONS) assert.ok(ids.includes(f.function_id), `${f.function_id} in ${ids}`);
    assert.ok(ids.includes("code-runner::run"), "the worker's own operations too");
    assert.equal(answer.omitted ?? 0, 0);
    return answer.declarations;
  }

  it("TypeScript: the declarations and calls through iii.fn pass tsc --strict; a wrong payload is an error", async () => {
    const dir = mkdtempSync(join(work, "ts-"));
    writeFileSync(join(dir, "iii.d.ts"), declared.typescript);
    writeFileSync(join(dir, "usage.ts"), TS_USAGE);
    const tsc = join(HERE, "node_modules", ".bin", "tsc");
    const args = ["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", "iii.d.ts", "usage.ts"];
    const { status, output } = check(tsc, args, dir);
    assert.equal(status, 0, `tsc --strict:\n${output}`);
    // Without the @ts-expect-error the wrong payload fails: the types are not `any`.
    writeFileSync(join(dir, "usage.ts"), TS_USAGE.replaceAll("@ts-expect-error", "(no longer expected)"));
    const wrong = check(tsc, args, dir);
    assert.notEqual(wrong.status, 0, "the wrong payload passed tsc");
    assert.match(wrong.output, /usage\.ts\(\d+,\d+\): error TS2322: Type '"JPY"'/);
    assert.equal(wrong.output.match(/error TS/g).length, 1, wrong.output);
  });

  it("Python: the stubs and calls through iii.fn pass mypy --strict; a wrong call is an error", async () => {
    const bin = mypyBin;
    const dir = mkdtempSync(join(work, "py-"));
    writeFileSync(join(dir, "iii_api.pyi"), declared.python);
    writeFileSync(join(dir, "usage.py"), PY_USAGE);
    writeFileSync(join(dir, "wrong.py"), PY_WRONG);
    const args = ["--strict", "--cache-dir", join(dir, ".mypy_cache"), "iii_api.pyi"];
    const good = check(bin, [...args, "usage.py"], dir);
    assert.equal(good.status, 0, `mypy --strict:\n${good.output}`);
    const wrong = check(bin, [...args, "wrong.py"], dir);
    assert.equal(wrong.status, 1, `mypy --strict on a wrong call:\n${wrong.output}`);
    // The call's overloads (keywords, one dict) both refuse it; the note shows the enum.
    assert.match(wrong.output, /wrong\.py:3: error: No overload variant .* \[call-overload\]/);
    assert.match(wrong.output, /currency: Literal\['USD', 'EUR', 'GBP'\]/);
    assert.match(wrong.output, /Found 1 error in 1 file/);
    assert.ok(!/iii_api\.pyi/.test(wrong.output), wrong.output);
  });
});
