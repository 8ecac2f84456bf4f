"""Operand staging on the Triton backend (passes/operand_staging.py derives the staged kernel).

A launch that stages copies each staged operand array into scratch memory, then runs the staged
kernel on the copies in place of the originals. Every copy is dense with rows padded to 16
bytes on a 16-byte aligned base, so tensor descriptors (TMA) can address it; a copy staged for
tf32 is also rounded to tfloat32 (nearest even, as the backend rounds MMA operands:
`cvt.rn.tf32.f32` on the GPU, the bit helper under the interpreter) and, for operand b,
transposed to [N, K] (K contiguous, the layout Hopper's tf32 wgmma reads from shared memory
without a copy through registers); a copy staged only for alignment holds the same values (so
results are bit-identical to the unstaged kernel's). Everything runs on the launch's stream;
the scratch comes from torch's caching allocator on that stream (reused only after the stream's
later work).

When: on sm_90+ GPUs, for launches whose staged arrays are all large enough for their reason
(at least STAGE_MIN_ELEMENTS elements for tf32 only, NARROW_STAGE_MIN_ELEMENTS where the kernel's
MMAs run mma.sync, ALIGN_MIN_ELEMENTS when the array is
misaligned); tests force it on any launch (`TritonBackend(stage_operands=True)`). A kernel of
narrow MMAs whose launch merges its blocks into tiles wide enough for wgmma
(backends/tile_splitting.py) stages from STAGE_MIN_ELEMENTS: whether a launch stages then
depends on its grid too. A staged kernel has its own split-K variants (a launch that stages
and splits runs PARTIAL and FINISH on the copies).
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Sequence

import torch
import triton

from ...ir import Function, ops
from ...passes.operand_staging import Copy, Staged
from ..base import (ArrayFacts, ChosenPerGrid, CompiledKernel, FusedLaunch, LastLaunch, SpecializedLaunchers,
                    WrappedKernel, array_facts, fused_on_grid, needs_index64, wrapped_as)
from ..tile_splitting import BlockMergeKernel
from .compile import TRITON_LANGUAGE, _load, write_source
from .helpers import HELPERS
from .heuristics import WGMMA_ROWS
from . import native_launch, split_launch
from .launching import current_stream, stream_context, stream_handle

STAGE_MIN_ELEMENTS = 2**21
"""Launches stage an aligned tf32 operand only if it has at least this many elements (2M: 8 MiB).
H200, staged launches through the StagedLauncher (benchmarks/results/size-sweep-h200-2026-12-01-ad.json
against the unstaged kernels of -ab): 1024^3 with 128x64x32 tiles 32.6 -> 22.4 us, 2048^3 with
128x128x32 120-269 -> 77 us; at 1000x500x700 (0.35M elements) no gain, at 512^3 a loss. Since the
unstaged kernels run mma.sync (heuristics.mma_sync_only), 1024^3 (1M elements) no longer pays for
its copies: staged / unstaged in one call, 64x64x32 0.68 / 0.67x torch, 128x128x32 0.63 / 0.80x,
128x64x64 0.65 / 0.78x; at 2048^3 staging still wins, 0.44 / 0.37x, 0.66 / 0.44x, 0.47 / 0.39x
(size-sweep-h200-2026-12-02-b.json against -c)."""

NARROW_STAGE_MIN_ELEMENTS = 2**24
"""The fewest elements of an aligned tf32 operand staged for MMAs narrower than WGMMA_ROWS (16M):
there the rounded, transposed copy still pays a little once the problem is large (32x32x32 tiles,
H200: 4096^3 1.89 ms unstaged against 1.85 staged, size-sweep-h200-2026-12-01-ae.json / -ad; 8192^3
0.20x torch unstaged, side-by-side-h200-2026-12-01-q.json, against 0.22x staged, -p); 2048^3 level.
Launches whose blocks merge into wgmma-sized tiles stage from STAGE_MIN_ELEMENTS (2048^3 merged 4 x 4,
staged 0.65x against 0.45x unstaged: merge-probe-h200-2026-12-02-n.json).
Measured again once these kernels ran on one warp (heuristics.SMALL_TF32_WARPS), one call: staged,
512^3 to 2048^3 and 1000x500x700 all ran slower (TC3 0.47 against 0.62x torch, 2048^3 0.22 against
0.26x: size-sweep-h200-2026-12-01-au.json, -aw against -av)."""

ALIGN_MIN_ELEMENTS = 2**22
"""Launches stage a misaligned operand only if it has at least this many elements (4M), as for
tf32. Measured on the H200 (benchmarks/results/size-sweep-h200-2026-12-01-d.json, with 2**16):
staging took 3001^3 fp16 from 0.15x to 2.48x torch (9M-element operands) but 1000x500x700 from
0.41x to 0.13x (0.35-0.7M elements: its prologues, launched through Triton's full launcher,
cost more than the whole unstaged kernel). With the StagedLauncher's quicker prologues it still
lost there: fp16 1000x500x700 1.70x -> 0.46x torch (size-sweep-h200-2026-12-01-af/-ag.json)."""

TILE = 64
"""The prologue rounds (and transposes) TILE x TILE blocks, one per program."""

_MAX_GRID_Y = 65535  # CUDA's limit on grid axis 1

_KERNEL = '''

@triton.jit
def {name}(src, dst, R, C, s0, s1, d0, TRANSPOSE: tl.constexpr, T: tl.constexpr):
    """dst = src [R, C] (strides s0, s1){what}: TRANSPOSE, dst [C, R] = the transpose, else
    dst [R, C]; dst rows are d0 elements apart, its last stride 1."""
    r = (tl.program_id(0) * T + tl.arange(0, T)).to(tl.int64)
    c = (tl.program_id(1) * T + tl.arange(0, T)).to(tl.int64)
    inside = (r[:, None] < R) & (c[None, :] < C)
    x = {round}
    if TRANSPOSE:
        tl.store(dst + c[:, None] * d0 + r[None, :], tl.trans(x), mask=tl.trans(inside))
    else:
        tl.store(dst + r[:, None] * d0 + c[None, :], x, mask=inside)
'''

_prologues: dict[tuple[bool, bool], Any] = {}


def _prologue(interpret: bool, rounded: bool) -> Any:
    """The prologue kernel for the mode, rounding to tfloat32 or copying (loaded once per mode,
    through the checked source files generated kernels use)."""
    if (interpret, rounded) not in _prologues:
        load = "tl.load(src + r[:, None] * s0 + c[None, :] * s1, mask=inside)"
        helpers: tuple[str, ...] = ()
        name, what = "_tc_stage_copy", ""
        if rounded:
            helpers = ("_tc_round_tf32" if interpret else "_tc_round_tf32_mma",)
            load = f"{helpers[0]}({load}, 0)" if interpret else f"{helpers[0]}({load})"
            name, what = "_tc_stage_tf32", " rounded to nearest even tfloat32"
        source = ("import triton\nimport triton.language as tl\n\n\n" + "".join(HELPERS[h] for h in helpers)
                  + _KERNEL.format(name=name, what=what, round=load))
        module = types.SimpleNamespace(name=name, source=source, helpers=helpers, grid_params=())
        _prologues[interpret, rounded] = _load(write_source(module.name, source), module, interpret)
    return _prologues[interpret, rounded]


def scratch_layout(shape: Sequence[int], transposed: bool, itemsize: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(shape, strides) of the staged copy of a 2-D array of `shape` with `itemsize`-byte
    elements: transposed or not, rows padded to a multiple of 16 bytes."""
    rows, cols = (shape[1], shape[0]) if transposed else (shape[0], shape[1])
    per = max(1, 16 // itemsize)
    return (rows, cols), (-(-cols // per) * per, 1)


def scratch_facts(shape: Sequence[int], transposed: bool, itemsize: int, original: ArrayFacts | None) -> ArrayFacts:
    """The facts of every staged copy of an array of `shape` (the caching allocator's blocks are
    at least 16-byte aligned)."""
    dims, strides = scratch_layout(shape, transposed, itemsize)
    index64 = needs_index64(dims, strides) or (original is not None and original.index64)
    return array_facts(0, dims, strides, itemsize, index64)


def mma_rows(fn: Function) -> int | None:
    """The fewest rows of an MMA of `fn` (fewer than WGMMA_ROWS: mma.sync, not wgmma), None where it has none."""
    return min((op.result.type.shape[-2] for op in fn.walk() if isinstance(op, ops.Mma)), default=None)


def _min_elements(copy: Copy, narrow: bool) -> int:
    """The fewest elements an array staged as `copy` needs for automatic staging (`narrow`: the
    kernel's MMAs include narrow ones)."""
    if copy.misaligned:
        return ALIGN_MIN_ELEMENTS
    return NARROW_STAGE_MIN_ELEMENTS if narrow else STAGE_MIN_ELEMENTS


def _on_gpu(arrays: Sequence[Any]) -> bool:
    """Whether every one of `arrays` is on a CUDA device (automatic staging stages only those)."""
    return all(a.is_cuda for a in arrays)


class StagedKernel(WrappedKernel):
    """A compiled kernel (`main`: a TritonKernel or SplitKernel) with a staged variant; every
    attribute but launch, specialize and staged_kernel is main's.

    `compile_staged(facts)` compiles the staged function for the parameters' facts (once per
    distinct facts of the scratch copies); `forced`: stage every launch (tests)."""

    def __init__(self, main: CompiledKernel, staged: Staged, facts: Sequence[ArrayFacts | None],
                 compile_staged: Callable[[list[ArrayFacts | None]], CompiledKernel], interpret: bool,
                 forced: bool) -> None:
        self.main = main
        self.staged = staged
        self._rows = mma_rows(staged.fn)
        self._facts = list(facts)
        self._compile = compile_staged
        self._interpret = interpret
        self._forced = forced
        self._kernels: dict[tuple[ArrayFacts, ...], CompiledKernel] = {}
        self._last_run = LastLaunch()  # what ran: whether the launch staged

    @property
    def _narrow(self) -> bool:
        """Whether an MMA of the kernel has fewer than WGMMA_ROWS rows (mma.sync, not wgmma)."""
        return self._rows is not None and self._rows < WGMMA_ROWS

    def stages(self, args: Sequence[Any], dependent: bool, grid: tuple[int, int, int]) -> bool:
        """Whether a launch with `args` on `grid` stages (never a programmatic dependent launch: the
        prologue would run between it and the kernel it depends on)."""
        if dependent or not self._stageable(args):
            return False
        return self._forced or (self._on_gpu(args) and self.would_stage(args, grid))

    def would_stage(self, args: Sequence[Any], grid: tuple[int, int, int]) -> bool:
        """Whether a launch with `args` on `grid`, its arrays on the GPU, stages automatically: its
        staged arrays large enough (for a kernel of narrow MMAs, from STAGE_MIN_ELEMENTS where
        the launch merges wide: `_merges_wide`)."""
        if not self._stageable(args):
            return False
        return self._large(args, self._narrow) or (self._large(args, False) and self._merges_wide(grid, args))

    def _on_gpu(self, args: Sequence[Any]) -> bool:
        return _on_gpu([args[i] for i in self.staged.params])

    def _stageable(self, args: Sequence[Any]) -> bool:
        """Whether the prologue can copy the staged arrays of `args` (its grid's axis 1 limit)."""
        return all(-(-d // TILE) <= _MAX_GRID_Y for i in self.staged.params for d in args[i].shape)

    def _large(self, args: Sequence[Any], narrow: bool) -> bool:
        """Whether every staged array of `args` is large enough to stage for a kernel of `narrow`
        MMAs or not."""
        return all(args[i].numel() >= _min_elements(c, narrow) for i, c in self.staged.params.items())

    def _by_grid(self, args: Sequence[Any]) -> bool:
        """Whether launches with `args` stage on some grids and not on others (`stages`)."""
        return (not self._forced and self._narrow and self._on_gpu(args) and self._stageable(args)
                and self._large(args, False) and not self._large(args, True))

    def _merges_wide(self, grid: tuple[int, int, int], args: Sequence[Any]) -> bool:
        """Whether the staged kernel's launch on `grid` merges its blocks into tiles of WGMMA_ROWS
        rows or more (asked on the copies' layout, on the GPU of `args`)."""
        merging = wrapped_as(self.staged_kernel(args), BlockMergeKernel)
        sms = split_launch.launch_sms(args)
        if merging is None or self._rows is None or sms is None:
            return False
        with split_launch.assumed_sms(sms):
            merge = merging.count(grid, self.staged_args(args), False)
        return merge is not None and merge.rows * self._rows >= WGMMA_ROWS

    @property
    def compiled_variants(self) -> tuple[CompiledKernel, ...]:
        return tuple(self._kernels.values())

    def staged_kernel(self, args: Sequence[Any]) -> CompiledKernel:
        """The staged kernel for launches with `args` (the staged arrays' shapes and dtypes count)."""
        facts = list(self._facts)
        for i, copy in self.staged.params.items():
            facts[i] = scratch_facts(args[i].shape, copy.transposed, args[i].element_size(), self._facts[i])
        key = tuple(facts[i] for i in self.staged.params)
        if key not in self._kernels:
            self._kernels[key] = self._compile(facts)
        return self._kernels[key]

    def compile_for(self, capability: int = 90, args: Sequence[Any] | None = None, *, staged: bool = False) -> Any:
        """main's `compile_for`, or with `staged` (and `args`, whose array shapes count) the
        staged kernel's, as a launch with `args` would run it."""
        if not staged:
            return self.main.compile_for(capability, args)
        if args is None:
            raise ValueError("compile_for(staged=True) needs the launch arguments")
        return self.staged_kernel(args).compile_for(capability, self.staged_args(args))

    def staged_args(self, args: Sequence[Any]) -> list[Any]:
        """`args` as the staged kernel takes them, each staged array a copy's layout (on the meta
        device: no data)."""
        copies = list(args)
        for i, copy in self.staged.params.items():
            shape, strides = scratch_layout(args[i].shape, copy.transposed, args[i].element_size())
            copies[i] = torch.empty_strided(shape, strides, dtype=args[i].dtype, device="meta")
        return copies

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None, *,
               dependent: bool = False) -> None:
        staged = self.stages(args, dependent, grid)
        self._last_run.forget()
        if staged:
            kernel = self.staged_kernel(args)
            copies = list(args)
            for i, copy in self.staged.params.items():
                copies[i] = stage_copy(args[i], copy, stream, self._interpret)
            kernel.launch(grid, copies, stream)
        else:
            self.main.launch(grid, args, stream, dependent=dependent)
        if not dependent:
            self._last_run.record(grid, staged, args)

    def specialize(self, args: Sequence[Any]) -> Any:
        """main's fast launcher where launches with `args` do not stage (the fast path's key fixes
        the shapes that decide it); where they do, `staged_launcher`'s; where that depends on the
        grid, a StagingPerGrid choosing between them (starting from this kernel's last launch
        where it launched these very arguments)."""
        ran = self._last_run.take(args)
        if self._by_grid(args):
            return StagingPerGrid(self, args, ran)
        if not self._stageable(args) or not (self._forced or self._on_gpu(args) and self._large(args, self._narrow)):
            return self.main.specialize(args)
        return self.staged_launcher(args)

    def staged_launcher(self, args: Sequence[Any]) -> Any:
        """The fast launcher of staged launches with `args`: a StagedLauncher (or this kernel under
        the interpreter, or where the staged kernel's launches take Triton's full path anyway)."""
        copies = list(args)
        for i, copy in self.staged.params.items():
            shape, strides = scratch_layout(args[i].shape, copy.transposed, args[i].element_size())
            copies[i] = torch.empty_strided(shape, strides, dtype=args[i].dtype, device=args[i].device)
        staged = self.staged_kernel(args)
        kernel = staged.specialize(copies)
        if self._interpret or kernel is staged:
            return self
        return StagedLauncher(self, kernel, args)


class StagingPerGrid:
    """`StagedKernel.specialize`'s launcher where whether a launch stages depends on its grid: the
    choice made once per grid, then the staged fast launcher (made at the first staged launch) or
    main's, as `SpecializedLaunchers` runs it. Made with the grid of the launch before it and
    whether that staged (`ran`), it has a `fused_launch` for that grid: the staged launcher's or
    main's (`fused_on_grid`)."""

    def __init__(self, owner: StagedKernel, args: Sequence[Any],
                 ran: tuple[tuple[int, int, int], bool] | None = None) -> None:
        self._owner = owner
        self._stages = ChosenPerGrid(lambda grid, args: owner.stages(args, False, grid))
        self._main = SpecializedLaunchers()
        self._staged: Any = None
        self._fused: FusedLaunch | None = None
        if ran is not None:
            grid, staged = ran
            if staged:
                self._staged = owner.staged_launcher(args)
                inner = self._staged
            else:
                inner = self._main.remember_main(owner.main, args)
            self._fused = fused_on_grid(inner, grid)

    def fused_launch(self) -> FusedLaunch | None:
        """The launch on the grid the launch before this launcher ran, for the runtime's quick
        path; None where there is none."""
        return self._fused

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None, *,
               dependent: bool = False) -> None:
        if not self._stages.get(grid, args, dependent):
            return self._main.run_main(self._owner.main, grid, args, stream, dependent)
        if self._staged is None:
            self._staged = self._owner.staged_launcher(args)
        self._staged.launch(grid, args, stream)


class StagedLauncher:
    """A StagedKernel's launches for one argument specialization (the fast path's key fixes the
    staged arrays' dtypes, shapes, strides and alignment, hence their copies' layout and the
    prologues' Triton specialization): each prologue through the native C launcher
    (native_launch.py), the staged kernel through its own fast launcher. Before it, every staged
    launch took Triton's full launch path twice or more: 110-340 us per launch on the H200 host,
    more than the GPU time of a 2048^3 tf32 matmul (benchmarks/results/size-sweep-h200-2026-12-01-ac.json).
    Launches on a stream other than the current one go through `StagedKernel.launch` (the
    scratch must come from that stream's pool); its quick launch declines, launching nothing,
    where another device's CUDA context is current (its native launchers compare theirs)."""

    def __init__(self, owner: StagedKernel, kernel: Any, args: Sequence[Any]) -> None:
        self._owner = owner
        self._kernel = kernel
        self._count = len(args)
        self._prologues: list[tuple[int, tuple[int, int], tuple[int, int], Callable[..., bool], tuple, tuple, tuple]] = []
        for i, copy in owner.staged.params.items():
            x = args[i]
            shape, strides = scratch_layout(x.shape, copy.transposed, x.element_size())
            example = torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device)
            grid = (triton.cdiv(x.shape[0], TILE), triton.cdiv(x.shape[1], TILE), 1)
            scalars = (x.shape[0], x.shape[1], x.stride(0), x.stride(1), strides[0], copy.transposed, TILE)
            with TRITON_LANGUAGE:
                compiled = _prologue(False, copy.rounded).run(x, example, *scalars[:5], TRANSPOSE=copy.transposed,
                                                              T=TILE, num_warps=4, grid=grid, warmup=True)
            compiled._init_handles()
            native = native_launch.launcher_for(compiled)
            if native is None:  # no C compiler here: StagedKernel.launch stages
                self._prologues = []
                self._kernel = None
                return
            self._prologues.append((i, shape, strides, native[0], grid, native[1], scalars))

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None, *,
               dependent: bool = False) -> None:
        if dependent or not self._launched(grid, args, stream):
            self._owner.launch(grid, args, stream, dependent=dependent)

    def _launched(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any) -> bool:
        """The launch through the native launchers; False, having launched nothing, where it
        cannot run so (another stream than the current one, no native launcher, or not the
        CUDA context they were loaded in: the first prologue declines, as they share one)."""
        current = current_stream()
        handle = current if stream is None else stream_handle(stream)
        if self._kernel is None or handle != current:
            return False
        copies = list(args)
        for i, shape, strides, native, pgrid, head, scalars in self._prologues:
            x = args[i]
            out = torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device)
            if not native(*pgrid, handle, *head, x.data_ptr(), out.data_ptr(), *scalars):
                return False
            copies[i] = out
        self._kernel.launch(grid, copies, stream)
        return True

    def fused_launch(self) -> FusedLaunch | None:
        """`launch` as one expression for the runtime's quick path (see `FusedLaunch`)."""
        if self._kernel is None:
            return None
        names = "".join(f"a{j}, " for j in range(self._count))
        return FusedLaunch(f"_staged((gx, gy, gz), ({names}), stream)", {"_staged": self._launched})


def stage_copy(x: torch.Tensor, copy: Copy, stream: Any, interpret: bool) -> torch.Tensor:
    """`x` copied as `copy` says (rounded to nearest even tfloat32 or not, transposed or not)
    into fresh scratch, on `stream`."""
    shape, strides = scratch_layout(x.shape, copy.transposed, x.element_size())
    with stream_context(stream) if x.is_cuda else contextlib.nullcontext():
        out = torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device)
        if x.numel():
            grid = (triton.cdiv(x.shape[0], TILE), triton.cdiv(x.shape[1], TILE))
            with TRITON_LANGUAGE:  # compiles or interprets
                _prologue(interpret, copy.rounded)[grid](x, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1),
                                                         strides[0], TRANSPOSE=copy.transposed, T=TILE, num_warps=4)
    return out
