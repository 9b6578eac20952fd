"""Issue 45, item 2: the tool list and its changes with the SDK's default
client (2026-07-28: `subscriptions/listen`) as with the legacy handshake
(`notifications/tools/list_changed`); what a session's own runtime
published is a tool for it under the handshake, and a pointer (how to call
it) under 2026-07-28, whose tool lists cannot differ by connection."""

import asyncio

from mcp.shared.subscriptions import ToolsListChanged
from mcp.types import ToolListChangedNotification

from harness import server, structured, text

GREET = "def handler(payload):\n    return 'hello'\n"


async def register(client, function_id):
    answer = structured(await client.call_tool(
        "register_function", {"function_id": function_id, "lang": "python", "source": GREET}))
    assert answer["registered"], answer


async def names(client):
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_the_six_tools_carry_titles_and_annotations(mode):
    with server() as s:
        async with s.client(mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"run", "teardown", "register_function", "describe", "resume", "read_file", "install", "snapshot", "restore"} == set(tools), tools
            read_file = tools["read_file"].annotations
            assert read_file is not None and read_file.read_only_hint is True, read_file
            assert client.server_capabilities.resources is not None, "resources are declared"
            describe = tools["describe"].annotations
            assert describe is not None and describe.read_only_hint is True, describe
            teardown = tools["teardown"].annotations
            assert teardown is not None and teardown.destructive_hint is True, teardown
            assert all(tools[name].title for name in ("run", "resume", "describe")), tools


async def test_a_new_function_is_announced(mode):
    with server() as s:
        if mode == "auto":
            async with s.client(mode) as client:
                async with client.listen(tools_list_changed=True) as subscription:
                    await register(client, "greet::hello")
                    event = await asyncio.wait_for(subscription.__anext__(), 30)
                    assert isinstance(event, ToolsListChanged), event
                assert "greet.hello" in await names(client)
            return
        changed = asyncio.Event()

        async def on_message(message):
            if isinstance(getattr(message, "root", message), ToolListChangedNotification):
                changed.set()

        async with s.client(mode, message_handler=on_message) as client:
            await names(client)
            await register(client, "greet::hello")
            await asyncio.wait_for(changed.wait(), 30)
            assert "greet.hello" in await names(client)


async def test_what_a_runtime_published_is_reachable(mode):
    code = "await iii.registerFunction(iii.namespace + '::ping', () => 'pong'); return iii.namespace"
    with server() as s:
        async with s.client(mode) as client:
            result = await client.call_tool("run", {"lang": "node", "keep": True, "code": code})
            answer = structured(result)
            namespace = answer["result"]
            if mode == "legacy":
                # The session that kept the runtime sees its function as a tool.
                for _ in range(50):
                    if f"{namespace}.ping" in await names(client):
                        break
                    await asyncio.sleep(0.1)
                assert f"{namespace}.ping" in await names(client)
            else:
                # No tool list varies by client: the answer says how to call it.
                assert f"{namespace}.ping" not in await names(client)
                said = text(result)
                assert f"{namespace}::ping" in said and "iii.trigger" in said, said


async def test_a_published_tool_holds_to_its_input_schema(mode):
    """Arguments that do not match a published function's inputSchema are a
    tool error naming the difference (the handler never runs), as `iii.fn`
    refuses them; matching ones reach the handler."""
    source = "calls = []\ndef handler(payload):\n    calls.append(payload)\n    return len(calls)\n"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    with server() as s:
        async with s.client(mode) as client:
            answer = structured(await client.call_tool("register_function", {
                "function_id": "greet::strict", "lang": "python", "source": source,
                "request_format": schema}))
            assert answer["registered"], answer
            wrong = await client.call_tool("greet.strict", {"name": 7})
            assert wrong.is_error, wrong
            message = text(wrong)
            assert "inputSchema" in message and "/name" in message, message
            assert (await client.call_tool("greet.strict", {})).is_error
            right = await client.call_tool("greet.strict", {"name": "ada"})
            assert not right.is_error, right
            # The two refused calls never reached the handler: this is its first.
            assert "1" in text(right), text(right)
