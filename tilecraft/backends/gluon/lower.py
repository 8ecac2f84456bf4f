"""Tile IR of a streamed loop (passes/warp_specialize.py) -> a warp-specialized Gluon module.

The kernel allocates shared memory and mbarriers, then forks (`gl.warp_specialize`):

- the *load* partition (one warp) runs the scalar ops the loop bounds and the streamed loads'
  indices need, then walks the loop issuing each streamed load as a TMA copy into slot
  t % STAGES of that load's ring, once the compute partition has released the slot (`empty`
  barrier; the copy completes on the slot's `ready` barrier);
- the *compute* partition (the kernel's warps: M / 16) runs everything else. Resident loads
  are TMA copies made once before the loop; MMAs are async wgmma reading the rings' slots (B)
  and shared memory or registers (A); each streamed slot is released once the MMA reading it
  is done. With a `deferred` MMA, iteration t issues its first MMA, then iteration t - 1's
  deferred MMA, waits for the first only and runs the math in between while the deferred MMA
  runs; the accumulator is waited for where the rescale ops read it. Epilogue stores go
  through shared memory and a TMA store.

Every other op is lowered by the Triton backend's own rules (one semantics: same dtype policy,
same rounding and NaN handling): Gluon runs Triton's element-wise, reduction and shape
builtins as they are, and spells the three that make tiles from nothing (`full`, `arange`,
`zeros`) as `gl.` functions whose omitted layout is AutoLayout. Where two accumulator layouts
meet, the operand is converted (layouts.py).
"""

from __future__ import annotations

import dataclasses
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

from ...ir import Function, Op, Value, ops
from ...passes.tile_split import row_split
from ...passes.warp_specialize import Streamed, StreamedLoop, pair_blocks, streamed_loop
from ..base import ArrayFacts
from ..triton.lower import flatten_lambda, param_kernel_args
from ..triton.control import assign_all
from ..triton.emitter import KernelWriter, Target
from ..triton.helpers import HELPERS
from ..triton.plan import build_plan
from ..triton.spelling import tl_dtype
from .layouts import OPAQUE, Classes, NotLowerable, classes

_HEADER = """import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
"""

LOAD_REGS = 40
"""Registers per thread of the load partition (setmaxnreg): scalar index math only."""

COMPUTE_REGS = 240
MAX_REGS = 168
"""With two compute partitions (row halves): the registers per thread of the second (setmaxnreg)
and the kernel's launch bound, as the FA3-style Gluon probe ran them at 1.01x cuDNN
(benchmarks/gluon_attention_probe.py, results/gluon-attention-probe-h200-2026-12-01-b.json)."""

SHARED_LIMIT = 232448 - 1024
"""Shared memory a block may use on sm_90 (227 KiB), less room for the barriers."""


@dataclass(frozen=True)
class Descriptor:
    """A TMA descriptor parameter: array parameter `param` (position) in blocks of `block`."""

    name: str
    param: int
    block: tuple[int, ...]


@dataclass(frozen=True)
class GluonLowered:
    """The generated module and what launching it needs."""

    name: str
    source: str
    signature: dict[str, str]  # the Triton backend's parameters (pointers, sizes, scalars)
    flatten: str  # as LoweredKernel.flatten
    aligned: tuple[int, ...]
    descriptors: tuple[Descriptor, ...]  # after the signature's parameters
    num_warps: int
    stages: int
    maxnreg: int | None = None
    grid_divisor: int = 1  # paired blocks: the launch grid's axis 0 divided by this (it must divide it)


class _Writer(KernelWriter):
    """A KernelWriter converting operands between accumulator layouts (layouts.py) and leaving
    elided broadcasts to the ops that use them."""

    def __init__(self, target: Target, plan, layouts: Classes) -> None:
        super().__init__(target, plan)
        self.layouts = layouts

    @contextmanager
    def rebinding(self, values: list[Value]) -> Iterator[None]:
        """Whatever the `with` body makes `values` stand for, they stand for what they did before
        once it is done (a slice lowered a second time, for another partition's piece)."""
        saved = [(v, self._exprs.get(v.id), self.is_literal(v)) for v in values]
        try:
            yield
        finally:
            for v, text, literal in saved:
                if text is None:
                    self._exprs.pop(v.id, None)
                else:
                    self.alias(v, text, literal)

    def lower_op(self, op: Op) -> None:
        if isinstance(op, ops.Broadcast) and op.result.id in self.layouts.elided:
            self.alias(op.result, self.expr(op.x), self.is_literal(op.x))
            return
        if isinstance(op, (ops.Broadcast, ops.Reshape)) and not op.x.tile.shape and not self.is_literal(op.x):
            # Gluon splats a scalar with `full` (its broadcast_to takes tensors only)
            shape = ", ".join(str(d) for d in op.result.tile.shape)
            self.assign(op.result, f"gl.full([{shape}], {self.expr(op.x)}, {tl_dtype(op.x.tile.dtype)})", "t")
            return
        saved = {}
        for vid, cls in self.layouts.converts.get(op, {}).items():
            v = next(o for o in op.operands if o.id == vid)
            saved[vid] = (v, self.expr(v), self.is_literal(v))
            name = self.fresh("cvt")
            self.emit(f"{name} = gl.convert_layout({self.tensor(v)}, {layout_name(cls)})")
            self.alias(v, name)
        try:
            super().lower_op(op)
        finally:
            for v, text, literal in saved.values():
                self.alias(v, text, literal)


def layout_name(cls: int) -> str:
    return f"ACC{cls}"


def lower(fn: Function, facts: Sequence[ArrayFacts | None], found: StreamedLoop) -> GluonLowered:
    """The Gluon module running `fn` with the schedule of the module docstring: 128-row tiles
    as two compute partitions of one warpgroup, each on its 64 rows (`tile_split.row_split`;
    both read the same ring slots); 64-row tiles as two partitions running two of the user's
    blocks (`warp_specialize.pair_blocks`: launched on half the grid); either only where the
    load partition's work does not depend on the partition (else one partition of rows / 16
    warps)."""
    two = row_split(fn, 2) if found.rows == 128 else pair_blocks(fn) if found.rows == 64 else None
    split = None if two is None else streamed_loop(two)
    uneven = False
    if split is not None and split.rows == 64 and not _depends(split, False, two.params[-1]):
        fn_c, found_c, facts_c, consumers = two, split, [*facts, None], 2
        pairs = found.rows == 64
        uneven = _depends(split, "only", two.params[-1])
    else:
        fn_c, found_c, facts_c, consumers, pairs = fn, found, list(facts), 1, False
    target = Target(interpret=False, descriptors=False)
    plan = build_plan(fn_c, facts_c, target)
    users: dict[int, list[Op]] = {vid: list(us) for vid, us in plan.users.items()}
    layouts = classes([found_c.prologue, found_c.loop.body.ops, found_c.epilogue], found_c.loop, users)
    lowered = _Emission(fn, facts, fn_c, facts_c, found_c, plan, layouts, consumers, uneven).module()
    return dataclasses.replace(lowered, grid_divisor=2) if pairs else lowered


class _Emission:
    """`fn_c` (the kernel, or its row halves with the `piece` parameter last) emitted for
    `consumers` compute partitions; the kernel's own parameters are `fn`'s. `uneven`: the
    partitions' loops may end at different iterations (only the upper bound depends on the
    partition): the load partition streams up to the later end, and a partition done first
    takes the rest of the slots (and its ping-pong turns) without computing."""

    def __init__(self, fn: Function, facts, fn_c: Function, facts_c, found: StreamedLoop, plan, layouts: Classes,
                 consumers: int, uneven: bool = False) -> None:
        self.kernel_fn, self.kernel_facts = fn, facts
        self.fn, self.facts, self.found, self.plan, self.layouts = fn_c, facts_c, found, plan, layouts
        self.consumers = consumers
        self.uneven = uneven  # the partitions' loops end at different iterations (paired causal blocks)
        self.warps = found.rows // 16
        self.piece = ""  # the compute partition's number (a constant), the row half it runs
        self.descs: dict[tuple[int, tuple[int, ...]], Descriptor] = {}
        self.stores = [op for op in found.epilogue if isinstance(op, ops.Store)]
        self.param_pos = {p.id: i for i, p in enumerate(fn.params)}
        self.stages = self._stages()

    # ---- shared memory -------------------------------------------------------------------
    def _block(self, s: Streamed) -> tuple[int, ...]:
        """The load's block in the array's axis order (a TMA box)."""
        block = [0] * len(s.load.shape)
        for k, axis in enumerate(s.load.order):
            block[axis] = s.load.shape[k]
        return tuple(block)

    def _bytes(self, block: tuple[int, ...], dtype) -> int:
        return math.prod(block) * dtype.bitwidth // 8

    def _reused(self) -> dict[int, int]:
        """Store index -> resident index whose buffer it reuses (same box, same dtype)."""
        out, taken = {}, set()
        for i, st in enumerate(self.stores):
            for r, s in enumerate(self.found.resident):
                if r not in taken and self._block(s) == st.tile.tile.shape and s.load.array.type.dtype is st.tile.tile.dtype:
                    out[i] = r
                    taken.add(r)
                    break
        return out

    def _stages(self) -> int:
        fixed = sum(self._bytes(self._block(s), s.load.array.type.dtype) for s in self.found.resident)
        reused = self._reused()
        fixed += sum(self._bytes(st.tile.tile.shape, st.tile.tile.dtype)
                     for i, st in enumerate(self.stores) if i not in reused)
        fixed *= self.consumers
        per_stage = sum(self._bytes(self._block(s), s.load.array.type.dtype) for s in self.found.streamed)
        for stages in (3, 2):
            if fixed + stages * per_stage <= SHARED_LIMIT:
                return stages
        raise NotLowerable("the rings do not fit in shared memory with two stages")

    def _desc(self, array: Value, block: tuple[int, ...]) -> str:
        key = (self.param_pos[array.id], block)
        if key not in self.descs:
            self.descs[key] = Descriptor(f"tma{len(self.descs)}", key[0], block)
        return self.descs[key].name

    # ---- the module ----------------------------------------------------------------------
    def module(self) -> GluonLowered:
        f = self.found
        for s in (*f.resident, *f.streamed):
            self._desc(s.load.array, self._block(s))
        for st in self.stores:
            self._desc(st.array, st.tile.tile.shape)
        shared = self._shared_names()
        top = _new_writer(self.plan, self.layouts)
        aligned: list[int] = []
        params, signature, launch = param_kernel_args(top, self.kernel_fn, self.kernel_facts, aligned)
        names = [p.split(":")[0] for p in params]
        descs = [d.name for d in self.descs.values()]
        kname = top.fresh(self.kernel_fn.name)
        compute, helpers_c, functions_c = self._partition(f"{kname}_compute", self._compute_body)
        load, helpers_l, functions_l = self._partition(f"{kname}_load", self._load_body)
        lines = [f"@gluon.jit\ndef {kname}({', '.join(params + descs)}):"]
        lines += ["    " + text for text in self._allocations(shared)]
        tail = ", ".join(descs + [n for n, _ in shared])
        args = [", ".join(names + ([str(c)] if self.consumers > 1 else []) + [tail]) for c in range(self.consumers)]
        partitions = [f"({kname}_compute, ({a}, ))" for a in args] + [f"({kname}_load, ({args[0]}, ))"]
        warps = [self.warps] * (self.consumers - 1) + [1]
        regs = [COMPUTE_REGS] * (self.consumers - 1) + [LOAD_REGS]
        lines.append(f"    gl.warp_specialize([{', '.join(partitions)}], {warps}, {regs})")
        helpers = list(dict.fromkeys(helpers_c + helpers_l))
        parts = [f"# Gluon code generated by tilecraft from kernel `{self.kernel_fn.name}` (warp-specialized)."
                 f"\n{_HEADER}"]
        parts += [HELPERS[h] for h in helpers] + functions_c + functions_l + [compute, load, "\n".join(lines) + "\n"]
        source = _as_gluon("\n\n".join(parts))
        flatten = flatten_lambda(len(self.kernel_fn.params), launch)
        return GluonLowered(kname, source, signature, flatten, tuple(aligned), tuple(self.descs.values()),
                            self.warps, self.stages, MAX_REGS if self.consumers > 1 else None)

    def _shared_names(self) -> list[tuple[str, str]]:
        """(name, allocation expression) of every shared buffer and barrier."""
        out: list[tuple[str, str]] = []
        c = self.consumers
        for i, s in enumerate(self.found.resident):
            d = self._desc(s.load.array, self._block(s))
            out.append((f"res{i}", f"gl.allocate_shared_memory({d}.dtype, [{c}] + {d}.block_type.shape, {d}.layout)"))
        if self.found.resident:
            out.append(("res_bar", f"gl.allocate_shared_memory(gl.int64, [{c}, 1], mbarrier.MBarrierLayout())"))
        for i, s in enumerate(self.found.streamed):
            d = self._desc(s.load.array, self._block(s))
            out.append((f"ring{i}", f"gl.allocate_shared_memory({d}.dtype, [{self.stages}] + {d}.block_type.shape, "
                                    f"{d}.layout)"))
            for kind in ("ready", "empty"):
                out.append((f"{kind}{i}", f"gl.allocate_shared_memory(gl.int64, [{self.stages}, 1], "
                                          f"mbarrier.MBarrierLayout())"))
        if self.consumers > 1 and self.found.deferred is not None:
            out.append(("order", "gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())"))
        reused = self._reused()
        for i, st in enumerate(self.stores):
            if i not in reused:
                d = self._desc(st.array, st.tile.tile.shape)
                out.append((f"out{i}", f"gl.allocate_shared_memory({d}.dtype, [{c}] + {d}.block_type.shape, "
                                       f"{d}.layout)"))
        return out

    def _allocations(self, shared: list[tuple[str, str]]) -> list[str]:
        lines = [f"{name} = {expr}" for name, expr in shared]
        if self.found.resident:
            lines.append(f"for c in gl.static_range({self.consumers}):")
            lines.append("    mbarrier.init(res_bar.index(c), count=1)")
        if any(name == "order" for name, _ in shared):
            lines.append("for c in gl.static_range(2):")
            lines.append("    mbarrier.init(order.index(c), count=1)")
        for i in range(len(self.found.streamed)):
            lines.append(f"for s in gl.static_range({self.stages}):")
            lines.append(f"    mbarrier.init(ready{i}.index(s), count=1)")
            lines.append(f"    mbarrier.init(empty{i}.index(s), count={self.consumers})  # a release per partition")
        return lines

    def _partition(self, name: str, body) -> tuple[str, list[str], list[str]]:
        """(source, helpers, generated functions) of one partition function."""
        w = _new_writer(self.plan, self.layouts)
        aligned: list[int] = []
        params, _, _ = param_kernel_args(w, self.fn, self.facts, aligned)
        names = [p.split(":")[0] for p in params]
        if self.consumers > 1:
            self.piece = names[-1]  # row_split's parameter, last
        names += [d.name for d in self.descs.values()] + [n for n, _ in self._shared_names()]
        body(w)
        if not w.lines:
            w.emit("pass")
        src = f"@gluon.jit\ndef {name}({', '.join(names)}):\n" + "\n".join(w.lines) + "\n"
        return src, list(w.helpers), [s for _, s in w.functions]

    # ---- the load partition ----------------------------------------------------------------
    def _load_body(self, w: _Writer) -> None:
        f = self.found
        loop = f.loop
        ops_needed = _stream_slice(f)
        if any(isinstance(op, (ops.Load, ops.Mma)) or op.blocks for op in ops_needed):
            raise NotLowerable("the streamed loads' indices need a tile load")
        for op in ops_needed:
            w.lower_op(op)
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        if self.uneven:
            hi = self._latest_end(w, "0", "1")
        iv = w.define(loop.body.args[0], "j")
        w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
        with w.indented():
            _, slot, phase = self._slot(w, iv, lo, step)
            for i, s in enumerate(f.streamed):
                d = self._desc(s.load.array, self._block(s))
                w.emit(f"mbarrier.wait(empty{i}.index({slot}), {phase} ^ 1)")
                w.emit(f"mbarrier.expect(ready{i}.index({slot}), {d}.block_type.nbytes)")
                w.emit(f"tma.async_copy_global_to_shared({d}, {self._coords(w, s.load)}, ready{i}.index({slot}), "
                       f"ring{i}.index({slot}))")

    def _latest_end(self, w: _Writer, mine: str, other: str) -> str:
        """The later of the loop's upper bound for this partition (`mine`: the piece it runs, as
        lowered already) and for the piece `other` (lowered again, every value it rebinds put
        back after)."""
        loop = self.found.loop
        mine_hi = w.expr(loop.upper)
        again = _stream_slice(self.found, upper="only")
        values = [self.fn.params[-1], *(r for op in again for r in op.results)]
        with w.rebinding(values):
            w.alias(self.fn.params[-1], other)
            for op in again:
                w.lower_op(op)
            other_hi = w.expr(loop.upper)
        latest = w.fresh("hi_all")
        w.emit(f"{latest} = tl.maximum({mine_hi}, {other_hi})")
        return latest

    def _drain(self, w: _Writer, lo: str, hi: str, step: str) -> None:
        """Uneven partitions: after this partition's last iteration, release the slots of the
        iterations up to the later end (`_latest_end`) and take their ping-pong turns; one
        whose loop ran no iteration takes turn 0 (the first iteration's) as well."""
        f = self.found
        latest = self._latest_end(w, self.piece, f"(1 - {self.piece})")
        rotated = f.deferred is not None
        if rotated:
            w.emit(f"if {lo} >= {hi}:")
            with w.indented():
                self._my_turn(w, "0")
                self._your_turn(w)
        start = w.fresh("j_drain")
        w.emit(f"{start} = {lo} + tl.maximum(({hi} - {lo} + {step} - 1) // {step}, 0) * {step}")
        iv = w.fresh("j")
        w.emit(f"for {iv} in range({start}, {latest}, {step}):")
        with w.indented():
            t, slot, phase = self._slot(w, iv, lo, step)
            if rotated:
                self._my_turn(w, f"{t} + 1")
            for i in range(len(f.streamed)):
                w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
                w.emit(f"mbarrier.arrive(empty{i}.index({slot}))")
            if rotated:
                self._your_turn(w)

    def _slot(self, w: _Writer, iv: str, lo: str, step: str) -> tuple[str, str, str]:
        """Names of the iteration number, ring slot and phase of the iteration at `iv`."""
        t, slot, phase = w.fresh("t"), w.fresh("slot"), w.fresh("phase")
        w.emit(f"{t} = ({iv} - {lo}) // {step}")
        w.emit(f"{slot} = {t} % {self.stages}")
        w.emit(f"{phase} = ({t} // {self.stages}) & 1")
        return t, slot, phase

    def _coords(self, w: _Writer, op: ops.Load | ops.Store) -> str:
        """The TMA coordinates (elements, array axis order) of a tile load or store."""
        shape = op.shape if isinstance(op, ops.Load) else op.tile.tile.shape
        coords = [""] * len(shape)
        for k, axis in enumerate(op.order):
            coords[axis] = f"{w.expr(op.index[k])} * {shape[k]}"
        return "[" + ", ".join(coords) + "]"

    # ---- the compute partition -------------------------------------------------------------
    def _compute_body(self, w: _Writer) -> None:
        f = self.found
        for cls in sorted({c for c in self.layouts.of.values() if c is not None and c != OPAQUE}):
            w.emit(f"{layout_name(cls)}: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], "
                   f"warps_per_cta=[{self.warps}, 1], instr_shape=[16, {cls}, 16])")
        views = {v.id for s in (*f.resident, *f.streamed) for v in s.views}
        for op in f.prologue:
            if isinstance(op, ops.Load):
                r = f.resident.index(next(s for s in f.resident if s.load is op))
                if r == 0:  # the prologue's first load: every resident copy arrives on one barrier
                    total = " + ".join(f"{self._desc(s.load.array, self._block(s))}.block_type.nbytes"
                                       for s in f.resident)
                    w.emit(f"mbarrier.expect({self._bar()}, {total})")
                d = self._desc(op.array, self._block(f.resident[r]))
                w.emit(f"tma.async_copy_global_to_shared({d}, {self._coords(w, op)}, {self._bar()}, {self._own(f'res{r}')})")
            elif not (isinstance(op, ops.Reshape) and op.result.id in views):
                w.lower_op(op)
        if f.resident:
            w.emit(f"mbarrier.wait({self._bar()}, 0)")
        self._loop(w)
        reused = self._reused()
        for op in f.epilogue:
            if isinstance(op, ops.Store):
                i = self.stores.index(op)
                buf = self._own(f"res{reused[i]}" if i in reused else f"out{i}")
                d = self._desc(op.array, op.tile.tile.shape)
                w.emit(f"{buf}.store({w.tensor(op.tile)})")
                w.emit("fence_async_shared()")
                w.emit(f"tma.async_copy_shared_to_global({d}, {self._coords(w, op)}, {buf})")
            else:
                w.lower_op(op)
        if self.stores:
            w.emit("tma.store_wait(0)")

    def _own(self, buffer: str) -> str:
        """The compute partition's own part of a per-partition buffer."""
        return f"{buffer}.index({self.piece if self.consumers > 1 else 0})"

    def _bar(self) -> str:
        return self._own("res_bar")

    def _operand(self, w: _Writer, v: Value, slot: str | None, parent: int) -> str:
        """An MMA operand: a view of a resident buffer or ring slot, else the register tile in
        the dot-operand layout of the `parent` accumulator layout."""
        f = self.found
        s = f.tile_of(v)
        if s is None:
            return (f"gl.convert_layout({w.tensor(v)}, gl.DotOperandLayout(operand_index=0, "
                    f"parent={layout_name(parent)}, k_width=2))")
        if s in f.resident:
            buf = self._own(f"res{f.resident.index(s)}")
        else:
            buf = f"ring{f.streamed.index(s)}.index({slot})"
        view = f"{buf}.reshape([{s.rows}, {s.cols}])"
        return view + (".permute((1, 0))" if s.transposed else "")

    def _acc(self, w: _Writer, v: Value, cls: int) -> tuple[str, bool]:
        """(the accumulator operand in layout `cls`, whether it is a zero tile to skip)."""
        defs = {r.id: op for op in (*self.found.prologue, *self.found.loop.body.ops) for r in op.results}
        op = defs.get(v.id)
        while isinstance(op, (ops.Broadcast, ops.Reshape)):
            op = defs.get(op.x.id)
        if isinstance(op, ops.Const) and op.value == 0:
            shape = ", ".join(str(d) for d in v.tile.shape)
            return f"gl.zeros([{shape}], gl.float32, {layout_name(cls)})", True
        return self._in_layout(w, v, cls), False

    def _in_layout(self, w: _Writer, v: Value, cls: int) -> str:
        have = self.layouts.get(v)
        if have == cls:
            return w.tensor(v)
        if have is None:
            return f"gl.set_auto_layout({w.tensor(v)}, {layout_name(cls)})"
        return f"gl.convert_layout({w.tensor(v)}, {layout_name(cls)})"

    def _issue(self, w: _Writer, mma: ops.Mma, slot: str, phase: str) -> str:
        """Wait for the B operand's slot and issue `mma` async; returns its token's name."""
        f = self.found
        cls = mma.result.tile.shape[-1]
        s = f.tile_of(mma.b)
        i = f.streamed.index(s)
        w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
        acc, zero = self._acc(w, mma.acc, cls)
        a = self._operand(w, mma.a, slot, cls)
        b = self._operand(w, mma.b, slot, cls)
        tok = w.fresh("tok")
        w.emit(f"{tok} = warpgroup_mma({a}, {b}, {acc}{', use_acc=False' if zero else ''}, is_async=True)")
        return tok

    def _release(self, w: _Writer, mma: ops.Mma, slot: str) -> None:
        i = self.found.streamed.index(self.found.tile_of(mma.b))
        w.emit(f"mbarrier.arrive(empty{i}.index({slot}))")

    def _loop(self, w: _Writer) -> None:
        f = self.found
        loop = f.loop
        body = loop.body
        carried = body.args[1:]
        names = [w.define(arg, "acc") for arg in carried]
        for name, arg, init in zip(names, carried, loop.init):
            cls = self.layouts.get(arg)
            w.emit(f"{name} = {w.tensor(init) if cls is None else self._in_layout(w, init, cls)}")
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        if f.deferred is None:
            iv = w.define(body.args[0], "j")
            w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
            with w.indented():
                _, slot, phase = self._slot(w, iv, lo, step)
                self._iteration(w, names, "", slot, phase, None)
        else:
            self._rotated(w, names, lo, hi, step)
        if self.uneven:
            self._drain(w, lo, hi, step)
        for result, name in zip(loop.results, names):
            w.alias(result, name)

    def _rotated(self, w: _Writer, names: list[str], lo: str, hi: str, step: str) -> None:
        f = self.found
        body = f.loop.body
        iv = w.define(body.args[0], "j")
        w.emit(f"if {lo} < {hi}:")
        with w.indented():
            w.emit(f"{iv} = {lo}")
            t, slot, phase = self._slot(w, iv, lo, step)
            state = self._iteration(w, names, t, slot, phase, None)
            w.emit(f"for {iv} in range({lo} + {step}, {hi}, {step}):")
            with w.indented():
                t, slot, phase = self._slot(w, iv, lo, step)
                self._iteration(w, names, t, slot, phase, state)
            p, c, pslot, pphase, pt = state
            self._my_turn(w, f"{pt} + 1")
            tok = self._issue_deferred(w, p, c, pslot, pphase)
            self._your_turn(w)
            w.emit(f"{names[f.deferred_slot]} = warpgroup_mma_wait(0, deps=({tok}, ))")
            self._release(w, f.deferred, pslot)

    def _my_turn(self, w: _Writer, turn: str) -> None:
        """Ping-pong (two compute partitions): wait until this partition may issue its MMAs of
        iteration `turn` (partition 0's first turn at once, every other after the other
        partition's matching `_your_turn`), so one's softmax runs while the other's MMAs do."""
        if self.consumers > 1:
            w.emit(f"mbarrier.wait(order.index({self.piece}), (({turn}) & 1) ^ (1 - {self.piece}))")

    def _your_turn(self, w: _Writer) -> None:
        if self.consumers > 1:
            w.emit(f"mbarrier.arrive(order.index(1 - {self.piece}))")

    def _issue_deferred(self, w: _Writer, p: str, c: str, slot: str, phase: str) -> str:
        f = self.found
        i = f.streamed.index(f.tile_of(f.deferred.b))
        w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
        b = self._operand(w, f.deferred.b, slot, 0)
        tok = w.fresh("tok_late")
        w.emit(f"{tok} = warpgroup_mma({p}, {b}, {c}, is_async=True)")
        return tok

    def _iteration(self, w: _Writer, names: list[str], t: str, slot: str, phase: str,
                   state: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """One iteration's body. Rotated loops (a deferred MMA): `state` holds the previous
        iteration's deferred operands (P, C, the slot and phase of its B, its iteration number)
        as names, None in the first iteration; returns this iteration's (the same names,
        reassigned)."""
        f = self.found
        body = f.loop.body
        views = {v.id for s in f.streamed for v in s.views}
        deferred = f.deferred
        rescale = set(f.rescale)
        pending_late = None
        out_state = state
        for op in body.ops:
            if isinstance(op, ops.Load) or (isinstance(op, ops.Reshape) and op.result.id in views):
                continue
            if isinstance(op, ops.Yield):  # at once, as Triton's loops do (`m_prev, m = m, m_new`)
                kept = [k for k in range(len(names)) if deferred is None or k != f.deferred_slot]
                assign_all(w, [names[k] for k in kept], tuple(op.values[k] for k in kept))
                continue
            if deferred is not None and (op in rescale or op is deferred) and pending_late is not None:
                # the previous deferred MMA's result is the carried accumulator from here on
                acc = w.fresh("acc_now")
                w.emit(f"{acc} = warpgroup_mma_wait(0, deps=({pending_late}, ))")
                self._release(w, deferred, state[2])
                w.alias(body.args[1 + f.deferred_slot], acc)
                pending_late = None
            if isinstance(op, ops.Mma) and op is not deferred:
                if deferred is not None:
                    self._my_turn(w, t)
                tok = self._issue(w, op, slot, phase)
                if state is not None and deferred is not None:
                    pending_late = self._issue_deferred(w, *state[:4])
                if deferred is not None:
                    self._your_turn(w)
                if pending_late is not None:
                    w.assign(op.result, f"warpgroup_mma_wait(1, deps=({tok}, ))", "mma")
                else:
                    w.assign(op.result, f"warpgroup_mma_wait(0, deps=({tok}, ))", "mma")
                self._release(w, op, slot)
                continue
            if op is deferred:
                cls = op.result.tile.shape[-1]
                if state is None and out_state is None:
                    out_state = tuple(w.fresh(n) for n in ("p_late", "c_late", "slot_late", "phase_late", "t_late"))
                p, c, pslot, pphase, pt = out_state
                w.emit(f"{p} = {self._operand(w, op.a, None, cls)}")
                w.emit(f"{c} = {self._in_layout(w, op.acc, cls)}")
                w.emit(f"{pslot} = {slot}")
                w.emit(f"{pphase} = {phase}")
                w.emit(f"{pt} = {t}")
                continue
            w.lower_op(op)
        if deferred is None:
            return None
        return out_state


def _stream_slice(found: StreamedLoop, upper: bool = True) -> list[Op]:
    """The ops the loop's bounds and the streamed loads' indices come from (the load partition's
    work: the compute partitions must agree with it on every slot); without the upper bound's
    (`upper` False) or only those (`upper` "only")."""
    loop = found.loop
    need = {loop.upper.id} if upper == "only" else {loop.lower.id, loop.step.id} | ({loop.upper.id} if upper else set())
    if upper != "only":
        for s in found.streamed:
            need |= {v.id for v in s.load.index if v is not loop.body.args[0]}
    return _slice([*found.prologue, *loop.body.ops], need)


def _depends(found: StreamedLoop, upper: bool | str, v: Value) -> bool:
    """Whether the load partition's values (`_stream_slice`'s, by `upper`) read `v`, directly
    (a bound or index that is `v`) or through the slice's ops."""
    loop = found.loop
    direct = [loop.upper] if upper == "only" else [loop.lower, loop.step, *([loop.upper] if upper else [])]
    if upper != "only":
        direct += [i for s in found.streamed for i in s.load.index]
    return any(x is v for x in direct) or any(o is v for op in _stream_slice(found, upper) for o in op.operands)


def _new_writer(plan, layouts: Classes) -> _Writer:
    return _Writer(Target(interpret=False, descriptors=False), plan, layouts)


def _slice(block_ops: list[Op], need: set[int]) -> list[Op]:
    """The ops of `block_ops` (in order) that the values `need` depend on."""
    need = set(need)
    keep = []
    for op in reversed(block_ops):
        if any(r.id in need for r in op.results):
            keep.append(op)
            need |= {v.id for v in op.operands}
    return keep[::-1]


_CREATION = re.compile(r"\btl\.(full|arange|zeros)\(")


def _as_gluon(source: str) -> str:
    """Triton helpers and creation builtins as Gluon spells them (see the module docstring)."""
    return _CREATION.sub(r"gl.\1(", source).replace("@triton.jit\n", "@gluon.jit\n")
