"""Does block merging pay, case by case and merge shape by shape? (GPU probe for the automatic
merge's rule; not a product benchmark.)

The MatMul sample with its 32x32x32 tiles, as written, under tilecraft with block merging off,
automatic (passes/block_merge.py, backends/tile_splitting.py `auto_merge`), and forced to each
shape of `SHAPES` (row tiles x column tiles of the user's; the row names the merges its launches
took as rows x cols / stride, [] where they did not merge; forced merges run unchecked where
every program lines up, as automatic ones do, else checked), next to the sample written with
128x32x32, 128x128x32 and 128x256x32 tiles (what merging 4 x 1, 4 x 4 and 4 x 8 should match) and torch.
With --no-grid-loop, the staged 4x4 and 4x8 merges and the written 128x256x32 kernel again with
one program per block (`TritonBackend(grid_loop=False)`): a flattened grid loop keeps the pipeline
buffers live through each tile's epilogue, whose 128 KiB float32 store staging then leaves the
staged 128x256x32 kernel 2 stages. With --staged, the automatic and forced rows again with the tf32 operands staged on every launch
(`TritonBackend(stage_operands=True)`: rounded and B transposed by a prologue, so merged tiles of
64 rows or more run wgmma); --cases picks cases by a substring of their names. Rows are
timed in turns (`ROUNDS` rounds, each row once per round: `do_bench`'s median, L2 flushed),
each checked against float64 first; a row's time is the median of its rounds and its ratio
torch's time over it.

    PYTHONPATH=$PWD:$PWD/.conformance/shim python3 benchmarks/merge_probe.py --out $OUT/merge.json
    ... merge_probe.py --staged --cases 2048x2048,TC3 --out $OUT/merge.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from _results import claim
from matmul import variant_backend
from power_probe import head

CASES = (("TC3 1000x500x700 fp32", (1000, 500, 700), "float32"),
         ("2048x1024x512 fp32", (2048, 1024, 512), "float32"),
         ("4000x1000x700 fp32", (4000, 1000, 700), "float32"),
         ("3000x1000x700 fp32", (3000, 1000, 700), "float32"),
         ("768x1024x1024 fp32", (768, 1024, 1024), "float32"),
         ("1024x1536x1024 fp32", (1024, 1536, 1024), "float32"),
         ("1280x1280x1280 fp32", (1280, 1280, 1280), "float32"),
         ("1536x1536x1536 fp32", (1536, 1536, 1536), "float32"),
         ("2048x2048x2048 fp32", (2048, 2048, 2048), "float32"),
         ("2000x1500x1000 fp32", (2000, 1500, 1000), "float32"),
         ("3000x3000x1000 fp32", (3000, 3000, 1000), "float32"),
         ("4096x4096x4096 fp32", (4096, 4096, 4096), "float32"),
         ("8192x8192x8192 fp32", (8192, 8192, 8192), "float32"))
SHAPES = ((4, 1), (2, 2), (4, 2), (2, 4), (4, 4), (4, 8), (2, 8))
WRITTEN = ((128, 32, 32), (128, 128, 32), (128, 256, 32))
TILE, ROUNDS = 32, 3


def _merged(kernel) -> list[str]:
    """The merges `kernel`'s launches ran with, as rows x cols / stride, then g and the merged row
tiles per group where programs take them in groups (`Merge.band`), h and the merged programs
where the blocks after them run on their own (`Merge.head`), p and the blocks of a group where spans
restart at every group (`Merge.period`), u where unchecked, s where the launch
staged its operands (none: not merged)."""
    from tilecraft.backends.base import kernels_within
    from tilecraft.backends.tile_splitting import BlockMergeKernel
    from tilecraft.backends.triton.operand_staging import StagedKernel
    found = []
    for v in kernel.variants.values():
        within = kernels_within(v.compiled)
        staged = {id(k) for s in within if isinstance(s, StagedKernel) for c in s.compiled_variants
                  for k in kernels_within(c)}
        found += [(k, " s" if id(k) in staged else "") for k in within if isinstance(k, BlockMergeKernel)]
    return sorted({f"{m.rows}x{m.cols}/{m.stride}{f' g{m.group}' if m.band else ''}{f' p{m.period}' if m.period else ''}"
                   f"{f' h{m.head}' if m.head else ''}"
                   f"{'' if m.checked else ' u'}{staged}"
                   for f, staged in found for m in f._variants})


def _no_groups(*args, **kwargs) -> None:
    """`MergeFinder._in_groups` for the --heads rows: none (a plain function: a MagicMock made
    per launch cost more host time than the kernels take, merge-probe-h200-2026-12-03-b.json)."""
    return None


def _launches(a, b, c, staged: bool, heads: bool, no_loop: bool = False) -> list[tuple[str, Callable[[], None]]]:
    """(row, launch) per tilecraft row (`staged`: the staged rows too; `heads`: rows whose
    launches may not merge in groups, `Merge.period`; `no_loop`: staged 4 x 4 and 4 x 8 and the
    written 128x256x32 again with one program per block, no grid loop); compiles each kernel."""
    from unittest import mock
    import torch
    import tilecraft as ct
    from tilecraft.backends.tile_splitting import MergeFinder
    from tilecraft.library.matmul import matmul_kernel
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(a.shape[0], TILE) * ct.cdiv(b.shape[1], TILE), 1, 1)
    args = (a, b, c, TILE, TILE, TILE)
    backends = [("merging off", variant_backend("nomerge", block_merge=False)), ("automatic", None)]
    backends += [(f"merged {r}x{k}", variant_backend(f"merge{r}x{k}", block_merge=(r, k))) for r, k in SHAPES]
    if staged:
        backends += [("staged automatic", variant_backend("staged", stage_operands=True))]
        backends += [(f"staged merged {r}x{k}", variant_backend(f"staged-merge{r}x{k}", block_merge=(r, k),
                                                                stage_operands=True)) for r, k in SHAPES]
    if heads:
        backends += [(f"no groups {name}", backend) for name, backend in backends if "merged 4x" in name]
    if no_loop:
        backends += [(f"staged merged {r}x{k}, no grid loop", variant_backend(
            f"staged-merge{r}x{k}-noloop", block_merge=(r, k), stage_operands=True, grid_loop=False))
            for r, k in ((4, 4), (4, 8))]
    rows = []
    for name, backend in backends:
        kernel = ct.kernel(matmul_kernel.fn)

        def launch(kernel=kernel, backend=backend, no_groups="no groups" in name) -> None:
            if not no_groups:
                return ct.launch(stream, grid, kernel, args, backend=backend)
            with mock.patch.object(MergeFinder, "_in_groups", new=_no_groups):  # each launch picks again
                ct.launch(stream, grid, kernel, args, backend=backend)
        launch()  # compiles
        rows.append((f"{name} {_merged(kernel)}", launch))
    for tm, tn, tk in WRITTEN:
        written = (ct.cdiv(a.shape[0], tm) * ct.cdiv(b.shape[1], tn), 1, 1)
        rows.append((f"written {tm}x{tn}x{tk}", lambda written=written, tiles=(tm, tn, tk): ct.launch(
            stream, written, matmul_kernel, (a, b, c, *tiles))))
    if no_loop:
        written, no_grid_loop = (ct.cdiv(a.shape[0], 128) * ct.cdiv(b.shape[1], 256), 1, 1), variant_backend(
            "noloop", grid_loop=False)
        rows.append(("written 128x256x32, no grid loop", lambda: ct.launch(
            stream, written, matmul_kernel, (a, b, c, 128, 256, 32), backend=no_grid_loop)))
    return rows


def timed_in_turns(case: str, rows: list[tuple[str, Callable[[], None]]], out: Any, ref: Any,
                   rounds: int = ROUNDS, unchecked: str | None = None) -> dict[str, Any]:
    """One case's result: each row (name, launch writing `out`) checked first against `ref`
    (float64) on `out` poisoned with NaN, then the rows within 1e-2 timed in turns (`rounds`
    rounds, each row once per round: `do_bench`'s median, L2 flushed); a row's time is the median
    of its rounds and its ratio the "torch" row's time over it. Rows named starting with
    `unchecked` do not write `out` (a part of a launch): they are timed unchecked."""
    import torch
    import triton
    errors = {}
    for name, fn in rows:
        if unchecked and name.startswith(unchecked):
            errors[name] = 0.0
            continue
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        errors[name] = float((out.double() - ref).norm() / ref.norm())
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            if errors[name] < 1e-2:
                times[name].append(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))
    t_torch = statistics.median(times["torch"])
    entry: dict[str, Any] = {"case": case, "rows": []}
    for name, _ in rows:
        row: dict[str, Any] = {"row": name, "rel_err": errors[name]}
        if times[name]:
            ms = statistics.median(times[name])
            row.update(ms=ms, rounds_ms=times[name], ratio=t_torch / ms)
            print(f"{case:24s} {name:30s} {ms * 1e3:9.2f} us  {t_torch / ms:.3f}x torch", flush=True)
        else:
            print(f"{case:24s} {name:30s} error {errors[name]:.1e}", flush=True)
        entry["rows"].append(row)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--staged", action="store_true", help="the staged rows too")
    parser.add_argument("--cases", default="", help="comma-separated substrings of the case names to run")
    parser.add_argument("--heads", action="store_true", help="the forced 4 x C rows again, not merged in groups")
    parser.add_argument("--no-grid-loop", action="store_true",
                        help="staged 4x4, 4x8 and written 128x256x32 rows with one program per block too")
    opts = parser.parse_args(argv)
    out = claim(opts.out)
    picked = [c for c in opts.cases.split(",") if c]
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    doc = head()
    doc["tf32_staging"] = os.environ.get("TILECRAFT_TF32_STAGING", "")  # the knob as set for this run
    doc["cases"] = []
    for case, (m, n, k), dtype in CASES:
        if picked and not any(p in case for p in picked):
            continue
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
        ref = a.double() @ b.double()
        c = torch.empty(m, n, device="cuda", dtype=a.dtype)
        rows = [("torch", lambda: torch.matmul(a, b, out=c))]
        rows += _launches(a, b, c, opts.staged, opts.heads, opts.no_grid_loop)
        doc["cases"].append(timed_in_turns(case, rows, c, ref))
        out.write_json(doc)  # each case as it ends: a run cut short keeps the cases it finished
    return 0


if __name__ == "__main__":
    sys.exit(main())
