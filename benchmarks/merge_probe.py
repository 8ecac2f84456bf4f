"""Does block merging pay, case by case? (GPU probe for the automatic merge's rule; not a product
benchmark.)

The MatMul sample with its 32x32x32 tiles, as written, under tilecraft with block merging off
(`TILECRAFT_BLOCK_MERGE=0` when it compiles) and on (passes/block_merge.py; the row names the
factors its launches took, [] where they did not merge), next to the sample written with
128x32x32 tiles (what merging 4 to a block should match) and torch. Rows
are timed in turns (`ROUNDS` rounds, each row once per round: `do_bench`'s median, L2 flushed),
each checked against float64 first; a row's time is the median of its rounds and its ratio
torch's time over it.

    PYTHONPATH=$PWD:$PWD/.conformance/shim python3 benchmarks/merge_probe.py --out $OUT/merge.json
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Callable

from _results import claim
from power_probe import head, out_path

CASES = (("TC3 1000x500x700 fp32", (1000, 500, 700), "float32"),
         ("TC2 512x512x768 fp32", (512, 512, 768), "float32"),
         ("1024x1024x1024 fp32", (1024, 1024, 1024), "float32"),
         ("2048x1024x512 fp32", (2048, 1024, 512), "float32"),
         ("4000x1000x700 fp32", (4000, 1000, 700), "float32"),
         ("TC3 shape fp16", (1000, 500, 700), "float16"))
TILE, FACTOR, ROUNDS = 32, 4, 5


def _merged(kernel) -> list[int]:
    """The merge factors `kernel`'s launches ran with (none: not merged)."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.tile_splitting import BlockMergeKernel
    found = [wrapped_as(v.compiled, BlockMergeKernel) for v in kernel.variants.values()]
    return sorted({count for f in found if f is not None for count in f._variants})


def _launches(a, b, c) -> list[tuple[str, Callable[[], None]]]:
    """(row, launch) per tilecraft row; compiles each kernel (the knob is read then)."""
    import torch
    import tilecraft as ct
    from tilecraft.library.matmul import matmul_kernel
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(a.shape[0], TILE) * ct.cdiv(b.shape[1], TILE), 1, 1)
    rows = []
    for name, knob in (("merging off", "0"), ("merging on", "")):
        kernel = ct.kernel(matmul_kernel.fn)
        os.environ["TILECRAFT_BLOCK_MERGE"] = knob
        ct.launch(stream, grid, kernel, (a, b, c, TILE, TILE, TILE))
        os.environ.pop("TILECRAFT_BLOCK_MERGE")
        rows.append((f"{name} {_merged(kernel)}",
                     lambda kernel=kernel: ct.launch(stream, grid, kernel, (a, b, c, TILE, TILE, TILE))))
    tall = (ct.cdiv(a.shape[0], TILE * FACTOR) * ct.cdiv(b.shape[1], TILE), 1, 1)
    rows.append((f"written {TILE * FACTOR}x{TILE}x{TILE}",
                 lambda: ct.launch(stream, tall, matmul_kernel, (a, b, c, TILE * FACTOR, TILE, TILE))))
    return rows


def main(argv: list[str] | None = None) -> int:
    out = claim(out_path(__doc__.splitlines()[0], argv))
    import torch
    import triton
    torch.backends.cuda.matmul.allow_tf32 = True
    doc = head()
    doc["cases"] = []
    for case, (m, n, k), dtype in CASES:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
        ref = a.double() @ b.double()
        c = torch.empty(m, n, device="cuda", dtype=a.dtype)
        rows = [("torch", lambda: torch.matmul(a, b, out=c))]
        rows += _launches(a, b, c)
        errors = {}
        for name, fn in rows:
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            errors[name] = float((c.double() - ref).norm() / ref.norm())
        times: dict[str, list[float]] = {name: [] for name, _ in rows}
        for _ in range(ROUNDS):
            for name, fn in rows:
                if errors[name] < 1e-2:
                    times[name].append(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))
        t_torch = statistics.median(times["torch"])
        entry = {"case": case, "rows": []}
        for name, _ in rows:
            row = {"row": name, "rel_err": errors[name]}
            if times[name]:
                ms = statistics.median(times[name])
                row.update(ms=ms, rounds_ms=times[name], ratio=t_torch / ms)
                print(f"{case:24s} {name:18s} {ms * 1e3:7.2f} us  {t_torch / ms:.3f}x torch", flush=True)
            entry["rows"].append(row)
        doc["cases"].append(entry)
    out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
