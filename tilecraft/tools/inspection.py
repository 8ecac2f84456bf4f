"""See every stage of a kernel for given arguments: Tile IR, generated Triton, TTIR, TTGIR,
LLVM IR, PTX and SASS, with registers, spills and shared memory, compiled for a GPU
architecture without needing that GPU.

    from tilecraft.tools import inspect_kernel
    info = inspect_kernel(matmul_kernel, (A, B, C, 128, 256, 64))   # CPU tensors are fine
    print(info.stage("ptx")); print(info.summary())

    python -m tilecraft inspect tilecraft/library/matmul.py:matmul_kernel \\
        'float16[4096,4096]' 'float16[4096,4096]' 'float16[4096,4096]' 128 256 64 --stage ttgir

An argument `dtype[d0,d1,...]` stands for a contiguous array of that shape (no data needed).
The command line is tools/inspect_command.py.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from ..backends.arrays import as_torch
from ..backends.base import BackendKind, wrapped_as
from ..backends.resident_rows import ResidentRowsKernel
from ..backends.splitting import MIN_SPLIT_K, SplitKernel
from ..backends.tile_splitting import GridVariantKernel
from ..backends.triton import TritonBackend  # says which of Triton and torch is missing, if one is
from ..backends.triton.compile import TritonKernel
from ..backends.triton.fitting import shared_memory_limit
from ..backends.triton.launching import grid_loop_launch, programs_per_sm
from ..backends.triton.operand_staging import StagedKernel
from ..backends.triton.split_launch import assumed_sms
from ..ir import ArrayType, Function, ListType, format_function
from ..passes.block_merge import Merge
from ..runtime.args import backend_args
from ..runtime.kernel import Kernel
from . import DEFAULT_SMS, STAGES


@dataclass
class Inspection:
    """The stages of one kernel variant and the resources its GPU code uses."""

    ir: str
    triton: str
    asm: dict[str, Any]   # Triton's compiled asm: ttir, ttgir, llir, ptx, cubin (sass on access)
    capability: int
    num_warps: int
    num_stages: int
    shared_bytes: int
    registers: int | None
    spill_bytes: int | None
    fallbacks: tuple[tuple[str, str], ...] = ()  # (what was given up to fit the GPU, why), in order
    split_k: bool = False  # has split-K variants (passes/split_k.py); the stages are the unsplit kernel's
    staging: str = ""  # "": no staged variant (operands copied in a prologue); "variant": it has one; "shown": its stages
    warp_specialized: str = ""  # "shown": the stages are the Gluon variant's ("triton": its source); "variant": a
    # matmul's Gluon variant, run on grids dealt evenly to the SMs (the stages are the Triton kernel's); "shown
    # variant": that variant's stages (`warp_specialized=True`, or a `grid` it takes)
    host_descriptors: bool = False  # the stages are the host-descriptor variant's, which every launch runs
    mma_sync: bool = False  # built with Hopper's wgmma off: tf32 MMAs on operands rounded in registers
    on_grid: str = ""  # what a launch on the grid asked for runs (a variant its launch picks, or the kernel)

    def stage(self, name: str) -> str:
        """The text of stage `name` (one of STAGES)."""
        if name == "ir":
            return self.ir
        if name == "triton":
            return self.triton
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; choose from {', '.join(STAGES)}")
        return self.asm[name]

    def summary(self) -> str:
        regs = "?" if self.registers is None else str(self.registers)
        spills = "?" if self.spill_bytes is None else str(self.spill_bytes)
        text = (f"sm_{self.capability}: {self.num_warps} warps, {self.num_stages} stages, {regs} registers/thread, "
                f"{spills} bytes spilled/thread, {self.shared_bytes} bytes shared memory")
        for step, why in self.fallbacks:
            text += f"\nfitted to the GPU: {step} ({why})"
        if self.split_k:
            text += ("\nsplit-K variants: a 1-D grid of G blocks filling at most half the SMs, with a K loop "
                     "reaching K, may run as PARTIAL on (G * P, S, 1) then FINISH on (G * P, R, 1): each output "
                     f"tile cut into P pieces (1: whole), the K loop into S splits of at least {MIN_SPLIT_K}, G * P * S "
                     "within the SMs, P and S those a cost model rates fastest (backends/splitting.py `auto_split`), "
                     "R row slices per tile; the stages shown are the unsplit kernel's")
        if self.warp_specialized == "shown variant":
            text += ("\nwarp-specialized variant shown: grids of 256 blocks or more that fill the SMs' last round "
                     "well run as this persistent Gluon kernel (backends/gluon/lower.py `deals_evenly`); the "
                     "other grids run the Triton kernel")
        elif self.warp_specialized == "shown":
            text += ("\nwarp-specialized: on this GPU the kernel runs as the Gluon variant shown (a producer warp "
                     "streaming its loop's tiles through TMA, compute warpgroups issuing the MMAs; backends/gluon); "
                     "TILECRAFT_WARP_SPECIALIZE=0 shows and runs the Triton kernel")
        elif self.warp_specialized == "variant":
            text += ("\nwarp-specialized variant: grids of 256 blocks or more that fill the SMs' last round well run "
                     "as a persistent Gluon kernel (backends/gluon/lower.py `deals_evenly`; --warp-specialized, "
                     "or --grid with such a grid, shows it); the stages shown are the Triton kernel's, which runs "
                     "the other grids")
        if self.mma_sync:
            text += ("\nmma.sync: its tf32 MMAs take operands rounded in registers, which Hopper's wgmma would "
                     "write back to shared memory every K step, so Triton builds it with wgmma off "
                     "(heuristics.mma_sync_only)")
        if self.host_descriptors:
            text += ("\nhost descriptors: every launch with these arguments runs the kernel shown, whose tensor "
                     "descriptors are parameters made on the host (the kernel that makes its own runs only where an "
                     "array is empty)")
        if self.staging == "variant":
            text += ("\nstaged variant: launches with large float32 (tf32) or misaligned operands copy them in a "
                     "prologue (rounded, B transposed / rows aligned) and run it (see it with staged=True, --staged); "
                     "the stages shown are the unstaged kernel's")
        elif self.staging == "shown":
            text += ("\nthe stages shown are the staged kernel's (operands copied in a prologue: tf32 ones rounded, "
                     "B transposed; misaligned ones into 16-byte aligned rows)")
        if self.on_grid:
            text += "\n" + self.on_grid
        return text


@functools.lru_cache(maxsize=8)
def _resources(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers, spill bytes) per thread from `cuobjdump -res-usage` (Triton ships it), once per
    binary (`_fits_at_once` asks before the summary does)."""
    from triton.tools.disasm import path_to_cuobjdump

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run([path_to_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True,
                                 check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None, None
    regs, stack = re.search(r"REG:(\d+)", out), re.search(r"STACK:(\d+)", out)
    return (int(regs.group(1)) if regs else None), (int(stack.group(1)) if stack else None)


def compiled_as_launched(kernel: Kernel, args: tuple[Any, ...], capability: int = 90) -> tuple[Function, Any, list[Any]]:
    """(the Tile IR, the Triton backend's compiled kernel, the backend's launch arguments) of
    `kernel` launched with `args` (arrays may live on the CPU) on an NVIDIA sm_<capability> GPU:
    the same specialization facts and lowering as such a launch."""
    specs, arrays, flat = kernel.describe(args)
    ir = kernel.lower(specs, f"sm_{capability}")
    facts = iter(a.facts for a in arrays)
    param_facts = [next(facts) if isinstance(p.type, (ArrayType, ListType)) else None for p in ir.params]
    compiled = TritonBackend(BackendKind.TRITON, capability=capability).compile(ir, param_facts)
    return ir, compiled, backend_args(flat, as_torch)


def inspect_kernel(kernel: Kernel, args: tuple[Any, ...], *, capability: int = 90,
                   staged: bool = False, warp_specialized: bool = False,
                   grid: tuple[int, ...] | None = None, sms: int = DEFAULT_SMS) -> Inspection:
    """Compile `kernel` for `args` (arrays may live on the CPU) for NVIDIA sm_<capability>,
    exactly as a launch on such a GPU would: same specialization facts, same lowering.
    `staged`: the staged variant that launches with large tf32 or misaligned operands run
    (backends/triton/operand_staging.py; a ValueError if the kernel has none).
    `warp_specialized`: a matmul's warp-specialized Gluon variant, which runs only on some grids
    (by default the Triton kernel is shown; a ValueError if the kernel has none).
    `grid`: what a launch on that grid runs on a GPU of `sms` SMs, where that is a variant the
    launch picks for its grid (blocks merged, tiles split: backends/tile_splitting.py), of the
    staged kernel where such a launch stages, as its warp-specialized Gluon variant where that
    takes the grid (`GluonKernel.takes`), and without the grid loop where its programs all fit
    the GPU at once (`TritonKernel.small_grid_kernel`)."""
    ir, compiled, launch_args = compiled_as_launched(kernel, args, capability)
    has_staged = isinstance(compiled, StagedKernel)
    split = isinstance(compiled.main if has_staged else compiled, SplitKernel)
    if warp_specialized and (staged or grid is not None):
        raise ValueError("the warp-specialized variant is shown on its own: not with the staged kernel or a grid")
    whole = None if grid is None else _whole_grid(grid, sms)
    if whole is not None and has_staged and not staged:
        with assumed_sms(sms):
            staged = compiled.would_stage(launch_args, whole)  # as a launch of GPU arrays would
    if staged:
        if not has_staged:
            raise ValueError(f"kernel `{ir.name}` has no staged variant for these arguments")
        ir, compiled, launch_args = compiled.staged.fn, compiled.staged_kernel(launch_args), compiled.staged_args(launch_args)
    on_grid, as_compiled = "", compiled  # what a launch on `grid` runs, said in the summary
    rows = wrapped_as(compiled, ResidentRowsKernel)
    if rows is not None:  # chosen by the arguments' row length, on any grid
        ir, compiled, on_grid = _resident(ir, compiled, rows, launch_args)
    elif whole is not None:
        ir, compiled, on_grid, whole = _on_grid(ir, compiled, whole, launch_args, sms)
    elif wrapped_as(compiled, GridVariantKernel) is not None:
        on_grid = ("grid variants: launches on some grids run a variant of the kernel shown (blocks merged, tiles "
                   "split: backends/tile_splitting.py); grid=, --grid shows what a grid runs")
    host = False  # the host-descriptor variant shown (what every launch with these arguments runs)
    picked = staged or compiled is not as_compiled  # a variant: its Gluon variant is shown only where it takes the grid
    gluon = _variant_of(compiled)[1] if picked or whole is not None else None
    with assumed_sms(sms):
        takes = gluon is not None and whole is not None and gluon.takes(whole, launch_args)
    if takes or not (picked or whole is not None):
        shown = _warp_specialized(compiled, capability, launch_args, warp_specialized or takes)
    else:  # a matmul's variant (a staged tf32 one's too), which runs only grids dealt evenly to the SMs
        shown = "variant" if gluon is not None and gluon.lowered.chained else None
    if warp_specialized and not isinstance(shown, tuple):
        raise ValueError(f"kernel `{ir.name}` has no warp-specialized Gluon variant for these arguments on "
                         f"sm_{capability}")
    if isinstance(shown, tuple):
        variant, binary = shown
        registers, spills = _resources(binary.asm["cubin"])
        if takes:
            on_grid = on_grid.removesuffix(" (shown)") + "; it runs this grid as its warp-specialized Gluon variant (shown)"
        return Inspection(format_function(ir), variant.source, binary.asm, capability, variant.lowered.num_warps,
                          variant.lowered.stages, binary.metadata.shared, registers, spills,
                          tuple(compiled.fallbacks), split, "shown" if staged else "",
                          warp_specialized="shown variant" if variant.lowered.chained else "shown", on_grid=on_grid)
    main = wrapped_as(compiled, TritonKernel)
    if main is not None and whole is not None and _fits_at_once(main, whole, launch_args, capability, sms):
        compiled = main = main.small_grid_kernel()
        on_grid = (on_grid.removesuffix(" (shown)") + f"; its {whole[0] * whole[1] * whole[2]} programs fit the "
                   "GPU at once, so launches run its one-program-per-block variant, without the grid loop (shown)")
    variant = main.variant_for(launch_args) if main is not None else None
    host = variant is not None and variant is not main
    binary = (variant if host else compiled).compile_for(capability, launch_args)
    fallbacks = tuple(compiled.fallbacks)  # a wrapper's (the Gluon variant given up) and the kernel's
    if host:  # the variant's own refits, where it did not fit; its source, schedule and resources
        fallbacks, compiled = (*fallbacks, *variant.fallbacks), variant
    registers, spills = _resources(binary.asm["cubin"])
    return Inspection(format_function(ir), compiled.source, binary.asm, capability, compiled.config.num_warps,
                      compiled.config.num_stages, binary.metadata.shared, registers, spills, fallbacks,
                      split, "shown" if staged else "variant" if has_staged else "",
                      warp_specialized="variant" if shown == "variant" else "", host_descriptors=host,
                      mma_sync=compiled.config.mma_sync and capability >= 90, on_grid=on_grid)


def _on_grid(ir: Function, compiled: Any, whole: tuple[int, int, int], args: list[Any],
             sms: int) -> tuple[Function, Any, str, tuple[int, int, int]]:
    """(IR, compiled kernel, what the summary says, the grid it launches on) of what a launch of
    `compiled` on `whole` runs on a GPU of `sms` SMs: the variant its launch picks for the grid,
    or the kernel as compiled."""
    variants = wrapped_as(compiled, GridVariantKernel)
    split_k = wrapped_as(compiled, SplitKernel)
    with assumed_sms(sms):
        splits = None if split_k is None else split_k.splits(whole, args, False)
        count = None if variants is None or splits is not None else variants.count(whole, args, False)
    if splits is not None:
        pieces, ways = splits
        cut = f"each output tile cut into {pieces} pieces, " if pieces > 1 else ""
        return ir, compiled, (f"grid {whole} on {sms} SMs: launches split the K loop {ways} ways, {cut}PARTIAL on "
                              f"({whole[0] * pieces}, {ways}, 1) then FINISH (backends/splitting.py); the unsplit "
                              "kernel is shown"), whole
    if count is None:
        return ir, compiled, f"grid {whole} on {sms} SMs: launches run the kernel as compiled (shown)", whole
    launched = variants.variant_grid(whole, count)
    if isinstance(count, Merge):
        how = (f"the user's blocks merged {count.rows} x {count.cols} to a program (stride {count.stride}"
               + (f", programs in groups of {count.group} merged row tiles" if count.band else "")
               + (f", spans restarting at every group of {count.period} blocks, the last group {count.last} row "
                  "tiles tall" if count.period else "")
               + (", unchecked" if not count.checked else ", checked in the kernel")
               + (f", the first {count.head} programs; the {whole[0] - count.covered(count.head)} blocks after "
                  "them one each" if count.head else "") + ")")
    else:
        how = f"each output tile split {count} ways"
    note = (f"grid {whole} on {sms} SMs: launches run the variant shown, {how}, on grid {launched} "
            "(backends/tile_splitting.py)")
    return variants.variant_ir(count), variants.variant(count), note, launched


def _fits_at_once(kernel: TritonKernel, grid: tuple[int, int, int], args: list[Any], capability: int,
                  sms: int) -> bool:
    """Whether a grid-loop `kernel` runs `grid` as its one-program-per-block variant on a GPU of
    `sms` SMs of `capability`: all its blocks fit at once (launching.grid_loop_launch), by the
    binary's shared memory, registers and warps against an SM's limits, as `sm_slots` counts on
    the GPU."""
    if not kernel.lowered.grid_loop:
        return False
    binary = kernel.compile_for(capability, args)
    registers, _ = _resources(binary.asm["cubin"])
    per_sm = programs_per_sm(binary.metadata.shared, registers or 0, kernel.config.num_warps,
                             shared_memory_limit(capability))
    return grid_loop_launch(grid, (), sms * per_sm) is None


def _resident(ir: Function, compiled: Any, rows: ResidentRowsKernel, args: list[Any]) -> tuple[Function, Any, str]:
    """(IR, compiled kernel, what the summary says) of what a launch with `args` runs where
    `compiled` has resident-row variants: the variant for their row length, or the kernel as
    compiled where that length has none."""
    size = rows.count((1, 1, 1), args, False)
    if size is None:
        return ir, compiled, ("resident rows: rows of this length are too long to hold, launches run the kernel as "
                              "compiled (shown; passes/resident_rows.py)")
    return rows.variant_ir(size), rows.variant(size), (
        f"resident rows: launches with rows of {size} run the kernel's variant for that length, each tile loaded "
        "once (shown; passes/resident_rows.py)")


def _whole_grid(grid: tuple[int, ...], sms: int) -> tuple[int, int, int]:
    """`grid` (1 to 3 positive ints) as three axes, to show on a GPU of `sms` SMs (at least one)."""
    if len(grid) not in (1, 2, 3) or not all(isinstance(g, int) and g >= 1 for g in grid):
        raise ValueError(f"a grid is 1 to 3 positive ints, got {grid!r}")
    if sms < 1:
        raise ValueError(f"a GPU has at least one SM, got sms={sms}")
    return (*grid, 1, 1)[:3]


def _variant_of(compiled: Any) -> tuple[Any, Any]:
    """(the WarpSpecializedKernel wrapping `compiled`'s kernel, its Gluon variant), each None
    where there is none (or the variant does not build)."""
    from ..backends.gluon import WarpSpecializedKernel
    ws = wrapped_as(compiled, WarpSpecializedKernel)
    return ws, None if ws is None else ws.variant()


def _warp_specialized(compiled: Any, capability: int, launch_args: list[Any],
                      chained: bool = False) -> tuple[Any, Any] | str | None:
    """(the warp-specialized Gluon variant a launch on the GPU of `capability` would run, its
    binary); "variant" for a matmul's, which runs only on some grids (`deals_evenly`: inspect
    shows the Triton kernel unless `chained`); None where the kernel has none or it does not
    build (the reason joins the kernel's fallbacks)."""
    ws, variant = _variant_of(compiled)
    if variant is None:
        return None
    if variant.lowered.chained and not chained:
        return "variant"
    try:
        return variant, variant.compile_for(capability, launch_args)
    except Exception as exc:  # noqa: BLE001 - as at a launch: the Triton kernel is what runs then
        ws.give_up(exc)
        return None
