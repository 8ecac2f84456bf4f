"""Rejected reductions and scans in cuTile's wording: combine functions that loop, branch, touch
memory or nest reductions; restricted dtypes; repeated or missing axes. Each error points at the
line marked `# ERR`."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tilecraft as ct


def marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if "# ERR" in text)


def _looping(a, b):
    acc = a
    while acc < b:  # ERR
        acc = acc * 2
    return acc


@ct.kernel
def loop_in_scan(x):
    ct.store(x, (0,), ct.scan(ct.load(x, (0,), (8,)), 0, _looping, 0))


def _branchy(a, b):
    return a if a > b else b  # ERR


@ct.kernel
def ifexp_in_reduce(x):
    ct.scatter(x, 0, ct.reduce(ct.load(x, (0,), (8,)), 0, _branchy, 0))


@ct.kernel
def gather_in_reduce(x):
    def peek(a, b):
        return a + ct.gather(x, 0)  # ERR
    ct.scatter(x, 0, ct.reduce(ct.load(x, (0,), (8,)), 0, peek, 0))


@ct.kernel
def nested_scan(x):
    def inner(a, b):
        return ct.sum(ct.full((2,), a, ct.int32)) + b  # ERR
    ct.store(x, (0,), ct.scan(ct.load(x, (0,), (8,)), 0, inner, 0))


@ct.kernel
def restricted_cumsum(x):
    t = ct.load(x, (0,), (8,)).astype(ct.float8_e5m2)
    ct.cumsum(t)  # ERR


@ct.kernel
def restricted_max(x):
    t = ct.load(x, (0,), (8,)).astype(ct.float8_e4m3fn)
    ct.max(t)  # ERR


@ct.kernel
def repeated_axes(x):
    t = ct.reshape(ct.load(x, (0,), (8,)), (2, 4))
    ct.sum(t, axis=(0, -2))  # ERR


@ct.kernel
def scan_without_axis(x):
    ct.scan(ct.load(x, (0,), (8,)), None, lambda a, b: a + b, 0)  # ERR


@pytest.mark.parametrize("kernel, where, cls, message", [
    (loop_in_scan, _looping, ct.TileSyntaxError, "Loops inside scan body are not supported"),
    (ifexp_in_reduce, _branchy, ct.TileSyntaxError, "Branching inside reduction body is not supported"),
    (gather_in_reduce, None, ct.TileSyntaxError, "Operations with memory effects are not supported inside "
                                                 "reduction body"),
    (nested_scan, None, ct.TileSyntaxError, "Nested scan/reduction is not supported"),
    (restricted_cumsum, None, ct.TileTypeError, "Non-arithmetic dtype float8_e5m2 is unsupported for scan"),
    (restricted_max, None, ct.TileTypeError, "Non-arithmetic dtype float8_e4m3fn is unsupported for reduction"),
    (repeated_axes, None, ct.TileTypeError, "Repeated reduction axis 0"),
    (scan_without_axis, None, ct.TileTypeError, 'Invalid argument "axis" of scan(): Expected an integer constant, '
                                                "but given value has type None"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_combine_errors(kernel, where, cls, message: str) -> None:
    with pytest.raises(cls, match=re.escape(message)) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(8, np.int32),))
    assert ei.value.loc.line == marked_line(where or kernel.fn)
