"""Why is tilecraft's TC2 (512x512x768 fp32, 32x32x32 tiles) kernel slower than the hand-written
Triton one although its SASS is shorter? Times hand edits of the generated source side by side
(interleaved rounds) with the plain Triton kernel (GPU only; an exploration, results recorded in
benchmarks/results/probe-tc2-*.json).

    PYTHONPATH=$PWD python benchmarks/probe_tc2.py --out probe.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import torch

import triton_reference as tr  # benchmarks/ is sys.path[0] when this file is run
from matmul import CASES, CudaTimer, relative_error
from tilecraft.backends.base import BackendKind
from tilecraft.backends.triton import TritonBackend, TritonKernel
from tilecraft.library import matmul_kernel
from tilecraft.runtime.backends import convert_arrays

# name -> list of (old, new) source substitutions applied in order
EDITS: dict[str, list[tuple[str, str]]] = {
    "generated": [],
    "range-without-stages": [("tl.range(0, t_16, 1, num_stages=3)", "range(0, t_16, 1)")],
    "plain-divisions": [("_tc_mod_int(bidx, t_10)", "bidx % t_10"), ("_tc_floordiv_int(t_13, t_10)", "t_13 // t_10")],
    "k-masks": [
        ("tl.arange(0, 32)[None, :]))  # matmul.py:47",
         "tl.arange(0, 32)[None, :]), mask=tl.arange(0, 32)[None, :] < A_shape1 - A_start1, other=0.0)  # matmul.py:47"),
        ("B_tile = tl.load(B_base + (tl.arange(0, 32)[:, None] * B_stride0 + tl.arange(0, 32)[None, :]))",
         "B_tile = tl.load(B_base + (tl.arange(0, 32)[:, None] * B_stride0 + tl.arange(0, 32)[None, :]), "
         "mask=tl.arange(0, 32)[:, None] < B_shape0 - B_start0, other=0.0)")],
    "pointer-increments": [
        ("    acc = t_18  # matmul.py:46\n",
         "    acc = t_18  # matmul.py:46\n"
         "    a_ptrs = A + (t_12 * 32 + tl.arange(0, 32))[:, None] * A_stride0 + tl.arange(0, 32)[None, :]\n"
         "    b_ptrs = B + tl.arange(0, 32)[:, None] * B_stride0 + (t_14 * 32 + tl.arange(0, 32))[None, :]\n"),
        ("A_tile = tl.load(A_base + (tl.arange(0, 32)[:, None] * A_stride0 + tl.arange(0, 32)[None, :]))",
         "A_tile = tl.load(a_ptrs)"),
        ("B_tile = tl.load(B_base + (tl.arange(0, 32)[:, None] * B_stride0 + tl.arange(0, 32)[None, :]))",
         "B_tile = tl.load(b_ptrs)"),
        ("        acc = acc_1  # matmul.py:46\n",
         "        acc = acc_1  # matmul.py:46\n        a_ptrs += 32\n        b_ptrs += 32 * B_stride0\n")],
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--case", default="tc2")
    args = p.parse_args(argv)
    case = next(c for c in CASES if c.key == args.case)
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(case.M, case.K, device="cuda", generator=gen)
    B = torch.randn(case.K, case.N, device="cuda", generator=gen)
    C = torch.empty(case.M, case.N, device="cuda")
    ref = A.double() @ B.double()
    specs, arrays, flat = matmul_kernel.describe((A, B, C, 32, 32, 32))
    fn = matmul_kernel.lower(specs, "sm_90")
    facts = iter(a.facts for a in arrays)
    base = TritonBackend(BackendKind.TRITON).compile(fn, [next(facts) if hasattr(q.type, "ndim") else None
                                                        for q in fn.params])
    kargs = convert_arrays(flat, BackendKind.TRITON)
    grid = (math.ceil(case.M / 32) * math.ceil(case.N / 32), 1, 1)
    runners, doc = {}, {"case": case.label, "results": []}
    for name, edits in EDITS.items():
        source = base.source
        for old, new in edits:
            assert old in source, (name, old)
            source = source.replace(old, new)
        kernel = TritonKernel(replace(base.lowered, source=source), interpret=False)
        C.fill_(math.nan)
        kernel.launch(grid, kargs, None)
        torch.cuda.synchronize()
        doc["results"].append({"variant": name, "relerr": relative_error(C, ref)})
        launcher = kernel.specialize(kargs)
        runners[name] = (lambda launcher=launcher: launcher.launch(grid, kargs, None))
    runners["triton-ptr"] = lambda: tr.matmul(A, B, C, "ptr")
    timings = CudaTimer(100, 100.0, 25.0, 5.0).compare(runners)
    for name, t in timings.items():
        row = {"variant": name, **t, "tflops": case.flops / (t["ms"] * 1e-3) / 1e12}
        doc["results"].append(row)
        print(f"{name:22s} {t['ms'] * 1e3:8.2f} us  {row['tflops']:6.1f} TFLOP/s", flush=True)
    args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
