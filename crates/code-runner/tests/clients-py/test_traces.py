"""Issue 49, traces, through the SDK's client: a tool call whose `_meta`
carries a W3C `traceparent` (SEP-414) is a span in that trace. The worker
exports it over OTLP/HTTP to a sink in this test, which keeps each request's
protobuf body: the trace's id and the caller's span id are in it, as the
`trace_id` and `parent_span_id` of the run's span."""

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import server, structured

TRACE = "6bf92f3577b34da6a3ce929d0e0e4738"
PARENT = "10f067aa0ba902b8"


class Sink:
    """An OTLP/HTTP endpoint on loopback that answers 200 and keeps the bodies."""

    def __init__(self):
        bodies = self.bodies = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/v1/traces":
                    bodies.append((self.headers.get("content-type"), body))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()


async def test_a_tool_call_continues_the_trace_in_its_meta(mode):
    sink = Sink()
    try:
        with server(f"otlp_endpoint: {sink.url}\n") as s:
            async with s.client(mode) as client:
                result = await client.call_tool(
                    "run", {"lang": "node", "code": "return 6 * 7"},
                    meta={"traceparent": f"00-{TRACE}-{PARENT}-01"})
                assert structured(result)["result"] == 42
            trace, parent = bytes.fromhex(TRACE), bytes.fromhex(PARENT)
            for _ in range(300):
                if any(trace in body and parent in body for _, body in sink.bodies):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"no exported span carries the trace: {sink.bodies!r}")
            assert all(kind == "application/x-protobuf" for kind, _ in sink.bodies), sink.bodies
    finally:
        sink.close()
