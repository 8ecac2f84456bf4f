"""Where a cached launch's host time goes for kernels that take tensor descriptors (GPU only):
`ct.launch` of cuTile's MatMul sample timed whole and, inside it, the C launch alone (tilecraft's
C launcher, or Triton's launcher where that one runs; none where the whole launch is tilecraft's
C quick path), for the Gluon variant (bf16 4000x3000x2000, 128x256x64 tiles: host descriptors
through `ExpandedLauncher`), for TC3 (tf32 1000x500x700 with 32x32x32 tiles: the host-descriptor
variant on the C quick path, each map kept per address), for TC3 writing 9 outputs in turn (more
than the quick path keeps maps for: each launch asks Python for its output's map), and for TC2.
`ct.launch`: the median over rounds of 10 launches, each round after a synchronize
(`probing.host_rounds`); the C launch: the median of those launches.

    PYTHONPATH=$PWD:$PWD/.conformance/shim:$PWD/.conformance/samples python3 benchmarks/launch_parts.py

Prints only (no result file): paste what matters into a results row.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch

import cuda.tile as ct  # tilecraft through the conformance shim
import MatMul  # the sample, from .conformance/samples
import probing
from tilecraft.backends.triton import descriptor_args, launching

inner: list[float] = []


def _timed(call):
    def timed(*args):
        start = time.perf_counter()
        try:
            return call(*args)
        finally:
            inner.append(time.perf_counter() - start)
    return timed


_expanded_init = descriptor_args.ExpandedLauncher.__init__
_direct_init = launching.DirectLauncher.__init__


def _expanded(self, compiled, c_launch, metas, make, native=None):
    if native is not None:  # tilecraft's C launcher: its launch timed instead of Triton's
        native = native._replace(launch=_timed(native.launch))
    _expanded_init(self, compiled, _timed(c_launch), metas, make, native)


def _direct(self, *args, **kwargs):
    _direct_init(self, *args, **kwargs)
    self._call = _timed(self._call)  # Triton's launcher (CudaLauncher.__call__, or its C function)


descriptor_args.ExpandedLauncher.__init__ = _expanded
launching.DirectLauncher.__init__ = _direct


def case(name: str, shape: tuple[int, int, int], dtype: torch.dtype, tiles: tuple[int, int, int],
         outputs: int = 1) -> None:
    """`outputs`: the launches write that many output arrays in turn."""
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    cs = itertools.cycle([torch.empty(m, n, device="cuda", dtype=dtype) for _ in range(outputs)])
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(m, tiles[0]) * ct.cdiv(n, tiles[1]), 1, 1)
    kernel = MatMul.matmul_kernel.replace_hints()  # its own object: the launches of other cases are not its

    def launch() -> None:
        ct.launch(stream, grid, kernel, (a, b, next(cs), *tiles))

    for _ in range(5):
        launch()
    inner.clear()
    whole = probing.host_rounds(launch)
    part = statistics.median(inner) * 1e6 if inner else float("nan")
    print(f"{name}: ct.launch {statistics.median(whole):.1f} us (median of 20 rounds of 10, min {min(whole):.1f}), "
          f"of it the C launch {part:.1f} us (median of the launches)", flush=True)


if __name__ == "__main__":
    case("Gluon variant, bf16 4000x3000x2000 128x256x64", (4000, 3000, 2000), torch.bfloat16, (128, 256, 64))
    case("TC3 tf32 1000x500x700 32x32x32", (1000, 500, 700), torch.float32, (32, 32, 32))
    case("TC3 as above, 9 outputs in turn", (1000, 500, 700), torch.float32, (32, 32, 32), outputs=9)
    case("TC2 tf32 512x512x768 32x32x32", (512, 512, 768), torch.float32, (32, 32, 32))
