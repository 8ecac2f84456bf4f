"""Loading and launching the warp-specialized Gluon variant, and the kernel that chooses it.

`WarpSpecializedKernel` wraps the Triton backend's kernel: on an sm_90 GPU it launches the
Gluon variant (lower.py), built at the first launch; a variant Gluon cannot build (an op it
does not take, layouts it cannot reconcile, shared memory) is given up for good, with the
reason in `fallbacks`, and the wrapped kernel launches instead. Tensor descriptors are made on
the host (Gluon takes them as arguments): at every launch through Triton's JITFunction, once per
array on the direct launches that follow (`GluonKernel.direct`). A cached `ct.launch` on the grid
of the launch that made its fast-path entry runs in tilecraft's C quick launcher
(`GluonKernel.fused_launch`), as Triton kernels' do."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import mangle_type

from ..base import ChosenPerGrid, FusedLaunch, LastLaunch, WrappedKernel, fused_on_grid
from ..triton.compile import GPU_MATH_OPTIONS, TRITON_LANGUAGE, load_module, write_source
from ..triton.descriptor_args import ExpandedLauncher
from ..triton.split_launch import launch_sms, sm_count
from ..triton.launching import (baked_exprs, current_stream, fused_launch, fused_maps, stream_context,
                                 stream_handle)
from .lower import GluonLowered, deals_evenly

Grid = tuple[int, int, int]

_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}


def _multiprocessors(args: Sequence[Any]) -> int:
    """The multiprocessors of the GPU holding the launch's tensors (the current GPU where they are
    not on one), or as many as `split_launch.assumed_sms` says (`tilecraft inspect --grid`)."""
    sms = launch_sms(args)
    return sms if sms is not None else sm_count(torch.cuda.current_device())


class GluonKernel:
    """One lowered Gluon module, loaded: `launch(grid, args, stream)` as TritonKernel's."""

    def __init__(self, lowered: GluonLowered) -> None:
        self.lowered = lowered
        self.source = lowered.source
        path = write_source(lowered.name, lowered.source)
        module = load_module(path, f"tilecraft_gluon_{path.stem}", lowered.name, lowered.source)
        self._fn = getattr(module, lowered.name)
        self._layouts: list[Any] | None = None
        self._flatten = eval(lowered.flatten)  # noqa: S307 - generated: `lambda a0, ...: (...)`

    def descriptors(self, args: Sequence[Any]) -> list[Any]:
        """The TMA descriptors of a launch with `args` (host-made, Gluon's type). Their shared
        memory layouts depend on the block and dtype only, both fixed for the kernel: made once
        (20 of the 27 us four descriptors took on this machine's CPU)."""
        specs = self.lowered.descriptors
        if self._layouts is None:
            self._layouts = [gl.NVMMASharedLayout.get_default_for(list(d.block), _GL[args[d.param].dtype]) for d in specs]
        return [TensorDescriptor.from_tensor(args[d.param], list(d.block), layout) for d, layout in zip(specs, self._layouts)]

    def takes(self, grid: Grid, args: Sequence[Any]) -> bool:
        """Whether the variant runs `grid` (paired blocks need an even axis 0; a chained kernel,
        a matmul, runs only grids it deals evenly to the SMs: `lower.deals_evenly`)."""
        if grid[0] % self.lowered.grid_divisor:
            return False
        if not self.lowered.chained:
            return True
        return deals_evenly(grid[0] * grid[1] * grid[2], _multiprocessors(args))

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> Any:
        """Launch over the user's `grid` (divided by `grid_divisor`); a persistent kernel runs
        one program per SM (at most one per block) and takes that grid as its last arguments.
        `dependent` is not taken: `WarpSpecializedKernel` sends programmatic dependent launches
        to the Triton kernel. Returns Triton's compiled kernel that ran (for `direct`)."""
        head, tail, grid = self._arguments(grid, args)
        flat = (*head, *self.descriptors(args), *tail)
        options = self._options()
        with TRITON_LANGUAGE, stream_context(stream):
            return self._fn[grid](*flat, **options)

    def expanded(self, compiled: Any) -> ExpandedLauncher | None:
        """The launcher of `compiled` (what `launch` returned) encoding each descriptor once per
        array; None where Triton's own path must run it."""
        make = [functools.partial(TensorDescriptor.from_tensor, block_shape=list(d.block), layout=layout)
                for d, layout in zip(self.lowered.descriptors, self._layouts or ())]
        return ExpandedLauncher.of(compiled, make)

    def direct(self, compiled: Any, expanded: ExpandedLauncher | None) -> Callable[[Grid, Sequence[Any], Any], None]:
        """`launch` through `compiled`, what `launch` returned for arguments of the same
        specialization on the same grid, without Triton's JITFunction.run (which binds the
        arguments and builds a cache key on every call): Triton's C launch function with each
        descriptor encoded once per array (`expanded`, this kernel's `expanded(compiled)`);
        where that is not to be had, the compiled kernel's launcher as JITFunction.run calls
        it, with no launch hooks (its wrapper then encodes the descriptors at every launch)."""
        specs = self.lowered.descriptors

        def launch(grid: Grid, args: Sequence[Any], stream: Any = None) -> None:
            head, tail, grid = self._arguments(grid, args)
            handle = current_stream() if stream is None else stream_handle(stream)
            if expanded is not None:
                expanded.launch(grid, handle, head, [args[d.param] for d in specs], tail)
                return
            compiled.run(grid[0], grid[1], grid[2], handle, compiled.function, compiled.packed_metadata, None, None,
                         None, *head, *self.descriptors(args), *tail)
        return launch

    def fused_launch(self, expanded: ExpandedLauncher | None, grid: Grid, args: Sequence[Any]) -> FusedLaunch | None:
        """`direct`'s launch of the user's `grid` for the runtime's quick path
        (`launching.fused_launch`), made for that grid only (the compiled kernel is specialized
        for its grid arguments), for arguments of the specialization of `args`: addresses,
        scalars and constants as the Triton backend's (`baked_exprs`), each descriptor's map
        kept per address and its shape and strides constants, the grid arguments constants.
        None without tilecraft's C launcher."""
        if expanded is None or expanded.native is None:
            return None
        head, tail, launched = self._arguments(grid, args)
        plain = baked_exprs(self.lowered, args, head, address="p{}")
        if plain is None:
            return None
        fused = (*plain, *fused_maps(expanded, [d.param for d in self.lowered.descriptors], args), *map(str, tail))
        return fused_launch(expanded.native, fused, expanded.map_bytes, grid=(grid, launched))

    def _arguments(self, grid: Grid, args: Sequence[Any]) -> tuple[tuple, tuple, Grid]:
        """(the kernel's arguments before its descriptors, those after them, its launch grid) for
        a launch of the user's `grid`."""
        head = self._flatten(*args)
        grid = (grid[0] // self.lowered.grid_divisor, grid[1], grid[2])
        if not self.lowered.persistent:
            return head, (), grid
        blocks = grid[0] * grid[1] * grid[2]
        work = (grid[0] + 1) // 2 * grid[1] * grid[2] if self.lowered.units_paired else blocks
        return head, grid, (min(work, _multiprocessors(args)), 1, 1)

    def compile_for(self, capability: int = 90, args: Sequence[Any] | None = None) -> Any:
        """Compile for sm_<capability> without a GPU (`args`: arrays may live on the CPU; needed
        for the descriptors' types). Returns Triton's compiled kernel."""
        if args is None:
            raise ValueError("a Gluon kernel compiles for given arguments")
        sig = dict(self.lowered.signature)
        for d, desc in zip(self.lowered.descriptors, self.descriptors(args)):
            sig[d.name] = mangle_type(desc)
        sig.update((name, "i32") for name in self.lowered.grid_names)
        attrs = {(i,): [["tt.divisibility", 16]] for i in self.lowered.aligned}
        src = GluonASTSource(self._fn, signature=sig, attrs=attrs)
        with TRITON_LANGUAGE:
            return triton.compile(src, target=GPUTarget("cuda", capability, 32), options=self._options())

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = dict(GPU_MATH_OPTIONS, num_warps=self.lowered.num_warps)
        if self.lowered.maxnreg is not None:
            options["maxnreg"] = self.lowered.maxnreg
        return options

    def specialize(self, args: Sequence[Any]) -> "GluonKernel":
        """Itself: its faster launches are `direct`'s, made per compiled kernel."""
        return self


class WarpSpecializedKernel(WrappedKernel):
    """The Triton backend's kernel with a warp-specialized Gluon variant (module docstring).
    `build()` lowers and loads the variant (an exception: it cannot be built); Gluon compiles
    it at its first launch, before it runs (an exception there: the same)."""

    def __init__(self, main: Any, build: Callable[[], GluonKernel]) -> None:
        self.main = main
        self._build = build
        self._variant: GluonKernel | None = None
        self._launched = False
        self.gave_up: str | None = None
        self.variant_launches = 0  # launches that ran the Gluon variant
        self._last_run = LastLaunch()  # what ran: the variant's compiled kernel, None for the Triton kernel

    def give_up(self, exc: Exception) -> None:
        """Run the Triton kernel from now on; `fallbacks` says why."""
        lines = str(exc).strip().splitlines()
        self.gave_up = f"{type(exc).__name__}: {lines[-1] if lines else ''}"
        self._variant = None

    @property
    def compiled_variants(self) -> tuple[GluonKernel, ...]:
        return () if self._variant is None else (self._variant,)

    def variant(self) -> GluonKernel | None:
        """The Gluon variant, built on first use; None once it could not be."""
        if self._variant is None and self.gave_up is None:
            try:
                self._variant = self._build()
            except Exception as exc:  # noqa: BLE001 - any failure to build means: run the Triton kernel
                self.give_up(exc)
        return self._variant

    @property
    def fallbacks(self) -> list[tuple[str, str]]:
        """As TritonKernel's, (what was given up, why): the Gluon variant first where it was."""
        mine = [("the warp-specialized Gluon variant", f"it does not build ({self.gave_up})")] if self.gave_up else []
        return [*mine, *self.main.fallbacks]

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        self._last_run.forget()
        variant = None if dependent else self.variant()
        if variant is None or not variant.takes(grid, args):
            self.main.launch(grid, args, stream, dependent=dependent)
            if not dependent:
                self._last_run.record(grid, None, args)
            return
        compiled = self.run_variant(variant, grid, args, stream)
        if compiled is not None:
            self._last_run.record(grid, compiled, args)

    def run_variant(self, variant: GluonKernel, grid: Grid, args: Sequence[Any], stream: Any) -> Any:
        """Launch `variant` on `grid`, which it takes; its first launch compiles it, and one it
        cannot build is given up and the Triton kernel runs instead (None returned; else Triton's
        compiled kernel that ran)."""
        if self._launched:
            compiled = variant.launch(grid, args, stream)
        else:
            try:  # the first launch compiles: a variant Gluon cannot build runs as the Triton kernel
                compiled = variant.launch(grid, args, stream)
            except (CompilationError, OutOfResources, RuntimeError, ValueError, AssertionError) as exc:
                # Triton's failed pass pipeline is a RuntimeError, a descriptor it cannot make a
                # ValueError or AssertionError; all arise before the kernel runs (a launch is
                # asynchronous: faults of a running kernel surface later, not here)
                self.give_up(exc)
                self.main.launch(grid, args, stream)
                return None
            self._launched = True
        self.variant_launches += 1
        return compiled

    def specialize(self, args: Sequence[Any]) -> Any:
        """While the variant may run, a launcher choosing per grid between it and the Triton
        kernel's specialized launcher (a paired variant takes only even grids, a matmul's only
        grids it deals evenly); else the Triton kernel's launcher. Where this kernel's last
        `launch` ran these very arguments on the variant (the runtime specializes after a
        launch), the launcher starts with that launch's grid and compiled kernel (its
        `fused_launch`); where it ran them on the Triton kernel, with that kernel's specialized
        launcher and its fused launch for that grid."""
        if self.variant() is None:
            return self.main.specialize(args)
        return WarpSpecializedLauncher(self, args, self._last_run.take(args))


class WarpSpecializedLauncher:
    """`WarpSpecializedKernel.specialize`'s launcher: the grids the variant takes (chosen once per
    grid) launch through the kernel, the others through the Triton kernel's specialized launcher
    (`main`, made after the first such launch, which takes the Triton kernel's normal path: its
    compile, and its refit where it does not fit, may not have happened yet; attention never
    needs it). A repeated launch on the variant's last grid calls the compiled kernel that grid's
    launch returned (`GluonKernel.direct`), without Triton's JITFunction.run: H200, the MatMul
    sample at bf16 4000x3000x2000, 68.9 -> 37.3 us of host time per launch
    (benchmarks/results/gluon-direct-h200-2026-12-01.log), most of the rest its three
    descriptors, now encoded once per array. Made with the grid and compiled kernel of the
    launch before it, it has a `fused_launch` for that grid: the runtime's quick path then runs
    that grid in C, 21.5 -> 5.3 us (launch-parts-h200-2026-12-02-e.log against -f). Made after a
    launch on the Triton kernel, it has that kernel's fused launch for that grid (`fused_on_grid`):
    before, such launches (a matmul's grids too small for the variant) always took the long path:
    fp16 1024^3, 19.6 -> 4.5 us of host time per launch
    (benchmarks/results/fresh-output-probe-h200-2026-12-03.json against -b)."""

    def __init__(self, kernel: WarpSpecializedKernel, args: Sequence[Any], ran: tuple[Grid, Any] | None) -> None:
        self.kernel = kernel
        self.main: Any = None
        self._takes = ChosenPerGrid(lambda grid, args: (v := kernel.variant()) is not None and v.takes(grid, args))
        self._direct: tuple[Grid, Callable] | None = None  # the last grid the variant ran, its direct launch
        self._fused: FusedLaunch | None = None
        variant = kernel.variant()
        if ran is not None and ran[1] is None:  # the Triton kernel's launch of `args` on grid ran[0]
            self.main = kernel.main.specialize(args)
            self._fused = fused_on_grid(self.main, ran[0])
        elif ran is not None and variant is not None:  # the variant's launch of `args` on grid ran[0]
            grid, compiled = ran
            expanded = variant.expanded(compiled)
            self._direct = (grid, variant.direct(compiled, expanded))
            self._fused = variant.fused_launch(expanded, grid, args)

    def fused_launch(self) -> FusedLaunch | None:
        """The variant's launch on the grid it ran when this launcher was made, for the runtime's
        quick path (`GluonKernel.fused_launch`); None where there is none."""
        return self._fused

    def launch(self, grid: Grid, args: Sequence[Any], stream: Any = None, *, dependent: bool = False) -> None:
        variant = self.kernel.variant() if self._takes.get(grid, args, dependent) else None
        if variant is not None:  # None also once the variant was given up
            last = self._direct
            if last is not None and last[0] == grid:
                # this launcher's arguments keep their specialization (the fast-path key) but for
                # the grid, which a persistent variant takes as int arguments: Triton specializes
                # those (a multiple of 16 or not), so the compiled kernel is kept per grid
                last[1](grid, args, stream)
                self.kernel.variant_launches += 1
                return
            compiled = self.kernel.run_variant(variant, grid, args, stream)
            if compiled is not None:
                self._direct = (grid, variant.direct(compiled, variant.expanded(compiled)))
            return
        if self.main is None:  # a normal launch first: it compiles and, where it does not fit, refits the kernel
            self.kernel.main.launch(grid, args, stream)
            self.main = self.kernel.main.specialize(args)
            return
        self.main.launch(grid, args, stream)  # the fast path's launches are never dependent
