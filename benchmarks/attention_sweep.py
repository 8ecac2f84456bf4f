"""Warps and pipeline stages for cuTile's attention sample under tilecraft (a probe for the
heuristics, issue 10): for each (tiles, warps, stages) the schedule is forced by replacing the
Triton backend's config choice, the kernel is rebuilt and checked against SDPA, then timed.

    python3 benchmarks/attention_sweep.py     # on a GPU; prints one line per configuration
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / ".conformance" / "samples"), str(ROOT / ".conformance" / "shim"), str(ROOT)]

import AttentionFMHA  # noqa: E402  (cuTile's sample, through the shim: cuda.tile is tilecraft)
from tilecraft.backends.triton import heuristics, plan  # noqa: E402

ORIGINAL = heuristics.choose_config


def force(warps: int, stages: int) -> None:
    """Make every kernel lowered from now on use `warps` and at most `stages`."""
    def config(fn, max_stages=None, one_cta=False):  # a refit's smaller max_stages still wins
        c = ORIGINAL(fn, min(stages, max_stages or stages), one_cta)
        return heuristics.LaunchConfig(warps, c.num_stages, dict(c.options, num_warps=warps), c.ignored)
    plan.choose_config = config
    plan.loop_stages = lambda loop, default, cap=None: min(stages, heuristics.loop_stages(loop, default, cap))


def main() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = scaled_dot_product_attention(q, k, v)
        t_ref = triton.testing.do_bench(lambda: scaled_dot_product_attention(q, k, v), rep=100, return_mode="median")
    for tm, tn in ((64, 128), (128, 128), (128, 64)):
        for warps in (4, 8):
            for stages in (2, 3, 4):
                force(warps, stages)
                kernel = AttentionFMHA.fmha_kernel.replace_hints(occupancy=2)
                run = lambda: AttentionFMHA.cutile_fmha(q, k, v, tile_m=tm, tile_n=tn, kernel=kernel)  # noqa: E731
                try:
                    err = float((run().float() - ref.float()).norm() / ref.float().norm())
                    t = triton.testing.do_bench(run, rep=100, return_mode="median")
                    print(f"{tm}x{tn} warps={warps} stages={stages}: {t_ref / t:.2f}x cuDNN (err {err:.1e})", flush=True)
                except Exception as exc:  # a configuration that does not build is a line, not the end
                    print(f"{tm}x{tn} warps={warps} stages={stages}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)


if __name__ == "__main__":
    main()
