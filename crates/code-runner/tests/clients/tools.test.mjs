// The MCP server's tools through the official TypeScript SDK, over stdio and
// over streamable HTTP: the same contract on both.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, connect, eventually } from "./harness.mjs";

for (const transport of ["stdio", "http"]) {
  describe(`MCP over ${transport}`, () => {
    let session;
    let changes = 0;
    before(async () => {
      session = await connect(transport);
      session.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        changes += 1;
      });
    });
    after(async () => session.close());

    it("lists the operations with their request and response schemas", async () => {
      const { tools } = await session.client.listTools();
      const names = tools.map((t) => t.name);
      for (const name of ["run", "teardown", "register_function"]) {
        assert.ok(names.includes(name), `${name} in ${names}`);
      }
      const run = tools.find((t) => t.name === "run");
      assert.equal(run.inputSchema.type, "object");
      assert.ok(run.inputSchema.properties.lang, "lang is a field");
      assert.equal(run.outputSchema.type, "object");
      assert.match(run.description, /assign `result`/);
      assert.match(run.description, /`return` the value/);
      assert.ok(!names.includes("configuration::get") && !names.some((n) => n.includes("::")));
    });

    it("runs python and node; the bus response is structuredContent and text", async () => {
      const py = await call(session.client, "run", { lang: "python", code: "print('hi')\nresult = 2 + 2" });
      assert.equal(py.isError, false);
      assert.equal(py.structuredContent.result, 4);
      assert.equal(py.structuredContent.stdout, "hi\n");
      assert.deepEqual(JSON.parse(py.content[0].text), py.structuredContent);
      const js = await call(session.client, "run", { lang: "node", code: "console.log('hi'); return 2 + 2" });
      assert.equal(js.isError, false);
      assert.equal(js.structuredContent.result, 4);
      assert.equal(js.structuredContent.runtime_id, undefined, "a one-shot run returns no id");
    });

    it("returns a shown figure as an image block and keeps its base64 out of the text", async () => {
      const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\nresult = 1";
      const answer = await call(session.client, "run", { lang: "python", code });
      assert.equal(answer.isError, false);
      const [text, image, ...rest] = answer.content;
      assert.equal(rest.length, 0);
      assert.equal(image.type, "image");
      assert.equal(image.mimeType, "image/png");
      assert.equal(Buffer.from(image.data, "base64").subarray(1, 4).toString(), "PNG");
      assert.equal(JSON.parse(text.text).images, 1, "the text counts the images");
      assert.ok(!text.text.includes(image.data.slice(0, 64)));
      // Once in the answer: the structured content names it, without its bytes.
      assert.deepEqual(answer.structuredContent.images, [{ mime_type: "image/png" }]);
    });

    it("takes files in and links the collected ones: resource_link blocks read back intact", async () => {
      const binary = Buffer.from([0, 1, 2, 254, 255, 10, 13]);
      const code = [
        "import csv, os",
        "rows = list(csv.reader(open('data/in.csv')))",
        "os.makedirs('out', exist_ok=True)",
        "open('out/doubled.csv', 'w').write(''.join(f'{r[0]},{int(r[1]) * 2}\\n' for r in rows))",
        "open('out/copy.bin', 'wb').write(open('raw.bin', 'rb').read())",
        "result = len(rows)",
      ].join("\n");
      const args = {
        lang: "python",
        code,
        files: [
          { path: "data/in.csv", text: "a,1\nb,2\n" },
          { path: "raw.bin", base64: binary.toString("base64") },
        ],
        collect: ["out/*"],
      };
      const answer = await call(session.client, "run", args);
      assert.equal(answer.isError, false, JSON.stringify(answer.content));
      assert.equal(answer.structuredContent.result, 2);
      const [text, ...links] = answer.content;
      assert.deepEqual(
        links.map((b) => [b.type, b.name, b.mimeType, b.size]),
        [
          ["resource_link", "out/copy.bin", "application/octet-stream", 7],
          ["resource_link", "out/doubled.csv", "text/csv", 8],
        ],
      );
      for (const link of links) assert.match(link.uri, /^code-runner:\/\/files\/lk_\w+\//);
      const listed = JSON.parse(text.text).files;
      assert.deepEqual(
        listed.map((f) => [f.path, f.size, f.base64, f.preview]),
        [["out/copy.bin", 7, undefined, undefined], ["out/doubled.csv", 8, undefined, "a,2\nb,4\n"]],
      );
      assert.deepEqual(answer.structuredContent.files.map((f) => f.uri), links.map((l) => l.uri));
      // Read back by uri: resources/read, and the read_file tool.
      const bin = await session.client.readResource({ uri: links[0].uri });
      assert.deepEqual(Buffer.from(bin.contents[0].blob, "base64"), binary, "binary: a blob");
      const csv = await session.client.readResource({ uri: links[1].uri });
      assert.equal(csv.contents[0].text, "a,2\nb,4\n", "textual UTF-8: text");
      assert.equal(csv.contents[0].mimeType, "text/csv");
      const tool = await call(session.client, "read_file", { uri: links[1].uri });
      assert.equal(tool.isError, false);
      assert.equal(tool.content[0].resource.text, "a,2\nb,4\n");
      assert.equal(tool.structuredContent.base64, undefined, "the bytes are in the block, once");
      const unknown = links[1].uri.replace(/lk_\w+/, "lk_NotAToken00000000000000000000000");
      await assert.rejects(session.client.readResource({ uri: unknown }), /no such linked file/);

      // collect_mode "inline": the files embedded, each byte once.
      const inline = await call(session.client, "run", { ...args, collect_mode: "inline" });
      const [, ...blocks] = inline.content;
      assert.deepEqual(
        blocks.map((b) => [b.type, b.resource.uri, b.resource.mimeType]),
        [
          ["resource", "code-runner://files/out/copy.bin", "application/octet-stream"],
          ["resource", "code-runner://files/out/doubled.csv", "text/csv"],
        ],
      );
      assert.deepEqual(Buffer.from(blocks[0].resource.blob, "base64"), binary);
      assert.equal(blocks[1].resource.text, "a,2\nb,4\n");
      assert.equal(inline.structuredContent.files[0].base64, undefined);
      const { tools } = await session.client.listTools();
      const run = tools.find((t) => t.name === "run");
      assert.ok(run.inputSchema.properties.files && run.inputSchema.properties.collect, "files and collect are fields");
      assert.ok(run.inputSchema.properties.collect_mode, "collect_mode is a field");
    });

    it("keeps a runtime, reuses it and tears it down", async () => {
      const kept = await call(session.client, "run", { lang: "python", code: "x = 40", keep: true });
      const id = kept.structuredContent.runtime_id;
      assert.match(id, /^rt_/);
      const again = await call(session.client, "run", { lang: "python", code: "result = x + 2", runtime_id: id });
      assert.equal(again.structuredContent.result, 42);
      const down = await call(session.client, "teardown", { runtime_id: id });
      assert.equal(down.isError, false);
      assert.equal(down.structuredContent.torn_down, true);
      const gone = await call(session.client, "run", { lang: "python", code: "result = x", runtime_id: id });
      assert.equal(gone.isError, true);
      assert.match(gone.content[0].text, /^code-runner::(expired|runtime_not_found): /);
    });

    it("answers a failing script as a result, a contract error as isError", async () => {
      const failing = await call(session.client, "run", { lang: "python", code: "1 / 0" });
      assert.equal(failing.isError, false);
      assert.equal(failing.structuredContent.exit_code, 1);
      assert.match(failing.structuredContent.stderr, /ZeroDivisionError/);
      const slow = await call(session.client, "run", { lang: "node", code: "while (true) {}", timeout_ms: 200 });
      assert.equal(slow.isError, true);
      assert.match(slow.content[0].text, /^code-runner::timeout: /);
      assert.equal(slow.structuredContent, undefined);
      const bad = await call(session.client, "run", { lang: "cobol", code: "x" });
      assert.equal(bad.isError, true);
      assert.match(bad.content[0].text, /^code-runner::invalid_request: .*lang/);
    });

    it("shows a published function as a tool while it lives", async () => {
      const before = changes;
      const made = await call(session.client, "register_function", {
        function_id: "mcp-demo::greet",
        lang: "python",
        source: "def handler(payload):\n    return {'hello': payload['name']}",
        description: "Greets by name.",
      });
      assert.equal(made.isError, false, made.content[0].text);
      await eventually(() => changes > before);
      const { tools } = await session.client.listTools();
      const greet = tools.find((t) => t.name === "mcp-demo.greet");
      assert.ok(greet, `mcp-demo.greet in ${tools.map((t) => t.name)}`);
      assert.equal(greet.description, "Greets by name.");
      const answer = await call(session.client, "mcp-demo.greet", { name: "ada" });
      assert.deepEqual(answer.structuredContent, { hello: "ada" });
      const seen = changes;
      await call(session.client, "teardown", { namespace: "mcp-demo" });
      await eventually(() => changes > seen);
      const after = await session.client.listTools();
      assert.ok(!after.tools.some((t) => t.name === "mcp-demo.greet"));
      const unknown = await call(session.client, "mcp-demo.greet", { name: "ada" });
      assert.equal(unknown.isError, true);
    });

    it("aborts a run the client cancels", async () => {
      const kept = await call(session.client, "run", { lang: "node", code: "globalThis.x = 1; return 1", keep: true });
      const id = kept.structuredContent.runtime_id;
      const controller = new AbortController();
      const spinning = call(session.client, "run", { lang: "node", code: "while (true) {}", runtime_id: id, timeout_ms: 60_000 }, { signal: controller.signal });
      await new Promise((done) => setTimeout(done, 500));
      controller.abort();
      await assert.rejects(spinning);
      // The runtime runs one program at a time: had the loop gone on, this
      // would wait behind it for a minute.
      const started = Date.now();
      const next = await call(session.client, "run", { lang: "node", code: "return 7", runtime_id: id, timeout_ms: 60_000 });
      assert.ok(Date.now() - started < 20_000, `answered after ${Date.now() - started} ms`);
      assert.equal(next.structuredContent?.result, 7, JSON.stringify(next));
      await call(session.client, "teardown", { runtime_id: id });
    });
  });
}
