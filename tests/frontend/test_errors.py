"""Compile and launch errors: type, message, and the kernel's file/line/column with a caret."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error, check_nth_marked_error, line_of

ConstInt = ct.Constant[int]


def launch(kernel, args, grid=(1,)):
    ct.launch(None, grid, kernel, args)


@ct.kernel
def non_pow2_tile(a):
    t = ct.load(a, index=(0,), shape=(3,))  # ERR
    ct.store(a, index=(0,), tile=t)


def test_non_power_of_two_tile():
    with pytest.raises(ct.TileTypeError, match=r'Invalid argument "shape" of load\(\): '
                                               r'Dimension #0 of shape \(3,\) is not a power of two') as ei:
        launch(non_pow2_tile, (np.zeros(8, np.float32),))
    check_error(ei, non_pow2_tile.fn, "# ERR", col_text="ct.load")


@ct.kernel
def mma_shape_mismatch(a, b, c):
    x = ct.load(a, index=(0, 0), shape=(16, 8))
    y = ct.load(b, index=(0, 0), shape=(16, 16))
    acc = ct.mma(x, y, ct.zeros((16, 16), ct.float32))  # ERR
    ct.store(c, index=(0, 0), tile=acc)


@ct.kernel
def mma_dtype_mismatch(a, b, c):
    x = ct.load(a, index=(0, 0), shape=(16, 16))
    y = ct.load(b, index=(0, 0), shape=(16, 16))
    acc = ct.mma(x, y, ct.zeros((16, 16), ct.float32))  # ERR
    ct.store(c, index=(0, 0), tile=acc)


def test_mma_shape_mismatch():
    z = np.zeros((16, 16), np.float16)
    with pytest.raises(ct.TileTypeError, match="do not match") as ei:
        launch(mma_shape_mismatch, (z, z, np.zeros((16, 16), np.float32)))
    check_error(ei, mma_shape_mismatch.fn, "# ERR", col_text="ct.mma")


def test_mma_dtype_mismatch():
    with pytest.raises(ct.TileTypeError, match="x and y must have the same dtype, got float16 and float32") as ei:
        launch(mma_dtype_mismatch, (np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float32),
                                    np.zeros((16, 16), np.float32)))
    check_error(ei, mma_dtype_mismatch.fn, "# ERR")


@ct.kernel
def mma_acc_dtype(a, c):
    x = ct.load(a, index=(0, 0), shape=(16, 16))
    acc = ct.mma(x, x, ct.zeros((16, 16), ct.int32))  # ERR
    ct.store(c, index=(0, 0), tile=acc)


def test_mma_accumulator_dtype():
    with pytest.raises(ct.TileTypeError, match="Unsupported acc dtype int32") as ei:
        launch(mma_acc_dtype, (np.zeros((16, 16), np.float16), np.zeros((16, 16), np.int32)))
    check_error(ei, mma_acc_dtype.fn, "# ERR")


@ct.kernel
def store_wrong_rank(a):
    t = ct.zeros((4,), ct.float32)
    ct.store(a, index=(0, 0), tile=t)  # ERR


def test_store_wrong_shape():
    with pytest.raises(ct.TileTypeError, match="tile rank must equal the array rank") as ei:
        launch(store_wrong_rank, (np.zeros((4, 4), np.float32),))
    check_error(ei, store_wrong_rank.fn, "# ERR", col_text="ct.store")


@ct.kernel
def store_narrowing(a):
    ct.store(a, index=(0,), tile=ct.zeros((4,), ct.float32))  # ERR


def test_store_implicit_narrowing():
    with pytest.raises(ct.TileTypeError, match="cannot implicitly cast") as ei:
        launch(store_narrowing, (np.zeros(4, np.float16),))
    check_error(ei, store_narrowing.fn, "# ERR")


@ct.kernel
def index_rank(a):
    t = ct.load(a, index=(0,), shape=(4, 4))  # ERR
    ct.store(a, index=(0, 0), tile=t)


def test_index_rank_mismatch():
    with pytest.raises(ct.TileTypeError, match="Index size 1 does not match the array rank 2") as ei:
        launch(index_rank, (np.zeros((4, 4), np.float32),))
    check_error(ei, index_rank.fn, "# ERR")


@ct.kernel
def load_shape_rank(a):
    t = ct.load(a, index=(0, 0), shape=(4,))  # ERR
    ct.store(a, index=(0, 0), tile=t)


def test_shape_rank_mismatch():
    with pytest.raises(ct.TileTypeError, match="Expected shape length to be 2"):
        launch(load_shape_rank, (np.zeros((4, 4), np.float32),))


@ct.kernel
def uses_try(a):
    try:  # ERR
        pass
    except Exception:
        pass


@ct.kernel
def uses_list_comp(a):
    x = [i for i in range(3)]  # ERR
    del x


@ct.kernel
def uses_assert(a):
    assert a is not None  # ERR


@ct.kernel
def uses_for_else(a):
    for i in range(3):  # ERR
        pass
    else:
        pass


@pytest.mark.parametrize("kernel,match", [
    (uses_try, "try/except is not supported"),
    (uses_list_comp, "list comprehension is not supported"),
    (uses_assert, "assert statement is not supported"),
    (uses_for_else, "for-else is not supported"),
])
def test_unsupported_python(kernel, match):
    with pytest.raises(ct.TileSyntaxError, match=match) as ei:
        launch(kernel, (np.zeros(4, np.float32),))
    check_error(ei, kernel.fn, "# ERR")


@ct.kernel
def const_param(a, TILE: ConstInt):  # ERR
    ct.store(a, index=(0,), tile=ct.zeros((TILE,), ct.float32))


def test_constant_given_a_tensor():
    a = np.full(4, 7.0, np.float32)
    with pytest.raises(ct.TileArgumentError, match="`TILE` is a Constant parameter but was given an array") as ei:
        launch(const_param, (a, np.zeros(4, np.int32)))
    assert isinstance(ei.value, TypeError)
    check_error(ei, const_param.fn, "# ERR", col_text="TILE")
    assert (a == 7.0).all()


def test_wrong_number_of_arguments():
    a = np.full(4, 7.0, np.float32)
    with pytest.raises(ct.TileArgumentError, match="Kernel expects 2 arguments but 3 were given") as ei:
        launch(const_param, (a, 4, 5))
    assert isinstance(ei.value, TypeError)
    check_error(ei, const_param.fn, "# ERR")
    assert (a == 7.0).all()


@ct.kernel
def returns_value(a):
    return 1  # ERR


def test_kernel_cannot_return_value():
    with pytest.raises(ct.TileTypeError, match="cannot return values") as ei:
        launch(returns_value, (np.zeros(1),))
    check_error(ei, returns_value.fn, "# ERR")


@ct.kernel
def path_dependent(a, n):
    if n > 0:
        x = ct.zeros((4,), ct.float32)
    else:
        x = ct.zeros((4,), ct.int32)
    ct.store(a, index=(0,), tile=x)  # ERR


def test_type_depends_on_path():
    with pytest.raises(ct.TileTypeError, match="Type of `x` depends on path taken") as ei:
        launch(path_dependent, (np.zeros(4, np.float32), 1))
    check_error(ei, path_dependent.fn, "# ERR")


@ct.kernel
def in_helper_error(a):
    ct.store(a, index=(0,), tile=bad_helper(a))  # CALL


def bad_helper(a):
    return ct.load(a, index=(0,), shape=(5,))  # ERR


def test_error_in_helper_shows_call_chain():
    with pytest.raises(ct.TileTypeError) as ei:
        launch(in_helper_error, (np.zeros(8, np.float32),))
    err = ei.value
    assert err.loc.line == line_of(bad_helper, "# ERR")
    assert err.loc.caller is not None and err.loc.caller.line == line_of(in_helper_error.fn, "# CALL")
    assert "in bad_helper" in str(err) and "in in_helper_error" in str(err)


@ct.kernel
def static_fail(a, N: ConstInt):
    ct.static_assert(N % 2 == 0, f"N must be even, got {N}")  # ERR


def test_static_assert():
    with pytest.raises(ct.TileStaticAssertionError, match="Static assertion failed: N must be even, got 3") as ei:
        launch(static_fail, (np.zeros(1), 3))
    check_error(ei, static_fail.fn, "# ERR")
    launch(static_fail, (np.zeros(1), 4))


def copy_kernel_fn(a, b):
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(4,)))


copy_kernel = ct.kernel(copy_kernel_fn)


@pytest.mark.parametrize("grid,exc,match", [
    ((1, 1, 1, 1), ValueError, "at most 3"),
    ([1], TypeError, "grid must be a tuple"),
    ((-1,), ValueError, "is negative"),
    ((2**24,), ValueError, "24-bit limit"),
])
def test_bad_grid_writes_nothing(grid, exc, match):
    a = np.arange(8, dtype=np.float32)
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(exc, match=match):
        ct.launch(None, grid, copy_kernel, (a, b))
    assert (b == -1.0).all()


def test_non_array_argument_named():
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(TypeError, match="Argument `a`: expected an array"):
        ct.launch(None, (2,), copy_kernel, ("not an array", b))
    assert (b == -1.0).all()


def test_scalar_where_array_expected_points_at_use():
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(ct.TileTypeError, match="load\\(\\) expects an array"):
        ct.launch(None, (2,), copy_kernel, (5, b))
    assert (b == -1.0).all()


def test_mixed_devices_rejected():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to mix devices")
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(ValueError, match="different devices"):
        ct.launch(0, (2,), copy_kernel, (torch.zeros(8, device="cuda"), b))
    assert (b == -1.0).all()


def test_kernel_not_callable_and_options_checked():
    with pytest.raises(TypeError, match="launch"):
        copy_kernel(1, 2)
    with pytest.raises(ValueError, match="num_ctas"):
        ct.kernel(num_ctas=3)(copy_kernel_fn)
    with pytest.raises(TypeError):
        ct.kernel(42)


@ct.kernel
def runtime_check_bounds(a, n):
    t = ct.load(a, index=(0,), shape=(4,), check_bounds=n > 0)  # ERR
    ct.store(a, index=(0,), tile=t)


def test_check_bounds_must_be_a_constant_bool():
    with pytest.raises(ct.TileTypeError, match=r'Invalid argument "check_bounds" of load\(\): '
                                               r'Expected a boolean constant, but given value is not constant') as ei:
        launch(runtime_check_bounds, (np.zeros(8, np.float32), 3))
    check_error(ei, runtime_check_bounds.fn, "# ERR", col_text="ct.load")


@ct.kernel
def bad_slices(a, which: ConstInt):
    if which == 0:
        v = a.slice(0, -1, 4)  # ERR
    elif which == 1:
        v = a.slice(0, 5, 2)  # ERR
    else:
        v = a.slice(1, 0, 4)  # ERR
    ct.store(v, index=(0,), tile=ct.zeros((4,), dtype=ct.float32))


@pytest.mark.parametrize("which, message", [(0, "Slice start must be non-negative, got -1"),
                                            (1, "Slice stop must be greater than or equal to start, got start=5 and "
                                                "stop=2"),
                                            (2, "Axis 1 is out of range for rank 1")])
def test_array_slice_errors(which, message):
    with pytest.raises(ct.TileTypeError, match=message) as ei:
        launch(bad_slices, (np.zeros(8, np.float32), which))
    check_nth_marked_error(ei, bad_slices.fn, which)


@ct.kernel
def bad_views(a, which: ConstInt):
    if which == 0:
        v = a.tiled_view((4, 4))  # ERR
    elif which == 1:
        v = a.tiled_view(4, traversal_steps=(0,))  # ERR
    else:
        v = a.tiled_view(4)
        v.atomic_store_nand(0, ct.zeros((4,), dtype=ct.float32))  # ERR
    v.store(0, 1.0)


@pytest.mark.parametrize("which, error, message", [
    (0, ct.TileTypeError, r'Invalid argument "tile_shape" of tiled_view\(\): Expected shape length to be 1, got 2'),
    (1, ct.TileTypeError, "of traversal_steps .* is not positive"),
    (2, ct.TileTypeError, "TiledView has no attribute `atomic_store_nand`"),
])
def test_tiled_view_errors(which, error, message):
    with pytest.raises(error, match=message) as ei:
        launch(bad_views, (np.zeros(8, np.float32), which))
    check_nth_marked_error(ei, bad_views.fn, which)


@ct.kernel
def bad_combines(a, which: ConstInt):
    t = ct.load(a, index=(0,), shape=(8,))

    def branchy(x, y):
        if x > y:  # ERR
            return x
        return y
    if which == 0:
        r = ct.reduce(t, 0, branchy, 0.0)
    elif which == 1:
        r = ct.reduce(t, 0, lambda x, y: x + t, 0.0)  # ERR
    elif which == 2:
        r = ct.reduce(t, 0, lambda x, y: (x, y), 0.0)  # ERR
    else:
        r = ct.scan(t, 0, lambda x, y: x + y, (0.0, 1.0))  # ERR
    ct.store(a, index=(0,), tile=r)


@pytest.mark.parametrize("which, error, message", [
    (0, ct.TileSyntaxError, "Branching inside reduction body is not supported"),
    (1, ct.TileSyntaxError, r"may only use its arguments and constants, and scalars \(0-d tiles\) from outside it, not tiles"),
    (2, ct.TileTypeError, r"function must return 1 value\(s\), got 2"),
    (3, ct.TileTypeError, r"identity must be 1 constant number\(s\)"),
])
def test_combine_function_errors(which, error, message):
    with pytest.raises(error, match=message) as ei:
        launch(bad_combines, (np.zeros(8, np.float32), which))
    check_nth_marked_error(ei, bad_combines.fn, which)


@ct.kernel
def list_kernel(xs, which: ConstInt):
    ct.store(xs[which], index=(0,), tile=ct.zeros((4,), dtype=ct.float32))  # ERR


def test_list_argument_errors():
    a, b = np.zeros(8, np.float32), np.zeros(8, np.float64)
    with pytest.raises(TypeError, match=r"every array of a list must have one dtype, rank and device; \[0\] is "
                                        r"float32 rank 1 on cpu, \[1\] is float64"):
        launch(list_kernel, ([a, b], 0))
    with pytest.raises(TypeError, match="a list argument must hold at least one array"):
        launch(list_kernel, ([], 0))
    with pytest.raises(TypeError, match=r"Argument `xs\[1\]`: a list argument holds arrays only, got int"):
        launch(list_kernel, ([a, 3], 0))
    with pytest.raises(ct.TileTypeError, match="List index 2 is out of range for a list of 2 arrays") as ei:
        launch(list_kernel, ([a, a], 2))
    check_error(ei, list_kernel.fn, "# ERR", col_text="xs[which]")


def _bool_from_int_constants(a, b):
    g = ct.gather(a, ct.arange(4, dtype=ct.int32))  # padding_value=0 into a bool array
    ct.store(b, index=(0,), tile=ct.where(g, ct.ones((4,), ct.bool_), ct.zeros((4,), ct.bool_)))


def test_integer_constants_0_and_1_are_bools():
    a = np.array([True, False, True, True])
    b = np.zeros(4, bool)
    ct.launch(None, (1,), ct.kernel(_bool_from_int_constants), (a, b))
    np.testing.assert_array_equal(b, a)


def _bitwise_float(a):
    x = ct.load(a, index=(0,), shape=(4,))
    ct.store(a, index=(0,), tile=x & x)


def _shift_float(a):
    x = ct.load(a, index=(0,), shape=(4,))
    ct.store(a, index=(0,), tile=x << 1)


@pytest.mark.parametrize("fn, message", [(_bitwise_float, "Bitwise operations require integers"),
                                         (_shift_float, "Bitwise shift requires an integer")])
def test_bitwise_errors_use_cutile_wording(fn, message):
    with pytest.raises(ct.TileTypeError, match=message):
        ct.launch(None, (1,), ct.kernel(fn), (np.zeros(4, np.float32),))


def test_transpose_and_mma_rejections_use_cutiles_wording():
    @ct.kernel
    def transpose_1d(a):
        ct.store(a, index=(0,), tile=ct.transpose(ct.load(a, index=(0,), shape=(8,))))

    @ct.kernel
    def transpose_3d(a):
        ct.transpose(ct.load(a, index=(0, 0, 0), shape=(2, 2, 2)))

    @ct.kernel
    def mixed_mma(a, b):
        x = ct.load(a, index=(0, 0), shape=(16, 16))
        y = ct.load(b, index=(0, 0), shape=(16, 16))
        ct.mma(x, y, ct.zeros((16, 16), dtype=ct.float32))

    @ct.kernel
    def narrow_acc(a):
        x = ct.load(a, index=(0, 0), shape=(16, 16))
        ct.mma(x, x, ct.zeros((16, 16), dtype=ct.float16))

    bf16, f16 = np.zeros((16, 16), ml_dtypes.bfloat16), np.zeros((16, 16), np.float16)
    cases = [(transpose_1d, (np.zeros(8, np.float32),), "Cannot transpose a tile with fewer than 2 dimensions"),
             (transpose_3d, (np.zeros((2, 2, 2), np.float32),),
              "`axes` must be specified for tile with more than 2 dimensions"),
             (mixed_mma, (bf16, f16), "x and y must have the same dtype"),
             (narrow_acc, (bf16,), "Unsupported acc dtype float16")]
    for kernel, args, message in cases:
        with pytest.raises(ct.TileTypeError, match=message):
            ct.launch(None, (1,), kernel, args)


def test_tiled_view_and_constant_rejections_use_cutiles_wording():
    @ct.kernel
    def wrong_store(a):
        a.tiled_view(4).store(0, ct.zeros((8,), dtype=ct.float32))

    @ct.kernel
    def wrong_update(a):
        a.tiled_view(4).atomic_store_add(0, ct.zeros((8,), dtype=ct.float32))

    @ct.kernel
    def wrong_steps(a):
        a.tiled_view(4, traversal_steps=(2, 2))

    @ct.kernel
    def wide_padding(a, p: ct.Constant[int]):
        ct.gather(a, ct.arange(8, dtype=ct.int32), padding_value=p)

    f32, i8 = np.zeros(16, np.float32), np.zeros(16, np.int8)
    cases = [(wrong_store, (f32,), ct.TileTypeError,
              r"Tile shape \(8,\) is not broadcastable to the tiled view's tile shape \(4,\)"),
             (wrong_update, (f32,), ct.TileTypeError, r"Update shape \(8,\) is not broadcastable"),
             (wrong_steps, (f32,), ct.TileTypeError, "Expected traversal_steps length to be 1, got 2"),
             (wide_padding, (i8, 128), ct.TileValueError, "Integer constant 128 is out of range of int8")]
    for kernel, args, error, message in cases:
        with pytest.raises(error, match=message):
            ct.launch(None, (1,), kernel, args)


def test_an_empty_grid_is_one_block_and_one_argument_is_singular():
    """cuTile pads a grid with 1s, () included; its arity message says 'argument' for one."""
    a = np.arange(8, dtype=np.float32)
    b = np.full(8, -1.0, np.float32)
    ct.launch(None, (), copy_kernel, (a, b))
    np.testing.assert_array_equal(b, np.r_[a[:4], np.full(4, -1.0, np.float32)])

    @ct.kernel
    def one_arg(x):
        pass
    with pytest.raises(ct.TileArgumentError, match="Kernel expects 1 argument but 2 were given"):
        ct.launch(None, (1,), one_arg, (a, b))


def test_a_gather_mask_must_be_boolean():
    @ct.kernel
    def int_mask(a, b):
        i = ct.arange(8, dtype=ct.int32)
        ct.scatter(b, i, ct.gather(a, i, mask=i))
    with pytest.raises(ct.TileTypeError, match=r"gather\(\) mask must be a boolean \(bool\) tile, got int32"):
        ct.launch(None, (1,), int_mask, (np.zeros(8, np.float32), np.zeros(8, np.float32)))


def test_atomics_refuse_weak_ordering_and_a_missing_scope():
    @ct.kernel
    def weak_add(x):
        ct.atomic_add(x, 0, 1, memory_order=ct.MemoryOrder.WEAK, memory_scope=ct.MemoryScope.DEVICE)

    @ct.kernel
    def unscoped_cas(x):
        ct.atomic_cas(x, 0, 0, 1, memory_order=ct.MemoryOrder.ACQ_REL, memory_scope=ct.MemoryScope.NONE)

    x = np.zeros(4, np.int32)
    with pytest.raises(ct.TileTypeError, match="Invalid memory order for tile_atomic_rmw: WEAK"):
        ct.launch(None, (1,), weak_add, (x,))
    with pytest.raises(ct.TileTypeError, match="tile_atomic_cas with ACQ_REL memory ordering requires a memory scope"):
        ct.launch(None, (1,), unscoped_cas, (x,))
    assert (x == 0).all()
