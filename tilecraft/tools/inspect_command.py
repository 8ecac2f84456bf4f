"""`tilecraft inspect FILE.py:KERNEL ARG...`: the command line of `tools.inspect_kernel`.

Light to import: torch and Triton are imported only when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TileError
from . import DEFAULT_SMS, STAGES, CommandError
from .arguments import parse_arg, parse_grid
from .loading import RULES, load_kernel

NAME = "inspect"
HELP = "every compilation stage of a kernel for given arguments, with registers and spills"
DESCRIPTION = f"""\
Compile KERNEL of FILE.py for the given arguments and print its stages (Tile IR, generated
Triton, TTIR, TTGIR, LLVM IR, PTX, SASS) and a summary: warps, pipeline stages, registers and
bytes spilled per thread, shared memory. Compiles for an NVIDIA GPU of --capability without
needing that GPU (needs Triton and torch; the CPU build of torch is enough). What is shown is
what would launch: on sm_90 a flash-attention-shaped kernel runs as a warp-specialized Gluon
kernel, whose Gluon source is then the "triton" stage.

  tilecraft inspect tilecraft/library/matmul.py:matmul_kernel \\
      'float16[4096,4096]' 'float16[4096,4096]' 'float16[4096,4096]' 128 256 64 --stage ttgir

An argument `dtype[d0,d1,...]` (a torch dtype name) stands for a contiguous array of that shape
(no data needed); any other argument is a Python literal (128, 0.5, True, (1, 2)).

FILE.py is not run as a script: its top-level statements that define things run, and nothing
else, so its launches do not. What runs:
{RULES}

Mistakes in the kernel or its arguments print the compile error (file, line and a caret) and
exit with status 1."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, on its sub-parser."""
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the file and the name of a @ct.kernel in it")
    p.add_argument("args", nargs="*", metavar="ARG", help="kernel arguments: dtype[shape] or Python literals")
    p.add_argument("--stage", default="summary", choices=("summary", "all", *STAGES),
                   help="what to print before the summary (default: the summary only)")
    p.add_argument("--capability", type=int, default=90, help="NVIDIA compute capability (default 90: Hopper)")
    p.add_argument("--staged", "--tf32-staged", dest="staged", action="store_true",
                   help="show the staged variant that launches with large float32 (tf32) or misaligned operands run "
                        "on sm_90+ (operands copied in a prologue: rounded, B transposed / rows 16-byte aligned)")
    p.add_argument("--warp-specialized", action="store_true",
                   help="show a matmul's warp-specialized Gluon variant, which runs grids of 256 blocks or more on "
                        "sm_90 (by default the Triton kernel, which runs the other grids, is shown)")
    p.add_argument("--grid", type=parse_grid, metavar="G[,G1[,G2]]",
                   help="show what a launch on this grid runs: a variant its launch picks for the grid (blocks "
                        "merged into larger tiles, tiles split), or the kernel; as the warp-specialized Gluon "
                        "variant where that takes the grid")
    p.add_argument("--sms", type=int, default=DEFAULT_SMS,
                   help=f"the GPU's SM count for --grid (default {DEFAULT_SMS}: an H100's or H200's)")


def run(opts: argparse.Namespace) -> int:
    """Load the kernel, compile it for the arguments, print the stages asked for."""
    loaded, kernel = load_kernel(opts.kernel)
    args = tuple(parse_arg(a, empty_array, "tilecraft inspect") for a in opts.args)
    from .inspection import inspect_kernel  # imports Triton and torch
    try:
        info = inspect_kernel(kernel, args, capability=opts.capability, staged=opts.staged,
                              warp_specialized=opts.warp_specialized, grid=opts.grid, sms=opts.sms)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    except TileError as exc:
        raise loaded.command_error(exc) from None
    shown = STAGES if opts.stage == "all" else () if opts.stage == "summary" else (opts.stage,)
    for stage in shown:
        print(f"==== {stage} ====\n{info.stage(stage)}")
    print(info.summary())
    return 0


def empty_array(torch: Any, dtype: Any, shape: list[int]) -> Any:
    """The stand-in for `dtype[shape]`: an empty contiguous CPU tensor (no data is read)."""
    return torch.empty(shape, dtype=dtype)
