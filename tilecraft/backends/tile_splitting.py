"""Tile-split and block-merge launches, shared by the backends: a kernel that
`passes.tile_split` can split runs, on a grid that leaves most of the GPU idle, as its variant
with each output tile cut into S pieces, on a grid S times as long along axis 0; on any other
grid it runs as compiled.

On the H200 the cuTile MatMul sample (128x256 tiles) ran 0.56-0.69x torch from 256^3 to
1024^3, and 0.87-1.02x with 64x128 or 64x64 tiles, which fill more SMs; at 1536^3 and above
its own tiles were as fast or faster, but for 3072^3 (288 tiles: the third wave 18% full), where
128x128 tiles ran 8% faster (benchmarks/results/size-sweep-h200-2026-12-01-i.json). A launch
takes the split count that `auto_count`'s model of those runs rates fastest, pieces at least
`MIN_AUTO_DIM` on a side. What a backend supplies: how to compile a variant and how many SMs
the launch's GPU has (or a count forced for tests).

The other way round, a tf32 kernel of small tiles (32x32) on a grid of several blocks per SM
runs with a rectangle of its blocks merged into one, on one wave of larger tiles or (large
grids) on 128x128 ones (passes/block_merge.py; `auto_shapes`, `auto_merge`, `MergeFinder`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ..ir import Function
from ..passes.block_merge import MERGED_GROUP, BlockMerges, Merge
from ..passes.tile_split import TileSplits
from .base import (INDEX32_LIMIT, ArrayFacts, ChosenPerGrid, CompiledKernel, LastLaunch, SpecializedLaunchers,
                   WrappedKernel, fused_on_grid, fused_on_variant_grid)

Grid = tuple[int, int, int]

MIN_AUTO_DIM = 64
"""Pieces of automatic splits are at least this long on every axis (`TileSplits.counts`): a
Hopper warpgroup's MMA has 64 rows, and 32-row pieces ran slower than 64 in the sweep above."""


PIECE_SPEED = ((32768, 1.0), (16384, 0.95), (8192, 0.70), (4096, 0.52))
"""Output elements per block -> the speed of a full GPU of such blocks relative to 128x256 ones:
the sample at 4096^3 with 128x256, 128x128, 64x128 and 64x64 tiles ran at 0.99, 0.94, 0.69 and
0.52x torch (size-sweep-h200-2026-12-01-i.json). Larger blocks count as 1.0, smaller as 0.52."""


def piece_speed(elements: int) -> float:
    """A full GPU's speed in blocks of `elements` output elements, relative to 128x256 ones
    (`PIECE_SPEED`)."""
    return next((speed for size, speed in PIECE_SPEED if elements >= size), PIECE_SPEED[-1][1])


def _wave_use(blocks: int, sms: int) -> float:
    """The share of the SMs' block slots `blocks` blocks use, one block per SM per wave."""
    return blocks / (-(-blocks // sms) * sms)


def auto_count(grid: Grid, sms: int, counts: Sequence[int], tile_elements: int) -> int | None:
    """The split count (one of `counts`) a launch on `grid` runs fastest with by the model
    wave use x piece speed (`PIECE_SPEED`), for output tiles of `tile_elements`; None when
    splitting does not beat the tile as written. It picks the runs' best everywhere they
    measured (128x256 tiles on 132 SMs): 8 pieces for 2 to 16 tiles, 4 for 18 to 32, none for
    72 (1536^3) or 128, 2 for 288 (3072^3: the third wave 18% full), none for 384 (97% of three
    waves); between them, 2 for 34 to 66 tiles and wherever the last of several waves is at most
    half full."""
    blocks = math.prod(grid)

    def rate(count: int) -> float:
        return _wave_use(blocks * count, sms) * piece_speed(tile_elements // count)

    best = max([1, *counts], key=lambda c: (rate(c), -c))
    return None if best == 1 else best


MERGED_BLOCKS_PER_SM = 0.95
"""A merge leaves at least this many blocks per SM, and at most one (TC3's 512 blocks merged 4
to a block: 128 blocks on the H200's 132 SMs)."""

AUTO_SHAPES = ((2, 2), (4, 1), (4, 2), (2, 4), (4, 4), (4, 8))
"""The shapes (row tiles, column tiles) of the merges launches may take on their own, preferred
in this order among those of as many blocks. TC3 merged 2 x 2 against 4 x 1 with the check
(merge-probe-h200-2026-12-02-e.json, -f, -h, -i): 0.86, 0.94, 0.96, 0.89x torch against 0.85,
0.89, 0.92, 0.85x; unchecked, as launches take them, 0.89 against 0.88x (order-diag-h200-2026-12-02-b.json)."""


def auto_shapes(merges: BlockMerges) -> list[tuple[int, int]]:
    """The merge shapes launches of a kernel may take on their own (`AUTO_SHAPES`), where every
    MMA takes tf32 operands. On the H200 the MatMul sample's 32x32x32 tiles ran (torch's time
    over ours, unmerged -> merged; merge-probe-h200-2026-12-02.json): TC3 fp32 0.71 -> 0.89
    merged 4 x 1 (as written with 128x32 tiles: 0.89); but TC2 fp32 (256 blocks) 1.05 -> 0.93
    merged 2 x 1, and fp16 at TC3's shape 1.14 -> 1.03 merged 4 x 1: 16-bit operands, half the
    bytes per MMA, already ran well on small tiles."""
    allowed = merges.shapes() if merges.tf32 else []
    return [s for s in AUTO_SHAPES if s in allowed]


WIDE_SHAPES = {(4, 8): 1.0, (4, 4): 0.9, (4, 2): 0.78}
"""The merges launches of several waves take, of those that leave `WIDE_MIN_WAVES` and line up,
the fastest by the share of the last wave they fill (`_wave_use`) times their speed on full waves
(here: 128x256, 128x128 and 128x64 tiles of the sample's 32x32 ones). H200, unchecked,
programs in groups (merge-probe-h200-2026-12-02-j.json): 4096^3 4 x 8 0.93x torch against 4 x 4 0.83x, 8192^3 0.96
against 0.89-0.96x (written with 128x256x32 tiles: 0.94, 0.94x); checked, in the grid's order,
4 x 8 had lost (0.38, 0.45 against 0.67, 0.75x: -h). Grids of 3008 and 4000 blocks, too few for
two waves of 4 x 4 (3000x1000x700, 4000x1000x700, each with a tail: `Merge.head`; -l): 4 x 2
0.66, 0.60x against 4 x 4 0.50, 0.52x, 4 x 8 0.52, 0.53x, 0.33, 0.30x unmerged. 3000x3000x1000
(8836 blocks, 94 columns: merged in groups, `Merge.period`), staged: 4 x 4 (553 blocks, 4.2 waves)
0.82x, 4 x 8 (277, 2.1 waves) 0.61x (merge-probe-h200-2026-12-03.json). The speeds: 4 x 4 at
4096^3 0.83 / 0.93 of 4 x 8 (-j), 4 x 2 at 2048^3 staged 0.56 / 0.65 of 4 x 4 (-n)."""

LAST_RESORT = (4, 1)
"""The merge launches of several waves try last: one column of 4 row tiles lines up whatever the
number of columns (where merges in groups are ruled out and the count is odd, none of
`WIDE_SHAPES` lines up: `MergeFinder.find`). H200, against unmerged: 0.50 / 0.33x
torch at 3000x1000x700, 0.34 / 0.26x at 2048^3 (merge-probe-h200-2026-12-02-n.json), 0.33 /
0.21x at 8192^3 (-p)."""

WIDE_MIN_WAVES = 2
"""... where it leaves at least this many waves of blocks, each at least `MERGED_BLOCKS_PER_SM`
full (2048^3's 4096 blocks merged 4 x 4: 256 blocks, 1.94 per SM)."""

NEAR_BLOCKS_PER_SM = 0.7
"""Where no merge fills one wave (`MERGED_BLOCKS_PER_SM`) or leaves `WIDE_MIN_WAVES`, the largest
that leaves at least this many blocks per SM, and fewer than one wave. H200, unstaged, the
sample's 32x32x32 tiles (merge-probe-h200-2026-12-02-n.json): 1024x1536x1024's 1536 blocks
unmerged 0.51x torch, 4 x 4 (96 blocks, 0.73 per SM) 0.66x, 2 x 2 0.63x, 4 x 2 0.61x; 768x1024x1024's
768 blocks 0.70x, 2 x 4 or 4 x 2 (96 blocks) 0.75, 0.73x, 2 x 2 0.65x, 4 x 4 (48) 0.51x."""


def auto_merge(grid: Grid, sms: int, shapes: Sequence[tuple[int, int]],
               programs: Callable[[tuple[int, int]], int | None] | None = None) -> list[tuple[int, int]]:
    """The merge shapes (of `shapes`) worth trying for a launch on `grid`, best first: those
    that leave one wave of blocks, `MERGED_BLOCKS_PER_SM` to 1 per SM, the most blocks merged
    first; then those of `WIDE_SHAPES` that leave `WIDE_MIN_WAVES` waves or more, fastest first; then those
    leaving `NEAR_BLOCKS_PER_SM` up to one wave, the most blocks merged first; then `LAST_RESORT`
    where it leaves `WIDE_MIN_WAVES`. `programs` counts a shape's programs along axis 0 where the launch found
    how its merge runs (`MergeFinder.ranked`: merges in groups run more than the blocks over
    the merged ones; None: it does not line up), else that quotient. H200, fp32, the
    sample's 32x32x32 tiles, unmerged -> merged (merge-probe-h200-2026-12-02-f.json): one wave,
    TC3's 512 blocks 4 x 1 0.73 -> 0.91x torch (2 x 2 0.94x), 2048x1024x512's 2048 4 x 4 0.75 ->
    0.93x, 2048^3's 4096 4 x 8 0.26 -> 0.48x (4 x 4, two waves: 0.43x). Unchecked (`MergeFinder`;
    -h): 2048x1024x512 1.06x, 2048^3 0.55x; several waves, unchecked and in groups (-j): 4096^3
    0.22 -> 0.93x and 8192^3 0.22 -> 0.96x merged 4 x 8, 4000x1000x700 0.30 -> 0.60x merged 4 x
    2 (-l; `WIDE_SHAPES`). Staged, 2048^3's one wave of 4 x 8 0.71x against two of 4 x 4 0.65-0.67x
    (merge-probe-h200-2026-12-03-h.json; 0.57x in -n, when the one-program-per-block kernel kept
    the grid-loop kernel's 2 pipeline stages: `TritonKernel.small_grid_kernel`). Where
    fewer than one wave resulted, merging lost: 1024^3 4 x 4 (64 blocks) 0.62 -> 0.48x
    (merge-probe-h200-2026-12-02-e.json), TC2 2 x 1 (128) 1.05 -> 0.93x (-2026-12-02.json)."""
    counts = {s: (grid[0] // (s[0] * s[1]) if programs is None else programs(s)) for s in shapes}
    shapes = [s for s in shapes if counts[s] is not None]

    def merged(s: tuple[int, int]) -> int:
        return counts[s] * grid[1] * grid[2]

    def per_sm(s: tuple[int, int]) -> float:
        return merged(s) / sms

    def largest_first(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return sorted(found, key=lambda s: -s[0] * s[1])

    def waves(candidates: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        return [s for s in candidates if s in shapes and per_sm(s) >= WIDE_MIN_WAVES * MERGED_BLOCKS_PER_SM]

    def fastest_first(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return sorted(found, key=lambda s: -_wave_use(merged(s), sms) * WIDE_SHAPES[s])
    fits = largest_first([s for s in shapes if MERGED_BLOCKS_PER_SM <= per_sm(s) <= 1])
    near = largest_first([s for s in shapes if NEAR_BLOCKS_PER_SM <= per_sm(s) < MERGED_BLOCKS_PER_SM])
    wide = fastest_first(waves(list(WIDE_SHAPES)))
    return list(dict.fromkeys([*fits, *wide, *near, *waves([LAST_RESORT])]))


def check_merge_option(option: bool | int | tuple[int, int]) -> None:
    """A backend's `block_merge` option: True (automatic), False (never), a count F >= 2 (F x 1)
    or a shape (rows, cols) of at least two blocks."""
    shape = option if isinstance(option, tuple) else (option, 1)
    if not isinstance(option, bool) and not (len(shape) == 2 and all(isinstance(n, int) and n >= 1 for n in shape)
                                             and shape[0] * shape[1] >= 2):
        raise ValueError(f"block_merge must be True, False, a count >= 2 or a shape (rows, cols), got {option!r}")


def forced_shape(option: int | tuple[int, int]) -> tuple[int, int]:
    """A backend's forced `block_merge` option as a merge shape: F is F x 1."""
    return option if isinstance(option, tuple) else (option, 1)


MAX_TAIL = 0.25
"""The most of a grid's blocks a merge runs on their own, after its merged head (`Merge.head`)."""

MAX_STRIDE = 64
"""The largest distance between a merged block and its right-hand neighbour `MergeFinder` tries."""


class MergeFinder:
    """Finds the `Merge` of a shape whose blocks line up for a launch, from the user's index
    arithmetic: the kernel's prologue evaluated on the host for every block of the grid, as the
    interpreter runs it, and checked as the merged kernel checks it (passes/block_merge.py). The
    in-kernel check keeps any merge right; this picks one whose programs run merged: where some
    did not, each would run its blocks one after the other (H200, 4000x1000x700 fp32 merged 4 x 4,
    its last 5 row tiles' programs one by one: 0.30 -> 0.12x torch, against 0.94x for
    2048x1024x512, which lines up everywhere; merge-probe-h200-2026-12-02-e.json). Evaluations
    are remembered per grid and arguments' layouts and values. Where the prologue reads what a
    launch's specialization pins only (`BlockMerges.pinned`), a merge found lined up everywhere
    runs unchecked."""

    def __init__(self, merges: BlockMerges) -> None:
        self.merges = merges
        m = merges
        self._program = None
        if m.rows or m.cols or m.uniform:  # (in the order of `BlockMerges.checks`)
            from .interpreter.scalars import ScalarProgram  # the interpreter's semantics, on the host
            self._program = ScalarProgram(m.prologue, m.fn.params, (*m.rows, *m.cols, *m.uniform))
        self._values: dict[tuple, list[np.ndarray] | None] = {}

    def ranked(self, grid: Grid, args: Sequence[Any], shapes: Sequence[tuple[int, int]], sms: int) -> list[Merge]:
        """`find`'s merges of `shapes` for a launch on `grid`, each found once, in `auto_merge`'s
        order for `sms` SMs, counting the programs each runs."""
        found = {s: m for s in shapes if (m := self.find(s, grid, args)) is not None}
        order = auto_merge(grid, sms, list(found), lambda s: found[s].programs(grid[0]))
        return [found[s] for s in order]

    def first(self, grid: Grid, args: Sequence[Any], shapes: Sequence[tuple[int, int]],
              everywhere: bool = True) -> Merge | None:
        """`find`'s merge for the first of `shapes` that has one, or None."""
        return next((m for s in shapes if (m := self.find(s, grid, args, everywhere)) is not None), None)

    def find(self, shape: tuple[int, int], grid: Grid, args: Sequence[Any], everywhere: bool = True) -> Merge | None:
        """The merge of `shape` (rows, cols) for a launch on `grid` whose programs all line up,
        with the smallest stride (a multiple of the rows) that does; else one whose spans
        restart at every group of the user's order (`_in_groups`); else one whose programs
        line up but for at most `MAX_TAIL` of the grid's blocks at its end, which run on their
        own (`Merge.head`; in groups where only those do); None where none does. One column:
        consecutive blocks. Not `everywhere` (tests and probes, which force merges), where none
        does: one column whether
        they line up or not, more where the first and the middle program do. Merges whose
        programs line up run unchecked where the prologue allows (`BlockMerges.pinned`)."""
        rows, cols = shape
        strides = [rows] if cols == 1 else range(rows, min(grid[0] // cols, MAX_STRIDE) + 1, rows)
        merges = [Merge(rows, cols, s) for s in strides if grid[0] >= s * cols]
        whole = [m for m in merges if grid[0] % m.span == 0]
        if self._program is None:  # the rows are bid(0) itself, which lines up
            return whole[0] if whole and cols == 1 else None
        values = self._evaluate(grid, args) if merges else None
        if values is None:
            return None
        checked: dict[Merge, np.ndarray] = {}

        def lined(m: Merge) -> np.ndarray:  # per program over the whole spans, each merge once
            if m not in checked:
                checked[m] = self._lined(m, values, np.arange(grid[0] // m.span * m.per_span))
            return checked[m]
        found = next((m for m in whole if lined(m).all()), None)
        grouped = self._in_groups(shape, grid, args, values) if found is None else None
        if grouped is not None and not grouped.head:
            return grouped
        if found is None:
            found = next((h for m in merges if (h := self._with_head(m, lined(m), grid[0])) is not None), None)
        if found is not None:
            found = self._ordered(found, values, found.head or grid[0] // found.blocks)
            return replace(found, checked=not self.merges.pinned)
        if grouped is not None or everywhere:
            return grouped
        return next((m for m in whole if cols == 1 or lined(m)[sorted({0, len(lined(m)) // 2})].all()), None)

    def _in_groups(self, shape: tuple[int, int], grid: Grid, args: Sequence[Any],
                   values: list[np.ndarray]) -> Merge | None:
        """The merge of `shape` whose spans restart at every group of the user's order
        (`Merge.period`), with the grid's last group merged or, failing that, on its own (a
        head), where its rectangles cover the grid's blocks (`_covers`); else None. The groups
        are read off the column index: `stride` blocks down a column, `period` blocks before it
        first goes back."""
        m, (rows, cols), n = self.merges, shape, grid[0]
        if cols == 1 or not m.pinned or m.stores is None or len(m.rows) != 1 or len(m.cols) != 1:
            return None
        row, col = values[0], values[1]
        moved, back = np.flatnonzero(col != col[0]), np.flatnonzero(np.diff(col) < 0)
        stride = int(moved[0]) if len(moved) else 0
        period = int(back[0]) + 1 if len(back) else n
        if not stride or stride % rows or period % stride:
            return None
        groups, rest = divmod(n, period)
        last, extra = divmod(rest, period // stride)
        if not groups or extra or last >= stride:
            return None
        column = row[groups * period:groups * period + last]  # the last group's first column
        shift = int(np.argmin(column)) if last else 0
        merge = Merge(rows, cols, stride, checked=False, period=period, groups=groups, last=last, shift=shift)
        heads = (merge, replace(merge, head=groups * merge.per_group)) if last else (merge,)
        return next((h for h in heads if self._covers(h, n, args, values)), None)

    def _covers(self, merge: Merge, user_blocks: int, args: Sequence[Any], values: list[np.ndarray]) -> bool:
        """Whether the rectangles of `merge`'s merged programs, placed at their first blocks'
        row and column tile (multiples of its sides), hold each of the blocks it runs merged
        once, with the same other values as the first, and otherwise only tiles that every store
        drops (past its array's end): a merge in groups (`Merge.period`), whose merged tiles may
        reach past the grid's last row and column tiles, runs correctly exactly then."""
        m = self.merges
        programs = np.arange(merge.head or merge.programs(user_blocks))
        merged = merge.covered(merge.head) if merge.head else user_blocks
        row, col = values[0][:merged], values[1][:merged]
        first = merge.first(programs)
        if first.min() < 0 or first.max() >= merged:
            return False
        top, left = row[first], col[first]
        if (top % merge.rows).any() or (left % merge.cols).any() or row.min() < 0 or col.min() < 0 \
                or (row.max() + merge.rows) * (col.max() + merge.cols) > 16 * merged + 4096:
            return False
        owner = np.full((row.max() + merge.rows, col.max() + merge.cols), -1)
        owner[row, col] = np.arange(merged)
        tiles_r = top[:, None, None] + np.arange(merge.rows)[None, :, None]
        tiles_c = left[:, None, None] + np.arange(merge.cols)[None, None, :]
        held = owner[tiles_r, tiles_c]
        present = held >= 0
        if not (np.bincount(held[present], minlength=merged) == 1).all():
            return False  # a block in two rectangles or none (or two blocks on one tile)
        for v in values[2:]:
            if not (v[held[present]] == np.broadcast_to(v[first][:, None, None], held.shape)[present]).all():
                return False
        missing = ~present
        return all(s.past_end(tuple(args[s.param].shape), tiles_r, tiles_c)[missing].all() for s in m.stores)

    @staticmethod
    def _with_head(merge: Merge, lined: np.ndarray, user_blocks: int) -> Merge | None:
        """`merge` with a head of its leading programs that line up (whole spans), where the
        blocks after them are at most `MAX_TAIL` of the grid's; None where they are more."""
        leading = len(lined) if lined.all() else int(np.argmin(lined))
        head = leading // merge.per_span * merge.per_span
        if not head or user_blocks - head * merge.blocks > MAX_TAIL * user_blocks:
            return None
        return replace(merge, head=head)

    def _evaluate(self, grid: Grid, args: Sequence[Any]) -> list[np.ndarray] | None:
        """The checked prologue values of every block along grid axis 0 (None: the arguments do
        not follow the kernel's parameters)."""
        from .interpreter.scalars import layout_key
        key = (grid, layout_key(args))
        if key not in self._values:
            ok = len(args) == len(self.merges.fn.params)
            self._values[key] = self._program(args, grid, np.arange(grid[0])) if ok else None
        return self._values[key]

    def _ordered(self, merge: Merge, values: list[np.ndarray], programs: int) -> Merge:
        """`merge` with its programs taking their rectangles `MERGED_GROUP` merged row tiles at
        a time (`Merge.band`) where, in the grid's order, they run bands of the user's tiles as
        the sample's grouped order does; else `merge`."""
        m = self.merges
        if not m.rows or not m.cols or merge.cols == 1:
            return merge
        firsts = merge.first(np.arange(programs))
        row = values[0][firsts] // merge.rows
        col = values[len(m.rows)][firsts] // merge.cols
        per_span = merge.per_span
        starts = row[::per_span]  # each span's first merged row tile
        band = int(np.argmax(starts != starts[0])) if (starts != starts[0]).any() else len(starts)
        q = np.arange(programs)
        in_bands = programs % (per_span * band) == 0 and (row == q // (per_span * band) * per_span + q % per_span).all() \
            and (col == q // per_span % band).all()
        tall = programs // band
        group = max((h for h in range(2 * per_span, MERGED_GROUP + 1, per_span) if tall % h == 0), default=0)
        return replace(merge, band=band, group=group) if in_bands and band > 1 and group else merge

    def _lined(self, merge: Merge, values: list[np.ndarray], programs: np.ndarray) -> np.ndarray:
        """Per program of `programs` (in the grid's order), whether its blocks pass the merged
        kernel's check."""
        i = np.arange(merge.rows)[None, :, None]
        j = np.arange(merge.cols)[None, None, :]
        blocks = merge.block(merge.first(programs)[:, None, None], i, j)
        ok = np.ones(blocks.shape, dtype=bool)
        for (_, axis, factor), v in zip(self.merges.checks(merge), values):
            at = v[blocks]
            v0 = at[:, :1, :1]
            ok &= (at == v0 + (0 if axis is None else (i, j)[axis])) & (v0 % factor == 0)
        return ok.all(axis=(1, 2))


@dataclass(frozen=True)
class TilePieces:
    """How a kernel's output tiles may be cut for a launch (`splits`; None: not at all): into any
    of `counts` pieces, or (`forced`, tests) into that many on every launch."""

    splits: TileSplits | None
    counts: tuple[int, ...]
    forced: int | None = None

    @property
    def elements(self) -> int:
        """The elements of a whole output tile (0 where tiles are not cut)."""
        return 0 if self.splits is None else math.prod(self.splits.shape)


def tile_pieces(splits: TileSplits | None, forced: int | None) -> TilePieces:
    """How tiles that `splits` can cut (None: none) may be cut: into any count of pieces at
    least MIN_AUTO_DIM long, or into `forced` on every launch where that is a count they allow;
    not at all where no count is left."""
    counts = [] if splits is None else splits.counts(MIN_AUTO_DIM) if forced is None else [
        c for c in splits.counts() if c == forced]
    return TilePieces(splits, tuple(counts), forced) if counts else TilePieces(None, ())


def piece_facts(splits: TileSplits, count: int, facts: Sequence[ArrayFacts | None]) -> list[ArrayFacts | None]:
    """The parameters' facts for the variant split `count` ways. Along an array axis that the
    user's tiles do not divide, a tile straddles the end and a piece of it may lie wholly past
    it; a piece extent that divides the axis would let a backend treat every piece as inside
    or outside as a whole (`ArrayFacts.tiles_evenly`) and read that piece unchecked. Such axes
    keep only divisors below the piece extent."""
    out = list(facts)
    index = {p.id: i for i, p in enumerate(splits.fn.params)}
    for array, axis, extent, piece in splits.cuts(count):
        i = index.get(array)
        f = out[i] if i is not None and i < len(out) else None
        if f is None or f.tiles_evenly(axis, extent):
            continue
        dims = list(f.dim_pow2)
        dims[axis] = min(dims[axis], max(1, piece // 2))
        out[i] = replace(f, dim_pow2=tuple(dims))
    return out


class GridVariantKernel(WrappedKernel):
    """A compiled kernel with variants derived from it for some launch grids: `build(count)` makes
    the variant for a count, `compile_variant(fn, count)` compiles it at its first launch, and
    `choose(grid, args)` gives a launch's count or None (run the kernel as compiled); a count is
    a split count or a `Merge`. Every
    attribute but launch and specialize is the kernel's as compiled (`main`). Subclasses say
    which grid a variant launches on (`variant_grid`)."""

    def __init__(self, main: CompiledKernel, build: Callable[[Hashable], Function],
                 compile_variant: Callable[[Function, Hashable], CompiledKernel],
                 choose: Callable[[Grid, Sequence[Any]], Hashable | None]) -> None:
        self.main = main
        self._build = build
        self._compile_variant = compile_variant
        self._choose = choose
        self._variants: dict[Hashable, CompiledKernel] = {}
        self._last_run = LastLaunch()  # what ran: the count (None: the kernel as compiled)

    def variant_grid(self, grid: Grid, count: Hashable) -> Grid | None:
        """The grid the variant for `count` launches on for a launch on `grid` (None: none)."""
        raise NotImplementedError

    def variant_ir(self, count: Hashable) -> Function:
        """The variant's Tile IR for `count` (built anew: what `variant` compiles)."""
        return self._build(count)

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return tuple(self._variants.values())

    def variant(self, count: Hashable) -> CompiledKernel:
        """The variant for `count`, compiled on first use."""
        if count not in self._variants:
            self._variants[count] = self._compile_variant(self._build(count), count)
        return self._variants[count]

    def count(self, grid: Grid, args: Sequence[Any], dependent: bool) -> Hashable | None:
        """The count of a launch, or None to run the kernel as compiled (also for a programmatic
        dependent launch, and a grid the variant cannot take)."""
        if dependent:
            return None
        count = self._choose(grid, args)
        return None if count is None or self.variant_grid(grid, count) is None else count

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        count = self.count(grid, args, dependent)
        self._last_run.forget()
        if count is None:
            self.main.launch(grid, args, stream, dependent=dependent)
        else:
            self.variant(count).launch(self.variant_grid(grid, count), args, stream)
        if not dependent:
            self._last_run.record(grid, count, args)

    def specialize(self, args: Sequence[Any]) -> "GridVariantLauncher":
        """A launcher choosing per grid; where this kernel's last `launch` ran these very
        arguments (the runtime specializes after a launch), it starts with the launcher of what
        ran them, a variant or the kernel as compiled, and has a `fused_launch` for that grid."""
        return GridVariantLauncher(self, args, self._last_run.take(args))


class TileSplitKernel(GridVariantKernel):
    """A kernel with tile-split variants (see the module docstring; `build`: a `TileSplits`'
    `split`): the variant for S launches on a grid S times as long along axis 0."""

    def variant_grid(self, grid: Grid, count: int) -> Grid | None:
        if grid[0] * count >= INDEX32_LIMIT:
            return None
        return grid[0] * count, grid[1], grid[2]


class BlockMergeKernel(GridVariantKernel):
    """A kernel with block-merged variants (passes/block_merge.py; `build`: a `BlockMerges`'
    `merge`, its counts `Merge`s): the variant for a merge of F blocks launches on a grid F times
    as short along axis 0, which the merge's span must divide, or with a head (`Merge.head`) on
    the head's programs and one more per block after them (`Merge.programs`)."""

    def variant_grid(self, grid: Grid, count: Merge) -> Grid | None:
        programs = count.programs(grid[0])
        return None if programs is None else (programs, grid[1], grid[2])


class GridVariantLauncher:
    """`GridVariantKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the kernel as compiled and of each variant, the count chosen once per grid.
    Made with the grid and count of the launch before it (`ran`), it has a `fused_launch` for
    that grid where the variant's launcher has one: the runtime's quick path then launches the
    variant in C (TC3 merged on the H200: 16.8 us of host time per launch through this launcher's
    `launch`, tc3-probe-h200-2026-12-02-p.json; 6.5 us through the quick path, -r); where the
    kernel as compiled ran that grid (count None), that kernel's launcher's, for that grid only
    (`fused_on_grid`)."""

    def __init__(self, kernel: GridVariantKernel, args: Sequence[Any],
                 ran: tuple[Grid, Hashable | None] | None) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()
        self._counts = ChosenPerGrid(lambda grid, args: kernel.count(grid, args, False))
        self._fused: Any = None
        if ran is not None and ran[1] is None:
            self._fused = fused_on_grid(self._launchers.remember_main(kernel.main, args), ran[0])
        elif ran is not None:
            grid, count = ran
            inner = self._launchers.remember(count, kernel.variant(count), args)
            self._fused = fused_on_variant_grid(inner, grid, kernel.variant_grid(grid, count))

    def fused_launch(self) -> Any:
        """The variant's launch on the grid the launch before this launcher ran, for the
        runtime's quick path (a `FusedLaunch`); None where there is none."""
        return self._fused

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        k = self._kernel
        count = self._counts.get(grid, args, dependent)
        if count is None:
            return self._launchers.run_main(k.main, grid, args, stream, dependent)
        self._launchers.run(count, k.variant(count), k.variant_grid(grid, count), args, stream)
