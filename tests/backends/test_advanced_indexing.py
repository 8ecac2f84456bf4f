"""ct.load_advanced_indexing / ct.store_advanced_indexing with ct.Slice: one sparse dim (a 1-D
index tile) and dense ct.Slice dims, against NumPy fancy indexing; cuTile's errors."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import poisoned

ZERO, NAN, NEG_INF = ct.PaddingMode.ZERO, ct.PaddingMode.NAN, ct.PaddingMode.NEG_INF


def reference_lanes(shape: tuple[int, ...], sel: np.ndarray, dim: int,
                    slices: dict[int, tuple[int, int]]) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Per-dim element indices of every lane (broadcast to the tile shape) and which lanes lie
    inside an array of `shape`."""
    per_dim = [sel if d == dim else np.arange(slices[d][0], slices[d][0] + slices[d][1]) for d in range(len(shape))]
    grids = np.meshgrid(*per_dim, indexing="ij")
    inside = np.ones(grids[0].shape, bool)
    for g, n in zip(grids, shape):
        inside &= (g >= 0) & (g < n)
    return tuple(np.clip(g, 0, n - 1) for g, n in zip(grids, shape)), inside


def reference_load(x: np.ndarray, sel: np.ndarray, dim: int, slices: dict[int, tuple[int, int]],
                   pad: float) -> np.ndarray:
    lanes, inside = reference_lanes(x.shape, sel, dim, slices)
    return np.where(inside, x.astype(np.float64)[lanes], pad)


def reference_store(y: np.ndarray, t: np.ndarray, sel: np.ndarray, dim: int,
                    slices: dict[int, tuple[int, int]]) -> np.ndarray:
    out = y.copy()
    lanes, inside = reference_lanes(y.shape, sel, dim, slices)
    out[tuple(g[inside] for g in lanes)] = t[inside]
    return out


# ---- loads ----------------------------------------------------------------------------------------------
def _row_gather(mode: ct.PaddingMode):
    @ct.kernel
    def k(x, sel, y, start, R: ct.Constant[int], C: ct.Constant[int]):
        rows = ct.load(sel, index=(0,), shape=(R,))
        ct.store(y, index=(0, 0), tile=ct.load_advanced_indexing(x, (rows, ct.Slice(start, C)), padding_mode=mode))
    return k


_ROW_GATHER = {m: _row_gather(m) for m in (ZERO, NAN, NEG_INF)}


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8"])
@pytest.mark.parametrize("start", [0, 3, 5])
def test_rows_in_any_order_with_repeats_and_padding(dev, dtype, start):
    """Sparse rows out of order, repeated and past the end (both sides); a dense column slice
    at a run-time start that runs past the last column: those lanes get ZERO padding."""
    g = np.random.default_rng([start, len(dtype)])
    x = (g.integers(-50, 50, (9, 7))).astype(dtype)
    sel = np.array([8, 2, 2, 0, 9, -1, 5, 4], np.int32)
    y = dev.poison((8, 4), dtype)
    dev.launch((1,), _ROW_GATHER[ZERO], (dev.put(x), dev.put(sel), y, start, 8, 4))
    np.testing.assert_array_equal(dev.get(y), reference_load(x, sel, 0, {1: (start, 4)}, 0).astype(dtype))


@pytest.mark.parametrize("mode, pad", [(NAN, np.nan), (NEG_INF, -np.inf)])
def test_float_padding_modes(dev, mode, pad):
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    sel = np.array([5, 6, 1, 3], np.int64)
    y = dev.poison((4, 8), np.float32, 0.0)
    dev.launch((1,), _ROW_GATHER[mode], (dev.put(x), dev.put(sel), y, 2, 4, 8))
    np.testing.assert_array_equal(dev.get(y), reference_load(x, sel, 0, {1: (2, 8)}, pad).astype(np.float32))


@ct.kernel
def _middle_dim_gather(x, y, s0, s2):
    """Sparse dim 1 of a 3-D array from an index tile computed in the kernel (i*3 mod 7,
    reversed), dense dims 0 and 2 at a run-time start."""
    i = ct.arange(4, dtype=ct.int32)
    picks = (3 - i) * 3 % 7
    t = ct.load_advanced_indexing(x, (ct.Slice(s0, 2), picks, ct.Slice(s2, 8)), padding_mode=ZERO)
    ct.store(y, index=(0, 0, 0), tile=t)


def test_middle_sparse_dim_of_a_3d_array(dev):
    x = np.random.default_rng(7).standard_normal((3, 7, 10))
    y = dev.poison((2, 4, 8), np.float64)
    dev.launch((1,), _middle_dim_gather, (dev.put(x), y, 1, 5))
    sel = (3 - np.arange(4)) * 3 % 7
    np.testing.assert_array_equal(dev.get(y), reference_load(x, sel, 1, {0: (1, 2), 2: (5, 8)}, 0.0))


# ---- stores ---------------------------------------------------------------------------------------------
@ct.kernel
def _row_scatter(x, sel, y, start, R: ct.Constant[int], C: ct.Constant[int]):
    rows = ct.load(sel, index=(0,), shape=(R,))
    t = ct.load(x, index=(0, 0), shape=(R, C))
    ct.store_advanced_indexing(y, (rows, ct.Slice(start, C)), t)


@pytest.mark.parametrize("dtype", ["float32", "int16"])
@pytest.mark.parametrize("start", [0, 2, -1])
def test_store_to_distinct_rows_skips_lanes_outside(dev, dtype, start):
    """Distinct sparse rows, some past either end, and a dense slice crossing the array's edges:
    exactly the lanes inside are written, every other element keeps its poison."""
    x = np.random.default_rng(11).integers(-99, 99, (8, 4)).astype(dtype)
    sel = np.array([6, 0, 9, 3, -2, 1, 5, 7], np.int32)
    y = dev.poison((8, 5), dtype)
    dev.launch((1,), _row_scatter, (dev.put(x), dev.put(sel), y, start, 8, 4))
    want = reference_store(poisoned((8, 5), dtype), x, sel, 0, {1: (start, 4)})
    np.testing.assert_array_equal(dev.get(y), want)


@ct.kernel
def _column_scatter(y, start):
    cols = ct.arange(4, dtype=ct.int64) * 2 + 1
    t = ct.reshape(ct.arange(16, dtype=ct.int32), (4, 4))
    ct.store_advanced_indexing(y, (ct.Slice(start, 4), cols), t)


def test_store_with_the_sparse_dim_last(dev):
    y = dev.poison((5, 9), np.int32)
    dev.launch((1,), _column_scatter, (y, 2))
    want = reference_store(poisoned((5, 9), np.int32), np.arange(16, dtype=np.int32).reshape(4, 4),
                           np.arange(4) * 2 + 1, 1, {0: (2, 4)})
    np.testing.assert_array_equal(dev.get(y), want)


# ---- errors ---------------------------------------------------------------------------------------------
def _k_index_2d(x):
    ct.load_advanced_indexing(x, (ct.zeros((4, 4), dtype=ct.int32), ct.Slice(0, 4)))


def _k_float_index(x):
    ct.load_advanced_indexing(x, (ct.zeros((4,), dtype=ct.float32), ct.Slice(0, 4)))


def _k_no_sparse(x):
    ct.load_advanced_indexing(x, (ct.Slice(0, 4), ct.Slice(1, 4)))


def _k_two_sparse(x):
    r = ct.arange(4, dtype=ct.int32)
    ct.store_advanced_indexing(x, (r, r), ct.zeros((4,), dtype=ct.int32))


def _k_rank(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, 4), ct.Slice(0, 4)))


def _k_not_pow2(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, 3)))


def _k_runtime_length(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, ct.bid(0) + 4)))


def _k_bad_item(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), 2))


def _k_shape_mismatch(x):
    ct.store_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, 2)), ct.zeros((4, 4), dtype=ct.int32))


def _k_scalar_store(x):
    ct.store_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, 2)), 7)


def _k_int_nan_padding(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(0, 4)), padding_mode=NAN)


def _k_float_start(x):
    ct.load_advanced_indexing(x, (ct.arange(4, dtype=ct.int32), ct.Slice(1.5, 4)))


def _k_1d(v):
    ct.load_advanced_indexing(v, (ct.arange(4, dtype=ct.int32),))


def _k_1d_store(v):
    ct.store_advanced_indexing(v, (ct.arange(4, dtype=ct.int32),), ct.zeros((4,), dtype=ct.int32))


M = np.zeros((8, 8), np.int32)
V = np.zeros(8, np.int32)


@pytest.mark.parametrize("fn, arg, message", [
    (_k_index_2d, M, "Sparse index at dim 0 must be a 1D integer tile, got 2D"),
    (_k_float_index, M, "Sparse index at dim 0 must be an integer tile, got dtype float32"),
    (_k_no_sparse, M, r"exactly one index must be a 1D integer Tile \(the sparse dim\); none found"),
    (_k_two_sparse, M, r"exactly one index must be a 1D integer Tile \(the sparse dim\); found 2 at dims \[0, 1\]"),
    (_k_rank, M, "index length 3 does not match array rank 2"),
    (_k_not_pow2, M, "Index at dim 1 has size 3; must be a power of two"),
    (_k_runtime_length, M, "ct.Slice length at dim 1 must be a compile-time constant"),
    (_k_bad_item, M, r"index at dim 1 must be a 1D integer Tile \(sparse dim\) or ct.Slice"),
    (_k_shape_mismatch, M, r"Tile shape \(4, 4\) does not match the shape implied by indices \(4, 2\)"),
    (_k_scalar_store, M, r"Tile shape \(\) does not match the shape implied by indices \(4, 2\)"),
    (_k_int_nan_padding, M, "padding_mode NAN needs a float array"),
    (_k_float_start, M, "ct.Slice start must be a signed integer scalar"),
    (_k_1d, V, r"load_advanced_indexing requires a 2D or higher-rank array; use ct.gather\(\) for 1D arrays"),
    (_k_1d_store, V, r"store_advanced_indexing requires a 2D or higher-rank array; use ct.scatter\(\)"),
])
def test_cutile_errors(fn, arg, message):
    with pytest.raises(ct.TileTypeError, match=message) as info:
        ct.launch(None, (1,), ct.kernel(fn), (arg.copy(),))
    assert f"in {fn.__name__}" in str(info.value) and "^" in str(info.value)  # located, with a caret


def test_slice_on_the_host_is_refused():
    with pytest.raises(RuntimeError, match="only be called inside a tile kernel"):
        ct.Slice(0, 4)
