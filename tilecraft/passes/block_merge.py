"""Block merging: F of the user's blocks along grid axis 0 run as one block on a tile F times as tall.

A matmul written with small tiles (the cuTile MatMul sample's 32x32x32 on TC3, 1000x500x700
tf32: 512 one-warp blocks) spends each K step on a small MMA and reads A and B from L2 once per
32 columns and rows. Merging runs it as if written with taller tiles, without the user changing
one: program p of the merged kernel runs the user's blocks F p, ..., F p + F - 1. On the H200
TC3 went from 0.71x torch to 0.89x merged 4 to a block, as fast as the sample written with
128x32 tiles (benchmarks/results/merge-probe-h200-2026-12-02.json; which launches merge on
their own: backends/tile_splitting.py `auto_factors`).

Where those blocks' output tiles are F consecutive row tiles of one tile column (the sample's
grouped order gives that for F up to its group size), the program computes them as one tile of
F times the rows: every value on the output rows (the labels `tile_split` finds) is retyped F
times as tall, and every load and store on them reads tile i / F of the taller tiles, i the
first block's row index. Each element sums the same products in the same K order as in the
user's block, so the results differ from the unmerged kernel's at most by how a larger MMA
instruction orders the sums within one K step (the tile-split variants' rule).

Whether the blocks line up depends on the user's index arithmetic, so it is checked in the
kernel: the top-level scalar ops that compute from the block index (the prologue, which has no
effects) run once per merged block; every value of it that indexes rows must be i, i + 1, ...
with i a multiple of F, and every other value of it that the kernel reads must be the same for
all F blocks. Where that holds the program runs the merged tile; elsewhere it runs the F blocks
one after the other, as written. `num_blocks(0)` reads as the user's grid, which the launch
makes a multiple of F (backends/tile_splitting.py `BlockMergeKernel`).

Kernels that qualify: those `tile_split.tile_splits` takes (rank-2 stores, an MMA reaching
them, no other effects, no aranges or reductions across the output axes), whose every load and
store on the output rows is indexed there by a value computed from `bid(0)` (in the prologue,
or `bid(0)` itself), and that read no value of the prologue computed from `bid(0)` both as a row
index and otherwise. `BlockMerges.counts` limits F: user tiles of at most `MAX_TILE` elements,
merged tiles of at most `MAX_ROWS` rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..ir import BinaryFn, Block, Builder, CompareFn, Function, Op, Value, ops, scalar
from ..ir.types import IRType, TileType
from ..language import dtypes as dt
from .dce import eliminate_dead_code
from .tile_split import Labels, Rebuild, tile_splits

MAX_TILE = 32 * 32
"""User tiles larger than this are not merged (the H200 runs measured 32x32 tiles only)."""

MAX_ROWS = 128
"""Merged tiles have at most this many rows (a Hopper MMA's M is 64; two warpgroups' 128)."""

FACTORS = (2, 4)
"""The merge factors considered."""

_PROLOGUE_OPS = (ops.Const, ops.Binary, ops.Compare, ops.Where, ops.Cast, ops.Unary, ops.Bid, ops.NumBlocks,
                 ops.ArrayShape, ops.ArrayStride)
"""Ops that may be part of the prologue (pure, reading no memory) when their results are scalars."""


@dataclass(frozen=True)
class BlockMerges:
    """A kernel that qualifies (module docstring): its prologue, which prologue values depend
    on the block and how the rest of the kernel reads them."""

    fn: Function
    shape: tuple[int, ...]
    labels: dict[int, Labels]
    prologue: tuple[Op, ...]
    per_block: frozenset[int]
    """ids of the results of the prologue ops that depend on `bid(0)`."""
    rows: tuple[Value, ...]
    """Prologue values that index output rows (but `bid(0)`): consecutive over the merged blocks."""
    uniform: tuple[Value, ...]
    """Prologue values depending on `bid(0)` that the kernel reads otherwise: equal over them."""
    tf32: bool
    """Whether every MMA of the kernel takes tf32 operands."""

    def counts(self) -> list[int]:
        """The merge factors this kernel's tile allows."""
        rows, cols = self.shape
        if rows * cols > MAX_TILE:
            return []
        return [f for f in FACTORS if rows * f <= MAX_ROWS]

    def merge(self, count: int) -> Function:
        """The kernel running `count` of the user's blocks per program (module docstring)."""
        if count not in FACTORS:
            raise ValueError(f"cannot merge blocks {count} at a time")
        return _Merge(self, count).function()


def block_merges(fn: Function) -> BlockMerges | None:
    """The kernel's `BlockMerges` when it qualifies (module docstring), else None."""
    splits = tile_splits(fn)
    if splits is None:
        return None
    params = {p.id for p in fn.params}
    prologue: list[Op] = []
    defined = set(params)
    for op in fn.body.ops:
        if isinstance(op, _PROLOGUE_OPS) and all(r.tile.shape == () for r in op.results) \
                and all(v.id in defined for v in op.operands):
            prologue.append(op)
            defined.update(r.id for r in op.results)
    in_prologue = {id(op) for op in prologue}
    bids = {op.result.id for op in fn.walk() if isinstance(op, ops.Bid) and op.axis == 0}
    per_block = set(bids)
    for op in prologue:
        if any(v.id in per_block for v in op.operands):
            per_block.update(r.id for r in op.results)
    roles: dict[int, str] = {}
    values: dict[int, Value] = {}
    for op in fn.walk():
        if id(op) in in_prologue:
            continue
        rows = _row_indices(op, splits.labels)
        if any(v.id not in per_block for v in rows):
            return None  # rows indexed by a value all the blocks share
        for v in {v.id: v for v in op.operands if v.id in per_block}.values():
            role = "row" if sum(x is v for x in op.operands) == sum(x is v for x in rows) else "uniform"
            if roles.setdefault(v.id, role) != role or (role == "uniform" and v.id in bids):
                return None  # read two ways, or the block index read as if shared: never merges
            values[v.id] = v
    prologue_ids = {r.id for op in prologue for r in op.results}
    # bid(0) lines up by itself: F p + j is the first plus j, and F divides the first
    rows = tuple(values[i] for i, r in roles.items() if r == "row" and i in prologue_ids and i not in bids)
    uniform = tuple(values[i] for i, r in roles.items() if r == "uniform")
    tf32 = all(op.a.tile.dtype is dt.tfloat32 for op in fn.walk() if isinstance(op, ops.Mma))
    return BlockMerges(fn, splits.shape, splits.labels, tuple(prologue), frozenset(per_block), rows, uniform, tf32)


def _row_indices(op: Op, labels: dict[int, Labels]) -> list[Value]:
    """The values indexing output rows in `op`: a load's or store's index on a dim along them."""
    if not isinstance(op, (ops.Load, ops.Store)):
        return []
    lab = labels.get((op.result if isinstance(op, ops.Load) else op.tile).id)
    return [] if lab is None else [i for i, a in zip(op.index, lab) if a == 0]


class _Merged(Rebuild):
    """The rest of the kernel copied for a merged program: values on the output rows retyped
    `count` times as tall, row indices read from `pieces` (the taller tiles' index)."""

    def _type(self, v: Value) -> IRType:
        lab = self.labels.get(v.id)
        if lab is None:
            return v.type
        t = v.tile
        return TileType(t.dtype, tuple(d if a is None else d * self.factors[a] for d, a in zip(t.shape, lab)))

    def _place(self, old: Value) -> None:
        """The taller tiles' row indices are made before the copy (`_Merge`)."""


class _Merge:
    """Builds `BlockMerges.merge(count)`."""

    def __init__(self, merges: BlockMerges, count: int) -> None:
        self.m = merges
        self.count = count
        fn = merges.fn
        self.b = Builder(first_id=fn.max_id() + 1)
        in_prologue = {id(op) for op in merges.prologue}
        self.rest = [op for op in fn.body.ops if id(op) not in in_prologue]

    def _copier(self, user: Value, blocks: Value, seed: dict[int, Value], cls: type[Rebuild] = Rebuild) -> Rebuild:
        """A copier of the kernel's ops for the user's block `user` of `blocks`, values of
        `seed` already mapped (factors: the merge's for `_Merged`, else 1)."""
        m = self.m
        factors = (self.count, 1) if cls is _Merged else (1, 1)
        copier = cls(m.fn, m.labels, factors, self.b, user, blocks)
        copier.map.update(seed)
        return copier

    def _const(self, value: int, like: Value) -> Value:
        return self.b.value(ops.Const, value=value, dtype=like.tile.dtype)

    def _binary(self, fn: BinaryFn, lhs: Value, rhs: Value) -> Value:
        return self.b.value(ops.Binary, fn=fn, lhs=lhs, rhs=rhs)

    def _prologue(self, copier: Rebuild, shared: dict[int, Value] | None) -> None:
        """Copy the prologue with `copier`: every op, or (`shared` given) only those that depend
        on the block, the others' results taken from `shared`."""
        for op in self.m.prologue:
            if shared is not None and op.results[0].id not in self.m.per_block:
                copier.map.update({r.id: shared[r.id] for r in op.results})
            else:
                copier.copy([op])

    def function(self) -> Function:
        m, b, f = self.m, self.b, self.count
        fn = m.fn
        body = Block()
        b.loc = fn.loc
        with b.inside(body):
            program = b.value(ops.Bid, axis=0)
            first = self._binary(BinaryFn.MUL, program, self._const(f, program))
            blocks = self._binary(BinaryFn.MUL, b.value(ops.NumBlocks, axis=0), self._const(f, program))
            copiers = [self._copier(first, blocks, {})]
            self._prologue(copiers[0], None)
            shared = dict(copiers[0].map)
            for j in range(1, f):
                copiers.append(self._copier(self._binary(BinaryFn.ADD, first, self._const(j, first)), blocks, {}))
                self._prologue(copiers[j], shared)
            ok = self._lined_up(copiers)
            pieces = {(v.id, 0): self._binary(BinaryFn.FLOORDIV, copiers[0].get(v), self._const(f, v))
                      for v in m.rows}
            pieces.update({(v.id, 0): program for op in fn.walk() if isinstance(op, ops.Bid) and op.axis == 0
                           for v in op.results})
            merged = self._copier(first, blocks, copiers[0].map, _Merged)
            merged.pieces = pieces
            if ok is None:
                merged.copy(self.rest)
            else:
                b.emit(ops.If, cond=ok, then=self._region(lambda: merged.copy(self.rest)),
                       orelse=self._region(lambda: self._one_by_one(first, blocks, shared)))
        name = f"{fn.name}_merged{f}"
        return eliminate_dead_code(Function(name, list(fn.params), list(fn.param_names), body, fn.loc,
                                            dict(fn.options)))

    def _lined_up(self, copiers: list[Rebuild]) -> Value | None:
        """A bool that holds where the merged blocks' row indices are consecutive from a multiple
        of the factor and their other block-dependent values equal; None when nothing needs checking."""
        conds = []
        for v in (*self.m.rows, *self.m.uniform):
            v0 = copiers[0].get(v)
            row = v in self.m.rows
            if row:
                rem = self._binary(BinaryFn.MOD, v0, self._const(self.count, v0))
                conds.append(self.b.value(ops.Compare, fn=CompareFn.EQ, lhs=rem, rhs=self._const(0, v0)))
            for j in range(1, self.count):
                want = self._binary(BinaryFn.ADD, v0, self._const(j, v0)) if row else v0
                conds.append(self.b.value(ops.Compare, fn=CompareFn.EQ, lhs=copiers[j].get(v), rhs=want))
        ok = None
        for c in conds:
            ok = c if ok is None else self._binary(BinaryFn.AND, ok, c)
        return ok

    def _region(self, fill) -> Block:
        block = Block()
        with self.b.inside(block):
            fill()
            self.b.emit(ops.Yield, values=())
        return block

    def _one_by_one(self, first: Value, blocks: Value, shared: dict[int, Value]) -> None:
        """The user's blocks first, ..., first + count - 1 one after the other, as written."""
        b = self.b
        i32 = scalar(dt.int32)
        j = b.new_value(i32, "j")
        loop = Block([j])
        with b.inside(loop):
            copier = self._copier(self._binary(BinaryFn.ADD, first, j), blocks, {})
            self._prologue(copier, shared)
            copier.copy(self.rest)
            b.emit(ops.Yield, values=())
        _without_tma(loop)
        b.emit(ops.For, lower=self._const(0, first), upper=self._const(self.count, first), step=self._const(1, first),
               init=(), body=loop)


def _without_tma(block: Block) -> None:
    """`block`'s loads and stores, nested ones too, hinted not to use tensor descriptors: the
    blocks that run one by one are the exception, and a backend that makes descriptors in the
    kernel would make them for their smaller tiles too, in every program (allow_tma is a hint)."""
    for i, op in enumerate(block.ops):
        if isinstance(op, (ops.Load, ops.Store)):
            block.ops[i] = dataclasses.replace(op, allow_tma=False)
        for inner in op.blocks:
            _without_tma(inner)
