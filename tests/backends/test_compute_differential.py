"""MMA, reductions, scans and shape ops on the dtypes, axes and tile shapes the op tests leave out,
against references computed here (float64 NumPy, exact Python integers wrapped once).

Each kernel writes several results at once (every axis of a 3-D tile, both scan directions,
every shape op) so the Triton interpreter compiles few kernels. Integer results are exact,
float results within the precision of their dtype; the float16-accumulator MMA is exact (its
operands are chosen so one rounding of the exact sum is the only answer).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import is_float, np_dtype, rng, round_tf32, wrap

SHAPE3 = (2, 4, 8)


def exact(x: np.ndarray) -> np.ndarray:
    """x as float64 (floats) or Python ints (integers, bool as 0/1)."""
    if is_float(x.dtype):
        return x.astype(np.float64)
    return x.astype(np.int64 if x.dtype.kind == "b" else x.dtype).astype(object)


def check(got: np.ndarray, want: Any, rtol: float, what: str) -> None:
    """Integers and bools exactly (want wrapped to got's dtype), floats within rtol of want's
    largest magnitude."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if is_float(got.dtype):
        w = want.astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), w, rtol=rtol, atol=rtol * max(1.0, np.abs(w).max()),
                                   err_msg=what)
    elif got.dtype.kind == "b":
        np.testing.assert_array_equal(got, want.astype(bool), err_msg=what)
    else:
        np.testing.assert_array_equal(got, wrap(want, got.dtype), err_msg=what)


def values(g: np.random.Generator, dtype: str, shape: tuple[int, ...], small: bool = False) -> np.ndarray:
    """Random values of `dtype`: integers over their whole range (small: -3..3, for products),
    bools, or floats in [0.25, 2) (small: [0.8, 1.25))."""
    d = np_dtype(dtype)
    if d.kind == "b":
        return g.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        lo, hi = (max(-3, int(info.min)), 3) if small else (int(info.min), int(info.max))
        return g.integers(lo, hi, shape, dtype=d, endpoint=True)
    return (g.uniform(0.8, 1.25, shape) if small else g.uniform(0.25, 2, shape)).astype(d)


def rtol_of(dtype: str) -> float:
    return {"float64": 1e-12, "float32": 1e-5}.get(dtype, 2e-2)


# ---- MMA ------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def mma_kernel(op_dtype: Any, acc_dtype: Any, k_tile: int) -> Any:
    @ct.kernel
    def k(A, B, C, D):
        a = ct.load(A, (0, 0), (4, k_tile)).astype(op_dtype)
        b = ct.load(B, (0, 0), (k_tile, 2)).astype(op_dtype)
        ct.store(D, (0, 0), ct.mma(a, b, ct.load(C, (0, 0), (4, 2)).astype(acc_dtype)))
    return k


@pytest.mark.parametrize("op_dtype, k_tile", [("float16", 16), ("float8_e4m3fn", 32), ("float8_e5m2", 32)])
def test_float16_accumulator_rounds_the_exact_sum_once(dev, op_dtype: str, k_tile: int) -> None:
    """acc + a @ b into a float16 accumulator is the exact sum rounded once (every sum here is
    a float16, so no rounding at all is the only answer): Triton's interpreter rounded a @ b to
    float16 and then the sum with acc again (2048 + 1 + 1 gave 2048, not 2050)."""
    a = np.zeros((4, k_tile), np.float32)   # powers of two and b's 16: exact in every operand dtype
    a[0, :2] = [128, 1]           # 2048 + 1 is a tie (even: 2048); + acc 1 is 2050 exactly
    a[1, :3] = [64, 0.5, 0.25]    # 1024.75 rounds to 1025 alone; with acc -0.75 it is 1024
    a[2, :2] = [-128, -1]
    a[3, :2] = [256, 2]           # 4096 + 2 is a tie (4096); + acc 2 is 4100 exactly
    b = np.ones((k_tile, 2), np.float32)
    b[0] = 16
    c = np.array([[1, 1], [-0.75, -0.75], [-1, 3], [2, 2]], np.float32)
    out = dev.poison((4, 2), np.float16)
    dev.launch((1,), mma_kernel(getattr(ct, op_dtype), ct.float16, k_tile), (dev.put(a), dev.put(b), dev.put(c), out))
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float16)
    np.testing.assert_array_equal(dev.get(out), want)


@functools.lru_cache(maxsize=None)
def small_mma_kernel(m: int, n: int, k: int, da: Any, db: Any, acc_dtype: Any) -> Any:
    @ct.kernel
    def kern(A, B, C, D):
        a = ct.load(A, (0, 0), (m, k)).astype(da)
        b = ct.load(B, (0, 0), (k, n)).astype(db)
        ct.store(D, (0, 0), ct.mma(a, b, ct.load(C, (0, 0), (m, n)).astype(acc_dtype)))
    return kern


def to_operand(x: np.ndarray, dtype: str) -> np.ndarray:
    """x (float32) as the operand dtype sees it, in float64."""
    if dtype == "tfloat32":
        return round_tf32(x).astype(np.float64)
    return x.astype(np_dtype(dtype)).astype(np.float64)


@pytest.mark.parametrize("mnk", [(1, 1, 1), (2, 4, 8), (8, 1, 4), (4, 8, 1), (32, 2, 64)])
@pytest.mark.parametrize("da, db, acc, rtol", [
    ("int8", "uint8", "int32", 0), ("float16", "float16", "float32", 1e-5), ("tfloat32", "tfloat32", "float32", 1e-5),
    ("float8_e5m2", "float8_e5m2", "float16", 1e-2), ("bfloat16", "bfloat16", "float32", 1e-5),
    ("float64", "float64", "float64", 1e-12)])
def test_mma_tiny_and_narrow_tiles(dev, mnk: tuple[int, int, int], da: str, db: str, acc: str, rtol: float) -> None:
    """Tiles with a dimension of 1 or 2 (broadcast multiplies on Triton, K below tl.dot's 16),
    int8 x uint8 with int32 wraparound, every float operand dtype."""
    m, n, k = mnk
    g = rng("tiny-mma", mnk, da, acc)
    if acc == "int32":
        a = g.integers(-128, 128, (m, k)).astype(np.int8)
        b = g.integers(0, 256, (k, n)).astype(np.uint8)
        c = g.integers(-2**31, 2**31, (m, n)).astype(np.int32)
        want = a.astype(object) @ b.astype(object) + c.astype(object)
    else:
        a, b, c = (g.uniform(-2, 2, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
        want = to_operand(a, da) @ to_operand(b, db) + c.astype(np_dtype(acc)).astype(np.float64)
    out = dev.poison((m, n), np_dtype(acc))
    kernel = small_mma_kernel(m, n, k, getattr(ct, da), getattr(ct, db), getattr(ct, acc))
    dev.launch((1,), kernel, (dev.put(a), dev.put(b), dev.put(c), out))
    check(dev.get(out), want, rtol, f"{mnk} {da} x {db} -> {acc}")


@ct.kernel
def batched_transposed_mma_kernel(A, B, C, D):
    """A is stored (1, K, M): permuted to (1, M, K), its batch of one broadcast against B's two."""
    a = ct.permute(ct.load(A, (0, 0, 0), (1, 16, 4)), (0, 2, 1))
    b = ct.load(B, (0, 0, 0), (2, 16, 8))
    ct.store(D, (0, 0, 0), ct.mma(a, b, ct.load(C, (0, 0, 0), (2, 4, 8))))


def test_mma_of_a_permuted_operand_with_a_broadcast_batch(dev) -> None:
    g = rng("batched-transposed-mma")
    a = g.integers(-128, 128, (1, 16, 4)).astype(np.int8)
    b = g.integers(-128, 128, (2, 16, 8)).astype(np.int8)
    c = g.integers(-2**31, 2**31, (2, 4, 8)).astype(np.int32)
    out = dev.poison((2, 4, 8), np.int32)
    dev.launch((1,), batched_transposed_mma_kernel, (dev.put(a), dev.put(b), dev.put(c), out))
    want = np.matmul(np.transpose(a, (0, 2, 1)).astype(object), b.astype(object)) + c.astype(object)
    check(dev.get(out), want, 0, "int8 batched mma")


# ---- reductions -----------------------------------------------------------------------------------

REDUCE_AXES = [(None, False), (0, True), (1, False), (2, False), ((0, 2), True)]
REDUCERS: dict[str, Callable] = {"sum": ct.sum, "prod": ct.prod, "max": ct.max, "min": ct.min,
                                 "argmax": ct.argmax, "argmin": ct.argmin}


@functools.lru_cache(maxsize=None)
def reduce_kernel(name: str) -> Any:
    """One result per REDUCE_AXES entry (argmax/argmin skip the tuple axis), flattened into
    outs[i] (a list holds arrays of one rank) once its shape is checked."""
    op = REDUCERS[name]
    axes = [ak for ak in REDUCE_AXES if not (name.startswith("arg") and isinstance(ak[0], tuple))]
    shapes = [np.zeros(SHAPE3).sum(axis=axis, keepdims=kd).shape for axis, kd in axes]

    @ct.kernel
    def k(x, outs):
        t = ct.load(x, (0, 0, 0), SHAPE3)
        for i, (axis, keepdims) in ct.static_iter(enumerate(axes)):
            r = op(t, axis=axis, keepdims=keepdims)
            ct.static_assert(r.shape == shapes[i], "result shape")
            ct.store(outs[i], (0,), ct.reshape(r, (-1,)))
    return k, axes


def reduce_reference(name: str, x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """Exact reduction; argmax/argmin of the first extreme (axis None: the flat index)."""
    if name.startswith("arg"):
        pick = np.argmax if name == "argmax" else np.argmin
        return np.asarray(pick(exact(x).astype(np.float64) if is_float(x.dtype) else x, axis=axis, keepdims=keepdims))
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[name]
    return np.asarray(fn(exact(x), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name, dtype", [
    ("sum", "uint16"), ("sum", "uint64"), ("sum", "int8"), ("sum", "bool_"), ("prod", "uint8"), ("prod", "int64"),
    ("max", "uint64"), ("min", "int64"), ("max", "bool_"), ("min", "bfloat16"), ("prod", "float64"),
    ("argmax", "uint64"), ("argmin", "uint16"), ("argmax", "bool_"), ("argmin", "bfloat16"), ("argmax", "int8")])
def test_reduce_every_axis_of_a_3d_tile(dev, name: str, dtype: str) -> None:
    """Result dtype kept (bool sums and products, and every arg index, int32), integers wrap;
    argmax/argmin give the first extreme."""
    g = rng("reduce3d", name, dtype)
    x = values(g, dtype, SHAPE3, small=name == "prod")
    if name.startswith("arg") or name in ("max", "min"):
        x = x if x.dtype.kind in "bu" else x.astype(np.float64).round().astype(x.dtype)  # ties
    kernel, axes = reduce_kernel(name)
    od = np.dtype(np.int32) if name.startswith("arg") or dtype == "bool_" else np_dtype(dtype)
    wants = [reduce_reference(name, x, axis, kd) for axis, kd in axes]
    outs = [dev.poison((w.size,), od) for w in wants]
    dev.launch((1,), kernel, (dev.put(x), outs))
    for (axis, kd), o, w in zip(axes, outs, wants):
        check(dev.get(o), w.reshape(-1), rtol_of(dtype), f"{name} axis={axis} keepdims={kd}")


# ---- scans ----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def scan_kernel(name: str) -> Any:
    """outs[2 * axis + reverse] = the scan along axis (0, 1, 2), reversed or not."""
    op = ct.cumsum if name == "cumsum" else ct.cumprod

    @ct.kernel
    def k(x, outs):
        t = ct.load(x, (0, 0, 0), SHAPE3)
        for axis in ct.static_iter((0, 1, 2)):
            ct.store(outs[2 * axis], (0, 0, 0), op(t, axis=axis))
            ct.store(outs[2 * axis + 1], (0, 0, 0), op(t, axis=axis, reverse=True))
    return k


@pytest.mark.parametrize("name, dtype", [
    ("cumsum", "int8"), ("cumsum", "uint16"), ("cumsum", "uint64"), ("cumsum", "bool_"), ("cumsum", "bfloat16"),
    ("cumprod", "uint8"), ("cumprod", "int64"), ("cumprod", "float64")])
def test_scan_every_axis_of_a_3d_tile(dev, name: str, dtype: str) -> None:
    g = rng("scan3d", name, dtype)
    x = values(g, dtype, SHAPE3, small=name == "cumprod")
    od = np.dtype(np.int32) if dtype == "bool_" else np_dtype(dtype)
    outs = [dev.poison(SHAPE3, od) for _ in range(6)]
    dev.launch((1,), scan_kernel(name), (dev.put(x), outs))
    acc = np.cumsum if name == "cumsum" else np.cumprod
    for axis in range(3):
        for reverse in (False, True):
            v = np.flip(exact(x), axis) if reverse else exact(x)
            want = np.flip(acc(v, axis=axis), axis) if reverse else acc(v, axis=axis)
            check(dev.get(outs[2 * axis + reverse]), want, rtol_of(dtype), f"{name} axis={axis} reverse={reverse}")


def last_nonzero(a, b):
    """Associative, not commutative: the scan must combine in order."""
    return ct.where(b != 0, b, a)


@ct.kernel
def ordered_scan_kernel(x, outs):
    t = ct.load(x, (0, 0), (4, 8))
    ct.store(outs[0], (0, 0), ct.scan(t, 0, last_nonzero, 0))
    ct.store(outs[1], (0, 0), ct.scan(t, 1, last_nonzero, 0))
    ct.store(outs[2], (0, 0), ct.scan(t, 0, last_nonzero, 0, reverse=True))
    ct.store(outs[3], (0, 0), ct.scan(t, -1, last_nonzero, 0, reverse=True))


def last_nonzero_reference(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    v = np.moveaxis(x, axis, -1)
    out = np.zeros_like(v)
    for row in np.ndindex(v.shape[:-1]):
        cur = 0
        for j in (range(v.shape[-1] - 1, -1, -1) if reverse else range(v.shape[-1])):
            cur = v[row + (j,)] or cur
            out[row + (j,)] = cur
    return np.moveaxis(out, -1, axis)


def test_custom_scan_combines_in_order(dev) -> None:
    g = rng("ordered-scan")
    x = (g.integers(-3, 4, (4, 8)) * (g.random((4, 8)) < 0.5)).astype(np.int16)
    outs = [dev.poison((4, 8), np.int16) for _ in range(4)]
    dev.launch((1,), ordered_scan_kernel, (dev.put(x), outs))
    for o, (axis, reverse) in zip(outs, [(0, False), (1, False), (0, True), (1, True)]):
        check(dev.get(o), last_nonzero_reference(x, axis, reverse), 0, f"axis={axis} reverse={reverse}")


# ---- shape ops ------------------------------------------------------------------------------------

def _reshape(t, u):
    return ct.reshape(t, (2, -1, 1))


def _permute(t, u):
    return ct.permute(t, (2, 0, 1))


def _transpose(t, u):
    return ct.transpose(t, 0, 2)


def _expand(t, u):
    return ct.expand_dims(t, -1)


def _broadcast(t, u):
    return ct.broadcast_to(ct.extract(t, (0, 1, 0), (2, 1, 8)), (4, 2, 4, 8))


def _cat(t, u):
    return ct.cat((t, u), -1)


def _extract(t, u):
    return ct.extract(t, (1, 0, 1), (1, 4, 4))


def _item(t, u):
    return ct.extract(t, (1, 2, 3), ()).reshape((1,))


def _insert(t, u):
    return ct.insert(t, (0, 1, 0), ct.extract(u, (1, 0, 0), (1, 2, 8)))


def _inserted(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = x.copy()
    r[0, 2:4] = y[1, 0:2]
    return r


SHAPE_OPS: list[tuple[Callable, Callable]] = [
    (_reshape, lambda x, y: x.reshape(2, -1, 1)), (_permute, lambda x, y: x.transpose(2, 0, 1)),
    (_transpose, lambda x, y: x.transpose(2, 1, 0)), (_expand, lambda x, y: x[..., None]),
    (_broadcast, lambda x, y: np.broadcast_to(x[:, 1:2], (4, 2, 4, 8))),
    (_cat, lambda x, y: np.concatenate((x, y), -1)), (_extract, lambda x, y: x[1:2, 0:4, 4:8]),
    (_item, lambda x, y: x[1, 2, 3].reshape(1)), (_insert, _inserted)]


SHAPE_OP_SHAPES = [np.shape(ref(np.zeros(SHAPE3), np.zeros(SHAPE3))) for _, ref in SHAPE_OPS]


@ct.kernel
def shape_ops_kernel(x, y, outs):
    """outs[i]: the result of SHAPE_OPS[i], its shape checked, flattened (one rank a list)."""
    t = ct.load(x, (0, 0, 0), SHAPE3)
    u = ct.load(y, (0, 0, 0), SHAPE3)
    for i, (op, _) in ct.static_iter(enumerate(SHAPE_OPS)):
        r = op(t, u)
        ct.static_assert(r.shape == SHAPE_OP_SHAPES[i], "result shape")
        ct.store(outs[i], (0,), ct.reshape(r, (-1,)))


@pytest.mark.parametrize("dtype", ["bool_", "float8_e4m3fn", "float8_e5m2", "uint64", "bfloat16"])
def test_shape_ops_move_bits(dev, dtype: str) -> None:
    """Every shape op, on dtypes of 1, 8 and 64 bits: a pure data movement, so bit-exact."""
    g = rng("shape-ops", dtype)
    x, y = (values(g, dtype, SHAPE3) if dtype in ("bool_", "uint64") else
            g.uniform(-8, 8, SHAPE3).astype(np_dtype(dtype)) for _ in range(2))
    wants = [np.ascontiguousarray(ref(x, y)).reshape(-1) for _, ref in SHAPE_OPS]
    outs = [dev.poison(w.shape, w.dtype) for w in wants]
    dev.launch((1,), shape_ops_kernel, (dev.put(x), dev.put(y), outs))
    for (op, _), o, w in zip(SHAPE_OPS, outs, wants):
        got = dev.get(o)
        assert got.shape == w.shape and got.tobytes() == w.tobytes(), f"{op.__name__}: {got} want {w}"
