"""Runs every `test_*` coroutine of the `test_*.py` modules here, once per
MCP client mode (harness.MODES: the SDK's default client, and legacy), one
at a time; prints each outcome and exits non-zero if any failed.

    CODE_RUNNER_BIN=target/release/code-runner python run.py [name-filter]
"""

import asyncio
import importlib
import inspect
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


async def main(filter_text):
    failed, passed = [], 0
    for name in sorted(os.listdir(HERE)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        module = importlib.import_module(name[:-3])
        for test_name, test in inspect.getmembers(module, inspect.iscoroutinefunction):
            if not test_name.startswith("test_"):
                continue
            modes = getattr(test, "modes", harness.MODES)
            for mode in modes:
                label = f"{name[:-3]}::{test_name}[{mode}]"
                if filter_text and filter_text not in label:
                    continue
                started = time.monotonic()
                try:
                    await asyncio.wait_for(test(mode), timeout=300)
                    passed += 1
                    print(f"ok   {label} ({time.monotonic() - started:.1f} s)", flush=True)
                except BaseException:  # noqa: B036 - a test's own failure, reported
                    failed.append(label)
                    print(f"FAIL {label}\n{traceback.format_exc()}", flush=True)
    print(f"\n{passed} passed, {len(failed)} failed", flush=True)
    for label in failed:
        print(f"  failed: {label}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "")))
