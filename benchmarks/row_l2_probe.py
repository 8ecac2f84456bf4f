"""Why does the three-pass LayerNorm fall behind torch on wide rows? (GPU probe for the compiler's
choice; not a product benchmark.)

The sample (examples/layernorm.py) reads each row three times, one block per row. Where the rows
of the blocks running at once no longer fit in L2 (8192 fp32 columns: 32 KB a row, 16 or more
blocks per SM), the second and third reads come from DRAM. This times the sample next to the same
kernel written with a loop over rows (`rows_looped`: program p runs rows p, p + P, ...) launched
on P = 132 x k programs, which bounds the rows in flight; the sample as launches run it (bounded
to fewer blocks per SM where its rows would not stay in L2: backends/triton/occupancy.py) and
bounded to k blocks per SM whatever the row; and torch's `F.layer_norm`. Every
output is checked against float64 first; times are medians of `triton.testing.do_bench` (L2
flushed); ratios are torch's time over each.

`--prefetch` times, on rows of 64 and 128 KB, the sample as launches run it next to a LayerNorm
written directly in Triton (`_ln_persistent`: one program per SM looping over rows, each row one
load for its mean and variance, then normalized a chunk at a time, x read again from L2 beside
weight and bias; the chunks unrolled, as Triton pipelines innermost loops only, and their
loads in inline assembly, which Triton's pipeliner leaves alone, so that only the row's load is
prefetched) with Triton's pipeliner on and off (num_stages 2 copies the next row into shared memory
while the current one is normalized; 128 KB for a 128 KB row, so 1 program per SM), on 16 and
32 warps: does prefetching the next row cover the gap of rows too large to keep two per SM?

`--resident` times the sample as launches run it now (each row length as its resident-row
variant: passes/resident_rows.py) next to its three passes as compiled
(TILECRAFT_RESIDENT_ROWS=0, bounded as above) and the variant on 4 to 32 warps, fp32 and bf16,
from the issue's two shapes to 32768 columns.

    PYTHONPATH=$PWD python benchmarks/row_l2_probe.py [--resident | --prefetch] --out $OUT/row-l2.json
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from unittest import mock

from _results import claim

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "examples")]
import tilecraft as ct  # noqa: E402
from layernorm import layernorm, normalize_row  # noqa: E402

CASES = (("float32", 8192, 4096), ("float32", 8192, 8192), ("float32", 8192, 16384), ("float32", 4096, 32768))
RESIDENT_CASES = (("bfloat16", 8192, 4096), ("float32", 32768, 1024), *CASES, ("bfloat16", 8192, 16384),
                  ("bfloat16", 4096, 32768))
PREFETCH_CASES = (("float32", 8192, 32768), ("float32", 4096, 32768), ("float32", 8192, 16384),
                  ("bfloat16", 4096, 32768))
WARPS = (4, 8, 16, 32)
PER_SM = (1, 2, 4, 8, 16)
BOUNDS = (4, 6, 8)
TILE, EPS = 1024, 1e-5


@ct.kernel
def rows_looped(x, weight, bias, y, eps, TILE_N: ct.Constant[int]):
    """The sample's row inside a loop over the rows a program runs."""
    for row in range(ct.bid(0), x.shape[0], ct.num_blocks(0)):
        normalize_row(x, weight, bias, y, eps, row, TILE_N)


def _ln_persistent_kernel():
    """The plain-Triton persistent LayerNorm of --prefetch (built on first use: Triton imported late)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _plain_load(p):
        """p's elements as float32, through ld.global in inline assembly, which Triton's pipeliner
        does not prefetch (it turns every tl.load of a pipelined loop into a copy to shared memory)."""
        if p.dtype.element_ty == tl.float32:
            return tl.inline_asm_elementwise("ld.global.f32 $0, [$1];", "=r,l", [p], dtype=tl.float32,
                                             is_pure=False, pack=1)
        raw = tl.inline_asm_elementwise("ld.global.b16 $0, [$1];", "=h,l", [p], dtype=tl.int16, is_pure=False, pack=1)
        return raw.to(tl.bfloat16, bitcast=True).to(tl.float32)

    @triton.jit
    def _ln_persistent(x_ptr, w_ptr, b_ptr, y_ptr, M, eps, N: tl.constexpr, STAGES: tl.constexpr,
                       CHUNK: tl.constexpr):
        cols = tl.arange(0, N)
        for row in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=STAGES):
            start = row.to(tl.int64) * N
            x = tl.load(x_ptr + start + cols).to(tl.float32)  # the whole row: mean and variance
            mean = tl.sum(x, 0) / N
            d = x - mean
            rstd = 1.0 / tl.sqrt(tl.sum(d * d, 0) / N + eps)
            for c in tl.static_range(0, N, CHUNK):  # x again (from L2), weight and bias a chunk at a time
                at = c + tl.arange(0, CHUNK)
                xc = _plain_load(x_ptr + start + at)
                wc = _plain_load(w_ptr + at)
                bc = _plain_load(b_ptr + at)
                tl.store(y_ptr + start + at, ((xc - mean) * rstd * wc + bc).to(y_ptr.dtype.element_ty))
    return _ln_persistent


def _first_launch_with(patch, stream, rows: int, args: tuple):
    """A launch of the sample (a kernel object of its own: its own variants and specialized
    launcher) whose first launch, which compiles it (and its variant for this row length) and
    makes the specialized launcher, runs inside `patch()` (a context manager)."""
    kernel = ct.kernel(layernorm.fn)

    def run():
        if not kernel.fast:
            with patch():
                ct.launch(stream, (rows,), kernel, args)
        ct.launch(stream, (rows,), kernel, args)
        return args[3]
    return run


def _bounded(blocks: int):
    """Blocks bounded to `blocks` per SM whatever the rows' size (backends/triton/occupancy.py)."""
    from tilecraft.backends.triton import occupancy
    return mock.patch.object(occupancy, "blocks_bound", lambda *_: blocks)


def _three_passes():
    """The kernel as compiled: no resident-row variants."""
    return mock.patch.dict(os.environ, {"TILECRAFT_RESIDENT_ROWS": "0"})


def _warps(warps: int):
    """Resident variants on `warps` warps."""
    import tilecraft.backends.triton as backend
    return mock.patch.object(backend, "resident_warps", lambda held: warps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--resident", action="store_true", help="resident rows against three passes")
    parser.add_argument("--prefetch", action="store_true", help="persistent Triton rows with the next one prefetched")
    opts = parser.parse_args(argv)
    out = claim(opts.out)
    import torch
    import triton

    from power_probe import head
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream()
    doc = head()
    doc["cases"] = []
    persistent = _ln_persistent_kernel() if opts.prefetch else None
    for dtype, rows, cols in RESIDENT_CASES if opts.resident else PREFETCH_CASES if opts.prefetch else CASES:
        gen = torch.Generator(device="cuda").manual_seed(0)
        kind = getattr(torch, dtype)
        x = (torch.randn(rows, cols, device="cuda", generator=gen) * 3 + 1).to(kind)
        w, b = (torch.randn(cols, device="cuda", generator=gen).to(kind) for _ in range(2))
        y = torch.empty_like(x)
        ref = torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), EPS)
        args = (x, w, b, y, EPS, TILE)
        runs = [("torch", lambda: torch.nn.functional.layer_norm(x, (cols,), w, b, EPS)),
                ("sample, a block per row", lambda: ct.launch(stream, (rows,), layernorm, args) or y)]
        if opts.prefetch:
            def run_persistent(warps: int, stages: int):
                persistent[(sms,)](x, w, b, y, rows, EPS, N=cols, STAGES=stages, CHUNK=TILE, num_warps=warps)
                return y
            runs += [(f"triton persistent, {warps} warps, {stages} stage{'s' * (stages > 1)}",
                      lambda warps=warps, stages=stages: run_persistent(warps, stages))
                     for warps in (16, 32) for stages in (1, 2)]
            runs += [("looped, 1 per SM", lambda: ct.launch(stream, (sms,), rows_looped, args) or y)]
        elif opts.resident:
            runs += [("sample, three passes", _first_launch_with(_three_passes, stream, rows, args))]
            runs += [(f"resident, {k} warps", _first_launch_with(lambda k=k: _warps(k), stream, rows, args))
                     for k in WARPS]
        else:
            runs += [(f"looped, {k} per SM", lambda k=k: ct.launch(stream, (sms * k,), rows_looped, args) or y)
                     for k in PER_SM]
            runs += [(f"sample, bounded to {k} per SM", _first_launch_with(lambda k=k: _bounded(k), stream, rows, args))
                     for k in BOUNDS]
        tolerance = 1e-5 if dtype == "float32" else 1e-2
        entry = {"case": f"{'fp32' if dtype == 'float32' else 'bf16'} {rows}x{cols}", "rows": []}
        t_torch = None
        for name, fn in runs:
            y.fill_(float("nan"))
            got = fn()
            torch.cuda.synchronize()
            err = float((got.double() - ref).norm() / ref.norm())
            ms = triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") if err < tolerance else None
            t_torch = ms if name == "torch" else t_torch
            ratio = None if ms is None else t_torch / ms
            gbs = None if ms is None else 2 * x.numel() * x.element_size() / ms / 1e6
            entry["rows"].append({"row": name, "rel_err": err, "ms": ms, "ratio": ratio, "gb_s": gbs})
            print(f"{entry['case']:18s} {name:26s} err {err:.1e}  "
                  + ("" if ms is None else f"{ms * 1e3:8.1f} us {gbs:6.0f} GB/s {ratio:.2f}x torch"), flush=True)
        doc["cases"].append(entry)
        out.write_json(doc)  # each case as it ends
    return 0


if __name__ == "__main__":
    sys.exit(main())
