"""The real code-runner binary behind the official MCP Python SDK's client.

Every test takes `mode`: "auto" is the SDK's default `Client` (it negotiates
2026-07-28: no session, input_required rounds, subscriptions/listen);
"legacy" is `mode="legacy"` (the 2025-11-25 handshake). CODE_RUNNER_BIN names
the binary (scripts/test sets it to the release build).
"""

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading

from mcp.client import Client

BIN = os.environ.get("CODE_RUNNER_BIN")
if not BIN:
    raise SystemExit("set CODE_RUNNER_BIN to the code-runner binary (scripts/test does)")

MODES = ("auto", "legacy")


class Server:
    """`code-runner serve` on a free loopback port with a fresh data
    directory, seeded with `config` (YAML) when given."""

    def __init__(self, config=""):
        self.dir = tempfile.mkdtemp(prefix="code-runner-mcp-py-")
        args = [BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(self.dir, "data")]
        if config:
            path = os.path.join(self.dir, "config.yaml")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        env = dict(os.environ, CODE_RUNNER_LOG="info", NO_COLOR="1")
        self.process = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
        self.log = []
        self.url = None
        # It listens at once and loads its engines meanwhile (the two lines
        # come in either order); the tests expect both engines loaded.
        settled = False
        for line in self.process.stderr:
            self.log.append(line)
            match = re.search(r"serving on (http://[0-9.:]+)", line)
            if match:
                self.url = match.group(1)
            settled = settled or "engines settled" in line
            if self.url and settled:
                break
        if self.url is None:
            raise RuntimeError("the server did not start:\n" + "".join(self.log))
        # Keep reading its log so it never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.process.stderr:
            self.log.append(line)

    def client(self, mode, **options):
        """A `Client` for `mode` ("auto": the SDK's default; "legacy")."""
        return Client(self.url + "/mcp", mode=mode, **options)

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def server(config=""):
    running = Server(config)
    try:
        yield running
    finally:
        running.close()


def structured(result):
    """A tool result's structured content (the bus answer), asserting it succeeded."""
    assert not result.is_error, f"the tool failed: {text(result)}"
    return result.structured_content


def text(result):
    """A tool result's text blocks, joined."""
    return "\n".join(getattr(block, "text", "") for block in result.content)
