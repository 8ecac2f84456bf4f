"""Forms cuTile programs use that tilecraft accepts as cuTile does: 0-d loads, NumPy scalar
constants, `operator` functions as combiners, `ct.divmod`, dtype calls without a value."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import tilecraft as ct

HALF = np.float16(1.5)


@ct.kernel
def _scalar_load(a, b):
    v = ct.load(a, index=(3,), shape=())
    ct.store(b, index=(0,), tile=ct.full((4,), v, ct.float32) + ct.full((4,), HALF, ct.float32) + ct.float32())


def test_zero_d_load_and_numpy_scalar_constants(dev):
    a = np.arange(8, dtype=np.float32) * 2
    b = dev.poison(4, np.float32)
    dev.launch((1,), _scalar_load, (dev.put(a), b))
    np.testing.assert_array_equal(dev.get(b), np.full(4, 6.0 + 1.5, np.float32))


@ct.kernel
def _operator_combiners(a, s, p, q, r):
    x = ct.load(a, index=(0, 0), shape=(4, 8))
    ct.store(s, index=(0,), tile=ct.reduce(x, 1, operator.add, 0))
    ct.store(p, index=(0, 0), tile=ct.scan(x, 1, operator.mul, 1))
    d, m = ct.divmod(x, 3)
    ct.store(q, index=(0, 0), tile=d)
    ct.store(r, index=(0, 0), tile=m)


def test_operator_functions_and_divmod(dev):
    a = np.random.default_rng(5).integers(-9, 9, (4, 8)).astype(np.int32)
    outs = [dev.poison(4, np.int32)] + [dev.poison((4, 8), np.int32) for _ in range(3)]
    dev.launch((1,), _operator_combiners, (dev.put(a), *outs))
    s, p, q, r = (dev.get(o) for o in outs)
    np.testing.assert_array_equal(s, a.sum(1))
    np.testing.assert_array_equal(p, np.cumprod(a, 1).astype(np.int32))
    np.testing.assert_array_equal(q, a // 3)
    np.testing.assert_array_equal(r, a % 3)


def _mixed_bitwise(a, b):
    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(4,)) & ct.load(b, index=(0,), shape=(4,)))


def _int_cast_with_rounding(a, b):
    ct.store(b, index=(0,), tile=ct.astype(ct.load(a, index=(0,), shape=(4,)), ct.float32,
                                           rounding_mode=ct.RoundingMode.RN))


@pytest.mark.parametrize("fn, args, message", [
    (_mixed_bitwise, (np.zeros(4, np.int32), np.zeros(4, np.uint32)), "Bitwise operands must have same data type"),
    (_int_cast_with_rounding, (np.zeros(4, np.int32), np.zeros(4, np.float32)),
     "rounding_mode is only valid for float to float conversions"),
])
def test_cutile_rejections(fn, args, message):
    with pytest.raises(ct.TileTypeError, match=message):
        ct.launch(None, (1,), ct.kernel(fn), args)
