// Every run response carries what it cost: usage {cpu_ms, peak_memory_bytes,
// wall_ms}, measured by the engine, for a failing run too.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "./harness.mjs";

describe("usage in the run response", () => {
  let server;
  let url;
  let dataDir;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "code-runner-usage-"));
    ({ server, url } = await serve(dataDir));
  });
  after(async () => {
    server.kill("SIGTERM");
    await new Promise((done) => server.once("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
  });
  const run = async (body) =>
    (await fetch(`${url}/v1/call/code-runner::run`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    })).json();

  const busy = {
    // Fixed work, not a wall-clock loop: a busy machine gives the thread less
    // of a core, but the work costs the same CPU.
    python: "x = 0\nfor i in range(2_000_000):\n    x = (x + i * 7) % 1_000_003\nblock = bytearray(32 << 20)",
    node: "let x = 0; for (let i = 0; i < 60_000_000; i++) { x = (x + i * 7) % 1_000_003; }; const b = new Uint8Array(32 << 20); return b.length",
  };
  for (const lang of ["python", "node"]) {
    it(`${lang}: CPU, peak memory and wall time, measured`, async () => {
      const answer = await run({ lang, code: busy[lang] });
      assert.equal(answer.exit_code, 0, JSON.stringify(answer));
      const { cpu_ms, peak_memory_bytes, wall_ms } = answer.usage;
      assert.ok(cpu_ms >= 20 && cpu_ms <= wall_ms + 50, JSON.stringify(answer.usage));
      assert.ok(peak_memory_bytes >= 32 << 20, JSON.stringify(answer.usage));
      assert.equal(wall_ms, answer.duration_ms);
      const failing = await run({ lang, code: lang === "python" ? "1 / 0" : "throw new Error('no')" });
      assert.equal(failing.exit_code, 1);
      assert.ok(failing.usage.cpu_ms > 0 && failing.usage.peak_memory_bytes > 0, JSON.stringify(failing.usage));
    });
  }
});
