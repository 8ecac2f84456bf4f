"""Split-K launches, shared by the backends: a kernel that `passes.split_k` can split runs, on a
grid that leaves most of the GPU idle, as its PARTIAL kernel on (G, S, 1) then its FINISH kernel
on (G, R, 1) (R row slices per tile: `SplitK.slices`), on the launch's stream, with a fresh
workspace between them; on any other grid it runs as compiled. What a backend supplies: how to
compile the two kernels, how many splits a launch gets (`auto_splits` from the GPU's SM count,
or a count forced for tests) and how to allocate the workspace on the launch's device and stream.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..ir import Function
from ..passes.split_k import SplitK
from .base import INDEX32_LIMIT, ArrayFacts, CompiledKernel, SpecializedLaunchers, WrappedKernel, array_facts

MAX_SPLITS = 8
"""At most this many splits: each costs a workspace tile written and read once."""

Grid = tuple[int, int, int]


def auto_splits(grid: Grid, sms: int) -> int | None:
    """The split count for `grid` on a GPU of `sms` SMs: a 1-D grid of G blocks that fills at
    most half of them gets min(8, sms // G) splits (so G * S <= sms); None otherwise."""
    blocks, y, z = grid
    if y != 1 or z != 1 or blocks * 2 > sms:
        return None
    return min(MAX_SPLITS, sms // blocks)


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
    launch and specialize is the kernel's as compiled (`main`): source, lowered, compile_for...

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

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return self._parts or ()

    def parts(self) -> tuple[CompiledKernel, CompiledKernel]:
        """PARTIAL and FINISH, compiled on first use."""
        if self._parts is None:
            self._parts = (self._compile_part(self.split.partial), self._compile_part(self.split.finish))
        return self._parts

    def splits(self, grid: Grid, args: Sequence[Any], dependent: bool) -> int | None:
        """The split count of a launch, or None to run the kernel as compiled (also for a
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
        splits = self.splits(grid, args, dependent)
        if splits is None:
            return self.main.launch(grid, args, stream, dependent=dependent)
        partial, finish = self.parts()
        full = self.split_args(grid, splits, args, stream)
        partial.launch((grid[0], splits, 1), full, stream)
        finish.launch((grid[0], self.split.slices, 1), full, stream)

    def specialize(self, args: Sequence[Any]) -> "SplitLauncher":
        return SplitLauncher(self)


class SplitLauncher:
    """`SplitKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the kernel as compiled and of PARTIAL and FINISH per (G, S) (the workspace's
    shape)."""

    def __init__(self, kernel: SplitKernel) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        k = self._kernel
        splits = k.splits(grid, args, dependent)
        if splits is None:
            return self._launchers.run_main(k.main, grid, args, stream, dependent)
        partial, finish = k.parts()
        full = k.split_args(grid, splits, args, stream)
        self._launchers.run(("partial", grid[0], splits), partial, (grid[0], splits, 1), full, stream)
        self._launchers.run(("finish", grid[0], splits), finish, (grid[0], k.split.slices, 1), full, stream)
