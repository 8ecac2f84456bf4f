"""Would splitting only the last, partly filled wave's tiles beat splitting every tile? (GPU
probe for the tile-split rule, backends/tile_splitting.py `auto_count`; not a product benchmark.)

At 3072^3 the MatMul sample's 128x256 tiles make 288 blocks: two full waves on the H200's 132
SMs and a third 18% full. Launches split every tile in two (576 blocks of 128x128, 4.4 waves,
0.86-0.88x torch), which makes all the work run on smaller, slower tiles. The alternative timed
here: the first 264 blocks as written, then only the last 24 tiles' region split into smaller
tiles. In the sample's grouped order those 24 blocks are columns 9-11 of the last group of 8
row tiles, a 1024x768 block of C, so the tail is the same kernel launched on views of A, B and
C with smaller tiles (a second launch). Rows: torch, the sample as launches run it (split 2),
unsplit, and head + tail with 128x128, 64x128, 128x64 and 64x64 tail tiles; every row checked
against float64 on a NaN-poisoned C first, then timed in turns (`merge_probe.timed_in_turns`,
`ROUNDS` rounds); ratio = torch's time over the row's.

    PYTHONPATH=$PWD python3 benchmarks/tail_split_probe.py --out $OUT/tail-split.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from _results import claim
from matmul import variant_backend
from merge_probe import timed_in_turns
from power_probe import head

SIZE, TILE, GROUP = 3072, (128, 256, 64), 8
TAILS = ((128, 128), (64, 128), (128, 64), (64, 64))
ROUNDS = 5


def _tail_region(size: int, sms: int) -> tuple[int, int, int, int]:
    """(first row, first column, the head's block count, the tail's block count) of the grouped
    order's last partial wave, where it is a rectangle: the last group full height and the head
    ending on a column boundary of it (true at 3072^3 on 132 SMs)."""
    tm, tn, _ = TILE
    rows, cols = size // tm, size // tn
    blocks = rows * cols
    head_blocks = blocks // sms * sms
    per_group = GROUP * cols
    group, within = divmod(head_blocks, per_group)
    if rows % GROUP or within % GROUP:
        raise SystemExit(f"the tail of {size}^3 is not a rectangle on {sms} SMs")
    return group * GROUP * tm, within // GROUP * tn, head_blocks, blocks - head_blocks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtypes", default="float16,bfloat16")
    opts = parser.parse_args(argv)
    out = claim(opts.out)
    import torch
    import tilecraft as ct
    from tilecraft.library.matmul import matmul_kernel

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r0, c0, head_blocks, tail_blocks = _tail_region(SIZE, sms)
    whole = variant_backend("nosplit", tile_split=False, stream_k=False)
    stream = torch.cuda.current_stream()
    doc = head()
    doc.update(size=SIZE, tile=TILE, tail_region=(r0, c0), head_blocks=head_blocks, tail_blocks=tail_blocks, cases=[])
    for dtype in opts.dtypes.split(","):
        torch.manual_seed(0)
        a = torch.randn(SIZE, SIZE, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(SIZE, SIZE, device="cuda", dtype=getattr(torch, dtype))
        c = torch.empty(SIZE, SIZE, device="cuda", dtype=a.dtype)
        ref = a.double() @ b.double()
        grid = (SIZE // TILE[0] * (SIZE // TILE[1]), 1, 1)

        def tail_launch(tm: int, tn: int) -> Callable[[], None]:
            av, bv, cv = a[r0:], b[:, c0:], c[r0:, c0:]
            tail_grid = ((SIZE - r0) // tm * ((SIZE - c0) // tn), 1, 1)

            def run() -> None:
                ct.launch(stream, (head_blocks, 1, 1), matmul_kernel, (a, b, c, *TILE), backend=whole)
                ct.launch(stream, tail_grid, matmul_kernel, (av, bv, cv, tm, tn, TILE[2]), backend=whole)
            return run

        rows: list[tuple[str, Callable[[], None]]] = [
            ("torch", lambda: torch.matmul(a, b, out=c)),
            ("sample as launched", lambda: ct.launch(stream, grid, matmul_kernel, (a, b, c, *TILE))),
            ("sample unsplit", lambda: ct.launch(stream, grid, matmul_kernel, (a, b, c, *TILE), backend=whole))]
        rows += [(f"head {head_blocks} + tail {tm}x{tn}", tail_launch(tm, tn)) for tm, tn in TAILS]
        doc["cases"].append(timed_in_turns(f"{SIZE}^3 {dtype}", rows, c, ref, ROUNDS))
        out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
