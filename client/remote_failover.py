"""Several daemons for one client: `DESPINA_SERVER` (or `despina.set_server`) takes a comma-separated list.

    export DESPINA_SERVER=grpc://gpu-a:50051,grpc://gpu-b:50051,http://gpu-c:8000

Each process puts the addresses in an order of its own, drawn from its host name and process id:
the clients of a cluster spread over the daemons, and one process keeps asking the same daemon.
When that daemon cannot be reached (connection refused, UNAVAILABLE, a daemon that dies during the
call), the request goes to the next address of the order: a compile is idempotent by its cache key,
an execute works on copies of the caller's arrays. The address that failed is passed over for a
back-off, `DOWN_S` after its first failure, doubling while it keeps failing, `DOWN_MAX_S` at most;
an answer from it ends the back-off. An error that is the request's own (INVALID_ARGUMENT,
UNAUTHENTICATED, DEADLINE_EXCEEDED, ...) is not sent anywhere else. When every address fails, the
`ServerUnavailable` names each one and why.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from .remote_errors import ServerUnavailable

T = TypeVar("T")
SCHEMES = ("grpc", "grpcs", "http", "https")
DOWN_S = 1.0
DOWN_MAX_S = 30.0
log = logging.getLogger("despina.remote")


def addresses(spec: str, where: str = "DESPINA_SERVER") -> list[str]:
    """The daemon addresses of `spec` ("grpc://a:50051,http://b:8000"), in its order, each once;
    ValueError naming `where` for an empty one or one of another scheme."""
    found: list[str] = []
    for item in spec.split(","):
        address = item.strip()
        if not address:
            raise ValueError(f"{where} {spec!r} has an empty address: separate addresses with single commas, as "
                             "grpc://host-a:50051,grpc://host-b:50051")
        if address.partition("://")[0] not in SCHEMES or not _host_and_port(address):
            raise ValueError(f"{where}: server URL {address!r} is not grpc://HOST:PORT, grpcs://, http:// or https:// "
                             "(several daemons: their URLs separated by commas)")
        if address not in found:
            found.append(address)
    return found


def _host_and_port(address: str) -> bool:
    parts = urlsplit(address)
    try:
        parts.port  # noqa: B018  (it checks the port)
    except ValueError:
        return False
    return bool(parts.hostname) and not parts.query and not parts.fragment


def process_seed() -> str:
    """What orders this process's addresses: its host and its process id (a fork gets an order of its own)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Servers:
    """The addresses of one `spec`, in the order `seed` draws (this process's by default), and the
    back-off of those that failed. Thread-safe: the threads of a process share one."""

    def __init__(self, spec: str, seed: str | int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.addresses = addresses(spec)
        self.order = list(self.addresses)
        random.Random(process_seed() if seed is None else seed).shuffle(self.order)
        self.clock = clock
        self._down: dict[str, tuple[float, float]] = {}  # address -> (passed over until, its back-off)
        self._lock = threading.Lock()

    def candidates(self) -> list[str]:
        """The addresses to try, in turn: those not backing off in this process's order, then the others,
        the soonest due first (a request tries every address before it fails)."""
        now = self.clock()
        with self._lock:
            down = {a: until for a, (until, _) in self._down.items() if until > now}
        return [a for a in self.order if a not in down] + sorted(down, key=down.__getitem__)

    def down(self, address: str, why: str) -> float:
        """Pass `address` over for its next back-off (the requests that were under way when it failed
        do not lengthen it); that back-off in seconds."""
        now = self.clock()
        with self._lock:
            until, last = self._down.get(address, (0.0, 0.0))
            if until > now:
                return last
            backoff = min(DOWN_MAX_S, 2 * last) if last else DOWN_S
            self._down[address] = (now + backoff, backoff)
        if not last:
            log.warning("despina: the daemon at %s is unreachable (%s); asking the next of DESPINA_SERVER, and this "
                        "one again in %gs", address, why, backoff)
        return backoff

    def up(self, address: str) -> None:
        if address in self._down:
            with self._lock:
                self._down.pop(address, None)

    def call(self, fn: Callable[[str], T]) -> T:
        """`fn(address)` of the first address that answers; `ServerUnavailable` naming every address when
        none does. Any other error is `fn`'s answer, raised at once."""
        failures: list[tuple[str, str]] = []
        for address in self.candidates():
            try:
                result = fn(address)
            except ServerUnavailable as e:
                why = f"{e.code}: {e.message}"
                self.down(address, why)
                failures.append((address, why))
                continue
            self.up(address)
            return result
        if len(failures) == 1:
            raise ServerUnavailable("UNAVAILABLE", "the daemon at {} is unreachable ({})".format(*failures[0]))
        tried = "; ".join(f"{address} ({why})" for address, why in failures)
        raise ServerUnavailable("UNAVAILABLE", f"every daemon is unreachable: {tried}")
