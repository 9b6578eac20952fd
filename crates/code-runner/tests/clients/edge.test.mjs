// `/mcp` sits behind the HTTP API's edge rules: a foreign Origin or Host is
// refused before the MCP SDK sees the request, as for /v1/call.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "./harness.mjs";

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
});

/** POST /mcp with `headers`; resolves to { status, body }. */
function post(url, headers) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        path: "/mcp",
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
      },
      (res) => {
        let body = "";
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("error", reject);
    req.end(INITIALIZE);
  });
}

describe("/mcp and the edge rules", () => {
  let server;
  let url;
  let dataDir;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "code-runner-mcp-edge-"));
    ({ server, url } = await serve(dataDir));
  });
  after(async () => {
    server.kill("SIGTERM");
    await new Promise((done) => server.once("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("serves the server's own origin", async () => {
    const own = await post(url, { origin: url });
    assert.equal(own.status, 200, own.body);
    assert.match(own.body, /"serverInfo"/);
  });

  it("refuses a foreign Origin", async () => {
    const foreign = await post(url, { origin: "http://evil.example" });
    assert.equal(foreign.status, 403, foreign.body);
    assert.match(foreign.body, /"code"/);
  });

  it("refuses a Host that is not this server's (DNS rebinding)", async () => {
    const rebound = await post(url, { host: "evil.example" });
    assert.ok(rebound.status === 403 || rebound.status === 421, `${rebound.status} ${rebound.body}`);
    assert.doesNotMatch(rebound.body, /serverInfo/);
  });

  it("refuses a body that is not JSON", async () => {
    const plain = await post(url, { "content-type": "text/plain" });
    assert.equal(plain.status, 415, plain.body);
  });
});
