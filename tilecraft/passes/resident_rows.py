"""Rows kept resident: a stretch that a kernel walks several times read from memory once.

cuTile's LayerNorm sample walks its block's row tile by tile three times (mean, variance,
normalize), so each block reads its row three times; the later reads come from L2 only while
the rows of every block in flight fit there (backends/triton/occupancy.py bounds the blocks per
SM where they would not, which does not help rows of 64 KB and more). `reread` finds such
kernels. Where a launch fixes the stretch's length (the array's size along the walked axis),
`ResidentRows.variant` is the kernel for that length with the walking loops unrolled (their
trip counts are constants once that size is: `passes.ranges`) and each tile loaded once: a
later pass's load of a tile is the first pass's value, held in registers. The walking loops may
also sit in the body of a top-level loop (a persistent kernel looping over its rows): tiles are
then held within each of its iterations.

Loads merge only where no write in between can reach their array: a store to another parameter
array cannot (cuTile: arrays passed as distinct arguments do not overlap), while a store to the
same array, a write through anything else (a view, an atomic) or an ordered load ends every
merge across it. Every op but the merged loads runs as written, in order (on a GPU the variant's
reductions may group their sums differently: its warps differ).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

from ..ir import Block, Function, Op, Value, ops
from ..ir.builder import Builder, copied_fields
from ..ir.types import ArrayType
from ..language.enums import MemoryOrder
from .dce import eliminate_dead_code, has_effects
from .ranges import value_ranges

MAX_TRIPS = 32
"""The most iterations of one walking loop a variant unrolls: Triton's compile time grows faster
than the code (the LayerNorm example's variant for 16384 columns, sm_90, on this 2-core host: 1024
columns a tile, 16 iterations a pass, 2.3 s; 256 a tile, 64 iterations, 11 s; 128 a tile, 128
iterations, 71 s)."""

MAX_RESIDENT_BYTES = 128 * 1024
"""The most bytes of the walked array's tiles a block of the variant holds: half the 256 KB
register file of an SM (sm_80 and later), in 16 warps' 128 registers a thread at most."""


class Reread(NamedTuple):
    """A kernel's passes over one array: parameter `param`'s tiles walked along array axis
    `axis` in two or more loops of one block (`_walking_loops`), `across` elements of each tile
    across that axis: a block reads `shape[axis] * across` elements again in each pass."""

    param: int
    axis: int
    across: int


def reread(fn: Function) -> Reread | None:
    """The array `fn`'s blocks read again pass after pass (`Reread`), or None: where no array's
    tiles are walked along the same axis by two or more loops of one block (the kernel's top
    level, or a top-level loop's body), each loop's load indexing by its induction variable in
    one position and by values from outside the loop elsewhere; nor for kernels with MMAs (a
    matmul's K loop reads each tile once)."""
    found = _walking_loops(fn)
    return None if found is None else found[0]


def _walking_loops(fn: Function) -> tuple[Reread, list[ops.For], Block] | None:
    """`reread(fn)`, the loops that walk its array and the block holding them: the kernel's top
    level, else the body of one of its top-level loops (a persistent kernel's loop over rows)."""
    if any(isinstance(op, ops.Mma) for op in fn.walk()):
        return None
    params = {p.id: i for i, p in enumerate(fn.params)}
    outside = set(params) | _plain_results(fn.body)
    found = _walking_in(fn.body, params, outside)
    for body in (op.body for op in fn.body.ops if isinstance(op, ops.For)):
        if found is not None:
            break
        found = _walking_in(body, params, outside | {a.id for a in body.args} | _plain_results(body))
    return found


def _plain_results(block: Block) -> set[int]:
    """ids of the results of `block`'s ops without blocks of their own."""
    return {r.id for op in block.ops if not op.blocks for r in op.results}


def _walking_in(block: Block, params: dict[int, int],
                outside: set[int]) -> tuple[Reread, list[ops.For], Block] | None:
    """The array two or more of `block`'s loops walk, indexing by `outside` values elsewhere."""
    passes: dict[Reread, list[ops.For]] = {}
    for loop in (op for op in block.ops if isinstance(op, ops.For)):
        for found in {_walked(op, loop.body.args[0], params, outside) for op in loop.body.ops} - {None}:
            passes.setdefault(found, []).append(loop)
    again = [r for r, loops in passes.items() if len(loops) >= 2]
    if not again:
        return None
    found = max(again, key=lambda r: r.across)
    return found, passes[found], block


def _walked(op: Op, iv: Value, params: dict[int, int], outside: set[int]) -> Reread | None:
    """The stretch Load `op` walks with induction variable `iv`, if it does: `iv` in one index
    position, values from `outside` the loop (the block holding it, or above) in the others."""
    if not isinstance(op, ops.Load) or op.array.id not in params:
        return None
    at = [k for k, v in enumerate(op.index) if v is iv]
    if len(at) != 1 or any(v is not iv and v.id not in outside for v in op.index):
        return None
    k = at[0]
    return Reread(params[op.array.id], op.order[k], math.prod(d for j, d in enumerate(op.shape) if j != k))


@dataclasses.dataclass(frozen=True)
class ResidentRows:
    """A kernel that `reread` finds (`found`), with the loops walking its array (`loops`) and the
    block holding them (`block`: the kernel's body or a top-level loop's)."""

    fn: Function
    found: Reread
    loops: tuple[ops.For, ...]
    block: Block

    def trips(self, size: int) -> tuple[int, ...] | None:
        """The walking loops' trip counts where the array's size along the walked axis is
        `size`; None where one is not a constant then, or the variant would unroll more than
        `MAX_TRIPS` iterations of a loop or hold more than `MAX_RESIDENT_BYTES`."""
        array = self.fn.params[self.found.param]
        ranges = value_ranges(self.fn, {(array.id, self.found.axis): size})
        counts = []
        for loop in self.loops:
            bounds = [ranges.get(v.id) for v in (loop.lower, loop.upper, loop.step)]
            if any(r is None or r[0] != r[1] for r in bounds):
                return None
            (lower, _), (upper, _), (step, _) = bounds
            counts.append(max(0, -(-(upper - lower) // step)) if step > 0 else 0)
        if max(counts) > MAX_TRIPS or max(counts) * self.tile_bytes > MAX_RESIDENT_BYTES:
            return None
        return tuple(counts)

    @property
    def tile_bytes(self) -> int:
        """The bytes of the largest tile of the walked array that a walking loop loads."""
        array = self.fn.params[self.found.param]
        return _array_type(array).dtype.itemsize * max(
            math.prod(op.shape) for loop in self.loops for op in loop.body.ops
            if isinstance(op, ops.Load) and op.array is array)

    def held(self, size: int) -> int:
        """The bytes of the walked array a block of the variant for `size` holds at most."""
        trips = self.trips(size)
        return 0 if trips is None else max(trips) * self.tile_bytes

    def variant(self, size: int) -> Function:
        """The kernel for launches where the array's size along the walked axis is `size`
        (`trips(size)` must be known): that size a constant, the walking loops unrolled, each
        tile of the kernel's arrays loaded once where no write in between may change it."""
        trips = self.trips(size)
        if trips is None:
            raise ValueError(f"no resident variant of {self.fn.name} for size {size}")
        return _Unroller(self, size, trips).function()


def resident_rows(fn: Function) -> ResidentRows | None:
    """`fn`'s `ResidentRows`, where `reread` finds an array its blocks read again and again."""
    found = _walking_loops(fn)
    return None if found is None else ResidentRows(fn, found[0], tuple(found[1]), found[2])


def _array_type(v: Value) -> ArrayType:
    assert isinstance(v.type, ArrayType)
    return v.type


class _Unroller:
    """Copies a kernel with its walking loops unrolled (see `ResidentRows.variant`)."""

    def __init__(self, rows: ResidentRows, size: int, trips: tuple[int, ...]) -> None:
        self.fn = rows.fn
        self.array = rows.fn.params[rows.found.param]
        self.axis = rows.found.axis
        self.size = size
        self.trips = dict(zip(rows.loops, trips))
        self.block = rows.block
        self.params = {p.id for p in rows.fn.params}
        self.b = Builder(first_id=rows.fn.max_id() + 1)
        self.map: dict[int, Value] = {}
        self.consts: dict[int, tuple[Any, Any]] = {}  # value id in the copy -> (value, dtype) of a constant
        self.loaded: dict[tuple, Value] = {}  # a load's key -> its value in the copy (in `block`)

    def function(self) -> Function:
        body = Block()
        with self.b.inside(body):
            self.copy(self.fn.body.ops, top=self.block is self.fn.body)
        fn = self.fn
        return eliminate_dead_code(Function(f"{fn.name}_resident{self.size}", list(fn.params), list(fn.param_names),
                                            body, fn.loc, dict(fn.options)))

    def get(self, v: Value) -> Value:
        return self.map.get(v.id, v)

    def copy(self, source: list[Op], top: bool) -> None:
        """Append copies of `source` to the block being built; `top`: in the block holding the
        walking loops, where loads merge."""
        for op in source:
            self.b.loc = op.loc
            if top and isinstance(op, ops.For) and op in self.trips:
                self._unroll(op)
            elif isinstance(op, ops.ArrayShape) and op.array is self.array and op.axis == self.axis:
                self.map[op.result.id] = self._const(self.size, op.result)
            elif top and isinstance(op, ops.Load) and op.memory_order is MemoryOrder.WEAK:
                key = self._key(op)
                if key not in self.loaded:
                    self.loaded[key] = self._emit(op).result
                self.map[op.result.id] = self.loaded[key]
            else:
                self._forget_written(op)
                new = self._emit(op)
                if isinstance(op, ops.Const):
                    self.consts[new.result.id] = (op.value, op.dtype)

    def _unroll(self, loop: ops.For) -> None:
        """`loop`'s iterations one after the other, its counter a constant in each."""
        carried = [self.get(v) for v in loop.init]
        iv, *args = loop.body.args
        for k in range(self.trips[loop]):
            self.map[iv.id] = self._const(self._value(loop.lower) + k * self._value(loop.step), iv)
            self.map.update((a.id, c) for a, c in zip(args, carried))
            *ops_, end = loop.body.ops
            self.copy(ops_, top=True)
            carried = [self.get(v) for v in end.operands]
        self.map.update((r.id, c) for r, c in zip(loop.results, carried))

    def _value(self, v: Value) -> int:
        """The constant `v` of the source is (a loop bound `trips` found constant)."""
        found = self.consts.get(self.get(v).id)
        if found is None:
            raise AssertionError(f"loop bound {v} of {self.fn.name} is not a constant in its resident variant")
        return int(found[0])

    def _const(self, value: int, like: Value) -> Value:
        c = self.b.value(ops.Const, value=value, dtype=like.tile.dtype)
        self.consts[c.id] = (value, like.tile.dtype)
        return c

    def _key(self, op: ops.Load) -> tuple:
        """What identifies the tile a load in the copy reads: its array, its index (constants
        by value), its attributes."""
        index = tuple(("const", *self.consts[i.id]) if i.id in self.consts else i.id
                      for i in map(self.get, op.index))
        return (self.get(op.array).id, index, tuple(op.attributes().items()))

    def _forget_written(self, op: Op) -> None:
        """Drop the merged loads a write in `op` (or in its blocks) may change."""
        if not has_effects(op) and not any(isinstance(o, ops.Load) and o.memory_order is not MemoryOrder.WEAK
                                           for o in _walk(op)):
            return
        for o in _walk(op):
            if isinstance(o, ops.Store) and o.array.id in self.params:
                array = self.get(o.array).id
                self.loaded = {k: v for k, v in self.loaded.items() if k[0] != array}
            elif type(o).effects or isinstance(o, ops.Load) and o.memory_order is not MemoryOrder.WEAK:
                if not type(o).terminator:
                    self.loaded.clear()

    def _emit(self, op: Op) -> Op:
        new = self.b.emit(type(op), **copied_fields(op, self.get, self._block))
        self.map.update((old.id, res) for old, res in zip(op.results, new.results))
        return new

    def _block(self, block: Block) -> Block:
        args = []
        for a in block.args:
            new = self.b.new_value(a.type, a.hint)
            self.map[a.id] = new
            args.append(new)
        copy = Block(args)
        outer, self.loaded = self.loaded, {}  # what a block loads is not seen after it
        with self.b.inside(copy):
            self.copy(block.ops, top=block is self.block)
        self.loaded = outer
        return copy


def _walk(op: Op):
    """`op` and every op in its blocks."""
    yield op
    for blk in op.blocks:
        for o in blk.ops:
            yield from _walk(o)
