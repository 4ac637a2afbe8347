"""The lowering driver: walks the GPU IR and calls one rule per op, building LLVM IR.

Kernel ABI (see the package docstring): one `ptx_kernel` function named after the kernel, its
parameters the kernel's arguments in order, then one 128-byte tensor map per entry of the
metadata's `tensor_maps` (which the launch encodes from the arguments: `gpuir/tma.py`), a 1-D block
of `32 * num_warps` threads, and `shared` bytes of dynamic shared memory (`global_smem`) that the
launch must provide.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir
from llvmlite.ir.values import ArgumentAttributes, FunctionAttributes

from ....ir.core import Block, Op, Value
from ....ir.types import ElemType, elem_of
from ...errors import BackendError, op_error
from ...gpuir import GpuFunction, LinearLayout
from ...gpuir.smem_alloc import SharedAllocator
from ...gpuir.tma import tensor_maps
from ..target import DATA_LAYOUT, TRIPLE, Target, refused
from .debuginfo import DebugInfo
from .registry import RULES, Regs

if TYPE_CHECKING:
    from .ldmatrix import SharedOperand
from .types import const, i1, i32, i64, llvm_type, sptr, void


class _KernelAttributes(FunctionAttributes):
    """Function attributes with LLVM string attributes (`"nvvm.maxntid"="128"`)."""

    def __init__(self, strings: dict[str, str]) -> None:
        super().__init__()
        self.strings = strings

    def __bool__(self) -> bool:
        return True

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return super()._to_list(ret_type) + [f'"{k}"="{v}"' for k, v in self.strings.items()]


TENSOR_MAP = ir.PointerType(ir.ArrayType(ir.IntType(8), 128))
"""A tensor map parameter: a 128-byte `CUtensorMap` passed by value (`.param .align 64 .b8 [128]`)."""


class _GridConstant(ArgumentAttributes):
    """A by-value parameter read in place (`"nvvm.grid_constant"`, CUDA's `__grid_constant__`): its address
    is the parameter's own, as TMA needs of a tensor map, not a copy in local memory."""

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return super()._to_list(ret_type) + ['"nvvm.grid_constant"']


class _ContractingBuilder(ir.IRBuilder):
    """A builder whose float add, sub and mul may be contracted into an `fma` with each other
    (LLVM's `contract` flag), as `enable_fp_fusion` asks: without the flag NVPTX emits `mul.rn` and
    `add.rn`, which ptxas may not fuse either."""

    def fadd(self, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> ir.Instruction:
        return super().fadd(lhs, rhs, name, ("contract", *flags))

    def fsub(self, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> ir.Instruction:
        return super().fsub(lhs, rhs, name, ("contract", *flags))

    def fmul(self, lhs: ir.Value, rhs: ir.Value, name: str = "", flags: Any = ()) -> ir.Instruction:
        return super().fmul(lhs, rhs, name, ("contract", *flags))


class Lowering:
    """State of one kernel's lowering: the LLVM function, its builder, the lowered values.
    `fp_fusion`: float mul and add may become `fma` (CompileOptions.enable_fp_fusion); `maxnreg`: the
    registers a thread may use, as the kernel's `"nvvm.maxnreg"` attribute (`.maxnreg` in the PTX)."""

    def __init__(self, gpu: GpuFunction, target: Target, line_info: bool = True, fp_fusion: bool = True,
                 maxnreg: int | None = None) -> None:
        fn = gpu.fn
        self.gpu, self.target, self.kernel = gpu, target, fn.name
        self.num_threads = 32 * gpu.num_warps
        self.specialized = next((p for p in gpu.pipelines.values() if p.producer is not None), None)
        """The plan of the kernel's warp-specialized loop (`gpuir.specialize`), if it has one: its producer
        warps come after the kernel's (`lower/specialize.py`)."""
        producer = self.specialized.producer if self.specialized is not None else None
        self.block_threads = self.num_threads + (32 * producer.warps if producer is not None else 0)
        """The threads a block launches with: the kernel's warps and a producer's."""
        self.producer: Any = None
        """The producer's blocks and ring (`lower/specialize.WarpGroups`), once the kernel's entry is split."""
        self.module = ir.Module(name=fn.name)
        self.module.triple = TRIPLE
        self.module.data_layout = DATA_LAYOUT
        maps = tensor_maps(fn, gpu.module_attrs)
        self.tensor_map_metadata = [m.as_metadata() for _, m in maps]
        """The kernel's tensor maps, as its launch encodes them (`gpuir.tma.TensorMap.as_metadata`)."""
        ftype = ir.FunctionType(void, [llvm_type(elem_of(a.type)) for a in fn.args] + [TENSOR_MAP] * len(maps))
        self.func = ir.Function(self.module, ftype, name=fn.name)
        self.func.calling_convention = "ptx_kernel"
        self.maxnreg = maxnreg
        self.launch_bounds(self.block_threads, maxnreg)
        for arg, name in zip(self.func.args, fn.arg_names):
            arg.name = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "arg"
        self.tensor_maps: dict[Op, ir.Value] = {}
        """The tensor-map parameter of each descriptor load that TMA copies (`lower/tma.py`)."""
        for k, (ops, _) in enumerate(maps):
            arg = self.func.args[len(fn.args) + k]
            arg.name = f"tensor_map{k}"
            arg.attributes = _GridConstant()
            arg.attributes.add("byval")
            arg.attributes.align = 64
            self.tensor_maps.update(dict.fromkeys(ops, arg))
        self.debug = DebugInfo(self.module, fn, self.func) if line_info else None
        """Where each op's instructions came from (`!dbg`), unless the compile asked for no line info."""
        entry = self.func.append_basic_block("entry")
        self.prologue = ir.IRBuilder(entry)
        self.b = (_ContractingBuilder if fp_fusion else ir.IRBuilder)(self.func.append_basic_block("body"))
        self.tid = self.call("llvm.nvvm.read.ptx.sreg.tid.x", i32, [], builder=self.prologue)
        self.lane = self.prologue.and_(self.tid, const(i32, 31), name="lane")
        self.warp = self.prologue.lshr(self.tid, const(i32, 5), name="warp")
        self.prologue.position_before(self.prologue.branch(self.b.block))
        self.values: dict[Value, Regs] = {a: [la] for a, la in zip(fn.args, self.func.args)}
        self.shared = SharedAllocator()
        self._used = {v for op in fn.walk() for v in op.operands}
        self._smem: ir.Value | None = None
        self._dyn: dict[tuple[object, ...], list[ir.Value]] = {}
        self._owner: dict[tuple[int, int], ir.Value | None] = {}
        self.shared_operands: dict[Value, SharedOperand] = {}
        """Dot operands (by value) that lie in shared memory, read by the dot itself (ring slots of
        pipelined loads: `lower/pipeline.py`)."""
        self.buffers: dict[Value, int] = {}
        """The byte offset in shared memory of each `local_alloc`'s buffer (`lower/buffers.py`)."""
        self.ring_tails: dict[Op, Callable[[], Regs]] = {}
        """Descriptor loads after a warp-specialized loop that its producer copied into the ring (a deferred
        loop's last B: `gpuir.specialize`), and how to read each from its slot (`lower/pipeline.py`)."""
        self.after_branch: dict[Op, Callable[[], None]] = {}
        """What runs once an `if` is lowered, after its branches join (the ring such a load is read from,
        given back: `lower/pipeline.py`)."""
        self.settle_in: dict[Op, tuple[Value, ...]] = {}
        """`if` ops (a flattened nest's epilogue) and the asynchronous wgmma dots' results that a branch of
        theirs reads: that branch first waits for every group (`lower/control.py`)."""
        self.late: list[Value] = []
        """Results of wgmma dots waited for where they are first read (`wait = "at use"`, `gpuir.defer`), in the
        order their groups were committed: `get` waits for a group and every one before it when it reads one,
        and no group outlives the block, nor passes a `for`, `while` or `if` (`retire_late`)."""
        self.wait_group: Callable[[int, Regs], Regs] | None = None
        """`wgmma.wait_group n` with registers passed through it (`lower/wgmma.wait`), once a late group is."""
        self.scale_d: dict[Op, ir.Value] = {}
        """wgmma dots (by op) whose first K step adds the accumulator only where this i1 is true:
        the first iteration of a loop whose accumulator starts at zero (`lower/wgmma.py`)."""
        self.prints = False
        """Whether the kernel prints (`device_print`): its launches wait for it and flush stdout."""
        self.asserts: list[dict[str, Any]] = []
        """The kernel's `device_assert`s by index: message, file, line and the shape of the condition."""

    # ---- driving ----------------------------------------------------------------------------

    def run(self) -> ir.Module:
        self.lower_block(self.gpu.fn.body)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        return self.module

    def lower_block(self, block: Block) -> Op | None:
        """Lower every op of `block` but a terminator, which it returns; the groups of late dots (`late`) the
        block commits are complete at its end."""
        outer, self.late = self.late, []
        found = None
        for op in block.ops:
            if op.name in ("yield", "condition"):
                found = op
                break
            self.lower_op(op)
        self.retire_late()
        self.late = outer
        return found

    def lower_region(self, block: Block, args: list[Regs]) -> list[Regs]:
        """Lower a region with its arguments bound; the registers its terminator passes on."""
        for a, regs in zip(block.args, args):
            self.values[a] = regs
        term = self.lower_block(block)
        return [self.get(v) for v in term.operands] if term is not None else []

    def lower_op(self, op: Op) -> None:
        rule = RULES.get(op.name)
        if rule is None:
            raise op_error(op, "the NVPTX backend has no lowering rule for this op", self.kernel)
        if op.name in ("for", "while", "if"):
            self.retire_late()
        outer = self.b.debug_metadata
        if self.debug is not None and op.loc is not None:  # an op without a location keeps its parent's
            self.b.debug_metadata = self.debug.location(op.loc)
        try:
            results = rule(self, op, [self.get(v) for v in op.operands])
        except BackendError:
            raise
        except (ValueError, KeyError, NotImplementedError) as e:
            raise op_error(op, str(e), self.kernel) from e
        finally:
            self.b.debug_metadata = outer
        for r, regs in zip(op.results, results):
            want = self.layout(r).num_regs
            if len(regs) != want:
                raise op_error(op, f"lowering produced {len(regs)} registers, its layout has {want}", self.kernel)
            self.values[r] = self._dedup(r, regs)

    def _dedup(self, v: Value, regs: Regs) -> Regs:
        """`regs` with each register replaced by the first of its run of equal elements.

        Axis analysis knows runs of equal values (`const`): a mask `cols < n` with `n % 16 == 0`
        is one truth value per 16 columns, so of a thread's 8 consecutive columns only the first
        comparison is kept (as Triton's elementwise deduplication); LLVM drops the others, and
        what stays live (predicates above all: sm_90 has 7) shrinks."""
        ll = self.layout(v)
        if ll.rank == 0 or len(regs) < 2:
            return regs
        runs = self.gpu.axis.info(v).const
        if len(runs) != ll.rank or all(c < 2 for c in runs):
            return regs
        masks = [~((c & -c) - 1) for c in runs]
        out = list(regs)
        for r in range(len(regs)):
            static = ll.reg_index(r)
            first = ll.reg_of_index.get(tuple(i & m for i, m in zip(static, masks)))
            if first is not None and first != r:
                out[r] = regs[first]
        return out

    @cached_property
    def _looped(self) -> set[int]:
        return {id(inner) for op in self.gpu.fn.body.walk() if op.name in ("for", "while")
                for region in op.regions for inner in region.walk()}

    def in_loop(self, op: Op) -> bool:
        """Whether `op` runs in the body of a `for` or `while` loop."""
        return id(op) in self._looped

    def is_used(self, v: Value) -> bool:
        return v in self._used

    def get(self, v: Value) -> Regs:
        if any(v is w for w in self.late):
            self._retire(next(i for i, w in enumerate(self.late) if w is v) + 1)
        return self.values[v]

    def retire_late(self) -> None:
        """Wait for every late group (`late`)."""
        self._retire(len(self.late))

    def _retire(self, n: int) -> None:
        done, self.late = self.late[:n], self.late[n:]
        if not done:
            return
        assert self.wait_group is not None
        regs = self.wait_group(len(self.late), [r for v in done for r in self.values[v]])
        for v in done:
            self.values[v], regs = regs[: len(self.values[v])], regs[len(self.values[v]) :]

    def error(self, op: Op, message: str) -> BackendError:
        return op_error(op, message, self.kernel)

    # ---- facts about values -----------------------------------------------------------------

    def layout(self, v: Value) -> LinearLayout:
        return self.gpu.layout(v)

    @staticmethod
    def elem(v: Value) -> ElemType:
        return elem_of(v.type)

    def ltype(self, v: Value) -> ir.Type:
        return llvm_type(elem_of(v.type))

    # ---- LLVM helpers -----------------------------------------------------------------------

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type], var_arg: bool = False) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            self.require(name)
            fn = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
        assert isinstance(fn, ir.Function)
        return fn

    def launch_bounds(self, threads: int, maxnreg: int | None) -> None:
        """The threads a block launches with (`.maxntid`) and, if given, the registers a thread starts with
        (`.maxnreg`)."""
        self.block_threads = threads
        strings = {"nvvm.maxntid": str(threads)}
        if maxnreg is not None:
            strings["nvvm.maxnreg"] = str(maxnreg)
        self.func.attributes = _KernelAttributes(strings)

    def call(self, name: str, ret: ir.Type, args: list[ir.Value], builder: ir.IRBuilder | None = None) -> ir.Value:
        fn = self.declare(name, ret, [a.type for a in args])
        return (builder or self.b).call(fn, args)

    def asm(
        self, ret: ir.Type, text: str, constraints: str, args: list[ir.Value], side_effect: bool = False
    ) -> ir.Value:
        self.require(text)
        ftype = ir.FunctionType(ret, [a.type for a in args])
        return self.b.asm(ftype, text, constraints, args, side_effect)

    def require(self, code: str) -> None:
        """Refuse an intrinsic (by name) or inline PTX that the target lacks (wgmma on plain sm_90):
        LLVM would abort the process on it. A ValueError, which `lower_op` reports at the op."""
        why = refused(self.target, code)
        if why is not None:
            raise ValueError(why)

    def barrier(self) -> None:
        """A CTA barrier: every shared-memory access before it is complete after it."""
        self._emit_barrier()
        self.shared.fence()

    def _emit_barrier(self) -> None:
        if self.specialized is not None:  # the kernel's warps alone: the producer's run on by themselves
            self.call("llvm.nvvm.barrier.cta.sync.aligned.count", void, [const(i32, 1), const(i32, self.num_threads)])
        else:
            self.call("llvm.nvvm.barrier0", void, [])

    @property
    def smem_bytes(self) -> int:
        """The dynamic shared memory the kernel needs: the end of its highest buffer."""
        return self.shared.total

    @contextmanager
    def scratch(self, nbytes: int, align: int = 16) -> Iterator[int]:
        """A shared-memory buffer of `nbytes` for the ops lowered inside the `with`: its byte offset.

        The allocator (`gpuir.smem_alloc`) places it clear of live buffers and, when it can, of bytes
        other threads may still be reading; when it cannot, a barrier is emitted here first. Writers
        call `barrier()` before the buffer is read; on leaving, its bytes become pending."""
        placed = self.shared.alloc(nbytes, align)
        if placed.barrier:
            self._emit_barrier()
        try:
            yield placed.offset
        finally:
            self.shared.free(placed.offset)

    def loop_body_end(self) -> None:
        """End a loop body with a barrier when its next iteration would reuse bytes still being read."""
        if self.shared.loop_end():
            self._emit_barrier()

    def smem_base(self) -> ir.Value:
        """The base of the dynamic shared memory (`global_smem`, addrspace 3)."""
        if self._smem is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0), "global_smem", addrspace=3)
            g.linkage = "external"
            g.align = 16
            # The builder folds a bitcast between pointer types it deems equal; build it directly
            # so the base has llvmlite's opaque `ptr addrspace(3)` type.
            cast = ir.instructions.CastInstr(self.prologue.block, "bitcast", g, sptr, name="smem")
            self.prologue._insert(cast)
            self._smem = cast
        return self._smem

    def program_scalar(self, name: str) -> ir.Value:
        return self.call(f"llvm.nvvm.read.ptx.sreg.{name}", i32, [])

    # ---- where registers live -----------------------------------------------------------------

    def at_entry(self, key: tuple[object, ...], make: Callable[[ir.IRBuilder], list[ir.Value]]) -> list[ir.Value]:
        """Values computed once, at the kernel's entry, by `make` (given the entry's builder)."""
        if key not in self._dyn:
            self._dyn[key] = make(self.prologue)
        return self._dyn[key]

    def dyn_index(self, ll: LinearLayout) -> list[ir.Value]:
        """The lane- and warp-dependent part of every dim's index (computed once, at entry).

        Lane bit `i` is bit `i` of `tid.x` and warp bit `j` bit `5 + j`. Where the bases along a
        dim are distinct powers of two (blocked layouts), the index is a few masked shifts of
        `tid.x` (`(tid & 511) << 2` for 4 elements a thread over 16 warps), else an XOR of one
        term per bit."""
        key = (ll.rank, ll.lane, ll.warp)
        if key not in self._dyn:
            b = self.prologue
            dims: list[ir.Value] = []
            for d in range(ll.rank):
                terms = [(bit, basis[d]) for bit, basis in enumerate(ll.lane) if basis[d]]
                terms += [(5 + bit, basis[d]) for bit, basis in enumerate(ll.warp) if basis[d]]
                values = [v for _, v in terms]
                total: ir.Value = const(i32, 0)
                if all(v & (v - 1) == 0 for v in values) and len(set(values)) == len(values):
                    # One masked shift of tid per distance between a tid bit and its index bit.
                    masks: dict[int, int] = {}
                    for bit, v in terms:
                        shift = v.bit_length() - 1 - bit
                        masks[shift] = masks.get(shift, 0) | (1 << bit)
                    for shift, mask in sorted(masks.items()):
                        term = b.and_(self.tid, const(i32, mask))
                        if shift > 0:
                            term = b.shl(term, const(i32, shift), flags=["nuw", "nsw"])
                        elif shift < 0:
                            term = b.lshr(term, const(i32, -shift))
                        is_zero = isinstance(total, ir.Constant) and total.constant == 0
                        total = term if is_zero else b.or_(total, term)
                else:
                    for source, bases in ((self.lane, ll.lane), (self.warp, ll.warp)):
                        for bit, basis in enumerate(bases):
                            if not basis[d]:
                                continue
                            on = b.and_(b.lshr(source, const(i32, bit)), const(i32, 1))
                            total = b.xor(total, b.mul(on, const(i32, basis[d])))
                dims.append(total)
            self._dyn[key] = dims
        return self._dyn[key]

    def index(self, ll: LinearLayout, r: int) -> list[ir.Value]:
        """The tile index (one i32 per dim) of register `r` in this thread.

        Where the register's bits of the index are clear in every lane and warp basis, the two
        parts are added (`add nuw nsw`, equal to the XOR then) so that LLVM can move the constant
        into an address's immediate offset."""
        dyn = self.dyn_index(ll)
        static = ll.reg_index(r)
        out: list[ir.Value] = []
        for d in range(ll.rank):
            if not static[d]:
                out.append(dyn[d])
            elif static[d] & dyn_bits(ll, d):
                out.append(self.b.xor(dyn[d], const(i32, static[d])))
            else:
                out.append(self.b.add(dyn[d], const(i32, static[d]), flags=["nuw", "nsw"]))
        return out

    def owner(self, ll: LinearLayout) -> ir.Value | None:
        """True in the one thread that owns each element (None: no element is replicated).

        Stores and atomics use it so replicated elements are written once."""
        key = (ll.lane_free_mask(), ll.warp_free_mask())
        if key not in self._owner:
            lane_mask, warp_mask = key
            b = self.prologue
            pred: ir.Value | None = None
            for source, mask in ((self.lane, lane_mask), (self.warp, warp_mask)):
                if mask:
                    zero = b.icmp_unsigned("==", b.and_(source, const(i32, mask)), const(i32, 0))
                    pred = zero if pred is None else b.and_(pred, zero)
            self._owner[key] = pred
        return self._owner[key]

    def and_preds(self, a: ir.Value | None, b: ir.Value | None) -> ir.Value | None:
        if a is None or b is None:
            return a if b is None else b
        return self.b.and_(a, b)


def dyn_bits(ll: LinearLayout, d: int) -> int:
    """Every index bit along `d` that some lane or warp basis sets."""
    bits = 0
    for basis in ll.lane + ll.warp:
        bits |= basis[d]
    return bits


def to_i64(ctx: Lowering, v: ir.Value) -> ir.Value:
    return ctx.b.sext(v, i64) if v.type != i64 else v


def bool_const(value: bool) -> ir.Constant:
    return const(i1, int(value))
