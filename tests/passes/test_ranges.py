"""The range analysis (tilecraft/passes/ranges.py): the interval of each integer value, proven
with integer wraparound in mind, since the backends use plain C `//` and `%` (and unguarded
loop steps) on what it calls non-negative. Each kernel stores its expressions to `out` in
order; the test reads the range of each stored value. Values near 2**31, negative values,
products, loop counters, casts."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import kernel_ir
from tilecraft.ir import ops
from tilecraft.language import dtypes as dt
from tilecraft.passes.ranges import dtype_range, nonnegative, value_ranges

INT32 = dtype_range(dt.int32)
INT8 = dtype_range(dt.int8)


def stored_ranges(kernel, *args) -> list[tuple[int, int]]:
    """The ranges of the tiles `kernel`'s stores write, in program order (an integer's whole
    dtype range where nothing narrower is known)."""
    fn = kernel_ir(kernel, *args)
    ranges = value_ranges(fn)
    return [ranges.get(op.tile.id, dtype_range(op.tile.tile.dtype)) for op in fn.walk() if isinstance(op, ops.Store)]


@ct.kernel
def near_int32_max(a, out):
    u = ct.arange(16, dtype=ct.int32)
    ct.store(out, (0,), u + 2147483631)           # [2**31 - 17, 2**31 - 2]: fits
    ct.store(out, (1,), u + 2147483640)           # up to 2**31 + 6: wraps
    ct.store(out, (2,), ct.bid(0) + 1)            # block ids stop at 2**31 - 2
    ct.store(out, (3,), ct.bid(0) + 2)
    ct.store(out, (4,), a.shape[0] + 1)           # an int32 size may be 2**31 - 1
    ct.store(out, (5,), ct.num_blocks(0) - 1)
    ct.store(out, (6,), (u + 2147483640) % 5)     # Python's % of the wrapped values: [0, 4]


def test_sums_near_int32_max_keep_a_range_only_when_they_cannot_wrap():
    a = np.zeros(8, np.float32)
    got = stored_ranges(near_int32_max, a, np.zeros(16, np.int32))
    assert got == [(2**31 - 17, 2**31 - 2), INT32, (1, 2**31 - 1), INT32, INT32, (0, 2**31 - 2), (0, 4)]


@ct.kernel
def negatives(out):
    v = ct.arange(16, dtype=ct.int32) - 20        # [-20, -5]
    ct.store(out, (0,), v)
    ct.store(out, (1,), v % 7)                    # the divisor's sign
    ct.store(out, (2,), v % -7)
    ct.store(out, (3,), v // 7)                   # floor: -20 // 7 == -3, -5 // 7 == -1
    ct.store(out, (4,), v // -7)
    ct.store(out, (5,), ct.minimum(v, 3) * v)     # products of negatives are positive
    ct.store(out, (6,), v & 12)                   # & a non-negative mask
    ct.store(out, (7,), ct.maximum(v, 0))


def test_negative_values_and_pythons_signs():
    got = stored_ranges(negatives, np.zeros(16, np.int32))
    assert got == [(-20, -5), (0, 6), (-6, 0), (-3, -1), (0, 2), (25, 400), (0, 12), (0, 0)]


@ct.kernel
def products(a, out):
    u = ct.arange(16, dtype=ct.int32)
    tiles = ct.cdiv(a.shape[0], 128)              # floor based: cannot wrap
    ct.store(out, (0,), tiles)
    ct.store(out, (1,), tiles * 8)
    ct.store(out, (2,), ct.bid(0) * 2**30)        # wraps negative for bid(0) >= 2
    ct.store(out, (3,), ct.bid(0) * 64 + u)       # wraps for block ids past 2**25
    ct.store(out, (4,), (a.shape[0] + 127) // 128)  # the sum may wrap: no plain //
    ct.store(out, (5,), a.shape[0] // 128 * 128)
    ct.store(out, (6,), u * 1000 + u)
    ct.store(out, (7,), ct.bid(0) % (tiles * 8))  # x % y of non-negatives: below y


def test_products_keep_a_range_only_when_they_fit():
    got = stored_ranges(products, np.zeros(8, np.float32), np.zeros(16, np.int32))
    tiles = -(-(2**31 - 1) // 128)
    assert got == [(0, tiles), (0, 8 * tiles), INT32, INT32, (-2**24, 2**24 - 1), (0, 2**31 - 128), (0, 15015),
                   (0, 8 * tiles - 1)]


@ct.kernel
def loops(a, out):
    for i in range(a.shape[0]):
        ct.store(out, (0,), i)                    # [0, 2**31 - 2]
    for j in range(3, ct.cdiv(a.shape[0], 64), 4):
        ct.store(out, (1,), j)
    for k in range(0, a.shape[0], 2**30):         # k + 2**30 may wrap past 2**31 - 1
        ct.store(out, (2,), k)
    for m in range(-5, 10):
        ct.store(out, (3,), m)


def test_loop_counters():
    got = stored_ranges(loops, np.zeros(8, np.float32), np.zeros(16, np.int32))
    assert got == [(0, 2**31 - 2), (3, -(-(2**31 - 1) // 64) - 1), INT32, (-5, 9)]


@ct.kernel
def casts(out):
    u = ct.arange(16, dtype=ct.int32)
    ct.store(out, (0,), (u * 8).astype(ct.int8))      # [0, 120] fits int8
    ct.store(out, (1,), (u + 120).astype(ct.int8))    # 135 wraps to -121
    ct.store(out, (2,), (u - 8).astype(ct.int8) + 127)  # int8 arithmetic wraps too


def test_casts_and_narrow_dtypes():
    got = stored_ranges(casts, np.zeros(16, np.int8))
    assert got == [(0, 120), INT8, INT8]


@pytest.mark.parametrize("kernel, args, signs", [
    (near_int32_max, (np.zeros(8, np.float32), np.zeros(16, np.int32)), [1, 0, 1, 0, 0, 1, 1]),
    (products, (np.zeros(8, np.float32), np.zeros(16, np.int32)), [1, 1, 0, 0, 0, 1, 1, 1])])
def test_nonnegative_values(kernel, args, signs):
    """What the backends read: the stored values never negative, whatever wraps."""
    fn = kernel_ir(kernel, *args)
    known = nonnegative(fn)
    assert [int(op.tile.id in known) for op in fn.walk() if isinstance(op, ops.Store)] == signs
