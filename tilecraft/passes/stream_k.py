"""Stream-K: a matmul-like kernel's K iterations dealt out evenly to a fixed number of programs.

A grid of G output tiles runs on S SMs in cdiv(G, S) waves; when the last one is far from full
(1536^3 with 128x256 tiles: 72 tiles on 132 SMs, 45% of them idle) neither cutting tiles into
pieces (slower per element) nor split-K's fixed splits (which quantize the same way) helps.
`stream_k` derives one kernel that runs on P programs (one per SM) over the G * T K iterations
of all tiles in a row (T: the K loop's trip count; at least 1): program p takes iterations
[p * L, min((p + 1) * L, G * T)) with L = cdiv(G * T, P), tile by tile, one segment per tile
it meets. For each segment it runs the user's prologue for that tile (`bid(0)` is the tile,
`num_blocks(0)` is G) and the K loop over the segment's iterations, stores the accumulator into
its slot of the workspace, and, for a tile cut between programs, adds 1 to the tile's counter
there (acq_rel, device scope). The segment that finds the counter at parts - 1 (the last to
arrive, whichever that is), or the only segment of a whole tile, sums the tile's slots in
segment order and runs the epilogue on the sum, on row slices of SUM_ROWS where the epilogue
allows (`split_k.sliceable`): a 128x256 fp32 sum beside a loaded partial would not fit in
registers (the first version, which kept them whole, spilled 368 bytes a thread and ran 1536^3
at a third of torch's speed, benchmarks/results/size-sweep-h200-2026-12-01-n.json).

No program waits for another, so programs may run in any order, or one at a time as the
interpreters run them. The sum's order is fixed: runs agree bit for bit, and the result differs
from the unsplit kernel's only by the reassociation at the cuts (a whole tile's is its
accumulator exactly). Only a program's first and last segments can be partial, so each program
has two slots (a middle segment, whole, reuses the last one's).

The kernel takes two parameters after `fn`'s: G (int32, the grid the user launched) and the
workspace W (the accumulator's dtype, [2 * P * TM + C, TN] for a TM x TN accumulator: slot s of
program p is tile (2p + s, 0); then C = cdiv(G, TN) rows of counters, tile t's at element
(2 * P * TM + t // TN, t % TN), which must be zero at launch: `StreamK.workspace_shape`,
`StreamK.counter_rows`). Workspace accesses never use tensor descriptors (their ordering
through the counter is the generic proxy's).

Kernels that qualify: those `split_k` qualifies (a pure prologue, one K loop threading a zero
accumulator through MMAs, an epilogue; grid axis 0 only) with a 2-D accumulator and int32 loop
bounds computed from neither `bid` nor `num_blocks` (they are computed once per program).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..ir import ArrayType, AtomicFn, BinaryFn, Block, Builder, CompareFn, Function, Op, TileType, Value, ops, scalar
from ..language import dtypes as dt
from ..language.enums import MemoryOrder, MemoryScope
from .split_k import FINISH_LATENCY, k_loop, slice_index, sliced_epilogue, sliceable, trip_count


SUM_ROWS = 32
"""The tile's sum runs on row slices of this many rows (where the epilogue allows): a 32x256
fp32 slice takes 32 registers a thread at 8 warps, a few of them in flight at once."""


@dataclass(frozen=True)
class StreamK:
    """The stream-K kernel of a kernel (see the module docstring); `acc` its accumulator tile."""

    fn: Function
    acc: TileType

    def workspace_shape(self, programs: int, tiles: int) -> tuple[int, int]:
        """W's shape for `programs` programs over `tiles` output tiles."""
        tm, tn = self.acc.shape
        return 2 * programs * tm + self.counter_rows(tiles), tn

    def counter_rows(self, tiles: int) -> int:
        """How many rows at W's end hold the tiles' counters (zero them before each launch)."""
        return -(-tiles // self.acc.shape[1])


def stream_k(fn: Function) -> StreamK | None:
    """The stream-K kernel of `fn` when it qualifies (module docstring), else None."""
    found = k_loop(fn)
    if found is None:
        return None
    prologue, loop, epilogue = found
    acc = loop.init[0].tile
    if acc.ndim != 2 or any(v.tile.dtype is not dt.int32 for v in (loop.lower, loop.upper, loop.step)):
        return None
    hoisted, per_tile = _split_prologue(prologue)
    defined = {r.id for op in hoisted for r in op.results} | {p.id for p in fn.params}
    if any(v.id not in defined for v in (*loop.init, loop.lower, loop.upper, loop.step)):
        return None
    return StreamK(_kernel(fn, hoisted, per_tile, loop, epilogue), acc)


def _split_prologue(prologue: list[Op]) -> tuple[list[Op], list[Op]]:
    """(ops computed once per program, ops computed per tile): an op runs per tile when it is a
    grid query, has blocks, or reads a value of an op that runs per tile."""
    tiled: set[int] = set()
    hoisted, per_tile = [], []
    for op in prologue:
        if isinstance(op, (ops.Bid, ops.NumBlocks)) or op.blocks or any(v.id in tiled for v in op.operands):
            tiled.update(r.id for r in op.results)
            per_tile.append(op)
        else:
            hoisted.append(op)
    return hoisted, per_tile


class _Emit:
    """Builds the kernel: `b` past `fn`'s ids; helpers for int32 scalar arithmetic."""

    def __init__(self, fn: Function, loop: ops.For) -> None:
        self.b = Builder(first_id=fn.max_id() + 1)
        self.b.loc = loop.loc

    def const(self, value: int | float, dtype=dt.int32) -> Value:
        return self.b.value(ops.Const, value=value, dtype=dtype)

    def bin(self, fn: BinaryFn, x: Value, y: Value) -> Value:
        return self.b.value(ops.Binary, fn=fn, lhs=x, rhs=y)

    def add(self, x: Value, y: Value) -> Value:
        return self.bin(BinaryFn.ADD, x, y)

    def sub(self, x: Value, y: Value) -> Value:
        return self.bin(BinaryFn.SUB, x, y)

    def mul(self, x: Value, y: Value) -> Value:
        return self.bin(BinaryFn.MUL, x, y)

    def div(self, x: Value, y: Value) -> Value:
        return self.bin(BinaryFn.FLOORDIV, x, y)

    def cdiv(self, x: Value, y: Value) -> Value:
        return self.div(self.sub(self.add(x, y), self.const(1)), y)

    def cmp(self, fn: CompareFn, x: Value, y: Value) -> Value:
        return self.b.value(ops.Compare, fn=fn, lhs=x, rhs=y)

    def where(self, cond: Value, x: Value, y: Value) -> Value:
        return self.b.value(ops.Where, cond=cond, x=x, y=y)


def _kernel(fn: Function, hoisted: list[Op], per_tile: list[Op], loop: ops.For, epilogue: list[Op]) -> Function:
    e = _Emit(fn, loop)
    b = e.b
    acc = loop.init[0].tile
    tiles = b.new_value(scalar(dt.int32), "tiles")
    work = b.new_value(ArrayType(acc.dtype, 2), "workspace")
    body = Block()
    with b.inside(body):
        body.ops.extend(hoisted)
        one = e.const(1)
        step, trips = trip_count(b, loop)
        per = e.bin(BinaryFn.MAX, trips, one)  # T: a loop of no iteration still makes one segment per tile
        programs, program = b.value(ops.NumBlocks, axis=0), b.value(ops.Bid, axis=0)
        chunk = e.cdiv(e.mul(tiles, per), programs)
        start = e.mul(program, chunk)
        end = e.bin(BinaryFn.MIN, e.add(start, chunk), e.mul(tiles, per))
        before = Block([b.new_value(scalar(dt.int32), "it")])
        with b.inside(before):
            b.emit(ops.Condition, cond=e.cmp(CompareFn.LT, before.args[0], end), values=(before.args[0],))
        after = Block([b.new_value(scalar(dt.int32), "it")])
        with b.inside(after):
            it = after.args[0]
            tile = e.div(it, per)
            first = e.mul(tile, per)  # the tile's first iteration
            k0 = e.sub(it, first)
            k1 = e.bin(BinaryFn.MIN, per, e.add(k0, e.sub(end, it)))
            grid = {ops.Bid: tile, ops.NumBlocks: tiles}
            zero = e.const(0)
            per_tile = [grid_read_as(op, grid, zero) for op in per_tile]
            after.ops.extend(per_tile)
            lower = e.add(loop.lower, e.mul(k0, step))
            upper = e.bin(BinaryFn.MIN, e.add(loop.lower, e.mul(k1, step)), loop.upper)
            part = b.value(ops.For, lower=lower, upper=upper, step=loop.step, init=loop.init,
                           body=grid_block_read_as(loop.body, grid, zero))
            b.emit(ops.Store, array=work, index=(_slot(e, program, chunk, first), zero), tile=part, order=(0, 1),
                   allow_tma=False)
            q0 = e.div(first, chunk)  # the programs holding the tile's segments: q0..q1
            q1 = e.div(e.sub(e.add(first, per), one), chunk)
            last = _arrived_last(e, work, programs, tile, q0, q1, acc)
            finish = Block()
            with b.inside(finish):
                _finish(e, work, [*hoisted, *per_tile], loop, [grid_read_as(op, grid, zero) for op in epilogue],
                        first, chunk, q0, q1)
                b.emit(ops.Yield, values=())
            b.emit(ops.If, cond=last, then=finish, orelse=_empty(b))
            b.emit(ops.Yield, values=(e.add(it, e.sub(k1, k0)),))
        b.emit(ops.While, init=(start,), before=before, after=after)
    return Function(f"{fn.name}_stream_k", [*fn.params, tiles, work], [*fn.param_names, "tiles", "workspace"],
                    body, fn.loc, dict(fn.options))


def _empty(b: Builder) -> Block:
    block = Block()
    with b.inside(block):
        b.emit(ops.Yield, values=())
    return block


def _slot(e: _Emit, q: Value, chunk: Value, first: Value) -> Value:
    """Program q's workspace slot for the tile starting at iteration `first`: 2q when q starts
    inside that tile (its first segment), 2q + 1 when it started in an earlier one (its last)."""
    later = e.where(e.cmp(CompareFn.LT, e.mul(q, chunk), first), e.const(1), e.const(0))
    return e.add(e.mul(e.const(2), q), later)


def _arrived_last(e: _Emit, work: Value, programs: Value, tile: Value, q0: Value, q1: Value, acc: TileType) -> Value:
    """Whether this segment is its tile's last to arrive: always for a tile of one segment,
    else when the tile's counter (acq_rel add, after the slot's store) was at parts - 1."""
    b = e.b
    parts = e.add(e.sub(q1, q0), e.const(1))
    cut, whole = Block(), Block()
    with b.inside(cut):
        base = e.mul(e.mul(e.const(2), programs), e.const(acc.shape[0]))
        width = e.const(acc.shape[1])
        counter = (e.add(base, e.div(tile, width)), e.bin(BinaryFn.MOD, tile, width))
        one = e.const(1.0 if acc.dtype.is_float else 1, acc.dtype)
        arrived = b.value(ops.AtomicRMW, fn=AtomicFn.ADD, array=work, index=counter, value=one,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE)
        before = b.value(ops.Cast, x=e.sub(parts, e.const(1)), dtype=acc.dtype)
        b.emit(ops.Yield, values=(e.cmp(CompareFn.EQ, arrived, before),))
    with b.inside(whole):
        b.emit(ops.Yield, values=(e.const(True, dt.bool_),))
    return b.value(ops.If, cond=e.cmp(CompareFn.GT, parts, e.const(1)), then=cut, orelse=whole)


def _finish(e: _Emit, work: Value, prologue: list[Op], loop: ops.For, epilogue: list[Op], first: Value,
            chunk: Value, q0: Value, q1: Value) -> None:
    """The tile's sum, its segments' slots in order (q0's first), and the epilogue on it: on row
    slices of SUM_ROWS when the epilogue allows (`split_k.sliceable`: a slice's sum lives in
    few registers, where a whole tile's beside a loaded one would spill), else whole. The
    loads carry split-K FINISH's latency hint, so a backend keeps a slice's parts in flight
    together (each waited for in turn, the 1536^3 sum of 8 slices of 2-3 parts took longer
    than the K loop)."""
    b = e.b
    acc = loop.init[0].tile
    slices = max(1, acc.shape[0] // SUM_ROWS) if sliceable(prologue, loop, epilogue) else 1
    piece = (acc.shape[0] // slices, acc.shape[1])
    one = e.const(1)

    def load(q: Value, row: Value | None) -> Value:
        index = (_slot(e, q, chunk, first), e.const(0))
        if row is not None:
            index = slice_index(b, index, slices, row)
        return b.value(ops.Load, array=work, index=index, shape=piece, order=(0, 1), allow_tma=False,
                       latency=FINISH_LATENCY)

    def total(row: Value | None) -> ops.For:
        step = Block([b.new_value(scalar(dt.int32), "q"), b.new_value(TileType(acc.dtype, piece), "sum")])
        with b.inside(step):
            b.emit(ops.Yield, values=(e.add(step.args[1], load(step.args[0], row)),))
        return b.make(ops.For, lower=e.add(q0, one), upper=e.add(q1, one), step=one, init=(load(q0, row),),
                      body=step)

    if slices == 1:
        b.block.ops.append(dataclasses.replace(total(None), results=loop.results))  # the epilogue reads these
        b.block.ops.extend(epilogue)
        return
    rows = Block([b.new_value(scalar(dt.int32), "row")])
    with b.inside(rows):
        summed = total(rows.args[0])
        b.block.ops.append(summed)
        sliced_epilogue(b, prologue, epilogue, {loop.results[0].id: summed.result}, slices, rows.args[0])
        b.emit(ops.Yield, values=())
    b.emit(ops.For, lower=e.const(0), upper=e.const(slices), step=one, init=(), body=rows)


def grid_read_as(op: Op, grid: dict[type, Value], zero: Value) -> Op:
    """`op` with `bid(0)` and `num_blocks(0)` read as other values (`grid`: Bid and NumBlocks ->
    the value each reads as; `zero`: an int32 0), in nested blocks too. Stream-K reads them as
    the segment's tile and the user's grid (the only grid queries of a kernel it qualifies);
    the warp-specialized schedule's paired blocks as the user's block and grid."""
    source = grid.get(type(op)) if isinstance(op, (ops.Bid, ops.NumBlocks)) and op.axis == 0 else None
    if source is not None:
        return ops.Binary(fn=BinaryFn.ADD, lhs=source, rhs=zero, results=op.results, loc=op.loc)
    if not op.blocks:
        return op
    return dataclasses.replace(op, **{name: grid_block_read_as(getattr(op, name), grid, zero)
                                      for name in type(op)._block_fields})


def grid_block_read_as(block: Block, grid: dict[type, Value], zero: Value) -> Block:
    """`block` with its ops `grid_read_as`."""
    return Block(list(block.args), [grid_read_as(op, grid, zero) for op in block.ops])
