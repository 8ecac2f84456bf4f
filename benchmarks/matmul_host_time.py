"""Host time per cached launch of cuTile's MatMul sample at one shape (GPU only): how long
`ct.launch` takes on the CPU (median over rounds of 10 launches, each round after a synchronize,
so that the launch queue never fills and blocks the host), the GPU time per launch back to back,
and a cProfile of the launches by cumulative time. A benchmark that times each launch after an L2 flush measures the
host's time too wherever it exceeds the flush's (the GPU then waits between its events), so a
slow launch path can look like a slow kernel there.

    PYTHONPATH=$PWD:$PWD/.conformance/shim:$PWD/.conformance/samples \\
        python3 benchmarks/matmul_host_time.py 4000 3000 2000 [--dtype bfloat16] [--tiles 128x256x64]

Prints only (no result file): paste what matters into a results row.
"""

from __future__ import annotations

import argparse
import statistics

import torch

import cuda.tile as ct  # tilecraft through the conformance shim, or cuTile
import MatMul  # the sample, from .conformance/samples
from probing import host_rounds, print_host_profile


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shape", nargs=3, type=int, metavar=("M", "N", "K"))
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--tiles", default="128x256x64")
    p.add_argument("--launches", type=int, default=50)
    args = p.parse_args()
    m, n, k = args.shape
    tm, tn, tk = map(int, args.tiles.split("x"))
    dtype = getattr(torch, args.dtype)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(m, tm) * ct.cdiv(n, tn), 1, 1)

    def launch() -> None:
        ct.launch(stream, grid, MatMul.matmul_kernel, (a, b, c, tm, tn, tk))

    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)
    rounds = host_rounds(launch, max(args.launches // 10, 1))
    host_us = statistics.median(rounds)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(args.launches):
        launch()
    end.record()
    torch.cuda.synchronize()
    gpu_us = begin.elapsed_time(end) / args.launches * 1e3
    print(f"{m}x{n}x{k} {args.dtype} {args.tiles}: host {host_us:.1f} us per launch (median of {len(rounds)} rounds "
          f"of 10, min {min(rounds):.1f}), "
          f"back to back {gpu_us:.1f} us per launch", flush=True)
    print_host_profile(launch, 20, "cumtime")


if __name__ == "__main__":
    main()
