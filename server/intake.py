"""Untrusted IR is decoded in a compile worker, never in the daemon's own process, and each client
gets its turn.

    intake = Intake(pool, per_client=32, per_client_bytes=32 << 20)
    with intake.client_is("10.0.0.7"):   # the transports name the caller of each request
        await intake.verify(ir)            # InvalidArgument saying what is wrong with it
        sig = await intake.signature(ir)   # the kernel's parameters (Execute)

Decoding a module builds one Python object per op, value and attribute: seconds of CPU and hundreds
of MB for a module at the IR's limits, which in the daemon's process would hold the GIL the event
loop needs for every cache hit, and keep the memory after. A compile worker does it instead (under
its memory cap), after `wire.census` has refused anything past the limits. The checks a client has
waiting are bounded in number and in bytes (past either, RESOURCE_EXHAUSTED at once), and the
workers take them from the clients in turn, so one client's flood delays another's check by at most
one check per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Any

from .errors import InvalidArgument, ResourceExhausted
from .execute import Signature
from .workers import CompilePool

_client: contextvars.ContextVar[str] = contextvars.ContextVar("despina_client", default="")
LARGE = 1 << 20  # bytes of a request that `admit` may refuse before it is parsed
REFUSAL_WAIT_S = 1.0  # the longest a large request's refusal waits for the client's checks (`refusing`)


def peer_host(peer: str) -> str:
    """The caller's address without its port: gRPC's `ipv4:10.0.0.7:5123`, `ipv6:[::1]:5123` or `unix:/path`."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return peer


def check(job: dict[str, Any]) -> dict[str, Any]:
    """Run in a compile worker: {"check": "verify" | "signature", "ir": bytes} -> {} or {"signature": ...}, or
    {"error": message} for IR that does not decode, verify, or name a kernel Execute can run."""
    from despina.compiler.ir.codec import IRDecodeError, decode
    from despina.compiler.ir.verifier import VerificationError, verify

    from . import execute

    try:
        if job["check"] == "signature":
            return {"signature": execute.signature(job["ir"])}
        verify(decode(job["ir"]))
    except InvalidArgument as e:
        return {"error": e.message}
    except IRDecodeError as e:
        return {"error": f"invalid IR: {e}"}
    except VerificationError as e:
        return {"error": f"the IR failed verification: {e}"}
    return {}


class Intake:
    def __init__(self, pool: CompilePool, per_client: int, per_client_bytes: int) -> None:
        self.pool = pool
        self.per_client, self.per_client_bytes = per_client, per_client_bytes
        self._held: dict[str, list[int]] = {}  # client -> [checks, bytes] waiting or running
        self._queues: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._running = 0

    @staticmethod
    @contextlib.contextmanager
    def client_is(client: str) -> Iterator[None]:
        """Name the caller of what runs inside (and of the tasks it starts)."""
        token = _client.set(client)
        try:
            yield
        finally:
            _client.reset(token)

    async def verify(self, ir: bytes | memoryview) -> None:
        await self._check({"check": "verify", "ir": ir})

    async def signature(self, ir: bytes) -> Signature:
        found: Signature = (await self._check({"check": "signature", "ir": ir}))["signature"]
        return found

    def admit(self, size: int) -> None:
        """Refuse a request of `size` bytes at once, before it is even parsed, when it is large and its client's
        share of checks is taken: hashing and copying 8 MB messages only to refuse them afterwards was most of
        what a decode-bomb flood cost the event loop. Small requests (cache hits) always pass."""
        held = self._held.get(_client.get())
        if size >= LARGE and held is not None and held[1] + size > self.per_client_bytes:
            raise self._refusal(_client.get(), held)

    async def refusing(self, wait_s: float = REFUSAL_WAIT_S) -> None:
        """Return after `wait_s`, or at once when the client has no checks waiting or running: a transport answers
        a large request that it refuses (by `admit`, or IR past the limits) then, having let go of its bytes.
        Refused at once, a client sending large requests back to back has the next one read at once, as fast as
        the host can read: what the event loop has left for everyone else's cache hits goes to reading them.
        Each refusal waits its own time, not until the client's checks are answered: six decode bombs answered
        together came back together, and their bytes arrived together, a burst that the hits waited behind."""
        if _client.get() in self._held:
            await asyncio.sleep(wait_s)

    def _refusal(self, client: str, held: list[int]) -> ResourceExhausted:
        return ResourceExhausted(
            f"this client{f' ({client})' if client else ''} already has {held[0]} kernels ({held[1]} bytes of IR) "
            f"waiting to be checked; a client may have {self.per_client} and {self.per_client_bytes} bytes "
            "(despina serve --max-checks-per-client): retry when those are answered")

    async def _check(self, job: dict[str, Any]) -> dict[str, Any]:
        client, size = _client.get(), len(job["ir"])
        held = self._held.setdefault(client, [0, 0])
        if held[0] >= self.per_client or held[1] + size > self.per_client_bytes:
            if held[0] == 0:
                del self._held[client]
            raise self._refusal(client, held)
        held[0] += 1
        held[1] += size
        try:
            await self._turn(client)
            try:
                result = await self.pool.run(job)
            finally:
                self._running -= 1
                self._next()
        finally:
            held[0] -= 1
            held[1] -= size
            if held[0] == 0:
                del self._held[client]
        if "error" in result:
            raise InvalidArgument(result["error"])
        return result

    async def _turn(self, client: str) -> None:
        """Wait until a worker is free for this check: the waiting clients take turns, one check each."""
        if self._running < self.pool.size and not self._queues:
            self._running += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(client, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given the slot as it was cancelled: hand it on
                self._running -= 1
                self._next()
            else:
                self._forget(client, turn)
            raise

    def _forget(self, client: str, turn: asyncio.Future[None]) -> None:
        queue = self._queues.get(client)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._queues[client]

    def _next(self) -> None:
        while self._queues and self._running < self.pool.size:
            client, queue = self._queues.popitem(last=False)
            turn = queue.popleft()
            if queue:
                self._queues[client] = queue  # to the back: the next client goes first
            self._running += 1
            turn.set_result(None)
