"""Tuple parameters annotated item by item (`tuple[ct.Constant[int], int]`, `tuple[X, ...]`,
nested): constant items are compiled in, ScalarInt64 items are 64-bit, lengths are checked, and
tuple subclasses or arrays inside Constant tuples are refused with cuTile's wording."""

from __future__ import annotations

import re
from collections import namedtuple

import numpy as np
import pytest

import tilecraft as ct


@ct.kernel
def sized_copy(src, out, cfg: tuple[int, tuple[ct.Constant[int], int]]):
    t = ct.load(src, (0,), (cfg[1][0],))            # a constant item is a tile size
    ct.store(out, (0,), t * cfg[0] + cfg[1][1])


def test_constant_items_compile_in(dev) -> None:
    src = np.arange(16, dtype=np.int32) - 5
    for size, mul, add in ((4, 3, -2), (16, -1, 7)):
        out = dev.poison((16,), np.int32)
        dev.launch((1,), sized_copy, (dev.put(src), out, (mul, (size, add))))
        got = dev.get(out)
        np.testing.assert_array_equal(got[:size], src[:size] * mul + add)
        assert (got[size:] == 0x5A).all()   # only `size` elements were written


@ct.kernel
def wide_offsets(out, offs: tuple[ct.ScalarInt64, int, ct.ScalarInt64]):
    ct.scatter(out, 0, offs[0] - offs[2])
    ct.scatter(out, 1, offs[1].astype(ct.int64) * 2)


def test_scalar_int64_items(dev) -> None:
    out = dev.poison((2,), np.int64)
    dev.launch((1,), wide_offsets, (out, (3 * 2**40 + 1, -7, 2**40)))
    assert dev.get(out).tolist() == [2 * 2**40 + 1, -14]


@ct.kernel
def sum_sizes(out, sizes: tuple[ct.Constant[int], ...]):
    total = ct.static_eval(sum(sizes))
    ct.static_assert(isinstance(total, int))
    ct.scatter(out, 0, total)


def test_variadic_constant_items(dev) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), sum_sizes, (out, (2, 9, 30)))
    assert dev.get(out).tolist() == [41]


@ct.kernel
def pair_kernel(out, pair: tuple[int, ct.Constant[int]]):
    ct.scatter(out, 0, pair[0] + pair[1])


@ct.kernel
def nested_pair_kernel(out, cfg: tuple[int, tuple[int, int]]):
    ct.scatter(out, 0, cfg[0] + cfg[1][0])


@ct.kernel
def any_pair(out, p):
    ct.scatter(out, 0, p[0])


@ct.kernel
def constant_tuple(out, c: ct.Constant[tuple]):
    ct.scatter(out, 0, 1)


@ct.kernel
def constant_wide(out, c: ct.Constant[tuple[int, ct.ScalarInt64]]):
    ct.scatter(out, 0, c[0])


Span = namedtuple("Span", "lo hi")
OUT = np.zeros(2, np.int32)


@pytest.mark.parametrize("kernel, args, message", [
    (pair_kernel, (OUT, (1, 2, 3)), "Received a tuple of length 3 for a parameter annotated as a tuple of length 2"),
    (pair_kernel, (OUT, (1,)), "Received a tuple of length 1 for a parameter annotated as a tuple of length 2"),
    (nested_pair_kernel, (OUT, (1, (2,))),
     "Received a tuple of length 1 for a parameter annotated as a tuple of length 2"),
    (any_pair, (OUT, Span(1, 2)), "Invalid kernel argument #1: 'Span' is a subclass of 'tuple'. Only plain tuples "
                                  "are accepted."),
    (any_pair, (OUT, (0, (4, Span(1, 2)))), "Invalid item #1.1 of kernel argument #1: 'Span' is a subclass of "
                                            "'tuple'. Only plain tuples are accepted."),
    (constant_tuple, (OUT, (1, OUT)), "Invalid item #1 of kernel argument #1: Could not interpret object of type "
                                      "'ndarray' as a constant."),
    (constant_wide, (OUT, (1, 2)), "Constant annotation cannot be combined with ScalarAnnotation/ScalarInt64"),
], ids=["too-long", "too-short", "nested-too-short", "namedtuple", "nested-namedtuple", "array-in-constant",
        "constant-scalar-int64"])
def test_tuple_argument_errors(kernel, args, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        ct.launch(None, (1,), kernel, args)
