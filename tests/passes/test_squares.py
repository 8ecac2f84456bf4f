"""`x ** 2` on floats becomes `x * x` (tilecraft/passes/squares.py): the same bits as one
correctly rounded square, on every backend, for every special value (NaN as NaN: its payload
is the hardware's); other powers stay pow."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tests.backends.optest_utils import np_dtype

ConstInt = ct.Constant[int]


@ct.kernel
def powers(X, Sq, Cube, Exp, T: ConstInt):
    t = ct.load(X, index=(ct.bid(0),), shape=(T,))
    ct.store(Sq, index=(ct.bid(0),), tile=t ** 2)
    ct.store(Cube, index=(ct.bid(0),), tile=t ** 3)
    ct.store(Exp, index=(ct.bid(0),), tile=2.0 ** t)


def _inputs(dtype: np.dtype, n: int) -> np.ndarray:
    info = np.finfo(dtype)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, info.max, -info.max, info.tiny, -info.tiny,
               info.smallest_subnormal, float(info.max) ** 0.5, -1.5, 3.0]
    x = np.random.default_rng(7).standard_normal(n).astype(dtype)
    x[:len(special)] = np.array(special).astype(dtype)
    return x


def test_only_the_square_is_rewritten():
    x = np.zeros(16, np.float32)
    text = powers.ir(x, x, x, x, 16)
    assert text.count("binary[fn=pow]") == 2 and "binary[fn=mul]" in text


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_square_is_the_rounded_product_bit_for_bit(dev, dtype):
    d = np_dtype(dtype)
    n = 50  # not a multiple of the tile: the last tile is partial
    x = _inputs(d, n)
    outs = [dev.poison((n,), d) for _ in range(3)]
    dev.launch((4,), powers, (dev.put(x), *outs, 16))
    sq, cube, exp = (dev.get(o) for o in outs)
    with np.errstate(all="ignore"):
        want = (x.astype(np.float64) ** 2).astype(d)  # the square rounded once to the dtype
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(sq), nan)
        np.testing.assert_array_equal(sq[~nan].view(f"u{d.itemsize}"), want[~nan].view(f"u{d.itemsize}"))
        np.testing.assert_allclose(cube[20:], (x[20:].astype(np.float64) ** 3).astype(d), rtol=2e-3 if d.itemsize == 2 else 1e-6)
        np.testing.assert_allclose(exp[20:], np.exp2(x[20:].astype(np.float64)).astype(d), rtol=2e-3 if d.itemsize == 2 else 1e-6)
