"""Global memory: tile load/store (padding, order, partial tiles, strided views, 0-d), gather and
scatter (bounds, masks, padding values), atomics (old values, duplicates), grid queries.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import assert_bits_equal, cdiv, np_dtype, padded_tiles, rng

P = ct.PaddingMode
FILL = {P.ZERO: 0.0, P.NEG_ZERO: -0.0, P.NAN: np.nan, P.POS_INF: np.inf, P.NEG_INF: -np.inf,
        P.UNDETERMINED: None}


def _norm_order(order: Any, nd: int) -> tuple[int, ...]:
    if order == "C":
        return tuple(range(nd))
    if order == "F":
        return tuple(reversed(range(nd)))
    return tuple(o % nd for o in order)


# ---- load / store: padding, order, partial tiles, rank 1-3 -------------------------------------------------
@functools.lru_cache(maxsize=None)
def copy_kernel(tile: tuple[int, ...], padding: Any, order: Any) -> Any:
    """out[tile idx] = load(x, idx, tile, order, padding): out holds V = x permuted by `order`,
    padded to whole tiles."""
    @ct.kernel
    def k(x, out):
        idx = (ct.bid(0), ct.bid(1), ct.bid(2))[:len(tile)]
        t = ct.load(x, idx, tile, order=order, padding_mode=padding)
        ct.store(out, idx, t)
    return k


LAYOUTS = [
    ((37,), (8,), "C"), ((5,), (16,), "C"),
    ((13, 21), (4, 8), "C"), ((13, 21), (4, 8), "F"), ((13, 21), (8, 4), (1, 0)), ((6, 9), (2, 16), (0, 1)),
    ((3, 10, 7), (2, 4, 4), "C"), ((3, 10, 7), (4, 2, 4), "F"), ((3, 10, 7), (4, 2, 2), (2, 0, 1)),
    ((3, 10, 7), (8, 4, 2), (1, 2, -3)),
    # a dim of 32 or 64 tiles evenly (the Triton backend drops its bounds mask), 20 does not
    ((64, 20), (32, 4), "C"), ((64, 20), (8, 16), "F"), ((32, 16, 20), (16, 16, 8), (2, 0, 1)),
]


def _copy(dev: Any, x: np.ndarray, tile: tuple[int, ...], padding: Any, order: Any) -> tuple[np.ndarray, np.ndarray]:
    perm = _norm_order(order, x.ndim)
    v = x.transpose(perm)
    grid = tuple(cdiv(n, t) for n, t in zip(v.shape, tile))
    out = dev.poison(tuple(g * t for g, t in zip(grid, tile)), x.dtype)
    dev.launch(grid, copy_kernel(tile, padding, order), (dev.put(x), out))
    return dev.get(out), v


@pytest.mark.parametrize("padding", list(P), ids=lambda p: p.name)
@pytest.mark.parametrize("shape, tile, order", LAYOUTS)
def test_load_padding_order_float(dev, shape: Any, tile: Any, order: Any, padding: Any) -> None:
    x = rng("load", str(shape), str(order)).standard_normal(shape).astype(np.float32)
    got, v = _copy(dev, x, tile, padding, order)
    fill = FILL[padding]
    if fill is None:   # undetermined padding: only the in-bounds part is defined
        got = got[tuple(slice(0, n) for n in v.shape)]
        assert_bits_equal(got, np.ascontiguousarray(v))
    else:
        assert_bits_equal(got, padded_tiles(np.ascontiguousarray(v), tile, fill))


@pytest.mark.parametrize("padding", [P.ZERO, P.NEG_ZERO, P.UNDETERMINED], ids=lambda p: p.name)
@pytest.mark.parametrize("dtype", ["int32", "int8", "uint16", "int64", "bool"])
def test_load_padding_int(dev, dtype: str, padding: Any) -> None:
    """Integer/bool arrays pad with zero for ZERO and NEG_ZERO."""
    g = rng("loadint", dtype)
    x = g.integers(-100, 100, (13, 21)).astype(dtype) if dtype != "bool" else g.random((13, 21)) < 0.5
    got, v = _copy(dev, x, (4, 8), padding, "F")
    if padding is P.UNDETERMINED:
        np.testing.assert_array_equal(got[:21, :13], v)
    else:
        np.testing.assert_array_equal(got, padded_tiles(np.ascontiguousarray(v), (4, 8), 0))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "float8_e4m3fn"])
def test_load_padding_other_floats(dev, dtype: str) -> None:
    d = np_dtype(dtype)
    x = rng("loadf", dtype).uniform(-4, 4, (13, 21)).astype(d)
    modes = (P.NAN, P.NEG_ZERO) if dtype.startswith("float8") else (P.NAN, P.NEG_INF, P.POS_INF, P.NEG_ZERO)
    for padding in modes:
        got, v = _copy(dev, x, (4, 8), padding, "C")
        assert_bits_equal(got, padded_tiles(x, (4, 8), np.array(FILL[padding]).astype(d)))


@functools.lru_cache(maxsize=None)
def store_order_kernel(tile: tuple[int, ...], order: Any) -> Any:
    """store(out, idx, load(src, idx, tile), order): out permuted by `order` equals src."""
    @ct.kernel
    def k(src, out):
        idx = (ct.bid(0), ct.bid(1), ct.bid(2))[:len(tile)]
        t = ct.load(src, idx, tile, padding_mode=ct.PaddingMode.ZERO)
        ct.store(out, idx, t, order=order)
    return k


@pytest.mark.parametrize("shape, tile, order", LAYOUTS)
def test_store_order_partial_tiles(dev, shape: Any, tile: Any, order: Any) -> None:
    """Out-of-bounds lanes of partial tiles are dropped: the poisoned margin around the output
    view stays untouched."""
    perm = _norm_order(order, len(shape))
    vshape = tuple(shape[p] for p in perm)
    src = rng("store", str(shape), str(order)).standard_normal(vshape).astype(np.float32)
    big = dev.poison(tuple(n + 3 for n in shape), np.float32)
    out = big[tuple(slice(0, n) for n in shape)]
    grid = tuple(cdiv(n, t) for n, t in zip(vshape, tile))
    dev.launch(grid, store_order_kernel(tile, order), (dev.put(src), out))
    got = dev.get(big)
    inner = tuple(slice(0, n) for n in shape)
    assert_bits_equal(np.ascontiguousarray(got[inner].transpose(perm)), src)
    rest = got.copy()
    rest[inner] = np.nan
    assert np.isnan(rest).all(), "a store wrote outside the array"


@pytest.mark.parametrize("padding", [P.ZERO, P.NAN, P.NEG_INF], ids=lambda p: p.name)
@pytest.mark.parametrize("order", ["C", "F"])
def test_load_from_view_pads_instead_of_reading_margin(dev, order: Any, padding: Any) -> None:
    """x is the top-left 13x21 of a 16x24 buffer (aligned base, 16-byte row stride): lanes past
    the view's edges get the padding value, never the buffer's margin."""
    parent = np.full((16, 24), 777.0, np.float32)
    parent[:13, :21] = rng("view-load").standard_normal((13, 21))
    x = dev.put(parent)[:13, :21]
    tile = (4, 8)
    v = parent[:13, :21].transpose(_norm_order(order, 2))
    grid = tuple(cdiv(n, t) for n, t in zip(v.shape, tile))
    out = dev.poison(tuple(g * t for g, t in zip(grid, tile)), np.float32)
    dev.launch(grid, copy_kernel(tile, padding, order), (x, out))
    assert_bits_equal(dev.get(out), padded_tiles(np.ascontiguousarray(v), tile, FILL[padding]))


# ---- strided views ---------------------------------------------------------------------------------------
@ct.kernel
def scale_kernel(x, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    t = ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (bm, bn), t * 2.0 + 1.0)


@pytest.mark.parametrize("view", ["step", "transpose", "offset"])
def test_strided_views(dev, view: str) -> None:
    g = rng("strided", view)
    base = g.standard_normal((27, 64)).astype(np.float32)
    xb = dev.put(base)
    if view == "step":
        x, xn = xb[1::2, ::3], base[1::2, ::3]
    elif view == "transpose":
        x, xn = dev.permute(xb, (1, 0))[3:40], base.T[3:40]
    else:
        x, xn = xb[2:15, 5:26], base[2:15, 5:26]
    big = dev.poison((xn.shape[0] + 4, 2 * xn.shape[1] + 6), np.float32)
    out = big[2:2 + xn.shape[0], 1:1 + 2 * xn.shape[1]:2]
    grid = (cdiv(xn.shape[0], 4), cdiv(xn.shape[1], 8))
    dev.launch(grid, scale_kernel, (x, out, 4, 8))
    got = dev.get(big)
    np.testing.assert_allclose(got[2:2 + xn.shape[0], 1:1 + 2 * xn.shape[1]:2], xn * 2 + 1, rtol=1e-6)
    got[2:2 + xn.shape[0], 1:1 + 2 * xn.shape[1]:2] = np.nan
    assert np.isnan(got).all(), "a store wrote outside the strided view"
    np.testing.assert_array_equal(dev.get(xb), base)


# ---- 0-d arrays and 0-d tiles ---------------------------------------------------------------------------------
@ct.kernel
def scalar_kernel(s, x, out, n):
    """s: 0-d array; x, out: 2-D. A 0-d tile stored into a 2-D array writes one element."""
    i = ct.bid(0)
    v = ct.load(s, (), ())
    row = ct.load(x, (i, 0), (1, 4), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (i, 0), v * 2.0)
    ct.store(out, (i, 1), ct.sum(row))
    ct.store(out, (i, 2), i + n)
    if i == 0:
        ct.store(s, (), v + 1.0)


def test_zero_d_arrays_and_tiles(dev) -> None:
    s = dev.put(np.array(2.5, np.float32))
    x = rng("zerod").standard_normal((3, 4)).astype(np.float32)
    out = dev.poison((3, 4), np.float32)
    dev.launch((3,), scalar_kernel, (s, dev.put(x), out, 10))
    got = dev.get(out)
    # block 0 may update s before other blocks read it: blocks run in any order
    assert set(got[:, 0].tolist()) <= {5.0, 7.0} and got[0, 0] == 5.0
    np.testing.assert_allclose(got[:, 1], x.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(got[:, 2], [10, 11, 12])
    assert np.isnan(got[:, 3]).all()
    assert dev.get(s)[()] == 3.5


@ct.kernel
def unchecked_copy_kernel(x, out, tile: ct.Constant[int]):
    idx = (ct.bid(0), ct.bid(1))
    ct.store(out, idx, ct.load(x, idx, (tile, tile), check_bounds=False) + 1.0, check_bounds=False)


def test_check_bounds_false_on_tiles_inside_the_array(dev) -> None:
    """check_bounds=False promises in-bounds tiles (the Triton backend drops the masks); the
    copy of tiles that are all inside stays exact, and nothing outside them is written."""
    x = rng("unchecked").standard_normal((24, 40)).astype(np.float32)
    out = dev.poison((24, 48), np.float32)
    dev.launch((3, 5), unchecked_copy_kernel, (dev.put(x), out[:, :40], 8))
    got = dev.get(out)
    np.testing.assert_array_equal(got[:, :40], x + 1.0)
    assert np.isnan(got[:, 40:]).all()


@ct.kernel
def slice_copy_kernel(x, out, lo, hi, dst_lo):
    i = ct.bid(0)
    src = x.slice(1, lo, hi)  # columns [lo, hi) of x
    dst = out.slice(-1, dst_lo, dst_lo + src.shape[1])
    t = ct.load(src, (i, 0), (4, 32), padding_mode=ct.PaddingMode.ZERO)  # wider than the view
    ct.store(dst, (i, 0), t + 1.0)


def test_array_slice_views(dev) -> None:
    """A sliced view pads at the view's end (not the array's) on loads, and a store through a
    view writes only inside it; the view's shape is stop - start."""
    x = rng("slice").standard_normal((8, 40)).astype(np.float32)
    out = dev.poison((8, 40), np.float32)
    dev.launch((2,), slice_copy_kernel, (dev.put(x), out, 5, 23, 3))
    got = dev.get(out)
    np.testing.assert_array_equal(got[:, 3:21], x[:, 5:23] + 1.0)
    assert np.isnan(got[:, :3]).all() and np.isnan(got[:, 21:]).all()


@ct.kernel
def overlapping_view_kernel(x, out, counts):
    v = x.tiled_view((4, 8), padding_mode=ct.PaddingMode.ZERO, traversal_steps=(2, 8))
    w = out.tiled_view((4, 8))
    i, j = ct.bid(0), ct.bid(1)
    w.store((i, j), v.load((i, j)) * 2.0)
    if i == 0 and j == 0:
        ct.store(counts, (0,), v.num_tiles(0))
        ct.store(counts, (1,), v.num_tiles(-1))
        ct.static_assert(v.tile_shape == (4, 8) and v.traversal_steps == (2, 8) and v.dtype == ct.float32)


@ct.kernel
def gapped_and_unit_views_kernel(x, out, m, mt):
    i = ct.bid(0)
    out.tiled_view(4).store(i, x.tiled_view(4, padding_mode=ct.PaddingMode.ZERO, traversal_steps=6).load(i))
    u, ut = m.tiled_view(()), mt.tiled_view(())  # unit tiles: 0-d loads and stores
    for j in range(u.num_tiles(1)):
        if i < u.num_tiles(0):
            ut.store((j, i), u.load((i, j)) + 1.0)


def test_tiled_views(dev) -> None:
    """Tiled views: overlapping tiles (steps < tile), gapped tiles (steps > tile), unit tiles
    (0-d), num_tiles = cdiv(size, step), and stores through a view broadcast to its tiles."""
    gen = rng("views")
    x = gen.standard_normal((9, 20)).astype(np.float32)
    out, counts = dev.poison((20, 24), np.float32), dev.poison((2,), np.int32)
    dev.launch((5, 3), overlapping_view_kernel, (dev.put(x), out, counts))
    padded = np.zeros((12, 24), np.float32)
    padded[:9, :20] = x
    want = np.concatenate([np.concatenate([2 * padded[2 * i:2 * i + 4, 8 * j:8 * j + 8] for j in range(3)], 1)
                           for i in range(5)], 0)
    np.testing.assert_array_equal(dev.get(out), want)
    np.testing.assert_array_equal(dev.get(counts), [5, 3])

    y, m = gen.standard_normal(20).astype(np.float32), gen.standard_normal((3, 5)).astype(np.float32)
    out, mt = dev.poison((16,), np.float32), dev.poison((5, 3), np.float32)
    dev.launch((4,), gapped_and_unit_views_kernel, (dev.put(y), out, dev.put(m), mt))
    ypad = np.concatenate([y, np.zeros(4, np.float32)])
    np.testing.assert_array_equal(dev.get(out), np.concatenate([ypad[6 * i:6 * i + 4] for i in range(4)]))
    np.testing.assert_array_equal(dev.get(mt), m.T + 1.0)


@ct.kernel
def view_atomics_kernel(counts, best):
    i = ct.bid(0)
    counts.tiled_view(8, traversal_steps=4).atomic_store_add(i, 1)  # overlapping tiles: 2 hits inside
    best.tiled_view((2, 4)).atomic_store_max((0, i % 2), i)


def test_tiled_view_atomic_stores(dev) -> None:
    """TiledView.atomic_store_*: every lane of the tile updated atomically (overlapping tiles
    of several blocks add up), lanes outside the array skipped."""
    counts, best = dev.put(np.zeros(18, np.int32)), dev.put(np.full((2, 8), -1, np.int32))
    dev.launch((5,), view_atomics_kernel, (counts, best))
    want = np.zeros(18, np.int32)
    for i in range(5):
        want[4 * i:4 * i + 8] += 1
    np.testing.assert_array_equal(dev.get(counts), want)
    np.testing.assert_array_equal(dev.get(best), np.repeat([[4, 3]], 2, axis=0).repeat(4, axis=1))


@ct.kernel
def list_sum_kernel(xs, out):
    i = ct.bid(0)
    acc = ct.zeros((8,), dtype=ct.float32)
    for g in range(len(xs)):  # a runtime index into the list
        acc += ct.load(xs[g], (i,), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (i,), acc + xs[-2].shape[0])


def test_list_of_arrays_argument(dev) -> None:
    """A list argument: len() is its length, lst[i] with a runtime i picks an array (its own
    shape), a constant negative index counts from the end."""
    gen = rng("lists")
    xs = [gen.standard_normal(n).astype(np.float32) for n in (20, 13, 30)]
    out = dev.poison((32,), np.float32)
    dev.launch((4,), list_sum_kernel, ([dev.put(x) for x in xs], out))
    want = sum(np.pad(x, (0, 32 - len(x))) for x in xs) + 13.0
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-6)


# ---- grid queries -------------------------------------------------------------------------------------------
@ct.kernel
def grid_kernel(out, a):
    x, y, z = ct.bid(0), ct.bid(1), ct.bid(2)
    v = ct.astile((x, y, z, ct.num_blocks(0), ct.num_blocks(1), ct.num_blocks(2),
                   ct.num_tiles(a, 0, (4, 8)), ct.num_tiles(a, 1, (4, 8)),
                   ct.num_tiles(a, axis=0, shape=(4, 8), order="F"), ct.num_tiles(a, 1, (4, 8), order=(1, 0)),
                   ct.num_tiles(a, -1, (16, 1)), a.shape[0], a.shape[1], a.strides[0], a.strides[1], 0),
                  dtype=ct.int32)
    ct.store(out, (z, y, x, 0), v.reshape((1, 1, 1, 16)))


@pytest.mark.parametrize("grid", [(3,), (2, 3), (2, 3, 2), (1, 1, 4)])
def test_bid_num_blocks_num_tiles(dev, grid: tuple[int, ...]) -> None:
    g3 = grid + (1,) * (3 - len(grid))
    a = dev.put(np.zeros((13, 21), np.float32))
    out = dev.poison((g3[2], g3[1], g3[0], 16), np.int32)
    dev.launch(grid, grid_kernel, (out, a))
    got = dev.get(out)
    for z in range(g3[2]):
        for y in range(g3[1]):
            for x in range(g3[0]):
                want = [x, y, z, *g3, cdiv(13, 4), cdiv(21, 8), cdiv(21, 4), cdiv(13, 8), 21, 13, 21, 21, 1, 0]
                np.testing.assert_array_equal(got[z, y, x], want, err_msg=f"block {(x, y, z)}")


# ---- gather / scatter --------------------------------------------------------------------------------------
@ct.kernel
def gather1d_kernel(x, idx, msk, out, pad):
    i = ct.load(idx, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    m = ct.load(msk, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0, 0), ct.gather(x, i)[None, :])
    ct.store(out, (1, 0), ct.gather(x, i, padding_value=-1.5)[None, :])
    ct.store(out, (2, 0), ct.gather(x, i, mask=m, padding_value=pad)[None, :])
    ct.store(out, (3, 0), ct.gather(x, i, mask=m, padding_value=ct.arange(32, dtype=ct.float32) * 0.5)[None, :])


@pytest.mark.parametrize("idx_dtype", ["int32", "int64", "int16", "uint32"])
def test_gather_1d_bounds_mask_padding(dev, idx_dtype: str) -> None:
    g = rng("gather1d", idx_dtype)
    n = 23
    x = g.standard_normal(n).astype(np.float32)
    lo = 0 if idx_dtype.startswith("u") else -6
    idx = g.integers(lo, n + 6, 32).astype(idx_dtype)
    idx[:3] = [0, n - 1, n] if lo == 0 else [-1, n - 1, n]
    msk = g.random(32) < 0.7
    out = dev.poison((4, 32), np.float32)
    dev.launch((1,), gather1d_kernel, (dev.put(x), dev.put(idx), dev.put(msk), out, 9.0))
    got = dev.get(out)
    ok = (idx.astype(np.int64) >= 0) & (idx.astype(np.int64) < n)
    vals = x[np.where(ok, idx, 0).astype(np.int64)]
    assert_bits_equal(got[0], np.where(ok, vals, np.float32(0)))
    assert_bits_equal(got[1], np.where(ok, vals, np.float32(-1.5)))
    assert_bits_equal(got[2], np.where(ok & msk, vals, np.float32(9.0)))
    assert_bits_equal(got[3], np.where(ok & msk, vals, np.arange(32, dtype=np.float32) * 0.5))


@ct.kernel
def gather2d_kernel(x, rows, cols, out, out_row):
    r = ct.load(rows, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(cols, (0,), (16,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0, 0), ct.gather(x, (r[:, None], c[None, :]), padding_value=-7))
    ct.store(out_row, (0,), ct.gather(x, (2, c)))


def test_gather_2d_broadcast_indices(dev) -> None:
    g = rng("gather2d")
    x = g.integers(-100, 100, (9, 12)).astype(np.int32)
    rows = g.integers(-2, 11, 8).astype(np.int32)
    cols = g.integers(-2, 14, 16).astype(np.int64)
    out, out_row = dev.poison((8, 16), np.int32), dev.poison((16,), np.int32)
    dev.launch((1,), gather2d_kernel, (dev.put(x), dev.put(rows), dev.put(cols), out, out_row))
    ok = ((rows >= 0) & (rows < 9))[:, None] & ((cols >= 0) & (cols < 12))[None, :]
    want = np.where(ok, x[np.clip(rows, 0, 8)[:, None], np.clip(cols, 0, 11)[None, :]], -7)
    np.testing.assert_array_equal(dev.get(out), want)
    okc = (cols >= 0) & (cols < 12)
    np.testing.assert_array_equal(dev.get(out_row), np.where(okc, x[2, np.clip(cols, 0, 11)], 0))


@ct.kernel
def scatter1d_kernel(out, idx, vals, msk, out2):
    i = ct.load(idx, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    v = ct.load(vals, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    m = ct.load(msk, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    ct.scatter(out, i, v, mask=m)
    ct.scatter(out2, i, 7)


def test_scatter_1d_bounds_mask(dev) -> None:
    g = rng("scatter1d")
    n = 40
    idx = g.permutation(n + 12)[:32].astype(np.int32) - 6     # distinct, some OOB either side
    vals = g.standard_normal(32).astype(np.float32)
    msk = g.random(32) < 0.7
    out, out2 = dev.poison((n,), np.float32), dev.poison((n,), np.int16)
    dev.launch((1,), scatter1d_kernel, (out, dev.put(idx), dev.put(vals), dev.put(msk), out2))
    want = np.full(n, np.nan, np.float32)
    ok = (idx >= 0) & (idx < n)
    want[idx[ok & msk]] = vals[ok & msk]
    assert_bits_equal(dev.get(out), want)
    want2 = np.full(n, 0x5A, np.int16)
    want2[idx[ok]] = 7
    np.testing.assert_array_equal(dev.get(out2), want2)


@ct.kernel
def scatter_dup_kernel(out, idx, vals):
    i = ct.load(idx, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    ct.scatter(out, i, ct.load(vals, (0,), (32,), padding_mode=ct.PaddingMode.ZERO))


def test_scatter_duplicates_one_winner(dev) -> None:
    g = rng("scatterdup")
    idx = g.integers(0, 8, 32).astype(np.int32)
    vals = np.arange(32, dtype=np.int32) * 10
    out = dev.poison((10,), np.int32)
    dev.launch((1,), scatter_dup_kernel, (out, dev.put(idx), dev.put(vals)))
    got = dev.get(out)
    for a in range(10):
        cands = vals[idx == a]
        assert (got[a] in cands) if cands.size else got[a] == 0x5A, (a, got[a], cands)


@ct.kernel
def scatter2d_kernel(out, x, rows, cols):
    """Scatter a tile transposed: out[cols[j], rows[i]] = t[i, j]."""
    t = ct.load(x, (0, 0), (4, 8), padding_mode=ct.PaddingMode.ZERO)
    r = ct.load(rows, (0,), (4,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(cols, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.scatter(out, (c[None, :], r[:, None]), t)


def test_scatter_2d(dev) -> None:
    g = rng("scatter2d")
    x = g.standard_normal((4, 8)).astype(np.float64)
    rows = g.permutation(6)[:4].astype(np.int32) - 1
    cols = g.permutation(10)[:8].astype(np.int32)
    out = dev.poison((9, 5), np.float64)
    dev.launch((1,), scatter2d_kernel, (out, dev.put(x), dev.put(rows), dev.put(cols)))
    want = np.full((9, 5), np.nan)
    for i in range(4):
        for j in range(8):
            if 0 <= rows[i] < 5 and 0 <= cols[j] < 9:
                want[cols[j], rows[i]] = x[i, j]
    assert_bits_equal(dev.get(out), want)


@ct.kernel
def store_then_gather_kernel(a, out):
    """Program order within a block: a gather after a store to the same array sees the store."""
    t = ct.load(a, (0,), (16,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(a, (0,), t + 1.0)
    ct.store(out, (0,), ct.gather(a, ct.arange(16, dtype=ct.int32)))


def test_store_then_gather_same_array(dev) -> None:
    a = rng("order").standard_normal(13).astype(np.float32)
    da, out = dev.put(a), dev.poison((13,), np.float32)
    dev.launch((1,), store_then_gather_kernel, (da, out))
    np.testing.assert_allclose(dev.get(out), a + 1, rtol=1e-6)
    np.testing.assert_allclose(dev.get(da), a + 1, rtol=1e-6)


# ---- atomics ------------------------------------------------------------------------------------------------
def a_add(a, i, u): return ct.atomic_add(a, i, u)
def a_max(a, i, u): return ct.atomic_max(a, i, u)
def a_min(a, i, u): return ct.atomic_min(a, i, u)
def a_and(a, i, u): return ct.atomic_and(a, i, u)
def a_or(a, i, u): return ct.atomic_or(a, i, u)
def a_xor(a, i, u): return ct.atomic_xor(a, i, u)
def a_xchg(a, i, u): return ct.atomic_xchg(a, i, u)
def a_add_relaxed(a, i, u): return ct.atomic_add(a, i, u, memory_order=ct.MemoryOrder.RELAXED)


@functools.lru_cache(maxsize=None)
def atomic_kernel(op: Callable) -> Any:
    """Each block applies `op` to its TILE lanes; lanes past the end of idx use index -1 (out of
    bounds: a no-op). The old values go to `old`."""
    @ct.kernel
    def k(arr, idx, upd, old, TILE: ct.Constant[int]):
        b = ct.bid(0)
        i = ct.load(idx, (b,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        u = ct.load(upd, (b,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        lane = b * TILE + ct.arange(TILE, dtype=ct.int32)
        i = ct.where(lane < idx.shape[0], i, -1)
        ct.store(old, (b,), op(arr, i, u))
    return k


def _apply(name: str, cur: Any, u: Any) -> Any:
    if name in ("add", "add_relaxed"):
        return (np.asarray([cur]) + np.asarray([u]))[0]      # in the array dtype (wraps, rounds)
    return {"max": max, "min": min, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
            "xor": lambda a, b: a ^ b, "xchg": lambda a, b: b}[name](cur, u)


def check_sequential(name: str, init: np.ndarray, idx: np.ndarray, upd: np.ndarray, olds: np.ndarray,
                     final: np.ndarray) -> None:
    """Per address, some order of its lanes applied one at a time from the initial value gives
    every lane's old value and the final value."""
    n = init.size
    for a in range(n):
        lanes = tuple(np.flatnonzero(idx == a))
        if not lanes:
            assert final[a] == init[a] or (np.isnan(final[a]) and np.isnan(init[a])), f"address {a} changed"
            continue

        @functools.lru_cache(maxsize=None)
        def ok(cur: Any, remaining: frozenset) -> bool:
            if not remaining:
                return cur == final[a]
            return any(ok(_apply(name, cur, upd[l]), remaining - {l}) for l in remaining if olds[l] == cur)

        assert ok(init[a], frozenset(lanes)), \
            f"{name} address {a}: olds {olds[list(lanes)]} updates {upd[list(lanes)]} init {init[a]} final {final[a]}"


ATOMICS = {"add": a_add, "max": a_max, "min": a_min, "and": a_and, "or": a_or, "xor": a_xor, "xchg": a_xchg,
           "add_relaxed": a_add_relaxed}


@pytest.mark.parametrize("name, dtype", [
    ("add", "int32"), ("add", "uint32"), ("add", "int64"), ("add", "float32"), ("add", "float64"),
    ("add_relaxed", "int32"), ("max", "int32"), ("max", "uint32"), ("max", "int64"), ("min", "int32"),
    ("min", "uint64"), ("and", "int32"), ("or", "uint32"), ("xor", "int64"), ("xchg", "int32"), ("xchg", "float32"),
])
def test_atomic_rmw_duplicates(dev, name: str, dtype: str) -> None:
    """Three blocks of 16 lanes over 10 addresses (plus 5 trailing out-of-bounds lanes)."""
    g = rng("atomic", name, dtype)
    d = np.dtype(dtype)
    nlanes, n = 43, 10
    idx = g.integers(0, n, nlanes).astype(np.int32)
    if d.kind == "f":
        init = np.round(g.uniform(-8, 8, n)).astype(d)
        upd = (g.integers(1, 64, nlanes) / 4).astype(d)   # exact in binary: order-independent sums
    elif name in ("and", "or", "xor"):
        info = np.iinfo(d)
        init = g.integers(info.min, info.max, n, dtype=d, endpoint=True)
        upd = g.integers(info.min, info.max, nlanes, dtype=d, endpoint=True)
    else:
        lo = 0 if d.kind == "u" else -1000
        init = g.integers(lo, 1000, n).astype(d)
        upd = g.integers(lo if name != "add" else 1, 1000, nlanes).astype(d)
    arr = dev.put(init)
    old = dev.poison((48,), d)
    dev.launch((3,), atomic_kernel(ATOMICS[name]), (arr, dev.put(idx), dev.put(upd), old, 16))
    olds, final = dev.get(old)[:nlanes], dev.get(arr)
    check_sequential(name, init, idx, upd, olds, final)


@pytest.mark.xfail_backend("triton-interpret", reason="Triton's CPU interpreter has no bfloat16 atomic add "
                           "(\"Unsupported data type\"; the sm_90 build emits atom.add.bf16)",
                           params=[{"dtype": "bfloat16"}])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_atomic_add_half(dev, dtype) -> None:
    """16-bit float atomic adds (bfloat16: sm_90+), sums of halves exact in either dtype."""
    import ml_dtypes
    d = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    g = rng("atomic-f16")
    idx = g.integers(0, 4, 32).astype(np.int32)
    upd = (g.integers(1, 8, 32) / 2).astype(d)
    arr = dev.put(np.zeros(4, d))
    old = dev.poison((32,), d)
    dev.launch((2,), atomic_kernel(a_add), (arr, dev.put(idx), dev.put(upd), old, 16))
    np.testing.assert_array_equal(dev.get(arr).astype(np.float64), np.bincount(idx, upd.astype(np.float64), 4))
    check_sequential("add", np.zeros(4, d), idx, upd, dev.get(old), dev.get(arr))


@ct.kernel
def cas_kernel(arr, idx, old, old_oob):
    """Every lane tries cas(expected=0, desired=lane+1): per address exactly one lane wins."""
    i = ct.load(idx, (0,), (32,), padding_mode=ct.PaddingMode.ZERO)
    lane = ct.arange(32, dtype=ct.int32)
    ct.store(old, (0,), ct.atomic_cas(arr, i, 0, lane + 1))
    ct.store(old_oob, (0,), ct.atomic_cas(arr, i + 100, lane - 7, lane * 3))


def test_atomic_cas_one_winner_per_address(dev) -> None:
    g = rng("cas")
    idx = g.integers(0, 6, 32).astype(np.int32)
    init = np.zeros(8, np.int32)
    init[5] = 99                                   # nobody can win address 5
    arr, old, old_oob = dev.put(init), dev.poison((32,), np.int32), dev.poison((32,), np.int32)
    dev.launch((1,), cas_kernel, (arr, dev.put(idx), old, old_oob))
    olds, final = dev.get(old), dev.get(arr)
    for a in range(8):
        lanes = np.flatnonzero(idx == a)
        if a == 5 or not lanes.size:
            assert final[a] == init[a] and (olds[lanes] == init[a]).all()
            continue
        winners = lanes[olds[lanes] == 0]
        assert winners.size == 1, (a, olds[lanes])
        assert final[a] == winners[0] + 1
        assert (olds[lanes[lanes != winners[0]]] == final[a]).all()
    # out-of-bounds cas is a no-op that returns `expected`
    np.testing.assert_array_equal(dev.get(old_oob), np.arange(32) - 7)


@ct.kernel
def cas_float_kernel(arr, exp, des, old):
    e = ct.load(exp, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    d = ct.load(des, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(old, (0,), ct.atomic_cas(arr, ct.arange(8, dtype=ct.int32), e, d))


def test_atomic_cas_float_compares(dev) -> None:
    init = np.array([1.0, 2.0, 3.0, 4.0, 0.0, 6.0, 7.0, 8.0], np.float32)
    exp = np.array([1.0, 2.5, 3.0, 0.0, 0.0, 6.0, 7.5, 8.0], np.float32)
    des = np.arange(8, dtype=np.float32) + 100
    arr, old = dev.put(init), dev.poison((8,), np.float32)
    dev.launch((1,), cas_float_kernel, (arr, dev.put(exp), dev.put(des), old))
    assert_bits_equal(dev.get(old), init)
    assert_bits_equal(dev.get(arr), np.where(init == exp, des, init))


StaticCols = Annotated[Any, ct.ArrayAnnotation(static_shape_dims=(-1,), static_stride_dims=(0,))]


@ct.kernel
def static_dims_kernel(x: StaticCols, out):
    ct.static_assert(isinstance(x.shape[1], int) and x.strides[0] == x.shape[1])  # compiled-in constants
    i = ct.bid(0)
    t = ct.load(x, (i, 0), (4, x.shape[1]), padding_mode=ct.PaddingMode.ZERO)  # a constant tile shape
    ct.store(out, (i, 0), t * ct.num_tiles(x, 1, (4, 8)))


def test_array_annotation_static_dims(dev) -> None:
    """static_shape_dims / static_stride_dims compile sizes and strides in as constants (one
    variant per value); axes are checked at launch."""
    for cols in (16, 32):
        x = rng(f"static-{cols}").standard_normal((10, cols)).astype(np.float32)
        out = dev.poison((10, cols), np.float32)
        dev.launch((3,), static_dims_kernel, (dev.put(x), out))
        np.testing.assert_array_equal(dev.get(out), x * (cols // 8))
    assert "array_shape" not in static_dims_kernel.ir(dev.put(x), out)
    with pytest.raises(ValueError, match=r"static_shape_dims contains axis 2, which is out of range for a rank-2"):
        dev.launch((1,), bad_static_axis_kernel, (dev.put(x),))
    with pytest.raises(ValueError, match=r"static_stride_dims \(1, -1\) contains a duplicate axis"):
        dev.launch((1,), repeated_static_axis_kernel, (dev.put(x),))
    for bad in ((0, True), (1.0,)):
        with pytest.raises(TypeError, match="Each entry of static_stride_dims must be int"):
            ct.ArrayAnnotation(static_stride_dims=bad)


StaticRows = Annotated[list, ct.ListAnnotation(element=ct.ArrayAnnotation(static_shape_dims=(1,),
                                                                          static_stride_dims=(0,)))]


@ct.kernel
def static_list_kernel(xs: StaticRows, out):
    first, last = xs[0], xs[len(xs) - 1]
    ct.static_assert(isinstance(first.shape[1], int) and isinstance(last.strides[0], int))
    acc = ct.zeros((4, first.shape[1]), ct.float32)  # a constant tile shape
    for i in range(len(xs)):
        acc += ct.load(xs[i], (0, 0), (4, xs[i].shape[1]), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0, 0), acc * last.strides[0])


def test_list_annotation_static_dims(dev) -> None:
    """A ListAnnotation's element annotation compiles the sizes and strides it names in, once
    for every array of the list: they must agree (checked at launch, before anything runs)."""
    for cols in (8, 16):
        pitch = cols + 3  # rows padded: the row stride is not the row length
        xs = [rng(f"static-list-{cols}-{i}").standard_normal((3, pitch)).astype(np.float32) for i in range(3)]
        out = dev.poison((3, cols), np.float32)
        dev.launch((1,), static_list_kernel, ([dev.put(x)[:, :cols] for x in xs], out))
        np.testing.assert_allclose(dev.get(out), sum(xs)[:, :cols] * pitch, rtol=1e-6)
    x = np.zeros((3, 8), np.float32)
    out = dev.poison((3, 8), np.float32)
    for bad, what in (([dev.put(x), dev.put(np.zeros((3, 16), np.float32))[:, :8]],
                       r"stride at axis 0 \(\[0\]: 8, \[1\]: 16\)"),
                      ([dev.put(x), dev.put(np.zeros((3, 4), np.float32))], "shape at axis 1")):
        with pytest.raises(ValueError, match=f"the arrays of the list vary in static {what}"):
            dev.launch((1,), static_list_kernel, (bad, out))
    assert np.isnan(dev.get(out)).all()


@ct.kernel
def bad_static_axis_kernel(x: Annotated[Any, ct.ArrayAnnotation(static_shape_dims=(2, -1))]):
    ct.store(x, (0, 0), ct.zeros((1, 1), dtype=x.dtype))


@ct.kernel
def repeated_static_axis_kernel(x: Annotated[Any, ct.ArrayAnnotation(static_stride_dims=(1, -1))]):
    ct.store(x, (0, 0), ct.zeros((1, 1), dtype=x.dtype))


@ct.kernel
def _raw_copy(x, y, offs, T: ct.Constant[int]):
    o = ct.load(offs, index=(0,), shape=(T,))
    mem_in, mem_out = x.get_raw_memory(), y.get_raw_memory()
    mem_out.store_offset(o, mem_in.load_offset(o, mask=o % 3 != 0, padding_value=-5.0))


@ct.kernel
def _raw_atomics(x, offs, v, T: ct.Constant[int]):
    o = ct.load(offs, index=(0,), shape=(T,))
    x.get_raw_memory().atomic_add_offset(o, v, mask=o < 6)
    x.get_raw_memory().atomic_cas_offset(7, 0.0, 9.0)
    x.get_raw_memory().atomic_cas_offset(o, 2.0, 5.0, mask=o < 3)  # lanes 3..5 hold 2.0 too but are masked off


def test_raw_memory_offsets_address_elements_in_row_major_order(dev):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    offs = np.sort(rng.choice(30, 8, replace=False)).astype(np.int64)
    y = dev.poison((5, 6), np.float32)
    dev.launch((1,), _raw_copy, (dev.put(x), y, dev.put(offs), 8))
    got, want = dev.get(y).reshape(-1), np.full(30, np.nan, np.float32)
    want[offs] = np.where(offs % 3 != 0, x.reshape(-1)[offs], -5.0)
    np.testing.assert_array_equal(got[offs], want[offs])
    assert np.isnan(np.delete(got, offs)).all()  # nothing else written


def test_raw_memory_atomics_with_mask(dev):
    z = dev.put(np.zeros(8, np.float32))
    dev.launch((1,), _raw_atomics, (z, dev.put(np.arange(8, dtype=np.int32)), 2.0, 8))
    np.testing.assert_array_equal(dev.get(z), [5, 5, 5, 2, 2, 2, 0, 9])


def test_raw_memory_values_broadcast_to_the_offsets_not_back():
    @ct.kernel
    def bad(y):
        y.get_raw_memory().store_offset(ct.arange(1, dtype=ct.int64), ct.arange(8, dtype=ct.float32))
    with pytest.raises(ct.TileTypeError, match="broadcastable"):
        ct.launch(None, (1,), bad, (np.zeros(8, np.float32),))
