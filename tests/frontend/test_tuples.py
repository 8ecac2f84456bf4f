"""Tuples in tile code: comparisons item by item with runtime scalars, `in`, indexing, `*` and
immutability, checked against Python on every block and with cuTile's error wording."""

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
def compare_kernel(out):
    i = ct.bid(0)
    j = ct.bid(1)
    pair = (i, j)
    flags = (
        pair == (1, 2),
        pair != (1, 2),
        ((i, 3), j) == ((2, 3), 0),
        (i, j, 5) == (i, j),            # lengths differ: a constant False
        i in (0, 3, j),
        pair not in ((1, 1), (2, 0)),
        (j, i) in ((0, 2), (i, i)),
        7 in (1, i, 7, ct.ones((2,), ct.int32)),   # matched before the tile: no error
    )
    for k, f in ct.static_iter(enumerate(flags)):
        ct.scatter(out, (i, j, k), ct.where(f, 1, 0).astype(ct.int8))


def test_runtime_tuple_comparisons(dev) -> None:
    out = dev.poison((4, 3, 8), np.int8)
    dev.launch((4, 3), compare_kernel, (out,))
    want = np.zeros((4, 3, 8), np.int8)
    for i in range(4):
        for j in range(3):
            want[i, j] = [(i, j) == (1, 2), (i, j) != (1, 2), ((i, 3), j) == ((2, 3), 0), False,
                          i in (0, 3, j), (i, j) not in ((1, 1), (2, 0)), (j, i) in ((0, 2), (i, i)), True]
    np.testing.assert_array_equal(dev.get(out), want)


def _spread(out, *values):
    for k, v in ct.static_iter(enumerate(values)):
        ct.scatter(out, k, v)


@ct.kernel
def starred_kernel(out):
    head = (ct.bid(0) + 40, 41)
    _spread(out, *head, *(), *range(42, 44), head[-1] + 3)


def test_starred_arguments(dev) -> None:
    out = dev.poison((5,), np.int32)
    dev.launch((1,), starred_kernel, (out,))
    assert dev.get(out).tolist() == [40, 41, 42, 43, 44]


@ct.kernel
def order_compare(out):
    ok = (ct.bid(0), 1) <= (2, 2)  # ERR


@ct.kernel
def tile_items(out):
    t = ct.arange(4, dtype=ct.int32)
    same = (1, t) == (1, t)  # ERR


@ct.kernel
def array_items(out):
    same = (out, 1) != (out, 2)  # ERR


@ct.kernel
def in_with_tile(out):
    found = 3 in (ct.bid(0), ct.arange(8, dtype=ct.int32))  # ERR


@ct.kernel
def index_with_tile(out):
    v = (1, 2)[ct.arange(2, dtype=ct.int32)]  # ERR


@ct.kernel
def index_runtime(out):
    v = (1, 2)[ct.bid(0)]  # ERR


@ct.kernel
def index_out_of_range(out):
    v = (1, 2)[-3]  # ERR


@ct.kernel
def index_with_string(out):
    pair, key = (1, 2), "0"
    v = pair[key]  # ERR


@ct.kernel
def assign_item(out):
    t = (1, 2)
    t[1] = 5  # ERR


@ct.kernel
def star_tile(out):
    _spread(out, *ct.arange(4, dtype=ct.int32))  # ERR


@pytest.mark.parametrize("kernel, message", [
    (order_compare, "Operator 'le' is not supported for tuples"),
    (tile_items, "Tuple comparison is not supported for non-scalar elements"),
    (array_items, "Tuple comparison is not supported for elements of type Array[int32,(?):(?)]"),
    (in_with_tile, "'in' requires scalar operands, but got shape (8,)"),
    (index_with_tile, "Tuple indices must be integers or slices, not Tile[int32,(2)]"),
    (index_runtime, "Tuple indices must be constant"),
    (index_out_of_range, "Index -3 is out of range for a tuple of length 2"),
    (index_with_string, "Tuple indices must be integers or slices, not str"),
    (assign_item, "Tuples are immutable: item assignment is not supported."),
    (star_tile, "Expected a tuple after *, got Tile[int32,(4)]"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_tuple_errors(kernel, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(8, np.int32),))
    assert ei.value.loc.line == marked_line(kernel.fn)
