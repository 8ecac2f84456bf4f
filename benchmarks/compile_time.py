"""Front-end compile time of the matmul sample kernel, and the NumPy interpreter's time on TC2.

Runs on the CPU. Bars: front end (Python AST -> verified Tile IR) under 50 ms for the matmul
kernel; TC2 (512x512x768 fp32, 32x32x32 tiles) on the interpreter under 2 s.

Every compile uses a fresh copy of tilecraft/library/matmul.py, shifted down by a few lines so
that its functions get new code objects: the front end caches parsed functions per code object,
and each measurement must include parsing the kernel and its helpers. The on-disk IR cache is
switched off (TILECRAFT_CACHE_DIR=off unless set) so the interpreter's first launch compiles.

    PYTHONPATH=$PWD python benchmarks/compile_time.py [--runs 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import tilecraft as ct
from tilecraft import knobs
import tilecraft.library.matmul as library_matmul
from tilecraft.frontend import compile_kernel
from tilecraft.runtime.args import describe_args
from _results import claim  # benchmarks/ is sys.path[0] when this file is run

FRONTEND_BAR_MS = 50.0
INTERPRETER_BAR_S = 2.0
TC2 = (512, 512, 768)
TC2_TILES = (32, 32, 32)


class FreshCopies:
    """New, never-compiled copies of the library's matmul module."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.source = Path(library_matmul.__file__).read_text()
        self.count = 0

    def next(self) -> ModuleType:
        self.count += 1
        path = self.directory / f"matmul_copy_{self.count}.py"
        path.write_text("\n" * self.count + self.source)  # new line numbers: new code objects
        spec = importlib.util.spec_from_file_location(f"_matmul_copy_{self.count}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def time_frontend(copies: FreshCopies, kernel_name: str, args: tuple[Any, ...], runs: int) -> dict[str, Any]:
    """Median ms of the front end alone and of front end + IR passes, each on fresh kernels."""
    frontend, lowered = [], []
    for _ in range(runs):
        kernel = getattr(copies.next(), kernel_name)
        specs, _, _ = describe_args(kernel.params, args)
        start = time.perf_counter()
        compile_kernel(kernel.fn, specs, kernel.resolved_options(None))
        frontend.append(time.perf_counter() - start)
        kernel = getattr(copies.next(), kernel_name)
        start = time.perf_counter()
        kernel.lower(specs)
        lowered.append(time.perf_counter() - start)
    return {"kernel": kernel_name, "runs": runs,
            "frontend_ms": statistics.median(frontend) * 1e3, "frontend_min_ms": min(frontend) * 1e3,
            "frontend_passes_ms": statistics.median(lowered) * 1e3}


def time_interpreter_tc2(copies: FreshCopies, warm_runs: int) -> dict[str, Any]:
    """TC2 on the NumPy interpreter: first launch (compile + run) and median of warm launches."""
    M, N, K = TC2
    tm, tn, tk = TC2_TILES
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    kernel = copies.next().matmul_kernel
    grid = (ct.cdiv(M, tm) * ct.cdiv(N, tn), 1, 1)
    times = []
    for _ in range(1 + warm_runs):
        start = time.perf_counter()
        ct.launch(None, grid, kernel, (A, B, C, tm, tn, tk), backend="interpreter")
        times.append(time.perf_counter() - start)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    relerr = float(np.linalg.norm(C - ref) / np.linalg.norm(ref))
    return {"case": "TC2 512x512x768 float32", "tiles": list(TC2_TILES), "first_launch_s": times[0],
            "warm_s": statistics.median(times[1:]), "warm_runs": warm_runs, "relerr": relerr}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=50, help="fresh compiles per kernel")
    p.add_argument("--warm-runs", type=int, default=5, help="interpreter launches after the first")
    p.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/compile-time-<date>.json)")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warm_runs < 1:
        p.error("--runs and --warm-runs must be at least 1")
    os.environ.setdefault(knobs.CACHE_DIR.name, "off")
    default = Path(__file__).parent / "results" / f"compile-time-{datetime.date.today().isoformat()}.json"
    out = claim(args.out or default)
    fp16_args = (np.zeros((512, 768), np.float16), np.zeros((768, 512), np.float16),
                 np.zeros((512, 512), np.float16), 128, 256, 64)
    with tempfile.TemporaryDirectory() as tmp:
        copies = FreshCopies(Path(tmp))
        frontend = [time_frontend(copies, name, fp16_args, args.runs)
                    for name in ("matmul_kernel", "persistent_matmul_kernel")]
        interp = time_interpreter_tc2(copies, args.warm_runs)
    ok_frontend = frontend[0]["frontend_ms"] < FRONTEND_BAR_MS
    ok_interp = interp["warm_s"] < INTERPRETER_BAR_S and interp["relerr"] < 1e-3
    doc = {"meta": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "numpy": np.__version__, "tilecraft": ct.__version__,
                    "date": datetime.datetime.now().isoformat(timespec="seconds"),
                    "command": " ".join([sys.executable, *sys.argv])},
           "frontend": frontend, "frontend_bar_ms": FRONTEND_BAR_MS, "frontend_ok": ok_frontend,
           "interpreter": interp, "interpreter_bar_s": INTERPRETER_BAR_S, "interpreter_ok": ok_interp}
    out.write_json(doc)
    for f in frontend:
        print(f"{f['kernel']:26s} front end {f['frontend_ms']:7.2f} ms (min {f['frontend_min_ms']:.2f}), "
              f"+ passes {f['frontend_passes_ms']:7.2f} ms  median of {f['runs']} fresh compiles")
    print(f"bar: matmul_kernel front end < {FRONTEND_BAR_MS:.0f} ms: {'ok' if ok_frontend else 'MISSED'}")
    print(f"TC2 on the interpreter: first launch {interp['first_launch_s']:.3f} s (with compile), "
          f"warm {interp['warm_s']:.3f} s, relerr {interp['relerr']:.2e}")
    print(f"bar: TC2 interpreter < {INTERPRETER_BAR_S:.0f} s: {'ok' if ok_interp else 'MISSED'}")
    print(f"results: {out}")
    return 0 if ok_frontend and ok_interp else 1


if __name__ == "__main__":
    sys.exit(main())
