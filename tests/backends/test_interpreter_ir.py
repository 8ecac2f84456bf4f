"""The NumPy interpreter on hand-built IR, checked against independent NumPy references.

Outputs are poisoned (NaN or a sentinel) before each launch so that unwritten elements fail.
Rounding modes and casts are checked against exact rational arithmetic (`fractions.Fraction`)
rounded to the destination format in the requested direction.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

from tilecraft.backends.base import BackendKind
from tilecraft.backends.interpreter import InterpreterBackend
from tilecraft.backends.interpreter.registry import KIND_TABLES, RULES, kind_table, missing_rules
from tilecraft.ir import (OP_CLASSES, ArrayType, AtomicFn, BinaryFn, Block, Builder, CompareFn,
                          Function, ListType, ReduceFn, ScanFn, TileType, UnaryFn, Value, ops,
                          scalar, verify)
from tilecraft.language import dtypes as D
from tilecraft.language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode

I32, F32, B1 = scalar(D.int32), scalar(D.float32), scalar(D.bool_)
RNG = np.random.default_rng(1234)


# ---------------------------------------------------------------------------------------------
# IR construction helpers

def kernel(*params: ArrayType | TileType | ListType) -> tuple[Function, Builder, list[Value]]:
    """An empty kernel with the given parameter types and a builder positioned in its body."""
    b = Builder()
    values = [b.new_value(t, f"p{i}") for i, t in enumerate(params)]
    fn = Function("k", values, [f"p{i}" for i in range(len(values))], Block(), None)
    return fn, b, values


def const(b: Builder, value: Any, dtype: D.DType = D.int32) -> Value:
    """A scalar constant (the value converted to the dtype's Python type)."""
    py = bool if dtype is D.bool_ else int if dtype.is_int else float
    return b.value(ops.Const, value=py(value), dtype=dtype)


def tile_of(b: Builder, value: Any, dtype: D.DType, shape: tuple[int, ...]) -> Value:
    """A constant tile: const scalar, reshaped to rank, broadcast."""
    v = const(b, value, dtype)
    if shape:
        v = b.value(ops.Reshape, x=v, shape=(1,) * len(shape))
        v = b.value(ops.Broadcast, x=v, shape=shape)
    return v


def block(b: Builder, *arg_types: TileType) -> Block:
    """A region with fresh arguments of the given types (filled by `with b.inside(blk)`)."""
    return Block([b.new_value(t) for t in arg_types])


def load(b: Builder, arr: Value, index: list[Value], shape: tuple[int, ...],
         order: tuple[int, ...] | None = None,
         padding: PaddingMode = PaddingMode.UNDETERMINED, **hints: Any) -> Value:
    return b.value(ops.Load, array=arr, index=tuple(index), shape=shape,
                   order=order or tuple(range(arr.type.ndim)), padding=padding, **hints)


def store(b: Builder, arr: Value, index: list[Value], tile: Value,
          order: tuple[int, ...] | None = None, **hints: Any) -> None:
    b.emit(ops.Store, array=arr, index=tuple(index), tile=tile,
           order=order or tuple(range(arr.type.ndim)), **hints)


def unary(b: Builder, fn: UnaryFn, x: Value, **options: Any) -> Value:
    return b.value(ops.Unary, fn=fn, x=x, **options)


def binary(b: Builder, fn: BinaryFn, x: Value, y: Value, **options: Any) -> Value:
    return b.value(ops.Binary, fn=fn, lhs=x, rhs=y, **options)


def compare(b: Builder, fn: CompareFn, x: Value, y: Value) -> Value:
    return b.value(ops.Compare, fn=fn, lhs=x, rhs=y)


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

def test_every_op_class_has_a_rule() -> None:
    assert missing_rules() == []
    assert set(RULES) == set(OP_CLASSES)
    assert InterpreterBackend.kind is BackendKind.INTERPRETER


@pytest.mark.parametrize("kinds", [UnaryFn, BinaryFn, CompareFn, ReduceFn, ScanFn, AtomicFn],
                         ids=lambda k: k.__name__)
def test_every_sub_kind_has_a_table_entry(kinds: type) -> None:
    assert set(KIND_TABLES[kinds]) == set(kinds)
    assert all(callable(f) for f in KIND_TABLES[kinds].values())


def test_sub_kind_tables_are_exactly_the_six_families() -> None:
    assert set(KIND_TABLES) == {UnaryFn, BinaryFn, CompareFn, ReduceFn, ScanFn, AtomicFn}


def test_gaps_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table lacking members fails at import, naming them; a missing rule is listed."""
    with pytest.raises(ImportError, match="ScanFn CUMPROD"):
        kind_table(ScanFn, {ScanFn.CUMSUM: np.cumsum})
    monkeypatch.delitem(RULES, ops.Mma)
    assert missing_rules() == [ops.Mma]


def test_scalar_args_bid_and_array_queries() -> None:
    """out[bz, by, bx] = bid + num_blocks * n + shape/stride of a strided view."""
    fn, b, (arr, n, out) = kernel(ArrayType(D.float32, 2), I32, ArrayType(D.int32, 4))
    with b.inside(fn.body):
        bids = [b.value(ops.Bid, axis=k) for k in range(3)]
        nbs = [b.value(ops.NumBlocks, axis=k) for k in range(3)]
        vals = [binary(b, BinaryFn.ADD, bids[0], binary(b, BinaryFn.MUL, nbs[k], n))
                for k in range(3)]
        vals.append(b.value(ops.ArrayShape, array=arr, axis=1))
        vals.append(b.value(ops.ArrayStride, array=arr, axis=0))
        vals.append(b.value(ops.ArrayStride, array=arr, axis=1))
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


def test_list_get_and_array_slice() -> None:
    """lst[bid] sliced to rows [1, 3) along axis 0, stored through the view: only those rows of
    the chosen array change."""
    elem = ArrayType(D.float32, 2)
    fn, b, (lst, src) = kernel(ListType(elem, 3), ArrayType(D.float32, 2))
    with b.inside(fn.body):
        bx = b.value(ops.Bid, axis=0)
        arr = b.value(ops.ListGet, list=lst, index=bx)
        view = b.value(ops.ArraySlice, array=arr, start=const(b, 1), stop=const(b, 3), axis=0)
        z = const(b, 0)
        rows = b.value(ops.ArrayShape, array=view, axis=0)
        t = load(b, src, [z, z], (4, 4))
        t = binary(b, BinaryFn.ADD, t, b.value(ops.Broadcast, x=b.value(
            ops.Reshape, x=b.value(ops.Cast, x=rows, dtype=D.float32), shape=(1, 1)), shape=(4, 4)))
        store(b, view, [z, z], t)
    arrays = [np.zeros((5, 4), np.float32) for _ in range(3)]
    s = RNG.standard_normal((4, 4)).astype(np.float32)
    launch(fn, (2, 1, 1), arrays, s)
    for k, a in enumerate(arrays):
        want = np.zeros((5, 4), np.float32)
        if k < 2:
            want[1:3] = s[:2] + 2
        np.testing.assert_array_equal(a, want)


# ---------------------------------------------------------------------------------------------
# Load / store

@pytest.mark.parametrize("padding", list(PaddingMode))
def test_load_partial_tiles_padding_and_order(padding: PaddingMode) -> None:
    """Tiles of A.T (order=(1,0)) of shape 8x16 over a 21x37 view, with padding."""
    a = RNG.standard_normal((37, 21)).astype(np.float32)
    fn, b, (arr, out) = kernel(ArrayType(D.float32, 2), ArrayType(D.float32, 2))
    with b.inside(fn.body):
        i, j = (b.value(ops.Bid, axis=k) for k in range(2))
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
        i, j = (b.value(ops.Bid, axis=k) for k in range(2))
        t = load(b, arr, [i, j], (4, 4), padding=PaddingMode.NAN)
        t = b.value(ops.Permute, x=t, axes=(1, 0))
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
        v = load(b, s, [], ())
        one = const(b, 1)
        u = load(b, arr, [one, one], ())
        store(b, out, [one, const(b, 0)], binary(b, BinaryFn.ADD, v, u))
        store(b, s, [], u, check_bounds=False, latency=2, memory_order=MemoryOrder.RELEASE,
              memory_scope=MemoryScope.SYS)  # hints and ordering do not change results
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
        g = b.value(ops.Gather, array=arr, index=(t0, t1), padding=tp, mask=tm)
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
        g = b.value(ops.Gather, array=arr, index=(ti,), padding=tile_of(b, -1.0, D.float64, (8,)))
        store(b, out, [z], g)
        one = b.value(ops.Gather, array=arr, index=(const(b, 7),),
                      padding=const(b, 0.25, D.float64))
        store(b, out, [const(b, 8)], b.value(ops.Reshape, x=one, shape=(1,)))
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
        b.emit(ops.Scatter, array=arr, index=(ti,), value=tv, mask=tm)
        pad = tile_of(b, -7, D.int16, (n,))
        g = b.value(ops.Gather, array=scal, index=(), padding=pad, mask=tm)
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


def _atomic_kernel(fn_kind: AtomicFn | None, dtype: D.DType, n: int, nvals: int) -> Function:
    """old = atomic(arr[idx], vals..., mask) stored to out; fn_kind None is compare-and-swap."""
    fn, b, params = kernel(ArrayType(dtype, 1), ArrayType(D.int32, 1),
                           *[ArrayType(dtype, 1)] * nvals, ArrayType(D.bool_, 1),
                           ArrayType(dtype, 1))
    arr, pi, *pvals, pm, out = params
    with b.inside(fn.body):
        z = const(b, 0)
        ti, tm = load(b, pi, [z], (n,)), load(b, pm, [z], (n,))
        tv = [load(b, p, [z], (n,)) for p in pvals]
        if fn_kind is None:
            old = b.value(ops.AtomicCAS, array=arr, index=(ti,), expected=tv[0], desired=tv[1],
                          mask=tm)
        else:
            old = b.value(ops.AtomicRMW, fn=fn_kind, array=arr, index=(ti,), value=tv[0], mask=tm)
        store(b, out, [z], old)
    return fn


@pytest.mark.parametrize("fn_kind,dtype", [
    (AtomicFn.ADD, D.int32), (AtomicFn.ADD, D.float32), (AtomicFn.ADD, D.float16),
    (AtomicFn.MAX, D.int32), (AtomicFn.MIN, D.uint32), (AtomicFn.XOR, D.int64),
    (AtomicFn.XCHG, D.float32), (AtomicFn.AND, D.uint8), (AtomicFn.OR, D.int16),
    (None, D.int32)])
def test_atomics_duplicates_sequential(fn_kind: AtomicFn | None, dtype: D.DType) -> None:
    """Old values and final contents equal a lane-by-lane sequential application."""
    n, size = 32, 6
    npd = dtype.np_dtype
    idx = RNG.integers(-1, size + 1, n).astype(np.int32)
    mask = RNG.random(n) < 0.8
    if dtype.is_float:
        vals = [RNG.standard_normal(n).astype(npd) * 100]
    else:
        vals = [RNG.integers(0, 5, n).astype(npd)]
    if fn_kind is None:
        vals = [RNG.integers(0, 3, n).astype(npd), RNG.integers(0, 3, n).astype(npd)]
    base = RNG.standard_normal(size) if dtype.is_float else RNG.integers(0, 3, size)
    base = base.astype(npd)
    arr, out = base.copy(), poison((n,), npd)
    launch(_atomic_kernel(fn_kind, dtype, n, len(vals)), (1, 1, 1), arr, idx, *vals, mask, out)
    want, old = base.copy(), np.zeros(n, npd)
    ops = {AtomicFn.ADD: lambda o, v: o + v, AtomicFn.MAX: max, AtomicFn.MIN: min,
           AtomicFn.XOR: lambda o, v: o ^ v, AtomicFn.XCHG: lambda o, v: v,
           AtomicFn.AND: lambda o, v: o & v, AtomicFn.OR: lambda o, v: o | v}
    with np.errstate(all="ignore"):
        for k in range(n):
            if fn_kind is None:
                old[k] = vals[0][k]
            if not (mask[k] and 0 <= idx[k] < size):
                continue
            old[k] = o = want[idx[k]]
            if fn_kind is None:
                want[idx[k]] = vals[1][k] if o == vals[0][k] else o
            else:
                want[idx[k]] = ops[fn_kind](o, vals[0][k])
    np.testing.assert_array_equal(out, old)
    np.testing.assert_array_equal(arr, want)


def test_atomic_counter_on_zero_dim_array_across_blocks() -> None:
    fn, b, (ctr, out) = kernel(ArrayType(D.int32, 0), ArrayType(D.int32, 1))
    with b.inside(fn.body):
        ones = tile_of(b, 1, D.int32, (4,))
        old = b.value(ops.AtomicRMW, fn=AtomicFn.ADD, array=ctr, index=(), value=ones,
                      memory_order=MemoryOrder.RELAXED, memory_scope=MemoryScope.BLOCK)
        store(b, out, [b.value(ops.Bid, axis=0)], old)
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
    got = apply_tiles(lambda b, t: unary(b, UnaryFn.ISNAN, t), [x], D.bool_, (16,))
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
        cond = compare(b, CompareFn.NE, tx, ty)
        return b.value(ops.Where, cond=cond, x=tx, y=ty)
    p = np.array([1, np.nan, 3, 4] * 4, np.float32)
    q = np.array([1, np.nan, 2, 5] * 4, np.float32)
    np.testing.assert_array_equal(apply_tiles(sel, [p, q], D.float32, (16,)),
                                  np.where(p != q, p, q))


_UNARY_REFS: dict[UnaryFn, Callable[[float], Any]] = {
    UnaryFn.NEG: lambda v: -v, UnaryFn.ABS: abs, UnaryFn.EXP: math.exp, UnaryFn.EXP2: lambda v: 2.0**v,
    UnaryFn.LOG: math.log, UnaryFn.LOG2: math.log2, UnaryFn.SQRT: math.sqrt,
    UnaryFn.RSQRT: lambda v: 1 / math.sqrt(v), UnaryFn.SIN: math.sin, UnaryFn.COS: math.cos,
    UnaryFn.TAN: math.tan, UnaryFn.SINH: math.sinh, UnaryFn.COSH: math.cosh,
    UnaryFn.TANH: math.tanh, UnaryFn.FLOOR: math.floor, UnaryFn.CEIL: math.ceil,
    UnaryFn.ISNAN: math.isnan, UnaryFn.NOT: lambda v: ~v,
}


@pytest.mark.parametrize("fn", list(UnaryFn), ids=lambda f: f.name)
def test_every_unary_fn_runs(fn: UnaryFn) -> None:
    """Each UnaryFn against a float64 Python reference (NOT on int32)."""
    if fn is UnaryFn.NOT:
        x = RNG.integers(-1000, 1000, 16).astype(np.int32)
    else:
        x = (RNG.random(16) * 1.9 + 0.1).astype(np.float32)
        x[8:] *= -1 if fn not in (UnaryFn.LOG, UnaryFn.LOG2, UnaryFn.SQRT, UnaryFn.RSQRT) else 1
    if fn is UnaryFn.ISNAN:
        x[3] = np.nan
    out = D.bool_ if fn is UnaryFn.ISNAN else D.to_dtype(x.dtype)
    got = apply_tiles(lambda b, t: unary(b, fn, t), [x], out, x.shape)
    want = np.array([_UNARY_REFS[fn](v.item()) for v in x])
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-7 * 4)


_BINARY_REFS: dict[BinaryFn, Callable[[Any, Any], Any]] = {
    BinaryFn.ADD: lambda a, c: a + c, BinaryFn.SUB: lambda a, c: a - c,
    BinaryFn.MUL: lambda a, c: a * c, BinaryFn.TRUEDIV: lambda a, c: a / c,
    BinaryFn.FLOORDIV: lambda a, c: a // c, BinaryFn.MOD: lambda a, c: a % c,
    BinaryFn.POW: lambda a, c: a ** c, BinaryFn.MIN: min, BinaryFn.MAX: max,
    BinaryFn.MIN_NAN: min, BinaryFn.MAX_NAN: max, BinaryFn.AND: lambda a, c: a & c,
    BinaryFn.OR: lambda a, c: a | c, BinaryFn.XOR: lambda a, c: a ^ c,
    BinaryFn.SHL: lambda a, c: a << c, BinaryFn.SHR: lambda a, c: a >> c,
    BinaryFn.ATAN2: math.atan2,
}
_INT_BINARY = {BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR, BinaryFn.SHL, BinaryFn.SHR}


@pytest.mark.parametrize("fn", list(BinaryFn), ids=lambda f: f.name)
def test_every_binary_fn_runs(fn: BinaryFn) -> None:
    """Each BinaryFn against a Python reference: bitwise ones on int32 (small shifts), the rest
    on float32 (and FLOORDIV/MOD also on int32)."""
    x = (RNG.random(16) * 4 + 0.5).astype(np.float32) * RNG.choice([-1, 1], 16).astype(np.float32)
    y = (RNG.random(16) * 4 + 0.5).astype(np.float32) * RNG.choice([-1, 1], 16).astype(np.float32)
    if fn is BinaryFn.POW:
        x = np.abs(x)
    cases = [] if fn in _INT_BINARY else [(x, y)]
    if fn in _INT_BINARY | {BinaryFn.FLOORDIV, BinaryFn.MOD}:
        xi = RNG.integers(-2**20, 2**20, 16).astype(np.int32)
        yi = RNG.integers(1, 12, 16).astype(np.int32) * (1 if fn in _INT_BINARY else -1)
        cases.append((xi, yi))
    for a, c in cases:
        got = apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty), [a, c], D.to_dtype(a.dtype),
                          a.shape)
        want = np.array([_BINARY_REFS[fn](p.item(), q.item()) for p, q in zip(a, c)])
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=4 * 2e-7, err_msg=fn.name)


@pytest.mark.parametrize("fn", list(CompareFn), ids=lambda f: f.name)
def test_every_compare_fn_runs(fn: CompareFn) -> None:
    """Floats compare ordered (NaN: False) except NE (True), like Python."""
    x = np.array([1, 2, 3, np.nan, -0.0, np.inf, 5, np.nan] * 2, np.float32)
    y = np.array([1, 3, 2, 1, 0.0, np.inf, np.nan, np.nan] * 2, np.float32)
    refs = {CompareFn.EQ: float.__eq__, CompareFn.NE: float.__ne__, CompareFn.LT: float.__lt__,
            CompareFn.LE: float.__le__, CompareFn.GT: float.__gt__, CompareFn.GE: float.__ge__}
    got = apply_tiles(lambda b, tx, ty: compare(b, fn, tx, ty), [x, y], D.bool_, x.shape)
    np.testing.assert_array_equal(got, [refs[fn](p.item(), q.item()) for p, q in zip(x, y)])


# ---------------------------------------------------------------------------------------------
# Casts

def _cast(x: np.ndarray, dst: D.DType, rounding: RoundingMode | None = None,
          src: D.DType | None = None) -> np.ndarray:
    """Cast x to dst (tfloat32 has no array dtype: a tfloat32 `src` is made from float32 `x` by
    a cast, a tfloat32 result is stored through a bitcast)."""
    store_dt = D.float32 if dst is D.tfloat32 else dst

    def build(b, t):
        if src is D.tfloat32:
            t = b.value(ops.Cast, x=t, dtype=D.tfloat32)
        v = b.value(ops.Cast, x=t, dtype=dst, rounding=rounding)
        if dst is D.tfloat32:
            v = b.value(ops.Bitcast, x=v, dtype=D.float32)
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
# Exact references: rational arithmetic rounded to a float format in a direction

FORMATS: dict[D.DType, tuple[int, int, int]] = {
    D.float16: (11, -14, 15), D.bfloat16: (8, -126, 127), D.float32: (24, -126, 127),
    D.float64: (53, -1022, 1023), D.tfloat32: (11, -126, 127), D.float8_e5m2: (3, -14, 15),
}
"""IEEE-style formats: significand bits (with the implicit one), emin, emax."""

SATFINITE = {D.float8_e4m3fn: 448.0, D.float8_e5m2: 57344.0}
"""The 8-bit floats casts saturate to, as the GPU's cvt.rn.satfinite: their largest finite values."""

RN, RZ, RM, RP = RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP


def round_exact(q: Fraction, dtype: D.DType, mode: RoundingMode | None,
                negative_zero: bool = False) -> float:
    """The rational `q` rounded to `dtype`'s format in direction `mode` (None: RN), overflowing
    to infinity or the largest finite value as IEEE 754 says; an exact zero gets the sign given."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    p, emin, emax = FORMATS[dtype]
    mode = mode or RN
    neg, a = q < 0, abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n, rem = divmod(a, ulp)
    if mode is RN:
        up = 2 * rem > ulp or (2 * rem == ulp and n % 2 == 1)
    else:
        up = rem > 0 and mode is not RZ and (mode is RP) != neg
    m: float | Fraction = (n + up) * ulp
    if m > (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax:
        magnitude_up = mode is RN or (mode is not RZ and (mode is RP) != neg)
        m = math.inf if magnitude_up else (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    return -float(m) if neg else float(m)


_EXACT = {BinaryFn.ADD: Fraction.__add__, BinaryFn.SUB: Fraction.__sub__,
          BinaryFn.MUL: Fraction.__mul__, BinaryFn.TRUEDIV: Fraction.__truediv__}
_IEEE_SPECIAL = {BinaryFn.ADD: np.add, BinaryFn.SUB: np.subtract, BinaryFn.MUL: np.multiply,
                 BinaryFn.TRUEDIV: np.divide}


def reference_binary(fn: BinaryFn, x: float, y: float, dtype: D.DType,
                     mode: RoundingMode | None) -> float:
    """x fn y correctly rounded; results that are exact whatever the mode (from infinities,
    NaN, division by zero) come from float64 arithmetic."""
    if not (math.isfinite(x) and math.isfinite(y)) or (fn is BinaryFn.TRUEDIV and y == 0):
        with np.errstate(all="ignore"):
            return float(_IEEE_SPECIAL[fn](np.float64(x), np.float64(y)))
    q = _EXACT[fn](Fraction(x), Fraction(y))
    if fn in (BinaryFn.MUL, BinaryFn.TRUEDIV):
        negative_zero = (math.copysign(1, x) < 0) != (math.copysign(1, y) < 0)
    else:  # an exact zero sum is +0 (RM: -0) unless both terms are zeros of one sign
        ys = -y if fn is BinaryFn.SUB else y
        same = x == 0 and ys == 0 and math.copysign(1, x) == math.copysign(1, ys)
        negative_zero = math.copysign(1, x) < 0 if same else mode is RM
    return round_exact(q, dtype, mode, negative_zero)


def reference_sqrt(x: float, dtype: D.DType, mode: RoundingMode | None) -> float:
    """sqrt(x) correctly rounded: an integer square root on a grid (2**-1100) finer than any
    rounding boundary, plus a quarter step when inexact."""
    if not math.isfinite(x) or x <= 0:
        with np.errstate(all="ignore"):
            return float(np.sqrt(np.float64(x)))
    k = 1100
    n = int(Fraction(x) * 4**k)
    s = math.isqrt(n)
    q = Fraction(s, 2**k) + (Fraction(1, 2**(k + 2)) if s * s != n else 0)
    return round_exact(q, dtype, mode)


def assert_same_floats(got: np.ndarray, want: np.ndarray, *inputs: np.ndarray) -> None:
    """Equal values, NaN where NaN, equal signs of zeros; reports the first mismatching lanes."""
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want, np.float64)
    same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    bad = np.flatnonzero(~same)[:5]
    assert bad.size == 0, [(tuple(float(x[k]) for x in inputs), float(g[k]), float(w[k]))
                           for k in bad]


def float_samples(dtype: D.DType, n: int) -> np.ndarray:
    """Finite values of `dtype` of both signs with exponents over its whole range (incl.
    subnormals; values rounding above the largest finite one become infinite)."""
    p, emin, emax = FORMATS[dtype]
    e = RNG.integers(emin - p, emax + 1, n)
    x = np.ldexp(RNG.random(n) + 1.0, e) * RNG.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        return x.astype(dtype.np_dtype)


def operand_pairs(dtype: D.DType, n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Operands of a rounded binary op: crafted ties, overflow, underflow, zeros and specials,
    close pairs (cancellation), pairs of nearby exponents, and pairs across the range."""
    p, emin, emax = FORMATS[dtype]
    big = float((2 - 2.0 ** (1 - p)) * 2.0**emax)
    tiny = 2.0 ** (emin - p + 1)
    crafted = [(1.0, 2.0**-p), (1.0, 3 * 2.0**-(p + 1)), (-1.0, -(2.0**-p)), (1.0, -(2.0**-(p + 1))),
               (big, big), (-big, big * 0.75), (tiny, 0.5), (-tiny, 0.5), (2.0**emin, 0.75),
               (3.0, 7.0), (1.0, 3.0), (-1.0, 3.0), (2.0, 3.0), (0.0, -0.0), (-0.0, -0.0),
               (5.0, -5.0), (0.0, 1.0), (-0.0, 1.0), (1.0, 0.0), (-1.0, -0.0), (0.0, 0.0),
               (math.inf, -math.inf), (math.inf, 2.0), (2.0, math.inf), (math.nan, 1.0),
               (-math.inf, 0.0)]
    x, y = float_samples(dtype, n), float_samples(dtype, n)
    q = n // 4
    with np.errstate(over="ignore"):
        y[32:32 + q] = (x[32:32 + q].astype(np.float64)
                        * (1 + (RNG.random(q) - 0.5) * 2.0**-(p - 4))).astype(dtype.np_dtype)
        x64 = x[32 + q:32 + 2 * q].astype(np.float64)
        y[32 + q:32 + 2 * q] = np.ldexp(x64 * (RNG.random(q) + 0.5), RNG.integers(-p, p, q))\
            .astype(dtype.np_dtype)
    for k, (a, c) in enumerate(crafted):
        x[k], y[k] = a, c
    return x, y


ROUNDED_DTYPES = [D.float16, D.bfloat16, D.float32, D.float64]
MODES = [None, RN, RZ, RM, RP]


@pytest.mark.parametrize("dtype", ROUNDED_DTYPES, ids=str)
@pytest.mark.parametrize("fn", [BinaryFn.ADD, BinaryFn.SUB, BinaryFn.MUL, BinaryFn.TRUEDIV],
                         ids=lambda f: f.name)
def test_rounded_binary_against_exact_arithmetic(fn: BinaryFn, dtype: D.DType) -> None:
    x, y = operand_pairs(dtype)
    for mode in MODES:
        got = apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty, rounding=mode), [x, y], dtype,
                          x.shape)
        assert got.dtype == dtype.np_dtype
        want = [reference_binary(fn, a.item(), c.item(), dtype, mode) for a, c in zip(x, y)]
        assert_same_floats(got, np.array(want), x, y)


@pytest.mark.parametrize("dtype", ROUNDED_DTYPES, ids=str)
def test_rounded_sqrt_against_exact_arithmetic(dtype: D.DType) -> None:
    x = np.abs(float_samples(dtype, 256))
    x[:12] = [0.0, -0.0, 1.0, 2.0, 4.0, 0.25, -1.0, math.inf, -math.inf, math.nan,
              2.0 ** FORMATS[dtype][1], 3.0]
    for mode in MODES:
        got = apply_tiles(lambda b, t: unary(b, UnaryFn.SQRT, t, rounding=mode), [x], dtype,
                          x.shape)
        assert got.dtype == dtype.np_dtype
        assert_same_floats(got, np.array([reference_sqrt(v.item(), dtype, mode) for v in x]), x)


def test_full_and_approx_precision() -> None:
    """FULL on float32 TRUEDIV, FULL/APPROX on SQRT, EXP, TANH: computed at full precision (RN);
    APPROX TRUEDIV: x times the rounded reciprocal of y (ir.kinds.divides_by_reciprocal)."""
    x, y = operand_pairs(D.float32)
    for mode in (RoundingMode.FULL, RoundingMode.APPROX):
        got = apply_tiles(lambda b, tx, ty: binary(b, BinaryFn.TRUEDIV, tx, ty, rounding=mode),
                          [x, y], D.float32, x.shape)
        if mode is RoundingMode.FULL:
            want = np.array([reference_binary(BinaryFn.TRUEDIV, a.item(), c.item(), D.float32, RN)
                             for a, c in zip(x, y)])
        else:
            with np.errstate(all="ignore"):
                want = x.astype(np.float32) * (np.float32(1) / y.astype(np.float32))
        assert_same_floats(got, want, x, y)
        for fn in (UnaryFn.SQRT, UnaryFn.EXP, UnaryFn.TANH):
            if fn is UnaryFn.SQRT and mode is RoundingMode.FULL:
                continue  # not allowed on SQRT
            got = apply_tiles(lambda b, t: unary(b, fn, t, rounding=mode), [y], D.float32, y.shape)
            plain = apply_tiles(lambda b, t: unary(b, fn, t), [y], D.float32, y.shape)
            assert_same_floats(got, plain, y)


def flush_reference(v: Any) -> np.ndarray:
    """float32 values with subnormals replaced by zeros of the same sign."""
    v = np.asarray(v, np.float32)
    return np.where((v != 0) & (np.abs(v) < np.float32(2.0**-126)), np.copysign(np.float32(0), v), v)


def subnormal_operands(n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """float32 operands of which many are subnormal or give subnormal results."""
    x, y = operand_pairs(D.float32, n)
    sub = np.ldexp(RNG.random(96), RNG.integers(-149, -126, 96)) * RNG.choice([-1.0, 1.0], 96)
    x[64:160] = sub
    y[96:128] = -x[96:128] * (1 + RNG.random(32) * 0.5)  # sums of subnormals: subnormal results
    y[128:160] = RNG.random(32) * 0.5
    x[26:30] = [1.5 * 2.0**-126, -1.5 * 2.0**-126, 2.0**-126, -(2.0**-140)]
    y[26:30] = [-(2.0**-126), 2.0**-126, 0.75, 1.0]  # exact results: ±2**-127 (flushed), ...
    return x.astype(np.float32), y.astype(np.float32)


@pytest.mark.parametrize("fn", [BinaryFn.ADD, BinaryFn.SUB, BinaryFn.MUL, BinaryFn.TRUEDIV],
                         ids=lambda f: f.name)
def test_flush_to_zero_rounded_binary(fn: BinaryFn) -> None:
    x, y = subnormal_operands()
    fx, fy = flush_reference(x), flush_reference(y)
    for mode in (None, RN, RZ, RP):
        got = apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty, rounding=mode,
                                                   flush_to_zero=True), [x, y], D.float32, x.shape)
        want = flush_reference([reference_binary(fn, a.item(), c.item(), D.float32, mode)
                                for a, c in zip(fx, fy)])
        assert_same_floats(got, want, x, y)
        assert not ((got != 0) & (np.abs(got) < 2.0**-126)).any()
    if fn is BinaryFn.ADD:  # 1.5*2**-126 - 2**-126 = 2**-127 flushes to +0, its negation to -0
        got = apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty, flush_to_zero=True), [x, y],
                          D.float32, x.shape)
        assert got[26] == 0 and not np.signbit(got[26]) and np.signbit(got[27])


@pytest.mark.parametrize("fn", [BinaryFn.MIN, BinaryFn.MAX, BinaryFn.MIN_NAN, BinaryFn.MAX_NAN],
                         ids=lambda f: f.name)
def test_flush_to_zero_min_max(fn: BinaryFn) -> None:
    """Flushed subnormals are zeros of their sign, and -0.0 lies below +0.0 (as PTX min/max)."""
    x, y = subnormal_operands()
    ref = {BinaryFn.MIN: np.fmin, BinaryFn.MAX: np.fmax, BinaryFn.MIN_NAN: np.minimum,
           BinaryFn.MAX_NAN: np.maximum}[fn]
    lowest = fn in (BinaryFn.MIN, BinaryFn.MIN_NAN)

    def ordered(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        negative = (np.signbit(a) | np.signbit(b)) if lowest else (np.signbit(a) & np.signbit(b))
        return np.where((a == 0) & (b == 0), np.where(negative, -0.0, 0.0), ref(a, b))
    got = apply_tiles(lambda b, tx, ty: binary(b, fn, tx, ty, flush_to_zero=True), [x, y],
                      D.float32, x.shape)
    assert_same_floats(got, flush_reference(ordered(flush_reference(x), flush_reference(y))), x, y)


@pytest.mark.parametrize("fn", [UnaryFn.EXP2, UnaryFn.SQRT, UnaryFn.RSQRT], ids=lambda f: f.name)
def test_flush_to_zero_unary(fn: UnaryFn) -> None:
    """Subnormal inputs act as zeros (sqrt(-sub) = -0, rsqrt(sub) = inf, exp2(sub) = 1) and
    subnormal results (exp2(-130)) become zeros."""
    x, _ = subnormal_operands()
    if fn is UnaryFn.EXP2:
        x[160:192] = -126 - RNG.random(32) * 23
    ref = {UnaryFn.EXP2: np.exp2, UnaryFn.SQRT: np.sqrt,
           UnaryFn.RSQRT: lambda v: np.float32(1) / np.sqrt(v)}[fn]
    with np.errstate(all="ignore"):
        want = flush_reference(ref(flush_reference(x)))
    got = apply_tiles(lambda b, t: unary(b, fn, t, flush_to_zero=True), [x], D.float32, x.shape)
    assert_same_floats(got, want, x)
    if fn is UnaryFn.SQRT:
        for mode in (RZ, RM, RP):
            got = apply_tiles(lambda b, t: unary(b, fn, t, rounding=mode, flush_to_zero=True), [x],
                              D.float32, x.shape)
            want = flush_reference([reference_sqrt(v.item(), D.float32, mode)
                                    for v in flush_reference(x)])
            assert_same_floats(got, want, x)


# ---------------------------------------------------------------------------------------------
# Casts: every (src, dst) pair against an exact reference

def cast_sources(src: D.DType, n: int = 64) -> np.ndarray:
    """Values of `src` (float32 storage for tfloat32): edge cases first, then random ones."""
    if src is D.bool_:
        return np.array([True, False] * (n // 2))
    if src.is_int:
        info = np.iinfo(src.np_dtype)
        edge = [0, 1, -1, 2, 127, 128, 255, 256, -129, 2**24 + 1, 2**31 - 1, -2**31, 2**53 + 1,
                2**62 + 2**54 + 1, -(2**62 + 2**54 + 1), 2**63 - 1, -2**63, 2**64 - 1,
                2**63 + 2**39 + 1, 3 * 2**60 + 2**35]
        edge = [v for v in edge if info.min <= v <= info.max]
        rest = RNG.integers(info.min, info.max, n - len(edge), dtype=src.np_dtype, endpoint=True)
        return np.concatenate([np.array(edge, src.np_dtype), rest])
    edge = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 127.9, -128.9, 255.5, 300.0, 65504.0,
            65520.0, 70000.0, 1e10, -1e10, 3.4e38, 1e300, -1e300, 2.0**-24, 2.0**-25 * 3, 2.0**-140,
            5e-324, -1e-45, 1 + 2.0**-8 + 2.0**-20, 1 + 2.0**-11, -(1 + 2.0**-11 + 2.0**-30),
            448.0, 464.0, 57344.0, 2.0**31, -(2.0**31) - 1, 2.0**63, 2.0**64, math.inf,
            -math.inf, math.nan]
    rest = RNG.standard_normal(n - len(edge)) * 10.0 ** RNG.integers(-8, 9, n - len(edge))
    store = np.float32 if src is D.tfloat32 else src.np_dtype
    with np.errstate(all="ignore"):
        return np.array(edge + list(rest)).astype(store)


def source_value(v: Any, src: D.DType) -> bool | int | float:
    """A source element as the exact Python value the kernel sees."""
    if src is D.tfloat32:
        return _tf32_reference(float(v))
    return bool(v) if src is D.bool_ else int(v) if src.is_int else float(v)


def saturated(v: bool | int | float, src: D.DType, dst: D.DType) -> bool | int | float:
    """The value a cast from `src` to `dst` rounds: into another type's 8-bit float
    (cvt.rn.satfinite) a magnitude past the largest finite value, an infinity included, is that
    value with the sign of `v`."""
    top = SATFINITE.get(dst) if src is not dst else None
    return math.copysign(top, v) if top is not None and abs(v) > top else v


def reference_cast(v: bool | int | float, dst: D.DType, mode: RoundingMode | None) -> Any:
    """`v` converted by the language's rules, or None where no independent reference exists
    (`v` already `saturated` for 8-bit floats)."""
    if dst is D.bool_:
        return v != 0
    if dst.is_int:
        info = np.iinfo(dst.np_dtype)
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            return info.max if v >= info.max else info.min if v <= info.min else math.trunc(v)
        return (int(v) - info.min) % (1 << dst.bitwidth) + info.min
    if dst is D.float8_e4m3fn:  # finite or NaN once saturated: ml_dtypes' RN
        return float(np.float64(v).astype(dst.np_dtype)) if mode in (None, RN) else None
    if isinstance(v, float) and not math.isfinite(v):
        return v if dst in FORMATS else None
    if dst in FORMATS:
        return round_exact(Fraction(v), dst, mode, math.copysign(1, v) < 0)
    if mode not in (None, RN) or abs(v) > 2**53:
        return None
    if dst is D.float8_e8m0fnu and not 2.0**-127 <= v <= 2.0**127:
        return None  # no zero, no sign: conversions outside its range are not pinned down
    return float(np.float64(v).astype(dst.np_dtype))  # float8 e4m3fn / e8m0fnu: ml_dtypes' RN


@pytest.mark.parametrize("src", D.ALL_DTYPES, ids=str)
def test_cast_every_pair(src: D.DType) -> None:
    """Every (src, dst) pair and every rounding a float result takes: exact reference where one
    exists (else: no error, the dtype, and the direction of the rounding)."""
    x = cast_sources(src)
    vals = [source_value(v, src) for v in x]
    for dst in D.ALL_DTYPES:
        floating = dst.is_float or dst.is_restricted
        for mode in [None, RN, RZ, RM, RP] if floating else [None]:
            got = _cast(x, dst, mode, src=src)
            assert got.dtype == (np.float32 if dst is D.tfloat32 else dst.np_dtype)
            for k, v in enumerate(vals):
                g = got[k].item() if not floating else float(got[k])
                w = saturated(v, src, dst)
                want = reference_cast(w, dst, mode)
                where = f"{src} -> {dst} {mode}: {v!r} gave {g!r}, want {want!r}"
                if want is not None:
                    if isinstance(want, float):
                        assert (g == want and math.copysign(1, g) == math.copysign(1, want)) or \
                            (math.isnan(g) and math.isnan(want)), where
                    else:
                        assert g == want and type(g) is type(want), where
                elif floating and math.isfinite(g) and not (isinstance(v, float) and math.isnan(v)):
                    exact = Fraction(w)
                    assert {RZ: abs(Fraction(g)) <= abs(exact), RM: Fraction(g) <= exact,
                            RP: Fraction(g) >= exact}.get(mode, True), where


# ---------------------------------------------------------------------------------------------
# Reductions and scans

def _reduce(x: np.ndarray, fn: ReduceFn, axis: int, keepdims: bool = False,
            out: D.DType | None = None) -> np.ndarray:
    dtype = out or D.to_dtype(x.dtype)
    shape = tuple(1 if k == axis else s for k, s in enumerate(x.shape)) if keepdims else \
        tuple(s for k, s in enumerate(x.shape) if k != axis)

    def build(b, t):
        return b.value(ops.Reduce, fn=fn, x=t, axis=axis, keepdims=keepdims)
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
                return b.value(ops.Scan, fn=fn, x=t, axis=1, reverse=reverse)
            got = apply_tiles(build, [x], D.float64, x.shape)
            want = np.flip(ref(np.flip(x, 1), 1), 1) if reverse else ref(x, 1)
            np.testing.assert_allclose(got, want, rtol=1e-12)
    i = np.full(16, 200, np.uint8)

    def build_u8(b, t):
        return b.value(ops.Scan, fn=ScanFn.CUMSUM, x=t, axis=0)
    np.testing.assert_array_equal(apply_tiles(build_u8, [i], D.uint8, (16,)),
                                  np.cumsum(i, dtype=np.uint8))


def _argmax_combine(b: Builder) -> Block:
    """(value, index) pairs: keep the left one unless the right value is strictly larger."""
    combine = block(b, F32, I32, F32, I32)
    with b.inside(combine):
        av, ai, bv, bi = combine.args
        right = compare(b, CompareFn.GT, bv, av)
        b.emit(ops.Yield, values=(b.value(ops.Where, cond=right, x=bv, y=av),
                                  b.value(ops.Where, cond=right, x=bi, y=ai)))
    return combine


@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_with_custom_combine(keepdims: bool) -> None:
    """A two-operand ReduceWith (value, index) computing the first argmax along axis 1."""
    x = RNG.integers(0, 4, (4, 8)).astype(np.float32)  # many ties

    def build(b, t):
        idx = b.value(ops.Broadcast, x=b.value(ops.Reshape, x=b.value(ops.Arange, size=8),
                                               shape=(1, 8)), shape=(4, 8))
        best, where = b.emit(ops.ReduceWith, xs=(t, idx), axis=1, keepdims=keepdims,
                             identities=(-math.inf, 0), combine=_argmax_combine(b)).results
        return binary(b, BinaryFn.ADD, binary(b, BinaryFn.MUL, b.value(ops.Cast, x=where, dtype=D.float32),
                                              tile_of(b, 100.0, D.float32, where.tile.shape)), best)
    shape = (4, 1) if keepdims else (4,)
    got = apply_tiles(build, [x], D.float32, shape)
    want = x.argmax(axis=1, keepdims=keepdims) * 100.0 + x.max(axis=1, keepdims=keepdims)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_custom_combine(reverse: bool) -> None:
    """An inclusive ScanWith of integer addition along axis 0 (wrapping in int8)."""
    x = RNG.integers(-128, 128, (8, 4)).astype(np.int8)
    i8 = scalar(D.int8)

    def build(b, t):
        combine = block(b, i8, i8)
        with b.inside(combine):
            b.emit(ops.Yield, values=(binary(b, BinaryFn.ADD, *combine.args),))
        return b.emit(ops.ScanWith, xs=(t,), axis=0, reverse=reverse, identities=(0,),
                      combine=combine).result
    got = apply_tiles(build, [x], D.int8, x.shape)
    want = np.flip(np.cumsum(np.flip(x, 0), 0, dtype=np.int8), 0) if reverse else \
        np.cumsum(x, 0, dtype=np.int8)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# Shape ops

def test_shape_ops() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def build(b, t):
        p = b.value(ops.Permute, x=t, axes=(1, 0))
        r = b.value(ops.Reshape, x=p, shape=(4, 8))
        c = b.value(ops.Cat, lhs=r, rhs=t, axis=0)
        e = b.value(ops.Extract, x=c, index=(const(b, 1), const(b, 0)), shape=(4, 4))
        row = b.value(ops.Extract, x=e, index=(const(b, 2), const(b, 0)), shape=(1, 4))
        return b.value(ops.Broadcast, x=row, shape=(4, 4))
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
            ta, tb = (b.value(ops.Cast, x=t, dtype=D.tfloat32) for t in (ta, tb))
        return b.value(ops.Mma, a=ta, b=tb, acc=tc)
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
        bx, by = (b.value(ops.Bid, axis=k) for k in range(2))
        kdim = b.value(ops.ArrayShape, array=pa, axis=1)
        nk = binary(b, BinaryFn.FLOORDIV, binary(b, BinaryFn.ADD, kdim, const(b, bk - 1)),
                    const(b, bk))
        acc0 = tile_of(b, 0.0, D.float32, (bm, bn))
        body = block(b, I32, tm)
        with b.inside(body):
            kk, acc = body.args
            ta = load(b, pa, [bx, kk], (bm, bk), padding=PaddingMode.ZERO, latency=3,
                      allow_tma=False)
            tb = load(b, pb, [kk, by], (bk, bn), padding=PaddingMode.ZERO, check_bounds=True,
                      memory_order=MemoryOrder.RELAXED, memory_scope=MemoryScope.DEVICE)
            ta, tb = (b.value(ops.Cast, x=t, dtype=D.tfloat32) for t in (ta, tb))
            b.emit(ops.Yield, values=(b.value(ops.Mma, a=ta, b=tb, acc=acc),))
        loop = b.emit(ops.For, lower=const(b, 0), upper=nk, step=const(b, 1), init=(acc0,),
                      body=body)
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
    """s = sum(range(lb, ub, 3)); p = number of odd iterations via If; per block."""
    fn, b, (lb, ub, out) = kernel(I32, I32, ArrayType(D.int32, 2))
    with b.inside(fn.body):
        bx = b.value(ops.Bid, axis=0)
        hi = binary(b, BinaryFn.ADD, ub, bx)
        body = block(b, I32, I32, I32)
        with b.inside(body):
            i, s, p = body.args
            odd = compare(b, CompareFn.EQ, binary(b, BinaryFn.MOD, i, const(b, 2)), const(b, 1))
            then, other = Block(), Block()
            with b.inside(then):
                b.emit(ops.Yield, values=(binary(b, BinaryFn.ADD, p, const(b, 1)),))
            with b.inside(other):
                b.emit(ops.Yield, values=(p,))
            br = b.emit(ops.If, cond=odd, then=then, orelse=other)
            b.emit(ops.Yield, values=(binary(b, BinaryFn.ADD, s, i), br.result))
        loop = b.emit(ops.For, lower=lb, upper=hi, step=const(b, 3), init=(const(b, 0), const(b, 0)),
                      body=body)
        s, p = loop.results
        store(b, out, [bx, const(b, 0)], s)
        store(b, out, [bx, const(b, 1)], p)
    out = poison((5, 2), np.int32)
    launch(fn, (5, 1, 1), -4, 10, out)
    for x in range(5):
        r = range(-4, 10 + x, 3)
        assert out[x].tolist() == [sum(r), sum(1 for i in r if i % 2 == 1)]


def test_for_loop_without_iterations_and_non_positive_step() -> None:
    """No iteration (empty range, step 0 or negative): the results are the initial values."""
    fn, b, (st, out) = kernel(I32, ArrayType(D.int32, 1))
    with b.inside(fn.body):
        body = block(b, I32, I32)
        with b.inside(body):
            b.emit(ops.Yield, values=(binary(b, BinaryFn.ADD, body.args[1], const(b, 1)),))
        loop = b.emit(ops.For, lower=const(b, 0), upper=const(b, 5), step=st, init=(const(b, 7),),
                      body=body)
        store(b, out, [const(b, 0)], loop.result)
    out = poison((1,), np.int32)
    for step, want in [(1, 12), (2, 10), (0, 7), (-1, 7)]:
        launch(fn, (1, 1, 1), step, out)
        assert out[0] == want


def test_while_loop() -> None:
    """Collatz step count of n (before: cond n != 1; after: step)."""
    fn, b, (n0, out) = kernel(I32, ArrayType(D.int32, 1))
    with b.inside(fn.body):
        before, after = block(b, I32, I32), block(b, I32, I32)
        with b.inside(before):
            n, c = before.args
            b.emit(ops.Condition, cond=compare(b, CompareFn.NE, n, const(b, 1)), values=(n, c))
        with b.inside(after):
            n, c = after.args
            even = compare(b, CompareFn.EQ, binary(b, BinaryFn.AND, n, const(b, 1)), const(b, 0))
            half = binary(b, BinaryFn.SHR, n, const(b, 1))
            tri = binary(b, BinaryFn.ADD, binary(b, BinaryFn.MUL, n, const(b, 3)), const(b, 1))
            nxt = b.value(ops.Where, cond=even, x=half, y=tri)
            b.emit(ops.Yield, values=(nxt, binary(b, BinaryFn.ADD, c, const(b, 1))))
        loop = b.emit(ops.While, init=(n0, const(b, 0)), before=before, after=after)
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
        bx = b.value(ops.Bid, axis=0)
        t = load(b, arr, [const(b, 0)], (4,))
        flags = compare(b, CompareFn.GE, t, tile_of(b, 1.0, D.float32, (4,)))
        b.emit(ops.Print, format="bid=%d t=%f f=%d\n", tiles=(bx, t, flags))
        b.emit(ops.Print, format="t=%.1f\n", tiles=(t,))
        ok = compare(b, CompareFn.LT, bx, const(b, 1))
        b.emit(ops.Assert, cond=ok, message="bid too large")
    with pytest.raises(AssertionError, match="bid too large"):
        launch(fn, (3, 1, 1), np.array([0.5, 1, 2.25, -3], np.float32))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["bid=0 t=[0.500000, 1.000000, 2.250000, -3.000000] f=[0, 1, 1, 0]",
                     "t=[0.5, 1.0, 2.2, -3.0]",
                     "bid=1 t=[0.500000, 1.000000, 2.250000, -3.000000] f=[0, 1, 1, 0]",
                     "t=[0.5, 1.0, 2.2, -3.0]"]
