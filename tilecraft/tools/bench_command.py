"""`tilecraft bench FILE.py:KERNEL ARG... --grid G --torch EXPR`: a kernel against PyTorch in
one command (tools/benchmarking.py does the work).

Light to import: torch is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..environment import require
from ..errors import TileError
from . import CommandError
from .arguments import parse_arg, parse_grid
from .loading import RULES, load_kernel

NAME = "bench"
HELP = "time a kernel against a PyTorch expression on the same arguments, after checking its output"
DESCRIPTION = f"""\
Launch KERNEL of FILE.py on --grid with the given arguments and time it, side by side with the
PyTorch expression --torch evaluated on the same arguments (the kernel's parameter names are
bound to them; `torch` and `F` = torch.nn.functional are there too). Before timing, the
kernel's output (--out, default its last array argument), filled with NaN first, is checked
against what the expression returns: the largest error relative to the largest |value| must be
within the output dtype's bound (float32 1e-5, float16 / bfloat16 1e-2; --rtol sets another),
or the command exits with status 1.

  tilecraft bench examples/matmul.py:matmul_kernel \\
      'float16[4096,4096]' 'float16[4096,4096]' 'float16[4096,4096]' 128 256 64 \\
      --grid 512 --torch 'A @ B'

An argument `dtype[d0,d1,...]` (a torch dtype name) is an array of that shape filled with
random values (standard normal floats, small integers), on the GPU when the backend is
`triton` (the default where CUDA is available) and on the CPU otherwise; any other argument is
a Python literal. GPU times are CUDA-event times with L2 flushed before every run; on the CPU
backends the wall clock.

FILE.py is not run as a script; what runs:
{RULES}"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, on its sub-parser."""
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the file and the name of a @ct.kernel in it")
    p.add_argument("args", nargs="*", metavar="ARG", help="kernel arguments: dtype[shape] or Python literals")
    p.add_argument("--grid", type=parse_grid, required=True, metavar="G[,G1[,G2]]", help="the launch grid")
    p.add_argument("--torch", metavar="EXPR", help="the PyTorch expression to time against and check with")
    p.add_argument("--out", metavar="NAME", help="the kernel parameter whose array --torch's result is checked "
                                                 "against (default: its last array argument)")
    p.add_argument("--backend", help="a tilecraft backend by name (default: triton where CUDA is available, "
                                     "else interpreter)")
    p.add_argument("--runs", type=int, default=20, help="timed runs of each side (default 20)")
    p.add_argument("--rtol", type=float, help="the largest error accepted, relative to the largest |value| "
                                              "(default: by the output's dtype)")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")


def run(opts: argparse.Namespace) -> int:
    """Load the kernel, make its arguments, check and time both sides, print the report."""
    if opts.runs < 1:
        raise CommandError(f"--runs must be at least 1, got {opts.runs}", status=2)
    loaded, kernel = load_kernel(opts.kernel)
    torch = require("torch", "`tilecraft bench`")
    backend = opts.backend or ("triton" if torch.cuda.is_available() else "interpreter")
    device = "cuda" if backend == "triton" else "cpu"
    generator = torch.Generator(device="cpu").manual_seed(0)
    args = [parse_arg(a, lambda t, dtype, shape: _random(t, dtype, shape, device, generator), "tilecraft bench")
            for a in opts.args]
    params = [p.name for p in kernel.params]
    names = dict(zip(params, args))
    out = None
    if opts.out is not None:
        if opts.out not in params[:len(args)]:
            raise CommandError(f"--out {opts.out!r} is not a parameter of {kernel.__name__} ({', '.join(params)})",
                               status=2)
        out = params.index(opts.out)
    from .benchmarking import bench_kernel
    try:
        result = bench_kernel(kernel, opts.grid, args, backend=backend, torch_expression=opts.torch, names=names,
                              out=out, runs=opts.runs, tolerance=opts.rtol)
    except TileError as exc:
        raise loaded.command_error(exc) from None
    except Exception as exc:  # the user's expression: its error, without a traceback
        if opts.torch and _raised_in_expression(exc):
            raise CommandError(f"--torch {opts.torch!r} failed: {type(exc).__name__}: {exc}") from None
        raise
    print(result.report())
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result.as_dict(), f, indent=1)
    return 1 if result.check is not None and not result.check.ok else 0


def _random(torch: Any, dtype: Any, shape: list[int], device: str, generator: Any) -> Any:
    """An array of `shape`: standard normal floats, integers in [0, 100) (bool: random bits)."""
    if dtype.is_floating_point:
        values = torch.randn(shape, generator=generator, dtype=torch.float32)
    else:
        values = torch.randint(0, 2 if dtype == torch.bool else 100, shape, generator=generator)
    return values.to(dtype=dtype, device=device)


def _raised_in_expression(exc: BaseException) -> bool:
    """Whether `exc` came out of the --torch expression (its frames name `<torch expression>`)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<torch expression>":
            return True
        tb = tb.tb_next
    return False
