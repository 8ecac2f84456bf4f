"""Memory operations at their edges, on every backend, against NumPy references computed here.

A differential hunt between the interpreter and the generated Triton code (one semantics for
every backend), beside what test_ops_memory.py covers: every padding mode on every dtype (8-bit
floats included), gather and scatter with extreme index values of every integer dtype, special
padding values, 3-D broadcast indices with tile masks and tile padding, atomics on special
float bit patterns and the whole range of the integer types, 0-d arrays, empty arrays, and the
hints (latency, allow_tma) that must not change a result.

float8_e4m3fn has no infinity: POS_INF and NEG_INF padding give its NaN (0x7f, 0xff), as an
infinity made in that format does in LLVM's APFloat (makeInf of a NaN-only format makes a NaN),
which the GPU compiler uses for constants. A padding_value, by contrast, converts as a cast
does (saturating, test_fp8_saturation.py), so padding_value=inf gives 448.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import assert_bits_equal, np_dtype, padded_tiles, rng
from test_fp8_saturation import satfinite_reference
from test_ops_memory import check_sequential

P = ct.PaddingMode
INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]
pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning")


def _uint_view(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _values(g: np.random.Generator, shape: tuple[int, ...], d: np.dtype) -> np.ndarray:
    """Random values of `d`: both signs (floats), the whole range (integers)."""
    if d.kind == "b":
        return g.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        return g.integers(info.min, info.max, shape, dtype=d, endpoint=True)
    return g.uniform(-100, 100, shape).astype(d)


# ---- tile loads: every padding mode on every dtype -----------------------------------------------------
@functools.lru_cache(maxsize=None)
def transposed_copy(padding: Any) -> Any:
    """out = the (4, 4) tile (i, j) of x seen in order "F", padded with `padding`."""
    @ct.kernel
    def k(x, out):
        idx = (ct.bid(0), ct.bid(1))
        ct.store(out, idx, ct.load(x, idx, (4, 4), order="F", padding_mode=padding))
    return k


def padding_element(mode: Any, dtype: str) -> np.ndarray:
    """The element a load pads with (float8_e4m3fn has no infinity: NaN of the sign)."""
    value = {P.ZERO: 0.0, P.NEG_ZERO: -0.0, P.NAN: np.nan, P.POS_INF: np.inf, P.NEG_INF: -np.inf}[mode]
    if dtype == "float8_e4m3fn" and np.isinf(value):
        return np.array(0x7F if value > 0 else 0xFF, np.uint8).view(np_dtype(dtype))
    return np.array(value).astype(np_dtype(dtype))


@pytest.mark.parametrize("dtype", ["bool_", *INTS, *FLOATS])
def test_every_padding_mode_on_every_dtype(dev, dtype: str) -> None:
    """A 5x7 array read as 4x4 tiles in transposed order (partial along both axes): the lanes
    outside are the padding element, bit for bit; NaN and infinity paddings of integer and
    bool arrays are type errors on every backend."""
    d = np_dtype(dtype)
    x = _values(rng("pad-every", dtype), (5, 7), d)
    for mode in (P.ZERO, P.NEG_ZERO, P.NAN, P.POS_INF, P.NEG_INF):
        out = dev.poison((8, 8), d)
        if d.kind in "biu" and mode not in (P.ZERO, P.NEG_ZERO):
            with pytest.raises(ct.TileTypeError, match=f"padding_mode {mode.name} needs a float array"):
                dev.launch((2, 2), transposed_copy(mode), (dev.put(x), out))
            continue
        dev.launch((2, 2), transposed_copy(mode), (dev.put(x), out))
        want = padded_tiles(np.ascontiguousarray(x.T), (4, 4), padding_element(mode, dtype))
        assert_bits_equal(dev.get(out), want, mode.name)


# ---- gather / scatter ----------------------------------------------------------------------------------
EXTREME_INDICES = {
    "int8": [-128, -1, 0, 5, 127, 3, 9, 1], "uint8": [0, 1, 4, 200, 255, 6, 2, 9],
    "int16": [-32768, 32767, 3, -1, 9, 8, 0, 10], "uint16": [65535, 32768, 3, 9, 10, 8, 0, 1],
    "int32": [-2**31, 2**31 - 1, -1, 10, 9, 4, 0, 2], "uint32": [0, 2**32 - 1, 2**31, 2**31 + 1, 1, 7, 9, 3],
    "int64": [2**32, 2**32 + 3, -2**32 + 2, 2**63 - 1, -2**63, 4, 0, 9],
    "uint64": [2**64 - 1, 2**63, 2**63 + 3, 2**32 + 2, 5, 9, 10, 0],
}


@ct.kernel
def gather_then_scatter(x, idx, out):
    i = ct.load(idx, (0,), (8,))
    ct.store(out, (0,), ct.gather(x, i, padding_value=-7))
    ct.scatter(x, i, 1000)


@pytest.mark.parametrize("idt", INTS)
def test_gather_scatter_extreme_indices(dev, idt: str) -> None:
    """Indices at the ends of every integer dtype into a 10-element array: only 0..9 are in
    bounds (never a negative index wrapped, nor a 64-bit one narrowed: 2**32 + 3 is not 3)."""
    idx = np.array(EXTREME_INDICES[idt], dtype=idt)
    x, out = dev.put(np.arange(10, dtype=np.int32)), dev.poison((8,), np.int32)
    dev.launch((1,), gather_then_scatter, (x, dev.put(idx), out))
    inside = [int(i) for i in EXTREME_INDICES[idt] if 0 <= i < 10]
    np.testing.assert_array_equal(dev.get(out), [i if 0 <= i < 10 else -7 for i in EXTREME_INDICES[idt]])
    want = np.arange(10, dtype=np.int32)
    want[inside] = 1000
    np.testing.assert_array_equal(dev.get(x), want)


PADDING_VALUES = [-0.0, float("nan"), float("inf"), float("-inf"), 1e30, -3.75]


@functools.lru_cache(maxsize=None)
def gather_padded_with(value: float) -> Any:
    @ct.kernel
    def k(x, out):
        ct.store(out, (0,), ct.gather(x, ct.arange(8, dtype=ct.int32) * 2 - 3, padding_value=value))
    return k


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_special_padding_values(dev, dtype: str) -> None:
    """A constant padding_value converts to the array dtype as a cast does (8-bit floats
    saturate), signed zero and NaN included; in-bounds lanes are the array's."""
    d = np_dtype(dtype)
    x = np.arange(1, 6).astype(d)
    lanes = np.arange(8) * 2 - 3
    for value in PADDING_VALUES:
        out = dev.poison((8,), d)
        dev.launch((1,), gather_padded_with(value), (dev.put(x), out))
        pad = satfinite_reference(np.array([value]), dtype) if dtype.startswith("float8") \
            else np.array([value]).astype(d)
        want = np.where((lanes >= 0) & (lanes < 5), x[np.clip(lanes, 0, 4)], pad)
        assert_bits_equal(dev.get(out), want, f"padding_value={value}")


@ct.kernel
def gather_scatter_3d(x, a, b, c, m, pad, out, back):
    ia = ct.load(a, (0,), (4,))[:, None, None]
    ib = ct.load(b, (0,), (2,))[None, :, None]
    ic = ct.load(c, (0,), (8,))[None, None, :]
    mask = ct.load(m, (0, 0), (2, 8))
    v = ct.gather(x, (ia, ib, ic), mask=mask, padding_value=ct.load(pad, (0, 0, 0), (4, 1, 8)))
    ct.store(out, (0, 0, 0), v)
    ct.scatter(back, (ia, ib, ic), v * 2.0, mask=mask)


def test_gather_scatter_3d_broadcast_mixed_index_dtypes(dev) -> None:
    """int8, uint16 and int64 index tiles broadcast to (4, 2, 8) with a (2, 8) mask and a
    (4, 1, 8) padding tile; the scatter writes exactly the gathered lanes back."""
    g = rng("gather-3d")
    x = g.standard_normal((3, 5, 7)).astype(np.float32)
    a, b = np.array([-1, 0, 2, 3], np.int8), np.array([4, 5], np.uint16)
    c = np.array([0, 6, 7, -1, 3, 1, 2, 5], np.int64)
    m, pad = g.random((2, 8)) < 0.8, g.standard_normal((4, 1, 8)).astype(np.float32)
    out, back = dev.poison((4, 2, 8), np.float32), dev.poison((3, 5, 7), np.float32)
    dev.launch((1,), gather_scatter_3d, tuple(dev.put(v) for v in (x, a, b, c, m, pad)) + (out, back))
    ia, ib, ic = np.broadcast_arrays(a.astype(np.int64)[:, None, None], b.astype(np.int64)[None, :, None],
                                     c[None, None, :])
    ok = (ia >= 0) & (ia < 3) & (ib < 5) & (ic >= 0) & (ic < 7) & m[None]
    want = np.where(ok, x[np.clip(ia, 0, 2), np.clip(ib, 0, 4), np.clip(ic, 0, 6)], np.broadcast_to(pad, ok.shape))
    assert_bits_equal(dev.get(out), want)
    want_back = np.full((3, 5, 7), np.nan, np.float32)
    want_back[ia[ok], ib[ok], ic[ok]] = 2 * want[ok]
    assert_bits_equal(dev.get(back), want_back)


# ---- atomics ---------------------------------------------------------------------------------------------
@ct.kernel
def cas_lanes(x, expected, desired, old):
    lanes = ct.arange(8, dtype=ct.int32)
    e, d = ct.load(expected, (0,), (8,)), ct.load(desired, (0,), (8,))
    ct.store(old, (0,), ct.atomic_cas(x, lanes, e, d))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atomic_cas_compares_float_bits(dev, dtype: str) -> None:
    """Compare-and-swap compares bit patterns, as the hardware's atom.cas does: -0.0 does not
    match 0.0, a NaN matches the same NaN but not another payload."""
    d, u = np.dtype(dtype), {"float32": np.uint32, "float64": np.uint64}[dtype]
    top = np.array(1, u) << np.array(d.itemsize * 8 - 1, u)
    nan1, nan2 = (np.array([0x7FC00001, 0x7FC00002], u) if dtype == "float32"
                  else np.array([0x7FF8000000000001, 0x7FF8000000000002], u))
    init = np.array([0, top, nan1, nan1, top | nan1, 0x40, 0, top], u).view(d)
    expected = np.array([top, 0, nan1, nan2, top | nan1, 0x40, 0, top], u).view(d)
    desired = np.arange(10, 18).astype(d)
    x, old = dev.put(init), dev.poison((8,), d)
    dev.launch((1,), cas_lanes, (x, dev.put(expected), dev.put(desired), old))
    np.testing.assert_array_equal(_uint_view(dev.get(old)), _uint_view(init))
    swapped = _uint_view(init) == _uint_view(expected)
    np.testing.assert_array_equal(_uint_view(dev.get(x)), _uint_view(np.where(swapped, desired, init)))


@functools.lru_cache(maxsize=None)
def rmw_lanes(op: Callable) -> Any:
    """old = op(x, idx, update) over 16 lanes (index -1 past the array: a no-op)."""
    @ct.kernel
    def k(x, idx, update, old):
        ct.store(old, (0,), op(x, ct.load(idx, (0,), (16,)), ct.load(update, (0,), (16,))))
    return k


def _atomic_max(x, i, u): return ct.atomic_max(x, i, u)
def _atomic_min(x, i, u): return ct.atomic_min(x, i, u)
def _atomic_xchg(x, i, u): return ct.atomic_xchg(x, i, u)
def _atomic_add(x, i, u): return ct.atomic_add(x, i, u)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_atomic_max_min_over_the_whole_range(dev, name: str, dtype: str) -> None:
    """Signedness picks the comparison: values past 2**31 (2**63) are large unsigned and
    negative signed. Four addresses, three or four lanes each, three lanes out of bounds."""
    d = np.dtype(dtype)
    g = rng("atomic-range", name, dtype)
    init, update = _values(g, (4,), d), _values(g, (16,), d)
    idx = np.arange(16, dtype=np.int32) % 5
    idx[idx == 4] = -1
    x, old = dev.put(init), dev.poison((16,), d)
    dev.launch((1,), rmw_lanes(_atomic_max if name == "max" else _atomic_min), (x, dev.put(idx), dev.put(update), old))
    check_sequential(name, init, idx, update, dev.get(old), dev.get(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atomic_xchg_and_add_keep_float_bits(dev, dtype: str) -> None:
    """Exchange swaps bit patterns (NaN payloads, -0.0); adds of special values round as IEEE
    sums: -0.0 + -0.0 is -0.0, inf + -inf is NaN, NaN propagates."""
    d, u = np.dtype(dtype), {"float32": np.uint32, "float64": np.uint64}[dtype]
    nan = np.array([0x7FC00001 if dtype == "float32" else 0x7FF8000000000001], u).view(d)[0]
    init = np.array([-0.0, nan, 1, 2, -0.0, np.inf, np.nan, 1e-30] + [0] * 8, d)
    update = np.array([-nan, -0.0, np.inf, -np.inf, -0.0, -np.inf, 1, 1e30] + [0] * 8, d)
    idx = np.concatenate([np.arange(8), np.full(8, -1)]).astype(np.int32)
    for op, want in ((_atomic_xchg, update), (_atomic_add, init + update)):
        x, old = dev.put(init), dev.poison((16,), d)
        dev.launch((1,), rmw_lanes(op), (x, dev.put(idx), dev.put(update), old))
        np.testing.assert_array_equal(_uint_view(dev.get(old)[:8]), _uint_view(init[:8]))
        if op is _atomic_xchg:
            np.testing.assert_array_equal(_uint_view(dev.get(x)[:8]), _uint_view(want[:8]))
        else:   # the sign and payload of a NaN an addition makes are unspecified
            assert_bits_equal(dev.get(x)[:8], want[:8])


# ---- 0-d and empty arrays ------------------------------------------------------------------------------
@ct.kernel
def zero_d_element_ops(s, t, u, out):
    first = ct.bid(0) == 0
    ct.store(out, (0,), ct.full((8,), ct.gather(s, (), mask=first, padding_value=-1.5), ct.float32))
    ct.scatter(t, (), 7.0, mask=first)
    ct.store(out, (1,), ct.full((8,), ct.atomic_add(u, (), 2).astype(ct.float32), ct.float32))
    ct.store(out, (2,), ct.full((8,), ct.atomic_cas(u, (), 5, 100).astype(ct.float32), ct.float32))


def test_element_ops_on_a_0d_array(dev) -> None:
    """gather, scatter and atomics on a 0-d array take the index `()` and a scalar mask."""
    s, t, u = (dev.put(np.array(v, d)) for v, d in ((2.5, np.float32), (1.0, np.float32), (3, np.int32)))
    out = dev.poison((24,), np.float32)
    dev.launch((1,), zero_d_element_ops, (s, t, u, out))
    np.testing.assert_array_equal(dev.get(out), np.repeat([2.5, 3.0, 5.0], 8))
    assert dev.get(t)[()] == 7.0 and dev.get(u)[()] == 100


@ct.kernel
def empty_array_element_ops(x, y, out):
    i = ct.arange(8, dtype=ct.int32)
    ct.store(out, (0,), ct.gather(x, i, padding_value=5))
    ct.scatter(x, i, 3)
    ct.store(out, (1,), ct.atomic_cas(x, i, 0, 4))
    ct.store(out, (2,), ct.atomic_cas(y, (i % 3, i), 1, 4))
    ct.atomic_add(x, i, 1)
    ct.atomic_xchg(y, (i % 3, i), 1)


def test_element_ops_on_empty_arrays(dev) -> None:
    """Every lane of an array with no elements is out of bounds: gather pads, scatter and the
    atomics do nothing, compare-and-swap reports `expected`. (The Triton backend's
    compare-and-swap sent its masked-off lanes to element 0, which an empty array does not
    have: a crash under the CPU interpreter, an illegal address on the GPU.)"""
    x, y = dev.put(np.zeros(0, np.int32)), dev.put(np.zeros((3, 0), np.int32))
    out = dev.poison((24,), np.int32)
    dev.launch((1,), empty_array_element_ops, (x, y, out))
    np.testing.assert_array_equal(dev.get(out), np.repeat([5, 0, 1], 8))


# ---- hints ---------------------------------------------------------------------------------------------
@ct.kernel
def hinted_copy(x, idx, out, back):
    t = ct.load(x, (ct.bid(0), 0, ct.bid(1)), (2, 4, 2), order=(2, 0, 1), padding_mode=ct.PaddingMode.NAN,
                latency=7, allow_tma=False)
    ct.store(out, (ct.bid(0), 0, ct.bid(1)), t, order=(2, 0, 1), latency=1, allow_tma=True)
    i = ct.load(idx, (0,), (8,), latency=10)
    ct.scatter(back, i, ct.gather(x, (i, 1, i), latency=2, padding_value=-1.0), latency=3)


def test_latency_and_allow_tma_hints_change_nothing(dev) -> None:
    """A transposed 3-D copy with odd sizes and element accesses, hinted: results as without."""
    x = rng("hints").standard_normal((3, 5, 7)).astype(np.float32)
    idx = np.array([0, 2, 9, -1, 1, 4, 3, 6], np.int32)
    out, back = dev.poison((3, 5, 7), np.float32), dev.poison((9,), np.float32)
    dev.launch((4, 3), hinted_copy, (dev.put(x), dev.put(idx), out, back))
    np.testing.assert_array_equal(dev.get(out), x)
    want = np.full(9, np.nan, np.float32)
    for i in idx:
        if 0 <= i < 9:
            want[i] = x[i, 1, i] if i < 3 else -1.0
    assert_bits_equal(dev.get(back), want)


# ---- operand shapes ------------------------------------------------------------------------------------
def _gather_wide_mask(x, y): ct.store(y, (0,), ct.gather(x, 2, mask=ct.arange(8, dtype=ct.int32) > 3))
def _gather_0d_wide_mask(s, y): ct.store(y, (0,), ct.gather(s, (), mask=ct.arange(8, dtype=ct.int32) > 3))
def _gather_wide_padding(x, y): ct.store(y, (0,), ct.gather(x, 2, padding_value=ct.zeros((8,), ct.float32)))
def _scatter_wide_value(x, y): ct.scatter(x, 2, ct.arange(8, dtype=ct.float32))
def _add_wide_update(x, y): ct.atomic_add(x, 2, ct.ones((8,), ct.float32))
def _cas_wide_desired(x, y): ct.atomic_cas(x, ct.arange(4, dtype=ct.int32)[:, None], 0.0, ct.ones((4, 8), ct.float32))


@pytest.mark.parametrize("body", [_gather_wide_mask, _gather_0d_wide_mask, _gather_wide_padding, _scatter_wide_value,
                                  _add_wide_update, _cas_wide_desired], ids=lambda f: f.__name__.strip("_"))
def test_operands_must_broadcast_to_the_index_shape(dev, body: Callable) -> None:
    """The index tiles alone give the shape of a gather, scatter or atomic; a mask, padding,
    value or update must broadcast to it (cuTile: "... is not broadcastable to the index
    shape"). Widening it instead made a scatter of eight values to one index eight racing
    writes, and a 0-d array's gather with a tile mask a tile on the interpreter but a
    compile error in the Triton code."""
    kernel = ct.kernel(body)
    x = dev.put(np.zeros(() if "0d" in body.__name__ else (8,), np.float32))
    with pytest.raises(ct.TileTypeError, match=r"is not broadcastable to the index shape"):
        dev.launch((1,), kernel, (x, dev.poison((8,), np.float32)))
