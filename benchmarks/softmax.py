"""Row softmax: tilecraft running examples/softmax.py's kernel vs plain Triton vs torch.softmax.

Memory-bound: each implementation reads and writes the matrix once, so GB/s = 2 x bytes / time,
against the H200's ~4.3 TB/s copy bandwidth (../shared/bench anchors). Same timing method as
benchmarks/matmul.py (median of CUDA events, L2 flushed, implementations interleaved).

    PYTHONPATH=$PWD python benchmarks/softmax.py [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from matmul import CudaTimer, meta, relative_error

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tilecraft as ct  # noqa: E402
from softmax import next_pow2, softmax as softmax_kernel  # noqa: E402

CASES = [(8192, 4096), (4096, 16384), (32768, 1024)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--min-runs", type=int, default=100)
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--cap-s", type=float, default=5.0)
    args = p.parse_args(argv)
    timer = CudaTimer(args.min_runs, args.rep_ms, args.warmup_ms, args.cap_s)
    doc: dict[str, Any] = {"meta": meta(args, torch.device("cuda"), 0), "softmax": []}
    for rows, cols in CASES:
        x = torch.randn(rows, cols, device="cuda")
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), dim=1)
        stream = torch.cuda.current_stream()
        runners = {
            "tilecraft": lambda: ct.launch(stream, (rows,), softmax_kernel, (x, y, next_pow2(cols))),
            "triton": lambda: tr.softmax(x, y),
            "torch": lambda: torch.softmax(x, dim=1),  # allocates its output, as eager code does
        }
        errors = {}
        for name, run in runners.items():
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            errors[name] = relative_error(y if name != "torch" else torch.softmax(x, dim=1), ref)
        timings = timer.compare(runners)
        for name, t in timings.items():
            rec = {"case": f"{rows}x{cols} fp32", "impl": name, **t, "relerr": errors[name],
                   "gbps": 2 * x.numel() * 4 / (t["ms"] * 1e-3) / 1e9}
            rec["x_torch"] = timings["torch"]["ms"] / t["ms"]
            rec["x_triton"] = timings["triton"]["ms"] / t["ms"]
            doc["softmax"].append(rec)
            print(f"{rec['case']:18s} {name:10s} {t['ms'] * 1e3:8.1f} us {rec['gbps']:7.0f} GB/s  x torch "
                  f"{rec['x_torch']:5.2f}  x triton {rec['x_triton']:5.2f}  relerr {rec['relerr']:.1e}", flush=True)
    args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
