"""The range analysis (tilecraft/passes/ranges.py): the interval of each integer value, proven
with integer wraparound in mind, since the backends use plain C `//` and `%` (and unguarded
loop steps) on what it calls non-negative. Each kernel stores its expressions to `out` in
order; the test reads the range of each stored value. Values near 2**31, negative values,
products, loop counters, casts; every op and cast by brute force over intervals of 8- and 16-bit
ints; what stays unknown (loads, atomics, loop-carried values, abs, strides)."""

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


ConstInt = ct.Constant[int]
_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "min", "max", "where", "<", "<=", ">", ">=", "==", "!=")
_CASTS = (ct.int8, ct.uint8, ct.int16, ct.uint16, ct.int32, ct.bool_)


def _kernel(dtype):
    """A kernel storing x, y (of `dtype`, in [lo1, hi1] and [lo2, hi2], built from aranges the
    analysis follows exactly), each `_OPS` of them, then x cast to each of `_CASTS` (all stored
    widened to int64, which keeps every value)."""
    @ct.kernel
    def ops_of(out, lo1: ConstInt, hi1: ConstInt, lo2: ConstInt, hi2: ConstInt):
        t = ct.arange(256, dtype=ct.int32)
        x = ct.minimum(ct.maximum(t + lo1, lo1), hi1).astype(dtype)
        y = ct.minimum(ct.maximum(t + lo2, lo2), hi2).astype(dtype)
        ct.store(out, (0,), x.astype(ct.int64))
        ct.store(out, (0,), y.astype(ct.int64))
        ct.store(out, (0,), (x + y).astype(ct.int64))
        ct.store(out, (0,), (x - y).astype(ct.int64))
        ct.store(out, (0,), (x * y).astype(ct.int64))
        ct.store(out, (0,), (x // y).astype(ct.int64))
        ct.store(out, (0,), (x % y).astype(ct.int64))
        ct.store(out, (0,), (x & y).astype(ct.int64))
        ct.store(out, (0,), (x | y).astype(ct.int64))
        ct.store(out, (0,), (x ^ y).astype(ct.int64))
        ct.store(out, (0,), (x << y).astype(ct.int64))
        ct.store(out, (0,), (x >> y).astype(ct.int64))
        ct.store(out, (0,), (ct.minimum(x, y)).astype(ct.int64))
        ct.store(out, (0,), (ct.maximum(x, y)).astype(ct.int64))
        ct.store(out, (0,), (ct.where(x > y, x, y)).astype(ct.int64))
        ct.store(out, (0,), (x < y).astype(ct.int64))
        ct.store(out, (0,), (x <= y).astype(ct.int64))
        ct.store(out, (0,), (x > y).astype(ct.int64))
        ct.store(out, (0,), (x >= y).astype(ct.int64))
        ct.store(out, (0,), (x == y).astype(ct.int64))
        ct.store(out, (0,), (x != y).astype(ct.int64))
        for d in ct.static_iter(_CASTS):
            ct.store(out, (0,), (x.astype(d)).astype(ct.int64))
    return ops_of


def _wrap(v: np.ndarray, dtype) -> np.ndarray:
    """`v` (exact int64 values) as `dtype` holds them: two's complement wraparound; bool is != 0."""
    if dtype is dt.bool_:
        return (v != 0).astype(np.int64)
    lo, hi = dtype_range(dtype)
    return (v - lo) % (hi - lo + 1) + lo


def _exact(name: str, a: np.ndarray, b: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, where defined) of `a name b` by Tile IR's rules before wraparound: Python's //
    and % (division by zero undefined), shifts by 0 to bits - 1 (arithmetic >> of signed values)."""
    ok = np.ones(a.shape, bool)
    safe = np.where(b == 0, 1, b)
    if name in ("//", "%"):
        ok = b != 0
        return (a // safe if name == "//" else a % safe), ok
    if name in ("<<", ">>"):
        ok = (b >= 0) & (b < bits)
        shift = np.clip(b, 0, bits - 1)
        return (a << shift if name == "<<" else a >> shift), ok
    fns = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
           "!=": np.not_equal, "+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
           "^": np.bitwise_xor, "min": np.minimum, "max": np.maximum, "where": np.maximum}
    return fns[name](a, b), ok


def _cases(dtype, count: int, seed: int) -> list[tuple[int, int, int, int]]:
    """Pairs of intervals of `dtype`: its edges, around 0, and random ones (at most 256 wide,
    so that the product of two stays small to enumerate)."""
    lo, hi = dtype_range(dtype)
    rng = np.random.default_rng(seed)
    edges = [(lo, min(hi, lo + 255)), (max(lo, hi - 255), hi), (max(lo, -8), min(hi, 8)), (0, min(hi, 20)),
             (1, min(hi, 7)), (max(lo, -7), -1) if lo < 0 else (0, 0), (0, 1)]
    picks = []
    for _ in range(count):
        a = int(rng.integers(lo, hi + 1))
        width = int(rng.integers(0, 256))
        picks.append((max(lo, a - width // 2), min(hi, a + width - width // 2)))
    spans = edges + picks
    return [(*x, *y) for x in spans for y in spans if rng.random() < 0.2] + [(*x, *x) for x in edges]


@pytest.mark.parametrize("dtype", [ct.int8, ct.uint8, ct.int16, ct.uint16])
def test_every_claimed_interval_holds_for_every_pair_of_values(dtype):
    """Brute force: for intervals of a narrow dtype, every value each op or cast can produce
    (wrapped into its dtype as the GPU computes it) lies in the interval the analysis claims."""
    kernel = _kernel(dtype)
    bits = dtype.bitwidth
    for lo1, hi1, lo2, hi2 in _cases(dtype, 12, seed=dtype.bitwidth + dtype.signed):
        fn = kernel_ir(kernel, np.zeros(4, np.int64), lo1, hi1, lo2, hi2)
        ranges = value_ranges(fn)
        stored = [op.tile for op in fn.walk() if isinstance(op, ops.Store)]
        claimed = [ranges.get(v.id, dtype_range(v.tile.dtype)) for v in stored]
        assert claimed[:2] == [(lo1, hi1), (lo2, hi2)]
        a, b = np.meshgrid(np.arange(lo1, hi1 + 1, dtype=np.int64), np.arange(lo2, hi2 + 1, dtype=np.int64))
        for name, (low, high) in zip(_OPS, claimed[2:]):
            exact, ok = _exact(name, a, b, bits)
            got = _wrap(exact, dtype)[ok]
            assert got.size == 0 or (low <= got.min() and got.max() <= high), (name, lo1, hi1, lo2, hi2)
        for cast, (low, high) in zip(_CASTS, claimed[2 + len(_OPS):]):
            got = _wrap(a[0], cast)
            assert low <= got.min() and got.max() <= high, (cast, lo1, hi1)


@ct.kernel
def unknowns(a, counter, out):
    u = ct.arange(16, dtype=ct.int32)
    ct.store(out, (0,), ct.load(a, index=(0,), shape=(16,)) & 255)   # loads: any value, & keeps [0, 255]
    ct.store(out, (0,), ct.load(a, index=(0,), shape=(16,)) + 1)
    ct.store(out, (0,), ct.atomic_add(counter, 0, 1) + u)             # what an atomic returns: any value
    ct.store(out, (0,), ct.abs(u - 8))                                 # abs and negation not tracked
    ct.store(out, (0,), -u)
    ct.store(out, (0,), u + a.strides[0])                               # strides may be 0 or negative
    total = u * 0
    for _ in range(a.shape[0]):
        total = total + 1                                               # loop-carried: may wrap
    ct.store(out, (0,), total)
    ct.store(out, (0,), ct.where(u > 3, u, u - 20))                     # the hull of both sides


def test_loads_atomics_loop_carried_values_and_untracked_ops_get_their_whole_dtype():
    got = stored_ranges(unknowns, np.zeros(16, np.int32), np.zeros(1, np.int32), np.zeros(16, np.int32))
    assert got == [(0, 255), INT32, INT32, INT32, INT32, INT32, INT32, (-20, 15)]
