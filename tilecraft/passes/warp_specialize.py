"""Streamed loops: the kernels a warp-specialized schedule can run (backends/gluon).

A flash-attention forward, as cuTile users write it, is a kernel whose one loop streams tiles
of K and V through two MMAs while the rest of the loop (the online softmax) works on registers.
On Hopper the fastest such kernels give the loads to a producer warp, which keeps a ring of
shared-memory slots filled through TMA, and let the other warps compute; they also issue the
loop's last MMA one iteration late, so that it runs on the tensor cores while the next
iteration's softmax runs on the CUDA cores. `streamed_loop` finds the kernels whose structure
allows that schedule and says which loads go where; it does not change the kernel.

A kernel qualifies when:
- its top level is pure ops and tile loads (the prologue), one For, then pure ops and tile
  stores (the epilogue); nothing anywhere writes memory but those stores (no atomics, prints,
  asserts), and the loop's body has no loops;
- every tile load in the loop body is *streamed*: its array is a kernel parameter, its index
  is the loop's induction variable in one position and loop-invariant values elsewhere, its
  tile is 2-D after leading unit dims (order: identity, or the last two axes swapped), its
  dtype 16-bit float, or float32 read as tfloat32 (a Bitcast: operand staging's copies, which
  hold tfloat32 values already), and its value reaches nothing but one Mma's A or B operand
  (through reshapes that drop unit dims, and that Bitcast);
- every tile load of the prologue is *resident*: the same, except that its index is
  loop-invariant and its value reaches only Mma A operands in the loop body;
- every Mma in the body multiplies 16-bit floats (K a multiple of 16) or, all of them, tfloat32
  (K a multiple of 8) into float32, with M 64 or 128, N a multiple of 16 up to 256; its A
  operand is resident, streamed or computed in registers, its B operand streamed;
- every store of the epilogue has identity order and a tile 2-D after leading unit dims, and
  every tile the loop carries has M rows.

Whether each of those loads and stores can go through a tensor descriptor (padding, memory
order, the hardware's box limits, the array's layout) is the backend's question: the Triton
backend asks its own descriptor rule before it gives a kernel the Gluon variant.

`deferred` is the Mma issued one iteration late: the body's last Mma when its result is only
yielded (as carried value `deferred_slot`), its accumulator derives from that carried value
through element-wise ops only (`rescale`, in order), nothing else in the body reads the
carried value, those ops or the Mma, and exactly one other Mma comes before it and before every
rescale op (the schedule waits for the previous iteration's deferred Mma only once it has issued
the first Mma: a rescale op ahead of it would read the carried value of the iteration before).

`chained` (a matmul's K loop): the body's one Mma accumulates into the carried value it is
yielded as (acc = mma(a, b, acc)), so the schedule may keep it in flight while the next
iteration's MMA is issued, releasing each iteration's slots one iteration late.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from ..ir import BinaryFn, Block, Builder, Function, Op, TileType, Value, ops, scalar
from ..language import dtypes as dt
from .dce import has_effects
from .stream_k import grid_read_as

_ELEMENTWISE = (ops.Cast, ops.Unary, ops.Binary, ops.Compare, ops.Where, ops.Fma, ops.Broadcast, ops.Reshape)
_MMA_DTYPES = (dt.float16, dt.bfloat16)


@dataclass(frozen=True)
class Streamed:
    """A tile load the producer streams (or, `resident`, the consumer loads once): its 2-D tile
    is `rows` x `cols` in the array's own axis order, `transposed` when the kernel reads it
    the other way round (order swaps the last two axes)."""

    load: ops.Load
    rows: int
    cols: int
    transposed: bool
    views: tuple[Value, ...]  # the load's result and the reshapes of it (all stand for the tile)


@dataclass(frozen=True)
class StreamedLoop:
    """What `streamed_loop` found (see the module docstring)."""

    prologue: list[Op]
    loop: ops.For
    epilogue: list[Op]
    streamed: tuple[Streamed, ...]
    resident: tuple[Streamed, ...]
    mmas: tuple[ops.Mma, ...]
    rows: int  # M: the rows of every MMA and carried tile
    deferred: ops.Mma | None
    deferred_slot: int | None
    rescale: tuple[Op, ...]
    chained: bool = False

    def tile_of(self, value: Value) -> Streamed | None:
        """The streamed or resident load `value` stands for, if any."""
        for s in (*self.streamed, *self.resident):
            if any(v is value for v in s.views):
                return s
        return None


def streamed_loop(fn: Function) -> StreamedLoop | None:
    """The kernel's streamed loop (see the module docstring), or None when it does not qualify."""
    top = fn.body.ops
    loops = [i for i, op in enumerate(top) if isinstance(op, (ops.For, ops.While))]
    if len(loops) != 1 or not isinstance(top[loops[0]], ops.For):
        return None
    prologue, loop, epilogue = top[:loops[0]], top[loops[0]], top[loops[0] + 1:]
    if any(has_effects(op) and not isinstance(op, ops.Store) for op in epilogue) or any(
            has_effects(op) for op in prologue):
        return None
    if any(op.blocks or isinstance(op, ops.Mma) for op in (*prologue, *epilogue)):
        return None
    body = loop.body
    if any(isinstance(op, (ops.For, ops.While)) or (has_effects(op) and not _terminator(op)) for op in body.ops):
        return None
    params = {p.id for p in fn.params}
    users = _users(fn.body)
    invariant = _defined(prologue) | params
    for op in body.ops:  # constants and other loop-invariant math in the body
        if not op.blocks and not has_effects(op) and not isinstance(op, (ops.Load, ops.Mma)) and all(
                v.id in invariant for v in op.operands):
            invariant |= {r.id for r in op.results}
    iv = body.args[0]
    streamed = _loads(body.ops, users, params, invariant, iv)
    resident = _loads(prologue, users, params, invariant, None)
    if streamed is None or resident is None or not streamed:
        return None
    mmas = tuple(op for op in body.ops if isinstance(op, ops.Mma))
    rows = _check_mmas(mmas, streamed, resident)
    if rows is None or not _epilogue_ok(epilogue, rows):
        return None
    if any(not isinstance(a.type, TileType) or a.tile.ndim != 2 or a.tile.shape[0] != rows for a in body.args[1:]):
        return None
    if any(_nested_memory(op) for op in body.ops):
        return None
    found = StreamedLoop(prologue, loop, epilogue, tuple(streamed), tuple(resident), mmas, rows, None, None, ())
    deferred = _deferred(found, users)
    if deferred is None:
        return dataclasses.replace(found, chained=_chained(found, users))
    mma, slot, rescale = deferred
    return StreamedLoop(prologue, loop, epilogue, tuple(streamed), tuple(resident), mmas, rows, mma, slot, rescale)


def pair_blocks(fn: Function) -> Function:
    """`fn` running two blocks of grid axis 0 per program, side by side: piece s (a new last int32
    parameter `piece`) of program p runs the user's block 2p + s, and `num_blocks(0)` reads the
    user's grid, twice the launch's (for launches whose grid axis 0 is even). The schedule gives
    each piece a compute partition, where both stream the same tiles (backends/gluon/lower.py)."""
    b = Builder(first_id=fn.max_id() + 1)
    b.loc = fn.loc
    piece = b.new_value(scalar(dt.int32), "piece")
    body = Block()
    with b.inside(body):
        two = b.value(ops.Const, value=2, dtype=dt.int32)
        zero = b.value(ops.Const, value=0, dtype=dt.int32)
        first = b.value(ops.Binary, fn=BinaryFn.MUL, lhs=b.value(ops.Bid, axis=0), rhs=two)
        user = b.value(ops.Binary, fn=BinaryFn.ADD, lhs=first, rhs=piece)
        blocks = b.value(ops.Binary, fn=BinaryFn.MUL, lhs=b.value(ops.NumBlocks, axis=0), rhs=two)
    body.ops += [grid_read_as(op, {ops.Bid: user, ops.NumBlocks: blocks}, zero) for op in fn.body.ops]
    return Function(f"{fn.name}_pairs", [*fn.params, piece], [*fn.param_names, "piece"], body, fn.loc,
                    dict(fn.options))


def _terminator(op: Op) -> bool:
    return type(op).terminator


def _defined(block_ops: list[Op]) -> set[int]:
    return {r.id for op in block_ops for r in op.results}


def _users(block: Block, acc: dict[int, list[Op]] | None = None) -> dict[int, list[Op]]:
    """Value id -> the ops reading it (regions included)."""
    acc = {} if acc is None else acc
    for op in block.ops:
        for v in op.operands:
            acc.setdefault(v.id, []).append(op)
        for blk in op.blocks:
            _users(blk, acc)
    return acc


def _nested_memory(op: Op) -> bool:
    """Whether a region of `op` holds a load, store or Mma (an If's branches must be pure math)."""
    return any(isinstance(o, (ops.Load, ops.Mma, ops.Store)) or _nested_memory(o) for blk in op.blocks for o in blk.ops)


def _loads(block_ops: list[Op], users: dict[int, list[Op]], params: set[int], invariant: set[int],
           iv: Value | None) -> list[Streamed] | None:
    """The block's tile loads as streamed (iv given) or resident ones, or None if one of them
    is neither."""
    out = []
    for op in block_ops:
        if not isinstance(op, ops.Load):
            continue
        found = _streamed(op, users, params, invariant, iv)
        if found is None:
            return None
        out.append(found)
    return out


def _streamed(load: ops.Load, users: dict[int, list[Op]], params: set[int], invariant: set[int],
              iv: Value | None) -> Streamed | None:
    shape, order = load.shape, load.order
    n = len(shape)
    if load.array.id not in params or n < 2 or any(d != 1 for d in shape[:-2]):
        return None
    if order[:-2] != tuple(range(n - 2)) or sorted(order[-2:]) != [n - 2, n - 1]:
        return None
    if load.array.type.dtype not in (*_MMA_DTYPES, dt.float32):
        return None
    at_iv = [i for i, v in enumerate(load.index) if v is iv]
    others_invariant = all(v.id in invariant for v in load.index if v is not iv)
    if not others_invariant or (iv is not None and len(at_iv) != 1):
        return None
    transposed = order[-1] != n - 1
    rows, cols = (shape[-1], shape[-2]) if transposed else (shape[-2], shape[-1])
    views = [load.result]
    frontier = [load.result]
    while frontier:
        v = frontier.pop()
        for user in users.get(v.id, []):
            drops_unit_dims = (isinstance(user, ops.Reshape) and user.shape[-2:] == shape[-2:]
                               and all(d == 1 for d in user.shape[:-2]))
            as_tf32 = isinstance(user, ops.Bitcast) and user.dtype is dt.tfloat32 and v.tile.dtype is dt.float32
            if drops_unit_dims or as_tf32:
                views.append(user.result)
                frontier.append(user.result)
            elif not isinstance(user, ops.Mma) or user.acc is v or (iv is None and user.b is v):
                return None
    return Streamed(load, rows, cols, transposed, tuple(views))


def _check_mmas(mmas: tuple[ops.Mma, ...], streamed: list[Streamed], resident: list[Streamed]) -> int | None:
    """M of the body's MMAs when each qualifies (see the module docstring), else None."""
    if not mmas:
        return None
    views = {v.id: s for s in (*streamed, *resident) for v in s.views}
    uses = Counter(id(views[m.b.id]) for m in mmas if m.b.id in views)
    rows = set()
    for m in mmas:
        a, b, c = m.a.tile, m.b.tile, m.acc.tile
        if a.dtype not in (*_MMA_DTYPES, dt.tfloat32) or b.dtype is not a.dtype or c.dtype is not dt.float32 \
                or m.use_fast_acc:
            return None
        if a.ndim != 2 or b.ndim != 2:
            return None
        (mm, k), (_, nn) = a.shape, b.shape
        if mm not in (64, 128) or k % (8 if a.dtype is dt.tfloat32 else 16) or nn % 16 or nn > 256:
            return None
        bs = views.get(m.b.id)
        if bs is None or bs in resident or uses[id(bs)] != 1:
            return None
        rows.add(mm)
    tf32 = {m.a.tile.dtype is dt.tfloat32 for m in mmas}  # one wgmma K per kernel (Schedule.instr_k)
    return rows.pop() if len(rows) == 1 and len(tf32) == 1 else None


def _epilogue_ok(epilogue: list[Op], rows: int) -> bool:
    for op in epilogue:
        if isinstance(op, ops.Store):
            t = op.tile.tile
            if op.order != tuple(range(t.ndim)) or t.ndim < 2 or any(d != 1 for d in t.shape[:-2]):
                return False
            if t.shape[-2] != rows or t.dtype not in (*_MMA_DTYPES, dt.float32):
                return False
        elif isinstance(op, ops.Load):
            return False
    return True


def _chained(found: StreamedLoop, users: dict[int, list[Op]]) -> bool:
    """Whether the body's only Mma accumulates into the carried value it is yielded as, which
    nothing else reads (see the module docstring)."""
    if len(found.mmas) != 1:
        return False
    mma = found.mmas[0]
    body = found.loop.body
    slots = [i for i, v in enumerate(body.terminator.values) if v is mma.result]
    if len(slots) != 1 or len(users.get(mma.result.id, [])) != 1:
        return False
    carried = body.args[1 + slots[0]]
    return mma.acc is carried and users.get(carried.id, []) == [mma]


def _deferred(found: StreamedLoop, users: dict[int, list[Op]]) -> tuple[ops.Mma, int, tuple[Op, ...]] | None:
    """(the Mma to issue one iteration late, its carried slot, the ops rescaling the carried
    value into its accumulator), or None (see the module docstring)."""
    body = found.loop.body
    if len(found.mmas) != 2:
        return None
    mma = found.mmas[1]
    yielded = body.terminator.values
    slots = [i for i, v in enumerate(yielded) if v is mma.result]
    if len(slots) != 1 or len(users.get(mma.result.id, [])) != 1:
        return None
    slot = slots[0]
    carried = body.args[1 + slot]
    # the ops reached from the carried value before the Mma: element-wise, in body order
    reached = {carried.id}
    rescale = []
    for op in body.ops:
        if op is mma or not any(v.id in reached for v in op.operands):
            continue
        if not isinstance(op, _ELEMENTWISE):
            return None
        reached.add(op.result.id)
        rescale.append(op)
    if mma.acc.id not in reached or mma.a.id in reached:
        return None
    # nothing but the Mma (and the rescale chain itself) reads those values
    chain = set(rescale)
    for v in reached:
        if any(u is not mma and u not in chain for u in users.get(v, [])):
            return None
    first = body.ops.index(found.mmas[0])
    if first > body.ops.index(mma) or any(body.ops.index(op) < first for op in rescale):
        return None
    return mma, slot, tuple(rescale)
