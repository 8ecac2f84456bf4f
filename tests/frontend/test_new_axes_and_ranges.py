"""Tile subscripts that only add unit axes (`t[None, :]`, `t[..., np.newaxis]`), range() bounds,
unpacking and dict lookups: results checked against NumPy, errors in cuTile's classes and
wording at the line marked `# ERR`."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tilecraft as ct


def marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if "# ERR" in text)


@ct.kernel
def new_axes_kernel(x, out):
    t = ct.load(x, (0, 0), (2, 4))
    a = t[np.newaxis, ..., None]          # (1, 2, 4, 1)
    b = t[:, None, :]                     # (2, 1, 4)
    c = t[None]                           # (1, 2, 4)
    total = a.reshape((2, 4)) * 100 + b.reshape((2, 4)) * 10 + c.reshape((2, 4))
    ct.static_assert(a.shape == (1, 2, 4, 1) and b.shape == (2, 1, 4) and c.shape == (1, 2, 4))
    ct.store(out, (0, 0), total)


def test_new_axes(dev) -> None:
    x = np.arange(8, dtype=np.int32).reshape(2, 4) - 3
    out = dev.poison((2, 4), np.int32)
    dev.launch((1,), new_axes_kernel, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x * 111)


@ct.kernel
def index_int(x):
    t = ct.load(x, (0, 0), (2, 4))
    u = t[1]  # ERR


@ct.kernel
def index_slice_alone(x):
    t = ct.load(x, (0, 0), (2, 4))
    u = t[:]  # ERR


@ct.kernel
def index_strided(x):
    t = ct.load(x, (0, 0), (2, 4))
    u = t[None, ::2]  # ERR


@ct.kernel
def index_too_many(x):
    t = ct.load(x, (0, 0), (2, 4))
    u = t[:, :, :]  # ERR


@ct.kernel
def index_two_ellipses(x):
    t = ct.load(x, (0, 0), (2, 4))
    u = t[..., None, ...]  # ERR


@ct.kernel
def range_of_array(x):
    for i in range(x):  # ERR
        pass


@ct.kernel
def range_of_float(x, f):
    for i in range(2, f):  # ERR
        pass


@ct.kernel
def range_negative_step(x):
    for i in range(8, 0, -1):  # ERR
        pass


@ct.kernel
def dict_miss(x):
    d = dict(a=1)
    v = d["b"]  # ERR


@ct.kernel
def unpack_short(x):
    a, b, c = (1, 2)  # ERR


@pytest.mark.parametrize("kernel, extra, cls, message", [
    (index_int, (), ct.TileTypeError, "Directly indexing a tile is not supported; use `extract()` or `item()`"),
    (index_slice_alone, (), ct.TileTypeError, "Directly indexing a tile is not supported"),
    (index_strided, (), ct.TileTypeError, "Expected `None|np.newaxis` or `ellipsis` or full slice (`:`), but got "
                                          "slice(None, None, 2)"),
    (index_too_many, (), ct.TileTypeError, "Tile is 2-dimensional, but 3 were indexed"),
    (index_two_ellipses, (), ct.TileTypeError, "Only one ellipsis is allowed"),
    (range_of_array, (), ct.TileTypeError, "Invalid argument #1 of range(): Expected a scalar or a 0D tile, but "
                                           "given value has type Array[int32,(?,?):(?,?)]"),
    (range_of_float, (0.5,), ct.TileTypeError, "Invalid argument #2 of range(): Expected a signed integer scalar, "
                                               "but got Tile[float32,()]"),
    (range_negative_step, (), ct.TileTypeError, "Step must be positive, got -1"),
    (dict_miss, (), ct.TileTypeError, "Key 'b' not found in dictionary"),
    (unpack_short, (), ct.TileValueError, "Too few values to unpack (expected 3, got 2)"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_errors(kernel, extra, cls, message: str) -> None:
    with pytest.raises(cls, match=re.escape(message)) as ei:
        ct.launch(None, (1,), kernel, (np.zeros((2, 4), np.int32), *extra))
    assert ei.value.loc.line == marked_line(kernel.fn)


@ct.kernel
def count_tiles(x, out):
    ct.scatter(out, 0, ct.num_tiles(x, axis=1, shape=()))      # (): one element per tile
    ct.scatter(out, 1, ct.num_tiles(x, axis=0, shape=(4, 2)))


def test_num_tiles_of_single_elements(dev) -> None:
    out = dev.poison((2,), np.int32)
    dev.launch((1,), count_tiles, (dev.put(np.zeros((9, 5), np.float32)), out))
    assert dev.get(out).tolist() == [5, 3]


@ct.kernel
def astile_errors(out, which: ct.Constant[int]):
    t = ct.full((2,), 1, ct.int32)
    if which == 0:
        v = ct.astile(((1, 2), (3, 4), (5, 6)), dtype=ct.int32)  # ERR
    elif which == 1:
        v = ct.astile(((1, 2), (3, t)), dtype=ct.int32)  # ERR
    elif which == 2:
        v = ct.astile(((1, 2), (3,), (4, 5), (6, 7)), dtype=ct.int32)  # ERR
    else:
        v = ct.astile(t, dtype=ct.int32)  # ERR


@pytest.mark.parametrize("which, message", [
    (0, "Tuple length 3 at value is not a power of 2"),
    (1, "Expected scalar elements at value[1][1]; got a tile of shape (2,)"),
    (2, "Tuple has non-uniform inner shapes at value"),
    (3, "Expected a scalar or (possibly nested) tuple of scalars; got value of type Tile[int32,(2)]"),
])
def test_astile_errors(which: int, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), astile_errors, (np.zeros(4, np.int32), which))
    lines, first = inspect.getsourcelines(astile_errors.fn)
    assert ei.value.loc.line == [first + i for i, text in enumerate(lines) if "# ERR" in text][which]
