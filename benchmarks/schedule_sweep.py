"""Which schedule should the Triton backend give the matmul sample? Times the same tilecraft IR
compiled several ways, next to plain Triton and torch, in one run (GPU only).

Variants (TritonBackend options): `default` (what tilecraft does), `no-grid-loop` (one program
per output tile, as before the grid loop), `no-flatten` (grid loop without `flatten=True`),
`pointers` / `descriptors` (tile accesses forced to masked pointers / tensor descriptors),
`tile-split-2` / `-4` (every output tile computed by 2 / 4 blocks, `passes/tile_split.py`: more
warps per SM for grids of small tiles, such as TC3's 512 one-warp blocks).
References: `triton-ptr`, `triton-desc` (benchmarks/triton_reference.py, same tiles, one
program per tile), `triton-desc-persistent` (same, one program per SM) and `torch`.

    PYTHONPATH=$PWD python benchmarks/schedule_sweep.py --cases tc2,odd-bf16 --out sweep.json
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path
from typing import Any, Callable

import torch

import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from _results import claim
from matmul import CASES, TOLERANCE, Case, CudaTimer, meta, relative_error, tiles_for
from tilecraft.backends.arrays import as_torch
from tilecraft.backends.base import BackendKind
from tilecraft.backends.triton import TritonBackend
from tilecraft.library import matmul_kernel, persistent_matmul_kernel
from tilecraft.runtime.args import backend_args

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no-grid-loop": {"grid_loop": False, "flatten": False},
    "no-flatten": {"flatten": False},
    "pointers": {"descriptors": False},
    "descriptors": {"descriptors": True},
    "tile-split-2": {"tile_split": 2},
    "tile-split-4": {"tile_split": 4},
}


def tilecraft_runner(case: Case, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, sms: int,
                     options: dict[str, Any]) -> tuple[Callable[[], Any], str]:
    """Compile the sample kernel's IR with `options`; (a runner, the generated source)."""
    tm, tn, tk = tiles_for(case.dtype)
    kernel = persistent_matmul_kernel if case.persistent else matmul_kernel
    tiles = math.ceil(case.M / tm) * math.ceil(case.N / tn)
    grid = (min(sms, tiles) if case.persistent else tiles, 1, 1)
    specs, arrays, flat = kernel.describe((A, B, C, tm, tn, tk))
    fn = kernel.lower(specs, "sm_90")
    facts = iter(a.facts for a in arrays)
    param_facts = [next(facts) if hasattr(p.type, "ndim") else None for p in fn.params]
    compiled = TritonBackend(BackendKind.TRITON, **options).compile(fn, param_facts)
    args = backend_args(flat, as_torch)
    compiled.launch(grid, args, None)
    launcher = compiled.specialize(args)
    stream = torch.cuda.current_stream()
    return (lambda: launcher.launch(grid, args, stream)), compiled.source


def reference_runner(impl: str, case: Case, A, B, C, sms: int) -> Callable[[], Any]:
    if impl == "torch":
        return lambda: torch.matmul(A, B, out=C)
    mode, _, persistent = impl.removeprefix("triton-").partition("-")
    return lambda: tr.matmul(A, B, C, mode, case.persistent or bool(persistent), sms)


def sweep_case(case: Case, timer: CudaTimer, sms: int, variants: list[str]) -> list[dict[str, Any]]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(case.M, case.K, device="cuda", generator=gen).to(case.dtype)
    B = torch.randn(case.K, case.N, device="cuda", generator=gen).to(case.dtype)
    C = torch.empty(case.M, case.N, device="cuda", dtype=case.dtype)
    ref = A.double() @ B.double()
    names = [f"tilecraft:{v}" for v in variants] + ["triton-ptr", "triton-desc", "triton-desc-persistent", "torch"]
    records, runners = [], {}
    for name in names:
        rec: dict[str, Any] = {"case": case.label, "key": case.key, "impl": name}
        records.append(rec)
        try:
            if name.startswith("tilecraft:"):
                run, source = tilecraft_runner(case, A, B, C, sms, VARIANTS[name.partition(":")[2]])
                rec["grid_loop"] = "for block in tl.range(" in source
                rec["descriptors"] = "make_tensor_descriptor" in source
            else:
                run = reference_runner(name, case, A, B, C, sms)
            C.fill_(math.nan)
            run()
            torch.cuda.synchronize()
            rec["relerr"] = relative_error(C, ref)
            rec["ok"] = rec["relerr"] <= TOLERANCE[case.dtype]
            runners[name] = run
        except Exception as exc:  # one failing variant must not stop the sweep
            rec["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    timings = timer.compare(runners)
    for rec in records:
        if rec["impl"] in timings:
            rec.update(timings[rec["impl"]])
            rec["tflops"] = case.flops / (rec["ms"] * 1e-3) / 1e12
    torch_ms = records[-1].get("ms")
    plain = [r["ms"] for r in records if r["impl"] in ("triton-ptr", "triton-desc") and "ms" in r]
    for r in records:
        if "ms" in r:
            r["ratio_torch"] = torch_ms / r["ms"] if torch_ms else None
            r["ratio_plain_triton"] = min(plain) / r["ms"] if plain else None
        print(f"{case.key:14s} {r['impl']:26s} {r.get('tflops', float('nan')):7.1f} TFLOP/s  "
              f"x torch {r.get('ratio_torch') or float('nan'):6.3f}  x plain triton "
              f"{r.get('ratio_plain_triton') or float('nan'):6.3f}  relerr {r.get('relerr', float('nan')):.1e}"
              f"  {r.get('error', '')[:200]}", flush=True)
    del A, B, C, ref
    torch.cuda.empty_cache()
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=",".join(c.key for c in CASES))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--min-runs", type=int, default=100)
    p.add_argument("--rep-ms", type=float, default=50.0)
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--cap-s", type=float, default=5.0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    out = claim(args.out)
    torch.backends.cuda.matmul.allow_tf32 = True
    known = {c.key: c for c in CASES}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    timer = CudaTimer(args.min_runs, args.rep_ms, args.warmup_ms, args.cap_s)
    doc: dict[str, Any] = {"meta": meta(args, torch.device("cuda"), sms), "date": datetime.date.today().isoformat(),
                           "sweep": []}
    for key in args.cases.split(","):
        doc["sweep"] += sweep_case(known[key], timer, sms, args.variants.split(","))
        out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
