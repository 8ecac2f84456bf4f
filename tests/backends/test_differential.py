"""Randomized differential tests: hypothesis draws small programs (sequences of tile ops on random
shapes and dtypes), one kernel runs them on every backend, and the backends must agree with each
other and with a float64 NumPy model of the same program.

The program is a Constant tuple, so each drawn program compiles to its own straight-line kernel:
`ct.static_iter` unrolls it and the `if` chains on the op name fold at compile time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tilecraft as ct
from conftest import Device, unavailable_reason
from optest_utils import assert_bits_equal, np_dtype, round_tf32, tf32_edge_values

BINARY = ("add", "sub", "mul", "maximum", "minimum", "where_gt")
UNARY = ("neg", "abs", "exp_small", "tanh", "sqrt_abs", "square")
REDUCE = ("sum_rows", "max_rows", "sum_cols", "cumsum_rows")
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def apply(op, x, y):
    """One program step on tiles (compiled: `op` is a compile-time string)."""
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "maximum":
        return ct.maximum(x, y)
    if op == "minimum":
        return ct.minimum(x, y)
    if op == "where_gt":
        return ct.where(x > y, x, y * 0.5)
    if op == "neg":
        return -x
    if op == "abs":
        return abs(x)
    if op == "exp_small":
        return ct.exp(x * 0.25)
    if op == "tanh":
        return ct.tanh(x)
    if op == "sqrt_abs":
        return ct.sqrt(abs(x) + 1.0)
    if op == "square":
        return x * x
    if op == "div":
        return x / (abs(y) + 0.5)
    if op == "floor":
        return ct.floor(x * 4.0)
    if op == "via_f16":
        return x.astype(ct.float16).astype(ct.float32)
    if op == "via_bf16":
        return x.astype(ct.bfloat16).astype(ct.float32)
    if op == "via_i32":
        return (x * 8.0).astype(ct.int32).astype(ct.float32)
    if op == "mod":
        return x % (abs(y) + 0.5)
    if op == "floordiv":
        return x // (abs(y) + 0.5)
    if op == "sum_rows":
        return ct.broadcast_to(ct.sum(x, axis=1, keepdims=True), x.shape)
    if op == "max_rows":
        return ct.broadcast_to(ct.max(x, axis=1, keepdims=True), x.shape)
    if op == "sum_cols":
        return ct.broadcast_to(ct.sum(x, axis=0, keepdims=True), x.shape)
    return ct.cumsum(x, axis=1)


def model(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    table = {
        "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
        "maximum": lambda: np.maximum(x, y), "minimum": lambda: np.minimum(x, y),
        "where_gt": lambda: np.where(x > y, x, y * 0.5), "neg": lambda: -x, "abs": lambda: np.abs(x),
        "exp_small": lambda: np.exp(x * 0.25), "tanh": lambda: np.tanh(x),
        "sqrt_abs": lambda: np.sqrt(np.abs(x) + 1.0), "square": lambda: x * x,
        "sum_rows": lambda: np.broadcast_to(x.sum(axis=1, keepdims=True), x.shape),
        "max_rows": lambda: np.broadcast_to(x.max(axis=1, keepdims=True), x.shape),
        "sum_cols": lambda: np.broadcast_to(x.sum(axis=0, keepdims=True), x.shape),
        "cumsum_rows": lambda: np.cumsum(x, axis=1),
    }
    return table[op]()


@ct.kernel
def program_kernel(a, b, out, TM: ct.Constant[int], TN: ct.Constant[int], PROGRAM: ct.Constant[tuple]):
    bm, bn = ct.bid(0), ct.bid(1)
    x = ct.load(a, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    y = ct.load(b, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    for op in ct.static_iter(PROGRAM):
        x = apply(op, x, y)
    ct.store(out, index=(bm, bn), tile=x.astype(out.dtype))


def run_model(a: np.ndarray, b: np.ndarray, tiles: tuple[int, int], program: tuple[str, ...]) -> np.ndarray:
    """The program per tile in float64, with zero padding like the kernel's loads."""
    tm, tn = tiles
    m, n = a.shape
    gm, gn = -(-m // tm), -(-n // tn)
    pa = np.zeros((gm * tm, gn * tn)); pa[:m, :n] = a
    pb = np.zeros((gm * tm, gn * tn)); pb[:m, :n] = b
    out = np.empty_like(pa)
    for i in range(gm):
        for j in range(gn):
            x = pa[i * tm:(i + 1) * tm, j * tn:(j + 1) * tn]
            y = pb[i * tm:(i + 1) * tm, j * tn:(j + 1) * tn]
            for op in program:
                x = model(op, x, y)
            out[i * tm:(i + 1) * tm, j * tn:(j + 1) * tn] = x
    return out[:m, :n]


programs = st.lists(st.sampled_from(BINARY + UNARY + REDUCE), min_size=1, max_size=5).map(tuple)
shapes = st.tuples(st.integers(1, 40), st.integers(1, 40))
tile_dims = st.tuples(st.sampled_from((1, 2, 4, 8, 16)), st.sampled_from((1, 2, 4, 8, 16)))


def available_backends() -> list[str]:
    return [b for b in ("interpreter", "triton-interpret") if unavailable_reason(b) is None]


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs the interpreter and triton-interpret")
@SETTINGS
@given(program=programs, shape=shapes, tiles=tile_dims, dtype=st.sampled_from((np.float32, np.float16)),
       seed=st.integers(0, 2**16))
def test_random_programs_agree_across_backends(program, shape, tiles, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shape).astype(dtype)
    b = rng.uniform(-2, 2, shape).astype(dtype)
    grid = (-(-shape[0] // tiles[0]), -(-shape[1] // tiles[1]))
    results: dict[str, Any] = {}
    for name in available_backends():
        dev = Device(name)
        out = dev.poison(shape, dtype)
        dev.launch(grid, program_kernel, (dev.put(a), dev.put(b), out, tiles[0], tiles[1], program))
        results[name] = dev.get(out).astype(np.float64)
    ref = run_model(a.astype(np.float64), b.astype(np.float64), tiles, program)
    scale = max(1.0, float(np.abs(ref).max()))
    tol = 2e-2 if dtype == np.float16 else 1e-4
    for name, got in results.items():
        assert np.isfinite(got).all(), f"{name}: unwritten or non-finite elements for {program}"
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale, err_msg=f"{name} vs model: {program}")
    first, second = results.values()
    np.testing.assert_allclose(first, second, rtol=tol, atol=tol * scale, err_msg=f"backends disagree: {program}")


EXACT = ("add", "sub", "mul", "maximum", "minimum", "where_gt", "neg", "abs", "sqrt_abs", "square", "max_rows",
         "div", "floor", "via_f16", "via_bf16", "via_i32", "mod", "floordiv")
"""Program steps every backend rounds alike (each correctly rounded, or exact; a multiplication
feeding an addition is one fused multiply-add on every backend): no libm, no sums in some order."""


@SETTINGS
@given(program=st.lists(st.sampled_from(EXACT), min_size=2, max_size=6).map(tuple), shape=shapes,
       tiles=tile_dims, dtype=st.sampled_from((np.float32, np.float16)), seed=st.integers(0, 2**16))
@example(program=("mul", "add", "square", "sub"), shape=(37, 29), tiles=(16, 8), dtype=np.float32, seed=1)
@example(program=("div", "mul", "via_bf16", "floor", "via_f16", "sqrt_abs"), shape=(33, 40), tiles=(8, 16),
         dtype=np.float32, seed=2)
@example(program=("mul", "mod", "via_i32", "floordiv", "square"), shape=(40, 24), tiles=(16, 8), dtype=np.float32,
         seed=3)
def test_exactly_rounded_programs_agree_bit_for_bit(dev, program, shape, tiles, dtype, seed):
    """Programs of exactly rounded steps give the interpreter's bits on every backend, the GPU
    included (with LLVM's own multiply-add contraction on, the GPU's differed)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shape).astype(dtype)
    b = rng.uniform(-2, 2, shape).astype(dtype)
    grid = (-(-shape[0] // tiles[0]), -(-shape[1] // tiles[1]))
    results = []
    for d in (Device("interpreter"), dev):
        out = d.poison(shape, dtype)
        d.launch(grid, program_kernel, (d.put(a), d.put(b), out, tiles[0], tiles[1], program))
        results.append(d.get(out))
    assert_bits_equal(results[1], results[0], f"{dev.name} vs the interpreter: {program}")


# ---- tf32 matmul: every backend rounds each fp32 operand to nearest even ----------------------
# The kernel rounds both operands to tf32 (`astype(ct.tfloat32)`) and multiplies them on the
# tensor cores. One operand carries the edge cases, the other is a selector (one power of two
# per row or column, zeros elsewhere), so every output is one rounded operand times a power of
# two plus exact zeros, whatever order the backend sums in: the results must match an
# independent rounding bit for bit (zeros of either sign are equal: adding zeros may lose -0).

TF32_M, TF32_N, TF32_K = 19, 21, 37   # odd sizes: partial tiles on every edge, a K loop of 3


@ct.kernel
def tf32_mma_kernel(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0.0, ct.float32)
    for kk in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, (bm, kk), (TM, TK), padding_mode=ct.PaddingMode.ZERO).astype(ct.tfloat32)
        b = ct.load(B, (kk, bn), (TK, TN), padding_mode=ct.PaddingMode.ZERO).astype(ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, (bm, bn), acc)


def tf32_selector(g: np.random.Generator, rows: int, cols: int, select_rows: bool) -> np.ndarray:
    """Zeros but one power of two (0.5, 1 or 2) per column (select_rows: per row), at a random
    distinct position while there are enough."""
    n, m = (rows, cols) if select_rows else (cols, rows)
    out = np.zeros((n, m), np.float32)
    where = g.permutation(max(n, m))[:n] % m
    out[np.arange(n), where] = g.choice(np.array([0.5, 1.0, 2.0], np.float32), n)
    return out if select_rows else out.T.copy()


def run_tf32_mma(dev: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    tiles = (16, 16, 16)
    shape = (a.shape[0], b.shape[1])
    out = dev.poison(shape, np.float32, 12345.0)   # not a tf32 product: an unwritten element fails
    grid = (-(-shape[0] // tiles[0]), -(-shape[1] // tiles[1]))
    dev.launch(grid, tf32_mma_kernel, (dev.put(a), dev.put(b), out, *tiles))
    return dev.get(out)


@pytest.mark.parametrize("edges_in", ["A", "B"])
def test_tf32_mma_rounds_operands_to_nearest_even(dev, edges_in: str) -> None:
    g = np.random.default_rng(7 if edges_in == "A" else 8)
    if edges_in == "A":
        a = tf32_edge_values(g, (TF32_M, TF32_K))
        b = tf32_selector(g, TF32_K, TF32_N, select_rows=False)
    else:
        a = tf32_selector(g, TF32_M, TF32_K, select_rows=True)
        b = tf32_edge_values(g, (TF32_K, TF32_N))
    with np.errstate(invalid="ignore", over="ignore"):
        want = (round_tf32(a).astype(np.float64) @ round_tf32(b).astype(np.float64)).astype(np.float32)
    got = run_tf32_mma(dev, a, b)
    assert_bits_equal(got + np.float32(0), want + np.float32(0), f"tf32 mma, edge cases in {edges_in}")


@pytest.mark.parametrize("edges_in", ["A", "B"])
def test_tf32_library_matmul_rounds_to_nearest_even(dev, edges_in: str) -> None:
    """cuTile's MatMul sample on float32 at 128x128x32 tiles (on sm_90: wgmma, its operands
    rounded by cvt.rn.tf32.f32 in the K loop), odd sizes on every edge and a partial last K
    tile: every output is still one rounded edge-case operand times a power of two."""
    from tilecraft.library import matmul_kernel
    m, n, k = 200, 150, 70
    g = np.random.default_rng(11 if edges_in == "A" else 12)
    if edges_in == "A":
        a, b = tf32_edge_values(g, (m, k)), tf32_selector(g, k, n, select_rows=False)
    else:
        a, b = tf32_selector(g, m, k, select_rows=True), tf32_edge_values(g, (k, n))
    with np.errstate(invalid="ignore", over="ignore"):
        want = (round_tf32(a).astype(np.float64) @ round_tf32(b).astype(np.float64)).astype(np.float32)
    out = dev.poison((m, n), np.float32, 12345.0)
    dev.launch((-(-m // 128) * -(-n // 128), 1, 1), matmul_kernel, (dev.put(a), dev.put(b), out, 128, 128, 32))
    assert_bits_equal(dev.get(out) + np.float32(0), want + np.float32(0), f"library tf32 matmul, edges in {edges_in}")


def test_tf32_mma_random_operands(dev) -> None:
    """Random operands: the error is float32 accumulation only (truncating the operands instead
    of rounding them would be ~2**-12 of each product, far outside the bound)."""
    g = np.random.default_rng(9)
    a = g.standard_normal((TF32_M, TF32_K)).astype(np.float32)
    b = g.standard_normal((TF32_K, TF32_N)).astype(np.float32)
    ra, rb = round_tf32(a).astype(np.float64), round_tf32(b).astype(np.float64)
    got = run_tf32_mma(dev, a, b).astype(np.float64)
    bound = TF32_K * 2.0**-24 * (np.abs(ra) @ np.abs(rb))
    assert (np.abs(got - ra @ rb) <= bound).all(), float(np.max(np.abs(got - ra @ rb) / bound))


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs the interpreter and triton-interpret")
def test_tf32_mma_bit_identical_across_cpu_backends() -> None:
    """The CPU backends sum alike (a float32 matmul per K tile), so with the same operand
    rounding their results are identical bit for bit, edge cases and random values alike."""
    g = np.random.default_rng(10)
    a = np.where(g.random((TF32_M, TF32_K)) < 0.5, tf32_edge_values(g, (TF32_M, TF32_K)),
                 g.standard_normal((TF32_M, TF32_K)).astype(np.float32))
    b = g.standard_normal((TF32_K, TF32_N)).astype(np.float32)
    first, second = (run_tf32_mma(Device(name), a, b) for name in available_backends())
    assert_bits_equal(first, second, "interpreter vs triton-interpret")


def _libdevice_math(x, y):
    """The math the GPU takes from libdevice, one op per row block of the result."""
    return ct.cat((ct.cat((x ** y, ct.atan2(x, y)), 0), ct.cat((ct.tan(x) + ct.sinh(y), ct.cosh(x) + ct.tanh(y)), 0)), 0)


@ct.kernel
def libdevice_math_kernel(a, b, out, T: ct.Constant[int]):
    x = ct.load(a, (0, 0), (T, T))
    y = ct.load(b, (0, 0), (T, T))
    ct.store(out, (0, 0), _libdevice_math(x, y))


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs the interpreter and triton-interpret")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_libdevice_math_bit_identical_across_cpu_backends(dtype: str) -> None:
    """pow, atan2, tan, sinh, cosh and tanh of float32 and narrower operands round once from
    float64 on both CPU backends (Triton's CPU interpreter cannot call libdevice; its stand-ins
    compute in float64), so the two agree bit for bit: the interpreter's NumPy float32 pow and
    atan2 were a unit in the last place off in about one case of six."""
    d = np_dtype(dtype)
    g = np.random.default_rng(11)
    a = g.uniform(0.1, 3.0, (32, 32)).astype(d)
    b = g.uniform(-2.5, 2.5, (32, 32)).astype(d)
    results = []
    for name in available_backends():
        dev = Device(name)
        out = dev.poison((128, 32), d)
        dev.launch((1,), libdevice_math_kernel, (dev.put(a), dev.put(b), out, 32))
        results.append(dev.get(out))
    assert_bits_equal(results[0], results[1], "interpreter vs triton-interpret")
