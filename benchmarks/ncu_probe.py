"""One launch each of the side-by-side's attention and odd-shape matmul, tilecraft's and torch's,
inside a CUDA profiler range, for Nsight Compute's counters (`scripts/gpu_profile`):

    ncu --profile-from-start off ... python3 benchmarks/ncu_probe.py [--only attention|matmul|tf32]

Every kernel is compiled and run once before the range (so compilation, autotuning and first-launch
checks stay outside it), and its output checked against torch's before anything is profiled.
Cases: cuTile's AttentionFMHA sample, bf16 B4 H32 S4096 D128 at 128x128 tiles, non-causal,
against SDPA's cuDNN backend; the MatMul sample at 128x256x64, bf16 4000x3000x2000, against
`a @ b`; the MatMul sample in tf32 at 32x32x32, 1000x500x700 (the seed case TC3), against
`a @ b` with tf32 allowed.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / ".conformance" / "samples")]


def _pairs(only: str | None) -> list[tuple[str, object, object]]:
    """(case, tilecraft's launch, torch's launch), each checked once against the other."""
    import torch
    import cuda.tile as ct
    import MatMul
    pairs = []
    if only in (None, "attention"):
        import AttentionFMHA
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention
        q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))

        def sdpa():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return scaled_dot_product_attention(q, k, v)
        pairs.append(("attention 128x128", lambda: AttentionFMHA.cutile_fmha(q, k, v, tile_m=128, tile_n=128), sdpa))
    if only in (None, "matmul"):
        m, n, kk = 4000, 3000, 2000
        a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(kk, n, device="cuda", dtype=torch.bfloat16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        stream = torch.cuda.current_stream()
        grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)

        def matmul():
            ct.launch(stream, grid, MatMul.matmul_kernel, (a, b, c, 128, 256, 64))
            return c
        pairs.append(("matmul bf16 4000x3000x2000", matmul, lambda: a @ b))
    if only in (None, "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = True
        m, n, kk = 1000, 500, 700
        a32, b32 = torch.randn(m, kk, device="cuda"), torch.randn(kk, n, device="cuda")
        c32 = torch.full((m, n), float("nan"), device="cuda")
        stream = torch.cuda.current_stream()

        def small_tf32():
            ct.launch(stream, (math.ceil(m / 32) * math.ceil(n / 32), 1, 1), MatMul.matmul_kernel,
                      (a32, b32, c32, 32, 32, 32))
            return c32
        pairs.append(("matmul tf32 1000x500x700 (TC3)", small_tf32, lambda: a32 @ b32))
    return pairs


def main(argv: list[str] | None = None) -> int:
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("attention", "matmul", "tf32"))
    opts = ap.parse_args(argv)
    pairs = _pairs(opts.only)
    for name, ours, theirs in pairs:
        got, want = ours().float(), theirs().float()
        err = float((got - want).norm() / want.norm())
        print(f"{name}: relative difference to torch {err:.2e}", flush=True)
        if not err < 2e-2:
            raise SystemExit(f"{name}: output differs from torch's ({err:.2e}); nothing profiled")
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _, ours, theirs in pairs:
        ours()
        theirs()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
