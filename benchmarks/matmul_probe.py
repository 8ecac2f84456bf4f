"""Where does the sample matmul lose to cuBLAS, and which Triton schedule closes the gap? (GPU
only; a probe for choosing what the compiler should generate, not a product benchmark.)

cuTile's MatMul sample as written (128x256x64 tiles for 16-bit inputs) at the side-by-side
sizes. Rows, each checked against torch (relative error < 1e-2) and then timed (median of
`triton.testing.do_bench`, L2 flushed), in one process so every ratio is torch / row:

- `torch`: `a @ b` (cuBLAS), the yardstick;
- `as generated`: the sample launched through tilecraft (`ct.launch`);
- the Triton source tilecraft generated for it, edited one way at a time (EDITS): tile-start
  clamps dropped; the grid loop not flattened into the K loop; the output tile stored in two
  halves (half the epilogue's shared memory, which a fourth pipeline stage can use);
  warp_specialize on the grid loop or the K loop; descriptors made on the host (passed as
  parameters) instead of by each program; one program per output tile;
- `plain triton`: `triton_reference.py`'s tensor-descriptor matmul, one program per tile and
  persistent (the yardstick kernels of ../shared/bench).

The split cases (`--only split`; not run by default) probe tile splitting at the small sizes
where it applies (backends/tile_splitting.py): `as generated` splits on its own there, and the
edited rows start from the split variant that launch ran (`split N: ...`, N its split count),
launched on the split grid: reloaded as generated, then at each num_warps x num_stages of
SWEEPS (pieces of 64x128 or 64x64 may want other settings than the whole tiles the heuristics
were tuned for); where the launch runs as stream-K (with TILECRAFT_STREAM_K=1: 1536^3 and
3072^3; backends/stream_k.py), the sample launched as stream-K on G programs (one per tile: no
tile cut), on the SM count (as chosen) and on 2G (every tile cut in two), and the stream-K
kernel's source on G programs edited (STREAM_K_EDITS); where it does neither, the whole-tile
kernel (`whole tiles: ...`); `unsplit`: the sample on a backend with tile splitting and stream-K
off. The fp32 cases (`--only fp32`) sweep the sample's 32x32x32 tf32 kernel at the seed sizes TC2
and TC3 the same way.

    PYTHONPATH=$PWD python benchmarks/matmul_probe.py --out $OUT/matmul-probe.json
    PYTHONPATH=$PWD python benchmarks/matmul_probe.py --only 4000x --rounds 3 --out $OUT/x.json  # one case, repeated
    PYTHONPATH=$PWD python benchmarks/matmul_probe.py --only split --out $OUT/split-probe.json  # the split cases
    PYTHONPATH=$PWD python benchmarks/matmul_probe.py --only fp32 --out $OUT/fp32-probe.json  # TC2, TC3
"""

from __future__ import annotations

import argparse
import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
import triton

from _results import claim
from matmul import variant_backend
from probing import (Variant, check_and_time, config_label, host_descriptors, launcher, no_clamps, sub, summary,
                     variant_adder)

CASES = (("fp16 4096^3", torch.float16, (4096, 4096, 4096)),
         ("bf16 8192^3", torch.bfloat16, (8192, 8192, 8192)),
         ("bf16 4000x3000x2000", torch.bfloat16, (4000, 3000, 2000)))
SPLIT_CASES = (*((f"split fp16 {s}^3", torch.float16, (s, s, s)) for s in (768, 1024, 512, 1536, 3072)),
               ("split fp16 1000x500x700", torch.float16, (1000, 500, 700)))
FP32_CASES = (("fp32 TC2 512x512x768", torch.float32, (512, 512, 768)),
              ("fp32 TC3 1000x500x700", torch.float32, (1000, 500, 700)))
TILES = {torch.float16: (128, 256, 64), torch.bfloat16: (128, 256, 64), torch.float32: (32, 32, 32)}
"""The sample's tiles per input dtype (as the matmul benchmark launches it)."""
SWEEPS = {"split": ((4, 8), (3, 4, 5, 6, 7)), "fp32": ((1, 2, 4), (2, 3, 4, 5, 6))}
"""num_warps x num_stages swept per kind of case."""
BUDGET_S = 300.0  # rows not started by then are skipped


def _grid_loop(source: str, extra: str) -> str:
    """The persistent grid loop's `tl.range(...)` with `extra` appended to its arguments."""
    return sub(r"(for block in tl\.range\([^\n]*?)(\):)", lambda m: m[1] + extra + m[2], source)


def not_flattened(source: str) -> str:
    return sub(r"(for block in tl\.range\([^\n]*?), flatten=True\)", r"\1)", source)


def _k_loop(source: str, change: Callable[[str], str]) -> str:
    return sub(r"(for \w+ in tl\.range\()([^\n]*num_stages=[^\n]*)(\):)", lambda m: m[1] + change(m[2]) + m[3], source)


def k_stages(source: str, stages: int) -> str:
    return _k_loop(source, lambda a: re.sub(r"num_stages=\d+", f"num_stages={stages}", a))


def epilogue_halves(source: str) -> str:
    """The output tile stored as two [BM, BN/2] halves through a second descriptor."""
    store = re.search(r"( +)(\w+)_desc\.store\(\[(\w+), (\w+)\], (\w+)\)", source)
    if store is None:
        raise ValueError("edit did not apply: no descriptor store")
    ind, name, row, col, val = store.groups()
    desc = re.search(rf"( +){name}_desc = tl\.make_tensor_descriptor\((.*)block_shape=\[(\d+), (\d+)\](.*)\n", source)
    bm, half = int(desc[3]), int(desc[4]) // 2
    halves = f"{desc[1]}{name}_half = tl.make_tensor_descriptor({desc[2]}block_shape=[{bm}, {half}]{desc[5]}\n"
    split = (f"{ind}{val}_lo, {val}_hi = tl.split(tl.permute(tl.reshape({val}, [{bm}, 2, {half}]), [0, 2, 1]))\n"
             f"{ind}{name}_half.store([{row}, {col}], {val}_lo)\n"
             f"{ind}{name}_half.store([{row}, {col} + {half}], {val}_hi)")
    return source.replace(desc[0], desc[0] + halves).replace(store[0], split)


EDITS: dict[str, Callable[[str], str]] = {
    "no clamps": no_clamps,
    "grid loop not flattened": not_flattened,
    "epilogue halves": epilogue_halves,
    "grid loop warp_specialize": lambda s: _grid_loop(s, ", warp_specialize=True"),
    "K loop warp_specialize": lambda s: _k_loop(s, lambda a: a + ", warp_specialize=True"),
}


def reloaded(kernel: Any) -> tuple[list[Variant], Callable[..., None]]:
    """The variants of `kernel`, so far its source as generated, and their `variant_adder`."""
    out = [Variant("reloaded (control)", config_label(kernel.source, kernel._options), kernel.source,
                   kernel._options, kernel)]
    return out, variant_adder(out)


def variants(kernel: Any) -> list[Variant]:
    src, opts = kernel.source, kernel._options
    out, add = reloaded(kernel)
    for name, edit in EDITS.items():
        add(name, lambda: edit(src), opts, kernel)
    add("host descriptors", lambda: host_descriptors(src, kernel.lowered.name), opts, kernel)
    four = dict(opts, num_stages=4)
    add("epilogue halves, 4 stages", lambda: k_stages(epilogue_halves(src), 4), four, kernel)
    add("epilogue halves, 4 stages, no clamps", lambda: no_clamps(k_stages(epilogue_halves(src), 4)), four, kernel)
    small = kernel.small_grid_kernel()
    if small is not None:
        add("one program per tile", lambda: small.source, small._options, small)
        add("one program per tile, host descriptors", lambda: host_descriptors(small.source, small.lowered.name),
            small._options, small)
        add("one program per tile, epilogue halves, 4 stages",
            lambda: k_stages(epilogue_halves(small.source), 4), dict(small._options, num_stages=4), small)
    return out


def sweep_variants(kernel: Any, warps_list: tuple[int, ...], stages_list: tuple[int, ...]) -> list[Variant]:
    """A kernel (a TritonKernel) as generated, then at each num_warps x num_stages."""
    out, add = reloaded(kernel)
    for warps in warps_list:
        for stages in stages_list:
            add("warps x stages", lambda: k_stages(kernel.source, stages),
                dict(kernel._options, num_warps=warps, num_stages=stages), kernel)
    return out


def _tile_to_c(source: str) -> tuple[str, str]:
    """(the stream-K source with a direct store of the K loop's tile to C after its workspace
    store, the workspace store's line): what only one program per tile may do."""
    row = re.search(r"A_start0 = tl\.where\(A_inside0, (\w+) \* (\d+), A_shape0\)", source)
    col = re.search(r"B_start1 = tl\.where\(B_inside1, (\w+) \* (\d+), B_shape1\)", source)
    store = re.search(r"\n( +)tl\.store\(workspace_base \+ [^\n]*?, (\w+), mask=[^\n]*\n", source)
    if not (row and col and store):
        raise ValueError("edit did not apply: no tile coordinates or workspace store")
    ind, acc = store.group(1), store.group(2)
    direct = (f"{ind}tl.store(C + ({row[1]} * {row[2]} + tl.arange(0, {row[2]})[:, None]) * C_stride0 + "
              f"{col[1]} * {col[2]} + tl.arange(0, {col[2]})[None, :], {acc}.to(C.dtype.element_ty))\n")
    return source.replace(store[0], store[0] + direct, 1), store[0]


def _no_sum(source: str) -> str:
    """The tile's sum and epilogue never run (a condition false at run time)."""
    return sub(r"\n( +)if (\w+):(  # [^\n]*)\n( +)for row in", r"\n\1if \2 & (bidx < 0):\3\n\4for row in", source)


def k_loop_then_c(source: str) -> str:
    """The K loop's tile stored straight to C, no workspace store, no sum."""
    with_c, store = _tile_to_c(source)
    return _no_sum(with_c.replace(store, "\n", 1))


def workspace_then_c(source: str) -> str:
    """The workspace store kept, then the tile stored straight to C, no sum."""
    return _no_sum(_tile_to_c(source)[0])


STREAM_K_EDITS: dict[str, Callable[[str], str]] = {
    "K loop, tile to C (no workspace, no sum)": k_loop_then_c,
    "K loop, workspace store, tile to C (no sum)": workspace_then_c,
}
"""Edits of the stream-K kernel on one program per tile: what its workspace round trip and its
sliced sum cost."""


def newest(kernel: Any, unless: str | None) -> Any:
    """The compiled kernel of `kernel`'s newest variant not on the backend named `unless`."""
    return next(v.compiled for key, v in reversed(kernel.variants.items()) if key.backend != unless)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="run only the cases whose name contains this text (split cases too)")
    parser.add_argument("--rounds", type=int, default=1, help="measure every row this many times, in turn")
    args = parser.parse_args()
    out = claim(args.out)
    import cuda.tile as ct  # tilecraft, through the conformance shim
    import MatMul
    import triton_reference
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.stream_k import StreamKKernel
    from tilecraft.backends.tile_splitting import TileSplitKernel
    from tilecraft.backends.triton.compile import TritonKernel
    from tilecraft.backends.triton.launching import ensure_allocator

    start, tmp = time.perf_counter(), Path(tempfile.mkdtemp())
    doc: dict[str, Any] = {"tiles": {str(d).removeprefix("torch."): list(t) for d, t in TILES.items()},
                           "rows": [], "skipped": [], "torch": torch.__version__,
                           "triton": triton.__version__, "gpu": torch.cuda.get_device_name()}
    stream = torch.cuda.current_stream()
    every = CASES + SPLIT_CASES + FP32_CASES
    cases = CASES if args.only is None else [c for c in every if args.only in c[0]]
    unsplit = variant_backend("unsplit", tile_split=False, stream_k=False) if any(c in SPLIT_CASES for c in cases) else None
    for case, dt, (m, n, k) in cases:
        tm, tn, tk = TILES[dt]
        a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
        c = torch.empty(m, n, device="cuda", dtype=dt)
        ref = (a.float() @ b.float())
        flop = 2 * m * n * k
        grid = (math.ceil(m / tm) * math.ceil(n / tn), 1, 1)
        t_torch = triton.testing.do_bench(lambda: a @ b, rep=100, return_mode="median")

        def record(name: str, config: str, build: Callable[[], Callable[[], Any]]) -> None:
            if time.perf_counter() - start > BUDGET_S:
                doc["skipped"].append(f"{case} {name} {config}")
                return
            row = dict(case=case, variant=name, config=config, torch_ms=t_torch)
            row.update(check_and_time(build, c, ref, t_torch, flop))
            doc["rows"].append(row)
            print(f"{case:20s} {name:48s} {config:16s} {summary(row, 'torch')}", flush=True)
            out.write_json(doc)

        def sample(**options: Any) -> Callable[[], Callable[[], Any]]:
            return lambda: lambda: ct.launch(stream, grid, MatMul.matmul_kernel, (a, b, c, tm, tn, tk), **options)

        for _ in range(args.rounds):
            record("as generated", "", sample())
            compiled = newest(MatMul.matmul_kernel, unsplit)
            ensure_allocator()
            if case.startswith(("split", "fp32")):
                sweep = SWEEPS[case.split()[0]]
                tiles = wrapped_as(compiled, TileSplitKernel)
                count = None if tiles is None else tiles.count(grid, (a, b, c), False)
                streamed = wrapped_as(compiled, StreamKKernel)
                programs = None if streamed is None else streamed.programs(grid, (a, b, c), False)
                if programs is not None:  # stream-K on G (no tile cut), the SM count and 2G programs
                    for forced in dict.fromkeys((grid[0], programs, 2 * grid[0])):
                        record(f"stream-K on {forced} programs", "",
                               sample(backend=variant_backend(f"sk{forced}", stream_k=forced)))
                    kernel = streamed.variant()  # on G programs its counters stay unused: no zeroing
                    full = tuple(streamed.stream_args(grid, grid[0], (a, b, c), stream))
                    edited, add = reloaded(kernel)
                    for name, edit in STREAM_K_EDITS.items():
                        add(name, lambda edit=edit: edit(kernel.source), kernel._options, kernel)
                    for var in edited:
                        record(f"stream-K on {grid[0]}: {var.name}", var.config,
                               lambda var=var: launcher(var, (grid[0], 1, 1), full, tmp))
                elif count is None:  # not split: the kernel as compiled, at each warps x stages
                    for var in sweep_variants(wrapped_as(compiled, TritonKernel), *sweep):
                        record(f"whole tiles: {var.name}", var.config, lambda var=var: launcher(var, grid, (a, b, c), tmp))
                else:
                    for var in sweep_variants(tiles.variant(count), *sweep):
                        record(f"split {count}: {var.name}", var.config,
                               lambda var=var: launcher(var, (grid[0] * count, 1, 1), (a, b, c), tmp))
                if unsplit is not None:
                    record("unsplit", "", sample(backend=unsplit))
                continue
            for var in variants(compiled):
                record(var.name, var.config, lambda var=var: launcher(var, grid, (a, b, c), tmp))
            for persistent in (False, True):
                record(f"plain triton{' persistent' if persistent else ''}", "w8 s3",
                       lambda p=persistent: lambda: triton_reference.matmul(a, b, c, "desc", persistent=p))
    doc["seconds"] = round(time.perf_counter() - start, 1)
    out.write_json(doc)


if __name__ == "__main__":
    main()
