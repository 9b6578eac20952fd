"""Issue 45, item 2: approvals reach the person with the SDK's default
client (2026-07-28: an input_required round the client answers through its
elicitation callback) as with the legacy handshake (elicitation/create); a
client that cannot ask gets `suspended` and the `resume` tool, and a forged
requestState is refused."""

from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult

import json

from harness import server, structured, text

CONFIG = 'approval_required: ["billing::*"]\n'
CHARGE = "charged = 0\ndef handler(payload):\n    global charged\n    charged += 1\n    return f\"charged {payload['amount']}\"\n"
COUNT = "def handler(payload):\n    return charged\n"


async def publish(client):
    for function_id, source in (("billing::charge", CHARGE), ("billing::charged", COUNT)):
        answer = structured(await client.call_tool(
            "register_function", {"function_id": function_id, "lang": "python", "source": source}))
        assert answer["registered"], answer


async def charged(client):
    # A published function's answer is its handler's value, as JSON text.
    result = await client.call_tool("billing.charged", {})
    assert not result.is_error, text(result)
    return json.loads(text(result))


def answering(approve, reason=None, seen=None):
    async def callback(context, params):
        if seen is not None:
            seen.append(params.message)
        content = {"approve": approve}
        if reason:
            content["reason"] = reason
        return ElicitResult(action="accept", content=content)
    return callback


async def test_the_person_approves_through_the_client(mode):
    seen = []
    with server(CONFIG) as s:
        async with s.client(mode, elicitation_callback=answering(True, seen=seen)) as client:
            await publish(client)
            answer = structured(await client.call_tool(
                "run", {"lang": "node", "code": "console.log('before'); return await iii.fn.billing.charge({ amount: 5 })"}))
            assert answer["result"] == "charged 5", answer
            assert "before" in answer["stdout"], answer
            assert "suspended" not in answer, answer
            assert len(seen) == 1 and "billing::charge" in seen[0] and '"amount":5' in seen[0], seen
            assert await charged(client) == 1


async def test_the_person_denies_through_the_client(mode):
    with server(CONFIG) as s:
        async with s.client(mode, elicitation_callback=answering(False, "too much")) as client:
            await publish(client)
            code = "try { await iii.fn.billing.charge({ amount: 9 }); } catch (e) { return [e.code, e.message]; }"
            answer = structured(await client.call_tool("run", {"lang": "node", "code": code}))
            assert answer["result"][0] == "forbidden", answer
            assert "too much" in answer["result"][1], answer
            assert await charged(client) == 0


async def test_a_client_that_cannot_ask_gets_suspended_and_resumes(mode):
    with server(CONFIG) as s:
        async with s.client(mode) as client:
            await publish(client)
            answer = structured(await client.call_tool(
                "run", {"lang": "python", "code": "result = iii.fn.billing.charge(amount=3)"}))
            assert answer["success"] is False and answer["suspended"]["function_id"] == "billing::charge", answer
            assert await charged(client) == 0
            done = structured(await client.call_tool("resume", {
                "runtime_id": answer["runtime_id"], "call_id": answer["suspended"]["call_id"], "approve": True}))
            assert done["result"] == "charged 3", done
            assert await charged(client) == 1


async def test_a_forged_request_state_is_refused(mode):
    if mode != "auto":
        return
    with server(CONFIG) as s:
        async with s.client(mode) as client:
            await publish(client)
            try:
                await client.session.call_tool(
                    "run", {"lang": "node", "code": "return 1"},
                    input_responses={"approval": {"action": "accept", "content": {"approve": True}}},
                    request_state="rs1.forged.state", allow_input_required=True)
            except MCPError as err:
                assert "requestState is not one this server issued" in str(err), err
            else:
                raise AssertionError("a forged requestState was accepted")
            assert await charged(client) == 0
