"""A tiny harness for the shim's tests: a clock endpoint and a model endpoint, on threads.

It follows docs/clock-protocol.md as src/wire/clock.rs does (the handshake counts, timers
before replies at one instant, releases only after `at`), with none of the scenario machinery.
The model endpoint answers ``POST`` requests after the virtual latency named in the request's
``X-Latency-Ms`` header (``hang`` holds it), with ``ok`` or, for ``X-Stream: 1``, a chunked
body of three SSE events. The records (transcript, closes) use virtual time and connection
names ``c1``, ``c2``, so that runs can be compared.
"""

import json
import select
import socket
import threading
import time

S = 1_000_000_000


def seconds(ns):
    return f"{ns // S}.{(ns % S) // 1_000_000:03d}s"


class FakeHarness:
    def __init__(self, busy_wall_max=10.0, seed=7, epoch_ns=1_735_689_600 * S):
        self.cond = threading.Condition()
        self.now_ns = 0
        self.phase = "none"
        self.idle = None
        self.advancing = None
        self.conns = {}
        self.pending = []
        self.registered = 0
        self.transcript = []
        self.ended = None
        self.idles = 0
        self.busy_wall_max = busy_wall_max
        self.last_input = time.monotonic()
        self.seed = seed
        self.epoch_ns = epoch_ns
        self.link = None
        self.clock_listener = socket.create_server(("127.0.0.1", 0))
        self.http_listener = socket.create_server(("127.0.0.1", 0))
        self.clock_addr = "%s:%d" % self.clock_listener.getsockname()
        self.http_addr = "%s:%d" % self.http_listener.getsockname()
        self.threads = [
            threading.Thread(target=self._serve_clock, daemon=True),
            threading.Thread(target=self._serve_http, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    # --- the clock's rules -------------------------------------------------------------

    def note(self, what):
        self.transcript.append(f"{seconds(self.now_ns)} {what}")

    def conn(self, name):
        if name not in self.conns:
            self.conns[name] = {
                "name": f"c{len(self.conns) + 1}", "seen": 0, "released": 0, "server_closed": False,
                "sent": 0, "read": 0, "open": True, "reading": True,
            }
        return self.conns[name]

    def send(self, message):
        if self.link is not None:
            try:
                self.link.sendall((json.dumps(message) + "\n").encode())
            except OSError:
                pass

    def end(self, reason):
        if self.ended is None:
            self.ended = reason
            self.note(f"end: {reason}")
            self.send({"op": "end", "reason": reason})
            for entry in self.pending:
                entry["event"].set()
            self.pending.clear()
            self.cond.notify_all()

    def pump(self):
        while self.ended is None:
            if self.phase != "idle":
                return
            for conn in self.conns.values():
                if conn["sent"] > conn["seen"] and not conn["server_closed"]:
                    return
                if not conn["open"] and not conn["server_closed"] and conn["seen"]:
                    return
            # Replies due now: written once the runtime is idle at now (its timers ran first).
            due = sorted((p for p in self.pending if p["due"] <= self.now_ns), key=lambda p: (p["due"], p["id"]))
            if due:
                for entry in due:
                    self.pending.remove(entry)
                    conn = self.conn(entry["conn"])
                    conn["released"] += 1
                    entry["released"] = True
                    self.note(f"release r{entry['id']} on {conn['name']}")
                    entry["event"].set()
                continue
            for conn in self.conns.values():
                if conn["released"] > conn["read"] and conn["open"] and conn["reading"]:
                    return
            candidates = [due for due in [self.idle["next_due_ns"]] if due is not None]
            candidates += [p["due"] for p in self.pending]
            if not candidates:
                self.end(f"stuck at {seconds(self.now_ns)}")
                return
            to_ns = min(candidates)
            self.phase = "advancing"
            self.advancing = (self.idle["seq"], to_ns)
            self.note(f"advance to {seconds(to_ns)}")
            self.send({"op": "advance", "seq": self.idle["seq"], "to_ns": to_ns})
            return

    def settle(self):
        """Waits out an unconfirmed advance (call with the lock held): an event the runtime
        caused meanwhile happened at the new time if it confirms (`at`), at the old one if it
        woke by itself (`busy`), and the endpoint cannot tell which until then."""
        self.cond.wait_for(lambda: self.phase != "advancing" or self.ended is not None, 20)

    def take(self, message):
        op = message["op"]
        if op == "hello":
            self.phase = "busy"
            self.note("hello")
            self.send({
                "op": "welcome", "protocol": 1, "now_ns": self.now_ns, "epoch_ns": self.epoch_ns,
                "seed": self.seed, "http": [self.http_addr],
            })
        elif op == "idle":
            assert self.phase == "busy", (self.phase, message)
            assert message["now_ns"] == self.now_ns, (self.now_ns, message)
            self.idles += 1
            for report in message["conns"]:
                conn = self.conn(report["conn"])
                for field in ("sent", "read", "open", "reading"):
                    conn[field] = report[field]
            self.idle = message
            self.phase = "idle"
        elif op == "busy":
            if self.phase == "advancing":
                self.note(f"advance to {seconds(self.advancing[1])} void")
            self.phase = "busy"
        elif op == "at":
            assert self.phase == "advancing" and self.advancing == (message["seq"], message["now_ns"]), message
            self.now_ns = message["now_ns"]
            self.phase = "busy"
        elif op == "now":
            self.send({"op": "now", "now_ns": self.now_ns})
        self.pump()

    # --- the clock endpoint ------------------------------------------------------------

    def _serve_clock(self):
        self.link, _ = self.clock_listener.accept()
        self.link.settimeout(0.05)
        buffer = b""
        while True:
            try:
                data = self.link.recv(65536)
            except socket.timeout:
                with self.cond:
                    if (self.ended is None and self.phase != "none"
                            and time.monotonic() - self.last_input > self.busy_wall_max):
                        self.end(f"stalled at {seconds(self.now_ns)} waiting in phase {self.phase}")
                continue
            except OSError:
                data = b""
            with self.cond:
                self.last_input = time.monotonic()
                if not data:
                    self.note("disconnected")
                    self.phase = "none"
                    self.cond.notify_all()
                    return
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self.take(json.loads(line))
                self.cond.notify_all()

    # --- the model endpoint ------------------------------------------------------------

    def _serve_http(self):
        while True:
            try:
                sock, peer = self.http_listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_conn, args=(sock, "%s:%d" % peer), daemon=True).start()

    def _serve_conn(self, sock, peer):
        reader = sock.makefile("rb")
        with self.cond:
            self.conn(peer)
        try:
            while True:
                head = []
                line = reader.readline()
                if not line:
                    break
                while line not in (b"\r\n", b"\n", b""):
                    head.append(line.decode("latin-1").strip())
                    line = reader.readline()
                headers = {h.split(":", 1)[0].lower(): h.split(":", 1)[1].strip() for h in head[1:]}
                reader.read(int(headers.get("content-length", "0")))
                latency = headers.get("x-latency-ms", "0")
                with self.cond:
                    self.settle()
                    self.last_input = time.monotonic()
                    conn = self.conn(peer)
                    conn["seen"] += 1
                    entry = None
                    if latency != "hang":
                        self.registered += 1
                        entry = {"due": self.now_ns + int(latency) * 1_000_000, "id": self.registered,
                                 "conn": peer, "event": threading.Event(), "released": False}
                        self.pending.append(entry)
                    self.pump()
                if not self._wait(sock, entry):
                    break
                if headers.get("x-stream") == "1":
                    body = b"".join(
                        b"%x\r\n%s\r\n" % (len(event), event)
                        for event in (b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n")
                    )
                    sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                 b"Content-Type: text/event-stream\r\n\r\n" + body + b"0\r\n\r\n")
                elif headers.get("x-body") == "chat":
                    body = json.dumps({
                        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "ok"}}],
                    }).encode()
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(body), body))
                else:
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
        except OSError:
            pass
        with self.cond:
            self.settle()
            self.last_input = time.monotonic()
            conn = self.conn(peer)
            conn["server_closed"] = True
            self.note(f"closed {conn['name']}")
            for entry in [p for p in self.pending if p["conn"] == peer]:
                self.pending.remove(entry)
            self.pump()
        sock.close()

    def _wait(self, sock, entry):
        """Waits for the release, or for the client to give up (False)."""
        while True:
            if entry is not None and entry["event"].is_set():
                return entry["released"]
            if self.ended is not None:
                return False
            readable, _, _ = select.select([sock], [], [], 0.005)
            if readable and sock.recv(1, socket.MSG_PEEK) == b"":
                return False

    def wait_ended(self, timeout=20):
        with self.cond:
            self.cond.wait_for(lambda: self.ended is not None or self.phase == "none", timeout)

    def close(self):
        for listener in (self.clock_listener, self.http_listener):
            listener.close()
        if self.link is not None:
            self.link.close()
