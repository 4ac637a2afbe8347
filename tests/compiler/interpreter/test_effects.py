"""What the interpreter reads off a while loop: whether it reads memory, whether it ignores its carried values."""

from __future__ import annotations

from collections.abc import Callable

from despina.compiler.interpreter.effects import blind, reads_memory
from despina.compiler.ir.core import Op, Value
from despina.compiler.ir.types import int32

from .kernel import K, ptr

SEM = {"sem": "acq_rel", "scope": "gpu"}
# The loop's body: (kernel, carried counter, flag pointer, out pointer) -> the next counter.
Body = Callable[[K, Value, Value, Value], Value]


def loop(condition: Callable[[K, Value, Value], Value], body: Body) -> tuple[K, Op]:
    """A kernel whose one while loop carries a counter `tries` from 0, as `while condition: tries = body`."""
    k = K(flag=ptr("int32"), out=ptr("int32"))
    flag, out = k.arg["flag"], k.arg["out"]
    k.while_([k.const(0)], lambda t: [condition(k, t, flag), t], lambda t: [body(k, t, flag, out)])
    return k, next(op for op in k.module().kernel.walk() if op.name == "while")


def spin(k: K, tries: Value, flag: Value) -> Value:
    return k.op("cmp", k.op("atomic_cas", flag, k.const(0), k.const(1), **SEM), k.const(1), pred="eq")


def count(k: K, tries: Value, flag: Value, out: Value) -> Value:
    return k.op("add", tries, k.const(1))


def facts(condition: Callable[[K, Value, Value], Value], body: Body) -> tuple[bool, bool]:
    k, op = loop(condition, body)
    module = k.module()
    return reads_memory(module, {}, op), blind(module, {}, op)


def test_a_spin_lock_reads_memory_and_ignores_its_tries() -> None:
    assert facts(spin, count) == (True, True)


def test_a_condition_on_the_carried_value_is_not_blind() -> None:
    def below(k: K, tries: Value, flag: Value) -> Value:
        return k.lt(tries, k.const(10))

    assert facts(below, count) == (False, False)


def test_a_load_at_an_address_made_from_the_carried_value_is_not_blind() -> None:
    def at(k: K, tries: Value, flag: Value) -> Value:
        return k.op("cmp", k.op("load", k.op("addptr", flag, tries)), k.const(0), pred="eq")

    assert facts(at, count) == (True, False)


def test_a_store_of_the_carried_value_is_not_blind() -> None:
    def store(k: K, tries: Value, flag: Value, out: Value) -> Value:
        k.void("store", out, tries)
        return count(k, tries, flag, out)

    assert facts(spin, store) == (True, False)


def test_a_store_in_a_branch_taken_on_the_carried_value_is_not_blind() -> None:
    def store_sometimes(k: K, tries: Value, flag: Value, out: Value) -> Value:
        def then() -> list[Value]:
            k.void("store", flag, k.const(1))
            return []

        k.if_(k.op("cmp", tries, k.const(100), pred="eq"), then, lambda: [])
        return count(k, tries, flag, out)

    assert facts(spin, store_sometimes) == (True, False)


def test_a_store_that_ignores_the_carried_value_keeps_the_loop_blind() -> None:
    def store_one(k: K, tries: Value, flag: Value, out: Value) -> Value:
        k.void("store", out, k.const(1))
        return count(k, tries, flag, out)

    assert facts(spin, store_one) == (True, True)


def test_calls_are_followed() -> None:
    k = K(flag=ptr("int32"))
    flag = k.arg["flag"]

    def poke(p: Value, v: Value) -> list[Value]:
        k.void("store", p, v)
        return []

    helper = k.helper("peek", [ptr("int32")], [int32], lambda p: [k.op("load", p)])
    writer = k.helper("poke", [ptr("int32"), int32], [], poke)

    def condition(t: Value) -> list[Value]:
        value = k.ops("call", flag, callee=helper, results=[int32])[0]
        return [k.op("cmp", value, k.const(0), pred="eq"), t]

    def body(t: Value) -> list[Value]:
        k.ops("call", flag, t, callee=writer, results=[])
        return [k.op("add", t, k.const(1))]

    k.while_([k.const(0)], condition, body)
    module = k.module()
    op = next(op for op in module.kernel.walk() if op.name == "while")
    # It reads memory through `peek`, and `poke` writes what the carried value says.
    assert (reads_memory(module, {}, op), blind(module, {}, op)) == (True, False)
