// POST /v1/call/code-runner::run with Accept: text/event-stream, read with a
// raw HTTP client: output events while the run prints, one final event, the
// caps, errors, and a client that leaves mid-stream.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, serve } from "./harness.mjs";

/** Posts a run asking for events; `onEvent(event, res, req)` sees each as it arrives. */
function runEvents(url, body, onEvent = () => {}) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const events = [];
    const req = request(
      {
        hostname,
        port,
        path: "/v1/call/code-runner::run",
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
      },
      (res) => {
        let buffer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          buffer += chunk;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = { at: Date.now() };
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) event.event = line.slice(7);
              if (line.startsWith("data: ")) event.data = JSON.parse(line.slice(6));
            }
            if (event.event) {
              events.push(event);
              onEvent(event, res, req);
            }
          }
        });
        res.on("end", () => resolve({ status: res.statusCode, type: res.headers["content-type"], events }));
        res.on("error", () => resolve({ status: res.statusCode, events }));
      },
    );
    req.on("error", (err) => (err.code === "ECONNRESET" ? resolve({ events }) : reject(err)));
    req.end(JSON.stringify(body));
  });
}

describe("a run as server-sent events", () => {
  let server;
  let url;
  let dataDir;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "code-runner-sse-"));
    ({ server, url } = await serve(dataDir));
  });
  after(async () => {
    server.kill("SIGTERM");
    await new Promise((done) => server.once("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const lang of ["python", "node"]) {
    it(`${lang}: the first output arrives before the run ends, then one result`, async () => {
      const code =
        lang === "python"
          ? "import sys, time\nprint('first', flush=True)\nprint('oops', file=sys.stderr, flush=True)\ntime.sleep(1)\nprint('second')\nresult = 5"
          : "console.log('first'); console.error('oops'); await new Promise((r) => setTimeout(r, 1000)); console.log('second'); return 5";
      const { status, type, events } = await runEvents(url, { lang, code });
      assert.equal(status, 200);
      assert.match(type, /^text\/event-stream/);
      const last = events.at(-1);
      assert.equal(last.event, "result");
      assert.equal(events.filter((e) => e.event === "result" || e.event === "error").length, 1);
      assert.equal(last.data.result, 5);
      assert.equal(last.data.stdout, "first\nsecond\n");
      const out = events.filter((e) => e.event === "stdout");
      assert.equal(out.map((e) => e.data.text).join(""), "first\nsecond\n");
      assert.equal(events.filter((e) => e.event === "stderr").map((e) => e.data.text).join(""), "oops\n");
      assert.ok(out[0].at < last.at - 500, "the first print came well before the answer");
    });
  }

  it("sends no more than the stream's head budget live under a flood", async () => {
    const { events } = await runEvents(url, {
      lang: "python",
      code: "import sys\nfor _ in range(200000):\n    sys.stdout.write('y' * 99 + '\\n')\nresult = 1",
    });
    const live = events.filter((e) => e.event === "stdout").map((e) => e.data.text).join("");
    const last = events.at(-1);
    assert.equal(last.event, "result");
    assert.match(last.data.stdout, /truncated/);
    assert.ok(live.length > 0 && last.data.stdout.startsWith(live.slice(0, 1000)));
    assert.ok(live.length < last.data.stdout.length, `${live.length} bytes live of a 20 MB flood`);
    assert.ok(events.length < 200, `${events.length} events, gathered, not one per write`);
  });

  it("ends with an error event for a contract error", async () => {
    const { status, events } = await runEvents(url, { lang: "node", code: "while (true) {}", timeout_ms: 200 });
    assert.equal(status, 200);
    assert.equal(events.length, 1);
    assert.equal(events[0].event, "error");
    assert.equal(events[0].data.error.code, "code-runner::timeout");
  });

  it("a client that leaves mid-stream leaves nothing behind", async () => {
    const health = async () => (await (await fetch(`${url}/healthz`)).json()).runtimes.live;
    await runEvents(url, { lang: "node", code: "console.log('spinning'); while (true) {}", timeout_ms: 60_000 }, (event, res, req) => {
      if (event.event === "stdout") req.destroy();
    });
    await eventually(async () => (await health()) === 0, 20_000);
  });

  it("answers as today without the header", async () => {
    const res = await fetch(`${url}/v1/call/code-runner::run`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ lang: "python", code: "result = 2 + 2" }),
    });
    assert.match(res.headers.get("content-type"), /^application\/json/);
    assert.equal((await res.json()).result, 4);
  });
});
