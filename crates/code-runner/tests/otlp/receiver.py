"""An OTLP/HTTP trace receiver on loopback for the trace tests.

It takes what a collector takes on `POST /v1/traces` (an
ExportTraceServiceRequest as protobuf, decoded with OpenTelemetry's own
definitions from the opentelemetry-proto package), answers as a collector
does (an ExportTraceServiceResponse), and keeps every span it decoded. The
test reads them back with `GET /spans` (JSON). `GET /ping` answers `pong`,
a page for guest code to fetch. A body that is not protobuf, or does not
decode, is refused with 400 or 415, as a collector refuses it.

Prints `listening <port>` once it listens on 127.0.0.1.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
LOCK = threading.Lock()
MAX_BODY = 16 << 20


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def attributes(pairs):
    return {kv.key: value_of(kv.value) for kv in pairs}


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body, kind):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        if self.path != "/v1/traces" or length > MAX_BODY:
            return self.answer(404, b"", "text/plain")
        body = self.rfile.read(length)
        if self.headers.get("content-type") != "application/x-protobuf":
            return self.answer(415, b"only application/x-protobuf", "text/plain")
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as err:
            return self.answer(400, str(err).encode(), "text/plain")
        decoded = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "status": span.status.code,
                            "status_message": span.status.message,
                            "attributes": attributes(span.attributes),
                            "resource": resource,
                            "scope": scope_spans.scope.name,
                        }
                    )
        with LOCK:
            SPANS.extend(decoded)
        self.answer(
            200,
            ExportTraceServiceResponse().SerializeToString(),
            "application/x-protobuf",
        )

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/ping":
            return self.answer(200, b"pong", "text/plain")
        if path == "/spans":
            with LOCK:
                body = json.dumps(SPANS).encode()
            return self.answer(200, body, "application/json")
        self.answer(404, b"", "text/plain")

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
