"""Tile splitting: one block's output tile computed by S blocks, each a 1/S piece of it.

A matmul whose grid leaves most SMs idle (512^3 with the sample's 128x256 tiles: 8 blocks on
the H200's 132 SMs) runs as fast as one SM walks the K loop of a whole tile. When every value
of the kernel that has an output tile's axes keeps them element for element (loads, element-wise
ops, broadcasts of rows or columns and reshapes that add or drop dims of 1, the M and N of an
MMA, loop-carried accumulators, stores), the tile can be cut along those axes without changing
what any element computes: block b * S + s of the split kernel runs the user's block b on piece
s. The loads of a piece read the rows (columns) of A (B) it needs, and each element sums the
same products in the same K order.

`tile_splits(fn)` recognizes such a kernel (`TileSplits`, or None) and `TileSplits.split(count)`
builds its variant for a split count: the store tile's larger axis is halved first
(`split_factors`), the grid's axis 0 grows `count` times, `bid(0)` and `num_blocks(0)` read as the
user's, and every load and store on a split axis at index i reads piece i * f + s of tiles 1/f
the size, f the axis's factor. Nothing else changes, so the result equals the unsplit kernel's
up to the order a smaller MMA instruction sums within one K step (and padding, masking and
out-of-bounds behave as before: a piece is a tile of the same array).

Kernels that qualify: one or more tile stores of one rank-2 shape, at least one MMA whose result
reaches them, and no other effects (no atomics, scatters, prints or asserts, no ordered loads
or stores: the user's block runs S times); no While. Every value on an output axis must keep it
(a reduction, other reshape, permute, extract or arange across it declines the kernel), and a
value must not be needed both whole and split. The S blocks of one user block run in no order,
where the user's block kept its own loads and stores of an array in program order: a stored
array may be read only by loads of its own tiles split like the stores (C = A @ B + C), and only
through the one array value stored to (a view or list element made outside loops:
`_check_stored_arrays`). A piece of a tile that straddles an array's end may lie wholly past it:
`TileSplits.cuts` tells a backend which accesses' extents changed (backends/tile_splitting.py
`piece_facts`).

`row_split(fn, pieces)` cuts the rows only, the piece a new parameter instead of part of the
grid, for a backend that runs a block's pieces side by side in one program (backends/gluon);
cutting only the rows lets it take more kernels (row-wise reductions, aranges, Ifs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import BinaryFn, Block, Builder, Function, Op, TileType, Value, ops
from ..ir.builder import copied_fields
from ..ir.types import IRType
from ..language import dtypes as dt
from .dce import eliminate_dead_code

Labels = tuple[int | None, ...]
"""Per dim of a tile value: the output axis (of the store tiles) it runs along, or None."""

MIN_SPLIT_DIM = 16
"""The smallest piece along a split axis (an MMA's M and N on every target)."""

_SAME_SHAPE = (ops.Cast, ops.Unary, ops.Binary, ops.Compare, ops.Where, ops.Fma)
"""Ops whose operands all have the result's shape, element by element."""


class _Declined(Exception):
    """The kernel does not qualify (see the module docstring)."""


@dataclass(frozen=True)
class TileSplits:
    """A kernel that qualifies, with the output axis of every value on one (`labels`)."""

    fn: Function
    shape: tuple[int, ...]
    labels: dict[int, Labels]

    def cuts(self, count: int) -> list[tuple[int, int, int, int]]:
        """(array value id, array axis, the user's tile extent, the piece's) for every load and
        store axis that the split in `count` cuts (a backend may have assumed the user's extent
        when it decided which accesses need bounds checks: a piece of a tile that straddles the
        array's end can lie wholly outside it)."""
        factors = split_factors(self.shape, count)
        if factors is None:
            return []
        return [(op.array.id, op.order[k], tile.tile.shape[k], tile.tile.shape[k] // factors[a])
                for op, tile, k, a in _cut_axes(self.fn, self.labels, factors)]

    def counts(self, min_dim: int = MIN_SPLIT_DIM) -> list[int]:
        """The split counts of its output tiles (`piece_counts`)."""
        return piece_counts(self.shape, min_dim)

    def split(self, count: int) -> Function:
        """The kernel with each output tile split `count` ways (see the module docstring)."""
        factors = split_factors(self.shape, count)
        if factors is None:
            raise ValueError(f"cannot split a {self.shape} tile {count} ways")
        return Rebuild(self.fn, self.labels, factors).function(count)


def piece_counts(shape: tuple[int, ...], min_dim: int = MIN_SPLIT_DIM) -> list[int]:
    """The split counts of a tile of `shape` whose pieces are at least `min_dim` long on every
    axis (the axes a split leaves whole too: a tile already thinner than `min_dim` is not split
    at all)."""
    found, count = [], 2
    while (factors := split_factors(shape, count)) and all(d // f >= min_dim for d, f in zip(shape, factors)):
        found.append(count)
        count *= 2
    return found


def split_factors(shape: tuple[int, ...], count: int) -> tuple[int, ...] | None:
    """Per axis of an output tile of `shape`, how many pieces a split in `count` cuts it into:
    the longer piece side halved each time (axis 0 first on a tie); None if a side would go
    below 1 or `count` is not a power of two."""
    if count < 1 or count & (count - 1):
        return None
    factors = [1] * len(shape)
    while math.prod(factors) < count:
        sides = [d // f for d, f in zip(shape, factors)]
        axis = sides.index(max(sides))
        if sides[axis] < 2:
            return None
        factors[axis] *= 2
    return tuple(factors)


def _cut_axes(fn: Function, labels: dict[int, Labels],
              factors: tuple[int, ...]) -> list[tuple[ops.Load | ops.Store, Value, int, int]]:
    """(load or store, its tile, dim k, output axis) for every access axis on an output axis
    that `factors` cuts: k is the tile's dim and the position of the index value, in the order of
    the access's view of its array (array axis `op.order[k]`)."""
    found = []
    for op in fn.walk():
        tile = op.result if isinstance(op, ops.Load) else op.tile if isinstance(op, ops.Store) else None
        lab = None if tile is None else labels.get(tile.id)
        if lab is not None:
            found += [(op, tile, k, a) for k, a in enumerate(lab) if a is not None and factors[a] > 1]
    return found


def tile_splits(fn: Function) -> TileSplits | None:
    """The kernel's `TileSplits` when it qualifies (module docstring), else None."""
    try:
        stores = _stores(fn)
        shape = stores[0].tile.tile.shape
        labels = _propagate(fn, {s.tile.id: tuple(range(len(shape))) for s in stores})
        _check(fn, labels)
        _check_stored_arrays(fn, stores, labels)
    except _Declined:
        return None
    if not any(isinstance(op, ops.Mma) and op.result.id in labels for op in fn.walk()):
        return None
    return TileSplits(fn, shape, labels)


def row_split(fn: Function, pieces: int) -> Function | None:
    """`fn` with the rows of its output tiles cut into `pieces` (a power of two), the piece given
    by a new last int32 parameter `piece` instead of the grid: for a backend that runs the pieces
    of one block side by side in one program (backends/gluon: one warpgroup each). The kernel
    qualifies as for `tile_splits`, with these also allowed since only the rows are cut: stores
    of rank 2 or more whose dims before the last two are 1 (the rows: the next to last), an
    If carrying split values, reductions along other axes and aranges along the rows (a piece's
    arange starts at its first row). None when the kernel does not qualify or a piece would have
    fewer than MIN_SPLIT_DIM rows."""
    try:
        stores = _stores(fn, rows_only=True)
        shape = stores[0].tile.tile.shape
        rows = len(shape) - 2
        # only the rows are labelled: a value may then be reduced along its columns and also used
        # element by element on the way to a store (a softmax's p / sum(p))
        stored = tuple(rows if a == rows else None for a in range(len(shape)))
        labels = _propagate(fn, {s.tile.id: stored for s in stores}, rows_only=True)
        _check(fn, labels, rows_only=True)
        _check_stored_arrays(fn, stores, labels, stored)
    except _Declined:
        return None
    if pieces < 1 or pieces & (pieces - 1) or shape[rows] // pieces < MIN_SPLIT_DIM:
        return None
    factors = tuple(pieces if a == rows else 1 for a in range(len(shape)))
    return Rebuild(fn, labels, factors).function_by_parameter(pieces)


# ---- recognition -----------------------------------------------------------------------------------
def _stores(fn: Function, rows_only: bool = False) -> list[ops.Store]:
    """The kernel's stores, when they are its only effects, every load and store is weak (no
    memory ordering), and the stores store tiles of one rank-2 shape in array order (`rows_only`:
    of one shape of rank 2 or more, 1 in every dim before the last two)."""
    stores = []
    for op in fn.walk():
        if isinstance(op, (ops.Load, ops.Store)) and op.memory_order is not ops.MemoryOrder.WEAK:
            raise _Declined
        if isinstance(op, ops.Store):
            stores.append(op)
        elif type(op).effects and not isinstance(op, ops.Yield):
            raise _Declined  # atomics, scatters, prints, asserts, while loops, grid dependencies
    shapes = {s.tile.tile.shape for s in stores}
    if len(shapes) != 1:
        raise _Declined
    shape = next(iter(shapes))
    if len(shape) != 2 and not (rows_only and len(shape) > 2 and all(d == 1 for d in shape[:-2])):
        raise _Declined
    if any(s.order != tuple(range(len(shape))) for s in stores):
        raise _Declined
    return stores


def _split(labels: Labels) -> bool:
    """Whether a value with these labels is on an output axis at all."""
    return any(a is not None for a in labels)


def _operand_labels(op: Op, result: Labels | None, rows_only: bool = False) -> list[tuple[Value, Labels]]:
    """The labels `op`'s tile operands must have for its result to have `result` (None: the
    result is on no output axis); _Declined where `op` cannot carry an output axis (`rows_only`:
    row_split's extra ops)."""
    if result is None or not _split(result):
        return []
    if rows_only and isinstance(op, ops.Arange):
        return []
    if rows_only and isinstance(op, ops.Reduce):
        lab = list(result)
        if op.keepdims:
            lab[op.axis] = None
        else:
            lab.insert(op.axis, None)
        return [(op.x, tuple(lab))]
    if isinstance(op, ops.Load):  # any order: its index and tile dims are the permuted view's
        return []
    if isinstance(op, ops.Bitcast) and op.x.tile.shape == op.result.tile.shape:
        return [(op.x, result)]
    if isinstance(op, _SAME_SHAPE):
        return [(v, result) for v in op.operands]
    if isinstance(op, ops.Broadcast):
        return [(op.x, tuple(r if s == d else None for r, s, d in zip(result, op.x.tile.shape, op.shape)))]
    if isinstance(op, ops.Reshape):  # only dims of 1 added or dropped: the others keep their labels
        kept = [(d, a) for d, a in zip(op.shape, result) if d != 1]
        if [d for d in op.x.tile.shape if d != 1] != [d for d, _ in kept]:
            raise _Declined
        axes = iter(a for _, a in kept)
        return [(op.x, tuple(None if d == 1 else next(axes) for d in op.x.tile.shape))]
    if isinstance(op, ops.Mma):
        batch = result[:-2]
        return [(op.a, (*batch, result[-2], None)), (op.b, (*batch, None, result[-1])), (op.acc, result)]
    raise _Declined  # other reshapes, permute, extract, reductions, if results...


def _carried(op: ops.For | ops.If) -> list[tuple[Value, ...]]:
    """The values that must be split alike: per value a loop carries, its result, body argument,
    yielded value and start; per result of an If, it and what each branch yields."""
    if isinstance(op, ops.If):
        return [(res, op.then.terminator.values[i], op.orelse.terminator.values[i])
                for i, res in enumerate(op.results)]
    return [(res, op.body.args[i + 1], op.body.terminator.values[i], op.init[i])
            for i, res in enumerate(op.results)]


def _propagate(fn: Function, labels: dict[int, Labels], rows_only: bool = False) -> dict[int, Labels]:
    """Labels pushed from the store tiles back to every value they come from (to a fixed point:
    a loop's carried value, its start, its yield and its result share one; with `rows_only` an
    If's result and its branches' yields too)."""
    tied_ops = (ops.For, ops.If) if rows_only else (ops.For,)
    all_ops = list(fn.walk())

    def give(v: Value, lab: Labels) -> bool:
        if not _split(lab):
            return False
        old = labels.get(v.id)
        if old is not None and old != lab:
            raise _Declined  # needed split two ways
        labels[v.id] = lab
        return old is None

    changed = True
    while changed:
        changed = False
        for op in reversed(all_ops):
            if isinstance(op, tied_ops):
                for tied in _carried(op):
                    lab = next((labels[v.id] for v in tied if v.id in labels), None)
                    if lab is not None:
                        changed |= any([give(v, lab) for v in tied])
                continue
            for res in op.results:
                for v, lab in _operand_labels(op, labels.get(res.id), rows_only):
                    changed |= give(v, lab)
    return labels


def _check(fn: Function, labels: dict[int, Labels], rows_only: bool = False) -> None:
    """Every op reads its operands as split as its result asks (a value split for one use and
    whole for another, or an op that cannot carry an output axis, declines the kernel); only a
    For (with `rows_only`, an If too) carries split values through its region."""
    for op in fn.walk():
        if isinstance(op, (ops.Store, ops.Yield)):
            continue  # a store's tile is split by definition; a yield is checked with its region's op
        if isinstance(op, ops.For) or (rows_only and isinstance(op, ops.If)):
            for tied in _carried(op):
                if len({labels.get(v.id) for v in tied}) != 1:
                    raise _Declined
            continue
        if any(v.id in labels for blk in op.blocks for v in (*blk.args, *(blk.terminator or ops.Yield()).operands)):
            raise _Declined
        wanted: dict[int, Labels | None] = {}
        for res in op.results:
            for v, lab in _operand_labels(op, labels.get(res.id), rows_only):
                want = lab if _split(lab) else None
                if wanted.setdefault(v.id, want) != want:
                    raise _Declined  # one value in two operand places, wanted split and whole (x @ x)
        for v in op.operands:
            if labels.get(v.id) != wanted.get(v.id):
                raise _Declined


def _check_stored_arrays(fn: Function, stores: list[ops.Store], labels: dict[int, Labels],
                         like_stores: Labels | None = None) -> None:
    """Within a block, accesses to one array keep program order (spec section 4), but the S
    blocks of a split user block run in no order: a piece may read or overwrite a stored array
    only where it alone writes. So every load of a stored array must be of the very array value
    stored to and split as the stores are (`like_stores`; by default on both output axes: C = A @
    B + C loads its own tile); a whole or differently split load, a gather, a second view or list
    element of the array, or a view or list element made inside a loop (its tile grid may move
    between iterations: a list's arrays may share memory) declines the kernel.
    (Without this, X = X @ W in place, one tile column per block, read columns of X that
    another piece had already overwritten.)"""
    made = {op.result.id: op for op in fn.walk() if isinstance(op, (ops.ArraySlice, ops.ListGet))}

    def chain(v: Value) -> list[Value]:  # v, then what it is a view or list element of, to a parameter
        out = [v]
        while out[-1].id in made:
            op = made[out[-1].id]
            out.append(op.array if isinstance(op, ops.ArraySlice) else op.list)
        return out

    targets = {s.array.id: chain(s.array) for s in stores}
    looped = _arrays_made_in_loops(fn.body)
    if any(v.id in looped for views in targets.values() for v in views):
        raise _Declined
    roots = {views[-1].id for views in targets.values()}
    if len(roots) != len(targets):
        raise _Declined  # two views of one array stored to: their tile grids differ
    if like_stores is None:
        like_stores = tuple(range(len(stores[0].tile.tile.shape)))  # the stores' own labels
    for op in fn.walk():
        if isinstance(op, (ops.Load, ops.Gather)) and chain(op.array)[-1].id in roots and not (
                isinstance(op, ops.Load) and op.array.id in targets and labels.get(op.result.id) == like_stores):
            raise _Declined


def _arrays_made_in_loops(block: Block, looped: bool = False) -> set[int]:
    """The ids of the array views and list elements made inside a For of `block`."""
    found = set()
    for op in block.ops:
        if looped and isinstance(op, (ops.ArraySlice, ops.ListGet)):
            found.add(op.result.id)
        for inner in op.blocks:
            found |= _arrays_made_in_loops(inner, looped or isinstance(op, ops.For))
    return found


# ---- building --------------------------------------------------------------------------------------
class Rebuild:
    """The split kernel: `fn` copied with split values retyped, loads, stores and aranges on
    split axes reading pieces, and (`function`, not `function_by_parameter`) the grid queries of
    axis 0 read as the user's. With every factor 1 it copies ops unchanged but for the grid
    queries and the values in `map` (passes/block_merge.py copies a block's ops that way)."""

    def __init__(self, fn: Function, labels: dict[int, Labels], factors: tuple[int, ...],
                 builder: Builder | None = None, user: Value | None = None, user_blocks: Value | None = None) -> None:
        """`builder`: the one to build with (default: a new one for `fn`); `user`, `user_blocks`:
        what `bid(0)` and `num_blocks(0)` read as in `copy` (None: as they are)."""
        self.fn = fn
        self.labels = labels
        self.factors = factors
        self.b = builder if builder is not None else Builder(first_id=fn.max_id() + 1)
        self.user, self.user_blocks = user, user_blocks
        self.map: dict[int, Value] = {}
        # value id -> the split axes it indexes: its piece indices are made where it is defined,
        # so that an index invariant in a loop stays invariant (backends walk such tiles by pointer)
        self.indexing: dict[int, set[int]] = {}
        for op, _, k, a in _cut_axes(fn, labels, factors):
            self.indexing.setdefault(op.index[k].id, set()).add(a)
        self.pieces: dict[tuple[int, int], Value] = {}

    def function(self, count: int) -> Function:
        b, body = self.b, Block()
        b.loc = self.fn.loc
        with b.inside(body):
            real = b.value(ops.Bid, axis=0)
            blocks = b.value(ops.NumBlocks, axis=0)
            self.user = self._div(real, count, BinaryFn.FLOORDIV)
            self.user_blocks = self._div(blocks, count, BinaryFn.FLOORDIV)
            piece = self._div(real, count, BinaryFn.MOD)
            # the piece's coordinate per axis, the last axis fastest (row-major over the pieces)
            self.piece = []
            for k, f in enumerate(self.factors):
                inner = math.prod(self.factors[k + 1:])
                self.piece.append(self._div(piece if inner == 1 else self._div(piece, inner, BinaryFn.FLOORDIV), f,
                                            BinaryFn.MOD))
            for p in self.fn.params:
                self._place(p)
            self.copy(self.fn.body.ops)
        fn = self.fn
        split = Function(f"{fn.name}_split{count}", list(fn.params), list(fn.param_names), body, fn.loc,
                         dict(fn.options))
        return eliminate_dead_code(split)

    def function_by_parameter(self, pieces: int) -> Function:
        """The kernel whose piece is its new last parameter (`row_split`); the grid as the user's."""
        b, body = self.b, Block()
        b.loc = self.fn.loc
        piece = b.new_value(TileType(dt.int32, ()), "piece")
        self.piece = [piece] * len(self.factors)
        with b.inside(body):
            for p in self.fn.params:
                self._place(p)
            self.copy(self.fn.body.ops)
        fn = self.fn
        split = Function(f"{fn.name}_rows{pieces}", [*fn.params, piece], [*fn.param_names, "piece"], body, fn.loc,
                         dict(fn.options))
        return eliminate_dead_code(split)

    def _div(self, x: Value, by: int, fn: BinaryFn) -> Value:
        return self.b.value(ops.Binary, fn=fn, lhs=x, rhs=self.b.value(ops.Const, value=by, dtype=x.tile.dtype))

    def _type(self, v: Value) -> IRType:
        lab = self.labels.get(v.id)
        if lab is None:
            return v.type
        t = v.tile
        return TileType(t.dtype, tuple(d if a is None else d // self.factors[a] for d, a in zip(t.shape, lab)))

    def get(self, v: Value) -> Value:
        """What `v` of the source function is in the copy."""
        return self.map.get(v.id, v)

    def _place(self, old: Value) -> None:
        """Where `old` (already mapped) is the index of a tile on split axes, make its piece
        index per axis right after it: i * f + s."""
        i = self.get(old)
        for a in sorted(self.indexing.get(old.id, ())):
            t = i.tile.dtype
            s = self.piece[a] if t is dt.int32 else self.b.value(ops.Cast, x=self.piece[a], dtype=t)
            scaled = self.b.value(ops.Binary, fn=BinaryFn.MUL, lhs=i,
                                  rhs=self.b.value(ops.Const, value=self.factors[a], dtype=t))
            self.pieces[old.id, a] = self.b.value(ops.Binary, fn=BinaryFn.ADD, lhs=scaled, rhs=s)

    def _index(self, index: tuple[Value, ...], lab: Labels) -> tuple[Value, ...]:
        """A tile index (the original values) as the index of this block's piece."""
        return tuple(self.get(i) if a is None or self.factors[a] == 1 else self.pieces[i.id, a]
                     for i, a in zip(index, lab))

    def copy(self, source: list[Op]) -> None:
        """Append copies of `source` (ops of the source function) to the block being built."""
        for op in source:
            self.b.loc = op.loc
            if isinstance(op, ops.Bid) and op.axis == 0 and self.user is not None:
                self.map[op.result.id] = self.user
            elif isinstance(op, ops.NumBlocks) and op.axis == 0 and self.user is not None:
                self.map[op.result.id] = self.user_blocks
            elif isinstance(op, ops.Arange) and self._cut(op.result):
                self._arange(op)
            else:
                self._emit(op)
            for r in op.results:
                self._place(r)

    def _cut(self, v: Value) -> bool:
        """Whether `v` (1-D) runs along an axis the split cuts."""
        a = self.labels.get(v.id, (None,))[0]
        return a is not None and self.factors[a] > 1

    def _arange(self, op: ops.Arange) -> None:
        """An arange along a split axis: the piece's part, arange(n / f) + s * n / f."""
        a = self.labels[op.result.id][0]
        size = op.size // self.factors[a]
        start = self.b.value(ops.Binary, fn=BinaryFn.MUL, lhs=self.piece[a],
                             rhs=self.b.value(ops.Const, value=size, dtype=dt.int32))
        start = self.b.value(ops.Broadcast, x=self.b.value(ops.Reshape, x=start, shape=(1,)), shape=(size,))
        self.map[op.result.id] = self.b.value(ops.Binary, fn=BinaryFn.ADD,
                                              lhs=self.b.value(ops.Arange, size=size), rhs=start)

    def _block(self, block: Block) -> Block:
        args = []
        for a in block.args:  # new arguments each time: a block may be copied more than once
            new = self.b.new_value(self._type(a), a.hint)
            self.map[a.id] = new
            args.append(new)
        copy = Block(args)
        with self.b.inside(copy):
            for a in block.args:
                self._place(a)
            self.copy(block.ops)
        return copy

    def _emit(self, op: Op) -> None:
        fields = copied_fields(op, self.get, self._block)
        lab = self.labels.get(op.results[0].id) if op.results else None
        if isinstance(op, ops.Load) and lab is not None:
            fields.update(shape=self._type(op.result).shape, index=self._index(op.index, lab))
        elif isinstance(op, (ops.Broadcast, ops.Reshape)) and lab is not None:
            fields["shape"] = self._type(op.result).shape
        elif isinstance(op, ops.Store):
            fields["index"] = self._index(op.index, self.labels[op.tile.id])
        new = self.b.emit(type(op), **fields)
        for old, res in zip(op.results, new.results):
            if res.type != self._type(old):
                raise AssertionError(f"tile split retyped {old} as {res.type}")
            self.map[old.id] = res
