"""The HTTP listener's defences below the app: a bound on connections, a deadline for request headers,
and logs that a flood cannot fill.

uvicorn closes idle keep-alive connections but waits for ever on a request whose headers never end
(slowloris): a thousand such connections held every file descriptor, and asyncio then logged
"socket.accept() out of system resource" for each of up to `backlog` attempts per loop pass (~957k
lines in 15 s). Here each connection must finish its request's headers within `header_timeout_s` of
connecting (or of its last response); at `limit` connections, a new one closes the connection that has
waited longest for its headers (or, when every one is inside a request, is answered 503 itself); and
`quiet_floods` lets each kind of repeated log line through once per interval with a count.

    uvicorn.Config(app, http=guarded(max_connections=1000, header_timeout_s=10))
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from typing import Any

log = logging.getLogger("despina.server.http")
_BUSY = b'{"error": {"code": "UNAVAILABLE", "message": "this daemon has as many HTTP connections open as it takes ' \
        b'(despina serve --http-max-connections), each inside a request; retry"}}'
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(_BUSY), _BUSY))


class Connections:
    """The open connections, and those waiting for a request's headers, oldest first."""

    def __init__(self, limit: int, header_timeout_s: float) -> None:
        self.limit, self.header_timeout_s = limit, header_timeout_s
        self.open: set[Any] = set()
        self.waiting: OrderedDict[Any, float] = OrderedDict()  # protocol -> when its headers are due
        self.closed_slow = self.closed_for_room = self.refused = 0
        self._sweeping: asyncio.TimerHandle | None = None

    def opened(self, conn: Any) -> bool:
        """Whether `conn` may stay: at the limit, the connection waiting longest for its headers makes room."""
        if len(self.open) >= self.limit:
            if not self.waiting:
                self.refused += 1
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.closed_for_room += 1
            self._close(oldest)
        self.open.add(conn)
        self.wait_for_headers(conn)
        return True

    def wait_for_headers(self, conn: Any) -> None:
        self.waiting.pop(conn, None)
        self.waiting[conn] = time.monotonic() + self.header_timeout_s
        if self._sweeping is None:
            self._sweeping = asyncio.get_running_loop().call_later(min(1.0, self.header_timeout_s), self._sweep)

    def started(self, conn: Any) -> None:
        self.waiting.pop(conn, None)

    def closed(self, conn: Any) -> None:
        self.open.discard(conn)
        self.waiting.pop(conn, None)

    def _sweep(self) -> None:
        self._sweeping = None
        now = time.monotonic()
        while self.waiting:
            conn, due = next(iter(self.waiting.items()))
            if due > now:
                break
            del self.waiting[conn]
            self.closed_slow += 1
            self._close(conn)
        if self.waiting:
            self._sweeping = asyncio.get_running_loop().call_later(min(1.0, self.header_timeout_s), self._sweep)

    @staticmethod
    def _close(conn: Any) -> None:
        transport = conn.transport
        if transport is not None and not transport.is_closing():
            transport.abort()  # nothing is owed to a connection that never finished its headers


def guarded_protocol(base: type[Any], connections: Connections) -> type[Any]:
    """uvicorn's HTTP protocol class `base` (h11 or httptools), with `connections` told of each connection
    and of each request whose headers have arrived (both set `cycle` on it)."""

    class Guarded(base):
        def connection_made(self, transport: asyncio.Transport) -> None:
            if not connections.opened(self):
                transport.write(BUSY)
                transport.close()
                self.transport = None
                return
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            connections.closed(self)
            if self.transport is not None:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle:
                connections.started(self)

        def on_response_complete(self) -> None:
            connections.wait_for_headers(self)
            cycle = self.cycle
            super().on_response_complete()
            if self.cycle is not cycle:  # a pipelined request was waiting
                connections.started(self)

    return Guarded


def guarded(max_connections: int, header_timeout_s: float) -> type[Any]:
    """uvicorn's HTTP protocol (httptools when installed, else h11) behind a `Connections` guard."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return guarded_protocol(AutoHTTPProtocol, Connections(connection_limit(max_connections), header_timeout_s))


def connection_limit(wanted: int, reserve: int = 256) -> int:
    """`wanted`, or fewer when the process may not open that many files and keep `reserve` for everything
    else (gRPC, Redis, workers' pipes, the cache): running out of descriptors is what stops `accept`. The
    soft limit on open files is raised to the hard one first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or wanted <= soft - reserve:
        return wanted
    allowed = max(16, soft - reserve)
    log.warning("--http-max-connections %d: this process may open %d files (ulimit -n), so HTTP takes %d "
                "connections at once", wanted, soft, allowed)
    return allowed


class QuietFloods(logging.Filter):
    """Each message template passes once per `interval_s`; the next one to pass says how many were held back."""

    def __init__(self, interval_s: float = 10.0) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._last: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)
        now = time.monotonic()
        if len(self._last) > 1024:  # templates, not lines: a few dozen in practice
            self._last.clear()
        last, held = self._last.get(key, (-self.interval_s, 0))
        if now - last < self.interval_s:
            self._last[key] = (last, held + 1)
            return False
        self._last[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {now - last:.1f} s not logged)"
        return True


def quiet_floods(*loggers: str) -> None:
    """Rate-limit the log lines an attacker can cause: asyncio's accept errors, uvicorn's bad requests."""
    for name in loggers:
        logging.getLogger(name).addFilter(QuietFloods())
