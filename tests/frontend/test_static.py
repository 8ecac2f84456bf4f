"""ct.static_eval / static_assert / static_iter: Python evaluation inside tile code.

Runtime values reach the Python expression as symbols: their dtype and shape are plain values,
their arithmetic compiles into the kernel, other tile operations and tile-code functions cannot
be called. Results are checked against plain Python; errors by class, wording and line.
"""

from __future__ import annotations

import inspect
import operator
from typing import Annotated

import numpy as np
import pytest

import tilecraft as ct


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def marked_line(fn, marker: str = "# ERR") -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if marker in text)


def compile_error(kernel, args, cls, text: str):
    """Launch on the interpreter expecting a compile error of `cls` containing `text`, located
    on the kernel line marked `# ERR`."""
    with pytest.raises(cls) as ei:
        ct.launch(None, (1,), kernel, args)
    assert text in ei.value.message, ei.value.message
    line = marked_line(kernel.fn)
    assert ei.value.loc is not None and ei.value.loc.line == line, (ei.value.loc, line)
    return ei.value


# ---- symbols: arithmetic compiled, facts known ----------------------------------------------------------
_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
        operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
        operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
        ct.minimum, ct.maximum, ct.bitwise_xor, ct.floordiv]


def _make_binary(fn):
    @ct.kernel
    def kernel(src, out):
        a = ct.gather(src, 0)
        b = ct.gather(src, 1)
        ct.scatter(out, 0, ct.static_eval(fn(a, b)))
        ct.scatter(out, 1, ct.static_eval(fn(b, 3)))   # symbol with a Python number
        ct.scatter(out, 2, ct.static_eval(fn(27, a)))  # reflected operand
    return kernel


@pytest.mark.parametrize("fn", _OPS, ids=lambda f: f.__name__)
def test_binary_symbols(dev, fn) -> None:
    src = np.array([23, 5], np.int32)
    out = dev.poison((3,), np.float64)
    dev.launch((1,), _make_binary(fn), (dev.put(src), out))
    py = {ct.minimum: min, ct.maximum: max, ct.bitwise_xor: operator.xor, ct.floordiv: operator.floordiv}.get(fn, fn)
    want = [float(py(23, 5)), float(py(5, 3)), float(py(27, 23))]
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-6)


@ct.kernel
def tile_symbol_kernel(x, out, SEL: ct.Constant[int]):
    t = ct.load(x, (0, 0), (2, 8))
    u = t * 3
    ti = t.astype(ct.int32)
    chosen = ct.static_eval((t, u, -t, ~ti)[SEL] if t.ndim == 2 else None)
    facts = ct.static_eval(t.shape[0] * 100 + t.shape[1] * 10 + t.ndim)
    ct.store(out, (0, 0), chosen.astype(ct.float32) + facts)


@pytest.mark.parametrize("sel", [0, 1, 2, 3])
def test_static_eval_picks_runtime_tiles(dev, sel: int) -> None:
    x = rng(11).integers(-9, 9, (2, 8)).astype(np.float32)
    out = dev.poison((2, 8), np.float32)
    dev.launch((1,), tile_symbol_kernel, (dev.put(x), out, sel))
    base = [x, x * 3, -x, ~x.astype(np.int32)][sel]
    np.testing.assert_array_equal(dev.get(out), base.astype(np.float32) + 282)


def _tripled(values):
    """A host function: runs as Python inside static_eval on symbols."""
    return tuple(3 * v for v in values)


@ct.kernel
def comprehension_kernel(x, out):
    a = ct.load(x, (0,), (4,))
    b = ct.load(x, (1,), (4,))
    c = ct.load(x, (2,), (4,))
    parts = (a, b, c)
    weighted = ct.static_eval(sum([w * p for w, p in zip((1, 10, 100), parts)]))
    scaled = ct.static_eval(_tripled(parts))
    ct.store(out, (0,), weighted)
    ct.store(out, (1,), scaled[2] - scaled[0])


def test_comprehension_and_host_function_on_symbols(dev) -> None:
    x = rng(12).integers(-50, 50, 12).astype(np.int64)
    out = dev.poison((8,), np.int64)
    dev.launch((1,), comprehension_kernel, (dev.put(x), out))
    a, b, c = x[:4], x[4:8], x[8:]
    np.testing.assert_array_equal(dev.get(out), np.concatenate([a + 10 * b + 100 * c, 3 * c - 3 * a]))


@ct.kernel
def method_kernel(x, out):
    full = ct.load(x, (0,), (8,))
    as_grid = ct.static_eval(full.reshape)        # a method taken, called outside
    sub = ct.static_eval(x.slice)
    ct.store(out, (0, 0), as_grid((2, 4)) + ct.gather(sub(0, 5, 6), 0))


def test_methods_returned_from_static_eval(dev) -> None:
    x = np.arange(1, 9, dtype=np.int32) * 7
    out = dev.poison((2, 4), np.int32)
    dev.launch((1,), method_kernel, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), x.reshape(2, 4) + x[5])


def test_symbol_reprs() -> None:
    seen = []

    @ct.kernel
    def kernel(x, y: ct.Array, n):
        t = ct.full((4, 1), 0, ct.float16)
        ct.static_eval(seen.append((repr(t), str(x), repr(y), repr(n), t.dtype, x.ndim)))

    ct.launch(None, (1,), kernel, (np.zeros((4, 5), np.int16), np.zeros(6, np.float32), 2))
    assert seen == [("<tile[float16, (4, 1)]>", "<array[int16, (?, ?)]>", "<array[float32, (?)]>",
                     "<tile[int32, ()]>", ct.float16, 2)]


SEEN: list = []


@ct.kernel
def static_dim_kernel(x: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(1,))]):
    ct.static_eval(SEEN.append((repr(x), x.shape[1])))


def test_static_array_dims_in_repr_and_shape() -> None:
    SEEN.clear()
    ct.launch(None, (1,), static_dim_kernel, (np.zeros((3, 16), np.float32),))
    assert SEEN == [("<array[float32, (?, 16)]>", 16)]


@ct.kernel
def number_method_kernel(out, K: ct.Constant[int]):
    ct.scatter(out, 0, K.astype(ct.int8) + ct.full((), 1, ct.int8))


def test_number_methods(dev) -> None:
    out = dev.poison((1,), np.int8)
    dev.launch((1,), number_method_kernel, (out, 41))
    assert dev.get(out).tolist() == [42]


# ---- static_eval errors ---------------------------------------------------------------------------------------
@ct.kernel
def eval_indirect(out):
    se = ct.static_eval
    ct.scatter(out, 0, se(3))  # ERR


@ct.kernel
def eval_two_args(out):
    ct.scatter(out, 0, ct.static_eval(1, 2))  # ERR


@ct.kernel
def eval_nested(out):
    ct.scatter(out, 0, ct.static_eval(4 + ct.static_eval(1)))  # ERR


@ct.kernel
def eval_calls_load(out):
    ct.static_eval(ct.load(out, (0,), (4,)))  # ERR


@ct.kernel
def eval_calls_method(out):
    t = ct.full((4,), 1, ct.int32)
    ct.static_eval(t.astype(ct.float32))  # ERR


@ct.kernel
def eval_calls_nested_def(out):
    def twice(v):
        return v * 2
    ct.scatter(out, 0, ct.static_eval(twice(3)))  # ERR


@ct.kernel
def eval_walrus(out):
    ct.scatter(out, 0, ct.static_eval((k := 5) + k))  # ERR


@ct.kernel
def eval_raises(out, D: ct.Constant[int]):
    ct.scatter(out, 0, ct.static_eval(12 % D))  # ERR


@ct.kernel
def eval_symbol_to_bool(out, n):
    ct.scatter(out, 0, ct.static_eval(7 if n > 2 else 8))  # ERR


@ct.kernel
def eval_returns_list(out):
    ct.static_eval([1, 2])  # ERR


@pytest.mark.parametrize("kernel, cls, text", [
    (eval_indirect, ct.TileSyntaxError, "static_eval() must be used directly by name"),
    (eval_two_args, ct.TileSyntaxError, "static_eval() expects a single expression"),
    (eval_nested, ct.TileStaticEvalError, "static_eval() cannot be used inside static_eval()."),
    (eval_calls_load, ct.TileStaticEvalError, "load() cannot be called inside static_eval()."),
    (eval_calls_method, ct.TileStaticEvalError, "astype() cannot be called inside static_eval()."),
    (eval_calls_nested_def, ct.TileStaticEvalError, "twice() cannot be called inside static_eval()."),
    (eval_walrus, ct.TileSyntaxError, "static_eval() expression attempted to modify a local variable 'k'"),
    (eval_raises, ct.TileStaticEvalError,
     "Exception was raised inside static_eval() (ZeroDivisionError: integer modulo by zero)"),
    (eval_symbol_to_bool, ct.TileStaticEvalError, "Symbolic tile has no concrete value and thus cannot be "
                                                  "converted to boolean"),
    (eval_returns_list, ct.TileTypeError, "Cannot create constant from value of type list."),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_static_eval_errors(kernel, cls, text: str) -> None:
    extra = (0,) if kernel is eval_raises else (5,) if kernel is eval_symbol_to_bool else ()
    args = (np.zeros(4, np.int32),) + extra
    compile_error(kernel, args, cls, text)


# ---- static_assert ------------------------------------------------------------------------------------------
def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, n))


@ct.kernel
def prime_kernel(x, out, P: ct.Constant):
    t = ct.full((2,), 0, ct.int8)
    ct.static_assert(_is_prime(P), f"{P} is not prime; x is {x}, a tile {t!r}")  # ERR
    ct.scatter(out, 0, ct.gather(x, 0) * P)


def test_static_assert_runs_python(dev) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), prime_kernel, (dev.put(np.array([3], np.int32)), out, 13))
    assert dev.get(out).tolist() == [39]


def test_static_assert_message_is_python() -> None:
    err = compile_error(prime_kernel, (np.zeros(1, np.int32), np.zeros(1, np.int32), 12),
                        ct.TileStaticAssertionError, "")
    assert err.message == ("Static assertion failed: 12 is not prime; x is <array[int32, (?)]>, "
                           "a tile <tile[int8, (2,)]>")


@ct.kernel
def assert_no_message(out, N: ct.Constant[int]):
    ct.static_assert(N in (2, 4, 8))  # ERR


@ct.kernel
def assert_not_bool(out, N: ct.Constant[int]):
    ct.static_assert(N * 2)  # ERR


@ct.kernel
def assert_runtime(out, n):
    ok = n < 10
    ct.static_assert(ok)  # ERR


@ct.kernel
def assert_indirect(out):
    check = ct.static_assert
    check(True)  # ERR


@ct.kernel
def assert_three_args(out):
    ct.static_assert(True, "a", "b")  # ERR


@ct.kernel
def assert_calls_tile_op(out):
    ct.static_assert(ct.arange(4, dtype=ct.int32).shape == (4,))  # ERR


@ct.kernel
def assert_inside_eval(out):
    ct.static_eval(ct.static_assert(True))  # ERR


@pytest.mark.parametrize("kernel, cls, text", [
    (assert_no_message, ct.TileStaticAssertionError, "Static assertion failed"),
    (assert_not_bool, ct.TileTypeError, "static_assert() condition must be a boolean"),
    (assert_runtime, ct.TileTypeError, "static_assert() condition must be a compile-time constant"),
    (assert_indirect, ct.TileSyntaxError, "static_assert() must be used directly by name"),
    (assert_three_args, ct.TileSyntaxError, "static_assert(cond, msg=None, /) expects one or two positional arguments"),
    (assert_calls_tile_op, ct.TileStaticEvalError, "arange() cannot be called inside static_assert() condition."),
    (assert_inside_eval, ct.TileStaticEvalError, "static_assert() cannot be used inside static_eval()."),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_static_assert_errors(kernel, cls, text: str) -> None:
    extra = (3,) if kernel in (assert_no_message, assert_not_bool, assert_runtime) else ()
    args = (np.zeros(4, np.int32),) + extra
    err = compile_error(kernel, args, cls, text)
    if kernel is assert_no_message:
        assert err.message == "Static assertion failed"


@ct.kernel
def strict_constants(out, wide, N: ct.Constant[int]):
    t = N + ct.int16(2)  # a strictly typed int16: folded where a Python value is needed
    ct.static_assert(t == N + 2 and t.dtype == ct.int16)
    wrapped = ct.uint8(150) + ct.uint8(110)
    ct.static_assert(wrapped == 4)  # in the dtype: wraps as on every backend
    h = ct.float16(0.1) + ct.float16(0.2)
    ct.static_assert(float(h) == HALF_SUM and h != 0.3)  # rounded as float16 arithmetic rounds
    loose = float(ct.float32(5.5))  # a loosely typed constant: stores into float16 without a cast
    ct.scatter(out, 0, loose)
    ct.scatter(out, 1, int(ct.float32(-2.75)))
    row = ct.arange(4, dtype=ct.int8) + t
    ct.static_assert(row.dtype == ct.int16)  # strict int16 wins over int8
    ct.store(wide, (0,), row)


HALF_SUM = float(np.float16(0.1) + np.float16(0.2))


@ct.kernel
def cast_out_of_range(out):
    big = ct.float32(1e10).astype(ct.int32)  # undefined: not folded
    ct.static_assert(big != 0)  # ERR


def test_strictly_typed_constants_fold_where_a_value_is_needed(dev) -> None:
    out, wide = dev.poison((2,), np.float16), dev.poison((4,), np.int16)
    dev.launch((1,), strict_constants, (out, wide, 5))
    assert dev.get(out).tolist() == [5.5, -2.0] and dev.get(wide).tolist() == [7, 8, 9, 10]
    compile_error(cast_out_of_range, (np.zeros(2, np.int32),), ct.TileTypeError,
                  "static_assert() condition must be a compile-time constant")


# ---- static_iter ------------------------------------------------------------------------------------------------
@ct.kernel
def iter_kernel(x, out):
    rows = tuple(ct.load(x, (i, 0), (1, 8)) for i in range(3))
    acc = ct.zeros((1, 8), ct.float32)
    for k, (w, r) in ct.static_iter(enumerate(zip((0.5, 2, True), reversed(rows)))):
        acc = acc + r * w + k
    ct.store(out, (0, 0), acc)


def test_static_iter_over_python_iterators(dev) -> None:
    x = rng(13).standard_normal((3, 8)).astype(np.float32)
    out = dev.poison((1, 8), np.float32)
    dev.launch((1,), iter_kernel, (dev.put(x), out))
    want = x[2] * 0.5 + 0 + x[1] * 2 + 1 + x[0] * 1 + 2
    np.testing.assert_allclose(dev.get(out)[0], want, rtol=1e-6)


@ct.kernel
def iter_continue(out):
    for i in ct.static_iter((1, 2)):
        if i == 1:
            continue  # ERR
        ct.scatter(out, i, i)


@ct.kernel
def iter_break(out):
    for i in ct.static_iter((1, 2)):
        if i == 2:
            break  # ERR


@ct.kernel
def iter_return(out):
    for i in ct.static_iter((1, 2)):
        return  # ERR


@ct.kernel
def iter_outside_for(out):
    items = ct.static_iter((1, 2))  # noqa: F841  # ERR


@ct.kernel
def iter_indirect(out):
    walk = ct.static_iter
    for i in walk((1, 2)):  # ERR
        ct.scatter(out, i, i)


@ct.kernel
def iter_not_iterable(out):
    for i in ct.static_iter(3.5):  # ERR
        ct.scatter(out, 0, i)


@ct.kernel
def iter_too_long(out):
    for i in ct.static_iter(range(1001)):  # ERR
        ct.scatter(out, 0, i)


@ct.kernel
def iter_dict_item(out):
    for i in ct.static_iter((3, {"a": 1})):  # ERR
        ct.scatter(out, 0, 1)


@ct.kernel
def iter_runtime_bound(out, n):
    for i in ct.static_iter(range(n)):  # ERR
        ct.scatter(out, 0, i)


@ct.kernel
def iter_broken_generator(out):
    for i in ct.static_iter(1 // v for v in (1, 0)):  # ERR
        ct.scatter(out, 0, i)


@pytest.mark.parametrize("kernel, cls, text", [
    (iter_continue, ct.TileSyntaxError, "Continue in a for loop with static_iter() is not supported"),
    (iter_break, ct.TileSyntaxError, "Break in a for loop with static_iter() is not supported"),
    (iter_return, ct.TileSyntaxError, "Returning from a for loop is not supported"),
    (iter_outside_for, ct.TileSyntaxError, "static_iter() is only allowed as iterable in a `for` loop"),
    (iter_indirect, ct.TileSyntaxError, "static_iter() must be used directly by name"),
    (iter_not_iterable, ct.TileTypeError, "Invalid static_iter() iterable: 'float' object is not iterable"),
    (iter_too_long, ct.TileStaticEvalError, "Maximum number of iterations (1000) has been reached"),
    (iter_dict_item, ct.TileStaticEvalError, "Invalid item #1 of static_iter() iterable: Cannot create constant "
                                             "from value of type dict."),
    (iter_runtime_bound, ct.TileStaticEvalError, "Exception was raised inside static_iter() iterable (ValueError: "
                                                 "Symbolic tile has no concrete value"),
    (iter_broken_generator, ct.TileTypeError, "Error was raised while obtaining item #1 from the static_iter() "
                                              "iterable: integer division or modulo by zero"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_static_iter_errors(kernel, cls, text: str) -> None:
    args = (np.zeros(4, np.int32),) + ((2,) if kernel is iter_runtime_bound else ())
    compile_error(kernel, args, cls, text)


# ---- bare ct.Constant ----------------------------------------------------------------------------------------
@ct.kernel
def bare_constant_kernel(out, K: ct.Constant):
    ct.static_assert(isinstance(K, int))
    ct.scatter(out, 0, ct.static_eval(K ** 2))


def test_bare_constant_annotation_is_compile_time(dev) -> None:
    out = dev.poison((1,), np.int32)
    dev.launch((1,), bare_constant_kernel, (out, 9))
    assert dev.get(out).tolist() == [81]
