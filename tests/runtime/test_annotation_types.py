"""`ct.Tile`, `ct.TiledView`, `ct.Scalar` (and `ct.Array`) name types for annotations: code that
annotates helpers and kernels with them imports, compiles and runs."""

from __future__ import annotations

import numpy as np

import tilecraft as ct


def scaled(t: ct.Tile, by: ct.Scalar) -> ct.Tile:
    return t * by


def first_tile(view: ct.TiledView) -> ct.Tile:
    return view.load((0,))


@ct.kernel
def annotated(x: ct.Array, out: ct.Array, by: ct.Scalar):
    ct.store(out, (0,), scaled(first_tile(x.tiled_view((16,))), by))


def test_annotated_helpers_compile_and_run(dev):
    x = np.arange(20, dtype=np.float32)
    out = dev.poison((16,), np.float32)
    dev.launch((1,), annotated, (dev.put(x), out, 1.5))
    np.testing.assert_array_equal(dev.get(out), x[:16] * 1.5)
    assert ct.Scalar == int | float and isinstance(ct.Tile, type) and isinstance(ct.TiledView, type)
