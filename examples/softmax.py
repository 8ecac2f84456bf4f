"""Row softmax: one block per row, the row padded with -inf up to a power of two; or walking the
row in tiles three times (max, sum of exponentials, normalize), as rows longer than a tile are
written (`softmax_tiled`, `--tile`).

    python examples/softmax.py [--backend ...] [--rows 37 --cols 1000] [--tile 256]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_name, relative_error, stream_for, to_device, to_numpy  # noqa: E402

import tilecraft as ct  # noqa: E402


@ct.kernel
def softmax(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N),
                padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(row, 0), tile=(e / ct.sum(e, axis=1, keepdims=True)).astype(y.dtype))


@ct.kernel
def softmax_tiled(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    tiles = ct.num_tiles(x, axis=1, shape=(1, TILE_N))
    top = ct.full((1, TILE_N), -math.inf, dtype=ct.float32)
    for j in range(tiles):
        top = ct.maximum(top, row_tile(x, row, j, TILE_N))
    biggest = ct.max(top, axis=1, keepdims=True)
    total = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(tiles):
        total += ct.exp(row_tile(x, row, j, TILE_N) - biggest)
    denominator = ct.sum(total, axis=1, keepdims=True)
    for j in range(tiles):
        e = ct.exp(row_tile(x, row, j, TILE_N) - biggest)
        ct.store(y, index=(row, j), tile=(e / denominator).astype(y.dtype))


def row_tile(x, row, j, TILE_N):
    """Tile j of row `row` in float32, -inf past the row's end (tile code: inlined where called)."""
    return ct.load(x, index=(row, j), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default=None)
    p.add_argument("--rows", type=int, default=37)
    p.add_argument("--cols", type=int, default=1000)
    p.add_argument("--tile", type=int, default=None, help="walk each row in tiles of this many columns")
    args = p.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(np.float32)
    X = to_device(x, args.backend)
    Y = to_device(np.full_like(x, np.nan), args.backend)
    kernel, tile = (softmax, next_pow2(args.cols)) if args.tile is None else (softmax_tiled, args.tile)
    ct.launch(stream_for(X), (args.rows,), kernel, (X, Y, tile), backend=args.backend)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    err = relative_error(to_numpy(Y), ref)
    print(f"softmax {args.rows}x{args.cols} on {device_name(args.backend)}: rel. error {err:.2e}")
    return err


if __name__ == "__main__":
    main()
