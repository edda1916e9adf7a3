#!/usr/bin/env python3
"""The two Python halves of lab/record-endless-upstream/run (stdlib only, 127.0.0.1 only).

  upstream MODE PORT_FILE   an OpenAI-shaped upstream whose answer never ends; writes its port
                            to PORT_FILE once it listens, then serves until killed.
  client MODE BASE SECONDS  one chat request to BASE (http://127.0.0.1:PORT/v1), reading and
                            discarding the answer for SECONDS; prints "BYTES SECONDS" (the raw
                            bytes the socket received, headers and framing included).

MODE `stream`: 200, text/event-stream, HTTP/1.1 chunked, an endless series of SSE frames
`data: {"choices":[{"delta":{"content":"xxxx…"}}]}` (4 KiB of x each), as fast as the socket
takes them. MODE `json`: 200, application/json, no Content-Length, `Connection: close`
(the body ends when the connection does), `{"choices":[{"message":{"content":"` and then x
bytes forever.
"""

import http.server
import json
import os
import signal
import socket
import sys
import time

FRAME = b'data: {"choices":[{"delta":{"content":"' + b"x" * 4096 + b'"}}]}\n\n'
BATCH = FRAME * 16  # ~66 KiB per write: fewer system calls, same bytes
JSON_HEAD = b'{"choices":[{"message":{"content":"'
JSON_FILL = b"x" * 65536


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "stream"

    def log_message(self, *args):  # quiet: the bash side prints what matters
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_error(404)
            return
        self.send_response(200)
        try:
            if self.mode == "stream":
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"%x\r\n" % len(BATCH) + BATCH + b"\r\n"
                while True:
                    self.wfile.write(chunk)
            else:
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")  # no length: close-delimited
                self.end_headers()
                self.wfile.write(JSON_HEAD)
                while True:
                    self.wfile.write(JSON_FILL)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the proxy hung up: this answer is over


def upstream(mode, port_file):
    Upstream.mode = mode
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, port_file)  # the bash side never reads half a port
    server.serve_forever()


def client(mode, base, seconds):
    host_port = base.split("://", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    path = "/" + base.split("://", 1)[1].split("/", 1)[1].rstrip("/") + "/chat/completions"
    body = {"model": "endless", "messages": [{"role": "user", "content": "say x forever"}]}
    if mode == "stream":
        body["stream"] = True
    data = json.dumps(body).encode()
    request = (
        "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Authorization: Bearer rehearsal\r\nContent-Length: %d\r\n\r\n" % (path, host_port, len(data))
    ).encode() + data
    # A raw socket with a short timeout: the proxy may send nothing at all (not even headers)
    # while it buffers, and the client must still stop on time.
    received, started = 0, time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopped early: still report
    try:
        sock = socket.create_connection((host, int(port)), timeout=0.5)
        sock.sendall(request)
        while time.monotonic() - started < seconds:
            try:
                piece = sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not piece:
                break  # the proxy ended the answer
            received += len(piece)
    except OSError as e:
        print("client: %s" % e, file=sys.stderr)
    finally:
        print("%d %.2f" % (received, time.monotonic() - started), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "upstream" and sys.argv[2] in ("stream", "json"):
        upstream(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "client" and sys.argv[2] in ("stream", "json"):
        client(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(__doc__)
