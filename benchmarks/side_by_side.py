"""Side by side on one GPU: the same cuTile kernel sources compiled by tilecraft and by NVIDIA's
cuTile, each next to torch in its own process (cuTile and tilecraft cannot both be `cuda.tile`
in one process), so every row is a ratio measured in one process.

    python3 benchmarks/side_by_side.py --out $OUT/sbs.json                 # both, where cuTile is set up
    python3 benchmarks/side_by_side.py --system tilecraft --out t.json     # one system (a child run)

The kernels are cuTile's published samples (`.conformance/samples`: MatMul, AttentionFMHA,
LayerNorm), launched as the samples launch them. Before a case is timed its output is checked
against a float64 reference (matmul, layer norm) or torch's SDPA output (cuDNN, attention); a
case that fails the check is recorded, not timed. Times are medians of
`triton.testing.do_bench` (L2 flushed between runs), the system's and torch's taken alternately
(`ROUNDS`). The cuTile side runs where
`CUTILE_PYTHONPATH` is set (`source .cutile/env.sh`, see ../shared/cutile-anchor); without it the
table has tilecraft and torch only. Ratios are torch time / system time (above 1: faster).
Matmul rows also say how the kernel ran (`schedule`: the Gluon variant or the Triton kernel)
and the host time per launch of each side (`host_us`, `torch_host_us`; see `host_us`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from _results import claim

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / ".conformance" / "samples"
SHIM = ROOT / ".conformance" / "shim"

MATMUL = [("fp16 4096^3", "float16", (4096, 4096, 4096), ((128, 256, 64), (128, 128, 64))),
          ("bf16 8192^3", "bfloat16", (8192, 8192, 8192), ((128, 256, 64), (128, 128, 64))),
          ("bf16 4000x3000x2000", "bfloat16", (4000, 3000, 2000), ((128, 256, 64), (128, 128, 64))),
          ("fp32 as tf32 8192^3", "float32", (8192, 8192, 8192),
           ((32, 32, 32), (128, 128, 32), (128, 64, 32), (128, 256, 32)))]
"""(case, dtype, (M, N, K), tiles): the sample's own tiles first (128x256x64 for 16-bit, 32x32x32
for fp32), then other choices (fp32 128x64x32: two blocks fit an SM, 82 KiB shared memory and 160
registers each on sm_90, where 128x128x32 takes one, 180 KiB; fp32 128x256x32: the best tile of
plain Triton on tf32-staged operands in benchmarks/tf32_probe.py, which 8192^3 fp32 launches
run on sm_90+: backends/triton/operand_staging.py)."""
ATTENTION = [("attention bf16 B4 H32 S4096 D128", False, (128, 128)),
             ("attention bf16 B4 H32 S4096 D128", False, (64, 128)),
             ("attention bf16 B4 H32 S4096 D128 causal", True, (128, 128)),
             ("attention bf16 B4 H32 S4096 D128 causal", True, (64, 128))]
LAYERNORM = [("layernorm bf16 8192x4096", "bfloat16", (8192, 4096)),
             ("layernorm fp32 32768x1024", "float32", (32768, 1024))]


ROUNDS = 3
"""Each case times the system and torch alternately this many times (medians of each), the one
timed first changing from round to round: the GPU's clock drifts as it heats, and a fixed order
would favour whichever runs first."""


def _bench(fn) -> float:
    import triton
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def host_us(fn, calls: int = 20) -> float:
    """Host time per call of `fn` in us, its launches queued without waiting. do_bench flushes L2
    before each timed launch; a launch that takes the host longer than that flush takes the GPU
    is timed as kernel time too, so a row's `host_us` says whether it could have been."""
    import torch
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def bench_pair(ours, theirs) -> tuple[float, float]:
    """(ours, theirs) in ms: medians of `ROUNDS` alternating `_bench` runs of each."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for r in range(ROUNDS):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[k].append(_bench((ours, theirs)[k]))
    return statistics.median(times[0]), statistics.median(times[1])


def rel_err(got, ref) -> float:
    return float((got.double() - ref.double()).norm() / ref.double().norm())


def run_cases(system: str, only: str | None) -> list[dict]:
    """Time every case under `system` (whichever `cuda.tile` this process imports) and torch."""
    import torch
    sys.path.insert(0, str(SAMPLES))
    import cuda.tile as ct
    torch.backends.cuda.matmul.allow_tf32 = True
    stream = torch.cuda.current_stream()
    rows: list[dict] = []

    def record(**row) -> None:
        row["system"] = system
        rows.append(row)
        print(json.dumps(row), flush=True)

    if only in (None, "matmul"):
        import MatMul
        for name, dtype, (m, n, k), tile_choices in MATMUL:
            dt = getattr(torch, dtype)
            a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
            ref = a.double() @ b.double()
            for tm, tn, tk in tile_choices:
                _matmul_row(system, ct, MatMul, stream, record, name, dtype, a, b, ref, (tm, tn, tk))

    if only in (None, "attention"):
        import AttentionFMHA
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention
        b_, h, s, d = 4, 32, 4096, 128
        q, k_, v = (torch.randn(b_, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for name, causal, (tm, tn) in ATTENTION:
            def ours():
                return AttentionFMHA.cutile_fmha(q, k_, v, tile_m=tm, tile_n=tn, causal=causal)
            def theirs():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return scaled_dot_product_attention(q, k_, v, is_causal=causal)
            ref = theirs()
            measured = _measure(name, ours, lambda out: rel_err(out, ref), 1e-2, theirs)
            flop = 4 * b_ * h * s * s * d / (2 if causal else 1)
            _record_case(record, name, f"{tm}x{tn}", measured, flop / 1e9, "tflops",
                         schedule=_schedule(system, AttentionFMHA.fmha_kernel))
    if only in (None, "layernorm"):
        import LayerNorm
        for name, dtype, (m, n) in LAYERNORM:
            dt = getattr(torch, dtype)
            x = torch.randn(m, n, device="cuda", dtype=dt)
            w, bias = torch.randn(n, device="cuda", dtype=dt), torch.randn(n, device="cuda", dtype=dt)
            y = torch.empty_like(x)
            mean = torch.empty(m, device="cuda", dtype=torch.float32)
            rstd = torch.empty(m, device="cuda", dtype=torch.float32)

            def ours():
                ct.launch(stream, (m,), LayerNorm.layer_norm_fwd, (x, w, bias, y, mean, rstd, 1e-5, 1024))
            ref = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), bias.double(), 1e-5)
            measured = _measure(name, ours, lambda _: rel_err(y, ref), 1e-2,
                                lambda: torch.nn.functional.layer_norm(x, (n,), w, bias, 1e-5))
            _record_case(record, name, "1024", measured, 2 * m * n * x.element_size() / 1e6, "gbps")
    return rows


def _matmul_row(system: str, ct, MatMul, stream, record, name: str, dtype: str, a, b, ref,
                tiles: tuple[int, int, int]) -> None:
    """One matmul case with the sample's kernel at `tiles`, and torch's a @ b."""
    import torch
    (m, k), n = a.shape, b.shape[1]
    tm, tn, tk = tiles
    c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
    grid = (math.ceil(m / tm) * math.ceil(n / tn), 1, 1)

    def ours():
        ct.launch(stream, grid, MatMul.matmul_kernel, (a, b, c, tm, tn, tk))
    measured = _measure(name, ours, lambda _: rel_err(c, ref), 2e-3 if dtype == "float32" else 1e-2, lambda: a @ b)
    _record_case(record, name, f"{tm}x{tn}x{tk}", measured, 2 * m * n * k / 1e9, "tflops",
                 schedule=_schedule(system, MatMul.matmul_kernel), host_us=host_us(ours),
                 torch_host_us=host_us(lambda: a @ b))


def _measure(name: str, run, error, tol: float, theirs) -> tuple[bool, float | None, float | None, float]:
    """(passed, relative error, ms, torch's ms) of one case: `run()` once, `error(its result)`
    against the reference, and time it alternately with torch's `theirs` (`bench_pair`) only if
    that is below `tol`. A system that cannot run a case gives a failed row, not a crash."""
    try:
        err = error(run())
        if err < tol:
            return (True, err, *bench_pair(run, theirs))
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        err = None
    return False, err, None, _bench(theirs)


def _record_case(record, name: str, tiles: str, measured: tuple, work: float, unit: str, **extra) -> None:
    """One row: the measurement, torch's time, and both rates in `unit` (`work` per ms)."""
    ok, err, t, t_torch = measured
    record(case=name, tiles=tiles, ok=ok, rel_err=err, ms=t, torch_ms=t_torch,
           **{unit: work / t if t else None, f"torch_{unit}": work / t_torch}, ratio=t_torch / t if t else None, **extra)


def _schedule(system: str, kernel) -> str | None:
    """Under tilecraft: how `kernel`'s last compiled variant ran, "warp-specialized" (the Gluon
    variant, backends/gluon), "triton", or why the Gluon variant was given up."""
    if system != "tilecraft":
        return None
    from tilecraft.backends.base import kernels_within
    from tilecraft.backends.gluon import WarpSpecializedKernel
    last = list(kernel.variants.values())[-1].compiled  # with its staged and merged kernels
    found = [k for k in kernels_within(last) if isinstance(k, WarpSpecializedKernel)]
    if any(k.variant_launches for k in found):
        return "warp-specialized"
    gave_up = [k.gave_up for k in found if k.gave_up is not None]
    return f"triton (gave up: {gave_up[0]})" if gave_up else "triton"


def _child(system: str, only: str | None, timeout_s: float) -> list[dict]:
    """Run one system in its own process; its rows."""
    if system == "cutile":
        path = os.environ["CUTILE_PYTHONPATH"]
    else:
        path = os.pathsep.join((str(SHIM), str(ROOT)))
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(Path(__file__)), "--system", system, "--rows-only"] + (["--only", only] if only else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    sys.stderr.write(done.stderr[-4000:])
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def table(rows: list[dict]) -> str:
    """Markdown: one line per case and tiles, a ratio column per system."""
    systems = sorted({r["system"] for r in rows}, key=lambda s: s != "tilecraft")
    keys = list(dict.fromkeys((r["case"], r["tiles"]) for r in rows))
    lines = ["| case | tiles | " + " | ".join(f"{s} (× torch)" for s in systems) + " |",
             "|---|---|" + "---|" * len(systems)]
    for case, tiles in keys:
        cells = []
        for s in systems:
            r = next((r for r in rows if r["system"] == s and r["case"] == case and r["tiles"] == tiles), None)
            cells.append("—" if r is None else f"{r['ratio']:.2f}" if r["ratio"] else "fails" if not r["ok"] else "?")
        lines.append(f"| {case} | {tiles} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=("tilecraft", "cutile"), help="run one system in this process")
    parser.add_argument("--only", choices=("matmul", "attention", "layernorm"))
    parser.add_argument("--rows-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout-s", type=float, default=400)
    args = parser.parse_args(argv)
    if args.rows_only:
        run_cases(args.system, args.only)
        return 0
    out = claim(args.out) if args.out else None
    import torch
    systems = [args.system] if args.system else ["tilecraft"] + (["cutile"] if os.environ.get("CUTILE_PYTHONPATH") else [])
    doc = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    start = time.perf_counter()
    for system in systems:
        doc["rows"] += _child(system, args.only, args.timeout_s)
        if out:
            out.write_json(doc)
    doc["table"] = table(doc["rows"])
    doc["seconds"] = round(time.perf_counter() - start, 1)
    if out:
        out.write_json(doc)
    print(doc["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
