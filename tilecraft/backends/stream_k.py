"""Stream-K launches, shared by the backends: a kernel that `passes.stream_k` qualifies runs, on
a 1-D grid whose last wave would leave many SMs idle, as its stream-K kernel on one program per
SM (the G tiles' K iterations dealt out evenly), with a fresh workspace whose counters are zero;
on any other grid it runs as the kernel it wraps (which may split tiles: `tile_splitting`).

`auto_programs` decides from the grid and the GPU's SM count; the Triton backend asks it only
with TILECRAFT_STREAM_K=1, because on the H200 the stream-K kernel is still slower than the
tiles as written: 1536^3 fp16 0.41x torch on 132 programs against 0.74x, 3072^3 0.62x against
0.76x (benchmarks/results/stream-k-probe-h200-2026-12-01-e.json, -f). Edits of its source on
one program per tile (no tile cut) put the loss in its workspace round trip: every segment
writes its 128x256 fp32 accumulator (128 KiB) and the last one reads them back, 17-34 MB at
1536^3, more than the freed SMs save; the loop structure alone costs 15%. What would get there:
only cut tiles going through the workspace, the last segment keeping its accumulator in
registers (adding the others' partials without spilling), and TMA stores of the partials.

What a backend supplies: how to compile the stream-K kernel, how many programs a launch gets
(from its GPU, or forced for tests) and how to allocate the workspace on the launch's device and
stream.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir import Function
from ..passes.stream_k import StreamK
from .base import (INDEX32_LIMIT, ArrayFacts, ChosenPerGrid, CompiledKernel, SpecializedLaunchers, WrappedKernel,
                   array_facts)

Grid = tuple[int, int, int]

MIN_TILE_ELEMENTS = 128 * 128
"""Stream-K only for output tiles this large or larger: the wave count below assumes one block
per SM at a time, which smaller tiles (several blocks per SM) do not hold to."""

MAX_WAVE_USE = 0.8
"""Stream-K when the grid's waves keep at most this share of the SMs' block slots busy."""


def auto_programs(grid: Grid, sms: int, tile_elements: int) -> int | None:
    """The program count (`sms`) for a 1-D grid of at least sms / 2 tiles of at least
    MIN_TILE_ELEMENTS whose waves use at most MAX_WAVE_USE of the SMs; None otherwise (fewer
    tiles are split into pieces instead: `tile_splitting.auto_count`)."""
    blocks, y, z = grid
    if y != 1 or z != 1 or tile_elements < MIN_TILE_ELEMENTS or 2 * blocks < sms:
        return None
    waves = -(-blocks // sms)
    return sms if blocks / (waves * sms) <= MAX_WAVE_USE else None


def stream_k_facts(fn: Function, facts: Sequence[ArrayFacts | None], stream_k: StreamK) -> list[ArrayFacts | None]:
    """Facts of the stream-K kernel's parameters: `fn`'s, none for the tile count, and the
    workspace's, which hold for every workspace (dense rows of the accumulator's width on a
    16-byte aligned base; its row count is a multiple of nothing)."""
    width = stream_k.acc.shape[1]
    work = array_facts(0, (1, width), (width, 1), stream_k.acc.dtype.bitwidth // 8, False)
    return [*facts, *[None] * (len(fn.params) - len(facts)), None, work]


class StreamKKernel(WrappedKernel):
    """A compiled kernel with a stream-K variant (see the module docstring). Every attribute but
    launch and specialize is the wrapped kernel's (`main`).

    `compile_variant(fn)` compiles the stream-K kernel (at its first launch); `choose(grid,
    args)` gives a launch's program count or None; `workspace(shape, counter_rows, args,
    stream)` a fresh array of the accumulator's dtype whose last `counter_rows` rows are zero."""

    def __init__(self, main: CompiledKernel, stream_k: StreamK,
                 compile_variant: Callable[[Any], CompiledKernel],
                 choose: Callable[[Grid, Sequence[Any]], int | None],
                 workspace: Callable[[tuple[int, int], int, Sequence[Any], Any], Any]) -> None:
        self.main = main
        self.stream_k = stream_k
        self._compile_variant = compile_variant
        self._choose = choose
        self._workspace = workspace
        self._variant: CompiledKernel | None = None

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return () if self._variant is None else (self._variant,)

    def variant(self) -> CompiledKernel:
        """The stream-K kernel, compiled on first use."""
        if self._variant is None:
            self._variant = self._compile_variant(self.stream_k.fn)
        return self._variant

    def programs(self, grid: Grid, args: Sequence[Any], dependent: bool) -> int | None:
        """The program count of a launch, or None to launch the wrapped kernel (also for a
        programmatic dependent launch, a grid that is not 1-D and a workspace too large for
        32-bit offsets)."""
        if dependent or grid[1] != 1 or grid[2] != 1:
            return None
        programs = self._choose(grid, args)
        if programs is None or self._size(programs, grid[0]) >= INDEX32_LIMIT:
            return None
        return programs

    def _size(self, programs: int, tiles: int) -> int:
        rows, cols = self.stream_k.workspace_shape(programs, tiles)
        return rows * cols

    def stream_args(self, grid: Grid, programs: int, args: Sequence[Any], stream: Any) -> list[Any]:
        """`args` followed by the user's tile count and a fresh workspace."""
        shape = self.stream_k.workspace_shape(programs, grid[0])
        return [*args, grid[0], self._workspace(shape, self.stream_k.counter_rows(grid[0]), args, stream)]

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        programs = self.programs(grid, args, dependent)
        if programs is None:
            return self.main.launch(grid, args, stream, dependent=dependent)
        self.variant().launch((programs, 1, 1), self.stream_args(grid, programs, args, stream), stream)

    def specialize(self, args: Sequence[Any]) -> "StreamKLauncher":
        return StreamKLauncher(self)


class StreamKLauncher:
    """`StreamKKernel.specialize`'s launcher: launches as the kernel does, through specialized
    launchers of the wrapped kernel and of the stream-K kernel, the program count chosen once
    per grid."""

    def __init__(self, kernel: StreamKKernel) -> None:
        self._kernel = kernel
        self._launchers = SpecializedLaunchers()
        self._programs = ChosenPerGrid(lambda grid, args: kernel.programs(grid, args, False))

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        k = self._kernel
        programs = self._programs.get(grid, args, dependent)
        if programs is None:
            return self._launchers.run_main(k.main, grid, args, stream, dependent)
        self._launchers.run((programs, grid[0]), k.variant(), (programs, 1, 1),  # W's shape: (P, G)
                            k.stream_args(grid, programs, args, stream), stream)
