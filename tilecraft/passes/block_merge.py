"""Block merging: a rectangle of the user's blocks run as one block on a tile as large as their tiles together.

A matmul written with small tiles (the cuTile MatMul sample's 32x32x32 on TC3, 1000x500x700
tf32: 512 one-warp blocks) spends each K step on a small MMA and reads A and B from L2 once per
32 columns and rows. Merging runs it as if written with larger tiles, without the user changing
one: each program of the merged kernel runs R x C of the user's blocks (`Merge`: F = R C blocks
spaced so that, in the user's order of tiles, they should make R row tiles by C column tiles).
On the H200 TC3 went from 0.71x torch to 0.89x merged 4 x 1 to a block, as fast as the sample
written with 128x32 tiles (benchmarks/results/merge-probe-h200-2026-12-02.json; which launches
merge on their own: backends/tile_splitting.py `auto_merge`).

Where those blocks' output tiles do make that rectangle (the sample's grouped order gives R
consecutive row tiles for R up to its group size, and the next column its group size later),
the program computes them as one tile R times as tall and C times as wide: every value on the
output axes (the labels `tile_split` finds) is retyped so, and every load and store on them
reads tile i / R (j / C) of the larger tiles, i (j) the first block's row (column) index. Each
element sums the same products in the same K order as in the user's block, so the results
differ from the unmerged kernel's at most by how a larger MMA instruction orders the sums within
one K step (the tile-split variants' rule).

Whether the blocks line up depends on the user's index arithmetic, so it is checked in the
kernel: the top-level scalar ops that compute from the block index (the prologue, which has no
effects) run once per merged block; every value of it that indexes rows must be i, i + 1, ...
down the rectangle with i a multiple of R, every one that indexes columns j, j + 1, ... across
it with j a multiple of C, and every other value of it that the kernel reads must be the same
for all F blocks. Where that holds the program runs the merged tile; elsewhere it runs the F
blocks one after the other, as written. So any `Merge` gives right results; the launch picks
one whose blocks line up by evaluating the prologue on the host (backends/tile_splitting.py
`MergeFinder`). Where that evaluation holds for every launch of the variant (the prologue reads
no scalar parameter: `BlockMerges.pinned`) and found every program lined up, the merge runs
unchecked (`Merge.checked`): one copy of the prologue, no branch, the kernel a written one of
the larger tiles would be. Where only the blocks of the grid's last group of row tiles, cut
short, do not line up, the merge has a head (`Merge.head`): its programs run merged, and each
block after them runs as a program of its own. Programs may take their rectangles in another
order than the grid's, in groups of row tiles (`Merge.band`), which the launch picks for L2
reuse. `num_blocks(0)` reads as the user's grid (`Merge.user_blocks`).

Kernels that qualify: those `tile_split.tile_splits` takes (rank-2 stores, an MMA reaching
them, no other effects, no aranges or reductions across the output axes), whose every load and
store on the output rows is indexed there by a value computed from `bid(0)` (in the prologue,
or `bid(0)` itself), and that read no value of the prologue computed from `bid(0)` two ways (a
row index, a column index, otherwise). Merged tiles are wider than the user's only where every
column index is such a value too, and no row index is `bid(0)` itself. `BlockMerges.shapes`
limits R and C: user tiles of at most `MAX_TILE` elements, merged tiles of at most `MAX_ROWS` by
`MAX_COLS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..ir import BinaryFn, Block, Builder, CompareFn, Function, Op, Value, ops, scalar
from ..ir.types import IRType, TileType
from ..language import dtypes as dt
from .dce import eliminate_dead_code
from .tile_split import Labels, Rebuild, tile_splits

MAX_TILE = 32 * 32
"""User tiles larger than this are not merged (the H200 runs measured 32x32 tiles only)."""

MAX_ROWS = 128
"""Merged tiles have at most this many rows (a Hopper MMA's M is 64; two warpgroups' 128)."""

MAX_COLS = 256
"""Merged tiles have at most this many columns (a Hopper MMA's largest N)."""

SIDES = (1, 2, 4, 8)
"""How many of the user's tiles a merged tile may have along each side."""

_PROLOGUE_OPS = (ops.Const, ops.Binary, ops.Compare, ops.Where, ops.Cast, ops.Unary, ops.Bid, ops.NumBlocks,
                 ops.ArrayShape, ops.ArrayStride)
"""Ops that may be part of the prologue (pure, reading no memory) when their results are scalars."""


MERGED_GROUP = 8
"""How many merged row tiles a group of programs covers, at most, where the launch orders them
(`Merge.band`). H200, tf32 8192^3, the sample's 32x32x32 tiles merged 4 x 4 (its groups of 8
row tiles: 2 merged ones): 0.81x torch in the grid's order, 0.88x with groups of 8 merged row
tiles; the sample written with 128x128x32 tiles and groups of 8 ran 0.90x, of 2 0.81x
(benchmarks/results/order-diag-h200-2026-12-02.log). So ordered, the sample ran 0.90x
(order-diag-h200-2026-12-02-b.json)."""


@dataclass(frozen=True)
class Merge:
    """Which of the user's blocks one program of a merged kernel runs: `rows` x `cols` blocks,
    first + i + stride * j for i < rows, j < cols, whose output tiles should make a rectangle of
    `rows` row tiles and `cols` column tiles (the cuTile sample's grouped order puts a block's
    right-hand neighbour its group size later: stride 8). The grid's axis 0 is cut into spans of
    `stride * cols` blocks, each run by `stride / rows` programs: in the grid's order program
    q's first block is (q // (stride / rows)) * stride * cols + (q % (stride / rows)) * rows.
    With one column the stride is `rows`: program q runs blocks rows q to rows q + rows - 1.

    The spans of the sample's order make bands: `band` spans side by side along one band of
    `stride / rows` merged row tiles, then the next band. Where the launch found that (`band`
    > 0), programs take the rectangles `group` merged row tiles at a time instead (a multiple
    of the band's, dividing the grid's), across every column, as the sample's order takes its
    tiles (`MERGED_GROUP`); the grid's programs are a multiple of `group * band`.

    Where a group of the sample's order has a number of columns that `cols` does not divide
    (3000 columns of 32: 94), spans straddle two groups and never line up. A merge in groups
    (`period` > 0, unchecked only) restarts its spans at every group of `period` blocks (`stride`
    row tiles by `period / stride` columns; `groups` of them, then a last one `last` row tiles
    tall, whose rows the sample's `bid % group_size_m` turns by `shift`): the group's last span
    has fewer columns than the merge, and its merged tiles reach past the grid's last column,
    which the launch checks lies past every stored array's end (the stores drop those lanes);
    likewise the last group's rows. A program's rectangle is where its first block's row and
    column indices say (the only block whose prologue an unchecked merge reads), and the launch
    checks that the rectangles cover every block of the grid once (backends/tile_splitting.py
    `MergeFinder`). With a head, the last group's blocks run on their own."""

    rows: int
    cols: int = 1
    stride: int = 0
    checked: bool = True
    """Whether the kernel checks that its blocks line up (else the launch has: `BlockMerges.pinned`)."""
    band: int = 0
    group: int = 0
    head: int = 0
    """Where nonzero, only the programs below it run merged (the user's first `covered(head)`
    blocks: whole spans, or whole groups); each later program runs one more of the user's blocks
    on its own, as written: the blocks of a grid's last group of row tiles, cut short, which do
    not line up."""
    period: int = 0
    """In groups (nonzero): the blocks of each whole group; then `groups` of them, the last
    group's rows and how its rows are turned (the class docstring)."""
    groups: int = 0
    last: int = 0
    shift: int = 0

    def __post_init__(self) -> None:
        if self.cols == 1:
            object.__setattr__(self, "stride", self.rows)
        bad_order = self.band < 0 or self.band and (self.group <= self.per_span or self.group % self.per_span)
        bad_head = self.head < 0 or self.head % (self.per_group if self.period else self.per_span)
        bad_groups = self.period and (
            self.checked or self.band or self.period % self.stride or self.groups < 1
            or not 0 <= self.last < self.stride or not 0 <= self.shift < max(self.last, 1)
            or self.head not in (0, self.groups * self.per_group) or self.head and not self.last)
        bad_groups = bad_groups or not self.period and (self.groups or self.last or self.shift)
        if self.rows < 1 or self.cols < 1 or self.blocks < 2 or self.stride < self.rows or self.stride % self.rows \
                or bad_order or bad_head or bad_groups:
            raise ValueError(f"cannot merge blocks as {self}")

    @property
    def blocks(self) -> int:
        """How many of the user's blocks a program runs."""
        return self.rows * self.cols

    @property
    def span(self) -> int:
        """The grid's axis 0 must be a multiple of this."""
        return self.stride * self.cols

    def programs(self, user_blocks: int) -> int | None:
        """How many programs run a grid of `user_blocks` blocks along axis 0 (None: this merge
        cannot: the grid is not whole spans, or, with a head, shorter than it; in groups: not
        the grid it was found for)."""
        if self.period:
            if user_blocks != self.user_blocks(None):
                return None
            tail = self.last * self.n_cols if self.head else self.spans * self.last_per_span
            return self.groups * self.per_group + tail
        if self.head:
            return self.head + user_blocks - self.covered(self.head) if self.covered(self.head) <= user_blocks else None
        return user_blocks // self.blocks if user_blocks % self.span == 0 else None

    def covered(self, programs: int) -> int:
        """How many of the user's blocks the first `programs` programs run (whole spans or groups)."""
        return programs // self.per_group * self.period if self.period else programs * self.blocks

    def alone(self, program: Any) -> Any:
        """The user's block that `program`, past the head, runs on its own (as `first` takes it)."""
        return program + (self.covered(self.head) - self.head)

    def user_blocks(self, programs: Any) -> Any:
        """The user's grid along axis 0 of a launch of `programs` (as `first` takes them; in
        groups the grid is the merge's own, an int)."""
        if self.period:
            return self.groups * self.period + self.last * self.n_cols
        return self.alone(programs) if self.head else programs * self.blocks

    @property
    def n_cols(self) -> int:
        """In groups: the user's column tiles in a group."""
        return self.period // self.stride

    @property
    def spans(self) -> int:
        """In groups: the spans of a group, the last one maybe narrower than the merge."""
        return -(-self.n_cols // self.cols)

    @property
    def per_group(self) -> int:
        """In groups: the programs of a whole group."""
        return self.spans * self.per_span

    @property
    def last_per_span(self) -> int:
        """In groups: the programs of a span of the last group (its rows merged, the last ones
        reaching past the grid)."""
        return -(-self.last // self.rows)

    @property
    def per_span(self) -> int:
        """How many programs run a span's blocks."""
        return self.stride // self.rows

    def first(self, program: Any) -> Any:
        """The first of the user's blocks that `program` runs: an int, a NumPy array of them, or
        anything else with Python's integer operators (the merged kernel's IR values)."""
        if self.period:
            return self._first_in_groups(program)
        per_span = self.per_span
        if not self.band:
            return program // per_span * self.span + program % per_span * self.rows
        sweep = self.group * self.band
        row = program // sweep * self.group + program % self.group  # the merged row tile, from the top
        col = program % sweep // self.group
        return (row // per_span * self.band + col) * self.span + row % per_span * self.rows

    def _first_in_groups(self, program: Any) -> Any:
        """`first` of a merge in groups: within its group, program t + s * (programs a span)
        takes the rectangle of rows t * rows and span s; the last group is `last` tall, and its
        row r is block (r + shift) % last of a column."""
        group, within = program // self.per_group, program % self.per_group
        height, per_span = self.stride, self.per_span
        if self.last:  # 1 in the last group, else 0
            is_last = group // self.groups
            height = is_last * (self.last - self.stride) + self.stride
            per_span = is_last * (self.last_per_span - self.per_span) + self.per_span
            row = (within % per_span * self.rows + is_last * self.shift) % height
        else:
            row = within % per_span * self.rows
        return group * self.period + within // per_span * (height * self.cols) + row

    def block(self, first: Any, i: Any, j: Any) -> Any:
        """The user's block on row i and column j of the rectangle that starts at block `first`
        (as `first` takes them)."""
        return first + i + self.stride * j


@dataclass(frozen=True)
class StoredTiles:
    """One store's output tiles: into parameter `param`, output axis a (0 rows, 1 columns) along
    the array's dim `dims[a]`, the user's tiles `extents[a]` long there."""

    param: int
    dims: tuple[int, int]
    extents: tuple[int, int]

    def past_end(self, shape: tuple[int, ...], row: Any, col: Any) -> Any:
        """Whether the user's tile (row, col) lies wholly past the array's end (its store drops
        every lane), for an array of `shape`; NumPy arrays of tile indices too."""
        return (row * self.extents[0] >= shape[self.dims[0]]) | (col * self.extents[1] >= shape[self.dims[1]])


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
    """Prologue values that index output rows (but `bid(0)`): consecutive down the merged blocks."""
    cols: tuple[Value, ...]
    """Prologue values that index output columns: consecutive across the merged blocks (equal
    where they make one column)."""
    uniform: tuple[Value, ...]
    """Prologue values depending on `bid(0)` that the kernel reads otherwise: equal over them."""
    widens: bool
    """Whether merged tiles may be wider than the user's: every column index is a prologue value
    computed from `bid(0)`, and no row index is `bid(0)` itself."""
    pinned: bool
    """Whether the prologue reads no scalar parameter and no block index but axis 0's (only
    arrays' shapes and strides, constants, the grid and `bid(0)`, which a launch's
    specialization and grid pin): a launch that evaluated it on the host for every block along
    axis 0 knows whether they line up, and may run a merge unchecked."""
    tf32: bool
    """Whether every MMA of the kernel takes tf32 operands."""
    stores: tuple["StoredTiles", ...] | None = None
    """Where the kernel's stores put the output tiles, or None where merged tiles must not reach
    past the grid's last tiles (`Merge.period`): a load or store on the output axes promises to
    stay inside its array, or a store is to an array that is not a parameter."""

    def shapes(self) -> list[tuple[int, int]]:
        """The (rows, cols) of the user's tiles that a merged tile may have: at most `MAX_ROWS`
        by `MAX_COLS` elements, of user tiles of at most `MAX_TILE`."""
        rows, cols = self.shape
        if rows * cols > MAX_TILE:
            return []
        widths = SIDES if self.widens else (1,)
        return [(r, c) for r in SIDES for c in widths
                if r * c >= 2 and rows * r <= MAX_ROWS and cols * c <= MAX_COLS]

    def checks(self, merge: Merge) -> list[tuple[Value, int | None, int]]:
        """What lines `merge`'s blocks up (module docstring), per checked prologue value: (value,
        the rectangle's axis it goes up by one along, 0 down or 1 across, and the multiple of its
        side it starts at) or (value, None, 1): equal over the blocks. Rows first, then columns
        (equal where the merge has one column), then the other values: the kernel's check and
        the launch's evaluation of it (backends/tile_splitting.py `MergeFinder`) read this."""
        found: list[tuple[Value, int | None, int]] = [(v, 0, merge.rows) for v in self.rows]
        found += [(v, 1, merge.cols) if merge.cols > 1 else (v, None, 1) for v in self.cols]
        return found + [(v, None, 1) for v in self.uniform]

    def merge(self, merge: Merge) -> Function:
        """The kernel whose programs run the user's blocks as `merge` says (module docstring);
        unchecked, each program runs its blocks merged, as the launch found they line up."""
        if (merge.rows, merge.cols) not in self.shapes() or not (merge.checked or self.pinned):
            raise ValueError(f"cannot merge this kernel's blocks as {merge}")
        return _Merge(self, merge).function()


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
    shared_cols = False
    for op in fn.walk():
        if id(op) in in_prologue:
            continue
        rows, cols = _indices(op, splits.labels, 0), _indices(op, splits.labels, 1)
        if any(v.id not in per_block for v in rows):
            return None  # rows indexed by a value all the blocks share
        shared_cols = shared_cols or any(v.id not in per_block for v in cols)
        for v in {v.id: v for v in op.operands if v.id in per_block}.values():
            uses = sum(x is v for x in op.operands)
            role = ("row" if uses == sum(x is v for x in rows) else "col" if uses == sum(x is v for x in cols)
                    else "uniform")
            if roles.setdefault(v.id, role) != role or (role != "row" and v.id in bids):
                return None  # read two ways, or the block index read as if shared: never merges
            values[v.id] = v
    prologue_ids = {r.id for op in prologue for r in op.results}
    direct = any(roles.get(i) == "row" for i in bids)

    def role(name: str) -> tuple[Value, ...]:
        # bid(0) as a row lines up by itself (one column): F p + j is the first plus j
        return tuple(values[i] for i, r in roles.items() if r == name and i in prologue_ids and i not in bids)

    tf32 = all(op.a.tile.dtype is dt.tfloat32 for op in fn.walk() if isinstance(op, ops.Mma))
    widens = bool(role("col")) and not shared_cols and not direct
    scalars = {p.id for p in fn.params if isinstance(p.type, TileType)}
    pinned = not any(v.id in scalars for op in prologue for v in op.operands) and not any(
        isinstance(op, ops.Bid) and op.axis != 0 for op in prologue)
    return BlockMerges(fn, splits.shape, splits.labels, tuple(prologue), frozenset(per_block), role("row"),
                       role("col"), role("uniform"), widens, pinned, tf32, _stored_tiles(fn, splits.labels))


def _stored_tiles(fn: Function, labels: dict[int, Labels]) -> tuple[StoredTiles, ...] | None:
    """`BlockMerges.stores`: each rank-2 store's tiles, or None (its docstring)."""
    params = {p.id: i for i, p in enumerate(fn.params)}
    found = []
    for op in fn.walk():
        if not isinstance(op, (ops.Load, ops.Store)):
            continue
        lab = _access_labels(op, labels)
        if lab is None or not any(a is not None for a in lab):
            continue
        if not op.check_bounds or isinstance(op, ops.Store) and (op.array.id not in params or sorted(
                a for a in lab if a is not None) != [0, 1]):
            return None
        if isinstance(op, ops.Store):
            where = {a: k for k, a in enumerate(lab) if a is not None}
            shape = op.tile.tile.shape
            found.append(StoredTiles(params[op.array.id], (op.order[where[0]], op.order[where[1]]),
                                     (shape[where[0]], shape[where[1]])))
    return tuple(found)


def _indices(op: Op, labels: dict[int, Labels], axis: int) -> list[Value]:
    """The values indexing output `axis` (0: rows, 1: columns) in `op`: a load's or store's index
    on a dim along it."""
    lab = _access_labels(op, labels) if isinstance(op, (ops.Load, ops.Store)) else None
    return [] if lab is None else [i for i, a in zip(op.index, lab) if a == axis]


def _access_labels(op: ops.Load | ops.Store, labels: dict[int, Labels]) -> Labels | None:
    """The output-axis labels of a load's or store's tile (None: it is on neither axis)."""
    return labels.get((op.result if isinstance(op, ops.Load) else op.tile).id)


class _IntOps:
    """An integer IR value under Python's +, *, // and % (an int on the other side folded where
    it is 0 or 1), so that `Merge.first` and `Merge.block` state a program's blocks once, for
    the launch's NumPy arrays and for the merged kernel's ops."""

    def __init__(self, b: Builder, value: Value) -> None:
        self.b = b
        self.value = value

    def _op(self, fn: BinaryFn, other: "_IntOps | int") -> "_IntOps":
        rhs = other.value if isinstance(other, _IntOps) else self.b.value(ops.Const, value=other,
                                                                            dtype=self.value.tile.dtype)
        return _IntOps(self.b, self.b.value(ops.Binary, fn=fn, lhs=self.value, rhs=rhs))

    def __add__(self, other: "_IntOps | int") -> "_IntOps":
        return self if isinstance(other, int) and other == 0 else self._op(BinaryFn.ADD, other)

    def __mul__(self, other: "_IntOps | int") -> "_IntOps | int":
        if isinstance(other, int) and other in (0, 1):
            return self if other else 0
        return self._op(BinaryFn.MUL, other)

    __radd__ = __add__
    __rmul__ = __mul__

    def __floordiv__(self, other: "_IntOps | int") -> "_IntOps":
        return self if isinstance(other, int) and other == 1 else self._op(BinaryFn.FLOORDIV, other)

    def __mod__(self, other: "_IntOps | int") -> "_IntOps | int":
        return 0 if isinstance(other, int) and other == 1 else self._op(BinaryFn.MOD, other)


class _Merged(Rebuild):
    """The rest of the kernel copied for a merged program: values on the output axes retyped
    as many times as long as the merge has the user's tiles along them, indices on them read
    from `pieces` (the larger tiles' index)."""

    def _type(self, v: Value) -> IRType:
        lab = self.labels.get(v.id)
        if lab is None:
            return v.type
        t = v.tile
        return TileType(t.dtype, tuple(d if a is None else d * self.factors[a] for d, a in zip(t.shape, lab)))

    def _place(self, old: Value) -> None:
        """The larger tiles' indices are made before the copy (`_Merge`)."""


class _Merge:
    """Builds `BlockMerges.merge(merge)`."""

    def __init__(self, merges: BlockMerges, merge: Merge) -> None:
        self.m = merges
        self.merge = merge
        fn = merges.fn
        self.b = Builder(first_id=fn.max_id() + 1)
        in_prologue = {id(op) for op in merges.prologue}
        self.rest = [op for op in fn.body.ops if id(op) not in in_prologue]

    def _copier(self, user: Value, blocks: Value, seed: dict[int, Value], cls: type[Rebuild] = Rebuild) -> Rebuild:
        """A copier of the kernel's ops for the user's block `user` of `blocks`, values of
        `seed` already mapped (factors: the merge's for `_Merged`, else 1)."""
        m = self.m
        factors = (self.merge.rows, self.merge.cols) if cls is _Merged else (1, 1)
        copier = cls(m.fn, m.labels, factors, self.b, user, blocks)
        copier.map.update(seed)
        return copier

    def _const(self, value: int, like: Value) -> Value:
        return self.b.value(ops.Const, value=value, dtype=like.tile.dtype)

    def _int(self, value: Value) -> _IntOps:
        return _IntOps(self.b, value)

    def _block(self, first: Value, i: _IntOps | int, j: _IntOps | int) -> Value:
        """The user's block `Merge.block(first, i, j)`."""
        return self.merge.block(self._int(first), i, j).value

    def _prologue(self, copier: Rebuild, shared: dict[int, Value] | None) -> None:
        """Copy the prologue with `copier`: every op, or (`shared` given) only those that depend
        on the block, the others' results taken from `shared`."""
        for op in self.m.prologue:
            if shared is not None and op.results[0].id not in self.m.per_block:
                copier.map.update({r.id: shared[r.id] for r in op.results})
            else:
                copier.copy([op])

    def function(self) -> Function:
        m, b, g = self.m, self.b, self.merge
        fn = m.fn
        body = Block()
        b.loc = fn.loc
        with b.inside(body):
            program = b.value(ops.Bid, axis=0)
            blocks = g.user_blocks(self._int(b.value(ops.NumBlocks, axis=0)))
            blocks = self._const(blocks, program) if isinstance(blocks, int) else blocks.value
            if not g.head:
                self._merged(program, blocks)
            else:  # the head's programs merged, each later one a block of the user's as written
                tail = self._region(lambda: self._one_block(g.alone(self._int(program)).value, blocks))
                _without_tma(tail)
                b.emit(ops.If, cond=b.value(ops.Compare, fn=CompareFn.LT, lhs=program, rhs=self._const(g.head, program)),
                       then=self._region(lambda: self._merged(program, blocks)), orelse=tail)
        kind = ('' if g.checked else '_unchecked') + ('_in_groups' if g.period else '') + ('_head' if g.head else '')
        name = f"{fn.name}_merged{g.rows}x{g.cols}{kind}"
        return eliminate_dead_code(Function(name, list(fn.params), list(fn.param_names), body, fn.loc,
                                            dict(fn.options)))

    def _one_block(self, user: Value, blocks: Value, shared: dict[int, Value] | None = None) -> None:
        """The user's block `user` run as written (the prologue's values that do not depend on
        the block taken from `shared`, where given)."""
        copier = self._copier(user, blocks, {})
        self._prologue(copier, shared)
        copier.copy(self.rest)

    def _merged(self, program: Value, blocks: Value) -> None:
        """The program's rectangle of blocks, merged where they line up (unchecked: as the
        launch found), else one by one."""
        m, b, g = self.m, self.b, self.merge
        fn = m.fn
        first = g.first(self._int(program)).value
        copiers: dict[tuple[int, int], Rebuild] = {}
        shared: dict[int, Value] = {}
        checked = [(i, j) for j in range(g.cols) for i in range(g.rows)] if g.checked else [(0, 0)]
        for n, (i, j) in enumerate(checked):
            copier = copiers[i, j] = self._copier(self._block(first, i, j), blocks, {})
            self._prologue(copier, shared if n else None)
            if not n:
                shared = dict(copier.map)
        ok = self._lined_up(copiers) if g.checked else None
        first_block = copiers[0, 0]
        pieces = {(v.id, 0): (self._int(first_block.get(v)) // g.rows).value for v in m.rows}
        if g.cols > 1:
            pieces.update({(v.id, 1): (self._int(first_block.get(v)) // g.cols).value for v in m.cols})
        # bid(0) as a row index (one column only): the program's index on the taller tiles
        pieces.update({(v.id, 0): program for op in fn.walk() if isinstance(op, ops.Bid) and op.axis == 0
                       for v in op.results})
        merged = self._copier(first, blocks, first_block.map, _Merged)
        merged.pieces = pieces
        if ok is None:
            merged.copy(self.rest)
        else:
            b.emit(ops.If, cond=ok, then=self._region(lambda: merged.copy(self.rest)),
                   orelse=self._region(lambda: self._one_by_one(first, blocks, shared)))

    def _lined_up(self, copiers: dict[tuple[int, int], Rebuild]) -> Value | None:
        """A bool that holds where the merged blocks' row (column) indices go up by one down
        (across) the rectangle from a multiple of its rows (columns), and their other
        block-dependent values are equal; None when nothing needs checking."""
        conds = []
        for v, axis, factor in self.m.checks(self.merge):
            v0 = copiers[0, 0].get(v)
            if factor > 1:
                conds.append(self.b.value(ops.Compare, fn=CompareFn.EQ, lhs=(self._int(v0) % factor).value,
                                          rhs=self._const(0, v0)))
            for (i, j), copier in copiers.items():
                step = (i, j)[axis] if axis is not None else 0
                if (i, j) != (0, 0):
                    want = (self._int(v0) + step).value
                    conds.append(self.b.value(ops.Compare, fn=CompareFn.EQ, lhs=copier.get(v), rhs=want))
        ok = None
        for c in conds:
            ok = c if ok is None else self.b.value(ops.Binary, fn=BinaryFn.AND, lhs=ok, rhs=c)
        return ok

    def _region(self, fill) -> Block:
        block = Block()
        with self.b.inside(block):
            fill()
            self.b.emit(ops.Yield, values=())
        return block

    def _one_by_one(self, first: Value, blocks: Value, shared: dict[int, Value]) -> None:
        """The program's blocks one after the other, as written, down each column of the rectangle."""
        b, g = self.b, self.merge
        i32 = scalar(dt.int32)
        k = b.new_value(i32, "k")
        loop = Block([k])
        with b.inside(loop):
            step = self._int(k)
            user = self._block(first, step, 0) if g.cols == 1 else self._block(first, step % g.rows, step // g.rows)
            self._one_block(user, blocks, shared)
            b.emit(ops.Yield, values=())
        _without_tma(loop)
        b.emit(ops.For, lower=self._const(0, first), upper=self._const(g.blocks, first), step=self._const(1, first),
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
