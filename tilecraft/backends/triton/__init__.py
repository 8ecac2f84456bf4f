"""The Triton backend: Tile IR -> readable Triton source -> Triton JIT (GPU) or interpreter (CPU).

    backend = TritonBackend(BackendKind.TRITON_INTERPRET)   # or BackendKind.TRITON on a GPU
    kernel = backend.compile(fn, facts)                      # verified IR + ArrayFacts per param
    print(kernel.source)                                     # the generated Triton module
    kernel.launch((blocks_x, blocks_y, blocks_z), [tensor_a, tensor_b, 256], stream=None)

Arrays are torch tensors (CUDA for TRITON, CPU for TRITON_INTERPRET); scalars Python numbers.
A matmul-like kernel on a grid that leaves SMs idle runs each output tile as several smaller
blocks (`tile_split`) or, where its K loop is long, splits that loop (`split_k`); one whose MMA
operands need rounding to tf32 or 16-byte aligned rows can get them copied so in a prologue
(`stage_operands`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from ...environment import TRITON_BACKENDS, require

require("triton", TRITON_BACKENDS)  # a missing package is named with its install command
require("torch", TRITON_BACKENDS)

from triton.runtime import driver  # noqa: E402

from ... import knobs  # noqa: E402
from ...knobs import Knob  # noqa: E402
from ...ir import Function, ops  # noqa: E402
from ...passes.split_k import SplitK, split_k as find_split  # noqa: E402
from ...passes.operand_staging import Staged, stage_operands  # noqa: E402
from ...passes.stream_k import stream_k as find_stream_k  # noqa: E402
from ...passes.block_merge import block_merges  # noqa: E402
from ...passes.resident_rows import resident_rows  # noqa: E402
from ...passes.tile_split import tile_splits  # noqa: E402
from ...passes.warp_specialize import StreamedLoop, streamed_loop  # noqa: E402
from ..base import ArrayFacts, BackendKind  # noqa: E402
from ..resident_rows import ResidentRowsKernel, RowLengths  # noqa: E402
from ..splitting import SplitKernel, check_split_option, part_facts  # noqa: E402
from ..stream_k import StreamKKernel, stream_k_facts  # noqa: E402
from ..tile_splitting import (BlockMergeKernel, MergeFinder, TileSplitKernel, TilePieces, auto_shapes,  # noqa: E402
                              check_merge_option, forced_shape, piece_facts, tile_pieces)
from . import interpret_workarounds, split_launch  # noqa: E402
from .operand_staging import StagedKernel  # noqa: E402
from .compile import TritonKernel  # noqa: E402
from .emitter import Target  # noqa: E402
from .heuristics import resident_warps  # noqa: E402
from .lower import lower, missing_rules  # noqa: E402
from .plan import descriptor_block  # noqa: E402

interpret_workarounds.fix_scalar_index()  # Triton 3.6's interpreter under NumPy >= 2.4

__all__ = ["TritonBackend", "TritonKernel", "missing_rules"]

Compiled = TritonKernel | SplitKernel | TileSplitKernel | BlockMergeKernel | StreamKKernel | ResidentRowsKernel
"""What the backend compiles a kernel into before operand staging (see `TritonBackend.compile`)."""


class TritonBackend:
    """Compiles Tile IR functions through Triton.

    `descriptors` forces tensor descriptors (TMA) on or off for every eligible tile load and
    store; by default they are used on a GPU of compute capability 9.0 or newer where they are
    expected to be faster than masked pointers (see `plan.prefer_descriptor`), and never under
    the interpreter (where they work, but only slowly; tests turn them on to check the lowering).
    `grid_loop` and `flatten` choose how matmul-like kernels are scheduled (see `Target`);
    `capability` names the NVIDIA GPU to compile for when it is not the current device.
    `split_k`: True splits the K loop of kernels `passes.split_k` qualifies when a launch's 1-D
    grid fills at most half the GPU's SMs and its K loop is long enough for 2 splits of
    `splitting.MIN_SPLIT_K` or more (on a GPU, unless TILECRAFT_SPLIT_K=0; launches it does not
    split run tile-split and the rest); False never; a count N splits every 1-D launch N ways
    (tests).
    `tile_split`: True runs a matmul-like kernel that `passes.tile_split` qualifies, on a launch
    whose grid leaves SMs idle (too few blocks, or a last wave mostly empty), with each output
    tile cut into pieces of one block each (backends/tile_splitting.py; on a GPU, unless
    TILECRAFT_TILE_SPLIT=0; split-K, where it splits a launch, comes first); False never; a count N
    splits every launch's tiles N ways (tests).
    `block_merge`: True runs a tf32 matmul-like kernel of small tiles that `passes.block_merge`
    qualifies with rectangles of its blocks merged into larger ones: as many as leave one wave,
    or on grids of several waves 4 x 8 (else 4 x 4, 4 x 2) where that leaves two
    (backends/tile_splitting.py `auto_shapes`, `auto_merge`, `MergeFinder`; on a GPU, unless
    TILECRAFT_BLOCK_MERGE=0; a kernel tile splitting takes is not merged); False never; a shape
    (R, C) (a count F: F x 1) merges R x C blocks on every launch whose grid allows it and, for
    C > 1, whose blocks `MergeFinder` finds lined up (tests and probes).
    `stream_k`: True runs a matmul-like kernel that `passes.stream_k` qualifies, on a 1-D grid
    whose waves leave many SMs idle, as one program per SM over all tiles' K iterations
    (backends/stream_k.py; on a GPU when TILECRAFT_STREAM_K=1: it still runs slower than the
    tiles as written; before tile splitting, which takes the launches it declines); False
    never; a count N runs every 1-D launch on N programs (tests).
    `stage_operands`: None copies MMA operand arrays in a prologue (passes/operand_staging.py,
    operand_staging.py) on sm_90+ GPUs for launches whose staged arrays are large: float32
    operands of tf32 MMAs rounded (B transposed) unless TILECRAFT_TF32_STAGING=0, operands
    whose layout rules out tensor descriptors (`ArrayFacts.tma_by_copy`) into aligned rows
    unless TILECRAFT_ALIGN_STAGING=0; True stages both on every launch, on any target (tests);
    False never. A launch that stages may split too: the staged kernel has its own split-K
    variants, run on the copies.
    `resident_rows`: None runs a kernel whose blocks walk an array's row in several passes
    (passes/resident_rows.py) as its variant for the row length launched, unrolled with each
    tile loaded once, on a GPU unless TILECRAFT_RESIDENT_ROWS=0; True on every backend (tests);
    False never.
    """

    def __init__(self, kind: BackendKind = BackendKind.TRITON, *, descriptors: bool | None = None,
                 grid_loop: bool = True, flatten: bool = True, capability: int | None = None,
                 split_k: bool | int = True, tile_split: bool | int = True, stream_k: bool | int = True,
                 block_merge: bool | int | tuple[int, int] = True, stage_operands: bool | None = None,
                 resident_rows: bool | None = None) -> None:
        if kind not in (BackendKind.TRITON, BackendKind.TRITON_INTERPRET):
            raise ValueError(f"TritonBackend cannot run as {kind}")
        check_split_option(split_k)
        check_split_option(tile_split)
        check_split_option(stream_k)
        check_merge_option(block_merge)
        self._split_k = split_k
        self._tile_split = tile_split
        self._stream_k = stream_k
        self._block_merge = block_merge
        self._stage = stage_operands
        self._resident = resident_rows
        self.kind = kind
        self._forced = descriptors  # None: decide per access (plan.prefer_descriptor)
        self._capability = capability  # compiling for a GPU that is not here; else `_gpu_capability`
        self._capabilities: dict[int | None, int | None] = {}  # device (None: no driver) -> capability
        self._schedule = {"grid_loop": grid_loop, "flatten": flatten}

    @property
    def interpret(self) -> bool:
        return self.kind is BackendKind.TRITON_INTERPRET

    def _gpu_capability(self) -> int | None:
        """The compute capability compiled for: `capability` where given, else the current
        device's (a launch makes its arrays' device current, runtime/devices.py, so on a machine
        with GPUs of two kinds each kernel is compiled for its own; asked once per device);
        None under the interpreter and where Triton finds no CUDA driver."""
        if self._capability is not None or self.interpret:
            return self._capability
        if None in self._capabilities:
            return None
        try:
            device = driver.active.get_current_device()
            if device not in self._capabilities:
                target = driver.active.get_current_target()
                self._capabilities[device] = target.arch if target.backend == "cuda" else None
        except RuntimeError:  # "0 active drivers"
            device = None
            self._capabilities[None] = None
        return self._capabilities[device]

    def _descriptors_available(self) -> bool:
        """Whether the GPU compiled for is sm_90+ (TMA, `cvt.rn.tf32.f32`): never under the
        interpreter, nor where Triton finds no GPU driver (only `compile_for` works there)."""
        capability = self._gpu_capability()
        return capability is not None and capability >= 90

    def compile(self, fn: Function, facts: Sequence[ArrayFacts | None]) -> Compiled | StagedKernel:
        """Lower `fn` to Triton source and load it; Triton compiles it at the first launch. A
        kernel with split-K variants comes wrapped in a SplitKernel (see `split_k`), one with
        tile-split variants in a TileSplitKernel (see `tile_split`), that or the kernel with a
        stream-K variant in a StreamKKernel (see `stream_k`), any of them with a staged variant
        in a StagedKernel (see `stage_operands`; the staged kernel split-K'd too)."""
        hopper = self._descriptors_available()  # sm_90+
        target = Target(interpret=self.interpret, descriptors=self._use_descriptors(),
                        force_descriptors=self._forced is True, cvt_tf32=hopper, grid_dependency=hopper,
                        **self._schedule)
        kernel = self._compile_split(fn, facts, target)
        staged = self._staged(fn, facts)
        if staged is None:
            return self._warp_specialized(kernel, fn, facts)
        return StagedKernel(kernel, staged, facts, lambda f: self._staged_kernel(staged.fn, f, target),
                            self.interpret, self._stage is True)

    def _staged_kernel(self, fn: Function, facts: Sequence[ArrayFacts | None], target: Target) -> Compiled:
        """The staged kernel `fn` compiled for its copies' `facts`: its descriptors made in the
        kernel, as its operands are fresh copies at every launch (3001^3 fp16 on the H200: 0.20 ->
        0.31 ms with host descriptors); its blocks merged where they may be (tf32 of small tiles);
        its K loop split where a launch's few blocks walk a long one; a tf32 matmul's copies may
        run the Gluon variant."""
        kernel = TritonKernel(lambda t: lower(fn, facts, t), target, self.interpret, host_variants=False)
        merged = self._block_merge_kernel(kernel, fn, facts, target, staged=True)
        split = self._split_k_kernel(merged, fn, facts, target, self._tile_pieces(fn), staged=True)
        return self._warp_specialized(split, fn, facts)

    def _warp_specialized(self, kernel: Compiled, fn: Function, facts: Sequence[ArrayFacts | None]) -> Compiled:
        """`kernel` with its warp-specialized Gluon variant (backends/gluon) where `fn` has a
        streamed loop whose arrays tensor descriptors can address, on an sm_90 GPU (Gluon's
        wgmma is Hopper's), unless TILECRAFT_WARP_SPECIALIZE=0."""
        capability = self._gpu_capability()
        if self.interpret or knobs.WARP_SPECIALIZE.get() == "0" or capability is None or capability // 10 != 9:
            return kernel
        found = streamed_loop(fn)
        if found is None or not _tma_arrays_ok(fn, facts, found):
            return kernel
        from ..gluon import GluonKernel, WarpSpecializedKernel, lower as lower_gluon, worth_building
        if not worth_building(found):
            return kernel
        return WarpSpecializedKernel(kernel, lambda: GluonKernel(lower_gluon(fn, facts, found)))

    def _use_descriptors(self) -> bool:
        return self._forced if self._forced is not None else self._descriptors_available()

    def _staged(self, fn: Function, facts: Sequence[ArrayFacts | None]) -> Staged | None:
        """The staged variant of `fn` for `facts`, if it has one (see `stage_operands`)."""
        if self._stage is False or (self._stage is None and (self.interpret or not self._descriptors_available())):
            return None
        tf32 = self._stage is True or knobs.TF32_STAGING.get() != "0"
        align = self._stage is True or knobs.ALIGN_STAGING.get() != "0"
        misaligned = [i for i, f in enumerate(facts) if align and f is not None and f.tma_by_copy]
        return stage_operands(fn, misaligned, tf32=tf32)

    def _considers(self, option: bool | int, knob: Knob, opt_in: bool) -> bool:
        """Whether a derived-kernel option (`split_k`, `tile_split`, `stream_k`, `block_merge`)
        lets a kernel be looked at: never for False, always for a forced count; for True
        (automatic) only on a GPU, and where its knob allows: set to 1 (`opt_in`) or not set to 0."""
        if option is False:
            return False
        if option is not True:
            return True
        return not self.interpret and (knob.get() == "1" if opt_in else knob.get() != "0")

    def _compile_split(self, fn: Function, facts: Sequence[ArrayFacts | None], target: Target) -> Compiled:
        """The kernel as `_wrapped` wraps it (tile-split, stream-K), wrapped in turn with its
        split-K variants (`_split_k_kernel`)."""
        kernel = TritonKernel(lambda t: lower(fn, list(facts), t), target, self.interpret)
        pieces = self._tile_pieces(fn)
        return self._split_k_kernel(self._wrapped(kernel, fn, facts, target, pieces), fn, facts, target, pieces)

    def _split_k_kernel(self, wrapped: Compiled, fn: Function, facts: Sequence[ArrayFacts | None],
                        target: Target, pieces: TilePieces, staged: bool = False) -> Compiled:
        """`wrapped` (`fn` compiled, maybe wrapped) with its split-K variants where `split_k`
        asks and `fn` qualifies (launches it does not split run `wrapped`), of whole tiles or of
        tiles cut into `pieces`; `staged`: `fn` is a staged kernel, whose operands are fresh
        copies at every launch (its parts make their descriptors in the kernel)."""
        automatic = self._split_k is True
        if not self._considers(self._split_k, knobs.SPLIT_K, opt_in=False):
            return wrapped
        split = find_split(fn)
        if split is None:
            return wrapped
        # the parts run only on grids the GPU holds at once: no grid loop
        parts = replace(target, grid_loop=False)
        forced = None if automatic else self._split_k

        def compile_part(part: Function, of: SplitK, count: int) -> TritonKernel:
            cut = facts if count == 1 else piece_facts(pieces.splits, count, facts)
            return TritonKernel(lambda t: lower(part, part_facts(fn, cut, of), t), parts, self.interpret,
                                host_variants=not staged, dependent=part is of.finish and parts.grid_dependency)
        return SplitKernel(
            wrapped, split, compile_part,
            lambda grid, args: split_launch.choose(grid, args, forced, split.k_extent(args), pieces),
            lambda shape, args, stream: split_launch.workspace(shape, split.acc.dtype, args, stream),
            lambda count: find_split(pieces.splits.split(count)),
            lambda shape, args, stream: split_launch.quick_workspace(shape, split.acc.dtype, args, stream))

    def _wrapped(self, kernel: TritonKernel, fn: Function, facts: Sequence[ArrayFacts | None],
                 target: Target, pieces: TilePieces) -> Compiled:
        """`kernel` with its resident-row variants where `resident_rows` asks and `fn` qualifies;
        else wrapped with its tile-split variants (`pieces`), then with its stream-K variant
        where `stream_k` asks and `fn` qualifies (only kernels with MMAs qualify for those, only
        kernels without for resident rows)."""
        rows = self._resident_rows_kernel(kernel, fn, facts, target)
        if rows is not kernel:
            return rows
        return self._stream_k_kernel(self._tiles_kernel(kernel, fn, facts, target, pieces), fn, facts, target)

    def _resident_rows_kernel(self, kernel: TritonKernel, fn: Function, facts: Sequence[ArrayFacts | None],
                              target: Target) -> TritonKernel | ResidentRowsKernel:
        """`kernel` with its resident-row variants where `resident_rows` asks and `fn` qualifies,
        each on as many warps as its row needs (`resident_warps`) unless the kernel names them."""
        if self._resident is False or (self._resident is None and (
                self.interpret or knobs.RESIDENT_ROWS.get() == "0")):
            return kernel
        rows = resident_rows(fn)
        if rows is None:
            return kernel

        def build(size: int) -> Function:
            variant = rows.variant(size)
            variant.options.setdefault("num_warps", resident_warps(rows.held(size)))
            return variant
        return ResidentRowsKernel(
            kernel, build,
            lambda variant, size: TritonKernel(lambda t: lower(variant, list(facts), t), target, self.interpret),
            RowLengths(rows))

    def _stream_k_kernel(self, kernel: TritonKernel | TileSplitKernel, fn: Function,
                         facts: Sequence[ArrayFacts | None], target: Target) -> Compiled:
        """`kernel` wrapped with its stream-K variant where `stream_k` asks and `fn` qualifies."""
        automatic = self._stream_k is True
        if not self._considers(self._stream_k, knobs.STREAM_K, opt_in=True):
            return kernel
        found = find_stream_k(fn)
        if found is None:
            return kernel
        forced = None if automatic else self._stream_k
        programs = replace(target, grid_loop=False)  # one program per SM already
        return StreamKKernel(
            kernel, found,
            lambda variant: TritonKernel(lambda t: lower(variant, stream_k_facts(fn, facts, found), t), programs,
                                         self.interpret),
            lambda grid, args: split_launch.choose_stream_k(grid, args, forced, math.prod(found.acc.shape)),
            lambda shape, rows, args, stream: split_launch.stream_k_workspace(shape, rows, found.acc.dtype, args,
                                                                               stream))

    def _tiles_kernel(self, kernel: TritonKernel, fn: Function, facts: Sequence[ArrayFacts | None],
                      target: Target, pieces: TilePieces) -> TritonKernel | TileSplitKernel | BlockMergeKernel:
        """`kernel` wrapped with its tile-split variants (`pieces`) where there are any, else with
        its block-merged variants where `block_merge` asks and `fn` qualifies."""
        if pieces.splits is None:
            return self._block_merge_kernel(kernel, fn, facts, target)
        splits = pieces.splits
        return TileSplitKernel(
            kernel, splits.split,
            lambda variant, count: TritonKernel(lambda t: lower(variant, piece_facts(splits, count, facts), t),
                                                replace(target, deep_pipeline=True), self.interpret),
            lambda grid, args: split_launch.choose_tile_split(grid, args, pieces))

    def _tile_pieces(self, fn: Function) -> TilePieces:
        """How `fn`'s output tiles may be cut, where `tile_split` asks and `fn` qualifies: into
        any count of pieces at least MIN_AUTO_DIM long (automatic) or the one forced."""
        if not self._considers(self._tile_split, knobs.TILE_SPLIT, opt_in=False):
            return TilePieces(None, ())
        return tile_pieces(tile_splits(fn), None if self._tile_split is True else self._tile_split)

    def _block_merge_kernel(self, kernel: TritonKernel, fn: Function, facts: Sequence[ArrayFacts | None],
                            target: Target, staged: bool = False) -> TritonKernel | BlockMergeKernel:
        """`kernel` wrapped with its block-merged variants where `block_merge` asks and `fn`
        qualifies; `staged`: `fn` is a staged kernel (operands copied per launch, so its variants
        make their descriptors in the kernel)."""
        automatic = self._block_merge is True
        if not self._considers(self._block_merge, knobs.BLOCK_MERGE, opt_in=False):
            return kernel
        merges = block_merges(fn)
        shapes = ([] if merges is None else auto_shapes(merges) if automatic
                  else [s for s in merges.shapes() if s == forced_shape(self._block_merge)])
        if not shapes:
            return kernel
        finder = MergeFinder(merges)
        return BlockMergeKernel(
            kernel, merges.merge,
            # an unchecked merge is a kernel of larger tiles, which may have a warp-specialized variant
            lambda variant, count: self._warp_specialized(
                TritonKernel(lambda t: lower(variant, list(facts), t), target, self.interpret,
                             host_variants=not staged), variant, facts),
            lambda grid, args: split_launch.choose_block_merge(grid, args, finder, shapes, automatic))


def _tma_arrays_ok(fn: Function, facts: Sequence[ArrayFacts | None], found: StreamedLoop) -> bool:
    """Whether tensor descriptors can address every array the streamed loop loads or stores, and
    every such access can take one with zero padding (`plan.descriptor_block`, the Triton
    lowering's own rule: weak order, 2-5 dims, a box of 16 bytes or more a row and at most 256
    a dim)."""
    position = {p.id: i for i, p in enumerate(fn.params)}

    def ok(op: ops.Load | ops.Store) -> bool:
        i = position[op.array.id]
        f = facts[i] if i < len(facts) else None
        store = isinstance(op, ops.Store)
        if f is None or not (f.tma_store_ok if store else f.tma_ok):
            return False
        choice = descriptor_block(op)
        return choice is not None and choice[1] == "zero"
    stores = [op for op in found.epilogue if isinstance(op, ops.Store)]
    return all(ok(op) for op in (*(s.load for s in (*found.streamed, *found.resident)), *stores))
