"""The NumPy interpreter on hand-built IR, checked against independent NumPy references.

Outputs are poisoned (NaN or a sentinel) before each launch so that unwritten elements fail.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

from tilecraft.backends.base import BackendKind
from tilecraft.backends.interpreter import InterpreterBackend
from tilecraft.backends.interpreter.registry import RULES, missing_rules
from tilecraft.ir import (ArrayType, AtomicFn, BinaryFn, Block, Builder, CompareFn, Function,
                          Opcode, ReduceFn, ScanFn, TileType, UnaryFn, Value, scalar, verify)
from tilecraft.language import dtypes as D
from tilecraft.language.enums import PaddingMode, RoundingMode

I32, F32, B1 = scalar(D.int32), scalar(D.float32), scalar(D.bool_)
RNG = np.random.default_rng(1234)


# ---------------------------------------------------------------------------------------------
# IR construction helpers

def kernel(*params: ArrayType | TileType) -> tuple[Function, Builder, list[Value]]:
    """An empty kernel with the given parameter types and a builder positioned in its body."""
    values = [Value(t) for t in params]
    fn = Function("k", values, [f"p{i}" for i in range(len(values))], Block(), None)
    return fn, Builder(), values


def const(b: Builder, value: Any, dtype: D.DType = D.int32) -> Value:
    return b.value(Opcode.CONST, [], scalar(dtype), value=value)


def tile_of(b: Builder, value: Any, dtype: D.DType, shape: tuple[int, ...]) -> Value:
    """A constant tile: const scalar, reshaped to rank, broadcast."""
    v = const(b, value, dtype)
    if shape:
        ones = (1,) * len(shape)
        v = b.value(Opcode.RESHAPE, [v], TileType(dtype, ones), shape=ones)
        v = b.value(Opcode.BROADCAST, [v], TileType(dtype, shape), shape=shape)
    return v


def load(b: Builder, arr: Value, index: list[Value], shape: tuple[int, ...],
         order: tuple[int, ...] | None = None, padding: PaddingMode | None = None) -> Value:
    dtype = arr.type.dtype
    return b.value(Opcode.LOAD, [arr, *index], TileType(dtype, shape), shape=shape,
                   order=order or tuple(range(len(shape))), padding=padding, latency=None,
                   allow_tma=None)


def store(b: Builder, arr: Value, index: list[Value], tile: Value,
          order: tuple[int, ...] | None = None) -> None:
    b.emit(Opcode.STORE, [arr, *index, tile], [], order=order or tuple(range(arr.type.ndim)),
           latency=None, allow_tma=None)


def unary(b: Builder, fn: UnaryFn, x: Value, out: D.DType | None = None) -> Value:
    return b.value(Opcode.UNARY, [x], x.tile.with_dtype(out or x.tile.dtype), fn=fn)


def binary(b: Builder, fn: BinaryFn, x: Value, y: Value) -> Value:
    return b.value(Opcode.BINARY, [x, y], x.type, fn=fn)


def launch(fn: Function, grid: tuple[int, int, int], *args: Any) -> None:
    verify(fn)
    InterpreterBackend().compile(fn, [None] * len(args)).launch(grid, list(args), None)


def poison(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return np.full(shape, 0x5A if dt.kind != "b" else True, dt)
    return np.full(shape, np.nan, dt)


def apply_tiles(build: Callable[..., Value], inputs: list[np.ndarray], out_dtype: D.DType,
                out_shape: tuple[int, ...]) -> np.ndarray:
    """Run a one-block kernel that loads each input whole, computes `build(b, *tiles)` and
    stores the resulting tile into a fresh (poisoned) output."""
    types = [ArrayType(D.to_dtype(x.dtype), x.ndim) for x in inputs]
    fn, b, params = kernel(*types, ArrayType(out_dtype, len(out_shape)))
    with b.inside(fn.body):
        zero = const(b, 0)
        tiles = [load(b, p, [zero] * x.ndim, x.shape) for p, x in zip(params, inputs)]
        result = build(b, *tiles)
        store(b, params[-1], [zero] * len(out_shape), result)
    out = poison(out_shape, out_dtype.np_dtype)
    launch(fn, (1, 1, 1), *inputs, out)
    return out


# ---------------------------------------------------------------------------------------------
# Backend surface

def test_every_opcode_has_a_rule() -> None:
    assert missing_rules() == []
    assert set(RULES) == set(Opcode)
    assert InterpreterBackend.kind is BackendKind.INTERPRETER


def test_scalar_args_bid_and_array_queries() -> None:
    """out[bz, by, bx] = bid + num_blocks * n + shape/stride of a strided view."""
    fn, b, (arr, n, out) = kernel(ArrayType(D.float32, 2), I32, ArrayType(D.int32, 4))
    with b.inside(fn.body):
        bids = [b.value(Opcode.BID, [], I32, axis=k) for k in range(3)]
        nbs = [b.value(Opcode.NUM_BLOCKS, [], I32, axis=k) for k in range(3)]
        vals = [binary(b, BinaryFn.ADD, bids[0], binary(b, BinaryFn.MUL, nbs[k], n))
                for k in range(3)]
        vals.append(b.value(Opcode.ARRAY_SHAPE, [arr], I32, axis=1))
        vals.append(b.value(Opcode.ARRAY_STRIDE, [arr], I32, axis=0))
        vals.append(b.value(Opcode.ARRAY_STRIDE, [arr], I32, axis=1))
        for j, v in enumerate(vals):
            store(b, out, [bids[2], bids[1], bids[0], const(b, j)], v)
    base = np.zeros((10, 12), np.float32)
    view = base[::2, ::3]
    out = poison((2, 3, 4, 6), np.int32)
    launch(fn, (4, 3, 2), view, 7, out)
    x = np.arange(4)[None, None, :]
    assert (out[..., 0] == x + 4 * 7).all() and (out[..., 1] == x + 3 * 7).all()
    assert (out[..., 2] == x + 2 * 7).all()
    assert (out[..., 3] == 4).all() and (out[..., 4] == 24).all() and (out[..., 5] == 3).all()


# ---------------------------------------------------------------------------------------------
# Load / store

@pytest.mark.parametrize("padding", list(PaddingMode))
def test_load_partial_tiles_padding_and_order(padding: PaddingMode) -> None:
    """Tiles of A.T (order=(1,0)) of shape 8x16 over a 21x37 view, with padding."""
    a = RNG.standard_normal((37, 21)).astype(np.float32)
    fn, b, (arr, out) = kernel(ArrayType(D.float32, 2), ArrayType(D.float32, 2))
    with b.inside(fn.body):
        i, j = (b.value(Opcode.BID, [], I32, axis=k) for k in range(2))
        t = load(b, arr, [i, j], (8, 16), order=(1, 0), padding=padding)
        store(b, out, [i, j], t)
    res = poison((24, 48), np.float32)
    launch(fn, (3, 3, 1), a, res)
    fill = {PaddingMode.NAN: np.nan, PaddingMode.POS_INF: np.inf, PaddingMode.NEG_INF: -np.inf,
            PaddingMode.NEG_ZERO: -0.0}.get(padding, 0.0)
    want = np.full((24, 48), fill, np.float32)
    want[:21, :37] = a.T
    np.testing.assert_array_equal(res, want)
    assert np.signbit(res[23, 47]) == np.signbit(fill)


def test_load_int_padding_negative_index_and_store_partial_permuted() -> None:
    """Int arrays pad with 0 (even for NaN mode); index -1 is all padding; a permuted store
    writes only in-bounds lanes of partial tiles."""
    a = RNG.integers(-100, 100, (10, 6)).astype(np.int32)
    fn, b, (arr, out, neg) = kernel(ArrayType(D.int32, 2), ArrayType(D.int32, 2),
                                    ArrayType(D.int32, 2))
    with b.inside(fn.body):
        i, j = (b.value(Opcode.BID, [], I32, axis=k) for k in range(2))
        t = load(b, arr, [i, j], (4, 4), padding=PaddingMode.NAN)
        t = b.value(Opcode.PERMUTE, [t], t.type, axes=(1, 0))
        store(b, out, [j, i], t, order=(1, 0))  # out.T[j-tile, i-tile] = t.T → out == a
        m1 = const(b, -1)
        store(b, neg, [i, j], load(b, arr, [m1, j], (4, 4), padding=PaddingMode.POS_INF))
    res, negres = poison((10, 6), np.int32), poison((12, 8), np.int32)
    launch(fn, (3, 2, 1), a, res, negres)
    np.testing.assert_array_equal(res, a)
    assert (negres == 0).all()


def test_zero_dim_array_load_store_and_unit_tile() -> None:
    fn, b, (s, arr, out) = kernel(ArrayType(D.float64, 0), ArrayType(D.float64, 2),
                                  ArrayType(D.float64, 2))
    with b.inside(fn.body):
        v = b.value(Opcode.LOAD, [s], scalar(D.float64), shape=(), order=(), padding=None)
        one = const(b, 1)
        u = b.value(Opcode.LOAD, [arr, one, one], scalar(D.float64), shape=(), order=(0, 1),
                    padding=None)
        store(b, out, [one, const(b, 0)], binary(b, BinaryFn.ADD, v, u))
        store(b, s, [], u)
    sv, a, res = np.array(2.5), np.arange(6.0).reshape(2, 3), poison((2, 2), np.float64)
    launch(fn, (1, 1, 1), sv, a, res)
    assert res[1, 0] == 6.5 and np.isnan(res[0, 0]) and sv[()] == 4.0


# ---------------------------------------------------------------------------------------------
# Gather / scatter / atomics

def test_gather_2d_oob_and_mask() -> None:
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    i0 = RNG.integers(-3, 8, (4, 8)).astype(np.int32)
    i1 = RNG.integers(-3, 10, (4, 8)).astype(np.int64)
    mask = RNG.random((4, 8)) < 0.7
    pad = RNG.standard_normal((4, 8)).astype(np.float32)
    fn, b, (arr, p0, p1, pm, pp, out) = kernel(
        ArrayType(D.float32, 2), ArrayType(D.int32, 2), ArrayType(D.int64, 2),
        ArrayType(D.bool_, 2), ArrayType(D.float32, 2), ArrayType(D.float32, 2))
    with b.inside(fn.body):
        z = const(b, 0)
        t0, t1, tm, tp = (load(b, p, [z, z], (4, 8)) for p in (p0, p1, pm, pp))
        g = b.value(Opcode.GATHER, [arr, t0, t1, tp, tm], tp.type, has_mask=True,
                    check_bounds=True)
        store(b, out, [z, z], g)
    res = poison((4, 8), np.float32)
    launch(fn, (1, 1, 1), a, i0, i1, mask, pad, res)
    ok = (i0 >= 0) & (i0 < 5) & (i1 >= 0) & (i1 < 7) & mask
    want = np.where(ok, a[np.clip(i0, 0, 4), np.clip(i1, 0, 6)], pad)
    np.testing.assert_array_equal(res, want)


def test_gather_unsigned_indices_and_scalar_gather() -> None:
    """uint32 indices near 2**32 are out of bounds (no wraparound); a 0-d index gathers one."""
    a = np.arange(10, dtype=np.float64) * 1.5
    idx = np.array([0, 9, 10, 2**32 - 1, 2**31, 5, 3, 2**32 - 10], np.uint32)
    fn, b, (arr, pi, out) = kernel(ArrayType(D.float64, 1), ArrayType(D.uint32, 1),
                                   ArrayType(D.float64, 1))
    with b.inside(fn.body):
        z = const(b, 0)
        ti = load(b, pi, [z], (8,))
        g = b.value(Opcode.GATHER, [arr, ti, tile_of(b, -1.0, D.float64, (8,))],
                    TileType(D.float64, (8,)), has_mask=False, check_bounds=True)
        store(b, out, [z], g)
        one = b.value(Opcode.GATHER, [arr, const(b, 7), const(b, 0.25, D.float64)],
                      scalar(D.float64), has_mask=False, check_bounds=True)
        store(b, out, [const(b, 8)], b.value(Opcode.RESHAPE, [one], TileType(D.float64, (1,)),
                                             shape=(1,)))
    res = poison((9,), np.float64)
    launch(fn, (1, 1, 1), a, idx, res)
    np.testing.assert_array_equal(res, [0, 13.5, -1, -1, -1, 7.5, 4.5, -1, 10.5])


def test_scatter_oob_mask_and_zero_dim_gather() -> None:
    n = 16
    idx = np.concatenate([RNG.permutation(20)[:12] - 2, [-1, 100, 3, 3]]).astype(np.int32)
    vals = np.arange(n, dtype=np.int16) + 1
    mask = np.ones(n, bool)
    mask[[0, 5, 14]] = False
    fn, b, (arr, pi, pv, pm, scal, out) = kernel(
        ArrayType(D.int16, 1), ArrayType(D.int32, 1), ArrayType(D.int16, 1), ArrayType(D.bool_, 1),
        ArrayType(D.int16, 0), ArrayType(D.int16, 1))
    with b.inside(fn.body):
        z = const(b, 0)
        ti, tv, tm = (load(b, p, [z], (n,)) for p in (pi, pv, pm))
        b.emit(Opcode.SCATTER, [arr, ti, tv, tm], [], has_mask=True, check_bounds=True)
        pad = tile_of(b, -7, D.int16, (n,))
        g = b.value(Opcode.GATHER, [scal, pad, tm], tv.type, has_mask=True, check_bounds=True)
        store(b, out, [z], g)
    a = np.full(16, -1, np.int16)
    res = poison((n,), np.int16)
    launch(fn, (1, 1, 1), a, idx, vals, mask, np.array(42, np.int16), res)
    want = np.full(16, -1, np.int16)
    for k in range(n):
        if mask[k] and 0 <= idx[k] < 16 and idx[k] != 3:
            want[idx[k]] = vals[k]
    assert a[3] in vals[(idx == 3) & mask]
    a[3] = want[3]
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(res, np.where(mask, 42, -7))


def _atomic_kernel(fn_kind: AtomicFn, dtype: D.DType, n: int, nvals: int):
    fn, b, params = kernel(ArrayType(dtype, 1), ArrayType(D.int32, 1),
                           *[ArrayType(dtype, 1)] * nvals, ArrayType(D.bool_, 1),
                           ArrayType(dtype, 1))
    arr, pi, *pvals, pm, out = params
    with b.inside(fn.body):
        z = const(b, 0)
        ti, tm = load(b, pi, [z], (n,)), load(b, pm, [z], (n,))
        tv = [load(b, p, [z], (n,)) for p in pvals]
        old = b.value(Opcode.ATOMIC, [arr, ti, *tv, tm], TileType(dtype, (n,)), fn=fn_kind,
                      order=None, scope=None, has_mask=True)
        store(b, out, [z], old)
    return fn


@pytest.mark.parametrize("fn_kind,dtype", [
    (AtomicFn.ADD, D.int32), (AtomicFn.ADD, D.float32), (AtomicFn.ADD, D.float16),
    (AtomicFn.MAX, D.int32), (AtomicFn.MIN, D.uint32), (AtomicFn.XOR, D.int64),
    (AtomicFn.XCHG, D.float32), (AtomicFn.CAS, D.int32)])
def test_atomics_duplicates_sequential(fn_kind: AtomicFn, dtype: D.DType) -> None:
    """Old values and final contents equal a lane-by-lane sequential application."""
    n, size = 32, 6
    npd = dtype.np_dtype
    idx = RNG.integers(-1, size + 1, n).astype(np.int32)
    mask = RNG.random(n) < 0.8
    if dtype.is_float:
        vals = [RNG.standard_normal(n).astype(npd) * 100]
    else:
        vals = [RNG.integers(0, 5, n).astype(npd)]
    if fn_kind is AtomicFn.CAS:
        vals = [RNG.integers(0, 3, n).astype(npd), RNG.integers(0, 3, n).astype(npd)]
    base = RNG.standard_normal(size) if dtype.is_float else RNG.integers(0, 3, size)
    base = base.astype(npd)
    arr, out = base.copy(), poison((n,), npd)
    launch(_atomic_kernel(fn_kind, dtype, n, len(vals)), (1, 1, 1), arr, idx, *vals, mask, out)
    want, old = base.copy(), np.zeros(n, npd)
    ops = {AtomicFn.ADD: lambda o, v: o + v, AtomicFn.MAX: max, AtomicFn.MIN: min,
           AtomicFn.XOR: lambda o, v: o ^ v, AtomicFn.XCHG: lambda o, v: v}
    with np.errstate(all="ignore"):
        for k in range(n):
            if fn_kind is AtomicFn.CAS:
                old[k] = vals[0][k]
            if not (mask[k] and 0 <= idx[k] < size):
                continue
            old[k] = o = want[idx[k]]
            if fn_kind is AtomicFn.CAS:
                want[idx[k]] = vals[1][k] if o == vals[0][k] else o
            else:
                want[idx[k]] = ops[fn_kind](o, vals[0][k])
    np.testing.assert_array_equal(out, old)
    np.testing.assert_array_equal(arr, want)


def test_atomic_counter_on_zero_dim_array_across_blocks() -> None:
    fn, b, (ctr, out) = kernel(ArrayType(D.int32, 0), ArrayType(D.int32, 1))
    with b.inside(fn.body):
        ones = tile_of(b, 1, D.int32, (4,))
        old = b.value(Opcode.ATOMIC, [ctr, ones], TileType(D.int32, (4,)), fn=AtomicFn.ADD,
                      order=None, scope=None, has_mask=False)
        store(b, out, [b.value(Opcode.BID, [], I32, axis=0)], old)
    ctr, out = np.array(0, np.int32), poison((12,), np.int32)
    launch(fn, (3, 1, 1), ctr, out)
    assert ctr[()] == 12
    np.testing.assert_array_equal(out, np.arange(12))


# ---------------------------------------------------------------------------------------------
# Elementwise math

def _elementwise(fn: BinaryFn, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dtype = D.to_dtype(x.dtype)
    return apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty), [x, y], dtype, x.shape)


def test_integer_binary_python_semantics_and_wrap() -> None:
    x = RNG.integers(-2**31, 2**31, 64).astype(np.int32)
    y = RNG.integers(1, 50, 64).astype(np.int32) * RNG.choice([-1, 1], 64).astype(np.int32)
    y[:4] = 0
    x[4], y[4] = -2**31, -1
    for fn, ref in [(BinaryFn.FLOORDIV, lambda a, c: a // c), (BinaryFn.MOD, lambda a, c: a % c),
                    (BinaryFn.ADD, lambda a, c: a + c), (BinaryFn.MUL, lambda a, c: a * c),
                    (BinaryFn.SUB, lambda a, c: a - c)]:
        got = _elementwise(fn, x, y)
        for k in range(5, 64):
            want = ref(int(x[k]), int(y[k]))
            assert got[k] == ((want + 2**31) % 2**32) - 2**31, (fn, x[k], y[k])
    sh = np.array([-8, 1, -1, 2**30] * 4, np.int32)
    amt = np.array([1, 3, 31, 2] * 4, np.int32)
    np.testing.assert_array_equal(_elementwise(BinaryFn.SHR, sh, amt), sh >> amt)
    u = sh.view(np.uint32)
    np.testing.assert_array_equal(_elementwise(BinaryFn.SHR, u, amt.view(np.uint32)),
                                  u >> amt.view(np.uint32))


def test_float_binary_nan_rules_and_half_rounding() -> None:
    x = np.array([1.0, np.nan, 3.0, np.nan, -7.5, 7.5, -0.0, 2.0], np.float32)
    y = np.array([np.nan, 2.0, 1.0, np.nan, 2.0, -2.0, 1.0, 0.5], np.float32)
    np.testing.assert_array_equal(_elementwise(BinaryFn.MIN, x, y), np.fmin(x, y))
    np.testing.assert_array_equal(_elementwise(BinaryFn.MAX_NAN, x, y), np.maximum(x, y))
    np.testing.assert_array_equal(_elementwise(BinaryFn.FLOORDIV, x, y), np.floor(x / y))
    got = _elementwise(BinaryFn.MOD, x[4:], y[4:])
    want = [float(p) % float(q) for p, q in zip(x[4:], y[4:])]
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    for dt in (np.float16, ml_dtypes.bfloat16):
        a = RNG.standard_normal(32).astype(dt)
        c = RNG.standard_normal(32).astype(dt)
        for fn, ref in [(BinaryFn.MUL, np.multiply), (BinaryFn.TRUEDIV, np.divide),
                        (BinaryFn.ATAN2, np.arctan2)]:
            want = ref(a.astype(np.float32), c.astype(np.float32)).astype(dt)
            got = _elementwise(fn, a, c)
            assert got.dtype == dt
            np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_unary_compare_where() -> None:
    x = (RNG.standard_normal(16) * 3).astype(ml_dtypes.bfloat16)
    x[0] = np.nan
    got = apply_tiles(lambda b, t: unary(b, UnaryFn.EXP, t), [x], D.bfloat16, (16,))
    want = np.exp(x.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    got = apply_tiles(lambda b, t: unary(b, UnaryFn.ISNAN, t, D.bool_), [x], D.bool_, (16,))
    np.testing.assert_array_equal(got, np.isnan(x.astype(np.float32)))
    i = np.array([-2**31, -3, 0, 5] * 4, np.int32)
    np.testing.assert_array_equal(
        apply_tiles(lambda b, t: unary(b, UnaryFn.NEG, t), [i], D.int32, (16,)), -i)
    np.testing.assert_array_equal(
        apply_tiles(lambda b, t: unary(b, UnaryFn.NOT, t), [i], D.int32, (16,)), ~i)
    f = RNG.random(16).astype(np.float32) + 0.1
    np.testing.assert_allclose(
        apply_tiles(lambda b, t: unary(b, UnaryFn.RSQRT, t), [f], D.float32, (16,)),
        1 / np.sqrt(f.astype(np.float64)), rtol=1e-6)

    def sel(b, tx, ty):
        cond = b.value(Opcode.COMPARE, [tx, ty], tx.tile.with_dtype(D.bool_), fn=CompareFn.NE)
        return b.value(Opcode.WHERE, [cond, tx, ty], tx.type)
    p = np.array([1, np.nan, 3, 4] * 4, np.float32)
    q = np.array([1, np.nan, 2, 5] * 4, np.float32)
    np.testing.assert_array_equal(apply_tiles(sel, [p, q], D.float32, (16,)),
                                  np.where(p != q, p, q))


# ---------------------------------------------------------------------------------------------
# Casts

def _cast(x: np.ndarray, dst: D.DType, rounding: RoundingMode | None = None) -> np.ndarray:
    """Cast x to dst (stored through a bitcast for tfloat32, which has no array dtype)."""
    store_dt = D.float32 if dst is D.tfloat32 else dst

    def build(b, t):
        v = b.value(Opcode.CAST, [t], t.tile.with_dtype(dst), dtype=dst, rounding=rounding)
        if dst is D.tfloat32:
            v = b.value(Opcode.BITCAST, [v], t.tile.with_dtype(D.float32), dtype=D.float32)
        return v
    return apply_tiles(build, [x], store_dt, x.shape)


def _tf32_reference(v: float) -> float:
    (u,) = struct.unpack("<I", struct.pack("<f", v))
    if (u & 0x7F800000) == 0x7F800000:
        return v
    low = u & 0x1FFF
    u &= ~0x1FFF
    if low > 0x1000 or (low == 0x1000 and u & 0x2000):
        u += 0x2000
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def test_cast_tf32_bit_pattern() -> None:
    x = RNG.standard_normal(256).astype(np.float32) * np.float32(1e3)
    bits = x.view(np.uint32)
    bits[:8] = (bits[:8] & ~np.uint32(0x1FFF)) | np.uint32(0x1000)  # exact ties, both parities
    bits[1] |= 0x2000
    x[8:12] = [np.inf, -np.inf, 3.4028235e38, -0.0]
    x[12] = np.nan
    got = _cast(x, D.tfloat32)
    want = np.array([_tf32_reference(float(v)) for v in x], np.float32)
    np.testing.assert_array_equal(got, want)
    assert (got.view(np.uint32)[:12] & 0x1FFF == 0).all() and np.isinf(got[10])


def test_cast_int_and_bool_rules() -> None:
    i = np.array([300, -129, 127, 2**31 - 1, -2**31, 0, 1, -1] * 2, np.int32)
    np.testing.assert_array_equal(_cast(i, D.int8), i.astype(np.int8))
    np.testing.assert_array_equal(_cast(i, D.bool_), i != 0)
    np.testing.assert_array_equal(_cast(i, D.uint16), i.astype(np.uint16))
    f = np.array([-2.7, 2.7, -0.5, 1e10, -1e10, np.nan, 127.9, -128.9] * 2, np.float32)
    got = _cast(f, D.int8)
    np.testing.assert_array_equal(got[[0, 1, 2, 6, 7]], [-2, 2, 0, 127, -128])
    got = _cast(f, D.int32)
    np.testing.assert_array_equal(got[:3], [-2, 2, 0])
    np.testing.assert_array_equal(_cast(f, D.bool_), f != 0)
    bools = np.array([True, False] * 8)
    np.testing.assert_array_equal(_cast(bools, D.float16), bools.astype(np.float16))


def test_cast_float_rounding() -> None:
    x = (RNG.standard_normal(64) * 10).astype(np.float32)
    for dst in (D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2):
        np.testing.assert_array_equal(_cast(x, dst).astype(np.float32),
                                      x.astype(dst.np_dtype).astype(np.float32))
    # float64 → bfloat16 must round once: just above a tie rounds up.
    tie = 1 + 2.0**-8
    d = np.array([tie + 2.0**-30, tie, 1 + 3 * 2.0**-8, -(tie + 2.0**-40)] * 4)
    got = _cast(d, D.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(got[:4], [1 + 2.0**-7, 1.0, 1 + 2 * 2.0**-7, -(1 + 2.0**-7)])
    # RZ truncates toward zero.
    h = np.array([1.0009765625 + 2**-12, -1.0009765625 - 2**-12, 65519.0, 1e6] * 4, np.float32)
    got = _cast(h, D.float16, RoundingMode.RZ)
    np.testing.assert_array_equal(got[:4].astype(np.float64), [1.0009765625, -1.0009765625,
                                                              65504.0, 65504.0])
    np.testing.assert_array_equal(_cast(x, D.float16, RoundingMode.RN), x.astype(np.float16))


# ---------------------------------------------------------------------------------------------
# Reductions and scans

def _reduce(x: np.ndarray, fn: ReduceFn, axis: int, keepdims: bool = False,
            out: D.DType | None = None) -> np.ndarray:
    dtype = out or D.to_dtype(x.dtype)
    shape = tuple(1 if k == axis else s for k, s in enumerate(x.shape)) if keepdims else \
        tuple(s for k, s in enumerate(x.shape) if k != axis)

    def build(b, t):
        return b.value(Opcode.REDUCE, [t], TileType(dtype, shape), fn=fn, axis=axis,
                       keepdims=keepdims)
    return apply_tiles(build, [x], dtype, shape)


def test_reduce_nan_ties_and_wrap() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    x[0, 2] = np.nan
    x[1, :] = np.nan
    x[2, 1] = x[2, 5] = 10.0
    x[3, 0] = np.nan
    x[3, 6] = x[3, 7] = -10.0
    np.testing.assert_array_equal(_reduce(x, ReduceFn.MAX, 1), np.fmax.reduce(x, axis=1))
    np.testing.assert_array_equal(_reduce(x, ReduceFn.MIN, 1, keepdims=True),
                                  np.fmin.reduce(x, axis=1, keepdims=True))
    am = _reduce(x, ReduceFn.ARGMAX, 1, out=D.int32)
    np.testing.assert_array_equal(am, [np.nanargmax(x[0]), 0, 1, np.nanargmax(x[3])])
    assert _reduce(x, ReduceFn.ARGMIN, 1, out=D.int32)[3] == 6
    ints = RNG.integers(-128, 128, (8, 4)).astype(np.int8)
    np.testing.assert_array_equal(_reduce(ints, ReduceFn.SUM, 0), ints.sum(0, dtype=np.int8))
    np.testing.assert_array_equal(_reduce(ints, ReduceFn.PROD, 0), ints.prod(0, dtype=np.int8))
    np.testing.assert_array_equal(_reduce(ints, ReduceFn.ARGMIN, 0, out=D.int32), ints.argmin(0))
    h = np.full(256, 1.0, np.float16)
    h[0] = 2048.0
    assert _reduce(h, ReduceFn.SUM, 0)[()] == np.float16(2048 + 255)


def test_scans_forward_reverse() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float64)
    for fn, ref in [(ScanFn.CUMSUM, np.cumsum), (ScanFn.CUMPROD, np.cumprod)]:
        for reverse in (False, True):
            def build(b, t):
                return b.value(Opcode.SCAN, [t], t.type, fn=fn, axis=1, reverse=reverse)
            got = apply_tiles(build, [x], D.float64, x.shape)
            want = np.flip(ref(np.flip(x, 1), 1), 1) if reverse else ref(x, 1)
            np.testing.assert_allclose(got, want, rtol=1e-12)
    i = np.full(16, 200, np.uint8)

    def build_u8(b, t):
        return b.value(Opcode.SCAN, [t], t.type, fn=ScanFn.CUMSUM, axis=0, reverse=False)
    np.testing.assert_array_equal(apply_tiles(build_u8, [i], D.uint8, (16,)),
                                  np.cumsum(i, dtype=np.uint8))


# ---------------------------------------------------------------------------------------------
# Shape ops

def test_shape_ops() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def build(b, t):
        p = b.value(Opcode.PERMUTE, [t], TileType(D.float32, (8, 4)), axes=(1, 0))
        r = b.value(Opcode.RESHAPE, [p], TileType(D.float32, (4, 8)), shape=(4, 8))
        c = b.value(Opcode.CAT, [r, t], TileType(D.float32, (8, 8)), axis=0)
        e = b.value(Opcode.EXTRACT, [c, const(b, 1), const(b, 0)], TileType(D.float32, (4, 4)),
                    shape=(4, 4))
        row = b.value(Opcode.EXTRACT, [e, const(b, 2), const(b, 0)], TileType(D.float32, (1, 4)),
                      shape=(1, 4))
        return b.value(Opcode.BROADCAST, [row], TileType(D.float32, (4, 4)), shape=(4, 4))
    got = apply_tiles(build, [x], D.float32, (4, 4))
    np.testing.assert_array_equal(got, np.broadcast_to(x[2:3, :4], (4, 4)))


# ---------------------------------------------------------------------------------------------
# MMA

@pytest.mark.parametrize("in_dt,acc_dt", [(D.float16, D.float32), (D.float16, D.float16),
                                          (D.bfloat16, D.float32), (D.tfloat32, D.float32),
                                          (D.float8_e4m3fn, D.float32), (D.int8, D.int32),
                                          (D.float64, D.float64)])
def test_mma(in_dt: D.DType, acc_dt: D.DType) -> None:
    m, n, k = 16, 8, 32
    if in_dt is D.int8:
        a, bb = (RNG.integers(-128, 128, s).astype(np.int8) for s in ((2, m, k), (2, k, n)))
        acc = RNG.integers(2**31 - 2000, 2**31 - 1, (2, m, n)).astype(np.int32)
    else:
        store_dt = np.float32 if in_dt is D.tfloat32 else in_dt.np_dtype
        a, bb = (RNG.standard_normal(s).astype(store_dt) for s in ((2, m, k), (2, k, n)))
        acc = RNG.standard_normal((2, m, n)).astype(acc_dt.np_dtype)
    in_store = D.float32 if in_dt is D.tfloat32 else in_dt

    def build(b, ta, tb, tc):
        if in_dt is D.tfloat32:
            ta, tb = (b.value(Opcode.CAST, [t], t.tile.with_dtype(D.tfloat32), dtype=D.tfloat32,
                              rounding=None) for t in (ta, tb))
        return b.value(Opcode.MMA, [ta, tb, tc], tc.type)
    got = apply_tiles(build, [a, bb, acc], acc_dt, acc.shape)
    if in_dt is D.int8:
        want = (a.astype(np.int64) @ bb.astype(np.int64) + acc).astype(np.int32)
        np.testing.assert_array_equal(got, want)
        return
    fa, fb = (v.astype(np.float64) for v in (a, bb))
    if in_dt is D.tfloat32:
        fa, fb = (np.vectorize(_tf32_reference)(v).astype(np.float64) for v in (fa, fb))
        assert in_store is D.float32
    want = fa @ fb + acc.astype(np.float64)
    tol = {D.float16: 2e-3, D.float32: 1e-5, D.float64: 1e-12}[acc_dt]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 10)


def matmul_ir(bm: int = 32, bn: int = 32, bk: int = 32) -> Function:
    """C = A @ B in float32 with tf32 inputs: grid (M/bm, N/bn), a K loop of load, cast, mma."""
    fn, b, (pa, pb, pc) = kernel(*[ArrayType(D.float32, 2)] * 3)
    tm = TileType(D.float32, (bm, bn))
    with b.inside(fn.body):
        bx, by = (b.value(Opcode.BID, [], I32, axis=k) for k in range(2))
        kdim = b.value(Opcode.ARRAY_SHAPE, [pa], I32, axis=1)
        nk = binary(b, BinaryFn.FLOORDIV, binary(b, BinaryFn.ADD, kdim, const(b, bk - 1)),
                    const(b, bk))
        acc0 = tile_of(b, 0.0, D.float32, (bm, bn))
        body = Block([Value(I32), Value(tm)])
        loop = b.emit(Opcode.FOR, [const(b, 0), nk, const(b, 1), acc0], [tm], blocks=[body])
        with b.inside(body):
            kk, acc = body.args
            ta = load(b, pa, [bx, kk], (bm, bk), padding=PaddingMode.ZERO)
            tb = load(b, pb, [kk, by], (bk, bn), padding=PaddingMode.ZERO)
            ta, tb = (b.value(Opcode.CAST, [t], t.tile.with_dtype(D.tfloat32), dtype=D.tfloat32,
                              rounding=None) for t in (ta, tb))
            b.emit(Opcode.YIELD, [b.value(Opcode.MMA, [ta, tb, acc], tm)], [])
        store(b, pc, [bx, by], loop.result)
    return fn


def test_matmul_kernel_partial_tiles() -> None:
    a = RNG.standard_normal((70, 50)).astype(np.float32)
    bb = RNG.standard_normal((50, 40)).astype(np.float32)
    c = poison((70, 40), np.float32)
    launch(matmul_ir(), (3, 2, 1), a, bb, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ bb, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------------------------------------
# Control flow, print, assert

def test_for_loop_carried_values_and_if() -> None:
    """s = sum(range(lb, ub, 3)); p = number of odd iterations via IF; per block."""
    fn, b, (lb, ub, out) = kernel(I32, I32, ArrayType(D.int32, 2))
    with b.inside(fn.body):
        bx = b.value(Opcode.BID, [], I32, axis=0)
        hi = binary(b, BinaryFn.ADD, ub, bx)
        body = Block([Value(I32), Value(I32), Value(I32)])
        loop = b.emit(Opcode.FOR, [lb, hi, const(b, 3), const(b, 0), const(b, 0)], [I32, I32],
                      blocks=[body])
        with b.inside(body):
            i, s, p = body.args
            odd = b.value(Opcode.COMPARE, [binary(b, BinaryFn.MOD, i, const(b, 2)), const(b, 1)],
                          B1, fn=CompareFn.EQ)
            then, other = Block(), Block()
            br = b.emit(Opcode.IF, [odd], [I32], blocks=[then, other])
            with b.inside(then):
                b.emit(Opcode.YIELD, [binary(b, BinaryFn.ADD, p, const(b, 1))], [])
            with b.inside(other):
                b.emit(Opcode.YIELD, [p], [])
            b.emit(Opcode.YIELD, [binary(b, BinaryFn.ADD, s, i), br.result], [])
        s, p = loop.results
        store(b, out, [bx, const(b, 0)], s)
        store(b, out, [bx, const(b, 1)], p)
    out = poison((5, 2), np.int32)
    launch(fn, (5, 1, 1), -4, 10, out)
    for x in range(5):
        r = range(-4, 10 + x, 3)
        assert out[x].tolist() == [sum(r), sum(1 for i in r if i % 2 == 1)]


def test_while_loop() -> None:
    """Collatz step count of n (before: cond n != 1; after: step)."""
    fn, b, (n0, out) = kernel(I32, ArrayType(D.int32, 1))
    with b.inside(fn.body):
        before, after = Block([Value(I32), Value(I32)]), Block([Value(I32), Value(I32)])
        loop = b.emit(Opcode.WHILE, [n0, const(b, 0)], [I32, I32], blocks=[before, after])
        with b.inside(before):
            n, c = before.args
            cond = b.value(Opcode.COMPARE, [n, const(b, 1)], B1, fn=CompareFn.NE)
            b.emit(Opcode.CONDITION, [cond, n, c], [])
        with b.inside(after):
            n, c = after.args
            even = b.value(Opcode.COMPARE, [binary(b, BinaryFn.AND, n, const(b, 1)), const(b, 0)],
                           B1, fn=CompareFn.EQ)
            half = binary(b, BinaryFn.SHR, n, const(b, 1))
            tri = binary(b, BinaryFn.ADD, binary(b, BinaryFn.MUL, n, const(b, 3)), const(b, 1))
            nxt = b.value(Opcode.WHERE, [even, half, tri], I32)
            b.emit(Opcode.YIELD, [nxt, binary(b, BinaryFn.ADD, c, const(b, 1))], [])
        store(b, out, [const(b, 0)], loop.results[1])
        store(b, out, [const(b, 1)], loop.results[0])
    out = poison((2,), np.int32)
    launch(fn, (1, 1, 1), 27, out)
    assert out.tolist() == [111, 1]
    launch(fn, (1, 1, 1), 1, out)
    assert out.tolist() == [0, 1]


def test_print_and_assert(capsys: pytest.CaptureFixture[str]) -> None:
    fn, b, (arr,) = kernel(ArrayType(D.float32, 1))
    with b.inside(fn.body):
        bx = b.value(Opcode.BID, [], I32, axis=0)
        t = load(b, arr, [const(b, 0)], (4,))
        flags = b.value(Opcode.COMPARE, [t, tile_of(b, 1.0, D.float32, (4,))],
                        TileType(D.bool_, (4,)), fn=CompareFn.GE)
        b.emit(Opcode.PRINT, [bx, t, flags], [], pieces=["bid=", " t=", " f=", "\n"])
        ok = b.value(Opcode.COMPARE, [bx, const(b, 1)], B1, fn=CompareFn.LT)
        b.emit(Opcode.ASSERT, [ok], [], message="bid too large")
    with pytest.raises(AssertionError, match="bid too large"):
        launch(fn, (3, 1, 1), np.array([0.5, 1, 2.25, -3], np.float32))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["bid=0 t=[0.500000, 1.000000, 2.250000, -3.000000] f=[0, 1, 1, 0]",
                     "bid=1 t=[0.500000, 1.000000, 2.250000, -3.000000] f=[0, 1, 1, 0]"]
