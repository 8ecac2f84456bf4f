"""A variable may hold one array or another after an `if` or around a loop (cuTile allows it):
loads, stores, shapes and methods then act on the array chosen at run time. Checked against
NumPy on every block; unsupported cases fail with a located error."""

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
def pick_by_block(a, b, c, out):
    i = ct.bid(0)
    if i % 3 == 0:
        src = a
    elif i % 3 == 1:
        src = b
    else:
        src = c
    t = ct.load(src, (i,), (4,))
    n = src.shape[0]                         # a shape read through the choice
    ct.store(out, (i,), t * 10 + n)


def test_choice_after_if_elif(dev) -> None:
    a, b, c = (np.arange(28, dtype=np.int32) + k * 100 for k in range(3))
    out = dev.poison((28,), np.int32)
    dev.launch((7,), pick_by_block, (dev.put(a), dev.put(b), dev.put(c), out))
    src = [a, b, c]
    want = np.concatenate([src[i % 3][4 * i:4 * i + 4] * 10 + 28 for i in range(7)])
    np.testing.assert_array_equal(dev.get(out), want)


@ct.kernel
def ping_pong(x, y, steps):
    src, dst = x, y
    for s in range(steps):                   # the pair swaps every step
        ct.store(dst, (0,), ct.load(src, (0,), (8,)) + 1)
        src, dst = dst, src
    last = src
    k = 0
    while k < 2:
        last = x if k == 0 else last         # a choice carried by a while loop
        k += 1
    ct.store(last, (1,), ct.full((2,), -1, ct.int32))


@pytest.mark.parametrize("steps", [0, 1, 4, 5])
def test_choice_around_loops(dev, steps: int) -> None:
    x = np.arange(8, dtype=np.int32)
    y = np.full(8, 50, np.int32)
    dx, dy = dev.put(x), dev.put(y)
    dev.launch((1,), ping_pong, (dx, dy, steps))
    bufs = [x.copy(), y.copy()]
    src, dst = 0, 1
    for _ in range(steps):
        bufs[dst] = bufs[src] + 1
        src, dst = dst, src
    bufs[0][2:4] = -1  # `last` is x: the while loop chose it
    np.testing.assert_array_equal(dev.get(dx), bufs[0])
    np.testing.assert_array_equal(dev.get(dy), bufs[1])


@ct.kernel
def mixed_dtypes(a, b):
    if ct.bid(0) == 0:
        s = a
    else:
        s = b
    ct.store(s, (0,), ct.zeros((4,), ct.float32))  # ERR


@ct.kernel
def sliced_choice(a, b):
    s = a if ct.bid(0) == 0 else b
    ct.store(s.slice(0, 2, 6), (0,), ct.zeros((4,), ct.float32))  # ERR


@ct.kernel
def made_in_loop(a, n):
    v = a
    for i in range(n):
        v = a.slice(0, i, i + 4)
    ct.store(v, (0,), ct.zeros((4,), ct.float32))  # ERR


def test_unsupported_choices() -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape("Type of `s` depends on path taken")) as ei:
        ct.launch(None, (1,), mixed_dtypes, (np.zeros(8, np.float32), np.zeros(8, np.float64)))
    assert ei.value.loc.line == marked_line(mixed_dtypes.fn)
    with pytest.raises(ct.TileTypeError, match=re.escape("holds an array made inside the loop")):
        ct.launch(None, (1,), made_in_loop, (np.zeros(8, np.float32), 2))
    with pytest.raises(ct.TileTypeError, match=re.escape("the result may be an array made inside a branch")) as ei:
        ct.launch(None, (1,), sliced_choice, (np.zeros(8, np.float32), np.zeros(8, np.float32)))
    assert ei.value.loc.line == marked_line(sliced_choice.fn)


@ct.kernel
def static_slices(x, out):
    head = x.slice(0, 3, 11)                 # constant bounds: a constant extent (8)
    ct.static_assert(head.shape[0] == 8)
    pair = head.slice(0, 2, 4)
    ct.store(out, (0,), ct.load(head, (0,), (head.shape[0],)) + ct.sum(ct.load(pair, (0,), (pair.shape[0],))))


def test_constant_slice_bounds_give_constant_extents(dev) -> None:
    x = np.arange(16, dtype=np.int32) * 3
    out = dev.poison((8,), np.int32)
    dev.launch((1,), static_slices, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x[3:11] + x[5:7].sum())


@ct.kernel
def slice_bound_types(x, which: ct.Constant[int], s):
    if which == 0:
        v = x.slice(0, 1.0, 4)  # ERR
    else:
        v = x.slice(0, 0, s.astype(ct.uint32))  # ERR


@pytest.mark.parametrize("which, message", [
    (0, 'Invalid argument "start" of slice(): Expected a signed integer scalar, but got Tile[float32,()]'),
    (1, 'Invalid argument "stop" of slice(): Expected a signed integer scalar, but got Tile[uint32,()]'),
])
def test_slice_bound_types(which: int, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), slice_bound_types, (np.zeros(8, np.float32), which, 2))
    lines, first = inspect.getsourcelines(slice_bound_types.fn)
    marked = [first + i for i, text in enumerate(lines) if "# ERR" in text]
    assert ei.value.loc.line == marked[which]
