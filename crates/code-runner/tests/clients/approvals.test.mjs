// Approvals over MCP through the official TypeScript SDK, over stdio and
// streamable HTTP: a run whose code calls a function published with
// `requires_approval` suspends. A client that declares elicitation is asked
// (`elicitation/create`) and the server resumes the run itself with the
// answer; a client without it gets `suspended` and uses the `resume` tool.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, connect } from "./harness.mjs";

const VAULT = {
  function_id: "vault::open",
  lang: "python",
  source: "def handler(payload):\n    return f\"opened {payload['door']}\"\n",
  requires_approval: true,
};
const OPEN = (door) =>
  `try { return await iii.trigger({ function_id: 'vault::open', payload: { door: ${door} } }); } catch (e) { return 'refused: ' + e.message; }`;

for (const transport of ["stdio", "http"]) {
  describe(`approvals over ${transport}`, () => {
    let asking;
    let plain;
    const asked = [];
    let decide = () => ({ action: "accept", content: { approve: true } });
    before(async () => {
      asking = await connect(transport, { elicitation: {} });
      asking.client.setRequestHandler(ElicitRequestSchema, (request) => {
        asked.push(request.params);
        return decide();
      });
      const registered = await call(asking.client, "register_function", VAULT);
      assert.equal(registered.isError, false, JSON.stringify(registered));
      plain = await connect(transport);
      const again = await call(plain.client, "register_function", VAULT);
      assert.equal(again.isError, false, JSON.stringify(again));
    });
    after(async () => {
      await asking.close();
      await plain.close();
    });

    it("asks the person through elicitation and resumes the run itself", async () => {
      const answer = await call(asking.client, "run", { lang: "node", code: OPEN(7) });
      assert.equal(answer.isError, false, JSON.stringify(answer));
      assert.equal(answer.structuredContent.result, "opened 7");
      assert.equal(answer.structuredContent.suspended, undefined);
      assert.equal(asked.length, 1);
      assert.equal(asked[0].mode ?? "form", "form");
      assert.match(asked[0].message, /vault::open/);
      assert.match(asked[0].message, /"door":7/);
      assert.deepEqual(asked[0].requestedSchema.required, ["approve"]);

      decide = () => ({ action: "accept", content: { approve: false, reason: "not today" } });
      const denied = await call(asking.client, "run", { lang: "node", code: OPEN(8) });
      assert.match(denied.structuredContent.result, /refused: .*not today/);
      decide = () => ({ action: "decline" });
      const declined = await call(asking.client, "run", { lang: "node", code: OPEN(9) });
      assert.match(declined.structuredContent.result, /refused: .*declined/);
    });

    it("without elicitation, answers suspended; the resume tool goes on", async () => {
      const answer = await call(plain.client, "run", { lang: "node", code: OPEN(3) });
      const { suspended, runtime_id } = answer.structuredContent;
      assert.equal(suspended.function_id, "vault::open");
      assert.deepEqual(suspended.payload, { door: 3 });
      assert.ok(runtime_id);
      const resumed = await call(plain.client, "resume", {
        runtime_id,
        call_id: suspended.call_id,
        approve: true,
      });
      assert.equal(resumed.isError, false, JSON.stringify(resumed));
      assert.equal(resumed.structuredContent.result, "opened 3");
      const again = await call(plain.client, "resume", {
        runtime_id,
        call_id: suspended.call_id,
        approve: true,
      });
      assert.equal(again.isError, true);
      assert.match(again.content[0].text, /expired/);
    });
  });
}
