"""Issues 47 and 48 through the SDK's client: a kept python runtime and a
kept node runtime forked with the `snapshot` and `restore` tools (the fork
starts where the original was and each goes its own way; node's by replaying
its turn ledger, with fresh random numbers), and a runtime made with
`checkpoint` that goes back to its state before a turn that timed out, saying so."""

from harness import server, structured, text


async def test_a_session_forks_through_the_tools(mode):
    with server("python_interpreter: data\n") as s:
        async with s.client(mode) as client:
            kept = structured(await client.call_tool(
                "run", {"lang": "python", "keep": True, "code": "branch = ['trunk']"}))
            taken = structured(await client.call_tool("snapshot", {"runtime_id": kept["runtime_id"]}))
            assert taken["snapshot_id"].startswith("sn_") and taken["bytes"] > 0, taken
            fork = structured(await client.call_tool("restore", {"snapshot_id": taken["snapshot_id"]}))
            assert fork["runtime_id"] != kept["runtime_id"]
            await client.call_tool("run", {"runtime_id": fork["runtime_id"], "code": "branch.append('fork')"})
            for runtime, expected in ((kept["runtime_id"], ["trunk"]), (fork["runtime_id"], ["trunk", "fork"])):
                answer = structured(await client.call_tool(
                    "run", {"runtime_id": runtime, "code": "result = branch"}))
                assert answer["result"] == expected, answer


async def test_a_node_session_forks_through_the_tools(mode):
    with server("") as s:
        async with s.client(mode) as client:
            kept = structured(await client.call_tool("run", {
                "lang": "node", "keep": True,
                "code": "class Branch { constructor() { this.path = ['trunk'] } }\n"
                        "globalThis.b = new Branch(); globalThis.seen = new Map([['r', Math.random()]]); return 1"}))
            runtime = kept["runtime_id"]
            taken = structured(await client.call_tool("snapshot", {"runtime_id": runtime}))
            assert taken["snapshot_id"].startswith("sn_") and taken["bytes"] > 0, taken
            fork = structured(await client.call_tool("restore", {"snapshot_id": taken["snapshot_id"]}))["runtime_id"]
            await client.call_tool("run", {"runtime_id": fork, "code": "b.path.push('fork'); return 1"})
            state = "return [b.path, seen.get('r'), Math.random()]"
            trunk = structured(await client.call_tool("run", {"runtime_id": runtime, "code": state}))["result"]
            forked = structured(await client.call_tool("run", {"runtime_id": fork, "code": state}))["result"]
            assert trunk[0] == ["trunk"] and forked[0] == ["trunk", "fork"], (trunk, forked)
            assert trunk[1] == forked[1], (trunk, forked)
            assert trunk[2] != forked[2], (trunk, forked)


async def test_a_checkpoint_takes_back_a_turn_that_timed_out(mode):
    with server("python_interpreter: data\n") as s:
        async with s.client(mode) as client:
            kept = structured(await client.call_tool(
                "run", {"lang": "python", "keep": True, "checkpoint": True, "code": "x = 41"}))
            runtime = kept["runtime_id"]
            lost = await client.call_tool(
                "run", {"runtime_id": runtime, "code": "x = 0\nwhile True:\n    pass", "timeout_ms": 1000})
            assert lost.is_error and "went back to its state before this run" in text(lost), text(lost)
            after = structured(await client.call_tool("run", {"runtime_id": runtime, "code": "result = x"}))
            assert after["result"] == 41, after
            assert "runtime_reset" not in after, after
