// Output while a run prints: progress notifications for a request with a
// progress token, log notifications otherwise; bounded by the stream cap.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, connect } from "./harness.mjs";

for (const transport of ["stdio", "http"]) {
  describe(`output while a run prints, over ${transport}`, () => {
    let session;
    before(async () => {
      session = await connect(transport);
    });
    after(async () => session.close());

    for (const lang of ["python", "node"]) {
      it(`${lang}: the first print arrives before the run ends`, async () => {
        const code =
          lang === "python"
            ? "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')\nresult = 1"
            : "console.log('first'); await new Promise((r) => setTimeout(r, 1500)); console.log('second'); return 1";
        const started = Date.now();
        const seen = [];
        const answer = await call(session.client, "run", { lang, code }, {
          onprogress: (progress) => seen.push({ at: Date.now() - started, ...progress }),
          timeout: 60_000,
        });
        const ended = Date.now() - started;
        assert.equal(answer.structuredContent.result, 1);
        // What arrives live is the output so far, in order (the answer
        // carries all of it; a client may drop a notification that arrives
        // in the same read as the answer).
        const text = seen.map((p) => p.message).join("");
        assert.ok("first\nsecond\n".startsWith(text) && text.startsWith("first\n"), JSON.stringify(text));
        assert.equal(answer.structuredContent.stdout, "first\nsecond\n");
        const first = seen.find((p) => p.message.includes("first"));
        assert.ok(first.at < ended - 1000, `first print at ${first.at} ms, the run ended at ${ended} ms`);
        assert.ok(seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress), "progress counts up");
      });
    }

    it("a flood is sent only up to the stream's head budget", async () => {
      const seen = [];
      const answer = await call(session.client, "run", {
        lang: "node",
        code: "for (let i = 0; i < 200000; i++) console.log('x'.repeat(99)); return 1",
      }, { onprogress: (p) => seen.push(p.message), timeout: 60_000 });
      const live = seen.join("").length;
      const stdout = answer.structuredContent.stdout;
      assert.match(stdout, /truncated/);
      // The default cap keeps at most its head live (60 %): never the 20 MB printed.
      assert.ok(live > 0 && live <= stdout.length, `${live} bytes live, ${stdout.length} in the answer`);
    });

    it("without a progress token, output goes out as log messages", async () => {
      const logs = [];
      session.client.setNotificationHandler(LoggingMessageNotificationSchema, (note) => logs.push(note.params));
      await session.client.setLoggingLevel("info");
      await call(session.client, "run", { lang: "python", code: "import sys\nprint('out')\nprint('err', file=sys.stderr)" });
      await new Promise((done) => setTimeout(done, 200));
      const joined = (logger) => logs.filter((l) => l.logger === logger).map((l) => l.data).join("");
      assert.equal(joined("stdout"), "out\n");
      assert.equal(joined("stderr"), "err\n");
      assert.ok(logs.every((l) => l.level === (l.logger === "stdout" ? "info" : "warning")), JSON.stringify(logs));
      logs.length = 0;
      await session.client.setLoggingLevel("error");
      await call(session.client, "run", { lang: "python", code: "print('quiet')" });
      await new Promise((done) => setTimeout(done, 200));
      assert.deepEqual(logs, [], "below the level the client set");
    });
  });
}
