// A runtime_id is never logged in full, whatever the log level: the MCP SDK
// logs every response at debug, so the worker caps it (as it caps the
// WebSocket crates), and the log at trace holds no id the client was given.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN } from "./harness.mjs";

describe("the log of an MCP session", () => {
  it("holds no runtime_id in full at trace", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "code-runner-mcp-log-"));
    const child = spawn(BIN, ["mcp", "--data-dir", dataDir], {
      env: { ...process.env, CODE_RUNNER_LOG: "trace", NO_COLOR: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let log = "";
    child.stdout.on("data", (c) => (out += c));
    child.stderr.on("data", (c) => (log += c));
    const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "run", arguments: { lang: "python", code: "x = 1", keep: true } } });
    const until = Date.now() + 60_000;
    while (!/rt_[A-Za-z0-9]{32}/.test(out) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    child.stdin.end();
    await new Promise((done) => child.once("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
    const id = /rt_[A-Za-z0-9]{32}/.exec(out)?.[0];
    assert.ok(id, `the client got a runtime_id: ${out.slice(0, 500)}`);
    assert.ok(log.length > 0, "the session logged at trace");
    assert.ok(!log.includes(id.slice(7)), "the log quotes the runtime_id");
  });
});
