"""Matmul benchmark: tilecraft running the cuTile MatMul sample vs plain Triton vs torch (cuBLAS).

For each case, side by side in one run:
  tilecraft    the sample kernel from tilecraft.library, launched as a cuTile user launches it
  triton-ptr   the same algorithm hand-written in plain Triton, masked pointer loads
  triton-desc  the same, with tensor descriptors (TMA)
  triton       (derived) the faster of triton-ptr and triton-desc
  torch        torch.matmul (cuBLAS; tf32 allowed for fp32 inputs)
Tiles: 128x256x64 for 16-bit inputs, 32x32x32 for fp32 (computed as tf32); 1-D grid in grouped
order (GROUP_SIZE_M = 8). TC4 cases use the persistent kernels (grid = number of SMs).

Each implementation first runs once on a NaN-poisoned output and is checked against a float64
reference computed on the GPU (relerr = |out - ref| / |ref|); then it is timed with CUDA events,
L2 flushed before every run, median of at least --min-runs runs; then checked once more. Last,
launch overhead: host time of a cached launch of a 1024-element vector add (tilecraft, plain
Triton, torch `a + b`). Ratios are speed-ups: ratio_torch = torch ms / impl ms (above 1: faster
than cuBLAS), ratio_triton = best plain Triton ms / tilecraft ms.

    PYTHONPATH=$PWD python benchmarks/matmul.py [--quick] [--cases tc1,8192-bf16] [--out F]
    PYTHONPATH=$PWD python benchmarks/matmul.py --cpu-smoke  # tiny cases, CPU interpreters

--cpu-smoke runs every implementation once on small CPU tensors through Triton's interpreter
(TRITON_INTERPRET=1; tilecraft through TILECRAFT_BACKEND, default triton-interpret) and checks
the results; it makes no timing claims.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

if __name__ == "__main__" and "--cpu-smoke" in sys.argv:  # must precede `import triton`
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("TILECRAFT_BACKEND", "triton-interpret")

import torch
import triton

import tilecraft as ct
import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from _results import claim
from tilecraft.backends import registry
from tilecraft.library import matmul_kernel, persistent_matmul_kernel

ConstInt = ct.Constant[int]
IMPLS = ("tilecraft", "triton-ptr", "triton-desc", "torch")
TOLERANCE = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 2e-3}  # fp32 runs as tf32
DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
SMOKE_SMS = 3


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    M: int
    N: int
    K: int
    dtype: torch.dtype
    persistent: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K


def _cube(n: int, dtype: torch.dtype, persistent: bool = False) -> Case:
    short = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]
    key = f"{'tc4-' if persistent else ''}{n}-{short}"
    label = f"{'TC4 persistent ' if persistent else ''}{n}^3 {DTYPE_NAMES[dtype]}"
    return Case(key, label, n, n, n, dtype, persistent)


CASES = [
    Case("tc1", "TC1 512x512x768 float16", 512, 512, 768, torch.float16),
    Case("tc2", "TC2 512x512x768 float32", 512, 512, 768, torch.float32),
    Case("tc3", "TC3 1000x500x700 float32", 1000, 500, 700, torch.float32),
    *[_cube(n, d) for n in (4096, 8192) for d in (torch.float16, torch.bfloat16, torch.float32)],
    Case("odd-bf16", "odd 4000x3000x2000 bfloat16", 4000, 3000, 2000, torch.bfloat16),
    _cube(4096, torch.float16, persistent=True),
    _cube(8192, torch.bfloat16, persistent=True),
]
QUICK = ("tc1", "tc2", "tc3", "4096-fp16", "tc4-4096-fp16")
SMOKE_CASES = [  # sizes with 16-byte aligned rows (tensor descriptors); no bf16: Triton's CPU
    # interpreter computes bf16 through NumPy, which has no bf16
    Case("smoke-fp16", "smoke 200x264x136 float16", 200, 264, 136, torch.float16),
    Case("smoke-fp32", "smoke 100x68x92 float32", 100, 68, 92, torch.float32),
    Case("smoke-tc4-fp16", "smoke persistent 200x264x136 float16", 200, 264, 136, torch.float16, True),
]


@ct.kernel
def vector_add_kernel(a, b, c, tile: ConstInt):
    """c = a + b, one tile per block (the launch-overhead probe)."""
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(tile,))
    y = ct.load(b, index=(bid,), shape=(tile,))
    ct.store(c, index=(bid,), tile=x + y)


def tiles_for(dtype: torch.dtype) -> tuple[int, int, int]:
    """The sample's tiles, shared with the plain Triton kernels."""
    cfg = tr.launch_config(dtype)
    return cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]


def impl_tiles(impl: str, dtype: torch.dtype) -> tuple[int, int, int]:
    """The tiles a tilecraft implementation runs the sample with: "tilecraft@TMxTNxTK" names its
    own (the size sweep's --tiles), any other the sample's."""
    _, at, spec = impl.partition("@")
    if not at:
        return tiles_for(dtype)
    tm, tn, tk = (int(t) for t in spec.split("x"))
    return tm, tn, tk


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_runner(impl: str, case: Case, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                sms: int, backend: str | None = None) -> Callable[[], Any]:
    """A no-argument callable computing C = A @ B with `impl` (a tilecraft one launched on
    `backend` when given, else on the default backend)."""
    if impl == "torch":
        return lambda: torch.matmul(A, B, out=C)
    if impl in ("triton-ptr", "triton-desc"):
        mode = impl.removeprefix("triton-")
        if mode == "desc" and not tr.descriptors_supported(A, B, C):
            raise ValueError("rows are not 16-byte aligned: no tensor descriptors")
        return lambda: tr.matmul(A, B, C, mode, case.persistent, sms)
    tm, tn, tk = impl_tiles(impl, case.dtype)
    num_tiles = ct.cdiv(case.M, tm) * ct.cdiv(case.N, tn)
    if case.persistent:
        kernel, grid = persistent_matmul_kernel, (min(sms, num_tiles), 1, 1)
    else:
        kernel, grid = matmul_kernel, (num_tiles, 1, 1)
    options = {} if backend is None else {"backend": backend}
    if A.is_cuda:
        return lambda: ct.launch(torch.cuda.current_stream(), grid, kernel, (A, B, C, tm, tn, tk), **options)
    return lambda: ct.launch(None, grid, kernel, (A, B, C, tm, tn, tk), **options)


def variant_backend(suffix: str, **options: Any) -> str:
    """The name of the tilecraft backend of this run (TILECRAFT_BACKEND, default triton; a
    Triton one) built with TritonBackend `options`, registered on first use as `<name>-<suffix>`."""
    from tilecraft.backends.triton import TritonBackend

    base = registry.get(os.environ.get("TILECRAFT_BACKEND") or "triton")
    if base is None or not isinstance(base.backend, TritonBackend):
        raise SystemExit("a variant of the tilecraft backend needs a Triton backend "
                         "(TILECRAFT_BACKEND=triton or triton-interpret)")
    name = f"{base.name}-{suffix}"
    if registry.get(name) is None:
        kind = base.backend.kind
        registry.register(registry.BackendSpec(name, base.device, lambda: TritonBackend(kind, **options),
                                               base.to_array, base.packages))
    return name


class CudaTimer:
    """Medians of CUDA-event timings, L2 flushed before each run (as triton.testing.do_bench).

    `compare` times several implementations of one case in interleaved rounds (each round runs
    every implementation, in a rotated order), so clock and thermal drift during the case
    affects all of them alike instead of favouring whichever ran first."""

    ROUNDS = 5

    def __init__(self, min_runs: int, rep_ms: float, warmup_ms: float, cap_s: float) -> None:
        self.min_runs, self.rep_ms, self.warmup_ms, self.cap_ms = min_runs, rep_ms, warmup_ms, cap_s * 1e3
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def _events(self, fn: Callable[[], Any], n: int) -> list[float]:
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in pairs:
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs]

    def _runs(self, fn: Callable[[], Any]) -> int:
        """Warm `fn` up; return how many timed runs it gets."""
        estimate = max(statistics.median(self._events(fn, 5)), 1e-3)
        for _ in range(max(1, int(self.warmup_ms / estimate))):
            fn()
        runs = max(self.min_runs, min(int(self.rep_ms / estimate), 20 * self.min_runs))
        return max(10, min(runs, int(self.cap_ms / estimate)))  # a very slow kernel gets fewer runs

    def compare(self, fns: dict[str, Callable[[], Any]]) -> dict[str, dict[str, Any]]:
        """Timing statistics of each named no-argument callable."""
        runs = {name: self._runs(fn) for name, fn in fns.items()}
        times: dict[str, list[float]] = {name: [] for name in fns}
        names = list(fns)
        for r in range(self.ROUNDS):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name] += self._events(fns[name], max(1, runs[name] // self.ROUNDS))
        out = {}
        for name, ts in times.items():
            ts.sort()
            out[name] = {"ms": statistics.median(ts), "ms_min": ts[0], "ms_p10": ts[len(ts) // 10],
                         "ms_p20": ts[len(ts) // 5], "ms_p80": ts[len(ts) * 4 // 5],
                         "ms_p90": ts[len(ts) * 9 // 10], "runs": len(ts)}
        return out


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """|out - ref| / |ref| in float64; NaN if any element stayed poisoned."""
    return ((out.double() - ref).norm() / ref.norm()).item()


def measure_case(case: Case, device: torch.device, timer: CudaTimer | None, sms: int,
                 seed: int, impls: tuple[str, ...] = IMPLS,
                 backends: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Check and time `impls` (tilecraft and torch among them) on one case; returns one record
    per implementation. `backends`: further tilecraft implementations among `impls` -> the
    tilecraft backend each launches the sample on."""
    gen = torch.Generator(device=device).manual_seed(seed)
    A = torch.randn(case.M, case.K, device=device, generator=gen).to(case.dtype)
    B = torch.randn(case.K, case.N, device=device, generator=gen).to(case.dtype)
    C = torch.empty(case.M, case.N, device=device, dtype=case.dtype)
    ref = A.double() @ B.double()
    records, runners = [], {}
    for impl in impls:
        rec: dict[str, Any] = {"case": case.label, "key": case.key, "impl": impl, "M": case.M, "N": case.N,
                               "K": case.K, "dtype": DTYPE_NAMES[case.dtype], "persistent": case.persistent,
                               "tiles": None if impl == "torch" else list(impl_tiles(impl, case.dtype))}
        records.append(rec)
        with recorded_failure(rec):
            run = make_runner(impl, case, A, B, C, sms, (backends or {}).get(impl))
            C.fill_(math.nan)
            start = time.perf_counter()
            run()
            synchronize(device)
            rec["first_call_s"] = time.perf_counter() - start
            rec["relerr"] = relative_error(C, ref)
            runners[impl] = run
    if timer is not None and runners:
        timings = timer.compare(runners)
        for rec in records:
            if rec["impl"] in timings:
                rec.update(timings[rec["impl"]])
                rec["tflops"] = case.flops / (rec["ms"] * 1e-3) / 1e12
    for rec in records:
        if rec["impl"] not in runners:
            continue
        with recorded_failure(rec):
            C.fill_(math.nan)  # check again after the timed runs: a moving error is a race
            runners[rec["impl"]]()
            rec["relerr_again"] = relative_error(C, ref)
            rec["ok"] = max(rec["relerr"], rec["relerr_again"]) <= TOLERANCE[case.dtype]  # NaN fails
    return add_derived(records)


@contextlib.contextmanager
def recorded_failure(rec: dict[str, Any]):
    """Record an exception in `rec` instead of raising: one failing implementation must not stop
    the others."""
    try:
        yield
    except Exception as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["traceback"] = traceback.format_exc()


def add_derived(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the 'triton' row (faster of ptr/desc) and ratios: ratio_torch = torch ms / impl ms."""
    by_impl = {r["impl"]: r for r in records}
    timed = [by_impl[i] for i in ("triton-ptr", "triton-desc") if "ms" in by_impl.get(i, {})]
    if timed:
        best = min(timed, key=lambda r: r["ms"])
        records.append({**{k: v for k, v in best.items() if k not in ("traceback",)},
                        "impl": "triton", "source": best["impl"]})
    torch_ms = by_impl["torch"].get("ms")
    triton_ms = records[-1]["ms"] if timed else None
    for r in records:
        if "ms" in r and torch_ms:
            r["ratio_torch"] = torch_ms / r["ms"]
    if "ms" in by_impl["tilecraft"] and triton_ms:
        by_impl["tilecraft"]["ratio_triton"] = triton_ms / by_impl["tilecraft"]["ms"]
    return records


def launch_overhead(device: torch.device, launches: int, rounds: int, warmup: int) -> list[dict[str, Any]]:
    """Host time per cached launch of a 1024-element vector add: tilecraft, plain Triton, torch."""
    n = 1024
    a = torch.randn(n, device=device)
    b = torch.randn(n, device=device)
    c = torch.empty_like(a)
    stream = torch.cuda.current_stream() if device.type == "cuda" else None  # taken once, outside the loop
    runners: dict[str, Callable[[], Any]] = {
        "tilecraft": lambda: ct.launch(stream, (1,), vector_add_kernel, (a, b, c, n)),
        "triton": lambda: tr.add_kernel[(1,)](a, b, c, n, BLOCK=n),
        "torch": lambda: a + b,
    }
    out = []
    for impl, run in runners.items():
        c.fill_(math.nan)
        result = run()
        synchronize(device)
        got = result if impl == "torch" else c
        rec: dict[str, Any] = {"impl": impl, "elements": n, "ok": bool(torch.equal(got, a + b))}
        for _ in range(warmup):
            run()
        synchronize(device)
        per_call, per_round = [], []
        for _ in range(rounds):
            round_start = time.perf_counter()
            for _ in range(launches):
                start = time.perf_counter()
                run()
                per_call.append(time.perf_counter() - start)
            synchronize(device)
            per_round.append((time.perf_counter() - round_start) / launches)
        rec.update(launches=launches * rounds, host_us_median=statistics.median(per_call) * 1e6,
                   us_per_launch_incl_sync=statistics.median(per_round) * 1e6)
        out.append(rec)
    return out


def meta(args: argparse.Namespace, device: torch.device, sms: int) -> dict[str, Any]:
    cuda = device.type == "cuda"
    return {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu (interpreters)",
        "sms": sms, "torch": torch.__version__, "triton": triton.__version__, "tilecraft": ct.__version__,
        "cuda": torch.version.cuda, "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([sys.executable, *sys.argv]), "tf32_torch": torch.backends.cuda.matmul.allow_tf32,
        "tilecraft_backend": os.environ.get("TILECRAFT_BACKEND", "") or ("triton" if cuda else "interpreter"),
        "timing": None if not cuda else {"min_runs": args.min_runs, "rep_ms": args.rep_ms,
                                         "warmup_ms": args.warmup_ms, "cap_s": args.cap_s,
                                         "l2_flush_mb": 256, "rounds": CudaTimer.ROUNDS,
                                         "statistic": "median of CUDA-event times, implementations interleaved"},
    }


def fmt(x: Any, width: int, precision: int) -> str:
    """`x` right-aligned in `width` columns, or "-" for None (a value that was not measured)."""
    return f"{'-':>{width}s}" if x is None else f"{x:{width}.{precision}f}"


def print_table(records: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print(f"{'case':36s} {'impl':20s} {'ms':>9s} {'TFLOP/s':>8s} {'x torch':>8s} {'x triton':>8s} "
              f"{'relerr':>9s} {'first s':>8s}")
    for r in records:
        if "error" in r:
            print(f"{r['case']:36s} {r['impl']:20s} ERROR {r['error'].splitlines()[0][:100]}")
            continue
        flag = "" if r.get("ok") else "  TOLERANCE EXCEEDED"
        impl = f"{r['impl']}({r['source'].removeprefix('triton-')})" if "source" in r else r["impl"]
        print(f"{r['case']:36s} {impl:20s} {fmt(r.get('ms'), 9, 4)} {fmt(r.get('tflops'), 8, 1)} "
              f"{fmt(r.get('ratio_torch'), 8, 3)} {fmt(r.get('ratio_triton'), 8, 3)} "
              f"{max(r['relerr'], r['relerr_again']):9.2e} {r['first_call_s']:8.2f}{flag}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    p.add_argument("--cases", help="comma-separated case keys: " + ", ".join(c.key for c in CASES))
    p.add_argument("--cpu-smoke", action="store_true", help="tiny cases on CPU interpreters, no timing")
    p.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/matmul-<date>.json)")
    p.add_argument("--min-runs", type=int, default=100, help="timed runs per measurement, at least")
    p.add_argument("--rep-ms", type=float, default=100.0, help="aim for this much timed work (more runs)")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--cap-s", type=float, default=10.0, help="at most this long per measurement")
    p.add_argument("--budget-s", type=float, default=270.0, help="skip the remaining cases after this")
    p.add_argument("--launches", type=int, default=2000, help="launches per round of the overhead test")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def select_cases(args: argparse.Namespace) -> list[Case]:
    if args.cpu_smoke:
        return SMOKE_CASES
    keys = args.cases.split(",") if args.cases else QUICK if args.quick else [c.key for c in CASES]
    known = {c.key: c for c in CASES}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; choose from {', '.join(known)}")
    return [known[k] for k in keys]


def default_out(name: str, cpu_smoke: bool) -> Path:
    """results/<name>-[cpu-smoke-]<date>.json: where a run of benchmark `name` writes by default."""
    date = datetime.date.today().isoformat()
    return Path(__file__).parent / "results" / f"{name}-{'cpu-smoke-' if cpu_smoke else ''}{date}.json"


def start_run(args: argparse.Namespace) -> tuple[torch.device, int, CudaTimer | None]:
    """(device, SM count, timer) of a benchmark run (`args`: --cpu-smoke and the timer's
    options), after checking the device is there; no timer for a CPU smoke run. Call it after
    claiming the result file, so a run that would overwrite one stops before anything else."""
    if args.cpu_smoke and not os.environ.get("TRITON_INTERPRET"):
        raise SystemExit("--cpu-smoke needs TRITON_INTERPRET=1 set before triton is imported")
    if not args.cpu_smoke and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --cpu-smoke for a CPU check")
    torch.backends.cuda.matmul.allow_tf32 = True  # torch's fp32 matmul on tensor cores, like ours
    device = torch.device("cpu" if args.cpu_smoke else "cuda")
    sms = SMOKE_SMS if args.cpu_smoke else torch.cuda.get_device_properties(device).multi_processor_count
    timer = None if args.cpu_smoke else CudaTimer(args.min_runs, args.rep_ms, args.warmup_ms, args.cap_s)
    return device, sms, timer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = select_cases(args)
    out = claim(args.out or default_out("matmul", args.cpu_smoke))
    device, sms, timer = start_run(args)
    doc: dict[str, Any] = {"meta": meta(args, device, sms), "matmul": [], "skipped": [], "launch_overhead": []}
    print(f"{doc['meta']['device']}  torch {torch.__version__}  triton {triton.__version__}  "
          f"tilecraft backend {doc['meta']['tilecraft_backend']}", flush=True)
    started = time.perf_counter()
    for i, case in enumerate(cases):
        if time.perf_counter() - started > args.budget_s:
            doc["skipped"].append(case.key)
            continue
        records = measure_case(case, device, timer, sms, args.seed + i)
        doc["matmul"] += records
        print_table(records, header=i == 0)
        out.write_json(doc)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    launches, rounds, warmup = (3, 1, 1) if args.cpu_smoke else (args.launches, 5, 200)
    doc["launch_overhead"] = launch_overhead(device, launches, rounds, warmup)
    out.write_json(doc)

    print(f"\n== matmul ({'CPU smoke: correctness only' if args.cpu_smoke else doc['meta']['device']}) ==")
    print_table(doc["matmul"])
    if doc["skipped"]:
        print(f"skipped (over --budget-s): {', '.join(doc['skipped'])}")
    note = "CPU interpreters: times not meaningful" if args.cpu_smoke else "µs per launch"
    print(f"\n== launch overhead, vector add of 1024 elements ({note}) ==")
    for r in doc["launch_overhead"]:
        print(f"{r['impl']:10s} host {r['host_us_median']:8.2f}   incl. sync {r['us_per_launch_incl_sync']:8.2f}"
              f"   {'ok' if r['ok'] else 'WRONG RESULT'}")
    print(f"results: {out}")
    bad = [r for r in doc["matmul"] if "error" in r or not r.get("ok")]
    bad += [r for r in doc["launch_overhead"] if not r["ok"]]
    return 1 if bad or doc["skipped"] else 0


if __name__ == "__main__":
    sys.exit(main())
