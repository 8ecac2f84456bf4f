"""What the warp-specialized schedule decided for one kernel, and the load partition.

`Schedule` holds the decisions both partitions follow (the streamed loop, its layouts, the
number of compute partitions, ring depths, tensor descriptors, shared buffers and barriers) and
the names that go with them; `load_body` emits the load partition: the scalar ops the loop
bounds and the streamed loads' indices need, then the loop issuing each streamed load as a TMA
copy into slot n % depth of its ring once the compute partitions have released the slot
(`empty` barrier; the copy completes on the slot's `ready` barrier). Rings are 3 slots deep
where shared memory holds them, else the deferred MMA's B ring keeps 3 (`_depths`).

With two compute partitions the kernel is persistent (`Schedule.persistent`): one program per
SM strides over the user's blocks, or, where the loop's bounds depend on the block (a causal
bound), over units of blocks c and X - 1 - c of one grid row, which hold equal work (`tile_loop`;
the block ids read the tile, as the Triton lowering's grid loop reads them). The load
partition streams the next block's tiles while the compute partitions finish the last one, and
copies the next block's resident tiles (the queries) into the second of two buffers
(`_resident_copies`; the compute partitions free a buffer once its block's output, which reuses
it, is stored), so no block waits for its first loads. Slot, phase, turn and block counters run
on across blocks (`next_tile`): each block streams `trips` slots in every partition, and the
compute partitions take trips + 1 turns. Measured on the H200: attention's ratio to cuDNN no
longer rises with the sequence length as it did (a fixed cost of about 2 us per block;
benchmarks/results/attention-lengths-h200-2026-12-01-e.json against -f, one call). Per-piece
streamed loads (`per_piece`: a matmul's A, whose rows each partition reads its own half of) get
a slot per partition in their ring.

Compute partitions signal barriers (`empty`, the ping-pong turns) from every thread
(`Schedule.arrive`), each barrier expecting all of their threads: a one-thread arrive would make
Triton put a barrier of the partition's warps before it, which the profile of the attention
kernel showed as the largest stall (benchmarks/results/ncu-h200-2026-12-01.txt). The two turns
are separate allocations, so a wait on one and an arrive on the other touch different buffers.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

from ...ir import Function, Op, Value, ops
from ...language import dtypes as dt
from ...language.dtypes import DType
from ...passes.warp_specialize import Streamed, StreamedLoop
from ..base import ArrayFacts
from ..triton.emitter import GridLoop
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
    own parameters are `fn`'s (attributes `kernel_fn`, `kernel_facts`); its rings hold `depths`
    slots (`stages`, the deepest, is what tools report); `descs` the tensor descriptors made so
    far. `uneven`: the partitions' loops may end at different iterations (only the upper bound
    depends on the partition): the load partition
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
        self.per_piece = self._per_piece()  # streamed indices loaded once per compute partition
        self.depths, self.store_pieces = self._depths()  # slots per ring (found.streamed's order); see _depths
        self.stages = max(self.depths)
        self.counters: tuple[str, str, str] | None = None  # the partition's (slots, turns, blocks) done

    # ---- the persistent tile loop ----------------------------------------------------------
    @property
    def persistent(self) -> bool:
        """Whether the kernel loops over the user's blocks (module docstring): with two compute
        partitions, whose registers (MAX_REGS over 12 warps) leave room for one program per SM."""
        return self.consumers > 1

    @property
    def units_paired(self) -> bool:
        """Whether the blocks' loops may run different numbers of iterations (their bounds read
        the block index): then programs run units of two blocks (`tile_loop`)."""
        loop = self.found.loop
        bounds = _ops_for(self.found.prologue, {loop.lower.id, loop.upper.id, loop.step.id})
        return any(isinstance(op, (ops.Bid, ops.NumBlocks)) for op in bounds)

    @property
    def buffers(self) -> int:
        """Copies of each resident buffer: two in a persistent kernel, whose load partition
        copies the next block's resident tiles while the compute partitions read this block's;
        one otherwise."""
        return 2 if self.persistent else 1

    @contextmanager
    def tile_loop(self, w: GluonWriter, sizes: Sequence[str]) -> Iterator[None]:
        """Statements inside a persistent partition's loop over blocks (`sizes`: its parameters
        holding the grid of programs the user's grid asks for); a plain body otherwise.

        The programs stride over the blocks, or, where the loop's bounds depend on the block
        (`units_paired`: a causal bound), over units (`units`): unit u holds the blocks at
        axis-0 positions c and X - 1 - c (c = u % ceil(X / 2)) of row u // ceil(X / 2) of the
        grid, run in that order (one block where they coincide). Where a block's work grows
        with its axis-0 position every unit holds the same work, so striding over units
        balances the programs; the blocks of one row (one head) stay close in time."""
        if not self.persistent:
            self.counters = None
            yield
            return
        self.counters = (w.fresh("slots_done"), w.fresh("turns_done"), w.fresh("blocks_done"))
        for name in self.counters:
            w.emit(f"{name} = 0")
        x, y, z = sizes
        tile = w.fresh("tile")
        if not self.units_paired:
            w.emit(f"for {tile} in range(tl.program_id(0), {x} * {y} * {z}, tl.num_programs(0)):")
            w.grid_loop = GridLoop(tile, tuple(sizes))
            with w.indented():
                yield
            return
        unit, col, half = w.fresh("unit"), w.fresh("col"), w.fresh("half")
        w.emit(f"for {unit} in range(tl.program_id(0), {units(x, y, z)}, tl.num_programs(0)):")
        with w.indented():
            w.emit(f"{col} = {unit} % (({x} + 1) // 2)")
            w.emit(f"for {half} in range(0, 2 - (2 * {col} + 1 == {x}).to(tl.int32)):")
            with w.indented():
                w.emit(f"{tile} = {col} + {half} * ({x} - 1 - 2 * {col}) + {x} * ({unit} // (({x} + 1) // 2))")
                w.grid_loop = GridLoop(tile, tuple(sizes))
                yield

    def next_tile(self, w: GluonWriter, trips: str, compute: bool) -> None:
        """At a persistent block's end: `trips` slots streamed and, in every compute partition,
        trips + 1 ping-pong turns (the last for the deferred MMA), none where no partition
        iterated; uneven partitions take turn 0 even then (compute.py `_drain`)."""
        if self.counters is not None:
            slots, turns, blocks = self.counters
            w.emit(f"{slots} += {trips}")
            if compute and self.turns:
                w.emit(f"{turns} += {trips} + {'1' if self.uneven else f'tl.minimum({trips}, 1)'}")
            w.emit(f"{blocks} += 1")

    def trips(self, w: GluonWriter, lo: str, hi: str, step: str) -> str:
        """The name of the loop's iteration count from `lo` to `hi` by `step` (persistent only:
        the counters advance by it), else ""."""
        return "" if self.counters is None else self.trip_count(w, lo, hi, step)

    @staticmethod
    def trip_count(w: GluonWriter, lo: str, hi: str, step: str) -> str:
        """The name of the iteration count of a loop from `lo` to `hi` by `step` (positive)."""
        n = w.fresh("trips")
        w.emit(f"{n} = tl.maximum(({hi} - {lo} + {step} - 1) // {step}, 0)")
        return n

    def turn(self, turn: str) -> str:
        """Turn number `turn` of the block as counted since the program's start."""
        return turn if self.counters is None else f"{self.counters[1]} + {turn}"

    def resident_phase(self) -> str:
        """The phase of this block's resident copies on their barrier."""
        return "0" if self.counters is None else f"({self.counters[2]} // 2) & 1"

    def resident_buffer(self) -> str:
        """Which copy of the resident buffers this block uses (persistent kernels: `buffers`)."""
        return f"({self.counters[2]} % 2)"

    def res(self, r: int) -> str:
        """The compute partition's resident buffer `r` for the block it runs."""
        if self.counters is None:
            return self.own(f"res{r}")
        return f"res{r}.index({self.resident_buffer()} * {self.consumers} + {self.piece})"

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

    def _per_piece(self) -> frozenset[int]:
        """The streamed loads whose index depends on the compute partition's piece (a matmul's A,
        its rows cut in halves): the load partition copies each piece's tile into slots of its
        own, `consumers` per ring slot."""
        if self.consumers == 1:
            return frozenset()
        piece = self.fn.params[-1]
        iv = self.found.loop.body.args[0]
        found = set()
        for i, st in enumerate(self.found.streamed):
            values = [v for v in st.load.index if v is not iv]
            slice_ops = _ops_for([*self.found.prologue, *self.found.loop.body.ops], {v.id for v in values})
            if any(v is piece for v in values) or any(o is piece for op in slice_ops for o in op.operands):
                found.add(i)
        if found and self.uneven:
            raise NotLowerable("loads of every partition's own tiles in loops of different lengths")
        return frozenset(found)

    def ring_slot(self, i: int, slot: str, piece: str) -> str:
        """The index in ring `i` of slot `slot`'s tile for piece `piece`."""
        return f"{slot} * {self.consumers} + {piece}" if i in self.per_piece else slot

    def _depths(self) -> tuple[tuple[int, ...], int]:
        """(slots per ring, store pieces): 3 slots each where shared memory holds them with the
        epilogue's stores written whole (one piece), or else written in two column halves
        through a buffer of half the size (a 128x256 float32 tile's buffers alone take 128 KiB);
        failing both, halves, and 3 slots for as many rings as fit and 2 for the rest: the
        deferred MMA's B ring first (its slots are held an iteration longer), then the rings
        streamed last. A fourth slot for matmuls, which halves (16-bit) or quarters (tf32) of
        the stores make room for, was no faster on the H200 (fp16 4096^3 0.94-0.97x against
        0.99-1.00x with 3, bf16 8192^3 1.03-1.04x either way; tf32 4096^3 0.86x against 0.83-0.84x,
        little more than the spread:
        benchmarks/results/gluon-depth-ab-h200-2026-12-01.txt)."""
        resident = self.buffers * sum(self._bytes(self.block(s), s.load.array.type.dtype) for s in self.found.resident)
        reused = self.reused
        stores = sum(self._bytes(st.tile.tile.shape, st.tile.tile.dtype)
                     for i, st in enumerate(self.stores) if i not in reused)
        f = self.found
        sizes = [self._bytes(self.block(s), s.load.array.type.dtype) * (self.consumers if i in self.per_piece else 1)
                 for i, s in enumerate(f.streamed)]
        halves = all(st.tile.tile.ndim == 2 and st.tile.tile.shape[-1] % 16 == 0 for st in self.stores)
        pieces = (1, 2) if halves and stores else (1,)
        for n in pieces:
            if (resident + stores // n) * self.consumers + 3 * sum(sizes) <= SHARED_LIMIT:
                return (3,) * len(sizes), n
        fixed = (resident + stores // pieces[-1]) * self.consumers
        first = [f.streamed.index(f.tile_of(f.deferred.b))] if f.deferred is not None else []
        order = first + [i for i in reversed(range(len(sizes))) if i not in first]
        for deep in range(len(sizes) - 1, -1, -1):
            depths = tuple(3 if i in order[:deep] else 2 for i in range(len(sizes)))
            if fixed + sum(d * b for d, b in zip(depths, sizes)) <= SHARED_LIMIT:
                return depths, pieces[-1]
        raise NotLowerable("the rings do not fit in shared memory with two stages")

    def store_block(self, st: ops.Store) -> tuple[int, ...]:
        """The block of store `st`'s buffer and TMA box: its tile, or a column half of it
        (`store_pieces`, for stores with buffers of their own)."""
        shape = st.tile.tile.shape
        if self.stores.index(st) in self.reused:
            return shape
        return (*shape[:-1], shape[-1] // self.store_pieces)

    @property
    def instr_k(self) -> int:
        """K of one wgmma instruction (the accumulator layout's instr_shape): 8 for tfloat32
        operands, 16 for 16-bit ones."""
        return 8 if self.found.mmas[0].a.tile.dtype is dt.tfloat32 else 16

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
            out.append((f"res{i}", f"gl.allocate_shared_memory({d}.dtype, [{c * self.buffers}] + {d}.block_type.shape, "
                                   f"{d}.layout)"))
        if self.found.resident:
            bars = self.buffers if self.persistent else c
            out.append(("res_bar", f"gl.allocate_shared_memory(gl.int64, [{bars}, 1], mbarrier.MBarrierLayout())"))
            if self.persistent:
                out.append(("res_free", f"gl.allocate_shared_memory(gl.int64, [{bars}, 1], mbarrier.MBarrierLayout())"))
        for i, s in enumerate(self.found.streamed):
            d = self.desc(s.load.array, self.block(s))
            slots = self.depths[i] * (self.consumers if i in self.per_piece else 1)
            out.append((f"ring{i}", f"gl.allocate_shared_memory({d}.dtype, [{slots}] + {d}.block_type.shape, "
                                    f"{d}.layout)"))
            for kind in ("ready", "empty"):
                out.append((f"{kind}{i}", f"gl.allocate_shared_memory(gl.int64, [{self.depths[i]}, 1], "
                                          f"mbarrier.MBarrierLayout())"))
        if self.turns:
            out += [(name, "gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())") for name in TURNS]
        reused = self.reused
        for i, st in enumerate(self.stores):
            if i not in reused:
                d = self.desc(st.array, self.store_block(st))
                out.append((f"out{i}", f"gl.allocate_shared_memory({d}.dtype, [{c}] + {d}.block_type.shape, "
                                       f"{d}.layout)"))
        return out

    def allocations(self, shared: list[tuple[str, str]]) -> list[str]:
        """The kernel's statements allocating `shared` (`shared_names`) and initializing its barriers."""
        lines = [f"{name} = {expr}" for name, expr in shared]
        threads = self.warps * 32
        # one statement per barrier, no loop: a loop variable would rebind a kernel parameter of its name
        if self.found.resident:
            for c in range(self.buffers if self.persistent else self.consumers):
                lines.append(f"mbarrier.init(res_bar.index({c}), count=1)")
                if self.persistent:
                    lines.append(f"mbarrier.init(res_free.index({c}), count={self.consumers * threads})")
        lines += [f"mbarrier.init({name}.index(0), count={threads})" for name, _ in shared if name in TURNS]
        for i in range(len(self.found.streamed)):
            for k in range(self.depths[i]):
                lines.append(f"mbarrier.init(ready{i}.index({k}), count=1)")
                lines.append(f"mbarrier.init(empty{i}.index({k}), count={self.consumers * threads})"
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
        if self.counters is not None:
            self._resident_copies(w)
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        if self.uneven:
            hi = self.latest_end(w, "1")
        trips = self.trips(w, lo, hi, step)
        iv = w.define(loop.body.args[0], "j")
        values = [v for i in sorted(self.per_piece) for v in f.streamed[i].load.index if v is not iv]
        pieces = [self.piece_values(w, values, c) for c in range(1, self.consumers)] if values else []
        w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
        with w.indented():
            _, slots, phases = self.slot(w, iv, lo, step)
            for i, s in enumerate(f.streamed):
                d, slot = self.desc(s.load.array, self.block(s)), slots[i]
                copies = self.consumers if i in self.per_piece else 1
                w.emit(f"mbarrier.wait(empty{i}.index({slot}), {phases[i]} ^ 1)")
                w.emit(f"mbarrier.expect(ready{i}.index({slot}), {copies} * {d}.block_type.nbytes)")
                for c in range(copies):
                    with w.rebinding(values if c else []):
                        for v in values if c else []:
                            w.alias(v, pieces[c - 1][v.id])
                        w.emit(f"tma.async_copy_global_to_shared({d}, {self.coords(w, s.load)}, "
                               f"ready{i}.index({slot}), ring{i}.index({self.ring_slot(i, slot, str(c))}))")
        self.next_tile(w, trips, compute=False)

    def piece_values(self, w: GluonWriter, values: list[Value], piece: int) -> dict[int, str]:
        """The names of `values` (scalars of the prologue and the loop body that need no tile)
        for piece `piece`: their ops lowered again with the piece parameter read as it."""
        f = self.found
        slice_ops = _ops_for([*f.prologue, *f.loop.body.ops], {v.id for v in values})
        if any(isinstance(op, (ops.Load, ops.Mma)) or op.blocks for op in slice_ops):
            raise NotLowerable("a partition's own loads need a tile load for their indices")
        param = self.fn.params[-1]
        with w.rebinding([param, *(r for op in slice_ops for r in op.results)]):
            w.alias(param, str(piece))
            for op in slice_ops:
                w.lower_op(op)
            return {v.id: w.expr(v) for v in values}

    def _resident_copies(self, w: GluonWriter) -> None:
        """Persistent kernels: the load partition copies the block's resident tiles for every
        compute partition (the piece's index ops lowered once per piece) into the block's buffer
        once the compute partitions have freed it (`res_free`, after the block two before),
        so the copies of the next block run while the compute partitions finish this one."""
        f = self.found
        if not f.resident:
            return
        values = [v for s in f.resident for v in s.load.index]
        buf, blocks = w.fresh("rbuf"), self.counters[2]
        w.emit(f"{buf} = {blocks} % 2")
        w.emit(f"mbarrier.wait(res_free.index({buf}), (({blocks} // 2) & 1) ^ 1)")
        total = " + ".join(f"{self.desc(s.load.array, self.block(s))}.block_type.nbytes" for s in f.resident)
        w.emit(f"mbarrier.expect(res_bar.index({buf}), {self.consumers} * ({total}))")
        for c in range(self.consumers):
            names = self.piece_values(w, values, c)
            with w.rebinding(values):
                for v in values:
                    w.alias(v, names[v.id])
                for r, s in enumerate(f.resident):
                    d = self.desc(s.load.array, self.block(s))
                    w.emit(f"tma.async_copy_global_to_shared({d}, {self.coords(w, s.load)}, res_bar.index({buf}), "
                           f"res{r}.index({buf} * {self.consumers} + {c}))")

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

    def count(self, t: str) -> str:
        """Iteration `t` of this block's loop counted since the program's start (persistent
        kernels; the block's own count otherwise): what ring slots and phases follow."""
        return t if self.counters is None else f"({self.counters[0]} + {t})"

    def slots_at(self, w: GluonWriter, n: str) -> list[str]:
        """Per ring, the name of the slot of iteration count `n`."""
        names = {}
        for depth in sorted(set(self.depths)):
            names[depth] = w.fresh("slot")
            w.emit(f"{names[depth]} = ({n}) % {depth}")
        return [names[d] for d in self.depths]

    def slot(self, w: GluonWriter, iv: str, lo: str, step: str) -> tuple[str, list[str], list[str]]:
        """Names of the iteration number of the iteration at `iv` and, per ring, its slot and
        phase (rings of one depth share them)."""
        t = w.fresh("t")
        w.emit(f"{t} = ({iv} - {lo}) // {step}")
        n = self.count(t)
        names = {}
        for depth in sorted(set(self.depths)):
            slot, phase = w.fresh("slot"), w.fresh("phase")
            w.emit(f"{slot} = {n} % {depth}")
            w.emit(f"{phase} = ({n} // {depth}) & 1")
            names[depth] = (slot, phase)
        return t, [names[d][0] for d in self.depths], [names[d][1] for d in self.depths]

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
        """The compute partition's barrier of its resident copies (persistent kernels: the
        block's buffer's, on which the load partition copies every partition's)."""
        if self.counters is None:
            return self.own("res_bar")
        return f"res_bar.index({self.resident_buffer()})"


def units(x: str, y: str, z: str) -> str:
    """The number of units (`Schedule.tile_loop`) of a grid of programs x by y by z."""
    return f"(({x} + 1) // 2) * {y} * {z}"


def _stream_values(found: StreamedLoop, part: str) -> list[Value]:
    """The load partition's inputs: the loop's bounds and the streamed loads' indices ("all"),
    the upper bound alone ("upper") or the lower bound and step ("start")."""
    loop = found.loop
    if part == "upper":
        return [loop.upper]
    if part == "start":
        return [loop.lower, loop.step]
    return [loop.lower, loop.step, loop.upper] + [v for s in found.streamed for v in s.load.index
                                                  if v is not loop.body.args[0]]


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

