"""`ct.insert` (and the subtile checks it shares with `ct.extract`) against NumPy slicing.

Inputs are odd-sized arrays loaded into power-of-two tiles with zero padding; outputs are
poisoned so an element the kernel does not write fails the comparison. Values are compared
bit for bit: insert moves data, so -0.0, NaN payloads and every integer must survive.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error
from optest_utils import assert_bits_equal, is_float, np_dtype, padded_tiles, random_array, rng

ConstInt = ct.Constant[int]


def _x(shape: tuple[int, ...], seed: str, dtype: str = "float32") -> np.ndarray:
    x = random_array(rng("insert", seed, dtype), shape, np_dtype(dtype), -100, 100)
    if np_dtype(dtype).kind == "f":
        x.flat[0] = -0.0
    return x


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Bitwise equality for floats (the sign of zero included), plain equality otherwise."""
    if is_float(want.dtype):
        assert_bits_equal(got, want)
    else:
        np.testing.assert_array_equal(got, want)


def _replaced(p: np.ndarray, index: tuple[int, ...], value: np.ndarray) -> np.ndarray:
    """Reference: a copy of p with block `index` of the value.shape grid set to value."""
    out = p.copy()
    out[tuple(slice(i * s, (i + 1) * s) for i, s in zip(index, value.shape))] = value
    return out


# ---- values ---------------------------------------------------------------------------------------------
@ct.kernel
def insert_2d(x, v, out, i, j, TM: ConstInt, TN: ConstInt, SM: ConstInt, SN: ConstInt):
    """out = tile x with block (i, j) replaced by tile v, and block (1, 0) by tile v too (method
    form, constant index)."""
    t = ct.load(x, (0, 0), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(v, (0, 0), (SM, SN), padding_mode=ct.PaddingMode.ZERO)
    t = ct.insert(t, (i, j), s)
    ct.store(out, (0, 0), t.insert((1, 0), s))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint16", "int64", "bool_"])
@pytest.mark.parametrize("tile, sub, index", [((8, 16), (4, 4), (0, 3)), ((8, 16), (2, 16), (3, 0)),
                                              ((4, 32), (2, 8), (1, 2))])
def test_insert_2d(dev, dtype: str, tile, sub, index) -> None:
    x, v = _x((tile[0] - 1, tile[1] - 3), "x2", dtype), _x((sub[0], sub[1] - 1), "v2", dtype)
    px, pv = padded_tiles(x, tile, 0), padded_tiles(v, sub, 0)
    want = _replaced(_replaced(px, index, pv), (1, 0), pv)
    out = dev.poison(tile, np_dtype(dtype))
    dev.launch((1,), insert_2d, (dev.put(x), dev.put(v), out, *index, *tile, *sub))
    _same(dev.get(out), want)


@ct.kernel
def insert_1d(x, out, i, T: ConstInt, S: ConstInt):
    """out = x with block i of size S replaced by that block + 5 (extract, then insert), and
    element 3 by a 0-d tile (a unit block)."""
    t = ct.load(x, 0, T, padding_mode=ct.PaddingMode.ZERO)
    t = ct.insert(t, i, ct.extract(t, i, S) + 5)
    t = ct.insert(t, 3, ct.extract(t, 3, ()) * 2)
    ct.store(out, 0, t)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32"])
@pytest.mark.parametrize("i", [0, 2, 3])
def test_insert_1d_runtime_index_and_unit_block(dev, dtype: str, i: int) -> None:
    x = _x((125,), "x1", dtype)
    p = padded_tiles(x, (128,), 0)
    want = p.astype(np.float64)
    want[i * 32:(i + 1) * 32] += 5
    want[3] *= 2
    out = dev.poison((128,), np_dtype(dtype))
    dev.launch((1,), insert_1d, (dev.put(x), out, i, 128, 32))
    _same(dev.get(out), want.astype(np_dtype(dtype)))


@ct.kernel
def insert_3d(x, out, b):
    """Blocks (b, 1, 0) and (0, 0, 1) of the (2, 4, 8) tile become 1, -1 (2x2x4 blocks)."""
    t = ct.load(x, (0, 0, 0), (2, 4, 8), padding_mode=ct.PaddingMode.ZERO)
    t = ct.insert(t, (b, 1, 0), ct.full((1, 2, 4), 1.0, ct.float32))
    t = ct.insert(t, (0, 0, 1), ct.full((2, 2, 4), -1.0, ct.float32))
    ct.store(out, (0, 0, 0), t)


@pytest.mark.parametrize("b", [0, 1])
def test_insert_3d(dev, b: int) -> None:
    x = _x((2, 3, 7), "x3")
    want = padded_tiles(x, (2, 4, 8), 0)
    want[b, 2:4, 0:4] = 1.0
    want[0:2, 0:2, 4:8] = -1.0
    out = dev.poison((2, 4, 8), np.float32)
    dev.launch((1,), insert_3d, (dev.put(x), out, b))
    assert_bits_equal(dev.get(out), want)


@ct.kernel
def insert_whole_and_scalar(x, out, scalar_out):
    """A value of x's own shape replaces all of x; inserting into a 0-d tile gives the value."""
    t = ct.load(x, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0,), ct.insert(t, 0, t * 3.0))
    s = ct.insert(ct.float32(1.0), (), ct.float32(4.5))
    ct.store(scalar_out, (0,), ct.full((2,), s, ct.float32))


def test_insert_whole_tile_and_0d_destination(dev) -> None:
    x = _x((8,), "whole")
    out, sout = dev.poison((8,), np.float32), dev.poison((2,), np.float32)
    dev.launch((1,), insert_whole_and_scalar, (dev.put(x), out, sout))
    np.testing.assert_array_equal(dev.get(out), x * 3.0)
    np.testing.assert_array_equal(dev.get(sout), [4.5, 4.5])


@ct.kernel
def insert_outside(x, out, i):
    t = ct.load(x, (0,), (16,))
    ct.store(out, (0,), ct.insert(t, i, ct.full((4,), 9.0, ct.float32)))


@pytest.mark.parametrize("i", [-1, 4, 1000])
def test_insert_at_a_runtime_index_outside_the_grid_changes_nothing(dev, i: int) -> None:
    """cuTile leaves this undefined; both tilecraft backends return x unchanged."""
    x = _x((16,), "outside")
    out = dev.poison((16,), np.float32)
    dev.launch((1,), insert_outside, (dev.put(x), out, i))
    assert_bits_equal(dev.get(out), x)


@ct.kernel
def extract_of_insert(x, v, out, i, j):
    t = ct.load(x, (0, 0), (8, 8))
    s = ct.load(v, (0, 0), (2, 4))
    ct.store(out, (0, 0), ct.extract(ct.insert(t, (i, j), s), (i, j), (2, 4)))


@pytest.mark.parametrize("i, j", [(0, 0), (3, 1), (2, 0)])
def test_extract_undoes_insert(dev, i: int, j: int) -> None:
    x, v = _x((8, 8), "eix"), _x((2, 4), "eiv")
    out = dev.poison((2, 4), np.float32)
    dev.launch((1,), extract_of_insert, (dev.put(x), dev.put(v), out, i, j))
    assert_bits_equal(dev.get(out), v)


# ---- errors (front end: cuTile's classes and wording, located at the call) -------------------------------
@ct.kernel
def insert_dtype_mismatch(x):
    t = ct.load(x, 0, 16)
    t = ct.insert(t, 0, ct.full((8,), 1, ct.int32))  # ERR
    ct.store(x, 0, t)


@ct.kernel
def insert_too_big(x):
    t = ct.load(x, 0, 16)
    t = ct.insert(t, 0, ct.full((32,), 1.0, ct.float32))  # ERR
    ct.store(x, 0, t)


@ct.kernel
def insert_out_of_bounds(x):
    t = ct.load(x, 0, 16)
    t = t.insert(2, ct.full((8,), 1.0, ct.float32))  # ERR
    ct.store(x, 0, t)


@ct.kernel
def insert_rank_mismatch(x):
    t = ct.load(x, (0, 0), (4, 4))
    t = ct.insert(t, (0, 0), ct.full((4,), 1.0, ct.float32))  # ERR
    ct.store(x, (0, 0), t)


@ct.kernel
def insert_index_size(x):
    t = ct.load(x, (0, 0), (4, 4))
    t = ct.insert(t, 1, ct.full((2, 2), 1.0, ct.float32))  # ERR
    ct.store(x, (0, 0), t)


@ct.kernel
def insert_float_index(x):
    t = ct.load(x, 0, 16)
    t = ct.insert(t, ct.float32(0.0), ct.full((8,), 1.0, ct.float32))  # ERR
    ct.store(x, 0, t)


@ct.kernel
def extract_not_divisible(x):
    t = ct.load(x, 0, 16)
    ct.store(x, 0, ct.extract(t, 0, 32))  # ERR


@ct.kernel
def extract_out_of_bounds(x):
    t = ct.load(x, (0, 0), (4, 4))
    ct.store(x, (0, 0), ct.extract(t, (0, 2), (2, 2)))  # ERR


@ct.kernel
def extract_shape_length(x):
    t = ct.load(x, (0, 0), (4, 4))
    ct.store(x, (0, 0), ct.extract(t, (0, 0), (2,)))  # ERR


@pytest.mark.parametrize("kernel, shape, message", [
    (insert_dtype_mismatch, (16,), "Cannot insert a tile of dtype int32 into a tile of dtype float32"),
    (insert_too_big, (16,), r"Input shape \(16,\) is not divisible by value shape \(32,\) at dimension #0"),
    (insert_out_of_bounds, (16,), r"Index 2 out of bounds at dimension #0: valid range is \[0, 2\) in tile space "
                                  r"\(input shape \(16,\), value shape \(8,\)\)"),
    (insert_rank_mismatch, (4, 4), "Value rank 1 does not match the tile rank 2"),
    (insert_index_size, (4, 4), "Index size 1 does not match the tile rank 2"),
    (insert_float_index, (16,), r"insert\(\) index must be a signed integer scalar"),
    (extract_not_divisible, (16,), r"Input shape \(16,\) is not divisible by result shape \(32,\) at dimension #0"),
    (extract_out_of_bounds, (4, 4), r"Index 2 out of bounds at dimension #1: valid range is \[0, 2\)"),
    (extract_shape_length, (4, 4), "Expected shape length to be 2, got 1"),
])
def test_subtile_errors(kernel, shape, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=message) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(shape, np.float32),))
    call = "t.insert" if kernel is insert_out_of_bounds else "ct.extract" if "extract" in kernel.fn.__name__ \
        else "ct.insert"
    check_error(ei, kernel.fn, "# ERR", col_text=call)
