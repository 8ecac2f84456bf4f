"""Host time per launch when the output array is a new one each call, as user code usually has it
(`c = torch.empty(...)` before every launch), against the same launch with one array reused
(GPU probe for issue 10's launch-cost item; not a product benchmark).

A launch whose kernel reads an array through a host tensor descriptor (the warp-specialized
Gluon matmul, the staged tf32 kernel) keeps each descriptor's encoding per address
(`descriptor_args.ExpandedLauncher`); a new address is encoded again. Rows, each the median over
rounds of `LAUNCHES` launches (each round after a synchronize, so the launch queue never fills):

- `same`: one output array, reused;
- `rotated`: outputs taken in turn from a pool of `POOL` arrays made beforehand (more than the
  C quick path keeps maps for, and more than the launcher kept encodings for before 986b52f;
  no allocation timed);
- `fresh`: `torch.empty` then the launch, as user code does; `empty alone`: the allocation only;
- torch's own call (`torch.matmul(out=)`, `torch.add(out=)`) with the same arrays, for scale;
- `stream same` and `stream torch`: wall time per call of `STREAMED` calls in a row, one output
  reused, synchronized only at the end: what a loop of launches gets, the GPU's time or the
  host's, whichever is longer (the other rows are host time alone).

Every case's output is checked against torch before anything is timed. Then a cProfile of the
`rotated` launches of the bf16 case (the Gluon variant), by internal time.

    PYTHONPATH=$PWD:$PWD/.conformance/shim:$PWD/.conformance/samples \\
        python3 benchmarks/fresh_output_probe.py --out $OUT/fresh.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import claim  # noqa: E402

import tilecraft as ct  # noqa: E402

POOL, LAUNCHES, ROUNDS, STREAMED = 80, 10, 25, 200


@ct.kernel
def vector_add(a, b, c, tile: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(tile,)) + ct.load(b, index=(i,), shape=(tile,)))


def _streamed(fn) -> float:
    """Median over ROUNDS of the wall us per call of STREAMED calls of `fn()` queued back to back."""
    import torch
    per = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(STREAMED):
            fn()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) / STREAMED * 1e6)
    return statistics.median(per)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = claim(args.out)

    import itertools

    import torch
    from probing import host_rounds
    from tilecraft.library.matmul import matmul_kernel

    stream = torch.cuda.current_stream()
    torch.backends.cuda.matmul.allow_tf32 = True  # torch's float32 matmuls in tf32, as tilecraft's
    torch.manual_seed(0)
    rows, profiled = [], None
    cases = [("vector add fp32 1M", "add", torch.float32, (1 << 20,), None),
             ("matmul fp16 512^3 128x256x64", "mm", torch.float16, (512, 512, 512), (128, 256, 64)),
             ("matmul bf16 4096^3 128x256x64", "mm", torch.bfloat16, (4096, 4096, 4096), (128, 256, 64)),
             ("matmul fp16 1024^3 128x256x64", "mm", torch.float16, (1024, 1024, 1024), (128, 256, 64)),
             ("matmul fp16 2048^3 128x256x64 (as compiled: 128 blocks)", "mm", torch.float16, (2048, 2048, 2048),
              (128, 256, 64)),
             ("matmul bf16 4000x3000x2000 128x128x64 (grid loop: 768 blocks)", "mm", torch.bfloat16,
              (4000, 3000, 2000), (128, 128, 64)),
             ("matmul fp32 (tf32) 2048^3 128x256x32", "mm", torch.float32, (2048, 2048, 2048), (128, 256, 32)),
             ("matmul fp32 (tf32) 2048x2048x1024 32x32x32, staged per grid", "mm", torch.float32, (2048, 2048, 1024),
              (32, 32, 32))]
    for name, kind, dtype, shape, tiles in cases:
        if kind == "add":
            n = shape[0]
            a, b = torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)
            out_shape, kern = (n,), ct.kernel(vector_add.fn)
            grid, extra = (n // 1024, 1, 1), (1024,)
            ref = a + b
            theirs = lambda c: torch.add(a, b, out=c)
            tol = 0.0
        else:
            m, nn, k = shape
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, nn, device="cuda", dtype=dtype)
            out_shape, kern = (m, nn), ct.kernel(matmul_kernel.fn)
            grid, extra = (ct.cdiv(m, tiles[0]) * ct.cdiv(nn, tiles[1]), 1, 1), tiles
            ref = (a.double() @ b.double())
            theirs = lambda c: torch.matmul(a, b, out=c)
            tol = 1e-2 if dtype != torch.float32 else 2e-3
        pool = [torch.full(out_shape, float("nan"), device="cuda", dtype=dtype) for _ in range(POOL)]
        launch = lambda c: ct.launch(stream, grid, kern, (a, b, c, *extra))
        for c in pool[:3]:
            launch(c)
        torch.cuda.synchronize()
        err = float((pool[2].double() - ref.double()).norm() / ref.double().norm())
        ok = err <= tol + 1e-6
        row = {"case": name, "rel_err": err, "ok": ok}
        if ok:
            for _ in range(3):
                for i in range(POOL):
                    launch(pool[i])
            torch.cuda.synchronize()
            timed = {
                "same": lambda: launch(pool[0]),
                "rotated": lambda turn=itertools.count(): launch(pool[next(turn) % POOL]),
                "fresh": lambda: launch(torch.empty(out_shape, device="cuda", dtype=dtype)),
                "empty alone": lambda: torch.empty(out_shape, device="cuda", dtype=dtype),
                "torch same": lambda: theirs(pool[0]),
            }
            streamed = {"stream same": timed["same"], "stream torch": timed["torch same"]}
            for r in range(3):  # rotated order, so host drift touches every row alike
                for key in list(timed)[r:] + list(timed)[:r]:
                    row.setdefault(key, []).append(statistics.median(host_rounds(timed[key], ROUNDS, LAUNCHES)))
                for key in streamed:
                    row.setdefault(key, []).append(_streamed(streamed[key]))
            for key in (*timed, *streamed):
                row[key] = round(statistics.median(row[key]), 2)
            if profiled is None and name.startswith("matmul bf16"):
                pr = cProfile.Profile()
                pr.enable()
                for i in range(200):
                    launch(pool[i % POOL])
                pr.disable()
                torch.cuda.synchronize()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(16)
                profiled = f"{name}, 200 rotated launches:\n" + s.getvalue()
        print(json.dumps(row), flush=True)
        rows.append(row)
        pool.clear()
        torch.cuda.empty_cache()
    if profiled:
        print(profiled)
    out.write_json({"meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "pool": POOL, "launches": LAUNCHES, "rounds": ROUNDS},
                    "rows": rows, "profile": profiled})


if __name__ == "__main__":
    main()
