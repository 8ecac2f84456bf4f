"""Row softmax: one block per row, the row padded with -inf up to a power of two.

    python examples/softmax.py [--backend ...] [--rows 37 --cols 1000]
"""

from __future__ import annotations

import argparse
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


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default=None)
    p.add_argument("--rows", type=int, default=37)
    p.add_argument("--cols", type=int, default=1000)
    args = p.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(np.float32)
    X = to_device(x, args.backend)
    Y = to_device(np.full_like(x, np.nan), args.backend)
    ct.launch(stream_for(X), (args.rows,), softmax, (X, Y, next_pow2(args.cols)), backend=args.backend)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    err = relative_error(to_numpy(Y), ref)
    print(f"softmax {args.rows}x{args.cols} on {device_name(args.backend)}: rel. error {err:.2e}")
    return err


if __name__ == "__main__":
    main()
