"""The seed article's MatMul sample on tilecraft: four cases, each checked against float64.

TC1 fp16 512x512x768 (128x256x64 tiles), TC2 fp32 512x512x768 (32x32x32 tiles, tf32),
TC3 fp32 1000x500x700 (edges not multiples of the tile), TC4 the persistent kernel.
Runs on the GPU through Triton when one is present, else on the NumPy interpreter.

    python examples/matmul.py [--backend interpreter|triton|triton-interpret] [--scale 0.25]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_name, relative_error, stream_for, timed, to_device, to_numpy  # noqa: E402

import tilecraft as ct  # noqa: E402
from tilecraft.library import matmul_kernel, persistent_matmul_kernel  # noqa: E402

CASES = [  # name, (M, N, K), dtype, (tm, tn, tk), persistent
    ("TC1", (512, 512, 768), np.float16, (128, 256, 64), False),
    ("TC2", (512, 512, 768), np.float32, (32, 32, 32), False),
    ("TC3", (1000, 500, 700), np.float32, (32, 32, 32), False),
    ("TC4", (512, 512, 768), np.float16, (128, 256, 64), True),
]
TOLERANCE = {np.float16: 1e-2, np.float32: 1e-3}  # fp32 inputs run as tf32


def num_sms(x: object) -> int:
    if getattr(x, "is_cuda", False):
        import torch
        return torch.cuda.get_device_properties(x.device).multi_processor_count
    return 4


def run_case(name: str, mnk: tuple[int, int, int], dtype: type, tiles: tuple[int, int, int],
             persistent: bool, backend: str | None, scale: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    m, n, k = (max(1, int(d * scale)) for d in mnk)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    A, B = to_device(a, backend), to_device(b, backend)
    C = to_device(np.full((m, n), np.nan, dtype), backend)
    tm, tn, tk = tiles
    tiles_total = ct.cdiv(m, tm) * ct.cdiv(n, tn)
    kernel = persistent_matmul_kernel if persistent else matmul_kernel
    grid = (min(num_sms(A), tiles_total),) if persistent else (tiles_total,)

    def go() -> None:
        ct.launch(stream_for(A), grid, kernel, (A, B, C, tm, tn, tk), backend=backend)

    first = timed(go, A)   # includes compilation
    again = timed(go, A)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = relative_error(to_numpy(C), ref)
    return {"case": name, "shape": (m, n, k), "dtype": np.dtype(dtype).name, "tiles": tiles,
            "relerr": err, "ok": err < TOLERANCE[dtype], "first_s": first, "s": again}


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["interpreter", "triton", "triton-interpret"], default=None)
    p.add_argument("--scale", type=float, default=1.0, help="scale every matrix dimension (e.g. 0.25)")
    args = p.parse_args(argv)
    print(f"tilecraft {ct.__version__} matmul sample on {device_name(args.backend)}")
    results = []
    for case in CASES:
        r = run_case(*case, backend=args.backend, scale=args.scale)
        results.append(r)
        m, n, k = r["shape"]
        print(f"{r['case']}: {m}x{n}x{k} {r['dtype']:8s} tiles {r['tiles']}  rel. error {r['relerr']:.2e} "
              f"{'ok' if r['ok'] else 'FAIL'}  time {r['s'] * 1e3:9.3f} ms (first launch {r['first_s'] * 1e3:.1f} ms)")
    if not all(r["ok"] for r in results):
        raise SystemExit("some cases exceeded their error tolerance")
    return results


if __name__ == "__main__":
    main()
