"""`with` over @contextlib.contextmanager generators, as cuTile defines it: setup before the
`yield`, cleanup after it on every way out of the body (its end, break, continue, return),
innermost first; a `yield` inside a `with` of the generator; closures over the generator's
variables; managers as values (made, stored, entered once, methods of dataclasses); cuTile's
errors. Kernels record events in a log array (log[0] counts them); each test states the log
Python's own `with` gives for the same program."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error


def record(log, value):
    """Append `value` to the log: log[0] is the number of entries, log[1:] the entries."""
    n = ct.gather(log, 0)
    ct.scatter(log, n + 1, value)
    ct.scatter(log, 0, n + 1)


def logged(dev, kernel, *args, size=24):
    log = dev.put(np.zeros(size, np.int32))
    dev.launch((1,), kernel, (log, *args))
    out = dev.get(log)
    assert np.all(out[1 + out[0]:] == 0), out  # nothing written past the last entry
    return out[1:1 + out[0]].tolist()


@contextlib.contextmanager
def scope(log, enter, leave):
    record(log, enter)
    yield enter * 10
    record(log, leave)


@contextlib.contextmanager
def outer_and_inner(log, base):
    """The `yield` sits inside a `with` of the generator: its cleanup runs between ours."""
    record(log, base)
    with scope(log, base + 1, base + 2) as inner:
        record(log, base + 3)
        yield inner + 1
        record(log, base + 4)
    record(log, base + 5)


# ---- order of setup, body and cleanup --------------------------------------------------------------------
@ct.kernel
def nested_kernel(log):
    with scope(log, 1, 2) as a, scope(log, 3, 4) as b:
        record(log, a + b)
        with outer_and_inner(log, 100) as c:
            record(log, c)
    record(log, 5)


def test_nested_managers_and_a_yield_inside_a_with(dev):
    assert logged(dev, nested_kernel) == [1, 3, 40, 100, 101, 103, 1011, 104, 102, 105, 4, 2, 5]


@ct.kernel
def loop_kernel(log, stop_at, skip):
    i = 0
    while i < 6:
        i += 1
        with scope(log, 10 + i, 20 + i):
            with scope(log, 30 + i, 40 + i):
                if i == skip:
                    continue
                record(log, i)
                if i == stop_at:
                    break
            record(log, 50 + i)            # skipped by break and continue
    record(log, 99)


@pytest.mark.parametrize("stop_at, skip", [(2, 1), (3, 3), (7, 2)])
def test_break_and_continue_run_every_cleanup_innermost_first(dev, stop_at, skip):
    want = []
    for i in range(1, 7):
        want += [10 + i, 30 + i]
        if i == skip:
            want += [40 + i, 20 + i]
            continue
        want.append(i)
        want.append(40 + i)
        if i == stop_at:
            want.append(20 + i)
            break
        want += [50 + i, 20 + i]
    assert logged(dev, loop_kernel, stop_at, skip, size=64) == want + [99]


@ct.kernel
def for_kernel(log, n):
    for i in range(n):
        with outer_and_inner(log, 10 * i):
            if i == 2:
                break
            record(log, 7)


def test_break_in_a_range_loop_through_a_generator_with_its_own_with(dev):
    per = [[10 * i, 10 * i + 1, 10 * i + 3] + ([7] if i < 2 else []) + [10 * i + 4, 10 * i + 2, 10 * i + 5]
           for i in range(3)]
    assert logged(dev, for_kernel, 5, size=32) == [e for p in per for e in p]


# ---- return ----------------------------------------------------------------------------------------------
def guarded(log, flag):
    """Returns from inside two managers when flag is set; the cleanups run first."""
    with scope(log, 1, 2) as v:
        with scope(log, 3, 4):
            if flag > 0:
                return v + 5
            record(log, 6)
        record(log, 7)
    record(log, 8)
    return v


@ct.kernel
def return_kernel(log, flag):
    record(log, guarded(log, flag))
    with scope(log, 60, 61):
        if flag > 1:
            return
        record(log, 62)
    record(log, 63)


@pytest.mark.parametrize("flag, want", [
    (0, [1, 3, 6, 4, 7, 2, 8, 10, 60, 62, 61, 63]),
    (1, [1, 3, 4, 2, 15, 60, 62, 61, 63]),
    (2, [1, 3, 4, 2, 15, 60, 61]),
])
def test_return_from_inside_managers_runs_their_cleanups_once(dev, flag, want):
    assert logged(dev, return_kernel, flag) == want


# ---- closures and managers as values -----------------------------------------------------------------------
@contextlib.contextmanager
def counter(log, start):
    count = start

    def show(extra=0):
        record(log, count + extra)
    show()
    yield show
    count = count + 100                    # seen by `show` after the with (frozen at exit)
    show(1)


@ct.kernel
def closure_kernel(log, start):
    with counter(log, start) as show:
        show()
    show()
    late = 1

    def read_late():
        record(log, late)
    late = 2
    read_late()                            # Python closures read the current value


def test_closures_see_the_generator_variables_and_are_frozen_on_exit(dev):
    assert logged(dev, closure_kernel, 5) == [5, 5, 106, 105, 2]


def shown_early(log, flag):
    """Leaves `counter` by a return on one path and at the end of the body on the other: each
    path compiles the cleanup from the generator's state at the yield."""
    with counter(log, 7) as show:
        if flag > 0:
            return show
        record(log, 3)
    return show


@ct.kernel
def return_closure_kernel(log, flag):
    show = shown_early(log, flag)
    show(2)


@pytest.mark.parametrize("flag, want", [(0, [7, 3, 108, 109]), (1, [7, 108, 109])])
def test_a_closure_returned_through_a_cleanup(dev, flag, want):
    assert logged(dev, return_closure_kernel, flag) == want


@dataclasses.dataclass(frozen=True)
class Journal:
    log: ct.Array
    base: int

    @contextlib.contextmanager
    def entry(self, k):
        record(self.log, self.base + k)
        yield self.base
        record(self.log, self.base - k)


@ct.kernel
def values_kernel(log):
    j = Journal(log, 50)
    cm = j.entry(3)                        # a manager is a value; entering it runs the setup
    record(log, 1)
    with cm as base:
        record(log, base)
    same = 0
    if ct.bid(0) == 0:
        same = 9
    else:
        same = 9
    record(log, same)                      # the value both branches assign, not the one before


def test_managers_as_values_methods_and_branch_merges(dev):
    assert logged(dev, values_kernel) == [1, 53, 50, 47, 9]


# ---- errors ------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def two_yields(log):
    yield
    yield                                  # SECOND


@contextlib.contextmanager
def no_yield(log):
    record(log, 1)


@contextlib.contextmanager
def dead_yield(log):
    while True:
        break
        yield


@contextlib.contextmanager
def yield_in_loop(log, n):
    for i in range(n):
        yield


@contextlib.contextmanager
def returns(log):
    yield
    if ct.bid(0) == 0:
        return                             # RETURN


def _enter(cm_fn):
    def kernel(log):
        with cm_fn(log):                   # WITH
            record(log, 1)
    return kernel


def _loop_manager(log):
    with yield_in_loop(log, 3):            # WITH
        pass


def _not_a_manager(log):
    with len((1, 2)):                      # WITH
        pass


def _reused(log):
    cm = scope(log, 1, 2)
    with cm:
        pass
    with cm:                               # WITH
        pass


def _arithmetic(log):
    cm = scope(None, 7, leave=8)
    cm + 1                                 # ARITH


@pytest.mark.parametrize("make, error, message, marker", [
    (lambda: _enter(two_yields), ct.TileTypeError,
     r"Generator-based context manager must have one `yield` statement \(another `yield` found on line \d+\)",
     "# SECOND"),
    (lambda: _enter(no_yield), ct.TileTypeError,
     "Expected a generator function, but no reachable `yield` statement has been found", "# WITH"),
    (lambda: _enter(dead_yield), ct.TileTypeError, "no reachable `yield` statement", "# WITH"),
    (lambda: _loop_manager, ct.TileTypeError,
     "`yield` statement of a generator-based context manager must be placed outside of loops and conditional "
     "statements", "# WITH"),
    (lambda: _enter(returns), ct.TileSyntaxError,
     "Returning from a generator-based context manager is not supported", "# RETURN"),
    (lambda: _not_a_manager, ct.TileTypeError, r"Object of type Tile\[int32,\(\)\] cannot be used as a context "
     "manager", "# WITH"),
    (lambda: _reused, ct.TileTypeError, "Context manager cannot be reused", "# WITH"),
    (lambda: _arithmetic, ct.TileTypeError,
     r"Unsupported operand types for \+: GeneratorContextManager\[<function scope at 0x[0-9a-f]+>, "
     r"args=\[None, Tile\[int32,\(\)\]\], kwargs=\{leave: Tile\[int32,\(\)\]\}\] and Tile\[int32,\(\)\]", "# ARITH"),
])
def test_cutile_errors(make, error, message, marker):
    fn = make()
    with pytest.raises(error, match=message) as info:
        ct.launch(None, (1,), ct.kernel(fn), (np.zeros(4, np.int32),))
    where = {"# SECOND": two_yields, "# RETURN": returns}.get(marker, fn)
    check_error(info, where.__wrapped__ if hasattr(where, "__wrapped__") else where, marker)
