"""The daemon's end of a worker's pipe, written and read without blocking the event loop.

    await send(conn, job)        # what conn.send(job) does
    reply = await receive(conn)  # what conn.recv() returns, once the worker has started answering

`Connection.send` and `recv` return only once the whole message has passed, at the pace of the worker at
the other end: a compile worker runs at nice +10, so on a busy host `send` held the event loop for 13 ms
on average and up to 35 ms for each 8 MiB decode bomb passed on to be checked, and every cache hit
waited behind it. Here a thread of the loop's executor moves the message, through a duplicate of the
socket's descriptor that it owns: the worker may be killed and `conn` closed meanwhile (the thread then
gets an error, never another file that took the descriptor's number). Waiting for an answer takes no
thread (a compile may take minutes): the loop watches the socket, and a thread reads the answer once it
starts to arrive. The framing is multiprocessing's (a 4-byte big-endian length, or -1 and an 8-byte one),
so workers keep `conn.recv()` and `conn.send()`.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

_LONG = 0x7FFFFFFF  # longer messages have the 8-byte length


async def send(conn: Connection, obj: Any) -> None:
    """Write `obj` as `conn.send(obj)` would; OSError (BrokenPipeError) when the worker is gone."""
    await asyncio.to_thread(_send, _own(conn), obj)


async def receive(conn: Connection) -> Any:
    """The next object from `conn`, as `conn.recv()` would return it; EOFError when the worker is gone."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return await asyncio.to_thread(_receive, _own(conn))


def _own(conn: Connection) -> socket.socket:
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    sock.settimeout(None)  # blocking, whatever socket.setdefaulttimeout says
    return sock


def _send(sock: socket.socket, obj: Any) -> None:
    with sock:
        pieces = _pickled(obj)
        n = sum(len(p) for p in pieces)
        sock.sendall(struct.pack("!i", n) if n <= _LONG else struct.pack("!iQ", -1, n))
        for piece in pieces:
            sock.sendall(piece)


class _Pieces(list[memoryview]):
    """A file for a pickler that keeps what it is given: pickle hands a large bytes value (or buffer) to
    `write` as it is, after the bytes before it, so it is sent from where it lies."""

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.append(view)
        return len(view)


def _pickled(obj: Any) -> list[memoryview]:
    """`ForkingPickler.dumps(obj)` in pieces, without copying its large bytes values: a job's 8 MiB IR went
    into the pickle with the GIL held (2-5 ms on a busy 2-core host, the event loop waiting), and `sendall`
    of the pieces lets it go. A job's memoryview values (a view of a large gRPC request's IR) go as
    bytes: the worker's `conn.recv()` reads what it always read."""
    if isinstance(obj, dict):
        obj = {k: pickle.PickleBuffer(v) if isinstance(v, memoryview) else v for k, v in obj.items()}
    pieces = _Pieces()
    ForkingPickler(pieces, 5).dump(obj)
    return pieces


def _receive(sock: socket.socket) -> Any:
    with sock:
        (size,) = struct.unpack("!i", _exactly(sock, 4))
        if size == -1:
            (size,) = struct.unpack("!Q", _exactly(sock, 8))
        return ForkingPickler.loads(_exactly(sock, size))


def _exactly(sock: socket.socket, n: int) -> bytearray:
    data = bytearray(n)
    with memoryview(data) as view:
        got = 0
        while got < n:
            k = sock.recv_into(view[got:])
            if k == 0:
                raise EOFError(f"the worker closed its pipe {got} bytes into a message of {n}")
            got += k
    return data
