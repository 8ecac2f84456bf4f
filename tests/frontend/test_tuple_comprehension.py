"""Tuple comprehensions in tile code (`tuple(e for x in ct.static_iter(...) if c ...)`): unrolled
at compile time with Python's scoping, checked against the same comprehension run by Python on
NumPy arrays (or against literal expectations for the scoping rules); errors by class, cuTile's
wording and location."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error

N = 8  # elements per tile


def _blocks(x: np.ndarray) -> list[np.ndarray]:
    return [x[k * N:(k + 1) * N] for k in range(len(x) // N)]


def _run(dev, kernel, x: np.ndarray, out_blocks: int, dtype=np.int32) -> list[np.ndarray]:
    """Launch kernel(x, out) with a poisoned out of `out_blocks` tiles; its tiles."""
    out = dev.poison((out_blocks * N,), dtype)
    dev.launch((1,), kernel, (dev.put(x), out))
    return _blocks(dev.get(out))


def _check(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ---- values -----------------------------------------------------------------------------------------------
@ct.kernel
def loads_reversed(x, out):
    tiles = tuple(ct.load(x, (k,), (N,)) for k in ct.static_iter(range(4)))
    backwards = tuple(tiles[3 - k] * (k + 1) for k in ct.static_iter(range(4)))
    for k, t in ct.static_iter(enumerate(backwards)):
        ct.store(out, (k,), t)


def test_tiles_from_a_static_range(dev) -> None:
    x = np.arange(4 * N, dtype=np.int32) - 11
    b = _blocks(x)
    _check(_run(dev, loads_reversed, x, 4), [b[3 - k] * (k + 1) for k in range(4)])


@ct.kernel
def unpacking_targets(x, out):
    a, b, c = (ct.load(x, (k,), (N,)) for k in ct.static_iter(range(3)))
    pairs = tuple(p * 3 - q for p, q in ct.static_iter(((a, b), (c, a))))
    nested = tuple(p - q * r for (p, q), r in ct.static_iter((((b, c), a), ((a, a), c))))
    for k, t in ct.static_iter(enumerate(pairs + nested)):
        ct.store(out, (k,), t)


def test_tuple_unpacking_targets(dev) -> None:
    x = np.arange(3 * N, dtype=np.int32) * 7 - 50
    a, b, c = _blocks(x)
    _check(_run(dev, unpacking_targets, x, 4), [a * 3 - b, c * 3 - a, b - c * a, a - a * c])


@ct.kernel
def two_clauses_with_ifs(x, out):
    tiles = tuple(ct.load(x, (k,), (N,)) for k in ct.static_iter(range(3)))
    made = tuple(t * s + k
                 for k, t in ct.static_iter(enumerate(tiles)) if k != 1
                 for s in ct.static_iter((2, -1, 5)) if s > 0 if k + s != 7)
    for k, t in ct.static_iter(enumerate(made)):
        ct.store(out, (k,), t)


def test_several_clauses_and_ifs_in_python_order(dev) -> None:
    x = np.arange(3 * N, dtype=np.int32) - 9
    tiles = _blocks(x)
    want = [t * s + k for k, t in enumerate(tiles) if k != 1 for s in (2, -1, 5) if s > 0 if k + s != 7]
    assert len(want) == 3
    _check(_run(dev, two_clauses_with_ifs, x, 3), want)


@ct.kernel
def ragged(x, out):
    """Row j holds 3 * i + j for i < j: ((), (1,), (2, 5), (3, 6, 9)), flattened into out."""
    rows = tuple(tuple(3 * i + j for i in ct.static_iter(range(j))) for j in ct.static_iter(range(4)))
    flat = tuple(v for row in ct.static_iter(rows) for v in ct.static_iter(row))
    for k, v in ct.static_iter(enumerate(flat)):
        ct.scatter(out, k, v + ct.gather(x, 0))


def test_nested_comprehension_with_a_range_of_the_outer_variable(dev) -> None:
    x = np.full(N, 100, np.int32)
    out = dev.poison((6,), np.int32)
    dev.launch((1,), ragged, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), [101, 102, 105, 103, 106, 109])


@ct.kernel
def in_a_runtime_loop(x, out):
    for r in range(2):
        grid = tuple(tuple(r * 10 + i * 2 + j for j in ct.static_iter(range(2))) for i in ct.static_iter(range(2)))
        for i, row in ct.static_iter(enumerate(grid)):
            for j, v in ct.static_iter(enumerate(row)):
                ct.scatter(out, r * 4 + i * 2 + j, v + ct.gather(x, r))


def test_runtime_values_as_elements(dev) -> None:
    x = np.array([1000, 2000], np.int32)
    out = dev.poison((8,), np.int32)
    dev.launch((1,), in_a_runtime_loop, (dev.put(x), out))
    want = [x[r] + r * 10 + i * 2 + j for r in range(2) for i in range(2) for j in range(2)]
    np.testing.assert_array_equal(dev.get(out), want)


@ct.kernel
def conditional_elements(x, out):
    signs = tuple(k if k % 3 else -k for k in ct.static_iter(range(1, 7)))
    for k, v in ct.static_iter(enumerate(signs)):
        ct.scatter(out, k, v)


def test_conditional_expression_in_the_element(dev) -> None:
    out = dev.poison((6,), np.int32)
    dev.launch((1,), conditional_elements, (dev.put(np.zeros(1, np.int32)), out))
    np.testing.assert_array_equal(dev.get(out), [k if k % 3 else -k for k in range(1, 7)])


@ct.kernel
def plain_iterables(x, out):
    """Besides ct.static_iter: a tuple and a range compiled as tile code (a tilecraft extension)."""
    t = ct.load(x, (0,), (N,))
    made = tuple(t * w for w in (3, -2)) + tuple(t + k for k in range(2))
    for k, v in ct.static_iter(enumerate(made)):
        ct.store(out, (k,), v)


def test_plain_tuple_and_range_iterables(dev) -> None:
    x = np.arange(N, dtype=np.int32) - 3
    _check(_run(dev, plain_iterables, x, 4), [x * 3, x * -2, x, x + 1])


# ---- scoping ----------------------------------------------------------------------------------------------
SHADOWED = 41


@ct.kernel
def scoping(x, out):
    k = 7
    _ = tuple(k * 2 for k in ct.static_iter(range(3)))  # k does not leak
    _ = tuple(SHADOWED for SHADOWED in ct.static_iter(range(3)))  # nor does a global's name
    firsts = tuple(k for k in ct.static_iter(range(k)))  # the first iterable sees the outer k (7)
    repeated = tuple(k for k in ct.static_iter(range(2)) for k in ct.static_iter(range(3)))
    ct.scatter(out, 0, k)
    ct.scatter(out, 1, SHADOWED)
    ct.scatter(out, 2, len(firsts))
    for i, v in ct.static_iter(enumerate(repeated)):
        ct.scatter(out, 3 + i, v)


def test_python_scoping(dev) -> None:
    out = dev.poison((9,), np.int32)
    dev.launch((1,), scoping, (dev.put(np.zeros(1, np.int32)), out))
    np.testing.assert_array_equal(dev.get(out), [7, 41, 7, 0, 1, 2, 0, 1, 2])


@ct.kernel
def scoping_in_a_loop(x, out):
    j = 5
    for i in range(3):
        _ = tuple(j for j, _ in ct.static_iter(enumerate((1, 2))))
        ct.scatter(out, i, j + i)


def test_comprehension_variable_does_not_leak_in_a_loop(dev) -> None:
    out = dev.poison((3,), np.int32)
    dev.launch((1,), scoping_in_a_loop, (dev.put(np.zeros(1, np.int32)), out))
    np.testing.assert_array_equal(dev.get(out), [5, 6, 7])


@ct.kernel
def lambdas(x, out):
    t = ct.load(x, (0,), (N,))
    called = tuple((lambda v: v * s)(t) for s in ct.static_iter((2, 3)))       # called at once: each s
    stored = tuple(lambda: s for s in ct.static_iter((4, 5, 6)))             # called later: the last s
    s = 100  # noqa: F841  (the comprehension's s is its own)
    deep = tuple(tuple(lambda: q * 10 for q in ct.static_iter(range(3))) for _ in ct.static_iter(range(2)))
    ct.store(out, (0,), called[0])
    ct.store(out, (1,), called[1])
    for k, f in ct.static_iter(enumerate(stored + deep[1])):
        ct.store(out, (2 + k,), ct.full((N,), f(), ct.int32))


def test_lambdas_close_over_the_comprehension_variables(dev) -> None:
    """As in Python: a lambda called inside sees the current value; one stored and called later
    sees the variable's last value, not an outer variable of the same name."""
    x = np.arange(N, dtype=np.int32) + 1
    want_later = [6, 6, 6] + [20, 20, 20]
    assert [f() for f in tuple(lambda: s for s in (4, 5, 6))] == [6, 6, 6]  # Python agrees
    got = _run(dev, lambdas, x, 8)
    _check(got, [x * 2, x * 3] + [np.full(N, v, np.int32) for v in want_later])


# ---- errors -----------------------------------------------------------------------------------------------
@ct.kernel
def dynamic_if(x, out):
    tiles = tuple(ct.load(x, (k,), (N,)) for k in ct.static_iter(range(2)))
    kept = tuple(t for t in ct.static_iter(tiles) if ct.gather(x, 0) > 0)  # ERR
    ct.store(out, (0,), kept[0])


@ct.kernel
def later_variable_in_iterable(x, out):
    n = 3
    _ = tuple(i for i in ct.static_iter(range(2)) for j in ct.static_iter(range(n)) for n in ct.static_iter((1,)))  # ERR


@ct.kernel
def own_variable_in_second_iterable(x, out):
    m = 4
    _ = tuple(i for i in ct.static_iter(range(2)) for m in ct.static_iter(range(m)))  # ERR


@ct.kernel
def later_variable_in_if(x, out):
    _ = tuple(i for i in ct.static_iter(range(2)) if w > 0 for w in ct.static_iter((1,)))  # ERR  # noqa: F821


@ct.kernel
def walrus_in_if(x, out):
    _ = tuple(v for i in ct.static_iter(range(3)) if (v := i + 1) > 1)  # ERR  # noqa: F841


@ct.kernel
def subscript_target(x, out):
    box = (0, 0)
    _ = tuple(1 for box[0] in ct.static_iter(range(3)))  # ERR


@ct.kernel
def tile_iterable(x, out):
    t = ct.load(x, (0,), (N,))
    _ = tuple(v for v in t)  # ERR


@ct.kernel
def too_long(x, out):
    _ = tuple(v for v in range(5000))  # ERR


@ct.kernel
def async_comprehension(x, out):
    _ = tuple(v async for v in ct.static_iter(range(2)))  # ERR


@pytest.mark.parametrize("kernel, cls, message, col", [
    (dynamic_if, ct.TileTypeError, "Tuple comprehension if-conditions must be statically known; if the condition "
                                   "can be evaluated at compile time, wrap it with ct.static_eval()", "ct.gather"),
    (later_variable_in_iterable, ct.TileSyntaxError, "Undefined variable n used", "n)"),
    (own_variable_in_second_iterable, ct.TileSyntaxError, "Undefined variable m used", "m)"),
    (later_variable_in_if, ct.TileSyntaxError, "Undefined variable w used", "w > 0"),
    (walrus_in_if, ct.TileSyntaxError, "Unsupported syntax", "v := "),
    (subscript_target, ct.TileSyntaxError, "Tuple comprehension target must be a name or tuple unpacking",
     "box[0]"),
    (tile_iterable, ct.TileSyntaxError, "All iterables in a tuple comprehension must be wrapped in "
                                        "ct.static_iter(), e.g. tuple(... for x in ct.static_iter(...))", "t)"),
    (too_long, ct.TileTypeError, "A tuple comprehension iterates over at most 1000 items", "range("),
    (async_comprehension, ct.TileSyntaxError, "async in tuple comprehension is not supported", "(v async"),
], ids=lambda v: getattr(v, "__name__", None) if hasattr(v, "fn") else None)
def test_errors(kernel, cls, message: str, col: str) -> None:
    with pytest.raises(cls) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(2 * N, np.int32), np.zeros(N, np.int32)))
    assert message in ei.value.message, ei.value.message
    check_error(ei, kernel.fn, "# ERR", col_text=col)
