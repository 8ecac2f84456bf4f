"""Stream-K: a matmul-like kernel's K iterations dealt out evenly to a fixed number of programs.

A grid of G output tiles runs on S SMs in cdiv(G, S) waves; when the last one is far from full
(1536^3 with 128x256 tiles: 72 tiles on 132 SMs, 45% of them idle) neither cutting tiles into
pieces (slower per element) nor split-K's fixed splits (which quantize the same way) helps.
`stream_k` derives one kernel that runs on P programs (one per SM) over the G * T K iterations
of all tiles in a row (T: the K loop's trip count; at least 1): program p takes iterations
[p * L, min((p + 1) * L, G * T)) with L = cdiv(G * T, P), tile by tile, one segment per tile
it meets. For each segment it runs the user's prologue for that tile (`bid(0)` is the tile,
`num_blocks(0)` is G) and the K loop over the segment's iterations, then:

- a segment covering its whole tile runs the epilogue at once;
- a segment of a tile cut between programs stores its partial accumulator into its slot of the
  workspace and adds 1 to the tile's counter there (acq_rel, device scope); the segment that
  finds the counter at parts - 1 (the last to arrive, whichever that is) sums the tile's slots
  in segment order onto the accumulator's zero and runs the epilogue on the sum.

No program waits for another, so programs may run in any order, or one at a time as the
interpreters run them. The sum's order is fixed: runs agree bit for bit, and the result differs
from the unsplit kernel's only by the reassociation at the cuts. Only a program's first and
last segments can be partial, so each program has two slots.

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
from .split_k import k_loop


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
        step = e.bin(BinaryFn.MAX, loop.step, one)
        trips = e.bin(BinaryFn.MAX, e.div(e.sub(e.add(loop.upper, step), e.add(loop.lower, one)), step), e.const(0))
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
            after.ops.extend(_as_tile(op, grid, zero) for op in per_tile)
            lower = e.add(loop.lower, e.mul(k0, step))
            upper = e.bin(BinaryFn.MIN, e.add(loop.lower, e.mul(k1, step)), loop.upper)
            part = b.value(ops.For, lower=lower, upper=upper, step=loop.step, init=loop.init,
                           body=_as_tile_block(loop.body, grid, zero))
            whole = e.bin(BinaryFn.AND, e.cmp(CompareFn.EQ, k0, zero), e.cmp(CompareFn.EQ, k1, per))
            then, orelse = Block(), Block()
            with b.inside(then):
                b.emit(ops.Yield, values=(part, e.const(True, dt.bool_)))
            with b.inside(orelse):
                total, last = _fix_up(e, work, part, loop, it, start, program, programs, tile, first, per, chunk, tiles)
                b.emit(ops.Yield, values=(total, last))
            fixed = b.make(ops.If, cond=whole, then=then, orelse=orelse)
            b.block.ops.append(dataclasses.replace(fixed, results=(loop.results[0], fixed.results[1])))
            run, skip = Block(), Block()
            with b.inside(run):
                run.ops.extend(_as_tile(op, grid, zero) for op in epilogue)
                b.emit(ops.Yield, values=())
            with b.inside(skip):
                b.emit(ops.Yield, values=())
            b.emit(ops.If, cond=fixed.results[1], then=run, orelse=skip)
            b.emit(ops.Yield, values=(e.add(it, e.sub(k1, k0)),))
        b.emit(ops.While, init=(start,), before=before, after=after)
    return Function(f"{fn.name}_stream_k", [*fn.params, tiles, work], [*fn.param_names, "tiles", "workspace"],
                    body, fn.loc, dict(fn.options))


def _fix_up(e: _Emit, work: Value, part: Value, loop: ops.For, it: Value, start: Value, program: Value,
            programs: Value, tile: Value, first: Value, per: Value, chunk: Value, tiles: Value) -> tuple[Value, Value]:
    """A partial segment: store `part` in the program's slot, count it in, and, arriving last,
    sum the tile's slots in segment order. Returns (that sum or `part`, whether it is the sum)."""
    b = e.b
    acc = part.tile
    one, zero = e.const(1), e.const(0)
    two = e.const(2)
    order = (0, 1)
    later = e.where(e.cmp(CompareFn.NE, it, start), one, zero)  # not the program's first segment
    slot = e.add(e.mul(two, program), later)
    b.emit(ops.Store, array=work, index=(slot, zero), tile=part, order=order, allow_tma=False)
    base = e.mul(e.mul(two, programs), e.const(acc.shape[0]))
    width = e.const(acc.shape[1])
    counter = (e.add(base, e.div(tile, width)), e.bin(BinaryFn.MOD, tile, width))
    arrived = b.value(ops.AtomicRMW, fn=AtomicFn.ADD, array=work, index=counter, value=e.const(1.0 if acc.dtype.is_float else 1, acc.dtype),
                      memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE)
    q0 = e.div(first, chunk)
    q1 = e.div(e.sub(e.add(first, per), one), chunk)
    parts = e.add(e.sub(q1, q0), one)
    last = e.cmp(CompareFn.EQ, arrived, b.value(ops.Cast, x=e.sub(parts, one), dtype=acc.dtype))
    then, orelse = Block(), Block()
    with b.inside(then):
        step = Block([b.new_value(scalar(dt.int32), "q"), b.new_value(acc, "sum")])
        with b.inside(step):
            q = step.args[0]
            later_q = e.where(e.cmp(CompareFn.LT, e.mul(q, chunk), first), one, zero)  # q started in an earlier tile
            slot_q = e.add(e.mul(two, q), later_q)
            piece = b.value(ops.Load, array=work, index=(slot_q, zero), shape=acc.shape, order=order, allow_tma=False)
            b.emit(ops.Yield, values=(e.add(step.args[1], piece),))
        total = b.value(ops.For, lower=q0, upper=e.add(q1, one), step=one, init=(loop.init[0],), body=step)
        b.emit(ops.Yield, values=(total, e.const(True, dt.bool_)))
    with b.inside(orelse):
        b.emit(ops.Yield, values=(part, e.const(False, dt.bool_)))
    done = b.emit(ops.If, cond=last, then=then, orelse=orelse)
    return done.results[0], done.results[1]


def _as_tile(op: Op, grid: dict[type, Value], zero: Value) -> Op:
    """`op` with `bid(0)` and `num_blocks(0)` (the only grid queries of a qualifying kernel) read
    as the segment's tile and the user's grid (`grid`), in nested blocks too."""
    source = grid.get(type(op))
    if source is not None:
        return ops.Binary(fn=BinaryFn.ADD, lhs=source, rhs=zero, results=op.results, loc=op.loc)
    if not op.blocks:
        return op
    return dataclasses.replace(op, **{name: _as_tile_block(getattr(op, name), grid, zero)
                                      for name in type(op)._block_fields})


def _as_tile_block(block: Block, grid: dict[type, Value], zero: Value) -> Block:
    return Block(list(block.args), [_as_tile(op, grid, zero) for op in block.ops])
