"""The intake: untrusted IR checked in a compile worker, a bounded number per client, clients in turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from despina.compiler.ir.codec import encode
from despina.compiler.options import CompileOptions
from despina.server.errors import InvalidArgument, ResourceExhausted
from despina.server.intake import Intake, peer_host
from despina.server.metrics import Metrics
from despina.server.workers import CompilePool

from .conftest import FAKE_COMPILER, unique
from .faults.attack import decode_bomb
from .kernels import vector_add, vector_add_ir

T = TypeVar("T")


BOMB = decode_bomb(200_000)


def with_intake(body: Callable[[Intake], Awaitable[T]], per_client: int = 8, per_client_bytes: int = 1 << 20) -> T:
    async def main() -> T:
        pool = CompilePool(1, FAKE_COMPILER, 30.0, Metrics())
        await pool.start()
        try:
            return await body(Intake(pool, per_client, per_client_bytes))
        finally:
            await pool.close()

    return asyncio.run(main())


def test_peer_host() -> None:
    assert peer_host("ipv4:10.0.0.7:5123") == "10.0.0.7"
    assert peer_host("ipv6:[::1]:5123") == "::1"
    assert peer_host("unix:/tmp/s") == "unix:/tmp/s"


def test_checks_answer_what_the_decoder_and_verifier_say() -> None:
    bad = vector_add()
    bad.functions[0].body.ops.pop()  # no terminator

    async def body(intake: Intake) -> None:
        await intake.verify(vector_add_ir(salt=unique()))
        sig = await intake.signature(vector_add_ir())
        assert sig.kernel == "add_kernel" and [p.name for p in sig.params] == ["x", "y", "out", "n"]
        with pytest.raises(InvalidArgument, match="the IR failed verification"):
            await intake.verify(encode(bad))
        with pytest.raises(InvalidArgument, match="invalid IR: the module is past the IR's limits"):
            await intake.verify(BOMB)
        with pytest.raises(InvalidArgument, match="invalid IR"):
            await intake.signature(b"\x22\x10abc")

    with_intake(body)


def test_a_client_past_its_share_is_refused_at_once_and_others_are_not() -> None:
    slow = vector_add_ir(salt=unique(), fake_sleep=0.5)

    async def body(intake: Intake) -> None:
        busy = asyncio.ensure_future(intake.pool.compile(slow, "sm_90", CompileOptions()))  # the one worker is taken
        await asyncio.sleep(0.05)
        with Intake.client_is("10.0.0.1"):
            waiting = [asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique()))) for _ in range(2)]
            await asyncio.sleep(0)
            with pytest.raises(ResourceExhausted, match=r"this client \(10.0.0.1\) already has 2 kernels .* "
                                                        "--max-checks-per-client"):
                await intake.verify(vector_add_ir(salt=unique()))
        with Intake.client_is("10.0.0.2"):
            other = asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique())))
        with Intake.client_is("10.0.0.3"), pytest.raises(ResourceExhausted, match="bytes of IR"):
            await intake.verify(BOMB)  # 400 kB: past this client's bytes at once
        await asyncio.gather(busy, *waiting, other)
        with Intake.client_is("10.0.0.1"):
            await intake.verify(vector_add_ir(salt=unique()))  # answered: its share is back

    with_intake(body, per_client=2, per_client_bytes=100_000)


def test_clients_take_turns() -> None:
    """One client queues four checks, another one: the other's goes before the first client's third."""
    slow = vector_add_ir(salt=unique(), fake_sleep=0.3)
    done: list[str] = []

    async def check(client: str, name: str) -> None:
        with Intake.client_is(client):
            await intake_ref[0].verify(vector_add_ir(salt=unique()))
        done.append(name)

    intake_ref: list[Intake] = []

    async def body(intake: Intake) -> None:
        intake_ref.append(intake)
        first = asyncio.ensure_future(check("a", "a0"))  # takes the slot, waits for the busy worker
        await asyncio.sleep(0)
        busy = asyncio.ensure_future(intake.pool.compile(slow, "sm_90", CompileOptions()))
        flood = [asyncio.ensure_future(check("a", f"a{i}")) for i in range(1, 4)]
        await asyncio.sleep(0)
        late = asyncio.ensure_future(check("b", "b"))
        await asyncio.gather(first, busy, *flood, late)

    with_intake(body)
    assert done.index("b") < done.index("a2"), done  # first come, first served would put it last


def test_a_cancelled_check_gives_its_turn_back() -> None:
    async def body(intake: Intake) -> None:
        slow = asyncio.ensure_future(intake.pool.compile(vector_add_ir(salt=unique(), fake_sleep=0.3), "sm_90", CompileOptions()))
        await asyncio.sleep(0.05)
        with Intake.client_is("a"):
            held = asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique())))
            queued = asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique())))
        await asyncio.sleep(0.01)
        queued.cancel()
        await asyncio.gather(slow, held)
        with Intake.client_is("a"):
            await asyncio.wait_for(intake.verify(vector_add_ir(salt=unique())), 10)

    with_intake(body, per_client=2)


def test_a_large_request_is_refused_before_parsing_when_its_clients_share_is_taken() -> None:
    async def body(intake: Intake) -> None:
        slow = asyncio.ensure_future(intake.pool.compile(vector_add_ir(salt=unique(), fake_sleep=0.3), "sm_90", CompileOptions()))
        await asyncio.sleep(0.05)
        with Intake.client_is("a"):
            waiting = asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique()) + b"\0" * 1500))
            await asyncio.sleep(0.01)
            intake.admit(1000)  # small: a cache hit always passes
            with pytest.raises(ResourceExhausted, match="already has 1 kernels"):
                intake.admit(2 << 20)
        with Intake.client_is("b"):
            intake.admit(2 << 20)  # another client's share is its own
        await asyncio.gather(slow, waiting, return_exceptions=True)

    with_intake(body, per_client_bytes=(2 << 20) + 100)


def test_a_large_requests_refusal_waits_while_its_client_has_checks() -> None:
    """A transport answers a large request that it refuses a second later while that client has checks waiting
    or running, at once otherwise: a client sending large requests back to back then has one read a second, not
    one each time the last was refused (the event loop reading ~40 decode bombs a second, 8 MiB each)."""
    async def body(intake: Intake) -> None:
        loop = asyncio.get_running_loop()
        with Intake.client_is("a"):
            start = loop.time()
            await intake.refusing()  # no checks: at once
            assert loop.time() - start < 0.5
        slow = asyncio.ensure_future(intake.pool.compile(vector_add_ir(salt=unique(), fake_sleep=0.5), "sm_90", CompileOptions()))
        await asyncio.sleep(0.05)
        with Intake.client_is("a"):
            check = asyncio.ensure_future(intake.verify(vector_add_ir(salt=unique())))
            await asyncio.sleep(0.01)
            with pytest.raises(ResourceExhausted):
                intake.admit(2 << 20)
            start = loop.time()
            await intake.refusing(wait_s=0.2)
            assert 0.19 < loop.time() - start < 0.45 and not check.done()
        with Intake.client_is("b"):  # another client's checks are not this one's
            start = loop.time()
            await intake.refusing()
            assert loop.time() - start < 0.5
        await asyncio.gather(slow, check)

    with_intake(body, per_client_bytes=(2 << 20) + 100)
