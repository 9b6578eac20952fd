// Starts the real code-runner binary and connects the official MCP SDK's
// client to it, over stdio (`code-runner mcp`) or streamable HTTP
// (`code-runner serve`, `/mcp`). CODE_RUNNER_BIN names the binary (scripts/test
// sets it to the release build).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export const BIN = process.env.CODE_RUNNER_BIN;
if (!BIN) throw new Error("set CODE_RUNNER_BIN to the code-runner binary (scripts/test does)");

/**
 * A client connected over `transport` ("stdio" or "http"), declaring
 * `capabilities` (e.g. `{ elicitation: {} }`); `close()` ends both sides.
 */
export async function connect(transport, capabilities = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "code-runner-mcp-"));
  const client = new Client({ name: "code-runner-tests", version: "1.0.0" }, { capabilities });
  let server;
  let url;
  if (transport === "stdio") {
    const stdio = new StdioClientTransport({
      command: BIN,
      args: ["mcp", "--data-dir", dataDir],
      env: { ...process.env, CODE_RUNNER_LOG: "warn" },
      stderr: "inherit",
    });
    await client.connect(stdio);
  } else {
    ({ server, url } = await serve(dataDir));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  }
  return {
    client,
    url,
    async close() {
      await client.close();
      if (server) {
        server.kill("SIGTERM");
        await new Promise((done) => server.once("exit", done));
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** `code-runner serve` on a free loopback port; resolves once it listens. */
export function serve(dataDir) {
  return new Promise((resolve, reject) => {
    const server = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir], {
      env: { ...process.env, CODE_RUNNER_LOG: "info", NO_COLOR: "1" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${seen}`)), 60_000);
    server.stderr.on("data", (chunk) => {
      seen += chunk;
      const match = /serving on (http:\/\/[0-9.:]+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolve({ server, url: match[1] });
      }
    });
    server.once("exit", (code) => reject(new Error(`the server exited (${code}):\n${seen}`)));
  });
}

/** Calls tool `name` with `args`. */
export function call(client, name, args, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

/** Resolves when `predicate()` holds, polling; rejects after `ms`. */
export async function eventually(predicate, ms = 20_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await predicate()) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error("timed out waiting");
}
