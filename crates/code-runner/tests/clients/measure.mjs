// Measures what MCP and server-sent events add to a run, against the plain
// HTTP call in the same process tree (not a test: `node measure.mjs`, with
// CODE_RUNNER_BIN set; scripts/bench measures the rest):
//   - p50/p99 of `run` {lang: node, code: "return 1"} over HTTP, over MCP stdio and over /mcp;
//   - the latency from a guest's print to the client's event (SSE and MCP progress).
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, connect, serve } from "./harness.mjs";

const N = Number(process.env.N ?? 400);
const RUN = { lang: "node", code: "return 1" };

function quantiles(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { p50: +q(0.5).toFixed(3), p99: +q(0.99).toFixed(3) };
}

async function timed(n, once) {
  for (let i = 0; i < 20; i++) await once();
  const out = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await once();
    out.push(performance.now() - t);
  }
  return quantiles(out);
}

function postJson(url, body) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path: "/v1/call/code-runner::run", method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
      let data = "";
      res.on("data", (c) => (data += c));
      res.on("end", () => resolve(JSON.parse(data)));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}
import { Agent } from "node:http";
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/** A raw `tools/call` over /mcp in an initialized session (node's http, no SDK): the server's share. */
async function rawMcpCall(url) {
  const { hostname, port } = new URL(url);
  let session;
  const post = (body) =>
    new Promise((resolve, reject) => {
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" };
      if (session) headers["mcp-session-id"] = session;
      const req = request({ hostname, port, path: "/mcp", method: "POST", agent, headers }, (res) => {
        session ??= res.headers["mcp-session-id"];
        let data = "";
        res.on("data", (c) => (data += c));
        res.on("end", () => resolve(data));
      });
      req.on("error", reject);
      req.end(JSON.stringify(body));
    });
  await post({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "m", version: "1" } } });
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  let id = 1;
  return async () => {
    const answer = await post({ jsonrpc: "2.0", id: id++, method: "tools/call", params: { name: "run", arguments: RUN } });
    if (!answer.includes('"result"')) throw new Error(answer);
  };
}

/** ms from a print to its SSE event: the guest prints its own clock (Date.now()). */
function sseLatency(url) {
  const { hostname, port } = new URL(url);
  const code = "for (let i = 0; i < 20; i++) { console.log(String(Date.now())); await new Promise((r) => setTimeout(r, 120)); } return 1";
  return new Promise((resolve, reject) => {
    const lags = [];
    const req = request({ hostname, port, path: "/v1/call/code-runner::run", method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" } }, (res) => {
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith("event: stdout")) {
            const text = JSON.parse(block.split("\ndata: ")[1]).text;
            for (const line of text.split("\n").filter(Boolean)) lags.push(Date.now() - Number(line));
          }
        }
      });
      res.on("end", () => resolve(quantiles(lags)));
    });
    req.on("error", reject);
    req.end(JSON.stringify({ lang: "node", code, timeout_ms: 30000 }));
  });
}

const dataDir = mkdtempSync(join(tmpdir(), "code-runner-measure-"));
const { server, url } = await serve(dataDir);
const http = await timed(N, () => postJson(url, RUN));
const mcpHttp = await connect("http");
const overMcpHttp = await timed(N, () => call(mcpHttp.client, "run", RUN));
const mcpStdio = await connect("stdio");
const overMcpStdio = await timed(N, () => call(mcpStdio.client, "run", RUN));
const rawMcp = await timed(N, await rawMcpCall(url));
const sse = await sseLatency(url);
const progressLags = [];
await call(mcpStdio.client, "run", { lang: "node", code: "for (let i = 0; i < 20; i++) { console.log(String(Date.now())); await new Promise((r) => setTimeout(r, 120)); } return 1", timeout_ms: 30000 }, {
  onprogress: (p) => {
    for (const line of (p.message ?? "").split("\n").filter(Boolean)) progressLags.push(Date.now() - Number(line));
  },
  timeout: 60000,
});
console.log(JSON.stringify({ runs: N, http_ms: http, mcp_http_raw_client_ms: rawMcp, mcp_http_ms: overMcpHttp, mcp_stdio_ms: overMcpStdio, print_to_sse_event_ms: sse, print_to_mcp_progress_ms: quantiles(progressLags) }, null, 1));
// Issue 33's goals for the MCP edge, as differences of p50s in this run.
const goal = (what, extra, bound) =>
  console.log(`${what}: ${extra >= 0 ? "+" : ""}${extra.toFixed(2)} ms (goal ≤ ${bound} ms): ${extra <= bound ? "met" : "MISSED"}`);
goal("/mcp over plain HTTP, raw client (what the server adds)", rawMcp.p50 - http.p50, 0.3);
goal("MCP over stdio over plain HTTP (the SDK's client)", overMcpStdio.p50 - http.p50, 0.3);
console.log(`/mcp with the SDK's client over plain HTTP: +${(overMcpHttp.p50 - http.p50).toFixed(2)} ms (the part past the raw client's is the client's own)`);
await mcpStdio.close();
await mcpHttp.close();
server.kill("SIGTERM");
rmSync(dataDir, { recursive: true, force: true });
