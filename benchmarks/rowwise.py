"""Row-wise, memory-bound kernels: the samples' softmax and LayerNorm run by tilecraft, next to
plain Triton (softmax: the Triton tutorial's kernel) and torch, in one run.

Each implementation reads and writes the matrix once at best, so GB/s = 2 x matrix bytes / time,
against the H200's ~4.3 TB/s copy bandwidth (../shared/bench anchors). Same timing method as
benchmarks/matmul.py (median of CUDA events, L2 flushed, implementations interleaved).

    PYTHONPATH=$PWD python benchmarks/rowwise.py --out F [--kinds softmax,layernorm]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import torch

import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from _results import claim
from matmul import CudaTimer, meta, relative_error

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tilecraft as ct  # noqa: E402
from layernorm import layernorm as layernorm_kernel  # noqa: E402
from softmax import next_pow2, softmax as softmax_kernel  # noqa: E402

CASES = [(8192, 4096), (4096, 16384), (32768, 1024)]
EPS = 1e-5
LAYERNORM_TILE = 1024


def softmax_impls(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], torch.Tensor]:
    """No-argument runners returning their output, and the float64 reference."""
    rows, cols = x.shape
    stream = torch.cuda.current_stream()
    return {"tilecraft": lambda: ct.launch(stream, (rows,), softmax_kernel, (x, y, next_pow2(cols))) or y,
            "triton": lambda: tr.softmax(x, y) or y,
            "torch": lambda: torch.softmax(x, dim=1)}, torch.softmax(x.double(), dim=1)


def layernorm_impls(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], torch.Tensor]:
    rows, cols = x.shape
    w, b = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    stream = torch.cuda.current_stream()
    ref = torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), EPS)
    return {"tilecraft": lambda: ct.launch(stream, (rows,), layernorm_kernel, (x, w, b, y, EPS, LAYERNORM_TILE)) or y,
            "torch": lambda: torch.nn.functional.layer_norm(x, (cols,), w, b, EPS)}, ref


KINDS = {"softmax": softmax_impls, "layernorm": layernorm_impls}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--min-runs", type=int, default=100)
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--cap-s", type=float, default=5.0)
    args = p.parse_args(argv)
    out = claim(args.out)
    timer = CudaTimer(args.min_runs, args.rep_ms, args.warmup_ms, args.cap_s)
    doc: dict[str, Any] = {"meta": meta(args, torch.device("cuda"), 0), "rows": []}
    for kind in args.kinds.split(","):
        for rows, cols in CASES:
            x = torch.randn(rows, cols, device="cuda")
            y = torch.empty_like(x)
            runners, ref = KINDS[kind](x, y)
            errors = {}
            for name, run in runners.items():  # each returns its output (torch allocates its own)
                y.fill_(float("nan"))
                out = run()
                torch.cuda.synchronize()
                errors[name] = relative_error(out, ref)
            timings = timer.compare(runners)
            for name, t in timings.items():
                rec = {"kind": kind, "case": f"{rows}x{cols} fp32", "impl": name, **t, "relerr": errors[name],
                       "gbps": 2 * x.numel() * 4 / (t["ms"] * 1e-3) / 1e9,
                       "x_torch": timings["torch"]["ms"] / t["ms"]}
                if "triton" in timings:
                    rec["x_triton"] = timings["triton"]["ms"] / t["ms"]
                doc["rows"].append(rec)
                print(f"{kind:9s} {rec['case']:17s} {name:10s} {t['ms'] * 1e3:8.1f} us {rec['gbps']:7.0f} GB/s  "
                      f"x torch {rec['x_torch']:5.2f}  x triton {rec.get('x_triton', float('nan')):5.2f}  "
                      f"relerr {rec['relerr']:.1e}", flush=True)
            out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
