"""Where control flow joins, values follow cuTile's rules: both paths must give one type (a
Python number counts as its default dtype), a conditional expression is a real branch, a
`while True:` loop's results come from its breaks (constants survive, variables first assigned
at every break are defined), closures of one definition merge, and a nested loop's break or
continue does not leak into the loop around it. Results are checked against plain Python."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
TORCH_F16 = torch.float16
NP_I8 = np.int8


def marked_line(fn, marker: str = "# ERR") -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if marker in text)


@ct.kernel
def ifexp_kernel(counter, out):
    b = ct.bid(0)
    # only the taken branch runs: the atomic add happens for odd blocks only
    v = ct.atomic_add(counter, 0, 1) * 0 + 100 if b % 2 == 1 else b * 2
    ct.scatter(out, b, v)


def test_conditional_expression_runs_one_branch(dev) -> None:
    counter = dev.put(np.zeros(1, np.int32))
    out = dev.poison((7,), np.int32)
    dev.launch((7,), ifexp_kernel, (counter, out))
    assert dev.get(counter).tolist() == [3]
    assert dev.get(out).tolist() == [100 if b % 2 else 2 * b for b in range(7)]


@ct.kernel
def nested_exits(out, n, m):
    total = 0
    for i in range(n):
        j = 0
        while j < m:
            j += 1
            if j == 2:
                continue
            if j * i > 6:
                break
            total += j
        for k in range(m):
            if k == 1:
                break
        if i == 4:
            continue
        total += 100
    ct.scatter(out, 0, total)


def _nested_exits_ref(n: int, m: int) -> int:
    total = 0
    for i in range(n):
        j = 0
        while j < m:
            j += 1
            if j == 2:
                continue
            if j * i > 6:
                break
            total += j
        for k in range(m):
            if k == 1:
                break
        if i == 4:
            continue
        total += 100
    return total


@pytest.mark.parametrize("n, m", [(0, 3), (3, 5), (7, 4), (9, 9)])
def test_inner_loop_exits_stay_inner(dev, n: int, m: int) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), nested_exits, (out, n, m))
    assert dev.get(out).tolist() == [_nested_exits_ref(n, m)]


@ct.kernel
def break_results(x, out):
    size = 0
    while True:
        if ct.bid(0) >= 0:
            size = 4
            first = ct.load(x, (0,), (4,))
            pair = (first, first * 2)
            break
        size = 4
        first = ct.load(x, (1,), (4,))
        pair = (first, first + 1)
        break
    t = ct.full((size,), 1, ct.int32)          # `size` is the constant 4 after the loop
    ct.store(out, (0,), pair[1] + t + first)


def test_while_true_results_come_from_breaks(dev) -> None:
    x = np.arange(8, dtype=np.int32) * 3
    out = dev.poison((4,), np.int32)
    dev.launch((1,), break_results, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x[:4] * 3 + 1)


@ct.kernel
def break_types_differ(out):
    i = 0
    while True:
        i += 1
        if i > 3:
            r = 1.5
            break
        if i == ct.bid(0):
            r = 7
            break
    ct.scatter(out, 0, r)  # ERR


@ct.kernel
def branch_types_differ(out):
    if ct.bid(0) == 0:
        r = 1
    else:
        r = 0.5
    ct.scatter(out, 0, r)  # ERR


@ct.kernel
def ifexp_types_differ(out):
    t = ct.full((4,), 1.0, ct.float32)
    r = t if ct.bid(0) == 0 else ct.bid(0) > 1  # ERR


@ct.kernel
def enum_differs(out):
    if ct.bid(0) == 0:
        mode = ct.PaddingMode.ZERO
    else:
        mode = ct.PaddingMode.NAN
    ct.store(out, (0,), ct.load(out, (0,), (4,), padding_mode=mode))  # ERR


@ct.kernel
def views_differ(out):
    if ct.bid(0) == 0:
        v = out.tiled_view(4)
    else:
        v = out.tiled_view(2)
    v.store(0, ct.zeros((4,), ct.float32))  # ERR


@pytest.mark.parametrize("kernel, message", [
    (break_types_differ, "Type of `r` depends on path taken: Tile[int32,()] (line {2}) vs. Tile[float32,()] "
                         "(line {1})"),
    (branch_types_differ, "Type of `r` depends on path taken: Tile[float32,()] (line {2}) vs. Tile[int32,()] "
                          "(line {1})"),
    (ifexp_types_differ, "Type of the conditional expression depends on path taken: Tile[bool,()] (line {0}) "
                         "vs. Tile[float32,(4)] (line {0})"),
    (enum_differs, "Type of `mode` depends on path taken: <enum constant PaddingMode.NAN> (line {2}) vs. "
                   "<enum constant PaddingMode.ZERO> (line {1})"),
    (views_differ, "Type of `v` depends on path taken: TiledView[float32,(2)] (line {2}) vs. TiledView[float32,(4)] "
                   "(line {1})"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_path_dependent_types(kernel, message: str) -> None:
    lines, first = inspect.getsourcelines(kernel.fn)
    assigned = [first + i for i, text in enumerate(lines) if re.match(r"\s+(r|mode|v) = ", text)]
    with pytest.raises(ct.TileTypeError, match=re.escape(message.format(marked_line(kernel.fn), *assigned))) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(4, np.float32),))
    assert ei.value.loc.line == marked_line(kernel.fn)


def _make_offset(k):
    def add(t, extra=k * 10):
        return t + k + extra
    return add


@ct.kernel
def closure_join(x, out):
    b = ct.bid(0)
    if b == 0:
        f = _make_offset(1)
    else:
        f = _make_offset(b + 2)
    ct.scatter(out, b, f(ct.gather(x, b)))


def test_closures_of_one_definition_merge(dev) -> None:
    x = np.array([5, 6, 7], np.int32)
    out = dev.poison((3,), np.int32)
    dev.launch((3,), closure_join, (dev.put(x), out))
    assert dev.get(out).tolist() == [5 + 1 + 10, 6 + 3 + 30, 7 + 4 + 40]


@ct.kernel
def constant_fills(out):
    a = ct.full((4,), 2.75, ct.int16)            # a constant converts as a cast would
    b = ct.full((4,), ct.float32("-inf"), ct.float32)
    ct.store(out, (0,), ct.where(b < 0, a.astype(ct.float32), 0.0))


def test_full_converts_constants(dev) -> None:
    out = dev.poison((4,), np.float32)
    dev.launch((1,), constant_fills, (out,))
    assert dev.get(out).tolist() == [2.0] * 4


@ct.kernel
def foreign_dtype_constants(out):
    v = TORCH_F16(2.5) + NP_I8(3)       # dtype objects of torch / NumPy as constructors
    ct.store(out, (0,), ct.full((4,), v, ct.float32))


def test_foreign_dtypes_as_constructors(dev) -> None:
    out = dev.poison((4,), np.float32)
    dev.launch((1,), foreign_dtype_constants, (out,))
    assert dev.get(out).tolist() == [5.5] * 4


@ct.kernel
def view_switched_in_loop(x, y, z, T: ct.Constant[int]):
    src = x.tiled_view(T)
    dst = z.tiled_view(T)
    for i in range(dst.num_tiles(0)):
        dst.store(i, src.load(i % src.num_tiles(0)))
        src = y.tiled_view(T)  # from the second trip on: y's tiles


@ct.kernel
def view_chosen_at_run_time(x, y, z, T: ct.Constant[int]):
    b = ct.bid(0)
    src = x.tiled_view(T) if b % 2 == 0 else y.tiled_view(T)
    z.tiled_view(T).store(b, src.load(b))


def test_tiled_views_through_control_flow(dev) -> None:
    """A tiled view is carried around a loop and joined after a runtime `if` like the array it
    views: the view of `y` assigned inside the loop is the one later trips load from."""
    x = np.arange(8, dtype=np.float32)
    y = np.arange(100, 108, dtype=np.float32)
    z = dev.poison((24,), np.float32)
    dev.launch((1,), view_switched_in_loop, (dev.put(x), dev.put(y), z, 8))
    np.testing.assert_array_equal(dev.get(z), np.concatenate([x, y, y]))
    z = dev.poison((8,), np.float32)
    dev.launch((4,), view_chosen_at_run_time, (dev.put(x), dev.put(y), z, 2))
    np.testing.assert_array_equal(dev.get(z), [0, 1, 102, 103, 4, 5, 106, 107])
