"""Split-K launches, shared by the backends: a kernel that `passes.split_k` can split runs, on a
grid that leaves most of the GPU idle with a long K loop, as its PARTIAL kernel on (G, S, 1) then
its FINISH kernel on (G, R, 1) (R row slices per tile: `SplitK.slices`), on the launch's stream,
with a fresh workspace between them; any other launch runs the kernel it wraps (as compiled, or
tile-split...). What a backend supplies: how to compile the two kernels, how many splits a
launch gets (`auto_splits` from the GPU's SM count and the K loop's extent, or a count forced
for tests) and how to allocate the workspace on the launch's device and stream.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..ir import Function
from ..passes.split_k import SplitK
from .base import (INDEX32_LIMIT, ArrayFacts, ChosenPerGrid, CompiledKernel, FusedLaunch, LastLaunch,
                   SpecializedLaunchers, WrappedKernel, array_facts, fused_on_grid)

MIN_SPLIT_K = 1024
"""Each split walks at least this much of the K loop's extent: every split costs a workspace tile
written and read once, which shorter chunks do not pay back. H200, fp16 with 128x256x64 tiles
(`size-sweep-h200-2026-12-03-b.json`): 256x256x16384 0.33x torch as launched (tile-split), 0.57x
in 16 splits of 1024, 0.42x in 64 of 256; cubic sizes, whose K is short, ran slower split at
every count (`size-sweep-h200-2026-12-01-e.json`)."""

Grid = tuple[int, int, int]


def auto_splits(grid: Grid, sms: int, k_extent: int | None) -> int | None:
    """The split count for `grid` on a GPU of `sms` SMs when the K loop reaches `k_extent`
    (None: not known): a 1-D grid of G blocks that fills at most half of them gets as many
    splits as keep G * S within the SMs and each split's share of K at least MIN_SPLIT_K, where
    that is 2 or more; None otherwise."""
    blocks, y, z = grid
    if y != 1 or z != 1 or blocks * 2 > sms or k_extent is None:
        return None
    splits = min(sms // blocks, k_extent // MIN_SPLIT_K)
    return splits if splits >= 2 else None


def forced_splits(grid: Grid, splits: int) -> int | None:
    """`splits` for any 1-D grid (tests force the split where no SMs are counted)."""
    return splits if grid[1] == grid[2] == 1 else None


def check_split_option(split_k: bool | int) -> None:
    """A backend's `split_k` option: True (automatic), False (never) or a split count >= 1."""
    if not (isinstance(split_k, bool) or (isinstance(split_k, int) and split_k >= 1)):
        raise ValueError(f"split_k must be True, False or a split count >= 1, got {split_k!r}")


def part_facts(fn: Function, facts: Sequence[ArrayFacts | None], split: SplitK) -> list[ArrayFacts | None]:
    """Facts of PARTIAL's and FINISH's parameters: `fn`'s, none for S, and the workspace's, which
    hold for every workspace (dense, 16-byte aligned, a whole number of accumulator tiles)."""
    shape = split.acc.shape
    strides = tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
    work = array_facts(0, shape, strides, split.acc.dtype.bitwidth // 8, False)
    return [*facts, *[None] * (len(fn.params) - len(facts)), None, work]


class SplitKernel(WrappedKernel):
    """A compiled kernel with split-K variants (see the module docstring). Every attribute but
    launch and specialize is the wrapped kernel's (`main`; in turn the kernel as compiled's):
    source, lowered, compile_for...

    `compile_part(fn)` compiles PARTIAL or FINISH (at the first split launch); `choose(grid,
    args)` gives a launch's split count or None; `workspace(shape, args, stream)` a fresh array
    of the accumulator's dtype for the launch."""

    def __init__(self, main: CompiledKernel, split: SplitK, compile_part: Callable[[Function], CompiledKernel],
                 choose: Callable[[Grid, Sequence[Any]], int | None],
                 workspace: Callable[[tuple[int, ...], Sequence[Any], Any], Any]) -> None:
        self.main = main
        self.split = split
        self._compile_part = compile_part
        self._choose = choose
        self._workspace = workspace
        self._parts: tuple[CompiledKernel, CompiledKernel] | None = None
        self._last_run = LastLaunch()  # unsplit launches, for `specialize`

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return self._parts or ()

    def parts(self) -> tuple[CompiledKernel, CompiledKernel]:
        """PARTIAL and FINISH, compiled on first use."""
        if self._parts is None:
            self._parts = (self._compile_part(self.split.partial), self._compile_part(self.split.finish))
        return self._parts

    def splits(self, grid: Grid, args: Sequence[Any], dependent: bool) -> int | None:
        """The split count of a launch, or None to run the wrapped kernel (also for a
        programmatic dependent launch, and a workspace too large for 32-bit offsets)."""
        if dependent:
            return None
        count = self._choose(grid, args)
        if count is None or count * grid[0] * math.prod(self.split.acc.shape) >= INDEX32_LIMIT:
            return None
        return count

    def split_args(self, grid: Grid, splits: int, args: Sequence[Any], stream: Any) -> list[Any]:
        """`args` followed by PARTIAL's and FINISH's S and a fresh workspace."""
        return [*args, splits, self._workspace(self.split.workspace_shape(grid[0], splits), args, stream)]

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        self._last_run.forget()
        splits = self.splits(grid, args, dependent)
        if splits is None:
            self.main.launch(grid, args, stream, dependent=dependent)
            if not dependent:
                self._last_run.record(grid, None, args)
            return
        partial, finish = self.parts()
        full = self.split_args(grid, splits, args, stream)
        partial.launch((grid[0], splits, 1), full, stream)
        finish.launch((grid[0], self.split.slices, 1), full, stream)

    def specialize(self, args: Sequence[Any]) -> "SplitLauncher":
        """A launcher choosing the split per grid; where this kernel's last `launch` ran these
        very arguments unsplit (the runtime specializes after a launch), it starts with the
        wrapped kernel's launcher and its fused launch for that grid."""
        return SplitLauncher(self, args, self._last_run.take(args))


class SplitLauncher:
    """`SplitKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the wrapped kernel and of PARTIAL and FINISH per (G, S) (the workspace's shape),
    the split chosen once per grid. Made after an unsplit launch (`ran`: its grid), it has the
    wrapped kernel's fused launch for that grid (`fused_on_grid`), so unsplit launches keep the
    runtime's quick path; split ones (two launches and a workspace) do not."""

    def __init__(self, kernel: SplitKernel, args: Sequence[Any], ran: tuple[Grid, None] | None) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()
        self._splits = ChosenPerGrid(lambda grid, args: kernel.splits(grid, args, False))
        self._fused = None if ran is None else fused_on_grid(self._launchers.remember_main(kernel.main, args), ran[0])

    def fused_launch(self) -> FusedLaunch | None:
        """The wrapped kernel's launch on the grid the launch before this launcher ran, for the
        runtime's quick path; None where there is none."""
        return self._fused

    @property
    def main(self) -> Any:
        """The specialized launcher of the kernel this one wraps, once an unsplit launch made it
        (None before)."""
        return self._launchers.made(SpecializedLaunchers.MAIN)

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        k = self._kernel
        splits = self._splits.get(grid, args, dependent)
        if splits is None:
            return self._launchers.run_main(k.main, grid, args, stream, dependent)
        partial, finish = k.parts()
        full = k.split_args(grid, splits, args, stream)
        self._launchers.run(("partial", grid[0], splits), partial, (grid[0], splits, 1), full, stream)
        self._launchers.run(("finish", grid[0], splits), finish, (grid[0], k.split.slices, 1), full, stream)
