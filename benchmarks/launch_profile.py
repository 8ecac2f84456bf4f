"""Where a cached tilecraft launch spends its host time, layer by layer (GPU only).

Times, per launch (median of rounds of 2000): the full `ct.launch`, also with the generated
Python quick launcher in place of the native one; its parts (the quick launcher, native and
Python, the fast-path key, the fast path's direct launcher, Triton's and tilecraft's C launchers
called with the baked arguments); the backend's `TritonKernel.launch` (no runtime); Triton's
`JITFunction.run` on the generated kernel with the same flattened arguments and options; a plain
`@triton.jit` vector add launched directly; and torch's own `torch.add(a, b, out=c)`. Then the
same rows in three passes of rotated order (a row may run faster or slower after another),
`ct.launch` with the generated Python quick launcher and with the native one reading tensors
through Python instead of the C++ tensor reader (which the first run on a machine builds, ~11 s:
this waits for it), and a cProfile of `ct.launch`, sorted by own time.

    PYTHONPATH=$PWD python benchmarks/launch_profile.py
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_reference as tr  # noqa: E402

import tilecraft as ct  # noqa: E402
from matmul import vector_add_kernel  # noqa: E402
from tilecraft import knobs  # noqa: E402
from tilecraft.backends.base import FusedLaunch  # noqa: E402
from tilecraft.backends.triton import tensor_reader  # noqa: E402
from tilecraft.runtime.fastpath import quick_launcher  # noqa: E402


def per_launch_us(fn: Callable[[], Any], launches: int = 2000, rounds: int = 5) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        times.append((time.perf_counter() - start) / launches * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main() -> None:
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.current_stream()
    ct.launch(stream, (1,), vector_add_kernel, (a, b, c, n))
    compiled = next(iter(vector_add_kernel.variants.values())).compiled
    flat = compiled._flatten(a, b, c)
    args = (a, b, c, n)
    direct = next(iter(vector_add_kernel.fast.values()))[0]
    launcher = direct._launcher.module if direct._launcher is not None else None
    reader = launcher is not None and tensor_reader.attach(launcher, wait=True)  # before the checks below
    for other in (torch.randn(n, device="cuda"), torch.randn(n + 3, device="cuda")[3:]):  # new address, same key
        c.fill_(float("nan"))
        ct.launch(stream, (1,), vector_add_kernel, (a, other, c, n))
        torch.testing.assert_close(c, a + other)
    # the last launch made `kernel.quick` the misaligned view's: launch `args` again, so that the
    # quick launcher timed below is theirs (before 2026-12-01 18:30 it was not, and its row timed
    # a refusal: 1.2-2.2 us without launching)
    ct.launch(stream, (1,), vector_add_kernel, args)
    quick = vector_add_kernel.quick
    fused = direct.fused_launch()
    assert quick is not None and fused is not None, "no quick launcher: the rows below would not say much"
    assert quick(stream, (1,), args), "the quick launcher refuses the arguments it is timed with"
    python_quick = quick_launcher(vector_add_kernel.plan, args, knobs.BACKEND, knobs.BACKEND.raw(),
                                  FusedLaunch(fused.expr, fused.env), 2**24 - 1)
    print("fast path:", type(direct).__name__, "native launcher:", direct._native is not None,
          "quick launcher:", type(quick).__name__, "tensor reader:", reader, "- results checked")
    handle = stream.cuda_stream
    baked = direct._flatten(a, b, c)
    rows = {
        "quick launcher (native)": lambda: quick(stream, (1,), args),
        "quick launcher (generated Python)": lambda: python_quick(stream, (1,), args),
        "fast-path key (Kernel.fast_key)": lambda: vector_add_kernel.fast_key(args),
        "DirectLauncher.launch": lambda: direct.launch((1, 1, 1), (a, b, c), stream),
        "Triton's C launcher, baked args": lambda: direct._call(1, 1, 1, handle, *direct._head, *baked),
        "tilecraft's C launcher, baked args": lambda: direct._native(1, 1, 1, handle, *direct._native_head, *baked),
        "torch.add(out=)": lambda: torch.add(a, b, out=c),
        "ct.launch": lambda: ct.launch(stream, (1,), vector_add_kernel, (a, b, c, n)),
        "TritonKernel.launch": lambda: compiled.launch((1, 1, 1), (a, b, c), stream),
        "JITFunction.run (generated)": lambda: compiled._fn.run(*flat, grid=(1, 1, 1), warmup=False,
                                                                **compiled._options),
        "plain triton add_kernel[grid]": lambda: tr.add_kernel[(1,)](a, b, c, n, BLOCK=n),
    }
    for name, fn in rows.items():
        print(f"{name:36s} {per_launch_us(fn):7.2f} us")
    # the rows again, three passes in rotated orders: a row's time may depend on what ran before
    # it (the first row of the list above has measured well below the C launcher it calls)
    names = list(rows)
    passes: dict[str, list[float]] = {name: [] for name in names}
    for shift in range(3):
        for name in names[shift * 4:] + names[:shift * 4]:
            passes[name].append(per_launch_us(rows[name]))
    print("rotated passes (us):")
    for name in names:
        print(f"  {name:36s} " + " ".join(f"{t:7.2f}" for t in passes[name]))
    vector_add_kernel.quick = python_quick
    print(f"{'ct.launch (generated Python quick)':36s} "
          f"{per_launch_us(lambda: ct.launch(stream, (1,), vector_add_kernel, args)):7.2f} us")
    vector_add_kernel.quick = quick
    if reader:
        launcher.use_reader(None)
        print(f"{'ct.launch (native, Python reads)':36s} "
              f"{per_launch_us(lambda: ct.launch(stream, (1,), vector_add_kernel, args)):7.2f} us")
        tensor_reader.attach(launcher)
    print("generated launch args:", len(flat), "options:", compiled._options)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        ct.launch(stream, (1,), vector_add_kernel, (a, b, c, n))
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
