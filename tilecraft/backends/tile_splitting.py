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

The other way round, a tf32 kernel of small tiles (32x32) on a grid of about four blocks per
SM runs with 4 of its blocks merged into one, one wave of taller tiles (passes/block_merge.py;
`auto_factors`, `auto_merge`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Sequence

from ..ir import Function
from ..passes.block_merge import BlockMerges
from ..passes.tile_split import TileSplits
from .base import INDEX32_LIMIT, ArrayFacts, ChosenPerGrid, CompiledKernel, SpecializedLaunchers, WrappedKernel

Grid = tuple[int, int, int]

MIN_AUTO_DIM = 64
"""Pieces of automatic splits are at least this long on every axis (`TileSplits.counts`): a
Hopper warpgroup's MMA has 64 rows, and 32-row pieces ran slower than 64 in the sweep above."""


PIECE_SPEED = ((32768, 1.0), (16384, 0.95), (8192, 0.70), (4096, 0.52))
"""Output elements per block -> the speed of a full GPU of such blocks relative to 128x256 ones:
the sample at 4096^3 with 128x256, 128x128, 64x128 and 64x64 tiles ran at 0.99, 0.94, 0.69 and
0.52x torch (size-sweep-h200-2026-12-01-i.json). Larger blocks count as 1.0, smaller as 0.52."""


def _piece_speed(elements: int) -> float:
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
        return _wave_use(blocks * count, sms) * _piece_speed(tile_elements // count)

    best = max([1, *counts], key=lambda c: (rate(c), -c))
    return None if best == 1 else best


MERGED_BLOCKS_PER_SM = 0.95
"""A merge leaves at least this many blocks per SM, and at most one (TC3's 512 blocks merged 4
to a block: 128 blocks on the H200's 132 SMs)."""

AUTO_FACTOR = 4


def auto_factors(merges: BlockMerges) -> list[int]:
    """The merge factors launches of a kernel may take on their own: 4, where every MMA takes
    tf32 operands. On the H200 the MatMul sample's 32x32x32 tiles ran (torch's time over
    ours, unmerged -> merged; merge-probe-h200-2026-12-02.json): TC3 fp32 0.71 -> 0.89 merged 4
    to a block (as written with 128x32 tiles: 0.89); 1024^3 and 2048x1024x512 fp32 unchanged
    (0.62 -> 0.63, 0.75 -> 0.75); but TC2 fp32 (256 blocks) 1.05 -> 0.93 merged 2 to a block,
    and fp16 at TC3's shape 1.14 -> 1.03 merged 4 to a block: 16-bit operands, half the bytes
    per MMA, already ran well on small tiles."""
    return [AUTO_FACTOR] if merges.tf32 and AUTO_FACTOR in merges.counts() else []


def auto_merge(grid: Grid, sms: int, counts: Sequence[int]) -> int | None:
    """The merge factor (one of `counts`) of a launch on `grid`: the largest that divides grid
    axis 0 and leaves one wave of blocks, `MERGED_BLOCKS_PER_SM` to 1 per SM; None when none
    does. The merges that paid made one wave of several: TC3's 512 blocks, 128 merged. Where
    more waves remained they did not (H200, tf32, 4 to a block; merge-deep-ab-h200-2026-12-02.json):
    1024^3 (256 merged blocks) 0.64 -> 0.65x torch, 2048x1024x512 (512) 0.76 -> 0.76x,
    4000x1000x700 (1000) 0.30 -> 0.22x."""
    blocks = math.prod(grid)
    return next((f for f in sorted(counts, reverse=True)
                 if grid[0] % f == 0 and MERGED_BLOCKS_PER_SM * sms <= blocks // f <= sms), None)


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
    `choose(grid, args)` gives a launch's count or None (run the kernel as compiled). Every
    attribute but launch and specialize is the kernel's as compiled (`main`). Subclasses say
    which grid a variant launches on (`variant_grid`)."""

    def __init__(self, main: CompiledKernel, build: Callable[[int], Function],
                 compile_variant: Callable[[Function, int], CompiledKernel],
                 choose: Callable[[Grid, Sequence[Any]], int | None]) -> None:
        self.main = main
        self._build = build
        self._compile_variant = compile_variant
        self._choose = choose
        self._variants: dict[int, CompiledKernel] = {}
        self._last_run: tuple[Grid, int, tuple[int, ...]] | None = None  # grid, count, ids of the arguments

    def variant_grid(self, grid: Grid, count: int) -> Grid | None:
        """The grid the variant for `count` launches on for a launch on `grid` (None: none)."""
        raise NotImplementedError

    def variant(self, count: int) -> CompiledKernel:
        """The variant for `count`, compiled on first use."""
        if count not in self._variants:
            self._variants[count] = self._compile_variant(self._build(count), count)
        return self._variants[count]

    def count(self, grid: Grid, args: Sequence[Any], dependent: bool) -> int | None:
        """The count of a launch, or None to run the kernel as compiled (also for a programmatic
        dependent launch, and a grid the variant cannot take)."""
        if dependent:
            return None
        count = self._choose(grid, args)
        return None if count is None or self.variant_grid(grid, count) is None else count

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        count = self.count(grid, args, dependent)
        self._last_run = None
        if count is None:
            return self.main.launch(grid, args, stream, dependent=dependent)
        self.variant(count).launch(self.variant_grid(grid, count), args, stream)
        self._last_run = (grid, count, tuple(map(id, args)))

    def specialize(self, args: Sequence[Any]) -> "GridVariantLauncher":
        """A launcher choosing per grid; where this kernel's last `launch` ran these very
        arguments on a variant (the runtime specializes after a launch), it starts with that
        variant's launcher and has a `fused_launch` for that grid."""
        last, self._last_run = self._last_run, None
        ran = last[:2] if last is not None and last[2] == tuple(map(id, args)) else None
        return GridVariantLauncher(self, args, ran)


class TileSplitKernel(GridVariantKernel):
    """A kernel with tile-split variants (see the module docstring; `build`: a `TileSplits`'
    `split`): the variant for S launches on a grid S times as long along axis 0."""

    def variant_grid(self, grid: Grid, count: int) -> Grid | None:
        if grid[0] * count >= INDEX32_LIMIT:
            return None
        return grid[0] * count, grid[1], grid[2]


class BlockMergeKernel(GridVariantKernel):
    """A kernel with block-merged variants (passes/block_merge.py; `build`: a `BlockMerges`'
    `merge`): the variant for F launches on a grid F times as short along axis 0, which F must
    divide."""

    def variant_grid(self, grid: Grid, count: int) -> Grid | None:
        if grid[0] % count:
            return None
        return grid[0] // count, grid[1], grid[2]


class GridVariantLauncher:
    """`GridVariantKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the kernel as compiled and of each variant, the count chosen once per grid.
    Made with the grid and count of the launch before it (`ran`), it has a `fused_launch` for
    that grid where the variant's launcher has one: the runtime's quick path then launches the
    variant in C (TC3 merged on the H200: 16.8 us of host time per launch through this launcher's
    `launch`, tc3-probe-h200-2026-12-02-p.json; 6.5 us through the quick path, -r)."""

    def __init__(self, kernel: GridVariantKernel, args: Sequence[Any], ran: tuple[Grid, int] | None) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()
        self._counts = ChosenPerGrid(lambda grid, args: kernel.count(grid, args, False))
        self._fused: Any = None
        if ran is not None:
            grid, count = ran
            inner = self._launchers.remember(count, kernel.variant(count), args)
            fused = getattr(inner, "fused_launch", None)
            self._fused = None if fused is None else fused(grid=(grid, kernel.variant_grid(grid, count)))

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
