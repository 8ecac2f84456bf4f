"""Elementwise ops through the whole stack (front end → IR → backend), against NumPy references.

Every kernel loads (possibly partial) tiles of a 7x19 array with 4x8 tiles, applies one op and
stores the result into a poisoned output; `ct.static_assert` checks the result dtype (the
promotion rule) at compile time.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from optest_utils import (BF16, assert_bits_equal, assert_close, assert_within_ulps, is_float, np_dtype,
                          random_array, rng, round_tf32, tf32_edge_values, wrap)

SHAPE = (7, 19)
TILE = (4, 8)
GRID = (2, 3)
ZERO = ct.PaddingMode.ZERO


def unary_kernel(fn: Callable[[Any], Any]) -> Any:
    @ct.kernel
    def k(x, out, TM: ct.Constant[int], TN: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        t = ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
        r = fn(t)
        ct.static_assert(r.dtype == out.dtype, "result dtype")
        ct.store(out, (bm, bn), r)
    return k


def binary_kernel(fn: Callable[[Any, Any], Any]) -> Any:
    @ct.kernel
    def k(x, y, out, TM: ct.Constant[int], TN: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        a = ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(y, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
        r = fn(a, b)
        ct.static_assert(r.dtype == out.dtype, "result dtype")
        ct.store(out, (bm, bn), r)
    return k


def run_unary(dev: Any, fn: Callable, x: np.ndarray, out_dtype: Any) -> np.ndarray:
    out = dev.poison(x.shape, out_dtype)
    dev.launch(GRID, unary_kernel(fn), (dev.put(x), out, *TILE))
    return dev.get(out)


def run_binary(dev: Any, fn: Callable, x: np.ndarray, y: np.ndarray, out_dtype: Any) -> np.ndarray:
    out = dev.poison(x.shape, out_dtype)
    dev.launch(GRID, binary_kernel(fn), (dev.put(x), dev.put(y), out, *TILE))
    return dev.get(out)


# ---- binary arithmetic -----------------------------------------------------------------------------------
# Operator and function forms of every binary op (module-level: tile code needs their source).
def op_add(x, y): return x + y
def op_sub(x, y): return x - y
def op_mul(x, y): return x * y
def op_truediv(x, y): return x / y
def op_floordiv(x, y): return x // y
def op_mod(x, y): return x % y
def op_pow(x, y): return x ** y
def op_and(x, y): return x & y
def op_or(x, y): return x | y
def op_xor(x, y): return x ^ y
def op_lshift(x, y): return x << y
def op_rshift(x, y): return x >> y
def op_min(x, y): return min(x, y)
def op_max(x, y): return max(x, y)


def fn_add(x, y): return ct.add(x, y)
def fn_sub(x, y): return ct.sub(x, y)
def fn_mul(x, y): return ct.mul(x, y)
def fn_truediv(x, y): return ct.truediv(x, y)
def fn_floordiv(x, y): return ct.floordiv(x, y)
def fn_mod(x, y): return ct.mod(x, y)
def fn_pow(x, y): return ct.pow(x, y)
def fn_and(x, y): return ct.bitwise_and(x, y)
def fn_or(x, y): return ct.bitwise_or(x, y)
def fn_xor(x, y): return ct.bitwise_xor(x, y)
def fn_lshift(x, y): return ct.bitwise_lshift(x, y)
def fn_rshift(x, y): return ct.bitwise_rshift(x, y)
def fn_min(x, y): return ct.minimum(x, y)
def fn_max(x, y): return ct.maximum(x, y)
def fn_atan2(x, y): return ct.atan2(x, y)


def _py_floordiv(a: int, b: int) -> int:
    return a // b


BINARY = {
    # name: (operator form, function form, exact reference on Python ints / float64 values)
    "add": (op_add, fn_add, operator.add),
    "sub": (op_sub, fn_sub, operator.sub),
    "mul": (op_mul, fn_mul, operator.mul),
    "truediv": (op_truediv, fn_truediv, operator.truediv),
    "floordiv": (op_floordiv, fn_floordiv, None),
    "mod": (op_mod, fn_mod, None),
    "pow": (op_pow, fn_pow, None),
    "minimum": (op_min, fn_min, None),
    "maximum": (op_max, fn_max, None),
    "atan2": (None, fn_atan2, None),
    "and": (op_and, fn_and, operator.and_),
    "or": (op_or, fn_or, operator.or_),
    "xor": (op_xor, fn_xor, operator.xor),
    "lshift": (op_lshift, fn_lshift, operator.lshift),
    "rshift": (op_rshift, fn_rshift, operator.rshift),
}
FLOAT_OPS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "minimum", "maximum", "atan2"]
INT_OPS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "minimum", "maximum",
           "and", "or", "xor", "lshift", "rshift"]
FLOAT_DTYPES = ["float32", "float16", "bfloat16", "float64"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def _float_inputs(name: str, d: np.dtype, seed: tuple) -> tuple[np.ndarray, np.ndarray]:
    g = rng(*seed)
    if name in ("floordiv", "mod"):
        # x = (q + f) * y with f in [0.1, 0.9]: the quotient is never near an integer, so
        # floor(x / y) is the same in every precision.
        y = (g.uniform(0.5, 3.0, SHAPE) * g.choice([-1, 1], SHAPE)).astype(d)
        q = g.integers(-6, 6, SHAPE)
        f = g.uniform(0.1, 0.9, SHAPE)
        x = ((q + f) * y.astype(np.float64)).astype(d)
        return x, y
    if name == "pow":
        return g.uniform(0.1, 3.0, SHAPE).astype(d), g.uniform(-2.0, 2.0, SHAPE).astype(d)
    if name == "truediv":
        y = (g.uniform(0.25, 4.0, SHAPE) * g.choice([-1, 1], SHAPE)).astype(d)
        return g.uniform(-4, 4, SHAPE).astype(d), y
    x, y = g.uniform(-4, 4, SHAPE).astype(d), g.uniform(-4, 4, SHAPE).astype(d)
    y[0, :5] = x[0, :5]                  # equal operands (min/max ties, exact zeros of sub)
    return x, y


def _float_reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a, b = x.astype(np.float64), y.astype(np.float64)
    if name == "floordiv":
        return np.floor(a / b)
    if name == "mod":
        return a - np.floor(a / b) * b
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
            "pow": np.power, "minimum": np.minimum, "maximum": np.maximum,
            "atan2": np.arctan2}[name](a, b)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name, form", [(n, f) for n in FLOAT_OPS for f in ("op", "fn") if BINARY[n][f == "fn"]])
def test_binary_float(dev, name: str, dtype: str, form: str) -> None:
    f = BINARY[name][0 if form == "op" else 1]
    d = np_dtype(dtype)
    x, y = _float_inputs(name, d, seed=(name, dtype))
    got = run_binary(dev, f, x, y, d)
    want = _float_reference(name, x, y)
    if name == "mod":
        # the remainder of a float division carries the absolute error of |y|
        tol = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
        assert_close(got, want.astype(d), d, rtol=0, atol=tol * 8, msg=f"{name} {dtype}")
        assert (np.sign(got.astype(np.float64)) * np.sign(y.astype(np.float64)) >= 0).all(), \
            "mod result must take the sign of the divisor"
    else:
        assert_close(got, want.astype(d), d, msg=f"{name} {dtype}")


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["pow", "atan2"])
def test_pow_atan2_special_values(dev, name: str, dtype: str) -> None:
    """pow and atan2 of every pair of signed zeros, +-1, odd and non-integer values, infinities
    and NaN give C99's results (libdevice's on the GPU): (-0.0) ** 3 = -0.0, (-0.0) ** -1 =
    -inf, (-1) ** inf = 1, (-inf) ** 0.5 = inf, atan2(+-0, -0.0) = +-pi, atan2(-0.0, 1) = -0.0.
    Triton's CPU interpreter cannot call libdevice; its stand-ins got these wrong."""
    d = np_dtype(dtype)
    pairs = [(a, b) for a in SPECIAL for b in SPECIAL]
    pairs += [(-2.0, 3.0), (-0.0, 0.5), (-np.inf, -3.0)] * 4
    x, y = (np.array(v, np.float64).reshape(SHAPE).astype(d) for v in zip(*pairs[:SHAPE[0] * SHAPE[1]]))
    with np.errstate(all="ignore"):
        want = _float_reference(name, x, y).astype(d)
    got = run_binary(dev, BINARY[name][1], x, y, d)
    assert_close(got, want, d, msg=f"{name} {dtype}")
    w64 = want.astype(np.float64)
    exact = (w64 == 0) | np.isinf(w64)
    np.testing.assert_array_equal(np.signbit(got.astype(np.float64))[exact], np.signbit(w64)[exact],
                                  err_msg=f"{name} {dtype}: sign of zeros and infinities")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pow_of_integer_exponents_is_exact(dev, dtype: str) -> None:
    """x ** n is the exact power rounded once on the CPU backends: in float16, 3.0 ** 7 = 2187
    is a tie that rounds to 2188; the float64 stand-in under Triton's CPU interpreter,
    exp2(n * log2(x)), gave 2186.9999999999995 and so 2186. On the GPU libdevice's pow is not
    exact (the H200 gave 1 ulp off in 18 of 133 float32 cases, gpu-tests-h200-2026-12-01-av.log;
    float16 3 ** 7, computed in float32 just below the tie, rounds to 2186): within 2 ulp of the
    result's dtype there, CUDA's documented bound for pow."""
    d = np_dtype(dtype)
    g = rng("integer powers", dtype)
    x = g.choice([1.0, 1.5, 2.0, 3.0, 0.5, 0.25, 5.0, 7.0, -3.0, -0.5], SHAPE).astype(d)
    y = g.choice([0.0, 1.0, 2.0, 3.0, 5.0, 7.0, -1.0, -2.0], SHAPE).astype(d)
    x[0, :2], y[0, :2] = 3.0, 7.0
    want = (x.astype(np.float64) ** y.astype(np.float64)).astype(d)   # exact in float64, rounded once
    got = run_binary(dev, op_pow, x, y, d)
    if dev.name != "triton":
        assert_bits_equal(got, want, msg=f"pow {dtype}")
        return
    signed = np.dtype(f"int{8 * d.itemsize}")  # ulps apart: the distance of same-sign values' bits
    apart = np.abs(got.view(signed).astype(np.int64) - want.view(signed).astype(np.int64))
    assert np.all((np.sign(got) == np.sign(want)) & (apart <= 2)), f"pow {dtype}: {apart.max()} ulp"


def _bf16_subnormals(g: np.random.Generator) -> np.ndarray:
    """bfloat16 subnormals of both signs (every mantissa), some zeros and normal numbers."""
    bits = g.integers(1, 0x80, SHAPE, dtype=np.uint16) | (g.integers(0, 2, SHAPE, dtype=np.uint16) << 15)
    bits[0, :3] = [0x0000, 0x8000, 0x0080]   # +0, -0, the smallest normal
    return bits.view(ml_dtypes.bfloat16)


def op_lt(x, y): return x < y
def sum_rows(x): return ct.broadcast_to(ct.sum(x, axis=1, keepdims=True), x.shape)


def test_bfloat16_subnormal_operands(dev) -> None:
    """bfloat16 arithmetic runs in float32 on every backend without flushing subnormal
    operands (flush_to_zero is a float32 option, off by default): the sum, comparison and
    minimum of bfloat16 subnormals are exact. Triton's CPU interpreter flushed them when
    widening the operands to float32."""
    g = rng("bf16-subnormals")
    x, y = _bf16_subnormals(g), _bf16_subnormals(g)
    a, b = x.astype(np.float64), y.astype(np.float64)
    assert_bits_equal(run_binary(dev, op_add, x, y, BF16), (a + b).astype(BF16))   # exact
    assert_bits_equal(run_binary(dev, fn_min, x, y, BF16), np.where(b < a, y, x))
    np.testing.assert_array_equal(run_binary(dev, op_lt, x, y, np.bool_), a < b)
    sums = np.add.reduceat(a, range(0, SHAPE[1], TILE[1]), axis=1).astype(BF16)  # each tile's rows
    got = run_unary(dev, sum_rows, x, BF16)
    np.testing.assert_array_equal(got, np.repeat(sums, TILE[1], axis=1)[:, :SHAPE[1]])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_floordiv_of_halves_floors_the_rounded_quotient(dev, dtype: str) -> None:
    """cuTile divides in the operands' dtype, then floors: where x / y lies just below an
    integer the quotient rounds up to it in float16/bfloat16 and `//` gives that integer (as
    torch.floor(x / y) does), not one less."""
    d = np_dtype(dtype)
    g = rng("floordiv-halves", dtype)
    y = g.uniform(1, 4, SHAPE).astype(d)
    k = g.integers(1, 40, SHAPE)
    x = (k * y.astype(np.float64) * (1 - g.uniform(0, 2.0**-9, SHAPE))).astype(d)
    quotient = (x.astype(np.float32) / y.astype(np.float32)).astype(d).astype(np.float64)
    want = np.floor(quotient)
    assert (want != np.floor(x.astype(np.float64) / y.astype(np.float64))).sum() > 10  # the case is there
    for f in (op_floordiv, fn_floordiv):
        got = run_binary(dev, f, x, y, d)
        np.testing.assert_array_equal(got.astype(np.float64), want)


def _int_inputs(name: str, d: np.dtype, seed: tuple) -> tuple[np.ndarray, np.ndarray]:
    g = rng(*seed)
    info = np.iinfo(d)
    big_lo = max(int(info.min), -2**40)
    big_hi = min(int(info.max), 2**40)
    if name in ("lshift", "rshift"):
        x = random_array(g, SHAPE, d, info.min, info.max)
        y = g.integers(0, 8 * d.itemsize - 1, SHAPE, endpoint=True).astype(d)
        return x, y
    if name in ("floordiv", "mod", "truediv"):
        lim = min(int(info.max), 2**20)  # |x| < 2**24: exact in float32 for truediv
        x = random_array(g, SHAPE, d, max(int(info.min), -lim), lim)
        y = random_array(g, SHAPE, d, max(int(info.min), -9), 9)
        y[y == 0] = 3
        if d.kind == "i":
            y[0, :4] = [-1, -2, -3, -7]
            x[0, :4] = [7, -7, 7, -7]
        return x, y
    x = random_array(g, SHAPE, d, info.min if d.itemsize < 8 else big_lo, info.max if d.itemsize < 8 else big_hi)
    y = random_array(g, SHAPE, d, info.min if d.itemsize < 8 else big_lo, info.max if d.itemsize < 8 else big_hi)
    y[0, :5] = x[0, :5]
    return x, y


@pytest.mark.parametrize("form", ["op", "fn"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", INT_OPS)
def test_binary_int(dev, name: str, dtype: str, form: str) -> None:
    """Integer arithmetic wraps; `//` and `%` follow Python's sign rules; `>>` is arithmetic
    for signed and logical for unsigned types; `/` gives float32."""
    f = BINARY[name][0 if form == "op" else 1]
    d = np.dtype(dtype)
    x, y = _int_inputs(name, d, seed=(name, dtype))
    if name == "truediv":
        got = run_binary(dev, f, x, y, np.float32)
        assert_close(got, (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32), np.float32)
        return
    xs, ys = x.astype(object), y.astype(object)
    if name in ("minimum", "maximum"):
        want = np.minimum(x, y) if name == "minimum" else np.maximum(x, y)
    elif name == "floordiv":
        want = wrap(np.vectorize(_py_floordiv, otypes=[object])(xs, ys), d)
    elif name == "mod":
        want = wrap(np.vectorize(operator.mod, otypes=[object])(xs, ys), d)
    else:
        want = wrap(np.vectorize(BINARY[name][2], otypes=[object])(xs, ys), d)
    got = run_binary(dev, f, x, y, d)
    np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype}")


@pytest.mark.parametrize("name", ["and", "or", "xor"])
def test_bitwise_bool(dev, name: str) -> None:
    g = rng(5)
    x, y = g.random(SHAPE) < 0.5, g.random(SHAPE) < 0.5
    got = run_binary(dev, BINARY[name][0], x, y, np.bool_)
    np.testing.assert_array_equal(got, BINARY[name][2](x, y))


# ---- Python semantics of // and % on negative operands --------------------------------------------------
def test_floordiv_mod_python_signs_int(dev) -> None:
    vals = [7, -7, 7, -7, 0, 1, -1, 6, -6, 100, -100, 13, -13, 2147483647, -2147483647]
    divs = [2, 2, -2, -2, 3, -3, -3, 3, -3, 7, -7, -5, 5, 2, -2]
    n = len(vals)
    x = np.zeros(SHAPE, np.int32)
    y = np.ones(SHAPE, np.int32)
    x.flat[:n], y.flat[:n] = vals, divs
    q = run_binary(dev, op_floordiv, x, y, np.int32)
    r = run_binary(dev, op_mod, x, y, np.int32)
    np.testing.assert_array_equal(q, [[int(a) // int(b) for a, b in zip(u, v)] for u, v in zip(x, y)])
    np.testing.assert_array_equal(r, [[int(a) % int(b) for a, b in zip(u, v)] for u, v in zip(x, y)])


@ct.kernel
def wrapped_floordiv_mod_kernel(q, r):
    u = ct.arange(16, dtype=ct.int32) + 2147483640   # wraps past 2**31 - 1 to negative values
    ct.store(q, (0,), u // 3)
    ct.store(r, (0,), u % 5)


def test_floordiv_mod_python_signs_after_wraparound(dev) -> None:
    """Integer overflow wraps and // and % keep Python's signs on the wrapped values too (the
    range analysis, passes/ranges.py, must not call `arange + 2147483640` non-negative)."""
    q, r = dev.poison((16,), np.int32), dev.poison((16,), np.int32)
    dev.launch((1,), wrapped_floordiv_mod_kernel, (q, r))
    u = [int(wrap(np.arange(16, dtype=np.int64) + 2147483640, np.int32)[i]) for i in range(16)]
    np.testing.assert_array_equal(dev.get(q), [v // 3 for v in u])
    np.testing.assert_array_equal(dev.get(r), [v % 5 for v in u])


def test_floordiv_mod_python_signs_float(dev) -> None:
    vals = [7.5, -7.5, 7.5, -7.5, 0.0, 1.0, -1.0, 6.0, -6.0, 5.25, -5.25]
    divs = [2.0, 2.0, -2.0, -2.0, 3.0, -3.0, -3.0, 3.0, -3.0, 0.5, -0.5]
    n = len(vals)
    x = np.zeros(SHAPE, np.float32)
    y = np.ones(SHAPE, np.float32)
    x.flat[:n], y.flat[:n] = vals, divs
    q = run_binary(dev, op_floordiv, x, y, np.float32)
    r = run_binary(dev, op_mod, x, y, np.float32)
    np.testing.assert_array_equal(q, [[float(a) // float(b) for a, b in zip(u, v)] for u, v in zip(x, y)])
    np.testing.assert_array_equal(r, [[float(a) % float(b) for a, b in zip(u, v)] for u, v in zip(x, y)])


# ---- minimum / maximum with NaN ---------------------------------------------------------------------------
def min_nan(x, y): return ct.minimum(x, y, propagate_nan=True)
def max_nan(x, y): return ct.maximum(x, y, propagate_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_minimum_maximum_nan(dev, dtype: str) -> None:
    g = rng(11)
    d = np_dtype(dtype)
    x, y = g.standard_normal(SHAPE).astype(d), g.standard_normal(SHAPE).astype(d)
    x[g.random(SHAPE) < 0.3] = np.nan
    y[g.random(SHAPE) < 0.3] = np.nan
    x[0, 0] = y[0, 0] = np.nan
    for f, want in ((fn_min, np.fmin(x, y)), (fn_max, np.fmax(x, y)), (op_min, np.fmin(x, y)),
                    (min_nan, np.minimum(x, y)), (max_nan, np.maximum(x, y))):
        assert_bits_equal(run_binary(dev, f, x, y, d), want, msg=f.__name__)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_minimum_maximum_order_signed_zeros(dev, dtype: str) -> None:
    """-0.0 lies below +0.0 (PTX min/max, IEEE 754-2019 minimumNumber / minimum) in either
    operand order: min(0.0, -0.0) and min(-0.0, 0.0) are -0.0, the maxima +0.0; NumPy returns
    either zero (by operand order and array length), which both CPU backends used to show."""
    g = rng("signed zeros", dtype)
    d = np_dtype(dtype)
    x = g.choice([0.0, -0.0, np.nan, 1.0], SHAPE, p=[0.4, 0.4, 0.1, 0.1]).astype(d)
    y = g.choice([0.0, -0.0, np.nan, -1.0], SHAPE, p=[0.4, 0.4, 0.1, 0.1]).astype(d)
    a, b = x.astype(np.float64), y.astype(np.float64)
    zeros = (a == 0) & (b == 0)
    assert (zeros & (np.signbit(a) != np.signbit(b))).sum() > 20  # the case is there
    for f, lowest, nan_wins in ((fn_min, True, False), (op_min, True, False), (min_nan, True, True),
                                (fn_max, False, False), (op_max, False, False), (max_nan, False, True)):
        pick = (a < b) if lowest else (a > b)
        tie = np.signbit(a) | np.signbit(b) if lowest else np.signbit(a) & np.signbit(b)
        want = np.where(zeros, np.where(tie, -0.0, 0.0), np.where(pick, a, b))
        want = np.where(np.isnan(a), np.nan if nan_wins else b, np.where(np.isnan(b), np.nan if nan_wins else a, want))
        assert_bits_equal(run_binary(dev, f, x, y, d), want.astype(d), msg=f.__name__)


@ct.kernel
def constant_extremes_kernel(out, Z: ct.Constant[float]):
    ct.store(out, (0,), ct.astile((ct.minimum(math.nan, 1.0), ct.maximum(1.0, math.nan),
                                   ct.minimum(1.0, math.nan, propagate_nan=True), min(math.nan, 2.0, 3.0),
                                   ct.minimum(0.0, Z), ct.maximum(Z, 0.0), min(0.0, Z), max(Z, 0.0, -1.0)),
                                  dtype=ct.float32))


def test_minimum_maximum_of_constants(dev) -> None:
    """min/max of loose constants (folded by the front end) as of tiles: a NaN ignored unless
    propagate_nan, -0.0 below +0.0 (Python's min/max returned the first operand: nan, 0.0)."""
    out = dev.poison((8,), np.float32)
    dev.launch((1,), constant_extremes_kernel, (out, -0.0))
    assert_bits_equal(dev.get(out), np.array([1, 1, np.nan, 2, -0.0, 0, -0.0, 0], np.float32))


# ---- promotion rules ------------------------------------------------------------------------------------
def mul3(x): return x * 3
def mul_half(x): return x * 2.5
def sub_float(x): return x - 20.5
def add_1(x): return x + 1
def neg_i(x): return -x
def div_2(x): return x / 2
def floordiv_neg3(x): return x // -3
def mod_neg3(x): return x % -3
def pow2(x): return x ** 2
def rpow(x): return 2.0 ** x
def rsub(x): return 10 - x
def rdiv(x): return 1 / x


@pytest.mark.parametrize("fn, in_dtype, out_dtype", [
    (mul3, "float16", "float16"),          # f16 tile * 3 stays f16
    (mul_half, "float16", "float16"),
    (mul3, "bfloat16", "bfloat16"),
    (sub_float, "int8", "float32"),        # int tile with a loose float -> float32
    (add_1, "int8", "int8"),
    (add_1, "uint8", "uint8"),
    (mul3, "int64", "int64"),
    (div_2, "int32", "float32"),
    (div_2, "int16", "float32"),
    (div_2, "float16", "float16"),
    (floordiv_neg3, "int32", "int32"),
    (mod_neg3, "int32", "int32"),
    (floordiv_neg3, "float32", "float32"),
    (pow2, "float32", "float32"),
    (pow2, "float16", "float16"),
    (rpow, "float32", "float32"),
    (rsub, "int16", "int16"),
    (rdiv, "float64", "float64"),
    (neg_i, "int8", "int8"),
])
def test_promotion_with_constants(dev, fn: Callable, in_dtype: str, out_dtype: str) -> None:
    g = rng(3)
    di, do = np_dtype(in_dtype), np_dtype(out_dtype)
    x = random_array(g, SHAPE, di, -100, 100) if not is_float(di) else g.uniform(0.5, 3, SHAPE).astype(di)
    if di.kind == "i":
        x[0, :3] = [np.iinfo(di).min, np.iinfo(di).max, -1]
    got = run_unary(dev, fn, x, do)
    if is_float(do) or not np.issubdtype(di, np.integer):
        want = np.vectorize(lambda v: fn(float(v)), otypes=[np.float64])(x.astype(np.float64))
        assert_close(got, want.astype(do), do)
    else:
        want = wrap(np.vectorize(lambda v: fn(int(v)), otypes=[object])(x.astype(object)), do)
        np.testing.assert_array_equal(got, want)


def _same_dtype_pairs():
    return [("int8", "int8", "int8"), ("int8", "int16", "int16"), ("int16", "int64", "int64"),
            ("uint8", "uint32", "uint32"), ("float16", "float32", "float32"),
            ("bfloat16", "float32", "float32"), ("int32", "float16", "float16"),
            ("uint8", "bfloat16", "bfloat16"), ("int64", "float32", "float32"),
            ("bool_", "int8", "int8"), ("bool_", "float16", "float16"), ("float32", "float64", "float64")]


@pytest.mark.parametrize("dx, dy, dout", _same_dtype_pairs())
def test_promotion_table_add(dev, dx: str, dy: str, dout: str) -> None:
    """The result dtype of tile + tile follows the promotion table; ints wrap in the result."""
    g = rng(4)
    ax, ay, ao = np_dtype(dx), np_dtype(dy), np_dtype(dout)
    x = random_array(g, SHAPE, ax, -128, 127)
    y = random_array(g, SHAPE, ay, -128, 127)
    got = run_binary(dev, op_add, x, y, ao)
    if is_float(ao):
        want = (x.astype(np.float64) + y.astype(np.float64)).astype(ao)
        assert_close(got, want, ao)
    else:
        want = wrap(x.astype(object) + y.astype(object), ao)
        np.testing.assert_array_equal(got, want)


def test_int8_add_wraps(dev) -> None:
    x = np.full(SHAPE, 100, np.int8)
    y = np.full(SHAPE, 100, np.int8)
    got = run_binary(dev, op_add, x, y, np.int8)
    assert (got == -56).all()
    got = run_binary(dev, op_mul, x, y, np.int8)
    assert (got == wrap(10000, np.int8)).all()


@ct.kernel
def scalar_arg_kernel(x, out_f, out_i, s, n, TM: ct.Constant[int], TN: ct.Constant[int]):
    """Runtime scalar args are strict float32/int32: f16 tile * float arg -> f32;
    int8 tile // int arg -> int32."""
    bm, bn = ct.bid(0), ct.bid(1)
    t = ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
    r = t * s
    ct.static_assert(r.dtype == ct.float32)
    ct.store(out_f, (bm, bn), r)
    q = t.astype(ct.int8) // n
    ct.static_assert(q.dtype == ct.int32)
    ct.store(out_i, (bm, bn), q)


def test_runtime_scalar_operands(dev) -> None:
    g = rng(6)
    x = g.uniform(-50, 50, SHAPE).astype(np.float16)
    of, oi = dev.poison(SHAPE, np.float32), dev.poison(SHAPE, np.int32)
    dev.launch(GRID, scalar_arg_kernel, (dev.put(x), of, oi, 1.5, -3, *TILE))
    assert_close(dev.get(of), (x.astype(np.float64) * 1.5).astype(np.float32), np.float32)
    xi = np.trunc(x.astype(np.float64)).astype(np.int64)
    np.testing.assert_array_equal(dev.get(oi), xi // -3)


@ct.kernel
def signed_zero_arg_kernel(out, s):
    ct.store(out, (0,), ct.full((4,), s, out.dtype))


@pytest.mark.parametrize("value", [-0.0, np.float16(-0.0), np.float64(-0.0), BF16.type(-0.0), 0.0, -2.5])
def test_runtime_float_scalar_keeps_its_sign(dev, value: Any) -> None:
    """A float argument -0.0 arrives as -0.0 (Triton's CPU interpreter made every float argument
    equal to 0 into +0.0)."""
    dtype = np.float32 if type(value) is float else np.asarray(value).dtype
    out = dev.poison((4,), dtype)
    dev.launch((1,), signed_zero_arg_kernel, (out, value))
    assert_bits_equal(dev.get(out), np.full(4, value, dtype))


@ct.kernel
def broadcast_kernel(x, y, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    """(TM, 1) op (1, TN) broadcasts to (TM, TN)."""
    bm, bn = ct.bid(0), ct.bid(1)
    col = ct.load(x, (bm, 0), (TM, 1), padding_mode=ct.PaddingMode.ZERO)
    row = ct.load(y, (0, bn), (1, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (bm, bn), col * 10.0 - row)


def test_broadcasting_operands(dev) -> None:
    g = rng(7)
    x = g.standard_normal((SHAPE[0], 1)).astype(np.float32)
    y = g.standard_normal((1, SHAPE[1])).astype(np.float32)
    out = dev.poison(SHAPE, np.float32)
    dev.launch(GRID, broadcast_kernel, (dev.put(x), dev.put(y), out, *TILE))
    assert_close(dev.get(out), (x.astype(np.float64) * 10 - y).astype(np.float32), np.float32)


def approx_div_kernel(flush: bool) -> Any:
    """Three float32 APPROX divisions, stored at tile rows bm, bm + 2 and bm + 4: x / y with y
    one value per row ((TM, 1) broadcast), a scalar by y, and x by a scalar."""
    @ct.kernel
    def k(x, y, out, c: float, TM: ct.Constant[int], TN: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        a = ct.load(x, (bm, bn), (TM, TN), padding_mode=ZERO)
        b = ct.load(y, (bm, 0), (TM, 1), padding_mode=ZERO)
        approx = ct.RoundingMode.APPROX
        ct.store(out, (bm, bn), ct.truediv(a, b, rounding_mode=approx, flush_to_zero=flush))
        s = ct.truediv(c, b, rounding_mode=approx, flush_to_zero=flush)
        ct.store(out, (bm + 2, bn), ct.broadcast_to(s, (TM, TN)))
        ct.store(out, (bm + 4, bn), ct.truediv(a, c, rounding_mode=approx, flush_to_zero=flush))
    return k


def _flushed(v: Any) -> np.ndarray:
    """float32 values with subnormals replaced by zeros of the same sign."""
    v = np.asarray(v, np.float32)
    return np.where((v != 0) & (np.abs(v) < np.float32(2.0**-126)), np.copysign(np.float32(0), v), v)


@pytest.mark.parametrize("flush", [False, True], ids=["", "flush"])
def test_approx_division_multiplies_by_the_rounded_reciprocal(dev, flush: bool) -> None:
    """float32 APPROX truediv is RN(x * RN(1 / y)) on every backend, bit for bit (with
    flush_to_zero: operands, reciprocal and result flushed), special values included."""
    g = rng(11)
    x = (g.uniform(-4, 4, SHAPE) * 2.0 ** g.integers(-20, 20, SHAPE)).astype(np.float32)
    y = (g.uniform(0.25, 4, (SHAPE[0], 1)) * g.choice([-1, 1], (SHAPE[0], 1))).astype(np.float32)
    y[:5, 0] = [2.0**127 * 1.5, 3e-39, 0.0, np.inf, -3.0]  # subnormal reciprocal, subnormal y, 0, inf
    x[0, :6] = [np.inf, 1e-40, -0.0, np.nan, 2.0**100, 1.0]
    c = 3.0
    out = dev.poison((SHAPE[0] + 4 * TILE[0], SHAPE[1]), np.float32)
    dev.launch(GRID, approx_div_kernel(flush), (dev.put(x), dev.put(y), out, c, *TILE))
    got = dev.get(out)
    f = _flushed if flush else (lambda v: np.asarray(v, np.float32))

    def approx(a: Any, b: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return f(f(a) * f(np.float32(1) / f(b)))
    wants = (approx(x, y), np.broadcast_to(approx(np.float32(c), y), SHAPE), approx(x, np.float32(c)))
    for k, want in enumerate(wants):
        rows = np.arange(SHAPE[0]) + 2 * TILE[0] * k
        assert_bits_equal(got[rows], want.astype(np.float32), f"form {k}")


# ---- unary math -------------------------------------------------------------------------------------------
def u_exp(x): return ct.exp(x)
def u_exp2(x): return ct.exp2(x)
def u_log(x): return ct.log(x)
def u_log2(x): return ct.log2(x)
def u_sqrt(x): return ct.sqrt(x)
def u_rsqrt(x): return ct.rsqrt(x)
def u_sin(x): return ct.sin(x)
def u_cos(x): return ct.cos(x)
def u_tan(x): return ct.tan(x)
def u_sinh(x): return ct.sinh(x)
def u_cosh(x): return ct.cosh(x)
def u_tanh(x): return ct.tanh(x)
def u_floor(x): return ct.floor(x)
def u_ceil(x): return ct.ceil(x)
def u_negative(x): return ct.negative(x)
def u_neg_op(x): return -x
def u_abs(x): return ct.abs(x)
def u_abs_builtin(x): return abs(x)
def u_isnan(x): return ct.isnan(x)
def u_not(x): return ct.bitwise_not(x)
def u_invert(x): return ~x


UNARY_FLOAT = {
    # name: (function, reference on float64, (lo, hi) input domain)
    "exp": (u_exp, np.exp, (-4, 4)), "exp2": (u_exp2, np.exp2, (-4, 4)),
    "log": (u_log, np.log, (0.05, 8)), "log2": (u_log2, np.log2, (0.05, 8)),
    "sqrt": (u_sqrt, np.sqrt, (0, 8)), "rsqrt": (u_rsqrt, lambda v: 1 / np.sqrt(v), (0.05, 8)),
    "sin": (u_sin, np.sin, (-3, 3)), "cos": (u_cos, np.cos, (-3, 3)), "tan": (u_tan, np.tan, (-1.2, 1.2)),
    "sinh": (u_sinh, np.sinh, (-3, 3)), "cosh": (u_cosh, np.cosh, (-3, 3)),
    "tanh": (u_tanh, np.tanh, (-3, 3)), "floor": (u_floor, np.floor, (-5, 5)),
    "ceil": (u_ceil, np.ceil, (-5, 5)), "negative": (u_negative, np.negative, (-5, 5)),
    "neg_op": (u_neg_op, np.negative, (-5, 5)), "abs": (u_abs, np.abs, (-5, 5)),
    "abs_builtin": (u_abs_builtin, np.abs, (-5, 5)),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(UNARY_FLOAT))
def test_unary_float(dev, name: str, dtype: str) -> None:
    fn, ref, (lo, hi) = UNARY_FLOAT[name]
    d = np_dtype(dtype)
    g = rng(name, dtype)
    x = g.uniform(lo, hi, SHAPE).astype(d)
    if name in ("floor", "ceil"):
        x[0, :4] = [-2.0, 2.0, -0.5, 0.5]    # exact integers and halves
    got = run_unary(dev, fn, x, d)
    want = ref(x.astype(np.float64)).astype(d)
    rtol = {"float64": 1e-12, "float32": 2e-5}.get(dtype)
    assert_close(got, want, d, rtol=rtol, msg=f"{name} {dtype}")
    if name in ("negative", "neg_op", "abs", "abs_builtin", "floor", "ceil"):
        assert_bits_equal(got, want, msg=name)


@pytest.mark.parametrize("name", ["sinh", "cosh"])
def test_float64_sinh_cosh_near_overflow(dev, name: str) -> None:
    """float64 sinh and cosh are finite up to |x| = 710.47, where exp(|x|) already overflowed
    (past 709.78): sinh(+-710.0) is +-1.117e308 on every backend, not +-inf; from 710.5 they
    are infinite. Triton's CPU interpreter computed them as (exp(x) -+ exp(-x)) / 2."""
    fn, ref, _ = UNARY_FLOAT[name]
    g = rng("sinh-cosh-overflow", name)
    x = g.uniform(709.0, 710.47, SHAPE) * g.choice([-1, 1], SHAPE)
    x[0, :6] = [709.78, 710.0, -710.4, 710.5, -711.0, np.inf]
    want = ref(x)
    assert np.isfinite(want).sum() > SHAPE[0] * SHAPE[1] - 4 and (np.abs(want) > 1.7e308).any()
    assert_close(run_unary(dev, fn, x, np.float64), want, np.float64, rtol=1e-12, msg=name)


TINY = float(np.finfo(np.float32).tiny)
"""2**-126: nonzero float32 and bfloat16 values below it in magnitude are subnormal."""


def _subnormals(g: np.random.Generator, signed: bool = True, lowest: int = -149) -> np.ndarray:
    """SHAPE float64 values in every binade from 2**lowest to 2**-126 (float32 subnormals for
    lowest >= -149, bfloat16 ones for lowest >= -133), of both signs where `signed`."""
    x = np.ldexp(g.uniform(1, 2, SHAPE), g.integers(lowest, -126, SHAPE))
    return x * g.choice([-1, 1], SHAPE) if signed else x


SUBNORMAL_UNARY = {
    # name: (operands from a generator and the lowest binade, ulps from the exact value)
    "exp": (lambda g, lo: g.uniform(-103, -92, SHAPE), 2.5),      # results 2**-149 .. 2**-133
    "exp2": (lambda g, lo: g.uniform(-149, -126.5, SHAPE), 2.5),  # results 2**-149 .. 2**-126.5
    "log": (lambda g, lo: _subnormals(g, False, lo), 1.5), "log2": (lambda g, lo: _subnormals(g, False, lo), 1.5),
    "sqrt": (lambda g, lo: _subnormals(g, False, lo), 0.5), "rsqrt": (lambda g, lo: _subnormals(g, False, lo), 2.5),
    "sin": (_subnormals, 2.5), "tan": (_subnormals, 4.5), "sinh": (_subnormals, 3.5), "tanh": (_subnormals, 2.5),
    "floor": (_subnormals, 0), "ceil": (_subnormals, 0),
}
"""Subnormal operands (or, for exp and exp2, subnormal results) of float math, and the error
allowed: CUDA's documented maximum for the float32 function (the C++ Programming Guide's table,
in ulps of the correctly rounded result) plus the half ulp of that rounding. exp is Triton's own
ex2-based lowering, whose error grows with |x|; where its results are subnormal it is within that.
Not cos and cosh: of a subnormal they are 1.0, flushed or not."""


@pytest.mark.parametrize("name, dtype", [(name, "float32") for name in SUBNORMAL_UNARY]
                         + [("floor", "bfloat16"), ("log2", "bfloat16"), ("sin", "bfloat16")])
def test_unary_math_keeps_subnormals(dev, name: str, dtype: str) -> None:
    """Without flush_to_zero, float32 (and bfloat16) subnormal operands and results are values on
    every backend: log(1e-40) is -92.1, sin(-1e-40) -1e-40, floor(-1e-40) -1.0, rsqrt(1e-40)
    1e20, exp2(-140) 2**-140, where flushing gives -inf, -0.0, -0.0, inf and 0.0 (on the GPU,
    libdevice in flush-to-zero mode did: compile.GPU_MATH_OPTIONS)."""
    fn, ref, _ = UNARY_FLOAT[name]
    make, ulps = SUBNORMAL_UNARY[name]
    d = np_dtype(dtype)
    x = make(rng("subnormals", name, dtype), -149 if d == np.float32 else -133).astype(d)
    want = ref(x.astype(np.float64))
    if d == BF16:  # computed in float32, rounded once to bfloat16
        ulps = 0 if name == "floor" else 0.5 + ulps * 2.0**-16
    assert_within_ulps(run_unary(dev, fn, x, d), want, ulps, d, f"{name} {dtype}")


def _pow_operands(g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Subnormal bases to powers 0.25 .. 1.5 (subnormal and normal results) and, in about half
    the elements, bases 2**-20 .. 0.5 to the powers that take them to 2**-149 .. 2**-127."""
    base, power = _subnormals(g, signed=False), g.uniform(0.25, 1.5, SHAPE)
    normal = g.uniform(2.0**-20, 0.5, SHAPE)
    target = np.log(np.ldexp(g.uniform(1, 2, SHAPE), g.integers(-149, -127, SHAPE)))
    half = g.random(SHAPE) < 0.5
    return np.where(half, normal, base), np.where(half, target / np.log(normal), power)


def _atan2_operands(g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """atan2(a, b): a subnormal with b of magnitude 0.5 .. 4 (results a / b, subnormal where
    b > 0) or subnormal too, and a of magnitude 0.5 .. 4 with b subnormal (about +-pi/2)."""
    normal = g.uniform(0.5, 4, SHAPE) * g.choice([-1, 1], SHAPE)
    a, b = _subnormals(g), np.where(g.random(SHAPE) < 0.5, normal, _subnormals(g))
    swap = g.random(SHAPE) < 0.25
    return np.where(swap, normal, a), np.where(swap, _subnormals(g), b)


SUBNORMAL_BINARY = {"pow": (fn_pow, np.power, _pow_operands, 8.5), "atan2": (fn_atan2, np.arctan2, _atan2_operands, 3.5)}
"""As SUBNORMAL_UNARY: function, float64 reference, operands, ulps (CUDA's powf 8, atan2f 3)."""


@pytest.mark.parametrize("name", list(SUBNORMAL_BINARY))
def test_binary_math_keeps_subnormals(dev, name: str) -> None:
    """float32 pow and atan2 of subnormal operands, and with subnormal results, are within their
    ulp bounds on every backend: pow(1e-40, 0.5) is 1e-20 and pow(2**-70, 2) 2**-140,
    atan2(1e-40, 2.0) 5e-41 (flushing gives 0.0)."""
    fn, ref, make, ulps = SUBNORMAL_BINARY[name]
    a, b = (v.astype(np.float32) for v in make(rng("subnormals", name)))
    want = ref(a.astype(np.float64), b.astype(np.float64))
    assert ((want != 0) & (np.abs(want) < TINY)).sum() > 10  # subnormal results
    assert_within_ulps(run_binary(dev, fn, a, b, np.float32), want, ulps, np.float32, name)


def u_exp2_ftz(x): return ct.exp2(x, flush_to_zero=True)
def u_sqrt_ftz(x): return ct.sqrt(x, flush_to_zero=True)
def u_rsqrt_ftz(x): return ct.rsqrt(x, flush_to_zero=True)


FLUSHING_UNARY = {"exp2": (u_exp2_ftz, np.exp2, 2.5), "sqrt": (u_sqrt_ftz, np.sqrt, 0.5),
                  "rsqrt": (u_rsqrt_ftz, lambda v: 1 / np.sqrt(v), 2.5)}
"""The float math with flush_to_zero: function, float64 reference, ulps (as SUBNORMAL_UNARY)."""


@pytest.mark.parametrize("name", list(FLUSHING_UNARY))
def test_unary_math_flush_to_zero_flushes_subnormals(dev, name: str) -> None:
    """With flush_to_zero, subnormal operands and results are zeros of their sign on every
    backend: exp2(-140.0) is 0.0, sqrt(-1e-40) -0.0, rsqrt(1e-40) inf; other values as without
    it. On the GPU exp2 is one ex2.approx.ftz.f32 (helpers.EXP2_FTZ), the others flush around
    libdevice, which keeps subnormals (compile.GPU_MATH_OPTIONS)."""
    fn, ref, ulps = FLUSHING_UNARY[name]
    g = rng("flush", name)
    if name == "exp2":  # results subnormal, operands subnormal, ordinary
        x = np.select([g.random(SHAPE) < 0.4, g.random(SHAPE) < 0.5],
                      [g.uniform(-149, -127, SHAPE), _subnormals(g)], g.uniform(-120, 4, SHAPE))
    else:
        x = np.where(g.random(SHAPE) < 0.5, _subnormals(g, signed=name == "sqrt"), g.uniform(0.05, 8, SHAPE))
    x = x.astype(np.float32)
    with np.errstate(divide="ignore"):
        want = ref(np.where(np.abs(x) < TINY, np.copysign(0.0, x), x).astype(np.float64))
    want = np.where(np.abs(want) < TINY, np.copysign(0.0, want), want)
    assert (want == 0).any() or np.isinf(want).any()  # something flushed
    assert_within_ulps(run_unary(dev, fn, x, np.float32), want, ulps, np.float32, name)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_floordiv_keeps_subnormal_quotients(dev, dtype: str) -> None:
    """A subnormal quotient floors as a value: -1e-40 // 1.0 is -1.0, 1e-40 // -1.0 -1.0 and
    1e-40 // 1.0 0.0 (not -0.0 and 0.0 from a floor that flushes it; float32 and bfloat16
    share the exponent range)."""
    d = np_dtype(dtype)
    g = rng("floordiv-subnormal", dtype)
    x = (g.uniform(0.01, 0.99, SHAPE) * float(np.finfo(np.float32).tiny) * g.choice([-1, 1], SHAPE)).astype(d)
    y = g.choice([-1.0, 1.0], SHAPE).astype(d)
    want = np.floor_divide(x.astype(np.float64), y.astype(np.float64)).astype(d)
    assert (want == -1).sum() > 10 and (want == 0).sum() > 10  # both outcomes are there
    assert_bits_equal(run_binary(dev, op_floordiv, x, y, d), want, msg=dtype)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh"])
@pytest.mark.parametrize("dtype", ["int32", "int8", "bool_"])
def test_unary_math_int_promotes_to_float32(dev, name: str, dtype: str) -> None:
    fn, ref, _ = UNARY_FLOAT[name]
    d = np_dtype(dtype)
    x = random_array(rng(8), SHAPE, d, 1, 9)
    got = run_unary(dev, fn, x, np.float32)
    assert_close(got, ref(x.astype(np.float64)).astype(np.float32), np.float32, rtol=2e-5)


@pytest.mark.parametrize("fn", [u_negative, u_neg_op, u_abs, u_abs_builtin])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_unary_int_negative_abs_wrap(dev, fn: Callable, dtype: str) -> None:
    d = np.dtype(dtype)
    x = random_array(rng(9), SHAPE, d, -1000, 1000)
    x[0, :3] = [np.iinfo(d).min, np.iinfo(d).max, 0]
    got = run_unary(dev, fn, x, d)
    op = operator.neg if fn in (u_negative, u_neg_op) else abs
    np.testing.assert_array_equal(got, wrap(np.vectorize(op, otypes=[object])(x.astype(object)), d))


def test_negative_bool_gives_int32(dev) -> None:
    x = rng(1).random(SHAPE) < 0.5
    got = run_unary(dev, u_negative, x, np.int32)
    np.testing.assert_array_equal(got, -x.astype(np.int32))


@pytest.mark.parametrize("fn", [u_not, u_invert])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint32", "int64", "bool_"])
def test_bitwise_not(dev, fn: Callable, dtype: str) -> None:
    d = np.dtype(dtype)
    x = random_array(rng(10), SHAPE, d, -2**31, 2**31)
    got = run_unary(dev, fn, x, d)
    np.testing.assert_array_equal(got, ~x)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_isnan(dev, dtype: str) -> None:
    d = np_dtype(dtype)
    g = rng(12)
    x = g.standard_normal(SHAPE).astype(d)
    x[g.random(SHAPE) < 0.4] = np.nan
    x[0, :2] = [np.inf, -np.inf]
    got = run_unary(dev, u_isnan, x, np.bool_)
    np.testing.assert_array_equal(got, np.isnan(x.astype(np.float64)))


# ---- comparisons ------------------------------------------------------------------------------------------
def c_eq(x, y): return x == y
def c_ne(x, y): return x != y
def c_lt(x, y): return x < y
def c_le(x, y): return x <= y
def c_gt(x, y): return x > y
def c_ge(x, y): return x >= y
def cf_eq(x, y): return ct.equal(x, y)
def cf_ne(x, y): return ct.not_equal(x, y)
def cf_lt(x, y): return ct.less(x, y)
def cf_le(x, y): return ct.less_equal(x, y)
def cf_gt(x, y): return ct.greater(x, y)
def cf_ge(x, y): return ct.greater_equal(x, y)


COMPARE = {"eq": (c_eq, cf_eq, np.equal), "ne": (c_ne, cf_ne, np.not_equal), "lt": (c_lt, cf_lt, np.less),
           "le": (c_le, cf_le, np.less_equal), "gt": (c_gt, cf_gt, np.greater),
           "ge": (c_ge, cf_ge, np.greater_equal)}


@pytest.mark.parametrize("form", ["op", "fn"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "int32", "uint32", "int64", "bool_"])
@pytest.mark.parametrize("name", list(COMPARE))
def test_compare(dev, name: str, dtype: str, form: str) -> None:
    """Comparisons give bool tiles; floats compare ordered except != (NaN != NaN is True)."""
    d = np_dtype(dtype)
    g = rng(name, dtype)
    x = random_array(g, SHAPE, d, 0, 4)      # few distinct values: many ties
    y = random_array(g, SHAPE, d, 0, 4)
    if is_float(d):
        x, y = np.round(x.astype(np.float64)).astype(d), np.round(y.astype(np.float64)).astype(d)
        x[g.random(SHAPE) < 0.2] = np.nan
        y[g.random(SHAPE) < 0.2] = np.nan
    f = COMPARE[name][0 if form == "op" else 1]
    got = run_binary(dev, f, x, y, np.bool_)
    want = COMPARE[name][2](x.astype(np.float64) if is_float(d) else x, y.astype(np.float64) if is_float(d) else y)
    np.testing.assert_array_equal(got, want)


def cmp_mixed(x, y): return x.astype(ct.int8) < y


def test_compare_promotes_operands(dev) -> None:
    """int8 tile < float32 tile compares in float32."""
    g = rng(13)
    x = g.integers(-5, 5, SHAPE).astype(np.float32)
    y = g.uniform(-5, 5, SHAPE).astype(np.float32)
    got = run_binary(dev, cmp_mixed, x, y, np.bool_)
    np.testing.assert_array_equal(got, x < y)


# ---- where --------------------------------------------------------------------------------------------------
def where_tiles(x, y): return ct.where(x > y, x, y)
def where_scalar(x, y): return ct.where(x > 0, x, 0.0)
def where_mixed(x, y): return ct.where(y > 0, x.astype(ct.int8), y)
def where_int_cond(x, y): return ct.where(x.astype(ct.int32), y, -y)


def test_where(dev) -> None:
    g = rng(14)
    x = g.uniform(-4, 4, SHAPE).astype(np.float32)
    y = g.uniform(-4, 4, SHAPE).astype(np.float32)
    assert_bits_equal(run_binary(dev, where_tiles, x, y, np.float32), np.where(x > y, x, y))
    assert_bits_equal(run_binary(dev, where_scalar, x, y, np.float32), np.where(x > 0, x, np.float32(0)))
    want = np.where(y > 0, np.trunc(x).astype(np.int8), y).astype(np.float32)
    assert_bits_equal(run_binary(dev, where_mixed, x, y, np.float32), want)
    want = np.where(np.trunc(x) != 0, y, -y).astype(np.float32)
    assert_bits_equal(run_binary(dev, where_int_cond, x, y, np.float32), want)


@ct.kernel
def where_broadcast_kernel(c, x, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    cond = ct.load(c, (bm, 0), (TM, 1), padding_mode=ct.PaddingMode.ZERO)
    t = ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (bm, bn), ct.where(cond, t, -1))


def test_where_broadcast_condition(dev) -> None:
    g = rng(15)
    c = g.random((SHAPE[0], 1)) < 0.5
    x = g.integers(0, 100, SHAPE).astype(np.int16)
    out = dev.poison(SHAPE, np.int16)
    dev.launch(GRID, where_broadcast_kernel, (dev.put(c), dev.put(x), out, *TILE))
    np.testing.assert_array_equal(dev.get(out), np.where(c, x, np.int16(-1)))


# ---- astype -----------------------------------------------------------------------------------------------
def to_f16(x): return x.astype(ct.float16)
def to_bf16(x): return x.astype(ct.bfloat16)
def to_f32(x): return ct.astype(x, ct.float32)
def to_f64(x): return x.astype(ct.float64)
def to_i8(x): return x.astype(ct.int8)
def to_i16(x): return x.astype(ct.int16)
def to_i32(x): return x.astype(ct.int32)
def to_i64(x): return x.astype(ct.int64)
def to_u8(x): return x.astype(ct.uint8)
def to_u32(x): return x.astype(ct.uint32)
def to_bool(x): return x.astype(ct.bool_)
def to_e4m3(x): return x.astype(ct.float8_e4m3fn)
def to_e5m2(x): return x.astype(ct.float8_e5m2)
def via_tf32(x): return x.astype(ct.tfloat32).astype(ct.float32)
def dtype_ctor_f16(x): return ct.float16(x)


CASTS = {"float16": to_f16, "bfloat16": to_bf16, "float32": to_f32, "float64": to_f64, "int8": to_i8,
         "int16": to_i16, "int32": to_i32, "int64": to_i64, "uint8": to_u8, "uint32": to_u32,
         "bool_": to_bool, "float8_e4m3fn": to_e4m3, "float8_e5m2": to_e5m2}


def _random_bits_f32(g: np.random.Generator, shape: Any, emin: int = -20, emax: int = 20) -> np.ndarray:
    """Random normal float32 values with random low mantissa bits (so rounding matters)."""
    m = g.integers(0, 2**23, shape, dtype=np.uint32)
    e = g.integers(127 + emin, 127 + emax, shape, dtype=np.uint32)
    s = g.integers(0, 2, shape, dtype=np.uint32)
    return ((s << 31) | (e << 23) | m).view(np.float32)


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32"])
def test_astype_float_round_nearest_even(dev, src: str, dst: str) -> None:
    g = rng(20)
    x = _random_bits_f32(g, SHAPE, -12, 12).astype(src)
    if src == "float64":
        x = x * (1 + g.uniform(-1e-9, 1e-9, SHAPE))
    # exact ties of the destination format: 1 + half an ulp -> rounds to even (1.0), 1 + 3 half
    # ulps -> rounds up
    half = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}[dst]
    x.flat[:4] = [1 + half, 1 + 3 * half, -(1 + half), 2 + 2 * half]
    d = np_dtype(dst)
    got = run_unary(dev, CASTS[dst], x, d)
    want = x.astype(np.float64).astype(np.float32).astype(d) if src == "float32" else x.astype(d)
    if not (src == "float64" and dst == "bfloat16"):   # ml_dtypes may double-round from f64
        assert_bits_equal(got, want)
    assert got.flat[0] == 1.0 and got.flat[1] == np.float64(1 + 4 * half).astype(d)


@pytest.mark.parametrize("dst, half", [("float16", 2.0**-11), ("bfloat16", 2.0**-8)])
def test_astype_from_float64_no_double_rounding(dev, dst: str, half: float) -> None:
    """1 + half-ulp + tiny is above the tie: it must round up, not to even via float32."""
    x = np.full(SHAPE, 1 + half + 2.0**-40, np.float64)
    x[1] = -(1 + half + 2.0**-40)
    got = run_unary(dev, CASTS[dst], x, np_dtype(dst)).astype(np.float64)
    assert (got[0] == 1 + 2 * half).all() and (got[1] == -(1 + 2 * half)).all()


@pytest.mark.parametrize("src", ["int64", "uint64"])
def test_astype_int64_to_bfloat16_rounds_once(dev, src: str) -> None:
    """A 64-bit integer 1 below or above a bfloat16 tie rounds away from the tie, as the GPU's
    cvt.rn.bf16.s64 does; through float64 (53 bits) it would land on the tie and round to even."""
    ulp = 2**55                                           # of bfloat16 in [2**62, 2**63)
    cases = {2**62 + ulp // 2 + 1: 2**62 + ulp, 2**62 + 3 * ulp // 2 - 1: 2**62 + ulp,
             2**62 + ulp // 2: 2**62, 2**62 + 3 * ulp // 2: 2**62 + 2 * ulp, 5: 5}
    if src == "uint64":                                   # ulp 2**56 in [2**63, 2**64)
        cases |= {2**63 + 2**55 + 1: 2**63 + 2**56, 2**64 - 1: 2**64, 2**63 + 2**55: 2**63}
    else:
        cases |= {-k: -v for k, v in cases.items()} | {-(2**63): -(2**63)}
    ins, outs = list(cases), list(cases.values())
    reps = -(-SHAPE[0] * SHAPE[1] // len(ins))
    x = np.array((ins * reps)[:SHAPE[0] * SHAPE[1]], dtype=src).reshape(SHAPE)
    want = np.array((outs * reps)[:SHAPE[0] * SHAPE[1]], dtype=np.float64).reshape(SHAPE)
    assert_bits_equal(run_unary(dev, to_bf16, x, BF16), want.astype(BF16))   # exact in bfloat16


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
def test_astype_to_fp8(dev, src: str, dst: str) -> None:
    g = rng(21)
    lim = 400.0 if dst == "float8_e4m3fn" else 50000.0
    s = np_dtype(src)
    x = (g.uniform(-1, 1, SHAPE) * np.exp2(g.uniform(-8, np.log2(lim), SHAPE))).astype(s)
    x[0, :3] = [0.0, 1.0, -2.0]
    d = np_dtype(dst)
    got = run_unary(dev, CASTS[dst], x, d)
    assert_bits_equal(got, x.astype(np.float32).astype(d))


FP8_FROM_FLOAT64 = {
    # dst: (float64 values just off a rounding midpoint, their single rounding): through float32
    # (rounded to nearest) they land on the midpoint and round to even, the wrong way
    "float8_e4m3fn": ([1 + 2.0**-4 + 2.0**-30, -(1 + 2.0**-4 + 2.0**-30), 2.0**-10 * (1 + 2.0**-29), 1 + 2.0**-4],
                      [1.125, -1.125, 2.0**-9, 1.0]),
    "float8_e5m2": ([1 + 2.0**-3 + 2.0**-30, 1.5 + 2.0**-3 + 2.0**-40, -(2.0**-17) * (1 + 2.0**-29), 1 + 2.0**-3],
                    [1.25, 1.75, -(2.0**-16), 1.0]),
}


@pytest.mark.parametrize("dst", list(FP8_FROM_FLOAT64))
def test_astype_float64_to_fp8_rounds_once(dev, dst: str) -> None:
    """float64 to 8-bit floats rounds once, to nearest even, on every backend (also ml_dtypes'
    float64 cast goes through float32 and rounds twice). The generated Triton code converts
    through float32 rounded to odd: Triton's float64 -> fp8 cast rounded twice under its CPU
    interpreter and did not compile for the GPU. Other values as from float32."""
    near, want_near = FP8_FROM_FLOAT64[dst]
    g = rng("f64-fp8", dst)
    lim = 400.0 if dst == "float8_e4m3fn" else 50000.0
    x = g.uniform(-1, 1, SHAPE) * np.exp2(g.uniform(-8, np.log2(lim), SHAPE))
    x = x.astype(np.float32).astype(np.float64)  # exact in float32: one rounding either way
    x[0, :4], x[1, :3] = near, [0.0, -0.0, np.nan]
    d = np_dtype(dst)
    want = x.astype(d)
    want[0, :4] = np.array(want_near).astype(d)
    assert_bits_equal(run_unary(dev, CASTS[dst], x, d), want)


@pytest.mark.parametrize("src, dst", [("float8_e4m3fn", "float64"), ("float8_e5m2", "float64"),
                                      ("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn"),
                                      ("float8_e4m3fn", "int32"), ("float8_e5m2", "uint8"),
                                      ("float8_e4m3fn", "bool_"), ("float8_e5m2", "bool_"),
                                      ("int32", "float8_e4m3fn"), ("int64", "float8_e5m2"), ("uint8", "float8_e4m3fn")])
def test_astype_fp8_to_and_from_other_types(dev, src: str, dst: str) -> None:
    """8-bit floats to and from float64, integers and each other, within the range of both
    types, and to bool: an fp8 value converts exactly, an integer or the other fp8 rounds once. Triton
    converts fp8 only to and from 16- and 32-bit floats (the others did not compile for the
    GPU; fp8 -> float64 failed under its CPU interpreter), so the generated code goes through
    float32."""
    s, d = np_dtype(src), np_dtype(dst)
    g = rng("fp8-other", src, dst)
    if is_float(s):  # every finite code, those out of dst's range replaced
        x = np.arange(256, dtype=np.uint8).view(s)[: SHAPE[0] * SHAPE[1]].reshape(SHAPE).copy()
        lo, hi = (0, 255) if d == np.uint8 else (-440, 440)
        x[~np.isfinite(x.astype(np.float64)) | (x.astype(np.float64) < lo) | (x.astype(np.float64) > hi)] = 0
    else:
        x = g.integers(0 if s == np.uint8 else -440, 256 if s == np.uint8 else 441, SHAPE).astype(s)
    v = x.astype(np.float64)
    want = np.trunc(v).astype(d) if d.kind in "iu" else v.astype(np.float32).astype(d)
    assert_bits_equal(run_unary(dev, CASTS[dst], x, d), want)


@pytest.mark.parametrize("src", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16"])
def test_astype_from_fp8(dev, src: str, dst: str) -> None:
    s = np_dtype(src)
    bits = rng(22).integers(0, 256, SHAPE, dtype=np.uint8)
    x = bits.view(s)
    x = np.where(np.isfinite(x.astype(np.float32)), x, s.type(1.5))   # NaN/inf handling is not tested
    d = np_dtype(dst)
    got = run_unary(dev, CASTS[dst], x, d)
    assert_bits_equal(got, x.astype(np.float32).astype(d))


def test_astype_tfloat32_rounds(dev) -> None:
    """float32 → tfloat32 keeps 10 mantissa bits, rounding to nearest even on the bits (not
    truncating): ties both ways, carries into the exponent, past the largest finite to
    infinity, subnormals; infinities stay, NaNs stay NaN."""
    x = tf32_edge_values(rng(23), SHAPE, subnormals=True)
    got = run_unary(dev, via_tf32, x, np.float32)
    assert_bits_equal(got, round_tf32(x))


@ct.kernel
def tf32_constant_kernel(out, V: ct.Constant[float]):
    ct.store(out, (0,), ct.full((2,), V, ct.tfloat32).astype(ct.float32))


@pytest.mark.parametrize("value, want", [(0.1, 0.0999755859375), (1 + 2**-11, 1.0),
                                         (1 + 2**-11 + 2**-30, 1 + 2**-10), (-3.4025e38, -np.inf)])
def test_tfloat32_constant_holds_a_tfloat32_value(dev, value: float, want: float) -> None:
    """A tfloat32 constant is rounded once from the Python float (1 + 2**-11 + 2**-30 is above
    the tie; through float32 it would become the tie and round down)."""
    out = dev.poison((2,), np.float32)
    dev.launch((1,), tf32_constant_kernel, (out, value))
    assert_bits_equal(dev.get(out), np.full(2, want, np.float32))


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("dst", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
def test_astype_float_to_int_truncates(dev, src: str, dst: str) -> None:
    g = rng(24)
    d = np.dtype(dst)
    hi = min(float(np.iinfo(d).max), 1000.0)
    lo = -hi if d.kind == "i" else 0.0
    s = np_dtype(src)
    x = g.uniform(lo, hi, SHAPE).astype(s)
    x[0, :4] = [0.0, 0.999, 2.5, 3.5] if d.kind == "u" else [-0.999, -2.5, -3.5, 2.5]
    got = run_unary(dev, CASTS[dst], x, d)
    np.testing.assert_array_equal(got, np.trunc(x.astype(np.float64)).astype(d))


@pytest.mark.parametrize("src, dst", [("int32", "int8"), ("int32", "uint8"), ("int64", "int32"),
                                      ("uint32", "int32"), ("int8", "uint32"), ("int16", "int64"),
                                      ("uint8", "int16"), ("int64", "uint32")])
def test_astype_int_wraps(dev, src: str, dst: str) -> None:
    g = rng(25)
    s, d = np.dtype(src), np.dtype(dst)
    x = random_array(g, SHAPE, s, np.iinfo(s).min, np.iinfo(s).max)
    got = run_unary(dev, CASTS[dst], x, d)
    np.testing.assert_array_equal(got, wrap(x.astype(object), d))


@pytest.mark.parametrize("src, dst", [("int32", "float32"), ("int64", "float64"), ("int32", "float16"),
                                      ("int16", "bfloat16"), ("uint32", "float32"), ("int64", "float32"),
                                      ("bool_", "float32"), ("bool_", "int32"), ("int8", "float16")])
def test_astype_int_to_float_rounds(dev, src: str, dst: str) -> None:
    g = rng(26)
    s, d = np_dtype(src), np_dtype(dst)
    lim = 60000 if dst == "float16" else 2**40
    x = random_array(g, SHAPE, s, -lim, lim)
    got = run_unary(dev, CASTS[dst], x, d)
    want = np.array([float(int(v)) for v in x.flat]).reshape(SHAPE)   # float64 is exact here
    assert_bits_equal(got, want.astype(np.float32).astype(d) if dst in ("bfloat16", "float16")
                      and s.itemsize <= 2 else want.astype(d))


@pytest.mark.parametrize("src", ["int32", "int8", "float32", "float16", "uint8"])
def test_astype_to_bool(dev, src: str) -> None:
    g = rng(27)
    s = np_dtype(src)
    x = random_array(g, SHAPE, s, -2, 2)
    if is_float(s):
        x = np.round(x.astype(np.float64)).astype(s)
        x[0, :3] = [0.25, -0.0, np.nan]
    got = run_unary(dev, to_bool, x, np.bool_)
    np.testing.assert_array_equal(got, x.astype(np.float64) != 0)


def test_dtype_constructor_casts_tiles(dev) -> None:
    x = rng(28).uniform(-3, 3, SHAPE).astype(np.float32)
    got = run_unary(dev, dtype_ctor_f16, x, np.float16)
    assert_bits_equal(got, x.astype(np.float16))


# ---- bitcast ------------------------------------------------------------------------------------------------
def bc_i32(x): return ct.bitcast(x, ct.int32)
def bc_u32(x): return ct.bitcast(x, ct.uint32)
def bc_f32(x): return ct.bitcast(x, ct.float32)
def bc_i16(x): return ct.bitcast(x, ct.int16)
def bc_f16(x): return ct.bitcast(x, ct.float16)
def bc_bf16(x): return ct.bitcast(x, ct.bfloat16)
def bc_u8(x): return ct.bitcast(x, ct.uint8)
def bc_i64(x): return x.bitcast(ct.int64)


@pytest.mark.parametrize("src, fn, dst", [
    ("float32", bc_i32, "int32"), ("float32", bc_u32, "uint32"), ("int32", bc_f32, "float32"),
    ("float16", bc_i16, "int16"), ("int16", bc_f16, "float16"), ("float16", bc_bf16, "bfloat16"),
    ("int8", bc_u8, "uint8"), ("float64", bc_i64, "int64"), ("float8_e4m3fn", bc_u8, "uint8"),
])
def test_bitcast(dev, src: str, fn: Callable, dst: str) -> None:
    s, d = np_dtype(src), np_dtype(dst)
    bits = rng(29).integers(0, 256, SHAPE + (s.itemsize,), dtype=np.uint8)
    x = bits.view(s).reshape(SHAPE)
    if is_float(s):   # keep NaNs out of the float input (their payload may be canonicalized)
        x = np.where(np.isnan(x.astype(np.float64)), s.type(1), x)
    got = run_unary(dev, fn, x, d)
    np.testing.assert_array_equal(got.view(np.uint8), x.view(d).view(np.uint8))


# ---- typing errors (compile time, before any backend runs) ------------------------------------------------
def err_signed_unsigned(x, y): return x.astype(ct.int32) + y.astype(ct.uint32)
def err_f16_bf16(x, y): return x.astype(ct.float16) * y.astype(ct.bfloat16)
def err_bitwise_float(x, y): return x & y
def err_bool_arith(x, y): return (x > 0) + (y > 0)
def err_int_pow(x, y): return x.astype(ct.int32) ** y.astype(ct.int32)
def err_mixed_bitwise(x, y): return x.astype(ct.int8) | y.astype(ct.int16)
def err_loose_range(x, y): return x.astype(ct.int8) + 300
def err_floor_int(x, y): return ct.floor(x.astype(ct.int32))
def err_restricted(x, y): return x.astype(ct.float8_e4m3fn) + y.astype(ct.float8_e4m3fn)


@pytest.mark.parametrize("fn, error", [
    (err_signed_unsigned, ct.TileTypeError), (err_f16_bf16, ct.TileTypeError),
    (err_bitwise_float, ct.TileTypeError), (err_bool_arith, ct.TileTypeError), (err_int_pow, ct.TileTypeError),
    (err_mixed_bitwise, ct.TileTypeError), (err_loose_range, ct.TileValueError),
    (err_floor_int, ct.TileTypeError), (err_restricted, ct.TileTypeError),
])
def test_promotion_errors(dev, fn: Callable, error: type) -> None:
    x = np.ones(SHAPE, np.float32)
    out = dev.poison(SHAPE, np.float32)
    with pytest.raises(error):
        dev.launch(GRID, binary_kernel(fn), (dev.put(x), dev.put(x), out, *TILE))
    assert np.isnan(dev.get(out)).all()


@ct.kernel
def narrowing_store_kernel(x, out):
    ct.store(out, (0, 0), ct.load(x, (0, 0), (4, 8)))


@pytest.mark.parametrize("src, dst", [("float32", "float16"), ("float32", "int32"), ("int32", "uint32"),
                                      ("int64", "int32")])
def test_store_does_not_narrow_implicitly(dev, src: str, dst: str) -> None:
    with pytest.raises(ct.TileTypeError, match="implicitly cast"):
        dev.launch((1,), narrowing_store_kernel, (dev.put(np.ones((4, 8), src)), dev.poison((4, 8), dst)))


@ct.kernel
def _bf16_constants(o):
    t = ct.full((16,), ct.bfloat16(3.14), dtype=ct.bfloat16) + ct.bfloat16(-1.0e-3)
    ct.store(o, index=(0,), tile=t.astype(ct.float32))


def test_bfloat16_constants_round_to_nearest(dev):
    """3.14 as bfloat16 is 3.140625 (round to nearest), not 3.125 (truncated): Triton's CPU
    interpreter truncates the float32 it converts, so the constant is rounded before."""
    o = dev.put(np.full(16, np.nan, np.float32))
    dev.launch((1,), _bf16_constants, (o,))
    bf16 = ml_dtypes.bfloat16
    want = np.float32(np.array(3.14, dtype=bf16) + np.array(-1.0e-3, dtype=bf16))
    np.testing.assert_array_equal(dev.get(o), np.full(16, want, np.float32))


@ct.kernel
def _bf16_subnormal_constants(x, o, TN: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(TN,))
    ct.store(o, index=(0,), tile=a + 1e-40)
    ct.store(o, index=(1,), tile=ct.full((TN,), -3e-39, dtype=ct.bfloat16))
    ct.store(o, index=(2,), tile=ct.maximum(a, 2e-45))
    ct.store(o, index=(3,), tile=ct.minimum(a, -2e-45))


def test_bfloat16_subnormal_constants(dev):
    """bfloat16 constants in the subnormal range keep their value on every backend: 1e-40 is
    0x0001 (9.18e-41) and -3e-39 0x8021, not zeros (Triton's CPU interpreter flushed them
    when it converted the float32 constant); 2e-45 rounds to +0.0 and -2e-45 to -0.0 (which
    Triton made +0.0: it turns every constant equal to zero into +0.0)."""
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.array([0.0, -0.0, 1e-40, -2e-39, 1.0, -1e-40, 3e-39, -5.0], np.float32).astype(bf16)
    o = dev.poison((4 * 8,), bf16)
    dev.launch((1,), _bf16_subnormal_constants, (dev.put(x), o, 8))
    x64 = x.astype(np.float64)
    want = np.concatenate([x64 + np.float64(np.array(1e-40, bf16)), np.full(8, -3e-39),
                           np.maximum(x64, 0.0), np.where(x64 < 0, x64, -0.0)]).astype(bf16)
    want[16:18] = np.array([0.0, 0.0], bf16)  # maximum(-0.0, +0.0) is +0.0
    assert_bits_equal(dev.get(o), want)


@ct.kernel
def _fp8_constants(o):
    a = ct.full((16,), ct.float8_e5m2(3.14), dtype=ct.float8_e5m2).astype(ct.float32)
    b = ct.full((16,), -0.3, dtype=ct.float8_e4m3fn).astype(ct.float32)
    ct.store(o, index=(0,), tile=a + b)


def test_float8_constants(dev):
    """8-bit float constants, rounded to the dtype (Triton's CPU interpreter cannot build them:
    they are made from their bits there)."""
    o = dev.put(np.full(16, np.nan, np.float32))
    dev.launch((1,), _fp8_constants, (o,))
    want = np.float32(np.array(3.14, dtype=ml_dtypes.float8_e5m2)) + np.float32(np.array(-0.3, dtype=ml_dtypes.float8_e4m3fn))
    np.testing.assert_array_equal(dev.get(o), np.full(16, want, np.float32))


def fn_cdiv(x, y): return ct.cdiv(x, y)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_cdiv_is_the_ceiling_of_the_quotient(dev, dtype):
    """ct.cdiv(x, y) = ceil(x / y) for either sign and without overflow in between: int8
    cdiv(99, 100) went through 99 + 100 - 1, which does not fit (cuTile's test_array_div)."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    x = rng.integers(info.min, info.max, size=(8, 24), endpoint=True).astype(dtype)
    y = rng.integers(-100, 100, size=(8, 24)).astype(dtype)
    y[y == 0] = 7
    x.flat[:4] = [99, info.max, info.min + 1, -99]
    y.flat[:4] = [100, 2, 3, -100]
    want = np.array([-(-int(a) // int(b)) for a, b in zip(x.flat, y.flat)], dtype=np.int64).reshape(x.shape)
    np.testing.assert_array_equal(run_binary(dev, fn_cdiv, x, y, dtype).astype(np.int64), want)
