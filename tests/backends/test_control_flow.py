"""Control flow and the Python subset: loops with runtime bounds, while, if/elif/else on runtime
scalars, break/continue, loop-carried tuples, early return, helpers (defaults, kwargs, multiple
returns, static recursion), closures, nested def, lambda, globals, static_* and printing.
Every kernel is checked against the same computation in plain Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import rng

ZERO = ct.PaddingMode.ZERO
SCALE = 3                       # module-level constants read at compile time
OFFSETS = (1, 10, 100)
OUT_DTYPE = ct.int32


# ---- for loops --------------------------------------------------------------------------------------------
@ct.kernel
def range_kernel(out, start, stop, step):
    """out[0] = sum(range(start, stop, step)); out[1] = trip count; out[2] = last i (or -1)."""
    acc = 0
    trips = 0
    last = -1
    for i in range(start, stop, step):
        acc += i
        trips += 1
        last = i
    ct.store(out, (0,), ct.astile((acc, trips, last, 0), dtype=ct.int32))


@pytest.mark.parametrize("start, stop, step", [(0, 10, 1), (3, 17, 4), (5, 5, 1), (7, 2, 1), (-6, 7, 3),
                                               (0, 1, 100)])
def test_for_runtime_bounds(dev, start: int, stop: int, step: int) -> None:
    out = dev.poison((4,), np.int32)
    dev.launch((1,), range_kernel, (out, start, stop, step))
    r = list(range(start, stop, step))
    np.testing.assert_array_equal(dev.get(out), [sum(r), len(r), r[-1] if r else -1, 0])


@pytest.mark.parametrize("step", [0, -1, -3])
def test_for_runtime_step_not_positive_runs_no_iteration(dev, step: int) -> None:
    """cuTile leaves a runtime step <= 0 undefined; every backend runs no iteration (the GPU
    would otherwise count down, or never end with 0)."""
    out = dev.poison((4,), np.int32)
    dev.launch((1,), range_kernel, (out, 9, -4, step))
    np.testing.assert_array_equal(dev.get(out), [0, 0, -1, 0])
    dev.launch((1,), range_kernel, (out, 2, 11, -step + 2))  # the same kernel, a positive step
    r = list(range(2, 11, -step + 2))
    np.testing.assert_array_equal(dev.get(out), [sum(r), len(r), r[-1], 0])


@ct.kernel
def range_forms_kernel(x, out, n, TILE: ct.Constant[int]):
    """Sum the first n tiles (range(n)), then every other tile from 1 (range(1, n, 2))."""
    acc = ct.zeros((TILE,), ct.float32)
    for i in range(n):
        acc = acc + ct.load(x, (i,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    odd = ct.zeros((TILE,), ct.float32)
    for i in range(1, n, 2):
        odd += ct.load(x, (i,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0,), acc)
    ct.store(out, (1,), odd)


def test_for_accumulates_tiles(dev) -> None:
    x = rng("forms").standard_normal(45).astype(np.float32)   # 5.6 tiles of 8
    out = dev.poison((16,), np.float32)
    dev.launch((1,), range_forms_kernel, (dev.put(x), out, 6, 8))
    p = np.zeros(48, np.float32)
    p[:45] = x
    t = p.reshape(6, 8).astype(np.float64)
    np.testing.assert_allclose(dev.get(out), np.concatenate([t.sum(0), t[1::2].sum(0)]), rtol=1e-5)


@ct.kernel
def break_continue_kernel(out, n, skip, stop_at):
    """for: skip multiples of `skip`, stop at `stop_at`; while: the same with a counter."""
    s = 0
    for i in range(n):
        if i % skip == 0:
            continue
        if i == stop_at:
            break
        s += i
    w = 0
    j = 0
    while j < n:
        j += 1
        if j % skip == 0:
            continue
        if j >= stop_at:
            break
        w += j * 10
    k = 0
    while True:
        k += 3
        if k > n:
            break
    ct.store(out, (0,), ct.astile((s, w, j, k), dtype=ct.int32))


@pytest.mark.parametrize("n, skip, stop_at", [(20, 3, 13), (10, 2, 100), (5, 7, 0), (0, 2, 1)])
def test_break_continue_for_and_while(dev, n: int, skip: int, stop_at: int) -> None:
    s = 0
    for i in range(n):
        if i % skip == 0:
            continue
        if i == stop_at:
            break
        s += i
    w = j = 0
    while j < n:
        j += 1
        if j % skip == 0:
            continue
        if j >= stop_at:
            break
        w += j * 10
    k = 0
    while True:
        k += 3
        if k > n:
            break
    out = dev.poison((4,), np.int32)
    dev.launch((1,), break_continue_kernel, (out, n, skip, stop_at))
    np.testing.assert_array_equal(dev.get(out), [s, w, j, k])


@ct.kernel
def counted_break_kernel(out, start, stop, step, stop_at):
    """A for loop with a break over range(start, stop, step), ending at the first i >= stop_at,
    with a continue; and nested for loops with breaks, the inner one's bound the outer counter."""
    trips = 0
    last = -1
    i = 0.5  # a float before the loop: the loop's counter is its own, not this variable carried
    for i in range(start, stop, step):
        if i >= stop_at:
            break
        if trips == 10:  # a bound on a counter that wrapped past the int32 limit (a bug): fail, not hang
            break
        trips += 1
        if i % 3 == 0:
            continue
        last = i
    pairs = 0
    for a in range(6):
        if a == 4:
            break
        for b in range(1000000000):
            if b > a:
                break
            pairs += 1
    ct.store(out, (0,), ct.astile((trips, last, pairs, 0), dtype=ct.int32))


I32_MAX = 2**31 - 1


@pytest.mark.parametrize("start, stop, step, stop_at", [
    (0, 1000000000, 1, 5),  # ends at the break: as a for loop it would have run to a billion
    (I32_MAX - 5, I32_MAX, 4, I32_MAX),  # the counter's next value would wrap: two iterations
    (-7, 20, 6, 100), (3, 3, 1, 100), (5, 40, -2, 100), (5, 40, 0, 100)])  # a step <= 0: none
def test_for_loops_with_break_end_at_it(dev, start: int, stop: int, step: int, stop_at: int) -> None:
    """A for loop with a break compiles to a while loop over its counter (so the break ends it)
    with the range's iterations: read once, none for a step <= 0, none past the int32 limit."""
    trips, last = 0, -1
    for i in range(start, stop, step) if step > 0 else ():
        if i >= stop_at or trips == 10:
            break
        trips += 1
        if i % 3 == 0:
            continue
        last = i
    from conftest import kernel_ir
    from tilecraft.ir import ops
    ir = kernel_ir(counted_break_kernel, np.zeros(4, np.int32), start, stop, step, stop_at)
    kinds = [type(op) for op in ir.walk()]
    assert ops.For not in kinds and kinds.count(ops.While) == 3
    out = dev.poison((4,), np.int32)
    dev.launch((1,), counted_break_kernel, (out, start, stop, step, stop_at))
    np.testing.assert_array_equal(dev.get(out), [trips, last, 1 + 2 + 3 + 4, 0])


@ct.kernel
def while_kernel(out, x0):
    """Collatz steps of x0 (runtime condition), loop-carried tuple (fib)."""
    x = x0
    steps = 0
    while x != 1:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    a, b = 0, 1
    for _ in range(steps):
        a, b = b, (a + b) % 1000
    ct.store(out, (0,), ct.astile((steps, a, b, x), dtype=ct.int32))


@pytest.mark.parametrize("x0", [1, 6, 27])
def test_while_runtime_condition_and_tuple_carry(dev, x0: int) -> None:
    x, steps = x0, 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    a, b = 0, 1
    for _ in range(steps):
        a, b = b, (a + b) % 1000
    out = dev.poison((4,), np.int32)
    dev.launch((1,), while_kernel, (out, x0))
    np.testing.assert_array_equal(dev.get(out), [steps, a, b, 1])


@ct.kernel
def nested_kernel(x, out, m, n):
    """Nested loops with a data-dependent inner trip count and carried tiles."""
    total = ct.zeros((8,), ct.float32)
    count = 0
    for i in range(m):
        row = ct.load(x, (i, 0), (1, 8), padding_mode=ct.PaddingMode.ZERO).reshape((8,))
        for j in range(i % n + 1):
            total = total + row * (j + 1)
            count += 1
    ct.store(out, (0,), total)
    ct.store(out, (1,), ct.full((8,), count, ct.float32))


def test_nested_loops(dev) -> None:
    x = rng("nested").standard_normal((7, 6)).astype(np.float32)
    m, n = 7, 3
    total = np.zeros(8)
    count = 0
    for i in range(m):
        row = np.zeros(8)
        row[:6] = x[i]
        for j in range(i % n + 1):
            total += row * (j + 1)
            count += 1
    out = dev.poison((16,), np.float32)
    dev.launch((1,), nested_kernel, (dev.put(x), out, m, n))
    np.testing.assert_allclose(dev.get(out), np.concatenate([total, np.full(8, count)]), rtol=1e-5)


# ---- if / elif / else ---------------------------------------------------------------------------------------
@ct.kernel
def branch_kernel(x, out, TILE: ct.Constant[int]):
    """Per block: classify the tile's sum with if/elif/else; conditions from runtime data."""
    i = ct.bid(0)
    t = ct.load(x, (i,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    s = ct.sum(t)
    if s > 1.0:
        r = t * 2.0
        tag = 1
    elif s < -1.0 and ct.max(t) < 2.0:
        r = -t
        tag = 2
    elif not (s == 0.0 or ct.min(t) > -0.5):
        r = t + 100.0
        tag = 3
    else:
        r = ct.zeros((TILE,), ct.float32)
        tag = 4
    ct.store(out, (i,), r + tag * 1000.0)


def test_if_elif_else_runtime(dev) -> None:
    g = rng("branch")
    x = g.standard_normal(8 * 12).astype(np.float32) * 0.8
    x[88:] = 0.0                                         # a zero tile: s == 0 → else branch
    out = dev.poison((96,), np.float32)
    dev.launch((12,), branch_kernel, (dev.put(x), out, 8))
    want = np.empty(96)
    for i in range(12):
        t = x[8 * i:8 * i + 8].astype(np.float64)
        s = t.astype(np.float32).sum()
        if s > 1.0:
            r, tag = t * 2, 1
        elif s < -1.0 and t.max() < 2.0:
            r, tag = -t, 2
        elif not (s == 0.0 or t.min() > -0.5):
            r, tag = t + 100, 3
        else:
            r, tag = np.zeros(8), 4
        want[8 * i:8 * i + 8] = r + tag * 1000
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-5)


def store_or_skip(out, i, limit):
    """A helper with an early (valueless) return."""
    if i % limit == 0:
        return
    ct.store(out, (i + 8,), i)


@ct.kernel
def early_return_kernel(out, limit):
    """Blocks at or past `limit` return before writing anything."""
    i = ct.bid(0)
    if i >= limit:
        return
    ct.store(out, (i,), i * 10)
    store_or_skip(out, i, 2)
    if i == 1:
        ct.store(out, (15,), 1)
        return
    ct.store(out, (14,), i)


def test_early_return(dev) -> None:
    out = dev.poison((16,), np.int32)
    dev.launch((8,), early_return_kernel, (out, 5))
    want = np.full(16, 0x5A, np.int32)
    want[:5] = np.arange(5) * 10
    want[[9, 11]] = [1, 3]
    want[15] = 1
    got = dev.get(out)
    assert got[14] in (0, 2, 3, 4)                     # blocks 0, 2, 3, 4 race on element 14
    got[14] = 0x5A
    np.testing.assert_array_equal(got, want)


# ---- helper functions ----------------------------------------------------------------------------------------
def axpy(a, x, y=0.0, *, scale=1.0):
    return (a * x + y) * scale


def classify(v):
    if v > 0:
        return v * 2
    elif v < -10:
        return -v
    return v + 1


def power(x, n):
    """Recursion through a static condition: unrolled at compile time."""
    if n == 0:
        return ct.ones(x.shape, x.dtype)
    if n % 2 == 1:
        return x * power(x, n - 1)
    h = power(x, n // 2)
    return h * h


def min_max(t):
    return ct.min(t), ct.max(t)


def with_varargs(*xs, **kw):
    total = kw.get("start", 0)
    for v in ct.static_iter(xs):
        total = total + v
    return total * kw["factor"]


def forward_kwargs(t, **kw):
    """**kwargs arrive as a dict; `f(**d)` passes it on."""
    return axpy(1.0, t, **kw)


@ct.kernel
def helpers_kernel(x, out, v):
    t = ct.load(x, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0,), axpy(2.0, t))
    ct.store(out, (1,), axpy(2.0, t, 1.0))
    ct.store(out, (2,), axpy(2.0, t, y=t, scale=0.5))
    ct.store(out, (3,), power(t, 5))
    lo, hi = min_max(t)
    ct.store(out, (4,), ct.full((8,), hi - lo, ct.float32))
    ct.store(out, (5,), ct.full((8,), classify(v), ct.float32))
    args = (t, t, 1.0)
    ct.store(out, (6,), with_varargs(*args, factor=2.0, start=t))
    ct.store(out, (7,), forward_kwargs(t, scale=3.0))


@pytest.mark.parametrize("v", [5, -20, -3])
def test_helper_functions(dev, v: int) -> None:
    x = rng("helpers").uniform(-1.5, 1.5, 6).astype(np.float32)
    t = np.zeros(8)
    t[:6] = x
    cls = v * 2 if v > 0 else (-v if v < -10 else v + 1)
    want = np.concatenate([2 * t, 2 * t + 1, (2 * t + t) * 0.5, t ** 5, np.full(8, t.max() - t.min()),
                           np.full(8, cls), (t + t + t + 1) * 2, t * 3])
    out = dev.poison((64,), np.float32)
    dev.launch((1,), helpers_kernel, (dev.put(x), out, v))
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-5, atol=1e-6)


def make_scaler(factor):
    @ct.kernel
    def k(x, out):
        def shifted(t, by=OFFSETS[1]):            # nested def with a default from a global
            return t + by

        sq = lambda t: t * t                      # noqa: E731  (lambda in tile code)
        t = ct.load(x, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(out, (0,), shifted(t * factor) * SCALE)
        ct.store(out, (1,), sq(t) + OFFSETS[2])
        local = t + 1
        add_local = lambda u: u + local           # noqa: E731  (captures a runtime value)
        ct.store(out, (2,), add_local(t).astype(OUT_DTYPE).astype(ct.float32))
    return k


@pytest.mark.parametrize("factor", [2, 5])
def test_closures_nested_def_lambda_globals(dev, factor: int) -> None:
    x = rng("closure").integers(-5, 5, 8).astype(np.float32)
    out = dev.poison((24,), np.float32)
    dev.launch((1,), make_scaler(factor), (dev.put(x), out))
    want = np.concatenate([(x * factor + 10) * 3, x * x + 100, np.trunc(x + x + 1)])
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-6)


# ---- static_iter / static_assert / static_eval ---------------------------------------------------------------
@ct.kernel
def static_kernel(x, out, N: ct.Constant[int]):
    t = ct.load(x, (0,), (8,), padding_mode=ct.PaddingMode.ZERO)
    acc = ct.zeros((8,), ct.float32)
    for k in ct.static_iter(range(N)):
        acc = acc + t * (k + 1)
    for w in ct.static_iter((1, 2.5, -1)):
        acc = acc + w
    ct.static_assert(N > 0, "N must be positive")
    ct.static_assert(t.shape == (8,))
    big = ct.static_eval(N * 10 + len(OFFSETS))
    neg = -t
    pick = ct.static_eval(t if N % 2 == 0 else neg)       # picks a runtime value
    ct.static_assert(t.dtype == ct.float32)
    ct.store(out, (0,), acc)
    ct.store(out, (1,), pick + big)


@pytest.mark.parametrize("n", [1, 4])
def test_static_iter_eval_assert(dev, n: int) -> None:
    x = rng("static").standard_normal(7).astype(np.float32)
    t = np.zeros(8)
    t[:7] = x
    out = dev.poison((16,), np.float32)
    dev.launch((1,), static_kernel, (dev.put(x), out, n))
    acc = sum(t * (k + 1) for k in range(n)) + 2.5
    pick = t if n % 2 == 0 else -t
    np.testing.assert_allclose(dev.get(out), np.concatenate([acc, pick + n * 10 + 3]), rtol=1e-5)


def test_static_assert_failure(dev) -> None:
    out = dev.poison((16,), np.float32)
    with pytest.raises(ct.TileStaticAssertionError, match="N must be positive"):
        dev.launch((1,), static_kernel, (dev.put(np.zeros(7, np.float32)), out, 0))


@ct.kernel
def dead_branch_kernel(out, FLAG: ct.Constant[bool]):
    """A constant condition folds: the static_assert in the dead branch is never compiled."""
    if FLAG:
        ct.store(out, (0,), ct.full((4,), 1, ct.int32))
    else:
        ct.static_assert(False, "dead branch compiled")
        ct.store(out, (0,), ct.full((4,), 2, ct.int32))


def test_constant_condition_folds_dead_branch(dev) -> None:
    out = dev.poison((4,), np.int32)
    dev.launch((1,), dead_branch_kernel, (out, True))
    assert (dev.get(out) == 1).all()
    with pytest.raises(ct.TileStaticAssertionError, match="dead branch compiled"):
        dev.launch((1,), dead_branch_kernel, (out, False))


# ---- printing and assertions ---------------------------------------------------------------------------------
@ct.kernel
def print_kernel(x, n):
    t = ct.load(x, (0,), (4,), padding_mode=ct.PaddingMode.ZERO)
    i = ct.bid(0)
    print("block", i, "n =", n)
    print(f"tile={t} sum={ct.sum(t):.2f}")
    ct.printf("%d|%f\n", i, ct.sum(t))


def test_print(dev, capsys) -> None:
    x = np.array([1.0, 2.5, -1.0], np.float32)
    dev.launch((2,), print_kernel, (dev.put(x), 7))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["block 0 n = 7", "tile=[1.000000, 2.500000, -1.000000, 0.000000] sum=2.50", "0|2.500000",
                     "block 1 n = 7", "tile=[1.000000, 2.500000, -1.000000, 0.000000] sum=2.50", "1|2.500000"]


@ct.kernel
def assert_kernel(x, out):
    t = ct.load(x, (ct.bid(0),), (8,), padding_mode=ct.PaddingMode.ZERO)
    ct.assert_(t >= 0.0, "negative input")
    ct.store(out, (ct.bid(0),), t)


def test_assert_passes_and_fails(dev) -> None:
    x = np.abs(rng("assert").standard_normal(13)).astype(np.float32)
    out = dev.poison((13,), np.float32)
    dev.launch((2,), assert_kernel, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x)
    x[11] = -1.0
    if dev.name == "triton":
        # a device-side assert leaves the process's CUDA context unusable: fail in a child
        _assert_fails_in_subprocess(x)
        return
    with pytest.raises(AssertionError, match="negative input"):
        dev.launch((2,), assert_kernel, (dev.put(x), out))


def _assert_fails_in_subprocess(x: np.ndarray) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import torch
        import tilecraft as ct
        import test_control_flow as m
        x = torch.tensor({x.tolist()!r}, dtype=torch.float32, device="cuda")
        out = torch.empty(13, device="cuda")
        try:
            ct.launch(torch.cuda.current_stream(), (2,), m.assert_kernel, (x, out), backend="triton")
            torch.cuda.synchronize()
        except Exception as exc:
            print("RAISED", type(exc).__name__)
            sys.exit(0)
        print("NOTHING RAISED")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "RAISED" in proc.stdout, proc.stdout + proc.stderr
    assert "negative input" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


host_lambda = lambda t: t * 2 + 1  # noqa: E731  (a host-defined lambda called from tile code)


@ct.kernel
def calls_host_lambda(a, b):
    ct.store(b, index=(0,), tile=host_lambda(ct.load(a, index=(0,), shape=(8,))))


def test_host_defined_lambda(dev):
    x = np.arange(8, dtype=np.float32)
    out = dev.poison(8, np.float32)
    dev.launch((1,), calls_host_lambda, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x * 2 + 1)


# ---- with: user context managers ---------------------------------------------------------------------------
@contextlib.contextmanager
def accumulate(out, slot, start):
    """Yields a starting value; on exit stores how many steps the body's loop took (cleanup sees
    the setup's locals)."""
    steps_before = start * 0
    yield start
    ct.store(out, (slot,), steps_before + slot * 100)


@contextlib.contextmanager
def offset_by(delta):
    yield delta


@ct.kernel
def with_kernel(out, n):
    with accumulate(out, 0, 5) as total, offset_by(2) as d:
        for i in range(n):
            if i == 3:
                break  # the cleanup still runs
            total += i + d
        ct.store(out, (1,), total)
    with accumulate(out, 2, 0):
        ct.store(out, (3,), n)


def test_with_context_managers(dev) -> None:
    out = dev.poison((4,), np.int32)
    dev.launch((1,), with_kernel, (out, 10))
    np.testing.assert_array_equal(dev.get(out), [0, 5 + (0 + 2) + (1 + 2) + (2 + 2), 200, 10])


@contextlib.contextmanager
def two_yields():
    yield 1
    yield 2


@ct.kernel
def bad_with_kernel(out, which: ct.Constant[int]):
    if which == 0:
        with two_yields():
            ct.store(out, (0,), 1)
    elif which == 1:
        with len((1, 2)):
            pass
    else:
        cm = offset_by(1)
        with cm:
            pass
        with cm:
            pass


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("which, error, message", [
    (0, ct.TileTypeError, "must have one `yield` statement"),
    (1, ct.TileTypeError, "cannot be used as a context manager"),
    (2, ct.TileTypeError, "Context manager cannot be reused"),
])
def test_with_errors(dev, which, error, message) -> None:
    with pytest.raises(error, match=message):
        dev.launch((1,), bad_with_kernel, (dev.poison((4,), np.int32), which))


# ---- frozen dataclasses holding tiles ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Base:
    scale: object = 2

    def scaled(self, t):
        return t * self.scale


@dataclasses.dataclass(frozen=True)
class Affine(Base):
    shift: object = 0
    total: object = None

    def __post_init__(self):
        object.__setattr__(self, "total", self.scale + self.shift)

    @property
    def doubled_shift(self):
        return self.shift * 2

    def __call__(self, t):
        return self.scaled(t) + self.shift

    def __getitem__(self, i):
        return (self.scale, self.shift)[i]


@ct.kernel
def record_kernel(x, out, n):
    t = ct.load(x, (0,), (8,))
    f = Affine(n, shift=t)           # a runtime scalar and a tile as fields; defaults; a base class
    g = dataclasses.replace(f, scale=3)
    ct.store(out, (0,), f(t) + g.doubled_shift + f[0] + g.total)


@dataclasses.dataclass(frozen=True)
class Running:
    total: object
    count: object = 0


@ct.kernel
def record_flow_kernel(x, out, n):
    t = ct.load(x, (0,), (8,))
    r = Running(ct.zeros((8,), dtype=ct.float32))
    for i in range(n):  # a loop-carried record
        r = Running(r.total + t, r.count + 1)
    if n > 2:           # a record chosen by a runtime branch
        s = dataclasses.replace(r, count=r.count * 10)
    else:
        s = r
    ct.store(out, (0,), s.total + s.count)


def test_dataclasses_through_loops_and_branches(dev) -> None:
    x = rng("record-flow").standard_normal(8).astype(np.float32)
    for n, want in ((3, 3 * x + 30), (2, 2 * x + 2)):
        out = dev.poison((8,), np.float32)
        dev.launch((1,), record_flow_kernel, (dev.put(x), out, n))
        np.testing.assert_allclose(dev.get(out), want, rtol=1e-6)


def test_frozen_dataclasses_with_runtime_fields(dev) -> None:
    x = rng("records").standard_normal(8).astype(np.float32)
    out = dev.poison((8,), np.float32)
    dev.launch((1,), record_kernel, (dev.put(x), out, 5))
    want = (x * 5 + x) + 2 * x + 5 + (3 + x)
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-6)


@dataclasses.dataclass
class Mutable:
    v: object


@dataclasses.dataclass(frozen=True)
class WithFactory:
    v: object
    extra: tuple = dataclasses.field(default_factory=tuple)


@ct.kernel
def bad_record_kernel(x, which: ct.Constant[int]):
    t = ct.load(x, (0,), (4,))
    r = Mutable(t) if which == 0 else WithFactory(t)
    ct.store(x, (0,), r.v)


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("which, message", [(0, "Only frozen dataclasses are supported"),
                                            (1, "Dataclasses with default_factory fields are not supported")])
def test_dataclass_errors(dev, which, message) -> None:
    with pytest.raises(ct.TileTypeError, match=message):
        dev.launch((1,), bad_record_kernel, (dev.poison((4,), np.float32), which))


@ct.kernel
def _loop_counter_as_value(out, idx, T: ct.Constant[int]):
    acc = ct.zeros((T,), ct.int32)
    for c in range(3):
        acc = acc + ct.full((T,), c, ct.int32) + ct.gather(idx, ct.arange(T, dtype=ct.int32) + c)
    ct.store(out, index=(0,), tile=acc)


def test_loop_counter_used_as_a_value(dev):
    """The counter of a `for` loop is a typed scalar on every backend (under Triton's interpreter
    `range` yields Python ints: it failed with "'int' object has no attribute 'type'")."""
    idx = np.random.default_rng(3).integers(-50, 50, 16).astype(np.int32)
    out = dev.poison(8, np.int32)
    dev.launch((1,), _loop_counter_as_value, (out, dev.put(idx), 8))
    want = sum(np.full(8, c) + idx[c:c + 8] for c in range(3))
    np.testing.assert_array_equal(dev.get(out), want)


@ct.kernel
def _nested_loop_counters_in_gather(x, out, n: int, T: ct.Constant[int]):
    rows = ct.arange(T, dtype=ct.int32)[:, None]
    cols = ct.arange(T, dtype=ct.int32)[None, :]
    acc = ct.zeros((T, T), ct.float32)
    for r in range(n):
        for c in range(3):
            acc = acc + ct.gather(x, (rows + r, cols + c)) * (c + 1)
            for d in range(2):
                acc = acc + ct.gather(x, (rows + d, cols + c + r))
    ct.store(out, index=(0, 0), tile=acc)


def test_nested_loop_counters_in_gather_indices(dev):
    """Counters of nested loops (a run-time and two constant trip counts) in gather indices
    `tile + c`: under Triton's interpreter every counter is typed, not only the outermost."""
    x = np.random.default_rng(4).standard_normal((12, 12)).astype(np.float32)
    out = dev.poison((8, 8), np.float32)
    dev.launch((1,), _nested_loop_counters_in_gather, (dev.put(x), out, 2, 8))
    x64 = x.astype(np.float64)
    want = sum(x64[r:r + 8, c:c + 8] * (c + 1) + sum(x64[d:d + 8, c + r:c + r + 8] for d in range(2))
               for r in range(2) for c in range(3))
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-5, atol=1e-5)
