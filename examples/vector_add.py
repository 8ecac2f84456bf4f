"""Vector add: a 1-D grid whose last tile is partial when n is not a multiple of TILE.

    python examples/vector_add.py [--backend ...] [--n 100003]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_name, stream_for, to_device, to_numpy  # noqa: E402

import tilecraft as ct  # noqa: E402


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i,), tile=x + y)


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default=None)
    p.add_argument("--n", type=int, default=100_003)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(args.n).astype(np.float32), rng.standard_normal(args.n).astype(np.float32)
    A, B, C = (to_device(x, args.backend) for x in (a, b, np.full(args.n, np.nan, np.float32)))
    tile = 256
    ct.launch(stream_for(A), (ct.cdiv(args.n, tile),), vector_add, (A, B, C, tile), backend=args.backend)
    err = float(np.abs(to_numpy(C) - (a + b)).max())
    print(f"vector_add n={args.n} on {device_name(args.backend)}: max abs error {err:.1e}")
    return err


if __name__ == "__main__":
    main()
