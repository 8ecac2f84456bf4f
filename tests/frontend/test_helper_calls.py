"""Helper functions as cuTile compiles them: deep recursion ending on constants, `return` inside
`while` loops (also nested ones), decorated helpers compiled from their own code, and compile
errors of deep call chains reported without thousands of frames."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tilecraft as ct


def count_down(t, n):
    if n == 0:
        return t
    return count_down(t + n % 3, n - 1)


@ct.kernel
def deep_kernel(x, out, N: ct.Constant[int]):
    ct.scatter(out, 0, count_down(ct.gather(x, 0), N))


@pytest.mark.parametrize("n", [70, 300])
def test_deep_recursion(dev, n: int) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), deep_kernel, (dev.put(np.array([5], np.int32)), out, n))
    assert dev.get(out).tolist() == [5 + sum(k % 3 for k in range(1, n + 1))]


def test_runaway_recursion_is_cut_short() -> None:
    with pytest.raises(ct.TileRecursionError, match="Maximum inlining depth 1000") as ei:
        ct.launch(None, (1,), deep_kernel, (np.zeros(1, np.int32), np.zeros(1, np.int32), 5000))
    assert "more calls" in str(ei.value) and str(ei.value).count("File ") <= 30


def first_square_over(t, limit):
    """The first k*k above `limit`, searched with loops that return from inside."""
    k = 0
    while True:
        j = 0
        while j < 4:
            if (k + j) * (k + j) > limit:
                return (k + j) * (k + j) + t
            j += 1
        k += 4


def halve_until(t, n):
    while n > 1:
        if n % 7 == 0:
            return t * 1000 + n
        n = n // 2
    return t + n


@ct.kernel
def returns_in_loops(x, out, lim, n):
    v = ct.gather(x, 0)
    ct.scatter(out, 0, first_square_over(v, lim))
    ct.scatter(out, 1, halve_until(v, n))


@pytest.mark.parametrize("lim, n", [(0, 1), (10, 56), (99, 100), (1000, 97)])
def test_return_inside_while_loops(dev, lim: int, n: int) -> None:
    out = dev.poison((2,), np.int32)
    dev.launch((1,), returns_in_loops, (dev.put(np.array([3], np.int32)), out, lim, n))
    k = 0
    while k * k <= lim:
        k += 1
    m = n
    while m > 1 and m % 7:
        m //= 2
    assert dev.get(out).tolist() == [k * k + 3, 3 * 1000 + m if m > 1 else 3 + m]


def shift_input(by):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(t):
            return fn(t + by)
        return wrapper
    return decorate


@shift_input(7)
def tripled(t):
    return t * 3


@ct.kernel
def decorated_kernel(out):
    ct.scatter(out, 0, tripled(ct.bid(0) + 1))


def test_decorated_helper_runs_its_wrapper(dev) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), decorated_kernel, (out,))
    assert dev.get(out).tolist() == [(1 + 7) * 3]
