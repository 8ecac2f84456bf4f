"""Errors about one argument of a tile function name it as cuTile does ('Invalid argument "shape"
of full(): ...', '#1' for a positional-only parameter), and other rejected programs use cuTile's
wording; each error points at the kernel line marked `# ERR`."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.errors import TileUnsupportedCallError


def marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if "# ERR" in text)


def expect(kernel, args, cls, message: str) -> None:
    with pytest.raises(cls, match=re.escape(message)) as ei:
        ct.launch(None, (1,), kernel, args)
    assert ei.value.loc is not None and ei.value.loc.line == marked_line(kernel.fn)


A2 = np.zeros((8, 8), np.float32)


@ct.kernel
def shape_too_long(a):
    ct.store(a, (0, 0), ct.load(a, (0, 0), shape=(2, 4, 8)))  # ERR


@ct.kernel
def shape_with_float(a):
    t = ct.ones((4, 8.0), ct.int16)  # ERR


@ct.kernel
def shape_not_tuple(a):
    t = ct.zeros("8", ct.int16)  # ERR


@ct.kernel
def shape_negative(a):
    t = ct.full((4, -8), 0, ct.int8)  # ERR


@ct.kernel
def shape_not_pow2(a):
    t = ct.full((12,), 0, ct.int8)  # ERR


@ct.kernel
def shape_runtime(a, n):
    t = ct.full((n, 4), 0, ct.int8)  # ERR


@ct.kernel
def reshape_not_pow2(a):
    t = ct.arange(16, dtype=ct.int32).reshape((2, 8)).reshape((16, 1)).reshape((4, 6))  # ERR


@ct.kernel
def order_word(a):
    ct.store(a, (0, 0), ct.load(a, (0, 0), (2, 2), order="K"))  # ERR


@ct.kernel
def order_axis(a):
    ct.store(a, (0, 0), ct.load(a, (0, 0), (2, 2), order=(1, -3)))  # ERR


@ct.kernel
def order_repeated(a):
    ct.store(a, (0, 0), ct.load(a, (0, 0), (2, 2), order=(1, 1)))  # ERR


@ct.kernel
def order_short(a):
    ct.store(a, (0, 0), ct.load(a, (0, 0), (2, 2), order=(0,)))  # ERR


@ct.kernel
def tile_expected(a):
    t = ct.transpose(a)  # ERR


@ct.kernel
def fill_not_scalar(a):
    t = ct.full((4,), (1, 2), ct.int32)  # ERR


@ct.kernel
def fill_tile(a):
    t = ct.full((4,), ct.arange(4, dtype=ct.int32), ct.int32)  # ERR


@ct.kernel
def dtype_not_dtype(a):
    t = ct.arange(8, dtype="no-such-type")  # ERR


@ct.kernel
def flag_runtime(a, k):
    t = ct.load(a, (0, 0), (2, 2))
    s = ct.max(t, 1, keepdims=k > 0)  # ERR


@ct.kernel
def flag_not_bool(a):
    t = ct.load(a, (0, 0), (2, 2))
    s = ct.cumsum(t, 1, reverse="yes")  # ERR


@pytest.mark.parametrize("kernel, extra, message", [
    (shape_too_long, (), 'Invalid argument "shape" of load(): Expected shape length to be 2, got 3'),
    (shape_with_float, (), 'Invalid argument "shape" of ones(): Expected a tuple of integers, but element #1 has '
                           'type Tile[float32,()]'),
    (shape_not_tuple, (), 'Invalid argument "shape" of zeros(): Expected a tuple, but given value has type str'),
    (shape_negative, (), 'Invalid argument "shape" of full(): Dimension #1 of shape (4, -8) is not positive'),
    (shape_not_pow2, (), 'Invalid argument "shape" of full(): Dimension #0 of shape (12,) is not a power of two'),
    (shape_runtime, (3,), 'Invalid argument "shape" of full(): Expected a constant integer tuple, but given value '
                          'is not constant; `n` is only known at run time'),
    (reshape_not_pow2, (), 'Invalid argument "shape" of reshape(): Dimension #1 of shape (4, 6) is not a power '
                           'of two'),
    (order_word, (), '''Invalid argument "order" of load(): Expected 'C' or 'F', got 'K\''''),
    (order_axis, (), 'Invalid argument "order" of load(): Axis -3 is out of range for rank 2'),
    (order_repeated, (), 'Invalid argument "order" of load(): Axis order must be a permutation, but axis 1 is used '
                         'at least twice'),
    (order_short, (), 'Invalid argument "order" of load(): Expected tuple of length 2, got 1'),
    (tile_expected, (), 'Invalid argument #1 of transpose(): Expected a tile, but given value has type '
                        'Array[float32,(?,?):(?,?)]'),
    (fill_not_scalar, (), 'Invalid argument "fill_value" of full(): Expected a scalar value, but given value has '
                          'type Tuple[Tile[int32,()],Tile[int32,()]]'),
    (fill_tile, (), 'Invalid argument "fill_value" of full(): Expected a scalar value, but given value has type '
                    'Tile[int32,(4)]'),
    (dtype_not_dtype, (), 'Invalid argument "dtype" of arange(): Expected a dtype constant, but given value has '
                          'type str'),
    (flag_runtime, (1,), 'Invalid argument "keepdims" of max(): Expected a boolean constant, but given value is '
                         'not constant'),
    (flag_not_bool, (), 'Invalid argument "reverse" of cumsum(): Expected a boolean constant, but given value has '
                        'type str'),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_argument_errors(kernel, extra, message: str) -> None:
    expect(kernel, (A2, *extra), ct.TileTypeError, message)


# ---- other rejected programs -----------------------------------------------------------------------------
@ct.kernel
def bool_sum(a):
    m = ct.load(a, (0, 0), (2, 2)) > 0
    s = m * m  # ERR


@ct.kernel
def view_index_rank(a):
    t = a.tiled_view((4, 4)).load((0,))  # ERR


@ct.kernel
def tile_item_assign(a):
    t = ct.load(a, (0, 0), (2, 2))
    t[1, 1] = 0.0  # ERR


@ct.kernel
def array_item_assign(a):
    a[0, 0] = 1.0  # ERR


@ct.kernel
def array_aug_assign(a):
    a[0, 1] *= 2.0  # ERR


@ct.kernel
def str_item_assign(a):
    name = "ab"
    name[0] = "c"  # ERR


@ct.kernel
def huge_constant(a):
    big = 2 ** 65
    for i in range(2):  # ERR
        big = big + 1


def _unsafe(a):
    exec("print(1)")  # ERR


@ct.kernel
def exec_call(a):
    _unsafe(a)


class Handle:
    pass


@ct.kernel
def identity_of_tiles(a):
    t = ct.load(a, (0, 0), (2, 2))
    same = t is not t + 1  # ERR


@ct.kernel
def cat_three(a):
    t = ct.load(a, (0, 0), (2, 2))
    u = ct.cat((t, t, t), 0)  # ERR


@ct.kernel
def cat_dtypes(a):
    t = ct.load(a, (0, 0), (2, 2))
    u = ct.cat((t, t.astype(ct.int8)), 1)  # ERR


@ct.kernel
def cat_ranks(a):
    t = ct.load(a, (0, 0), (2, 2))
    u = ct.cat((t, t.reshape((2, 2, 1))), 0)  # ERR


@ct.kernel
def cat_sides(a):
    t = ct.load(a, (0, 0), (2, 2))
    u = ct.cat((t, ct.load(a, (0, 0), (2, 4))), 0)  # ERR


@ct.kernel
def arange_runtime(a, n):
    t = ct.arange(n, dtype=ct.int32)  # ERR


GLOBAL_SIZE = 4


@ct.kernel
def global_shadowed(a):
    t = ct.full((GLOBAL_SIZE,), 0, ct.int32)  # ERR
    GLOBAL_SIZE = 8


@ct.kernel
def bad_enum_value(a):
    mode = ct.PaddingMode("sideways")  # ERR


@ct.kernel
def runtime_ensure_constant(a):
    n = ct.ensure_constant(ct.num_blocks(0))  # ERR


@ct.kernel
def instance_of_class(a):
    h = Handle()  # ERR


@pytest.mark.parametrize("kernel, cls, message", [
    (bool_sum, ct.TileTypeError, "Binary arithmetic op `mul` does not support bool, please cast bool to int"),
    (view_index_rank, ct.TileTypeError, "Index size 1 does not match the tiled view rank 2"),
    (tile_item_assign, ct.TileTypeError, "Tiles are immutable: item assignment is not supported"),
    (array_item_assign, ct.TileTypeError, "Arrays do not support item assignment. Use store() or scatter() instead."),
    (array_aug_assign, ct.TileTypeError, "Arrays are not directly subscriptable"),
    (str_item_assign, ct.TileTypeError, "'str' object does not support item assignment"),
    (huge_constant, ct.TileValueError, "Constant 36893488147419103232 is out of range of any supported integer type"),
    (bad_enum_value, ct.TileValueError, "'sideways' is not a valid PaddingMode"),
    (cat_three, ct.TileTypeError, "cat() supports at most 2 tiles, got 3"),
    (cat_dtypes, ct.TileTypeError, "Expected tiles to have the same dtype, got float32 and int8"),
    (cat_ranks, ct.TileTypeError, "Expected tiles to have the same rank, got 2 and 3"),
    (cat_sides, ct.TileTypeError, "Expected tiles to have the same shape for non axis dimensions"),
    (global_shadowed, ct.TileSyntaxError, "Undefined variable: local variable `GLOBAL_SIZE` is read before it is "
                                          "assigned"),
    (identity_of_tiles, ct.TileTypeError, "Operator 'is not' expects one of the operands to be None"),
    (runtime_ensure_constant, ct.TileStaticAssertionError,
     "Argument of ensure_constant() is not a compile-time constant"),
    (instance_of_class, TileUnsupportedCallError,
     'Creating instances of type "Handle" is not supported in device code'),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_rejected_programs(kernel, cls, message: str) -> None:
    expect(kernel, (A2,), cls, message)


def test_non_constant_arange_size() -> None:
    message = 'Invalid argument #1 of arange(): Expected an integer constant, but given value is not constant'
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), arange_runtime, (A2, 4))
    assert ei.value.loc.line == marked_line(arange_runtime.fn)


def test_impure_builtin_in_helper() -> None:
    with pytest.raises(TileUnsupportedCallError, match=re.escape("exec() is not supported in device code")) as ei:
        ct.launch(None, (1,), exec_call, (A2,))
    assert ei.value.loc.line == marked_line(_unsafe)


SCALE = np.float16(1.5)


@ct.kernel
def numpy_scalar_kernel(out):
    d = SCALE.dtype
    ct.static_assert(d == ct.float16 and SCALE == 1.5)
    ct.store(out, (0,), ct.full((4,), SCALE, d) * SCALE)


def test_numpy_scalar_constant_has_a_tile_dtype() -> None:
    out = np.full(4, np.nan, np.float16)
    ct.launch(None, (1,), numpy_scalar_kernel, (out,))
    np.testing.assert_array_equal(out, np.full(4, 2.25, np.float16))
