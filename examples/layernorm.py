"""LayerNorm forward over the rows of a matrix, written as a cuTile user writes it: one block
per row, walking the row in tiles three times (mean, variance, normalize with weight and bias).

    python examples/layernorm.py [--backend ...] [--rows 37 --cols 1000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_name, relative_error, stream_for, to_device, to_numpy  # noqa: E402

import tilecraft as ct  # noqa: E402

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def layernorm(x, weight, bias, y, eps, TILE_N: ct.Constant[int]):
    normalize_row(x, weight, bias, y, eps, ct.bid(0), TILE_N)


def normalize_row(x, weight, bias, y, eps, row, TILE_N):
    """Row `row` of y = x normalized, times weight, plus bias (tile code: inlined where called)."""
    n = x.shape[1]
    tiles = ct.num_tiles(x, axis=1, shape=(1, TILE_N))
    total = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(tiles):
        total += ct.load(x, index=(row, j), shape=(1, TILE_N), padding_mode=ZERO)
    mean = ct.sum(total, axis=1, keepdims=True) / n
    squares = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(tiles):
        cols = j * TILE_N + ct.arange(TILE_N, dtype=ct.int32)
        d = ct.load(x, index=(row, j), shape=(1, TILE_N), padding_mode=ZERO) - mean
        squares += ct.where(cols < n, d * d, 0.0)  # padding lanes are not part of the row
    rstd = ct.rsqrt(ct.sum(squares, axis=1, keepdims=True) / n + eps)
    for j in range(tiles):
        t = ct.load(x, index=(row, j), shape=(1, TILE_N), padding_mode=ZERO)
        w = ct.load(weight, index=(j,), shape=(TILE_N,), padding_mode=ZERO)
        b = ct.load(bias, index=(j,), shape=(TILE_N,), padding_mode=ZERO)
        ct.store(y, index=(row, j), tile=((t - mean) * rstd * w + b).astype(y.dtype))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + eps) * w + b


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default=None)
    p.add_argument("--rows", type=int, default=37)
    p.add_argument("--cols", type=int, default=1000)
    p.add_argument("--tile", type=int, default=256)
    args = p.parse_args(argv)
    gen = np.random.default_rng(0)
    x = gen.standard_normal((args.rows, args.cols)).astype(np.float32) * 3 + 1
    w, b = gen.standard_normal(args.cols).astype(np.float32), gen.standard_normal(args.cols).astype(np.float32)
    X, W, B = (to_device(a, args.backend) for a in (x, w, b))
    Y = to_device(np.full_like(x, np.nan), args.backend)
    ct.launch(stream_for(X), (args.rows,), layernorm, (X, W, B, Y, 1e-5, args.tile), backend=args.backend)
    err = relative_error(to_numpy(Y), reference(x, w, b, 1e-5))
    print(f"layernorm {args.rows}x{args.cols} on {device_name(args.backend)}: rel. error {err:.2e}")
    return err


if __name__ == "__main__":
    main()
