"""Split-K: the two kernels that run a matmul-like kernel's K loop across more blocks.

A matmul with few output tiles (1024^3 with 128x256 tiles: 32 blocks on the H200's 132 SMs)
leaves most of the GPU idle, each block walking the whole K loop alone. `split_k` derives two
kernels from such a kernel, for a launch layer that runs them one after the other:

  PARTIAL, on grid (G, S, 1): block (b, s) runs the prologue, then iterations
      [s * chunk, (s + 1) * chunk) of the K loop (chunk = cdiv(trip count, S); some may be
      empty), and stores its accumulator to tile (s * G + b, 0, ...) of the workspace W.
  FINISH, on grid (G, R, 1): block (b, r) runs the prologue, sums row slice r (the tile cut
      into R slices along axis 0) of the S workspace tiles of b in the order s = 0, 1, ..., S - 1
      onto a zero tile, then runs the original epilogue on that slice (see `FINISH_SLICE_BYTES`;
      R = 1, the whole tile, for an epilogue that is not element-wise then one store).

FINISH's loop reads a tile per iteration and computes little: its loads carry a latency hint,
so that a backend that pipelines (Triton's `tl.range(num_stages=)`) keeps several in flight.

FINISH is made for a programmatic dependent launch after PARTIAL (a GPU backend's choice: its
blocks are then dispatched as PARTIAL's last blocks end, not only once its grid has completed):
each PARTIAL block lets its dependents launch after its store, and FINISH waits for PARTIAL's
grid, its writes included, after its prologue and before it reads the workspace. Launched
plainly, both controls do nothing.

Both take two parameters after the kernel's own: the int32 split count S and the workspace W
(the accumulator's dtype and rank; S * G accumulator tiles stacked along axis 0). No atomics
and a fixed summation order make the result the same on every run; it differs from the
unsplit kernel's only by the reassociation of the accumulation.

Kernels that qualify: the top level is pure ops (the prologue), then the one top-level For,
then anything (the epilogue). The loop carries one value, an accumulator that starts as a zero
constant tile and is only threaded through a chain of Mma ops (acc = mma(a, b, acc), possibly
several per iteration); the rest of its body has no effects. The kernel queries no grid axis
but 0 (the split uses axis 1) and has no grid-dependency control.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from ..ir import ArrayType, BinaryFn, Block, Builder, Function, Op, TileType, Value, ops, scalar
from ..ir.builder import copied_fields
from ..ir.kinds import GridDependency
from ..language import dtypes as dt
from .dce import eliminate_dead_code, has_effects
from .squares import splat_constant

ACCUMULATORS = (dt.float32, dt.float64, dt.int32)
"""Accumulator dtypes whose partial sums the workspace holds without loss."""

FINISH_SLICE_BYTES = 1024
"""FINISH cuts an accumulator tile of TM rows into R row slices, one block each, when the epilogue
allows (element-wise ops on the accumulator, then one tile store of the result): summing S tiles
is memory bound, and the G blocks of a grid the split is for (at most half the SMs) would read
them through a few SMs only. A slice has as few rows as hold this many bytes of the accumulator
(`finish_slices`), one row of a 256-column fp32 tile: the thinner the slices, the wider the
reads spread. H200, fp16 with 128x256x64 tiles, against torch, slices of 16 / 4 / 1 rows:
256x256x16384 (16 splits) 0.58 / 0.64 / 0.66x, 256x512x65536 (33 splits) 0.77 / 0.84 / 0.86x,
512x512x16384 0.76 / 0.78 / 0.82x (`finish-rows-h200-2026-12-03.json`)."""


def finish_slices(acc: TileType) -> int:
    """R for accumulator tile `acc`: slices of the fewest rows that hold FINISH_SLICE_BYTES."""
    row = math.prod(acc.shape[1:]) * acc.dtype.bitwidth // 8
    rows = min(acc.shape[0], max(1, FINISH_SLICE_BYTES // row))
    return acc.shape[0] // rows

FINISH_LATENCY = 4
"""The latency hint on FINISH's workspace loads (the loop's pipeline depth, see the module
docstring)."""

_ELEMENTWISE = (ops.Cast, ops.Bitcast, ops.Unary, ops.Binary, ops.Compare, ops.Where, ops.Fma)
"""Ops whose result element (i, j) depends only on their operands' element (i, j)."""


@dataclass(frozen=True)
class SplitK:
    """The two kernels of a split launch (see the module docstring); `acc` is the accumulator
    tile type (the workspace's dtype and tile shape); FINISH runs on (G, `slices`, 1) blocks."""

    partial: Function
    finish: Function
    acc: TileType
    slices: int = 1
    walks: tuple[int, int] | None = None  # (parameter, axis) of an array the K loop walks, tile by tile

    def workspace_shape(self, blocks: int, splits: int) -> tuple[int, ...]:
        """The workspace's shape for `blocks` blocks along axis 0 split `splits` ways."""
        return (splits * blocks * self.acc.shape[0], *self.acc.shape[1:])

    def k_extent(self, args: Sequence[Any]) -> int | None:
        """How far the K loop of a launch with `args` reaches: the extent of the array axis it
        walks (`walks`), None where that is not known."""
        if self.walks is None:
            return None
        shape = getattr(args[self.walks[0]], "shape", None)
        return None if shape is None else int(shape[self.walks[1]])


def split_k(fn: Function) -> SplitK | None:
    """PARTIAL and FINISH of `fn` when it has the shape of the module docstring, else None."""
    found = k_loop(fn)
    if found is None:
        return None
    prologue, loop, epilogue = found
    acc = loop.init[0].tile
    slices = finish_slices(acc) if sliceable(prologue, loop, epilogue) else 1
    return SplitK(_partial(fn, prologue, loop), _finish(fn, prologue, loop, epilogue, slices), acc, slices,
                  _walked(fn, loop))


def _walked(fn: Function, loop: ops.For) -> tuple[int, int] | None:
    """(parameter, axis) of an array the loop body loads from at the loop counter's tile index
    along that axis (A's K axis in a matmul), for a launch to tell how long the loop runs."""
    params = {p.id: i for i, p in enumerate(fn.params)}
    counter = loop.body.args[0]
    for op in loop.body.ops:
        if isinstance(op, ops.Load) and op.array.id in params and op.shape:
            axes = [k for k, v in enumerate(op.index) if v is counter]
            if axes:
                return params[op.array.id], op.order[axes[0]]
    return None


# ---- recognition -----------------------------------------------------------------------------------
def k_loop(fn: Function) -> tuple[list[Op], ops.For, list[Op]] | None:
    """(prologue, K loop, epilogue) of a kernel that qualifies, else None."""
    top = fn.body.ops
    loops = [i for i, op in enumerate(top) if isinstance(op, ops.For)]
    if len(loops) != 1:
        return None
    prologue, loop, epilogue = top[:loops[0]], top[loops[0]], top[loops[0] + 1:]
    if any(has_effects(op) for op in prologue) or not _grid_axis_0_only(fn):
        return None
    if len(loop.init) != 1 or not isinstance(loop.init[0].type, TileType):
        return None
    acc = loop.init[0].tile
    if acc.dtype not in ACCUMULATORS or acc.ndim < 2:
        return None
    defs = {r.id: op for op in prologue for r in op.results}
    zero = splat_constant(defs.get(loop.init[0].id), defs)
    if zero is None or zero.value != 0:
        return None
    if any(has_effects(op) for op in loop.body.ops[:-1]) or not _mma_chain(loop.body):
        return None
    return prologue, loop, epilogue


def _grid_axis_0_only(fn: Function) -> bool:
    """Whether `fn` queries no grid axis but 0 and controls no grid dependency."""
    for op in fn.walk():
        if isinstance(op, (ops.Bid, ops.NumBlocks)) and op.axis != 0:
            return False
        if isinstance(op, ops.GridDependencyControl):
            return False
    return True


def _uses(block: Block, counts: Counter) -> Counter:
    """How many times each value id is an operand in `block` (regions included)."""
    for op in block.ops:
        counts.update(v.id for v in op.operands)
        for blk in op.blocks:
            _uses(blk, counts)
    return counts


def _mma_chain(body: Block) -> bool:
    """Whether the loop's carried value only flows through a chain of Mma accumulators, from the
    block argument to the yielded value, each link used exactly once."""
    defs = {r.id: op for op in body.ops for r in op.results}
    uses = _uses(body, Counter())
    carried = body.args[1]
    link = body.terminator.values[0]
    mmas = 0
    while link is not carried:
        op = defs.get(link.id)
        if not isinstance(op, ops.Mma) or uses[link.id] != 1:
            return False
        link, mmas = op.acc, mmas + 1
    return mmas > 0 and uses[carried.id] == 1


def sliceable(prologue: list[Op], loop: ops.For, epilogue: list[Op]) -> bool:
    """Whether the epilogue runs on row slices of the accumulator unchanged: besides ops without
    effects that do not read it, it has `_ELEMENTWISE` ops on values derived from the loop's
    result (each other operand a broadcast of one row, `_row_broadcast`), then one tile store
    (identity order, of rank the accumulator's) of such a value at an index derived from neither."""
    defs = {r.id: op for op in (*prologue, *epilogue) for r in op.results}
    derived = {loop.results[0].id}
    stores = 0
    for op in epilogue:
        reads = [v.id in derived for v in op.operands]
        if isinstance(op, ops.Store):
            stores += 1
            if (op.tile.id not in derived or any(v.id in derived for v in op.index) or op.array.id in derived
                    or op.order != tuple(range(op.tile.tile.ndim)) or len(op.index) != op.tile.tile.ndim):
                return False
        elif not any(reads):
            if has_effects(op):
                return False
        elif isinstance(op, _ELEMENTWISE) and all(d or _row_broadcast(defs.get(v.id)) is not None
                                                    for v, d in zip(op.operands, reads)):
            derived.add(op.result.id)
        else:
            return False
    return stores == 1


def _row_broadcast(op: Op | None) -> ops.Broadcast | None:
    """`op` if it broadcasts a tile of one row (axis 0 of size 1) up, else None."""
    return op if isinstance(op, ops.Broadcast) and op.x.tile.shape[0] == 1 else None


# ---- building --------------------------------------------------------------------------------------
def _copy_block(block: Block) -> Block:
    """`block` with fresh op lists (its ops are immutable and shared; its lists are not)."""
    return Block(list(block.args), [_copy_op(op) for op in block.ops])


def _copy_op(op: Op) -> Op:
    if not op.blocks:
        return op
    return dataclasses.replace(op, **{name: _copy_block(getattr(op, name)) for name in type(op)._block_fields})


def _start(fn: Function, loop: ops.For) -> tuple[Builder, Value, Value, Block]:
    """A builder past `fn`'s ids, the S and W parameters, and a body holding a copy of the prologue."""
    b = Builder(first_id=fn.max_id() + 1)
    b.loc = loop.loc
    acc = loop.init[0].tile
    splits = b.new_value(scalar(dt.int32), "splits")
    work = b.new_value(ArrayType(acc.dtype, acc.ndim), "workspace")
    return b, splits, work, Block()


def _function(fn: Function, suffix: str, splits: Value, work: Value, body: Block) -> Function:
    return Function(f"{fn.name}_{suffix}", [*fn.params, splits, work], [*fn.param_names, "splits", "workspace"],
                    body, fn.loc, dict(fn.options))


def _binary(b: Builder, fn: BinaryFn, x: Value, y: Value) -> Value:
    return b.value(ops.Binary, fn=fn, lhs=x, rhs=y)


def _grid_row(b: Builder) -> tuple[Value, Value]:
    """(G, bid(0)): what a workspace tile's coordinate is made of besides the split."""
    return b.value(ops.NumBlocks, axis=0), b.value(ops.Bid, axis=0)


def _workspace_index(b: Builder, work: Value, split: Value, grid_row: tuple[Value, Value]) -> tuple[Value, ...]:
    """The tile coordinate (split * G + bid(0), 0, ...) of this block's tile of split `split`."""
    blocks, bid = grid_row
    row = _binary(b, BinaryFn.ADD, _binary(b, BinaryFn.MUL, split, blocks), bid)
    zero = b.value(ops.Const, value=0, dtype=dt.int32)
    return (row, *[zero] * (work.type.ndim - 1))


def trip_count(b: Builder, loop: ops.For) -> tuple[Value, Value]:
    """(step, trips) of `loop` in its index dtype: its step made at least 1, and cdiv(upper -
    lower, step) at least 0 (for a step <= 0 that counts as 1; callers keep the loop's own step
    and upper bound, under which such a loop still runs nothing)."""
    t = loop.lower.tile.dtype
    one, zero = (b.value(ops.Const, value=v, dtype=t) for v in (1, 0))
    step = _binary(b, BinaryFn.MAX, loop.step, one)
    span = _binary(b, BinaryFn.ADD, _binary(b, BinaryFn.SUB, loop.upper, loop.lower),
                   _binary(b, BinaryFn.SUB, step, one))
    return step, _binary(b, BinaryFn.MAX, _binary(b, BinaryFn.FLOORDIV, span, step), zero)


def _chunk(b: Builder, loop: ops.For, splits: Value) -> tuple[Value, Value]:
    """(lower, upper) of split bid(1)'s iterations of `loop`: chunk = cdiv(trips, S) iterations
    from iteration bid(1) * chunk, at most to the loop's end (bounds kept visibly non-negative
    where the loop's are, for `ranges.nonnegative`; a step <= 0 still runs nothing)."""
    t = loop.lower.tile.dtype

    def const(v: int) -> Value:
        return b.value(ops.Const, value=v, dtype=t)

    def widen(v: Value) -> Value:
        return v if t is dt.int32 else b.value(ops.Cast, x=v, dtype=t)

    one = const(1)
    step, trips = trip_count(b, loop)
    count = _binary(b, BinaryFn.MAX, widen(splits), one)
    chunk = _binary(b, BinaryFn.FLOORDIV, _binary(b, BinaryFn.SUB, _binary(b, BinaryFn.ADD, trips, count), one), count)
    width = _binary(b, BinaryFn.MUL, chunk, step)
    lower = _binary(b, BinaryFn.ADD, loop.lower, _binary(b, BinaryFn.MUL, widen(b.value(ops.Bid, axis=1)), width))
    return lower, _binary(b, BinaryFn.MIN, _binary(b, BinaryFn.ADD, lower, width), loop.upper)


def _partial(fn: Function, prologue: list[Op], loop: ops.For) -> Function:
    b, splits, work, body = _start(fn, loop)
    with b.inside(body):
        body.ops.extend(_copy_op(op) for op in prologue)
        lower, upper = _chunk(b, loop, splits)
        part = b.value(ops.For, lower=lower, upper=upper, step=loop.step, init=loop.init, body=_copy_block(loop.body))
        index = _workspace_index(b, work, b.value(ops.Bid, axis=1), _grid_row(b))
        b.emit(ops.Store, array=work, index=index, tile=part, order=tuple(range(work.type.ndim)))
        b.emit(ops.GridDependencyControl, action=GridDependency.LAUNCH_DEPENDENTS)
    return _function(fn, "partial", splits, work, body)


def _finish(fn: Function, prologue: list[Op], loop: ops.For, epilogue: list[Op], slices: int) -> Function:
    """FINISH: the sum of the S partial tiles (row slice bid(1) of them when `slices` > 1, the
    epilogue then rebuilt on that slice by `sliced_epilogue`)."""
    b, splits, work, body = _start(fn, loop)
    acc = loop.init[0].tile
    part = TileType(acc.dtype, (acc.shape[0] // slices, *acc.shape[1:]))
    with b.inside(body):
        body.ops.extend(_copy_op(op) for op in prologue)
        b.emit(ops.GridDependencyControl, action=GridDependency.WAIT)
        zero, one = (b.value(ops.Const, value=v, dtype=dt.int32) for v in (0, 1))
        grid_row = _grid_row(b)
        row = b.value(ops.Bid, axis=1) if slices > 1 else None
        init = loop.init if row is None else (_zero_tile(b, prologue, loop, part),)
        step = Block([b.new_value(scalar(dt.int32), "s"), b.new_value(part, "acc")])
        with b.inside(step):
            index = _workspace_index(b, work, step.args[0], grid_row)
            if row is not None:
                index = slice_index(b, index, slices, row)
            tile = b.value(ops.Load, array=work, index=index, shape=part.shape, order=tuple(range(acc.ndim)),
                           latency=FINISH_LATENCY)
            b.emit(ops.Yield, values=(_binary(b, BinaryFn.ADD, step.args[1], tile),))
        total = b.make(ops.For, lower=zero, upper=splits, step=one, init=init, body=step)
        if row is None:
            body.ops.append(dataclasses.replace(total, results=loop.results))  # the epilogue reads these
            body.ops.extend(_copy_op(op) for op in epilogue)
        else:
            body.ops.append(total)
            sliced_epilogue(b, prologue, epilogue, {loop.results[0].id: total.result}, slices, row)
    return eliminate_dead_code(_function(fn, "finish", splits, work, body))  # the K loop's bounds, wide broadcasts


def _zero_tile(b: Builder, prologue: list[Op], loop: ops.For, tile: TileType) -> Value:
    """A tile of type `tile` filled with the accumulator's starting value (a zero, maybe -0.0)."""
    defs = {r.id: op for op in prologue for r in op.results}
    start = splat_constant(defs.get(loop.init[0].id), defs)
    value = b.value(ops.Const, value=start.value, dtype=tile.dtype)
    return b.value(ops.Broadcast, x=b.value(ops.Reshape, x=value, shape=(1,) * tile.ndim), shape=tile.shape)


def slice_index(b: Builder, index: tuple[Value, ...], slices: int, row: Value) -> tuple[Value, ...]:
    """`index` of a tile as the index of its row slice `row` of `slices` (same array: the index's
    first coordinate in units of the slice's rows)."""
    t = index[0].tile.dtype
    first = row if t is dt.int32 else b.value(ops.Cast, x=row, dtype=t)
    scaled = _binary(b, BinaryFn.MUL, index[0], b.value(ops.Const, value=slices, dtype=t))
    return (_binary(b, BinaryFn.ADD, scaled, first), *index[1:])


def sliced_epilogue(b: Builder, prologue: list[Op], epilogue: list[Op], sliced: dict[int, Value], slices: int,
                     row: Value) -> None:
    """The epilogue (`sliceable`) on row slice `row`: ops reading the sliced values (`sliced`:
    original value id -> its slice) rebuilt on slices, with their row broadcasts made anew to the
    slice's shape and the store's index scaled (`slice_index`); the other ops copied."""
    defs = {r.id: op for op in prologue for r in op.results}
    for op in epilogue:
        defs.update((r.id, op) for r in op.results)
        if not any(v.id in sliced for v in op.operands):
            b.block.ops.append(_copy_op(op))
            continue
        b.loc = op.loc

        def on_slice(v: Value) -> Value:
            if v.id in sliced:
                return sliced[v.id]
            wide = _row_broadcast(defs.get(v.id))
            if wide is None:
                return v
            return b.value(ops.Broadcast, x=wide.x, shape=(v.tile.shape[0] // slices, *v.tile.shape[1:]))
        fields = copied_fields(op, on_slice, lambda block: block)
        if isinstance(op, ops.Store):
            fields["index"] = slice_index(b, op.index, slices, row)
        new = b.emit(type(op), **fields)
        sliced.update((r.id, n) for r, n in zip(op.results, new.results))
