"""Shape manipulation, selection and factories against NumPy.

Inputs are odd-sized arrays loaded into power-of-two tiles with zero padding; the NumPy
reference applies the same op to the zero-padded input.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import assert_bits_equal, np_dtype, padded_tiles, rng


def shape_kernel(fn: Callable, tile: tuple[int, ...]) -> Any:
    """Load tile 0 of x (zero padded), store fn(tile) at the origin of out."""
    @ct.kernel
    def k(x, out):
        t = ct.load(x, (0,) * len(tile), tile, padding_mode=ct.PaddingMode.ZERO)
        r = fn(t)
        ct.static_assert(r.dtype == out.dtype, "result dtype")
        ct.store(out, (0,) * r.ndim, r)
    return k


def run_shape(dev: Any, fn: Callable, x: np.ndarray, tile: tuple[int, ...], want: np.ndarray) -> None:
    out = dev.poison(want.shape, want.dtype)
    dev.launch((1,), shape_kernel(fn, tile), (dev.put(x), out))
    assert_bits_equal(dev.get(out), want)


def _x(shape: tuple[int, ...], seed: Any, dtype: str = "float32") -> np.ndarray:
    return rng("shape", seed).standard_normal(shape).astype(np_dtype(dtype))


# ---- reshape / permute / transpose ---------------------------------------------------------------------
def r_flat(t): return ct.reshape(t, (32,))
def r_neg1(t): return ct.reshape(t, (2, -1))
def r_neg1_only(t): return t.reshape(-1)
def r_84(t): return t.reshape((8, 4))
def r_3d(t): return ct.reshape(t, (2, 2, 8))
def r_back(t): return ct.reshape(ct.reshape(t, (4, 2, 4)), (4, 8))


@pytest.mark.parametrize("fn, shape", [(r_flat, (32,)), (r_neg1, (2, 16)), (r_neg1_only, (32,)), (r_84, (8, 4)),
                                       (r_3d, (2, 2, 8)), (r_back, (4, 8))])
@pytest.mark.parametrize("dtype", ["float32", "int16", "bfloat16"])
def test_reshape_row_major(dev, fn: Callable, shape: tuple[int, ...], dtype: str) -> None:
    x = _x((3, 7), "reshape", dtype) if dtype != "int16" else np.arange(21, dtype=np.int16).reshape(3, 7)
    want = padded_tiles(x, (4, 8), 0).reshape(shape)
    run_shape(dev, fn, x, (4, 8), want)


def p_201(t): return ct.permute(t, (2, 0, 1))
def p_120(t): return t.permute((1, 2, 0))
def p_neg(t): return ct.permute(t, (-1, 0, 1))
def p_id(t): return ct.permute(t, (0, 1, 2))
def tr_3d(t): return ct.transpose(t, 0, 2)
def tr_3d_neg(t): return t.transpose(-1, -2)


@pytest.mark.parametrize("fn, axes", [(p_201, (2, 0, 1)), (p_120, (1, 2, 0)), (p_neg, (2, 0, 1)), (p_id, (0, 1, 2)),
                                      (tr_3d, (2, 1, 0)), (tr_3d_neg, (0, 2, 1))])
def test_permute_transpose_3d(dev, fn: Callable, axes: tuple[int, ...]) -> None:
    x = _x((2, 3, 7), "permute")
    want = padded_tiles(x, (2, 4, 8), 0).transpose(axes)
    run_shape(dev, fn, x, (2, 4, 8), want)


def tr_2d(t): return ct.transpose(t)
def tr_2d_method(t): return t.transpose()


@pytest.mark.parametrize("fn", [tr_2d, tr_2d_method])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_transpose_2d(dev, fn: Callable, dtype: str) -> None:
    x = _x((5, 13), "transpose", dtype) if dtype != "int8" else \
        rng("tr").integers(-100, 100, (5, 13)).astype(np.int8)
    run_shape(dev, fn, x, (8, 16), padded_tiles(x, (8, 16), 0).T.copy())


# ---- broadcast / expand_dims / None indexing ------------------------------------------------------------
def b_rows(t): return ct.broadcast_to(t, (4, 8))
def b_3d(t): return ct.broadcast_to(t, (2, 1, 8))
def b_method(t): return t.broadcast_to((2, 4, 8))


@pytest.mark.parametrize("fn, tile, shape", [(b_rows, (1, 8), (4, 8)), (b_3d, (1, 8), (2, 1, 8)),
                                             (b_method, (4, 1), (2, 4, 8)), (b_method, (1, 8), (2, 4, 8))])
def test_broadcast_to(dev, fn: Callable, tile: tuple[int, ...], shape: tuple[int, ...]) -> None:
    x = _x((1, 5) if tile == (1, 8) else (3, 1), "broadcast")
    want = np.broadcast_to(padded_tiles(x, tile, 0), shape).copy()
    run_shape(dev, fn, x, tile, want)


def e_0(t): return ct.expand_dims(t, 0)
def e_1(t): return ct.expand_dims(t, 1)
def e_neg(t): return ct.expand_dims(t, -1)
def e_method(t): return t.expand_dims(2)
def n_front(t): return t[None, :]
def n_mid(t): return t[:, None]
def n_back(t): return t[..., None]
def n_both(t): return t[None, :, None]
def n_bare(t): return t[None]


@pytest.mark.parametrize("fn, axis", [(e_0, 0), (e_1, 1), (e_neg, 2), (e_method, 2), (n_front, 0), (n_mid, 1),
                                      (n_back, 2), (n_both, (0, 2)), (n_bare, 0)])
def test_expand_dims_and_none_index(dev, fn: Callable, axis: Any) -> None:
    x = _x((3, 7), "expand")
    want = np.expand_dims(padded_tiles(x, (4, 8), 0), axis)
    if fn is n_both:
        want = padded_tiles(x, (4, 8), 0)[None, :, None]
    run_shape(dev, fn, x, (4, 8), want)


def n_1d_col(t): return t[:, None] * t[None, :]


def test_outer_product_from_none_index(dev) -> None:
    x = _x((13,), "outer")
    p = padded_tiles(x, (16,), 0).astype(np.float64)
    run_shape(dev, n_1d_col, x, (16,), (p[:, None] * p[None, :]).astype(np.float32))


# ---- cat / extract ------------------------------------------------------------------------------------------
def cat_kernel(axis: int) -> Any:
    @ct.kernel
    def k(x, y, out, TM: ct.Constant[int], TN: ct.Constant[int]):
        a = ct.load(x, (0, 0), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(y, (0, 0), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
        ct.store(out, (0, 0), ct.cat((a, b), axis))
    return k


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cat(dev, axis: int) -> None:
    x, y = _x((3, 7), "cat-x"), _x((4, 5), "cat-y")
    px, py = padded_tiles(x, (4, 8), 0), padded_tiles(y, (4, 8), 0)
    want = np.concatenate([px, py], axis=axis)
    out = dev.poison(want.shape, np.float32)
    dev.launch((1,), cat_kernel(axis), (dev.put(x), dev.put(y), out, 4, 8))
    assert_bits_equal(dev.get(out), want)


def cat_single(t): return ct.cat((t,), 0)


def test_cat_single_tile(dev) -> None:
    x = _x((3, 7), "cat1")
    run_shape(dev, cat_single, x, (4, 8), padded_tiles(x, (4, 8), 0))


@ct.kernel
def extract_kernel(x, out, i, j):
    """out[blk] = the (i, j) 4x4 sub-tile of the 8x16 tile; out2 the constant (1, 3) one."""
    t = ct.load(x, (0, 0), (8, 16), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0, 0), ct.extract(t, (i, j), (4, 4)))
    ct.store(out, (0, 1), t.extract((1, 3), (4, 4)))
    ct.store(out, (1, 0), ct.extract(t, (0, 0), (4, 4)) + ct.extract(t, (i, 3), (4, 4)))


@pytest.mark.parametrize("i, j", [(0, 0), (1, 2), (0, 3)])
def test_extract(dev, i: int, j: int) -> None:
    x = _x((7, 13), "extract")
    p = padded_tiles(x, (8, 16), 0)
    blk = lambda a, b: p[4 * a:4 * a + 4, 4 * b:4 * b + 4]  # noqa: E731
    out = dev.poison((8, 8), np.float32)
    dev.launch((1,), extract_kernel, (dev.put(x), out, i, j))
    got = dev.get(out)
    assert_bits_equal(got[:4, :4], blk(i, j))
    assert_bits_equal(got[:4, 4:], blk(1, 3))
    np.testing.assert_allclose(got[4:, :4], blk(0, 0) + blk(i, 3), rtol=1e-6)
    assert np.isnan(got[4:, 4:]).all()


def extract_scalar(t): return ct.extract(t, (2, 5), ())
def item_of(t): return ct.extract(t, (1, 1), (1, 1)).item()


@pytest.mark.parametrize("fn, pos", [(extract_scalar, (2, 5)), (item_of, (1, 1))])
def test_extract_unit_and_item(dev, fn: Callable, pos: tuple[int, int]) -> None:
    x = _x((3, 7), "unit")
    run_shape(dev, fn, x, (4, 8), np.array(x[pos]))


# ---- factories ------------------------------------------------------------------------------------------
@ct.kernel
def factories_kernel(f16, i32, z8, one64, fill, n):
    ct.store(f16, (0, 0), ct.full((4, 8), 3.5, ct.float16))
    ct.store(i32, (0,), ct.full(16, n, ct.int32))
    ct.store(z8, (0, 0), ct.zeros((2, 4), ct.int8))
    ct.store(one64, (0,), ct.ones((8,), ct.float64))
    ct.store(fill, (0, 0), ct.full((4, 4), n * 2, ct.float32))


def test_full_zeros_ones(dev) -> None:
    outs = [dev.poison((3, 7), np.float16), dev.poison((13,), np.int32), dev.poison((2, 4), np.int8),
            dev.poison((5,), np.float64), dev.poison((4, 4), np.float32)]
    dev.launch((1,), factories_kernel, (*outs, -7))
    got = [dev.get(o) for o in outs]
    assert (got[0] == 3.5).all() and (got[1] == -7).all() and (got[2] == 0).all()
    assert (got[3] == 1.0).all() and (got[4] == -14.0).all()


@ct.kernel
def arange_kernel(a, b, c, d, start, step):
    ct.store(a, (0,), ct.arange(16, dtype=ct.int32))
    ct.store(b, (0,), ct.arange(8, dtype=ct.float32, start=2, step=3))
    ct.store(c, (0,), ct.arange(32, dtype=ct.int32, start=start, step=step))
    ct.store(d, (0,), ct.arange(4, dtype=ct.int64, start=10, step=-4))


@pytest.mark.parametrize("start, step", [(0, 1), (5, 2), (-3, -7), (100, 0)])
def test_arange(dev, start: int, step: int) -> None:
    outs = [dev.poison((13,), np.int32), dev.poison((8,), np.float32), dev.poison((32,), np.int32),
            dev.poison((4,), np.int64)]
    dev.launch((1,), arange_kernel, (*outs, start, step))
    a, b, c, d = (dev.get(o) for o in outs)
    np.testing.assert_array_equal(a, np.arange(13))
    np.testing.assert_array_equal(b, 2 + 3 * np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(c, start + step * np.arange(32))
    np.testing.assert_array_equal(d, 10 - 4 * np.arange(4))


@ct.kernel
def astile_kernel(s, v, m, b, x):
    ct.store(s, (), ct.astile(3.25, dtype=ct.float32))
    ct.store(v, (0,), ct.astile((1, -2, 3, x), dtype=ct.int32))
    ct.store(m, (0, 0), ct.astile(((1.5, 2.0), (x * 1.0, -4.0)), dtype=ct.float32))
    ct.store(b, (0,), ct.astile((x, 2 * x), dtype=ct.int16))


def test_astile(dev) -> None:
    outs = [dev.poison((), np.float32), dev.poison((4,), np.int32), dev.poison((2, 2), np.float32),
            dev.poison((2,), np.int16)]
    dev.launch((1,), astile_kernel, (*outs, 7))
    s, v, m, b = (dev.get(o) for o in outs)
    assert s == 3.25
    np.testing.assert_array_equal(v, [1, -2, 3, 7])
    np.testing.assert_array_equal(m, [[1.5, 2.0], [7.0, -4.0]])
    np.testing.assert_array_equal(b, [7, 14])
