"""Size sweep: tilecraft against torch from small problems to large, for the plot of
docs/performance.md (ratio to torch vs problem size; benchmarks/plot_sweep.py draws it).

  matmul   the cuTile MatMul sample (tilecraft.library.matmul_kernel, the sample's tiles),
           launched as a cuTile user launches it, vs torch.matmul (cuBLAS): square sizes 256 to
           8192 and three odd shapes in fp16 and bf16, and fp32 (tf32 on both sides) at four sizes and three odd shapes
  rowwise  the softmax and LayerNorm samples of examples/ vs torch (and the Triton tutorial's
           softmax) on 8192 fp32 rows of 256 to 32768 columns, memory bound

Each case is checked against a float64 reference on a NaN-poisoned output before it is timed
(and a matmul once more after), with the tolerances of benchmarks/matmul.py and rowwise.py;
timing is theirs too (CudaTimer: medians of CUDA events, L2 flushed, implementations
interleaved), with fewer runs so the sweep fits one device call. Cases left when --budget-s has
passed are skipped and listed. ratio_torch (matmul) and x_torch (rowwise) = torch ms / tilecraft
ms: above 1, faster than torch.

    PYTHONPATH=$PWD python benchmarks/size_sweep.py --out $OUT/size-sweep.json [--budget-s 150]
    PYTHONPATH=$PWD python benchmarks/size_sweep.py --split-k auto,2,4,8 --out $OUT/split-k.json
    PYTHONPATH=$PWD python benchmarks/size_sweep.py --cpu-smoke --out /tmp/sweep.json
    python benchmarks/plot_sweep.py FILE.json            # the PNG: CPU, needs matplotlib

--split-k COUNTS times only the matmul sample, fp16 squares 512 to 2048 (the sizes where the
split may pay: its grid of 128x256 tiles fills at most a few waves), fp16 shapes of few output
tiles and long K loops (128x256x16384 to 1024x1024x16384, 256x512x65536), the small fp32 cases
(TC2, TC3, 1024^3: 32x32x32 tiles, whose blocks walk their K loops at the latency of each step)
and two fp32 ones of long K loops (256x256x16384, 512x512x16384: their launches stage the
operands and split the staged kernel), unsplit and with its K loop split (passes/split_k.py)
next to torch, interleaved: one implementation `tilecraft-s<N>` per count N of COUNTS (whole
tiles), forced on a backend of its own, where `auto` is the split
`backends.splitting.auto_split` gives the grid on this GPU, `tilecraft-p<P>s<N>` where it cuts
the tiles into P pieces (none where it declines: a grid over half the SMs).

--tiles TILES adds the sample run with other tiles, as implementations `tilecraft@TMxTNxTK`:
how the same kernel fares with the tiles a compiler could choose for it.

--tile-split COUNTS adds the sample with its tiles split N ways on every launch, as
`tilecraft-t<N>` per count N (backends/tile_splitting.py, forced; their K loops split where a
launch of so many blocks would split them, backends/splitting.py): how the pieces fare where the
launch's own model chose another count or none.

--unsplit adds the sample launched with tile splitting, split-K and stream-K off
(backends/tile_splitting.py, backends/splitting.py, backends/stream_k.py), as `tilecraft-unsplit`: what dealing the
work out to more blocks gains where it applies (grids that fill few waves, or a last one poorly).

--cpu-smoke runs tiny cases once on the CPU interpreters (TRITON_INTERPRET=1, tilecraft on
TILECRAFT_BACKEND, default triton-interpret; no bf16: NumPy has none) and checks them; no timing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

if __name__ == "__main__" and "--cpu-smoke" in sys.argv:  # must precede `import triton`
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("TILECRAFT_BACKEND", "triton-interpret")

import torch

import rowwise  # benchmarks/ is sys.path[0] when this file is run
from _results import claim
from matmul import (DTYPE_NAMES, Case, CudaTimer, default_out, measure_case, meta, print_table, recorded_failure,
                    start_run, tiles_for, variant_backend)
from tilecraft import cdiv
from tilecraft.backends.splitting import Split, auto_split
from tilecraft.backends.tile_splitting import MIN_AUTO_DIM
from tilecraft.passes.tile_split import piece_counts

IMPLS = ("tilecraft", "torch")
HALF = (torch.float16, torch.bfloat16)
SQUARE = (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
ODD = ((1000, 500, 700), (4000, 3000, 2000), (3001, 3001, 3001))
TF32 = (512, 1024, 2048, 4096)
TF32_ODD = ((1000, 500, 700), (2000, 1500, 1000), (3000, 3000, 1000))
ROWS = 8192
ROW_LENGTHS = (256, 512, 1000, 1024, 2048, 4096, 5000, 8192, 16384, 32768)

SPLIT_SQUARE = (512, 1024, 1536, 2048)
SPLIT_LONG_K = ((128, 256, 16384), (256, 256, 16384), (384, 512, 16384), (512, 512, 16384), (1024, 1024, 16384),
                (256, 512, 65536))
SPLIT_TF32 = ((512, 512, 768), (1000, 500, 700), (1024, 1024, 1024), (256, 256, 16384), (512, 512, 16384))
SMOKE_MATMUL = ((64, 64, 64, torch.float16), (37, 29, 45, torch.float16), (40, 24, 56, torch.float32))
SMOKE_ROWS, SMOKE_ROW_LENGTHS = 3, (100, 256)


def matmul_case(m: int, n: int, k: int, dtype: torch.dtype) -> Case:
    label = f"{m}x{n}x{k} {DTYPE_NAMES[dtype]}"
    return Case(label.replace(" ", "-"), label, m, n, k, dtype)


def matmul_cases(smoke: bool, split: bool = False) -> list[Case]:
    """fp16 and bf16 squares, then the odd shapes, then tf32; or the CPU smoke cases; `split`:
    the fp16 squares of SPLIT_SQUARE and long-K shapes of SPLIT_LONG_K (the fp16 smoke cases)."""
    if smoke:
        return [matmul_case(*shape) for shape in SMOKE_MATMUL if not split or shape[3] is torch.float16]
    if split:
        return ([matmul_case(s, s, s, torch.float16) for s in SPLIT_SQUARE]
                + [matmul_case(*shape, torch.float16) for shape in SPLIT_LONG_K]
                + [matmul_case(*shape, torch.float32) for shape in SPLIT_TF32])
    return ([matmul_case(s, s, s, d) for d in HALF for s in SQUARE]
            + [matmul_case(*shape, d) for d in HALF for shape in ODD]
            + [matmul_case(s, s, s, torch.float32) for s in TF32]
            + [matmul_case(*shape, torch.float32) for shape in TF32_ODD])


def rowwise_cases(smoke: bool) -> list[tuple[str, int, int]]:
    """(kind, rows, columns) for every row-wise kernel and row length."""
    rows, lengths = (SMOKE_ROWS, SMOKE_ROW_LENGTHS) if smoke else (ROWS, ROW_LENGTHS)
    return [(kind, rows, cols) for kind in rowwise.KINDS for cols in lengths]


def split_impls(case: Case, sms: int, counts: list[str]) -> tuple[Split | None, dict[str, Split]]:
    """(how launches on `case`'s grid split on their own (pieces, splits), or None; each split
    implementation's (pieces, splits)) for the --split-k `counts` ("auto" or a number: whole tiles)."""
    tm, tn, _ = tiles_for(case.dtype)
    auto = auto_split((cdiv(case.M, tm) * cdiv(case.N, tn), 1, 1), sms, case.K,
                      (1, *piece_counts((tm, tn), MIN_AUTO_DIM)), tm * tn)
    chosen = [auto if c == "auto" else (1, int(c)) for c in counts]
    return auto, {split_name(*s): s for s in chosen if s is not None}


def split_name(pieces: int, splits: int) -> str:
    """The implementation of the K loop split `splits` ways, of tiles cut into `pieces`."""
    return f"tilecraft-s{splits}" if pieces == 1 else f"tilecraft-p{pieces}s{splits}"


def sweep_matmul(case: Case, timer: CudaTimer | None, device: torch.device, sms: int,
                 seed: int, counts: list[str] | None = None, tiles: Sequence[str] = (),
                 unsplit: bool = False, tile_counts: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The records of matmul.measure_case for tilecraft and torch (and split-K variants, see
    --split-k), with the FLOPs and whether the shape is one of the odd ones (plot_sweep.py draws
    those apart from the squares' line)."""
    auto, splits = split_impls(case, sms, counts) if counts else (None, {})
    backends = {name: variant_backend(name.removeprefix("tilecraft-"), split_k=s, tile_split=p if p > 1 else True)
                for name, (p, s) in splits.items()}
    if unsplit:
        backends["tilecraft-unsplit"] = variant_backend("unsplit", tile_split=False, stream_k=False, split_k=False)
    for n in tile_counts:
        backends[f"tilecraft-t{n}"] = variant_backend(f"tiles{n}", tile_split=n, stream_k=False)
    tiled = tuple(f"tilecraft@{t}" for t in tiles)
    records = measure_case(case, device, timer, sms, seed, IMPLS + tiled + tuple(backends), backends)
    odd = (case.M, case.N, case.K) not in [(s, s, s) for s in SQUARE]
    for rec in records:
        rec.update(flops=case.flops, odd_shape=odd)
        if counts:
            rec.update(auto_split=auto, split=splits.get(rec["impl"]))
    print_table(records, header=False)
    return records


def sweep_rowwise(kind: str, rows: int, cols: int, timer: CudaTimer | None) -> list[dict[str, Any]]:
    """The records of rowwise.measure, or one error record if the case could not run."""
    failed: dict[str, Any] = {"kind": kind, "case": f"{rows}x{cols} fp32", "impl": "tilecraft", "rows": rows,
                              "cols": cols, "ok": False}
    with recorded_failure(failed):
        records = rowwise.measure(kind, rows, cols, timer)
        for rec in records:
            print(rowwise.format_row(rec), flush=True)
        return records
    print(f"{kind:9s} {failed['case']:17s} ERROR {failed['error'].splitlines()[0][:100]}", flush=True)
    return [failed]


def split_counts(text: str) -> list[str]:
    """--split-k's value: "auto" or split counts >= 1, comma-separated."""
    counts = text.split(",")
    if not all(c == "auto" or (c.isdigit() and int(c) >= 1) for c in counts):
        raise argparse.ArgumentTypeError(f"expected 'auto' or split counts >= 1, comma-separated: {text!r}")
    return counts


def tile_list(text: str) -> list[str]:
    """--tiles' value: TMxTNxTK tile shapes, comma-separated."""
    shapes = text.split(",")
    if not all(re.fullmatch(r"\d+x\d+x\d+", s) for s in shapes):
        raise argparse.ArgumentTypeError(f"expected TMxTNxTK tile shapes, comma-separated: {text!r}")
    return shapes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/size-sweep-<date>.json)")
    p.add_argument("--only", choices=("matmul", "rowwise"), help="one of the two sweeps")
    p.add_argument("--split-k", metavar="COUNTS", type=split_counts,
                   help="the split-K comparison instead (see above): comma-separated split counts or 'auto'")
    p.add_argument("--tiles", metavar="TILES", type=tile_list, default=[],
                   help="also run the sample with these tiles (TMxTNxTK, comma-separated) as tilecraft@TILES")
    p.add_argument("--tile-split", metavar="COUNTS", type=lambda t: [int(c) for c in t.split(",")], default=[],
                   help="also run the sample with its tiles split N ways (comma-separated counts) as tilecraft-tN")
    p.add_argument("--unsplit", action="store_true",
                   help="also run the sample with tile splitting, split-K and stream-K off, as tilecraft-unsplit")
    p.add_argument("--cases", metavar="TEXT", type=lambda t: t.split(","), default=[],
                   help="only the cases whose label contains one of these (comma-separated), e.g. 8192x,1000x500")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny cases on CPU interpreters, no timing")
    p.add_argument("--budget-s", type=float, default=150.0, help="skip the cases left after this")
    p.add_argument("--min-runs", type=int, default=50, help="timed runs per measurement, at least")
    p.add_argument("--rep-ms", type=float, default=50.0, help="aim for this much timed work (more runs)")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--cap-s", type=float, default=2.0, help="at most this long per measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stage-tf32-from", metavar="ELEMENTS", type=int,
                   help="stage tf32 operands of 64-row MMAs from this many elements (operand_staging.STAGE_MIN_ELEMENTS; "
                        "a huge number: never)")
    return p.parse_args(argv)


def job_label(sweep: str, case: Any) -> str:
    """A job's label (what --cases matches and "skipped" lists): a matmul Case's, or
    "<kind> <rows>x<cols>" for a rowwise case."""
    return case.label if sweep == "matmul" else "{} {}x{}".format(*case)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = claim(args.out or default_out("size-sweep", args.cpu_smoke))
    if args.stage_tf32_from is not None:
        from tilecraft.backends.triton import operand_staging
        operand_staging.STAGE_MIN_ELEMENTS = args.stage_tf32_from
    device, sms, timer = start_run(args)
    doc: dict[str, Any] = {"meta": {**meta(args, device, sms), "budget_s": args.budget_s, "seconds": 0.0},
                           "matmul": [], "rowwise": [], "skipped": []}
    print(f"{doc['meta']['device']}  tilecraft backend {doc['meta']['tilecraft_backend']}  "
          f"budget {args.budget_s:.0f} s", flush=True)
    doc["meta"]["split_k"] = args.split_k
    doc["meta"]["stage_tf32_from"] = args.stage_tf32_from
    split = bool(args.split_k)
    jobs = [] if args.only == "rowwise" else [("matmul", case) for case in matmul_cases(args.cpu_smoke, split)]
    jobs += [] if args.only == "matmul" or split else [("rowwise", case) for case in rowwise_cases(args.cpu_smoke)]
    if args.cases:
        jobs = [(sweep, case) for sweep, case in jobs if any(part in job_label(sweep, case) for part in args.cases)]
    if jobs and jobs[0][0] == "matmul":
        print_table([])  # the matmul header
    started = time.perf_counter()
    for i, (sweep, case) in enumerate(jobs):
        if time.perf_counter() - started > args.budget_s:
            doc["skipped"].append(job_label(sweep, case))
            continue
        if sweep == "matmul":
            doc["matmul"] += sweep_matmul(case, timer, device, sms, args.seed + i, args.split_k, args.tiles,
                                           args.unsplit, args.tile_split)
        else:
            doc["rowwise"] += sweep_rowwise(*case, timer)
        doc["meta"]["seconds"] = round(time.perf_counter() - started, 1)
        out.write_json(doc)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if doc["skipped"]:
        print(f"skipped (over --budget-s): {', '.join(doc['skipped'])}")
    bad = [r for r in doc["matmul"] + doc["rowwise"] if "error" in r or not r.get("ok")]
    print(f"{doc['meta']['seconds']} s, {len(bad)} failed or over tolerance; results: {out}")
    return 1 if bad or doc["skipped"] else 0


if __name__ == "__main__":
    sys.exit(main())
