"""rehearsal_clock: puts a Python runtime's asyncio loop on rehearsal's virtual time.

The client side of docs/clock-protocol.md, for asyncio's selector event loop, stdlib only.
With ``PYTHONPATH=shims/python`` and ``REHEARSAL_CLOCK=host:port`` the ``sitecustomize`` next to
this package calls :func:`install_from_env` at interpreter start-up, so the runtime's own code
is unchanged. It then:

- installs an event loop policy whose loops read the harness's time in ``loop.time()`` and,
  where the loop would sleep until its next timer, report ``idle`` to the harness and wait for
  ``advance`` (or for a byte on what the loop waits on);
- counts the HTTP requests written and the responses read on each connection to the harness's
  model endpoint (the handshake of the protocol), by parsing the HTTP/1.1 framing;
- never reports idle while an executor future (``getaddrinfo``, ``asyncio.to_thread``) is out,
  while the loop has anything to write, or while it waits on anything but the model endpoint
  (a subprocess pipe, another socket): those run in real time, and virtual time waits;
- makes the wall clock virtual (``time.time``, ``time.time_ns``, ``datetime.datetime.now``,
  ``utcnow``, ``today``, ``datetime.date.today``, and ``time.localtime``/``gmtime``/``ctime``/
  ``strftime``/``asctime`` without an explicit time), and ``time.monotonic`` too when
  ``REHEARSAL_CLOCK_MONOTONIC=virtual``;
- seeds ``random`` and ``uuid.uuid4`` from the harness's seed.

What it does not cover (real time, while virtual time stands still): ``time.sleep``, threads,
subprocesses, other event loops (uvloop, trio), TLS to the model endpoint, ``os.urandom``.
After the harness says ``end`` (or its connection drops) the loop runs on real time from the
virtual time it had reached.
"""

import asyncio
import copy
import datetime as _datetime_module
import json
import os
import random
import selectors
import socket
import sys
import threading
import time as _time_module
import uuid

PROTOCOL = 1

_real_time = _time_module.time
_real_time_ns = _time_module.time_ns
_real_monotonic = _time_module.monotonic
_real_monotonic_ns = _time_module.monotonic_ns
_real_localtime = _time_module.localtime
_real_gmtime = _time_module.gmtime
_real_ctime = _time_module.ctime
_real_asctime = _time_module.asctime
_real_strftime = _time_module.strftime
_real_datetime = _datetime_module.datetime
_real_date = _datetime_module.date

_LINE_MAX = 1 << 20
# The most bytes of a model connection peeked at to see whether its released replies are there.
_PEEK_MAX = 1 << 22
# How long (real seconds) a loop woken by released replies waits for all of them to arrive.
_SETTLE_WALL_MAX = 5.0


class ClockError(Exception):
    """The harness could not be reached, refused us, or broke the protocol."""


class _Link:
    """The one connection to the harness: JSON lines, blocking, with a read buffer."""

    def __init__(self, address):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ClockError(f"REHEARSAL_CLOCK={address!r} is not host:port")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=30)
        except OSError as error:
            raise ClockError(f"cannot reach the clock at {address}: {error}") from error
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()
        self.closed = False

    def fileno(self):
        return self.sock.fileno()

    def send(self, message):
        if self.closed:
            return
        try:
            self.sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        except OSError:
            self.closed = True

    def take_lines(self):
        """The complete lines received so far, parsed."""
        messages = []
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                if len(self.buffer) > _LINE_MAX:
                    raise ClockError("the harness sent a line longer than 1 MiB")
                return messages
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            messages.append(json.loads(line))

    def receive(self):
        """Reads what is there (call when readable); False at end of file."""
        try:
            data = self.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return False
        self.buffer.extend(data)
        return True

    def next_message(self):
        """Blocks for the next message (hello's answer)."""
        while True:
            messages = self.take_lines()
            if messages:
                # Only used before anything else is said: one answer.
                return messages[0]
            if not self.receive():
                raise ClockError("the clock closed the connection")


class _Framer:
    """Counts complete HTTP/1.1 messages in one direction of one connection."""

    def __init__(self, responses):
        self.responses = responses
        self.buffer = bytearray()
        self.state = "head"
        self.remaining = 0
        self.count = 0

    def feed(self, data):
        if self.state == "eof":
            return
        self.buffer.extend(data)
        while self._step():
            pass

    def _step(self):
        buffer = self.buffer
        if self.state == "head":
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return False
            head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
            del buffer[: end + 4]
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if self.responses:
                parts = head[0].split(" ")
                status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 200
                if 100 <= status < 200 and status != 101:
                    return True  # an interim response: not the answer
                if status in (204, 304):
                    self.count += 1
                    return True
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.state = "chunk-size"
            elif "content-length" in headers:
                self.remaining = int(headers["content-length"] or 0)
                if self.remaining == 0:
                    self.count += 1
                else:
                    self.state = "body"
            elif self.responses:
                self.state = "eof"  # read until the connection closes
                buffer.clear()
                return False
            else:
                self.count += 1  # a request without a body
            return True
        if self.state in ("body", "chunk-data"):
            take = min(len(buffer), self.remaining)
            del buffer[:take]
            self.remaining -= take
            if self.remaining:
                return False
            if self.state == "body":
                self.count += 1
                self.state = "head"
            else:
                self.state = "chunk-size"
            return True
        if self.state == "chunk-size":
            end = buffer.find(b"\r\n")
            if end < 0:
                return False
            size = int(bytes(buffer[:end]).split(b";")[0].strip() or b"0", 16)
            del buffer[: end + 2]
            if size == 0:
                self.state = "trailer"
            else:
                self.remaining = size + 2  # the data and its CRLF
                self.state = "chunk-data"
            return True
        if self.state == "trailer":
            end = buffer.find(b"\r\n")
            if end < 0:
                return False
            line = bytes(buffer[:end])
            del buffer[: end + 2]
            if not line:
                self.count += 1
                self.state = "head"
            return True
        return False

    def eof(self):
        if self.state == "eof":
            self.count += 1
            self.state = "head"


class _Conn:
    """One connection to the model endpoint, as the runtime sees it."""

    def __init__(self, transport, local):
        self.transport = transport
        self.local = local
        self.sent = _Framer(responses=False)
        self.read = _Framer(responses=True)
        self.lost = False
        self.reported = None
        # The send order (over all model connections) of requests not yet reported.
        self.order = []
        original_write = transport.write

        def write(data):
            before = self.sent.count
            self.sent.feed(bytes(data))
            for _ in range(self.sent.count - before):
                _STATE.sent_total += 1
                self.order.append(_STATE.sent_total)
            return original_write(data)

        # One path for both: the default writelines calls write, which would count twice.
        transport.write = write
        transport.writelines = lambda chunks: write(b"".join(bytes(chunk) for chunk in chunks))

    def arrived(self, released):
        """Whether `released` responses, counted from the start, are read or waiting in full
        in the socket (peeked, not taken), or the connection has reached its end."""
        if self.read.count >= released:
            return True
        try:
            data = self.transport._sock.recv(_PEEK_MAX, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except (OSError, AttributeError):
            return True
        if not data:
            return True
        framer = copy.deepcopy(self.read)
        framer.feed(data)
        return framer.count >= released

    def report(self):
        is_open = not self.lost and not self.transport.is_closing()
        reading = is_open and self.transport.is_reading()
        return {"conn": self.local, "sent": self.sent.count, "read": self.read.count, "open": is_open, "reading": reading}

    def take_order(self):
        order, self.order = self.order, []
        return order


def _address(sockaddr):
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        host = sockaddr[0]
        return f"[{host}]:{sockaddr[1]}" if ":" in host else f"{host}:{sockaddr[1]}"
    return None


class _CountingProtocol(asyncio.Protocol):
    """Stands between a transport and the runtime's protocol, counting what it receives."""

    def __init__(self, real):
        self._real = real
        self._conn = None

    def connection_made(self, transport):
        self._conn = _STATE.track(transport)
        self._real.connection_made(transport)

    def data_received(self, data):
        if self._conn is not None:
            self._conn.read.feed(data)
        self._real.data_received(data)

    def eof_received(self):
        if self._conn is not None:
            self._conn.read.eof()
        return self._real.eof_received()

    def connection_lost(self, exc):
        if self._conn is not None:
            self._conn.read.eof()
            self._conn.lost = True
        self._real.connection_lost(exc)

    def pause_writing(self):
        self._real.pause_writing()

    def resume_writing(self):
        self._real.resume_writing()

    def __getattr__(self, name):
        return getattr(self._real, name)


class _CountingBufferedProtocol(_CountingProtocol, asyncio.BufferedProtocol):
    def get_buffer(self, sizehint):
        self._buffer = self._real.get_buffer(sizehint)
        return self._buffer

    def buffer_updated(self, nbytes):
        if self._conn is not None:
            self._conn.read.feed(bytes(memoryview(self._buffer)[:nbytes]))
        self._real.buffer_updated(nbytes)


class _State:
    """The process's one clock: virtual now, the link, the counted connections."""

    def __init__(self):
        self.link = None
        self.now_ns = 0
        # `loop.time()`: now_ns in seconds, or, right after an advance to a timer, that timer's
        # own float deadline when it is a hair above (9.999 + 10 is 19.999000000000002): a
        # loop that checks `time() >= deadline` itself (anyio) must see it reached.
        self.now_float = 0.0
        self.epoch_ns = 0
        self.seed = 0
        self.http = set()
        # The harness answers `busy` with `pending` (rule 4a): the replies released and not read.
        self.pending = False
        # Requests written on all model connections: each one's number is its send order.
        self.sent_total = 0
        self.seq = 0
        self.detached_at = None  # (virtual ns, real monotonic ns) once on real time
        self.conns = {}
        self.owner = None  # the one loop that follows the clock
        self.lock = threading.Lock()

    def loop_time(self):
        if self.detached_at is not None:
            return self.virtual_ns() / 1e9
        return self.now_float

    def virtual_ns(self):
        if self.detached_at is not None:
            virtual, real = self.detached_at
            return virtual + (_real_monotonic_ns() - real)
        return self.now_ns

    def wall_ns(self):
        return self.epoch_ns + self.virtual_ns()

    def detach(self):
        if self.detached_at is None:
            self.detached_at = (self.now_ns, _real_monotonic_ns())

    def track(self, transport):
        try:
            peer = _address(transport.get_extra_info("peername"))
            local = _address(transport.get_extra_info("sockname"))
        except Exception:
            return None
        if peer not in self.http or local is None:
            return None
        conn = _Conn(transport, local)
        self.conns[local] = conn
        return conn

    def changed_conns(self):
        changed = []
        for local, conn in list(self.conns.items()):
            report = conn.report()
            if report != conn.reported:
                conn.reported = report
                changed.append(dict(report, order=conn.take_order()))
            if not report["open"]:
                del self.conns[local]
        return changed

    # Where the owner loop would block.
    def select(self, selector, timeout):
        real = selector._real
        loop = selector._loop
        if self.detached_at is not None or self.link is None or self.link.closed:
            self.detach()
            return real.select(timeout)
        if self.owner is not loop:
            # A loop left open after it ran hands the clock over; one running meanwhile in
            # another thread cannot share it.
            if self.owner is not None and self.owner.is_running():
                raise RuntimeError("rehearsal_clock: a second event loop ran while the first follows the clock")
            self.owner = loop
        if timeout == 0:
            return self._without_link(real.select(0))
        events = self._without_link(real.select(0))
        if events:
            return events
        if self._waits_on_the_world(loop, real):
            # A thread, a write or a descriptor outside the harness: real time, no idle.
            return self._without_link(real.select(None))
        return self._idle(loop, real)

    def _without_link(self, events):
        fd = self.link.fileno() if self.link is not None else -1
        return [(key, mask) for key, mask in events if key.fd != fd]

    def _waits_on_the_world(self, loop, real):
        if loop._rehearsal_shutting_down:
            return True
        if any(not future.done() for future in loop._rehearsal_executor_futures):
            return True
        self_pipe = loop._ssock.fileno() if getattr(loop, "_ssock", None) is not None else -1
        harness = {conn.transport.get_extra_info("socket").fileno() for conn in self.conns.values() if not conn.lost}
        for key in real.get_map().values():
            if key.events & selectors.EVENT_WRITE:
                return True
            if key.fd != self_pipe and key.fd not in harness:
                return True
        return False

    def _idle(self, loop, real):
        self.seq += 1
        seq = self.seq
        next_due = None
        if loop._scheduled:
            when = loop._scheduled[0].when()
            # The nearest nanosecond: float noise is far below half a nanosecond.
            next_due = max(round(when * 1e9), self.now_ns + 1)
        self.link.send(
            {"op": "idle", "seq": seq, "now_ns": self.now_ns, "next_due_ns": next_due, "conns": self.changed_conns()}
        )
        fd = self.link.fileno()
        real.register(fd, selectors.EVENT_READ, None)
        try:
            while True:
                advanced = self._take_messages(loop, seq)
                if advanced is not None:
                    return []
                events = real.select(None)
                own = [event for event in events if event[0].fd != fd]
                if len(own) != len(events) and not self.link.receive():
                    self.detach()
                    return own
                if self._take_messages(loop, seq) is not None:
                    return own
                if own:
                    self.link.send({"op": "busy", "seq": seq})
                    if self.pending:
                        return self._settle(real, seq, own)
                    return own
        finally:
            real.unregister(fd)

    def _settle(self, real, seq, own):
        """Woken by bytes on the model connections (rule 4a): waits for every reply the
        harness released at this instant to be there in full, then hands the loop all of
        their connections at once, in release order, so that it takes them in one step and in
        the same order in every run, whatever order their bytes came in."""
        deadline = _real_monotonic() + _SETTLE_WALL_MAX
        pending = None
        while pending is None:
            for message in self.link.take_lines():
                op = message.get("op")
                if op == "pending" and message.get("seq") == seq:
                    pending = message.get("conns") or []
                elif op == "end":
                    self.detach()
                    sys.stderr.write(
                        f"rehearsal_clock: the harness stopped following this process: {message.get('reason')}\n"
                    )
                    pending = []
                # A stale advance for `seq` crossed the busy report: the harness voids it.
            if pending is None and not self.link.receive():
                self.detach()
                return own
        waits = []
        for entry in pending:
            conn = self.conns.get(entry.get("conn"))
            if conn is not None and not conn.lost:
                waits.append((conn, int(entry.get("released", 0))))
        while any(not conn.arrived(released) for conn, released in waits) and _real_monotonic() < deadline:
            _time_module.sleep(0.0002)
        events = []
        listed = set()
        for conn, _ in waits:
            try:
                key = real.get_key(conn.transport._sock.fileno())
            except (KeyError, ValueError, AttributeError):
                continue
            if key.events & selectors.EVENT_READ and key.fd not in listed:
                events.append((key, selectors.EVENT_READ))
                listed.add(key.fd)
        events.extend((key, mask) for key, mask in own if key.fd not in listed)
        return events

    def _take_messages(self, loop, seq):
        """Handles the buffered messages; returns the new time if an advance for `seq` came."""
        advanced = None
        for message in self.link.take_lines():
            op = message.get("op")
            if op == "advance" and message.get("seq") == seq and advanced is None and self.detached_at is None:
                self.now_ns = int(message["to_ns"])
                bucket = [h.when() for h in loop._scheduled if not h.cancelled() and round(h.when() * 1e9) == self.now_ns]
                self.now_float = max(bucket + [self.now_ns / 1e9])
                self.link.send({"op": "at", "seq": seq, "now_ns": self.now_ns})
                advanced = self.now_ns
            elif op == "end":
                self.detach()
                sys.stderr.write(f"rehearsal_clock: the harness stopped following this process: {message.get('reason')}\n")
                advanced = self.now_ns if advanced is None else advanced
        return advanced


_STATE = _State()


class _VirtualSelector(selectors.BaseSelector):
    """The loop's selector, with the clock's rules where the loop would block."""

    def __init__(self, real):
        self._real = real
        self._loop = None

    def register(self, fileobj, events, data=None):
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._real.modify(fileobj, events, data)

    def select(self, timeout=None):
        return _STATE.select(self, timeout)

    def close(self):
        self._real.close()

    def get_key(self, fileobj):
        return self._real.get_key(fileobj)

    def get_map(self):
        return self._real.get_map()


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop on the harness's virtual time."""

    def __init__(self):
        selector = _VirtualSelector(selectors.DefaultSelector())
        self._rehearsal_executor_futures = set()
        self._rehearsal_shutting_down = False
        super().__init__(selector)
        selector._loop = self
        # Timers are compared with virtual nanoseconds turned into float seconds.
        self._clock_resolution = 1e-9

    def time(self):
        return _STATE.loop_time()

    def run_in_executor(self, executor, func, *args):
        future = super().run_in_executor(executor, func, *args)
        self._rehearsal_executor_futures.add(future)
        future.add_done_callback(self._rehearsal_executor_futures.discard)
        return future

    async def shutdown_default_executor(self, *args, **kwargs):
        # asyncio.run's last step joins the executor on a thread of its own (not an executor
        # future): without this, the loop looked idle with nothing due while it waited, and
        # the harness called the run stuck as the process was exiting.
        self._rehearsal_shutting_down = True
        return await super().shutdown_default_executor(*args, **kwargs)

    def _make_socket_transport(self, sock, protocol, waiter=None, **kwargs):
        # Every socket transport the loop makes (create_connection, open_connection, anyio's
        # connect_tcp) gets the counting protocol in front of the runtime's own.
        if isinstance(protocol, asyncio.BufferedProtocol):
            counting = _CountingBufferedProtocol(protocol)
        else:
            counting = _CountingProtocol(protocol)
        return super()._make_socket_transport(sock, counting, waiter, **kwargs)

    def close(self):
        if _STATE.owner is self:
            _STATE.owner = None
        super().close()


class VirtualEventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """Makes every new event loop a :class:`VirtualEventLoop`."""

    def new_event_loop(self):
        return VirtualEventLoop()


class _DatetimeMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _real_datetime)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _real_datetime)


class VirtualDatetime(_real_datetime, metaclass=_DatetimeMeta):
    """``datetime.datetime`` whose ``now``, ``utcnow`` and ``today`` read the virtual clock."""

    @classmethod
    def now(cls, tz=None):
        return _real_datetime.fromtimestamp(_STATE.wall_ns() / 1e9, tz)

    @classmethod
    def utcnow(cls):
        utc = _real_datetime.fromtimestamp(_STATE.wall_ns() / 1e9, _datetime_module.timezone.utc)
        return utc.replace(tzinfo=None)

    @classmethod
    def today(cls):
        return cls.now()


def _virtual_time():
    return _STATE.wall_ns() / 1e9


def _patch_wall_clock(monotonic):
    _time_module.time = _virtual_time
    _time_module.time_ns = _STATE.wall_ns
    _time_module.localtime = lambda secs=None: _real_localtime(_virtual_time() if secs is None else secs)
    _time_module.gmtime = lambda secs=None: _real_gmtime(_virtual_time() if secs is None else secs)
    _time_module.ctime = lambda secs=None: _real_ctime(_virtual_time() if secs is None else secs)
    _time_module.asctime = lambda t=None: _real_asctime(_real_localtime(_virtual_time()) if t is None else t)
    _time_module.strftime = lambda format, t=None: _real_strftime(
        format, _real_localtime(_virtual_time()) if t is None else t
    )
    _datetime_module.datetime = VirtualDatetime
    if monotonic:
        _time_module.monotonic = lambda: _STATE.virtual_ns() / 1e9
        _time_module.monotonic_ns = _STATE.virtual_ns


def _seed(seed):
    random.seed(seed)
    ids = random.Random(seed ^ 0x9E3779B97F4A7C15)
    uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)


def install(address, runtime="python-asyncio"):
    """Connects to the harness at ``address`` and puts this process on its clock.

    Returns True once installed, False if the harness refused this process (it then runs on
    real time). Raises :class:`ClockError` if the harness cannot be reached or answers
    nonsense.
    """
    link = _Link(address)
    link.send({"op": "hello", "protocol": PROTOCOL, "runtime": f"{runtime} {sys.version.split()[0]}", "pid": os.getpid()})
    welcome = link.next_message()
    if welcome.get("op") == "refused":
        sys.stderr.write(f"rehearsal_clock: the harness refused this process ({welcome.get('reason')}); it runs on real time\n")
        return False
    if welcome.get("op") != "welcome" or welcome.get("protocol") != PROTOCOL:
        raise ClockError(f"the clock's first answer is not a protocol {PROTOCOL} welcome: {welcome}")
    _STATE.link = link
    _STATE.now_ns = int(welcome["now_ns"])
    _STATE.now_float = _STATE.now_ns / 1e9
    _STATE.epoch_ns = int(welcome.get("epoch_ns", 0))
    _STATE.seed = int(welcome.get("seed", 0))
    _STATE.http = set(welcome.get("http", []))
    _STATE.pending = bool(welcome.get("pending", False))
    # Subprocesses run on real time rather than be refused as a second process.
    os.environ.pop("REHEARSAL_CLOCK", None)
    _patch_wall_clock(os.environ.get("REHEARSAL_CLOCK_MONOTONIC") == "virtual")
    _seed(_STATE.seed)
    asyncio.set_event_loop_policy(VirtualEventLoopPolicy())
    return True


def install_from_env():
    """What ``sitecustomize`` calls: installs if ``REHEARSAL_CLOCK`` is set; a harness that
    cannot be reached ends the process with exit code 3 and says why (running on real time
    instead would make every timeout real without a word)."""
    address = os.environ.get("REHEARSAL_CLOCK")
    if not address:
        return False
    try:
        return install(address)
    except (ClockError, ValueError) as error:
        sys.stderr.write(f"rehearsal_clock: {error}\n")
        sys.stderr.flush()
        os._exit(3)
