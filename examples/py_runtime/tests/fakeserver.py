"""A tiny OpenAI-compatible Chat Completions server for the tests (SSE streaming only).

It listens on 127.0.0.1 port 0 in a daemon thread and stops when the test closes it. A
`script(agent, n, body)` function decides each reply: `agent` is the x-request-id header
(`req-1` for the root, `req-1-sub-…` for a child), `n` counts that agent's requests from 1.
It returns `(delay_seconds, text, [(tool_name, args), ...])`.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Script = Callable[[str, int, dict[str, Any]], tuple[float, str, list[tuple[str, dict[str, Any]]]]]


class FakeServer:
    def __init__(self, script: Script):
        self.script = script
        self.requests: list[dict[str, Any]] = []  # {"agent", "n", "t", "body"}
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent = self.headers.get("x-request-id", "?")
                with outer.lock:
                    n = outer.counts[agent] = outer.counts.get(agent, 0) + 1
                    outer.requests.append({"agent": agent, "n": n,
                                           "t": time.monotonic() - outer.t0, "body": body})
                delay, text, calls = outer.script(agent, n, body)
                time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}

                def send(delta: dict[str, Any], finish: str | None = None) -> None:
                    chunk = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())

                send({"role": "assistant", "content": text})
                for i, (name, args) in enumerate(calls):
                    send({"tool_calls": [{"index": i, "id": f"call_{n}_{i}", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]})
                    send({"tool_calls": [{"index": i, "function": {"arguments": json.dumps(args)}}]})
                send({}, "tool_calls" if calls else "stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        # A timed-out child closes its connection mid-reply; that is expected, not news.
        self.httpd.handle_error = lambda *a: None
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def of(self, prefix: str) -> list[dict[str, Any]]:
        """The requests of agents whose id starts with `prefix`, in arrival order."""
        return [r for r in self.requests if r["agent"].startswith(prefix)]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
