"""Where a cached launch's host time goes for kernels that take tensor descriptors (GPU only):
`ct.launch` of cuTile's MatMul sample timed whole and, inside it, the C launch alone (tilecraft's
C launcher, or Triton's launcher where that one runs), for the Gluon variant (bf16
4000x3000x2000, 128x256x64 tiles: host descriptors through `ExpandedLauncher`), for a kernel
whose programs make their descriptors (tf32 1000x500x700 with 32x32x32 tiles, TC3: Triton's
launcher allocates their global scratch at every launch), for TC3 again on its host-descriptor
variant (tilecraft's C quick path, each map kept per address), once more writing 9 outputs in
turn (every launch makes a map again), and for TC2 (tilecraft's C quick path). `ct.launch`: the median over rounds of 10
launches, each round after a synchronize (`probing.host_rounds`); the C launch: the median of
those launches.

    PYTHONPATH=$PWD:$PWD/.conformance/shim:$PWD/.conformance/samples python3 benchmarks/launch_parts.py

Prints only (no result file): paste what matters into a results row.
"""

from __future__ import annotations

import contextlib
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
         host_descriptors: bool = False, outputs: int = 1) -> None:
    """`host_descriptors`: the kernel's own object, launching its host-descriptor variant whatever
    its block count (launching.HOST_DESCRIPTOR_BLOCKS set to 1 for its launches); `outputs`: the
    launches write that many output arrays in turn (more than the C launcher keeps maps for:
    each launch makes its output's descriptor again)."""
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    cs = [torch.empty(m, n, device="cuda", dtype=dtype) for _ in range(outputs)]
    turn = iter(range(10**9))
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(m, tiles[0]) * ct.cdiv(n, tiles[1]), 1, 1)
    kernel = MatMul.matmul_kernel.replace_hints() if host_descriptors else MatMul.matmul_kernel

    def launch() -> None:
        with probing.host_descriptors_always() if host_descriptors else contextlib.nullcontext():
            ct.launch(stream, grid, kernel, (a, b, cs[next(turn) % outputs], *tiles))

    for _ in range(5):
        launch()
    inner.clear()
    whole = probing.host_rounds(launch)
    part = statistics.median(inner) * 1e6 if inner else float("nan")
    print(f"{name}: ct.launch {statistics.median(whole):.1f} us (median of 20 rounds of 10, min {min(whole):.1f}), "
          f"of it the C launch {part:.1f} us (median of the launches)", flush=True)


if __name__ == "__main__":
    case("Gluon variant, bf16 4000x3000x2000 128x256x64", (4000, 3000, 2000), torch.bfloat16, (128, 256, 64))
    case("TC3 tf32 1000x500x700 32x32x32 (descriptors made by the programs)", (1000, 500, 700), torch.float32,
         (32, 32, 32))
    case("TC3 as above, host descriptors", (1000, 500, 700), torch.float32, (32, 32, 32), host_descriptors=True)
    case("TC3 as above, host descriptors, 9 outputs in turn", (1000, 500, 700), torch.float32, (32, 32, 32),
         host_descriptors=True, outputs=9)
    case("TC2 tf32 512x512x768 32x32x32", (512, 512, 768), torch.float32, (32, 32, 32))
