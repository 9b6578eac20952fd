"""Issue 45, items 4 to 6, through the SDK's client: python's prints arrive
line by line while the run goes on (progress notifications), a run stopped
by its timeout answers its output so far and names the knob, and a kept
python runtime whose interpreter went with a turn says so and, next time,
`runtime_reset`."""

import asyncio
import time

from harness import server, structured, text


async def test_python_prints_arrive_line_by_line(mode):
    seen = []

    async def progress(value, total, message):
        seen.append((message, time.monotonic()))

    code = "import time\nfor i in range(3):\n    print(f'line {i}')\n    time.sleep(0.4)\nresult = 'done'"
    with server() as s:
        async with s.client(mode) as client:
            result = await client.call_tool(
                "run", {"lang": "python", "code": code}, progress_callback=progress)
            done = time.monotonic()
            assert structured(result)["result"] == "done"
    lines = [message for message, _ in seen]
    assert lines == ["line 0\n", "line 1\n", "line 2\n"], seen
    assert done - seen[0][1] >= 0.6, seen


async def test_a_timeout_answers_its_output_and_names_the_knob(mode):
    with server() as s:
        async with s.client(mode) as client:
            result = await client.call_tool(
                "run", {"lang": "python", "code": "print('started')\nwhile True:\n    pass", "timeout_ms": 500})
            assert result.is_error
            said = text(result)
            assert said.startswith("code-runner::timeout"), said
            assert "timeout_ms" in said and "max_timeout_ms" in said, said
            assert "stdout before it stopped:\nstarted" in said, said


async def test_a_lost_interpreter_is_never_a_silent_reset(mode):
    with server() as s:
        async with s.client(mode) as client:
            kept = structured(await client.call_tool("run", {"lang": "python", "keep": True, "code": "x = 41"}))
            runtime = kept["runtime_id"]
            lost = await client.call_tool(
                "run", {"runtime_id": runtime, "code": "while True:\n    pass", "timeout_ms": 400})
            assert lost.is_error and "variables and imports are gone" in text(lost), text(lost)
            await asyncio.sleep(0)
            after = structured(await client.call_tool(
                "run", {"runtime_id": runtime, "code": "result = 'x' in globals()"}))
            assert after["result"] is False
            assert after["runtime_reset"]["to"] == "fresh", after
