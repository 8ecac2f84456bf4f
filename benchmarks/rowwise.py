"""Row-wise, memory-bound kernels: the samples' softmax (whole rows in one tile, or walked in tiles
three times: `softmax_tiled`) and LayerNorm run by tilecraft, next to plain Triton (softmax: the
Triton tutorial's kernel) and torch, in one run.

Each implementation reads and writes the matrix once at best, so GB/s = 2 x matrix bytes / time,
against the H200's ~4.3 TB/s copy bandwidth (../shared/bench anchors). Same timing method as
benchmarks/matmul.py (median of CUDA events, L2 flushed, implementations interleaved).

    PYTHONPATH=$PWD python benchmarks/rowwise.py --out F [--kinds softmax,softmax_tiled,layernorm]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import torch

import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from _results import claim
from matmul import CudaTimer, fmt, meta, relative_error, synchronize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tilecraft as ct  # noqa: E402
from layernorm import layernorm as layernorm_kernel  # noqa: E402
from softmax import next_pow2, softmax as softmax_kernel, softmax_tiled  # noqa: E402

CASES = [(8192, 4096), (4096, 16384), (32768, 1024)]
EPS = 1e-5
TOLERANCE = 1e-5  # fp32 in, fp32 out: the committed run's errors are below 1e-7
LAYERNORM_TILE = 1024
SOFTMAX_TILE = 1024


def softmax_impls(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], torch.Tensor]:
    """No-argument runners returning their output, and the float64 reference."""
    rows, cols = x.shape
    stream = _stream(x)
    return {"tilecraft": lambda: ct.launch(stream, (rows,), softmax_kernel, (x, y, next_pow2(cols))) or y,
            "triton": lambda: tr.softmax(x, y) or y,
            "torch": lambda: torch.softmax(x, dim=1)}, torch.softmax(x.double(), dim=1)


def softmax_tiled_impls(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], torch.Tensor]:
    """`softmax_impls` with tilecraft's kernel the one walking its rows in tiles."""
    runners, ref = softmax_impls(x, y)
    stream = _stream(x)
    runners["tilecraft"] = lambda: ct.launch(stream, (x.shape[0],), softmax_tiled, (x, y, SOFTMAX_TILE)) or y
    return runners, ref


def layernorm_impls(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], torch.Tensor]:
    rows, cols = x.shape
    w, b = torch.randn(cols, device=x.device), torch.randn(cols, device=x.device)
    stream = _stream(x)
    ref = torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), EPS)
    return {"tilecraft": lambda: ct.launch(stream, (rows,), layernorm_kernel, (x, w, b, y, EPS, LAYERNORM_TILE)) or y,
            "torch": lambda: torch.nn.functional.layer_norm(x, (cols,), w, b, EPS)}, ref


def _stream(x: torch.Tensor) -> Any:
    """The stream to launch on: the current CUDA stream, or None for CPU tensors (interpreters)."""
    return torch.cuda.current_stream() if x.is_cuda else None


KINDS = {"softmax": softmax_impls, "softmax_tiled": softmax_tiled_impls, "layernorm": layernorm_impls}


def measure(kind: str, rows: int, cols: int, timer: CudaTimer | None) -> list[dict[str, Any]]:
    """Check every implementation of `kind` on a rows x cols fp32 matrix against float64 (ours
    write into a NaN-poisoned output), then time them together; one record per implementation.
    Without a timer (CPU interpreters), only the check."""
    device = torch.device("cuda" if timer is not None else "cpu")
    x = torch.randn(rows, cols, device=device)
    y = torch.empty_like(x)
    runners, ref = KINDS[kind](x, y)
    moved = 2 * x.numel() * x.element_size()  # the matrix read once and written once, at best
    records = {}
    for name, run in runners.items():  # each returns its output (torch allocates its own)
        y.fill_(float("nan"))
        out = run()
        synchronize(device)
        err = relative_error(out, ref)
        records[name] = {"kind": kind, "case": f"{rows}x{cols} fp32", "impl": name, "rows": rows, "cols": cols,
                         "bytes": moved, "relerr": err, "ok": err <= TOLERANCE}  # NaN fails
    if timer is not None:
        timings = timer.compare(runners)
        for name, t in timings.items():
            records[name].update(t, gbps=moved / (t["ms"] * 1e-3) / 1e9,
                                 x_torch=timings["torch"]["ms"] / t["ms"])
            if "triton" in timings:
                records[name]["x_triton"] = timings["triton"]["ms"] / t["ms"]
    return list(records.values())


def format_row(rec: dict[str, Any]) -> str:
    """One printed line for a record of `measure` ('-' where it was not timed)."""
    us = rec["ms"] * 1e3 if "ms" in rec else None
    return (f"{rec['kind']:9s} {rec['case']:17s} {rec['impl']:10s} {fmt(us, 8, 1)} us {fmt(rec.get('gbps'), 7, 0)} "
            f"GB/s  x torch {fmt(rec.get('x_torch'), 5, 2)}  x triton {fmt(rec.get('x_triton'), 5, 2)}  "
            f"relerr {rec['relerr']:.1e}{'' if rec['ok'] else '  TOLERANCE EXCEEDED'}")


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
            for rec in measure(kind, rows, cols, timer):
                doc["rows"].append(rec)
                print(format_row(rec), flush=True)
            out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
