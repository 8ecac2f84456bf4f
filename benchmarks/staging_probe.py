"""Where a staged tf32 matmul launch spends its time: the prologues that round (and transpose)
the operands, or the staged kernel (GPU probe for issue 10's tf32 row; not a product benchmark).

For each case, the MatMul sample's kernel with each tile shape of TILES launched as users launch
it (prologues then kernel, `ct.launch`); for the first shape (a launch of the second merges its
blocks into tiles of the first) also its staged kernel alone on copies made once
(`StagedKernel.staged_kernel`) and each prologue alone (`operand_staging.stage_copy`); and
torch.matmul with tf32. The staged kernel's row says how it ran (`WarpSpecializedKernel`: the
Gluon variant or the Triton kernel). Outputs are checked against float64 on a NaN-poisoned buffer
first; rows are timed in turns (`merge_probe.timed_in_turns`).

    PYTHONPATH=$PWD python3 benchmarks/staging_probe.py --out $OUT/staging.json
    TILECRAFT_WARP_SPECIALIZE=0 ... staging_probe.py --out $OUT/staging-triton.json   # no Gluon variant
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _results import claim
from merge_probe import timed_in_turns
from power_probe import head

CASES = ((8192, 8192, 8192), (4096, 4096, 4096))
TILES = ((128, 256, 32), (32, 32, 32))


def _rows(a, b, c) -> list:
    """(row, launch writing c) per tile shape, as launched (each on a kernel object of its own:
    its variants are this case's); for the first tile shape also its staged kernel alone and the
    prologues (writing scratch, not c: unchecked, named `prologue`)."""
    import torch
    import tilecraft as ct
    from tilecraft.backends.base import kernels_within, wrapped_as
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton.operand_staging import StagedKernel, stage_copy
    from tilecraft.library.matmul import matmul_kernel
    stream = torch.cuda.current_stream()
    rows = []
    for tm, tn, tk in TILES:
        kernel = ct.kernel(matmul_kernel.fn)
        grid = (ct.cdiv(a.shape[0], tm) * ct.cdiv(b.shape[1], tn), 1, 1)
        args = (a, b, c, tm, tn, tk)
        ct.launch(stream, grid, kernel, args)
        (variant,) = kernel.variants.values()
        name = f"{tm}x{tn}x{tk}"
        rows.append((f"{name} as launched", lambda kernel=kernel, grid=grid, args=args: ct.launch(
            stream, grid, kernel, args)))
        staged = wrapped_as(variant.compiled, StagedKernel)
        arrays = (a, b, c)  # the compiled kernel's arguments: the tile sizes are constants
        if (tm, tn, tk) != TILES[0] or staged is None or not staged.stages(arrays, False, grid):
            continue
        inner = staged.staged_kernel(arrays)
        copies = list(arrays)
        for i, copy in staged.staged.params.items():
            copies[i] = stage_copy(arrays[i], copy, None, False)
        inner.launch(grid, copies, stream)
        ws = [k for k in kernels_within(inner) if isinstance(k, WarpSpecializedKernel)]
        ran = "Gluon" if any(k.variant_launches for k in ws) else "Triton"
        rows.append((f"{name} staged kernel alone ({ran})", lambda inner=inner, grid=grid, copies=copies:
                     inner.launch(grid, copies, stream)))
        for i, copy in staged.staged.params.items():
            rows.append((f"prologue {'ab'[i]} ({'transposed' if copy.transposed else 'rounded'})",
                         lambda x=arrays[i], copy=copy: stage_copy(x, copy, None, False)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = claim(parser.parse_args(argv).out)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    doc = head()
    doc["cases"] = []
    for m, n, k in CASES:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(k, n, device="cuda")
        ref = a.double() @ b.double()
        c = torch.empty(m, n, device="cuda")
        rows = [("torch", lambda: torch.matmul(a, b, out=c))] + _rows(a, b, c)
        doc["cases"].append(timed_in_turns(f"{m}x{n}x{k} fp32", rows, c, ref, unchecked="prologue"))
        out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
