"""Reductions (sum/prod/max/min/argmax/argmin) and scans (cumsum/cumprod) against NumPy.

A single block loads the whole (odd-sized) array into a power-of-two tile; lanes outside the
array are replaced by the reduction's identity (a mask built from `ct.arange` and the runtime
array shape), so the result only depends on the real elements. The result is stored into a
poisoned output of the reference's shape (lanes of the padded tile outside it are dropped).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import assert_bits_equal, assert_close, is_float, np_dtype, random_array, rng, wrap


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def reduce_kernel(op: Callable, ndim: int, ident: Any, **kw: Any) -> Any:
    """Kernel: load the whole array (2-D or 3-D) as one tile, mask the padding to `ident`,
    apply `op(t, **kw)`, store the result at the origin of `out`."""
    if ndim == 2:
        @ct.kernel
        def k2(x, out, T0: ct.Constant[int], T1: ct.Constant[int]):
            t = ct.load(x, (0, 0), (T0, T1), padding_mode=ct.PaddingMode.ZERO)
            valid = (ct.arange(T0, dtype=ct.int32)[:, None] < x.shape[0]) & \
                    (ct.arange(T1, dtype=ct.int32)[None, :] < x.shape[1])
            r = op(ct.where(valid, t, ident), **kw)
            ct.static_assert(r.dtype == out.dtype, "result dtype")
            ct.store(out, (0,) * r.ndim, r)
        return k2

    @ct.kernel
    def k3(x, out, T0: ct.Constant[int], T1: ct.Constant[int], T2: ct.Constant[int]):
        t = ct.load(x, (0, 0, 0), (T0, T1, T2), padding_mode=ct.PaddingMode.ZERO)
        i0 = ct.arange(T0, dtype=ct.int32)[:, None, None]
        i1 = ct.arange(T1, dtype=ct.int32)[None, :, None]
        i2 = ct.arange(T2, dtype=ct.int32)[None, None, :]
        valid = (i0 < x.shape[0]) & (i1 < x.shape[1]) & (i2 < x.shape[2])
        r = op(ct.where(valid, t, ident), **kw)
        ct.static_assert(r.dtype == out.dtype, "result dtype")
        ct.store(out, (0,) * r.ndim, r)
    return k3


def run_reduce(dev: Any, op: Callable, x: np.ndarray, ident: Any, out_shape: tuple[int, ...],
               out_dtype: Any, **kw: Any) -> np.ndarray:
    out = dev.poison(out_shape, out_dtype)
    tile = tuple(next_pow2(n) for n in x.shape)
    dev.launch((1,), reduce_kernel(op, x.ndim, ident, **kw), (dev.put(x), out, *tile))
    return dev.get(out)


def identity(name: str, dtype: np.dtype) -> Any:
    if name == "sum":
        return False if dtype.kind == "b" else 0
    if name == "prod":
        return True if dtype.kind == "b" else 1
    big = name in ("min", "argmin")
    if is_float(dtype):
        return float("inf") if big else float("-inf")
    if dtype.kind == "b":
        return big
    info = np.iinfo(dtype)
    return int(info.max) if big else int(info.min)


def ref_reduce(name: str, x: np.ndarray, axis: Any, keepdims: bool, propagate_nan: bool = False) -> np.ndarray:
    """Reference in float64 / exact integers (wrapped to the result dtype by the caller).
    argmax/argmin with axis=None give the flat index in the padded power-of-two tile."""
    if name in ("argmax", "argmin"):
        v = x.astype(np.float64) if is_float(x.dtype) else x.astype(np.int64)
        if axis is None:
            pos = np.unravel_index(int(ref_reduce(name, x.reshape(-1)[None, :], 1, False, propagate_nan)[0]),
                                   x.shape)
            r = np.int64(np.ravel_multi_index(pos, tuple(next_pow2(n) for n in x.shape)))
            return r.reshape((1,) * x.ndim) if keepdims else r
        if is_float(x.dtype):
            nan = np.isnan(v)
            if propagate_nan:
                # the first NaN wins; otherwise the first extreme
                fill = np.inf if name == "argmax" else -np.inf
                v = np.where(nan, fill, v)
            else:
                v = np.where(nan, -np.inf if name == "argmax" else np.inf, v)
        pick = np.argmax if name == "argmax" else np.argmin
        r = pick(v, axis=axis, keepdims=keepdims)
        return r.reshape((1,) * x.ndim) if keepdims and r.ndim != x.ndim else r
    if is_float(x.dtype):
        v = x.astype(np.float64)
        if name in ("max", "min"):
            f = (np.maximum if name == "max" else np.minimum) if propagate_nan else \
                (np.fmax if name == "max" else np.fmin)
            return f.reduce(v, axis=axis, keepdims=keepdims)
        return (np.sum if name == "sum" else np.prod)(v, axis=axis, keepdims=keepdims)
    v = x.astype(object)
    if name == "sum":
        return np.sum(v, axis=axis, keepdims=keepdims)
    if name == "prod":
        return np.prod(v, axis=axis, keepdims=keepdims)
    return (np.max if name == "max" else np.min)(x, axis=axis, keepdims=keepdims)


OPS = {"sum": ct.sum, "prod": ct.prod, "max": ct.max, "min": ct.min, "argmax": ct.argmax, "argmin": ct.argmin}


def _input(name: str, shape: tuple[int, ...], dtype: str, g: np.random.Generator) -> np.ndarray:
    d = np_dtype(dtype)
    if name == "prod":
        if is_float(d):
            return g.uniform(0.85, 1.15, shape).astype(d)
        return random_array(g, shape, d, -2, 3)          # products overflow and wrap
    if name == "sum" and is_float(d):
        return g.uniform(0.25, 2.0, shape).astype(d)     # no cancellation in low precision
    if is_float(d):
        x = np.round(g.uniform(-4, 4, shape) * 2).astype(d)   # few values: ties
        return x
    return random_array(g, shape, d, -100 if d.kind == "i" else 0, 100)


def _out_dtype(name: str, dtype: str) -> np.dtype:
    if name in ("argmax", "argmin") or dtype == "bool_":
        return np.dtype(np.int32)
    return np_dtype(dtype)


def _check(name: str, got: np.ndarray, want: np.ndarray, out_dtype: np.dtype) -> None:
    if is_float(out_dtype):
        assert_close(got, np.asarray(want, np.float64).astype(out_dtype), out_dtype, msg=name)
    else:
        np.testing.assert_array_equal(got, wrap(np.asarray(want, dtype=object), out_dtype), err_msg=name)


AXES_2D = [(None, False), (None, True), (0, False), (1, False), (-1, True), (0, True), ((0, 1), False),
           ((1, 0), True)]
AXES_3D = [(None, False), (1, False), (2, True), ((0, 2), False), ((-1, 0), True), ((0, 1, 2), False)]


@pytest.mark.parametrize("axis, keepdims", AXES_2D)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reduce_2d(dev, name: str, dtype: str, axis: Any, keepdims: bool) -> None:
    g = rng(name, dtype, str(axis), keepdims)
    x = _input(name, (5, 13), dtype, g)
    want = ref_reduce(name, x, axis, keepdims)
    od = _out_dtype(name, dtype)
    got = run_reduce(dev, OPS[name], x, identity(name, x.dtype), np.shape(want), od, axis=axis, keepdims=keepdims)
    _check(name, got, want, od)


@pytest.mark.parametrize("axis, keepdims", AXES_3D)
@pytest.mark.parametrize("name, dtype", [("sum", "float32"), ("sum", "bfloat16"), ("prod", "int64"),
                                         ("max", "float64"), ("min", "uint8"), ("sum", "int16")])
def test_reduce_3d(dev, name: str, dtype: str, axis: Any, keepdims: bool) -> None:
    g = rng(name, dtype, str(axis), keepdims)
    x = _input(name, (3, 5, 6), dtype, g)
    want = ref_reduce(name, x, axis, keepdims)
    od = _out_dtype(name, dtype)
    got = run_reduce(dev, OPS[name], x, identity(name, x.dtype), np.shape(want), od, axis=axis, keepdims=keepdims)
    _check(name, got, want, od)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reduce_bool_gives_int32(dev, name: str) -> None:
    x = rng(name).random((6, 11)) < 0.6
    ident = {"sum": False, "prod": True, "max": False, "min": True}[name]
    for axis in (None, 1):
        want = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[name](x.astype(np.int32), axis=axis)
        got = run_reduce(dev, OPS[name], x, ident, np.shape(want), np.int32, axis=axis)
        np.testing.assert_array_equal(got, want)


def test_sum_int8_keeps_dtype_and_wraps(dev) -> None:
    x = np.full((7, 9), 100, np.int8)
    got = run_reduce(dev, ct.sum, x, 0, (), np.int8)
    assert got == wrap(100 * 63, np.int8)
    got = run_reduce(dev, ct.sum, x, 0, (9,), np.int8, axis=0)
    assert (got == wrap(700, np.int8)).all()


def test_float16_sums_accumulate_in_float32(dev) -> None:
    """float16 sum and cumsum accumulate in float32 and round once per result on every backend:
    1024 plus fifteen 0.25s is 1027.75 -> 1028 in float16, where adding in float16 loses the
    quarters (1024 + 0.25 rounds back to 1024)."""
    x = np.array([[1024.0] + [0.25] * 15] * 3, np.float16)
    got = run_reduce(dev, ct.sum, x, 0, (3,), np.float16, axis=1)
    np.testing.assert_array_equal(got, np.full(3, 1028, np.float16))
    out = dev.poison(x.shape, np.float16)
    dev.launch((1,), scan_kernel(ct.cumsum, 0, axis=1, reverse=False), (dev.put(x), out, 4, 16))
    want = np.cumsum(x.astype(np.float32), axis=1).astype(np.float16)
    np.testing.assert_array_equal(dev.get(out), want)


def _signed_zeros_ref(name: str, values: np.ndarray, propagate_nan: bool) -> float:
    """max/min/sum of one slice: the extreme with -0.0 below +0.0 (NaN ignored, or winning);
    the sum -0.0 only where every element is -0.0 (the values are 0, -0.0, 1, -1, NaN)."""
    v = [float(e) for e in values]
    numbers = [e for e in v if e == e]
    if name == "sum":
        return math.copysign(0.0, -1.0) if all(e == 0 and math.copysign(1, e) < 0 for e in v) else sum(v)
    if not numbers or (propagate_nan and len(numbers) < len(v)):
        return math.nan
    key = lambda e: (e, math.copysign(1, e))  # noqa: E731  (-0.0 orders below +0.0)
    return max(numbers, key=key) if name == "max" else min(numbers, key=key)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_signed_zeros_reduce_in_any_order(dev, dtype: str) -> None:
    """The max of zeros is +0.0 where the slice holds a +0.0, the min -0.0 where it holds a -0.0
    (PTX max/min order -0.0 below +0.0), wherever they lie; a sum of -0.0s is -0.0 (as adding
    them in any order gives), one +0.0 or values cancelling make it +0.0. NumPy's reductions
    picked a zero by position, and its sums of -0.0s gave +0.0 or -0.0 by length and axis."""
    d = np_dtype(dtype)
    g = rng("signed zero reductions", dtype)
    x = np.where(g.random((8, 16)) < 0.5, -0.0, 0.0)
    x[0] = -0.0
    x[1, 5] = 0.0                                  # one +0.0 among -0.0s
    x[2] = 0.0
    x[2, 11] = -0.0                                # one -0.0 among +0.0s
    x[3, :3] = [1.0, -1.0, np.nan]                 # cancelling values, a NaN
    x[4, 7] = np.nan
    x[:, 0] = -0.0                                 # a column of -0.0s only
    x = x.astype(d)
    for name, op in (("max", ct.max), ("min", ct.min), ("sum", ct.sum)):
        for nan_wins in ((False, True) if name != "sum" else (False,)):
            kw = {"propagate_nan": True} if nan_wins else {}
            for axis in (1, 0, None):
                rows = x.astype(np.float64).reshape(1, -1) if axis is None else np.moveaxis(x.astype(np.float64), axis, -1)
                want = np.array([_signed_zeros_ref(name, r, nan_wins) for r in rows]).astype(d)
                got = run_reduce(dev, op, x, 0, np.shape(want) if axis is not None else (), d, axis=axis, **kw)
                assert_bits_equal(np.reshape(got, want.shape), want, msg=f"{name} axis={axis} propagate_nan={nan_wins}")


@pytest.mark.parametrize("propagate_nan", [False, True])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_nan(dev, name: str, propagate_nan: bool) -> None:
    g = rng(name, propagate_nan)
    x = g.standard_normal((8, 16)).astype(np.float32)   # whole tiles: padding would hide all-NaN rows
    x[g.random(x.shape) < 0.2] = np.nan
    x[2, :] = np.nan                                  # an all-NaN row gives NaN either way
    x[3, :] = x[3, 0]                                 # all equal
    for axis in (None, 1, 0):
        want = ref_reduce(name, x, axis, False, propagate_nan)
        got = run_reduce(dev, OPS[name], x, identity(name, x.dtype), np.shape(want), np.float32,
                         axis=axis, propagate_nan=propagate_nan)
        assert_close(got, want.astype(np.float32), np.float32, msg=f"axis={axis}")


@pytest.mark.parametrize("axis, keepdims", [(None, False), (None, True), (0, False), (1, False), (1, True),
                                            (-2, True)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bool_"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_ties(dev, name: str, dtype: str, axis: Any, keepdims: bool) -> None:
    """int32 indices of the first extreme (ties → smallest index; axis None → flat index)."""
    g = rng(name, dtype, str(axis), keepdims)
    d = np_dtype(dtype)
    x = random_array(g, (6, 11), d, 0, 3)            # values 0..3: many ties
    want = ref_reduce(name, x, axis, keepdims)
    got = run_reduce(dev, OPS[name], x, identity(name, d), np.shape(want), np.int32, axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name, dtype, shape", [
    ("argmax", "int16", (512, 128)), ("argmin", "int8", (4, 32, 64)), ("argmax", "int32", (4, 32, 64)),
    ("argmin", "int64", (4, 32, 64)), ("argmax", "float16", (4, 32, 64))])
def test_argmax_argmin_all_axes_of_a_large_tile(dev, name: str, dtype: str, shape: tuple[int, ...]) -> None:
    """axis=None over a whole large tile with thousands of ties: the first in row-major order
    (on the GPU, Triton may reorder a reshape that only a reduction uses: the flattened values
    must not meet the index in a one-pass (value, index) reduction)."""
    g = rng(name, dtype, *shape)
    d = np_dtype(dtype)
    x = random_array(g, shape, d, -9, 9)
    want = ref_reduce(name, x, None, False)
    got = run_reduce(dev, OPS[name], x, identity(name, d), np.shape(want), np.int32, axis=None)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("propagate_nan", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_nan(dev, name: str, propagate_nan: bool) -> None:
    """NaN is ignored by default; with propagate_nan the first NaN wins."""
    g = rng(name, propagate_nan)
    x = np.round(g.uniform(-3, 3, (6, 11))).astype(np.float32)
    x[g.random(x.shape) < 0.25] = np.nan
    x[0, 0] = np.nan
    x[1, 5] = np.nan
    x[1, :5] = -1.0
    for axis in (None, 1, 0):
        want = ref_reduce(name, x, axis, False, propagate_nan)
        got = run_reduce(dev, OPS[name], x, identity(name, x.dtype), np.shape(want), np.int32,
                         axis=axis, propagate_nan=propagate_nan)
        np.testing.assert_array_equal(got, want, err_msg=f"axis={axis}")


# ---- scans ----------------------------------------------------------------------------------------------
def scan_kernel(op: Callable, ident: Any, **kw: Any) -> Any:
    @ct.kernel
    def k(x, out, T0: ct.Constant[int], T1: ct.Constant[int]):
        t = ct.load(x, (0, 0), (T0, T1), padding_mode=ct.PaddingMode.ZERO)
        valid = (ct.arange(T0, dtype=ct.int32)[:, None] < x.shape[0]) & \
                (ct.arange(T1, dtype=ct.int32)[None, :] < x.shape[1])
        r = op(ct.where(valid, t, ident), **kw)
        ct.static_assert(r.dtype == out.dtype, "result dtype")
        ct.static_assert(r.shape == (T0, T1), "result shape")
        ct.store(out, (0, 0), r)
    return k


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "sum", "prod", "max", "min"])
def test_flush_to_zero_flushes_the_first_element(dev, name: str) -> None:
    """flush_to_zero flushes every subnormal operand, the first of a scan (and the one element
    of a length-1 reduction) too: a cumsum starting with 1e-40 starts with 0.0, a max of
    [-1e-40] is -0.0."""
    x = np.full((4, 8), 1e-40, np.float32)
    x[1] = -1e-40
    x[2] = 1.5
    x[3, 1:] = 2.0
    scan = name.startswith("cum")
    if scan:
        out = dev.poison(x.shape, np.float32)
        op = ct.cumsum if name == "cumsum" else ct.cumprod
        dev.launch((1,), scan_kernel(op, 0, axis=1, flush_to_zero=True), (dev.put(x), out, 4, 8))
        got = dev.get(out)[:, 0]
    else:
        op = {"sum": ct.sum, "prod": ct.prod, "max": ct.max, "min": ct.min}[name]
        got = run_reduce(dev, op, x[:, :1], 0, (4,), np.float32, axis=1, flush_to_zero=True)
    assert_bits_equal(got, np.array([0.0, -0.0, 1.5, 0.0], np.float32), msg=name)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name, dtype", [("cumsum", "float32"), ("cumsum", "int32"), ("cumsum", "int8"),
                                         ("cumsum", "float16"), ("cumprod", "float32"), ("cumprod", "int32"),
                                         ("cumsum", "bool_")])
def test_scan(dev, name: str, dtype: str, axis: int, reverse: bool) -> None:
    g = rng(name, dtype, axis, reverse)
    d = np_dtype(dtype)
    shape = (6, 11)
    if name == "cumprod":
        x = g.uniform(0.8, 1.25, shape).astype(d) if is_float(d) else random_array(g, shape, d, -3, 3)
    elif is_float(d):
        x = g.uniform(0.25, 2, shape).astype(d)
    else:
        x = random_array(g, shape, d, -100, 100)
    ident = (1 if name == "cumprod" else 0) if d.kind != "b" else False
    od = np.dtype(np.int32) if d.kind == "b" else d
    op = ct.cumsum if name == "cumsum" else ct.cumprod
    out = dev.poison(shape, od)
    tile = (8, 16)
    dev.launch((1,), scan_kernel(op, ident, axis=axis, reverse=reverse), (dev.put(x), out, *tile))
    v = x.astype(np.float64) if is_float(d) else x.astype(object)
    if reverse:
        v = np.flip(v, axis)
    ref = np.cumsum(v, axis=axis) if name == "cumsum" else np.cumprod(v, axis=axis)
    if reverse:
        ref = np.flip(ref, axis)
    _check(name, dev.get(out), ref, od)


# ---- reduce / scan with the user's combine function ----------------------------------------------------
SCALE = 0.5  # a Python constant the combine functions close over


def _absmax(a, b):
    return ct.maximum(ct.abs(a), ct.abs(b)) * (SCALE * 2)


@ct.kernel
def custom_reduce_kernel(x, out_absmax, out_val, out_idx, out_scan, out_rscan):
    t = ct.load(x, (0, 0), (8, 16), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out_absmax, (0, 0), ct.reduce(t, 1, _absmax, 0.0, keepdims=True))
    idx = ct.arange(16, dtype=ct.int32)[None, :] + ct.zeros((8, 16), dtype=ct.int32)

    def argmax_step(v0, i0, v1, i1):  # (value, index) pairs: the larger value, then the smaller index
        take = (v1 > v0) | ((v1 == v0) & (i1 < i0))
        return ct.where(take, v1, v0), ct.where(take, i1, i0)
    val, where = ct.reduce((t, idx), axis=-1, func=argmax_step, identity=(float("-inf"), 16))
    ct.store(out_val, (0,), val)
    ct.store(out_idx, (0,), where)
    ct.store(out_scan, (0, 0), ct.scan(t, 1, lambda a, b: ct.maximum(a, b), float("-inf")))
    ct.store(out_rscan, (0, 0), ct.scan(t.astype(ct.int32), 0, lambda a, b: a + b, 0, reverse=True))


def test_reduce_and_scan_with_a_function(dev) -> None:
    """Custom reductions and scans: a helper closing over a constant, a (value, index) tuple
    reduction with keyword arguments and a negative axis, a lambda max-scan, a reversed int scan."""
    x = (rng("custom-reduce").standard_normal((8, 16)) * 4).astype(np.float32)
    x[3, 5] = x[3, 9] = x[3].max() + 1.0  # a tie: the first index wins
    outs = [dev.poison(s, d) for s, d in (((8, 1), np.float32), ((8,), np.float32), ((8,), np.int32),
                                          ((8, 16), np.float32), ((8, 16), np.int32))]
    dev.launch((1,), custom_reduce_kernel, (dev.put(x), *outs))
    absmax, val, idx, scan, rscan = (dev.get(o) for o in outs)
    np.testing.assert_array_equal(absmax[:, 0], np.abs(x).max(1))
    np.testing.assert_array_equal(val, x.max(1))
    np.testing.assert_array_equal(idx, x.argmax(1))
    np.testing.assert_array_equal(scan, np.maximum.accumulate(x, 1))
    xi = x.astype(np.int32)
    np.testing.assert_array_equal(rscan, np.flip(np.cumsum(np.flip(xi, 0), 0), 0))


@ct.kernel
def captured_scalar_kernel(x, p, ceiling: float, out_mod, out_scan):
    m = ct.gather(p, ())  # a runtime scalar, read from a 0-d array
    t = ct.load(x, (0, 0), (8, 16))
    ct.store(out_mod, (0,), ct.reduce(t, -1, lambda a, b: (a + b) % m, 0))
    f = t.astype(ct.float32)
    ct.store(out_scan, (0, 0), ct.scan(f, 1, lambda a, b: ct.minimum(a + b, ceiling), 0.0))  # saturating


def test_combine_functions_use_scalars_from_outside(dev) -> None:
    """A reduction's and a scan's combine functions using runtime scalars of the kernel (a value
    gathered from a 0-d array, a float argument), as cuTile allows; the sums saturate partway
    along the rows."""
    x = rng("captured-scalar").integers(0, 1000, (8, 16)).astype(np.int32)
    p = np.array(7, np.int32)
    outs = [dev.poison((8,), np.int32), dev.poison((8, 16), np.float32)]
    dev.launch((1,), captured_scalar_kernel, (dev.put(x), dev.put(p), 5000.0, *outs))
    mod, scan = (dev.get(o) for o in outs)
    np.testing.assert_array_equal(mod, x.sum(1) % 7)
    np.testing.assert_array_equal(scan, np.minimum(np.cumsum(x, 1), 5000).astype(np.float32))
