"""Request bodies over HTTP, read before any route runs: bounded in bytes by route, in JSON tokens as
they arrive, and in time.

FastAPI parses a JSON body on the event loop, in C that holds the GIL throughout: a 58 MB array of 29 M
numbers took 4.9 s, during which no other request was served. Cost grows with the number of values
(~170 ns each) far more than with bytes (a 58 MB string: 0.2 s), so the body is refused as soon as
the chunks read so far hold more than MAX_JSON_TOKENS separators (`,` `[` `{`), counted chunk by chunk
as they arrive (a few microseconds each), before it is parsed; a body of a route that carries no
buffers may not be larger than its IR needs (`limit`); and the whole body must arrive within the
body time-out (slow senders hold a connection and its memory).

    most = limit("/v1/compile", max_request_bytes, max_ir_bytes)
    receive = await read(receive, most, timeout_s=60, path="/v1/compile")
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive

from .errors import DeadlineExceeded, InvalidArgument, ResourceExhausted

# Far more than any request of the API holds (4096 arguments of a few fields each; 1,000 tuning configs),
# and parsed in ~20 ms at most.
MAX_JSON_TOKENS = 100_000
# Routes whose bodies carry buffers; the others carry IR (base64: 4/3 of its bytes) and small fields.
BUFFER_ROUTES = frozenset({"/v1/execute", "/v1/tune"})


def limit(path: str, max_request_bytes: int, max_ir_bytes: int) -> tuple[int, str]:
    """The largest body `path` takes, and the flag that sets it: --max-request-bytes for routes with
    buffers; for the others, room for one IR in base64 and 1 MiB more (--max-ir-bytes), when less."""
    for_ir = max_ir_bytes * 4 // 3 + (1 << 20)
    if path in BUFFER_ROUTES or for_ir >= max_request_bytes:
        return max_request_bytes, "--max-request-bytes"
    return for_ir, "--max-ir-bytes"


def too_large(size: str, most: tuple[int, str], path: str) -> ResourceExhausted:
    return ResourceExhausted(f"the request body is {size} bytes; {path} takes at most {most[0]} (despina serve "
                             f"{most[1]})")


async def read(receive: Receive, most: tuple[int, str], timeout_s: float, path: str) -> Receive:
    """The whole body as one message, read here: `ResourceExhausted` past `most` bytes or MAX_JSON_TOKENS,
    `DeadlineExceeded` when it has not all arrived within `timeout_s`."""
    chunks, size, tokens, more = [], 0, 0, True
    try:
        async with _deadline(timeout_s):
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return _replaying(message, receive)  # the client left: the app sees it as it would have
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > most[0]:
                    raise too_large(f"more than {size}", most, path)
                tokens += chunk.count(b",") + chunk.count(b"[") + chunk.count(b"{")
                if tokens > MAX_JSON_TOKENS:
                    raise InvalidArgument(f"the request body holds more than {MAX_JSON_TOKENS} JSON values; no request"
                                          f" of this API needs that many (refused after {size} bytes)")
                chunks.append(chunk)
                more = message.get("more_body", False)
    except TimeoutError:
        raise DeadlineExceeded(f"the request body did not arrive within {timeout_s:g} s ({size} bytes came); "
                               "despina serve --http-body-timeout") from None
    return _replaying({"type": "http.request", "body": b"".join(chunks), "more_body": False}, receive)


def _replaying(first: Message, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return first

    return replay


class _deadline:
    """asyncio.timeout (Python 3.11) for 3.10 too: cancel the body's reading at the deadline."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._timer: asyncio.TimerHandle | None = None
        self._expired = False

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        assert task is not None

        def expire() -> None:
            self._expired = True
            task.cancel()

        self._timer = asyncio.get_running_loop().call_later(self.seconds, expire)

    async def __aexit__(self, kind: object, error: object, tb: object) -> bool:
        assert self._timer is not None
        self._timer.cancel()
        if self._expired and isinstance(error, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and hasattr(task, "uncancel"):  # 3.11: this cancel was ours, not the caller's
                task.uncancel()
            raise TimeoutError
        return False
