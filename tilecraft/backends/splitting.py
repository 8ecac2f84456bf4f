"""Split-K launches, shared by the backends: a kernel that `passes.split_k` can split runs, on a
grid that leaves most of the GPU idle with a long K loop, as its PARTIAL kernel on (G, S, 1) then
its FINISH kernel on (G, R, 1) (R row slices per tile: `SplitK.slices`), on the launch's stream,
with a fresh workspace between them; any other launch runs the kernel it wraps (as compiled, or
tile-split...). Where G blocks times the splits a K loop's length allows still leave SMs idle,
the split runs on each output tile cut into P pieces (`passes.tile_split`): PARTIAL and FINISH
of that variant, on G * P blocks. What a backend supplies: how to compile the two kernels, how
a launch splits (`auto_split` from the GPU's SM count and the K loop's extent, or counts forced
for tests) and how to allocate the workspace on the launch's device and stream.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..ir import Function
from ..passes.split_k import SplitK
from .base import (INDEX32_LIMIT, ArrayFacts, ChosenPerGrid, CompiledKernel, FusedLaunch, LastLaunch,
                   SpecializedLaunchers, WrappedKernel, array_facts, fused_on_grid)
from .tile_splitting import piece_speed

MIN_SPLIT_K = 512
"""Each split walks at least this much of the K loop's extent: the shortest splits measured
(`WORKSPACE_K`); 256x256x4096 ran fastest in 8 of 512."""

WORKSPACE_K = 5
"""What a split's workspace tile costs (PARTIAL writes it, FINISH reads it back: 8 bytes per
output element in fp32, through the memory bandwidth all blocks share), in steps of K of one
block's MMA loop: about 4 x an SM's MMA rate / the GPU's memory bandwidth, ~5.8 for fp16 on the
H200.
`auto_split`'s model with this value picked the fastest split of every fp16 case measured
(GPU time of PARTIAL and FINISH, 128x256x64 tiles cut into 1 to 8 pieces, 2 to 32 splits:
benchmarks/results/split-k-search-h200-2026-12-03.json): 128x256x16384 8 pieces x 16 splits
(7.3 us, torch 8.2), 256x256x16384 4 x 16 (9.1, torch 9.3), 256x256x4096 8 x 8 (5.5, 6.1),
512x512x16384 2 x 8 (18.2 against 23.2 for whole tiles x 16; torch 16.9), 512x512x4096 4 x 4
(8.7, 8.7), 1024x1024x16384 2 x 2 (54.0, 51.1); 256x512x65536 2 x 16 (37.0 against the best
36.9; torch 32.9). Values from 4 to 6 pick the same; 2 or 8 pick splits up to 24% slower."""

FINISH_K = 256
"""What FINISH costs besides the workspace, in the same steps: its launch and pass, 2.5-2.8 us on
the H200 for 128x256 and 256x256 outputs (split-k-probe-h200-2026-12-03-b.json), about 270 steps
of a 128x256x64 block's loop (151 us for 16384 unsplit). It keeps short K loops unsplit where
cutting the tiles alone fills the GPU (512x512x2048: 8 pieces, no split)."""

Grid = tuple[int, int, int]

Split = tuple[int, int]
"""How a launch splits: (P, S), each output tile cut into P pieces (1: whole), the K loop of
each split S ways."""


def auto_split(grid: Grid, sms: int, k_extent: int | None, pieces: Sequence[int] = (1,),
               tile_elements: int = 0) -> Split | None:
    """How a launch on `grid` splits on a GPU of `sms` SMs when the K loop reaches `k_extent`
    (None: not known), its tiles of `tile_elements` cut into one of `pieces` (1: whole): a 1-D
    grid of G blocks that fills at most half of them. Of the splits into P pieces and S splits
    of at least MIN_SPLIT_K that run in one wave (G * P * S blocks at most the SMs), the one the
    model K / (P * S * speed(P)) + WORKSPACE_K * G * S + FINISH_K rates fastest (each block's MMA
    loop shortened P * S times, at its piece's speed relative to the whole tile's: `piece_speed`;
    plus the workspace's traffic and FINISH), where it beats S = 1 (no split-K, no FINISH: the
    kernel wrapped, tile split on its own); None otherwise."""
    blocks, y, z = grid
    if y != 1 or z != 1 or blocks * 2 > sms or k_extent is None:
        return None
    whole = piece_speed(tile_elements)

    def cost(split: Split) -> float:
        p, s = split
        speed = 1.0 if p == 1 else piece_speed(tile_elements // p) / whole
        return k_extent / (p * s * speed) + (WORKSPACE_K * blocks * s + FINISH_K if s > 1 else 0)

    found = [(p, s) for p in pieces for s in range(1, min(sms // (blocks * p), k_extent // MIN_SPLIT_K) + 1)]
    best = min(found, key=lambda f: (cost(f), f), default=None)
    return None if best is None or best[1] < 2 else best


def forced_split(grid: Grid, splits: int, pieces: int = 1) -> Split | None:
    """`splits` of tiles cut into `pieces` for any 1-D grid (tests force the split where no SMs
    are counted)."""
    return (pieces, splits) if grid[1] == grid[2] == 1 else None


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

    `split` is the split of the kernel's whole tiles, `pieces(P)` that of its variant with each
    output tile cut into P pieces (None where there is none); `compile_part(fn, split, P)`
    compiles PARTIAL or FINISH of one (at the first launch that runs it); `choose(grid, args)`
    gives a launch's `Split` or None; `workspace(shape, args, stream)` a fresh array of the
    accumulator's dtype for the launch; `quick_workspace`, where the backend has one, the same
    for the runtime's quick path, or None, having allocated nothing, where the launch must take
    the normal way (see `SplitLauncher`)."""

    def __init__(self, main: CompiledKernel, split: SplitK,
                 compile_part: Callable[[Function, SplitK, int], CompiledKernel],
                 choose: Callable[[Grid, Sequence[Any]], Split | None],
                 workspace: Callable[[tuple[int, ...], Sequence[Any], Any], Any],
                 pieces: Callable[[int], SplitK | None] = lambda count: None,
                 quick_workspace: Callable[[tuple[int, ...], Sequence[Any], Any], Any] | None = None) -> None:
        self.main = main
        self.split = split
        self._compile_part = compile_part
        self._choose = choose
        self._workspace = workspace
        self.quick_workspace = quick_workspace
        self._pieces = pieces
        self._splits_of: dict[int, SplitK | None] = {1: split}
        self._parts: dict[int, tuple[CompiledKernel, CompiledKernel]] = {}
        self._last_run = LastLaunch()  # for `specialize`: the grid and its split (None: unsplit)

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return tuple(kernel for parts in self._parts.values() for kernel in parts)

    def split_of(self, pieces: int) -> SplitK | None:
        """The split of the kernel with each output tile cut into `pieces` (1: whole)."""
        if pieces not in self._splits_of:
            self._splits_of[pieces] = self._pieces(pieces)
        return self._splits_of[pieces]

    def parts(self, pieces: int = 1) -> tuple[CompiledKernel, CompiledKernel]:
        """PARTIAL and FINISH of the tiles cut into `pieces`, compiled on first use."""
        if pieces not in self._parts:
            split = self.split_of(pieces)
            assert split is not None, pieces
            self._parts[pieces] = (self._compile_part(split.partial, split, pieces),
                                   self._compile_part(split.finish, split, pieces))
        return self._parts[pieces]

    def splits(self, grid: Grid, args: Sequence[Any], dependent: bool) -> Split | None:
        """How a launch splits, or None to run the wrapped kernel (also for a programmatic
        dependent launch, tiles that cannot be cut so, and a workspace too large for 32-bit
        offsets)."""
        if dependent:
            return None
        chosen = self._choose(grid, args)
        if chosen is None:
            return None
        pieces, count = chosen
        split = self.split_of(pieces)
        if split is None or count * grid[0] * pieces * math.prod(split.acc.shape) >= INDEX32_LIMIT:
            return None
        return chosen

    def split_args(self, grid: Grid, chosen: Split, args: Sequence[Any], stream: Any,
                   quick: bool = False) -> list[Any] | None:
        """The arguments of PARTIAL and FINISH for a launch on `grid` split as `chosen`: `args`
        followed by S and a fresh workspace (`quick`: from `quick_workspace`, None where it
        declines)."""
        pieces, count = chosen
        split = self.split_of(pieces)
        assert split is not None, pieces
        make = self.quick_workspace if quick else self._workspace
        work = make(split.workspace_shape(grid[0] * pieces, count), args, stream)
        return None if work is None else [*args, count, work]

    def part_launches(self, grid: Grid, chosen: Split) -> tuple[tuple[CompiledKernel, Grid], ...]:
        """PARTIAL and FINISH of a launch on `grid` split as `chosen`, each with its grid."""
        pieces, count = chosen
        blocks, slices = grid[0] * pieces, self.split_of(pieces).slices
        partial, finish = self.parts(pieces)
        return (partial, (blocks, count, 1)), (finish, (blocks, slices, 1))

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        self._last_run.forget()
        chosen = self.splits(grid, args, dependent)
        if chosen is None:
            self.main.launch(grid, args, stream, dependent=dependent)
        else:
            full = self.split_args(grid, chosen, args, stream)
            for kernel, on in self.part_launches(grid, chosen):
                kernel.launch(on, full, stream)
        if not dependent:
            self._last_run.record(grid, chosen, args)

    def specialize(self, args: Sequence[Any]) -> "SplitLauncher":
        """A launcher choosing the split per grid; where this kernel's last `launch` ran these
        very arguments (the runtime specializes after a launch), it has a fused launch for that
        grid (see `SplitLauncher`)."""
        return SplitLauncher(self, args, self._last_run.take(args))


class SplitLauncher:
    """`SplitKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the wrapped kernel and of PARTIAL and FINISH per (G, P, S) (the workspace's
    shape), the split chosen once per grid. Made after a launch (`ran`: its grid and split), it
    has a fused launch for that grid, for the runtime's quick path: unsplit, the wrapped kernel's
    (`fused_on_grid`); split, this launcher's two launches on a workspace from the kernel's
    `quick_workspace` (where it has one). Without it a split launch took 80-90 us of host time
    on the H200, against 24 us unsplit, 6-10 us more than its kernels' GPU time
    (benchmarks/results/split-k-probe-h200-2026-12-03.json)."""

    def __init__(self, kernel: SplitKernel, args: Sequence[Any], ran: tuple[Grid, Split | None] | None) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()
        self._splits = ChosenPerGrid(lambda grid, args: kernel.splits(grid, args, False))
        self._fused: FusedLaunch | None = None
        if ran is not None and ran[1] is None:
            self._fused = fused_on_grid(self._launchers.remember_main(kernel.main, args), ran[0])
        elif ran is not None and kernel.quick_workspace is not None:
            grid, names = ran[0], "".join(f"a{j}, " for j in range(len(args)))
            self._fused = FusedLaunch(f"(gx, gy, gz) == {grid} and _split({grid}, ({names}), stream)",
                                      {"_split": self._quick}, None, grid)

    def fused_launch(self) -> FusedLaunch | None:
        """The launch on the grid the launch before this launcher ran, for the runtime's quick
        path; None where there is none."""
        return self._fused

    @property
    def main(self) -> Any:
        """The specialized launcher of the kernel this one wraps, once an unsplit launch made it
        (None before)."""
        return self._launchers.made(SpecializedLaunchers.MAIN)

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        k = self._kernel
        chosen = self._splits.get(grid, args, dependent)
        if chosen is None:
            return self._launchers.run_main(k.main, grid, args, stream, dependent)
        self._run_parts(grid, chosen, k.split_args(grid, chosen, args, stream), stream)

    def _quick(self, grid: Grid, args: Sequence[Any], stream: Any) -> bool:
        """The split launch on `grid` with a workspace from `quick_workspace`; False, having
        launched nothing, where the grid is not split or that declines."""
        chosen = self._splits.get(grid, args, False)
        full = None if chosen is None else self._kernel.split_args(grid, chosen, args, stream, quick=True)
        if full is None:
            return False
        self._run_parts(grid, chosen, full, stream)
        return True

    def _run_parts(self, grid: Grid, chosen: Split, full: list[Any], stream: Any) -> None:
        for part, (kernel, on) in enumerate(self._kernel.part_launches(grid, chosen)):
            self._launchers.run((part, chosen, grid[0]), kernel, on, full, stream)
