"""What the warp-specialized schedule decided for one kernel, and the load partition.

`Schedule` holds the decisions both partitions follow (the streamed loop, its layouts, the
number of compute partitions, ring depth, tensor descriptors, shared buffers and barriers) and
the names that go with them; `load_body` emits the load partition: the scalar ops the loop
bounds and the streamed loads' indices need, then the loop issuing each streamed load as a TMA
copy into slot t % STAGES of its ring once the compute partitions have released the slot
(`empty` barrier; the copy completes on the slot's `ready` barrier).

Compute partitions signal barriers (`empty`, the ping-pong turns) from every thread
(`Schedule.arrive`), each barrier expecting all of their threads: a one-thread arrive would make
Triton put a barrier of the partition's warps before it, which the profile of the attention
kernel showed as the largest stall (benchmarks/results/ncu-h200-2026-12-01.txt). The two turns
are separate allocations, so a wait on one and an arrive on the other touch different buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ...ir import Function, Op, Value, ops
from ...language.dtypes import DType
from ...passes.warp_specialize import Streamed, StreamedLoop
from ..base import ArrayFacts
from ..triton.plan import LoweringPlan, descriptor_block
from .layouts import Classes, NotLowerable
from .writer import GluonWriter

TURNS = ("turn_mine", "turn_theirs")
"""The ping-pong barriers as a compute partition names them: it waits on its own and arrives on
the other partition's (the kernel passes them to the second partition the other way round)."""

SHARED_LIMIT = 232448 - 1024
"""Shared memory a block may use on sm_90 (227 KiB), less room for the barriers."""


@dataclass(frozen=True)
class Descriptor:
    """A TMA descriptor parameter: array parameter `param` (position) in blocks of `block`."""

    name: str
    param: int
    block: tuple[int, ...]


class Schedule:
    """The module's plan: `fn_c` (the kernel, or its row halves or paired blocks with the `piece`
    parameter last) run by `consumers` compute partitions (attributes `fn`, `facts`); the kernel's
    own parameters are `fn`'s (attributes `kernel_fn`, `kernel_facts`); its rings hold `stages`
    slots; `descs` the tensor descriptors made so far. `uneven`: the partitions' loops may end at
    different iterations (only the upper bound depends on the partition): the load partition
    streams up to the later end, and a partition done first takes the rest of the slots (and its
    ping-pong turns) without computing."""

    def __init__(self, fn: Function, facts: Sequence[ArrayFacts | None], fn_c: Function,
                 facts_c: Sequence[ArrayFacts | None], found: StreamedLoop, plan: LoweringPlan, layouts: Classes,
                 consumers: int, uneven: bool = False) -> None:
        self.kernel_fn, self.kernel_facts = fn, facts
        self.fn, self.facts, self.found, self.plan, self.layouts = fn_c, facts_c, found, plan, layouts
        self.consumers = consumers
        self.uneven = uneven  # the partitions' loops end at different iterations (paired causal blocks)
        self.warps = found.rows // 16
        self.piece = ""  # the partition function's `piece` parameter: which row half or block it runs
        self.descs: dict[tuple[int, tuple[int, ...]], Descriptor] = {}
        self.stores = [op for op in found.epilogue if isinstance(op, ops.Store)]
        self.param_pos = {p.id: i for i, p in enumerate(fn.params)}
        self.reused = self._reused()  # store index -> the resident index whose buffer it reuses
        self.stages = self._stages()

    # ---- shared memory -------------------------------------------------------------------
    def block(self, s: Streamed) -> tuple[int, ...]:
        """The load's block in the array's axis order (its TMA box, as the Triton lowering's
        descriptor rule gives it: the backend checked it has one)."""
        return descriptor_block(s.load)[0]

    @staticmethod
    def _bytes(block: tuple[int, ...], dtype: DType) -> int:
        return math.prod(block) * dtype.bitwidth // 8

    def _reused(self) -> dict[int, int]:
        """Store index -> resident index whose buffer it reuses (same box, same dtype)."""
        out, taken = {}, set()
        for i, st in enumerate(self.stores):
            for r, s in enumerate(self.found.resident):
                if r not in taken and self.block(s) == st.tile.tile.shape and s.load.array.type.dtype is st.tile.tile.dtype:
                    out[i] = r
                    taken.add(r)
                    break
        return out

    def _stages(self) -> int:
        fixed = sum(self._bytes(self.block(s), s.load.array.type.dtype) for s in self.found.resident)
        reused = self.reused
        fixed += sum(self._bytes(st.tile.tile.shape, st.tile.tile.dtype)
                     for i, st in enumerate(self.stores) if i not in reused)
        fixed *= self.consumers
        per_stage = sum(self._bytes(self.block(s), s.load.array.type.dtype) for s in self.found.streamed)
        for stages in (3, 2):
            if fixed + stages * per_stage <= SHARED_LIMIT:
                return stages
        raise NotLowerable("the rings do not fit in shared memory with two stages")

    def desc(self, array: Value, block: tuple[int, ...]) -> str:
        """The name of the tensor descriptor of kernel parameter `array` in blocks of `block`
        (made on first use: the kernel takes the descriptors in that order)."""
        key = (self.param_pos[array.id], block)
        if key not in self.descs:
            self.descs[key] = Descriptor(f"tma{len(self.descs)}", key[0], block)
        return self.descs[key].name

    def shared_names(self) -> list[tuple[str, str]]:
        """(name, allocation expression) of every shared buffer and barrier."""
        out: list[tuple[str, str]] = []
        c = self.consumers
        for i, s in enumerate(self.found.resident):
            d = self.desc(s.load.array, self.block(s))
            out.append((f"res{i}", f"gl.allocate_shared_memory({d}.dtype, [{c}] + {d}.block_type.shape, {d}.layout)"))
        if self.found.resident:
            out.append(("res_bar", f"gl.allocate_shared_memory(gl.int64, [{c}, 1], mbarrier.MBarrierLayout())"))
        for i, s in enumerate(self.found.streamed):
            d = self.desc(s.load.array, self.block(s))
            out.append((f"ring{i}", f"gl.allocate_shared_memory({d}.dtype, [{self.stages}] + {d}.block_type.shape, "
                                    f"{d}.layout)"))
            for kind in ("ready", "empty"):
                out.append((f"{kind}{i}", f"gl.allocate_shared_memory(gl.int64, [{self.stages}, 1], "
                                          f"mbarrier.MBarrierLayout())"))
        if self.turns:
            out += [(name, "gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())") for name in TURNS]
        reused = self.reused
        for i, st in enumerate(self.stores):
            if i not in reused:
                d = self.desc(st.array, st.tile.tile.shape)
                out.append((f"out{i}", f"gl.allocate_shared_memory({d}.dtype, [{c}] + {d}.block_type.shape, "
                                       f"{d}.layout)"))
        return out

    def allocations(self, shared: list[tuple[str, str]]) -> list[str]:
        """The kernel's statements allocating `shared` (`shared_names`) and initializing its barriers."""
        lines = [f"{name} = {expr}" for name, expr in shared]
        if self.found.resident:
            lines.append(f"for c in gl.static_range({self.consumers}):")
            lines.append("    mbarrier.init(res_bar.index(c), count=1)")
        threads = self.warps * 32
        lines += [f"mbarrier.init({name}.index(0), count={threads})" for name, _ in shared if name in TURNS]
        for i in range(len(self.found.streamed)):
            lines.append(f"for s in gl.static_range({self.stages}):")
            lines.append(f"    mbarrier.init(ready{i}.index(s), count=1)")
            lines.append(f"    mbarrier.init(empty{i}.index(s), count={self.consumers * threads})"
                         f"  # every compute thread releases")
        return lines

    @property
    def turns(self) -> bool:
        """Whether the compute partitions take ping-pong turns (two of them, a deferred MMA)."""
        return self.consumers > 1 and self.found.deferred is not None

    @staticmethod
    def arrive(barrier: str) -> str:
        """A compute partition's statement arriving on `barrier` from each of its threads (the
        barrier counts them all; module docstring)."""
        return f"async_copy.mbarrier_arrive({barrier}, increment_count=False)"

    def load_body(self, w: GluonWriter) -> None:
        """The load partition's body (module docstring); with paired blocks it runs as piece 0."""
        f = self.found
        loop = f.loop
        ops_needed = stream_slice(f)
        if any(isinstance(op, (ops.Load, ops.Mma)) or op.blocks for op in ops_needed):
            raise NotLowerable("the streamed loads' indices need a tile load")
        for op in ops_needed:
            w.lower_op(op)
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        if self.uneven:
            hi = self.latest_end(w, "1")
        iv = w.define(loop.body.args[0], "j")
        w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
        with w.indented():
            _, slot, phase = self.slot(w, iv, lo, step)
            for i, s in enumerate(f.streamed):
                d = self.desc(s.load.array, self.block(s))
                w.emit(f"mbarrier.wait(empty{i}.index({slot}), {phase} ^ 1)")
                w.emit(f"mbarrier.expect(ready{i}.index({slot}), {d}.block_type.nbytes)")
                w.emit(f"tma.async_copy_global_to_shared({d}, {self.coords(w, s.load)}, ready{i}.index({slot}), "
                       f"ring{i}.index({slot}))")

    def latest_end(self, w: GluonWriter, other: str) -> str:
        """The later of the loop's upper bound for this partition function's piece (as lowered
        already in `w`) and for the piece `other` (an expression; lowered again, every value it
        rebinds put back after)."""
        loop = self.found.loop
        mine_hi = w.expr(loop.upper)
        again = stream_slice(self.found, "upper")
        values = [self.fn.params[-1], *(r for op in again for r in op.results)]
        with w.rebinding(values):
            w.alias(self.fn.params[-1], other)
            for op in again:
                w.lower_op(op)
            other_hi = w.expr(loop.upper)
        latest = w.fresh("hi_all")
        w.emit(f"{latest} = tl.maximum({mine_hi}, {other_hi})")
        return latest

    def slot(self, w: GluonWriter, iv: str, lo: str, step: str) -> tuple[str, str, str]:
        """Names of the iteration number, ring slot and phase of the iteration at `iv`."""
        t, slot, phase = w.fresh("t"), w.fresh("slot"), w.fresh("phase")
        w.emit(f"{t} = ({iv} - {lo}) // {step}")
        w.emit(f"{slot} = {t} % {self.stages}")
        w.emit(f"{phase} = ({t} // {self.stages}) & 1")
        return t, slot, phase

    def coords(self, w: GluonWriter, op: ops.Load | ops.Store) -> str:
        """The TMA coordinates (elements, array axis order) of a tile load or store."""
        shape = op.shape if isinstance(op, ops.Load) else op.tile.tile.shape
        coords = [""] * len(shape)
        for k, axis in enumerate(op.order):
            coords[axis] = f"{w.expr(op.index[k])} * {shape[k]}"
        return "[" + ", ".join(coords) + "]"

    def own(self, buffer: str) -> str:
        """The compute partition's own part of a per-partition buffer."""
        return f"{buffer}.index({self.piece if self.consumers > 1 else 0})"

    def bar(self) -> str:
        """The compute partition's barrier of its resident copies."""
        return self.own("res_bar")


def _stream_values(found: StreamedLoop, part: str) -> list[Value]:
    """The load partition's inputs: the loop's bounds and the streamed loads' indices ("all"),
    all but the upper bound ("fixed"), or the upper bound alone ("upper")."""
    loop = found.loop
    if part == "upper":
        return [loop.upper]
    values = [loop.lower, loop.step] + ([loop.upper] if part == "all" else [])
    return values + [v for s in found.streamed for v in s.load.index if v is not loop.body.args[0]]


def stream_slice(found: StreamedLoop, part: str = "all") -> list[Op]:
    """The ops the load partition's inputs (`_stream_values`) come from: its work, on which the
    compute partitions must agree with it slot for slot."""
    return _ops_for([*found.prologue, *found.loop.body.ops], {v.id for v in _stream_values(found, part)})


def depends(found: StreamedLoop, part: str, v: Value) -> bool:
    """Whether the load partition's inputs (`_stream_values(found, part)`) read `v`, as one of
    them or through the ops they come from."""
    return any(x is v for x in _stream_values(found, part)) or any(
        o is v for op in stream_slice(found, part) for o in op.operands)


def _ops_for(block_ops: list[Op], need: set[int]) -> list[Op]:
    """The ops of `block_ops` (in order) that the values `need` depend on."""
    need = set(need)
    keep = []
    for op in reversed(block_ops):
        if any(r.id in need for r in op.results):
            keep.append(op)
            need |= {v.id for v in op.operands}
    return keep[::-1]

