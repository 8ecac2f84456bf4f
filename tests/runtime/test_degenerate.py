"""Degenerate launches: each gets a correct result or a typed error naming the argument before
anything is written, the same on every backend. Outputs start poisoned, so an element a kernel
should have written (or must not write) shows up; on errors the outputs must stay untouched.

Covered: zero-size arrays with a grid >= 1, tile indices whose `index * tile` overflows int32
(and negative ones), read-only NumPy outputs, NumPy scalars as scalar arguments, 0-d arrays,
negative strides, bad grids, and Constant specialization keys (0.0 vs -0.0, NaN payloads).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.frontend.signature import constant_key
from tilecraft.runtime.args import to_array

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def copy_tiles(src, dst, T: ct.Constant[int]):
    """dst tile bid(0) = src tile bid(0) (zero padding)."""
    i = ct.bid(0)
    ct.store(dst, index=(i,), tile=ct.load(src, index=(i,), shape=(T,), padding_mode=ZERO))


@ct.kernel
def copy_rows(src, dst, TM: ct.Constant[int], TN: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    ct.store(dst, index=(i, j), tile=ct.load(src, index=(i, j), shape=(TM, TN), padding_mode=ZERO))


# ---- zero-size arrays ---------------------------------------------------------------------------

def test_zero_size_dims_never_tile_evenly():
    """A dim of size 0 "divides" every tile extent arithmetically, but no tile lies inside it:
    its facts must keep the bounds mask and rule out descriptors."""
    facts = to_array(np.zeros((0, 16), np.float32), "a", False).facts
    assert facts.dim_pow2 == (0, 16) and facts.empty and not facts.tma_ok
    assert not facts.tiles_evenly(0, 1) and not facts.tiles_evenly(0, 16) and facts.tiles_evenly(1, 16)
    assert not to_array(np.zeros((4, 16), np.float32), "b", False).facts.empty


def test_loads_of_a_zero_size_array_give_padding(dev):
    dst = dev.poison(32, np.float32)
    dev.launch((4,), copy_tiles, (dev.put(np.zeros(0, np.float32)), dst, 8))
    np.testing.assert_array_equal(dev.get(dst), np.zeros(32, np.float32))


def test_stores_into_a_zero_size_array_write_nothing(dev):
    src = dev.put(np.arange(32, dtype=np.float32))
    empty = dev.put(np.zeros(0, np.float32))
    dev.launch((4,), copy_tiles, (src, empty, 8))
    assert dev.get(empty).shape == (0,)
    np.testing.assert_array_equal(dev.get(src), np.arange(32, dtype=np.float32))


@pytest.mark.parametrize("shape", [(0, 16), (16, 0), (0, 0)])
def test_2d_arrays_with_an_empty_dim(dev, shape):
    """The other dim's size is a multiple of the tile (its mask is elided): the empty dim's
    mask alone must keep every lane out."""
    dst = dev.poison((16, 16), np.float32)
    dev.launch((4, 1), copy_rows, (dev.put(np.zeros(shape, np.float32)), dst, 4, 16))
    np.testing.assert_array_equal(dev.get(dst), np.zeros((16, 16), np.float32))
    out = dev.put(np.zeros(shape, np.float32))
    dev.launch((4, 1), copy_rows, (dev.put(np.ones((16, 16), np.float32)), out, 4, 16))
    assert dev.get(out).shape == shape


def test_gather_and_scatter_on_a_zero_size_array(dev):
    @ct.kernel
    def gather_scatter(src, dst, out):
        idx = ct.arange(8, dtype=ct.int32)
        ct.store(out, index=(0,), tile=ct.gather(src, idx, padding_value=-1.0))
        ct.scatter(dst, idx, ct.full((8,), 5.0, ct.float32))

    out = dev.poison(8, np.float32)
    dst = dev.put(np.zeros(0, np.float32))
    dev.launch((2,), gather_scatter, (dev.put(np.zeros(0, np.float32)), dst, out))
    np.testing.assert_array_equal(dev.get(out), np.full(8, -1.0, np.float32))


# ---- tile indices far outside the array -----------------------------------------------------------

PAD = 64  # elements around each array: a wrapped or negative address lands there


def framed(dev, values: np.ndarray) -> tuple:
    """(buffer, view): `values` as a view into a device buffer with PAD elements before and
    after it along axis 0 (the source: 1000 + position; an output: poisoned), so an access
    just outside the view reads a known value or writes into checked memory."""
    full = np.full((values.shape[0] + 2 * PAD, *values.shape[1:]), np.nan, np.float32)
    if not np.isnan(values).all():
        full[:] = 1000 + np.arange(full.size, dtype=np.float32).reshape(full.shape)
    full[PAD:PAD + values.shape[0]] = values
    buf = dev.put(full)
    return buf, buf[PAD:PAD + values.shape[0]]


@ct.kernel
def probe_at(src, dst, out, i, T: ct.Constant[int]):
    """out = src tile i (zero padding); dst tile i = 7."""
    ct.store(out, index=(0,), tile=ct.load(src, index=(i,), shape=(T,), padding_mode=ZERO))
    ct.store(dst, index=(i,), tile=ct.full((T,), 7.0, ct.float32))


@pytest.mark.parametrize("n", [10, 16], ids=["masked", "evenly-tiled"])
@pytest.mark.parametrize("index, tile", [(2**30, 4), (2**29 + 1, 8), (2**28, 16), (2**31 - 1, 2), (-1, 4),
                                         (-(2**30), 4), (-(2**31), 8)])
def test_tile_index_times_tile_size_never_wraps_into_range(dev, n, index, tile):
    """`index * tile` overflows int32 (2**30 * 4 wraps to 0, (2**29 + 1) * 8 to 8), or the
    index is negative: the tile is wholly outside the array, so the load gives padding and the
    store writes nothing (in the array or next to it), on a dim the tile does not divide
    (per-lane masks) and on one it does (masks elided)."""
    _, src = framed(dev, np.arange(1, n + 1, dtype=np.float32))
    dst_buf, dst = framed(dev, np.full(n, np.nan, np.float32))
    out = dev.poison(tile, np.float32)
    dev.launch((1,), probe_at, (src, dst, out, index, tile))
    np.testing.assert_array_equal(dev.get(out), np.zeros(tile, np.float32))
    assert np.isnan(dev.get(dst_buf)).all(), "a store outside the array wrote somewhere"


@ct.kernel
def probe_scaled(src, dst, out, H, T: ct.Constant[int]):
    """Block b works on tile b * H (int32 arithmetic: wraps for large H)."""
    b = ct.bid(0)
    i = b * H
    ct.store(out, index=(b,), tile=ct.load(src, index=(i,), shape=(T,), padding_mode=ZERO))
    ct.store(dst, index=(i,), tile=ct.full((T,), 1.0, ct.float32) * (b + 1).astype(ct.float32))


@pytest.mark.parametrize("n", [36, 64], ids=["masked", "evenly-tiled"])
def test_bid_times_a_huge_scalar(dev, n):
    """bid(0) * 2**30 is 0, 2**30, then wraps to -2**31 and -2**30: only block 0's tile is
    inside the array."""
    _, src = framed(dev, np.arange(1, n + 1, dtype=np.float32))
    dst_buf, dst = framed(dev, np.full(n, np.nan, np.float32))
    out = dev.poison(4 * 16, np.float32)
    dev.launch((4,), probe_scaled, (src, dst, out, 2**30, 16))
    want_out = np.zeros(64, np.float32)
    want_out[:16] = np.arange(1, 17)
    np.testing.assert_array_equal(dev.get(out), want_out)
    got = dev.get(dst_buf)
    np.testing.assert_array_equal(got[PAD:PAD + 16], np.ones(16, np.float32))
    assert np.isnan(got[:PAD]).all() and np.isnan(got[PAD + 16:]).all()


@pytest.mark.parametrize("index", [(2**30, 0), (0, 2**29), (-1, 0), (3, -(2**31)), (0, -1)])
def test_2d_tiles_far_outside(dev, index):
    """Rows tile evenly (16 of 4), columns do not (24 of 16); on the GPU these arrays may go
    through tensor descriptors, whose coordinates must not wrap either."""

    @ct.kernel
    def probe2d(src, dst, out, i, j):
        ct.store(out, index=(0, 0), tile=ct.load(src, index=(i, j), shape=(4, 16), padding_mode=ZERO))
        ct.store(dst, index=(i, j), tile=ct.full((4, 16), 7.0, ct.float32))

    _, src = framed(dev, np.arange(16 * 24, dtype=np.float32).reshape(16, 24) + 1)
    dst_buf, dst = framed(dev, np.full((16, 24), np.nan, np.float32))
    out = dev.poison((4, 16), np.float32)
    dev.launch((1,), probe2d, (src, dst, out, *index))
    np.testing.assert_array_equal(dev.get(out), np.zeros((4, 16), np.float32))
    assert np.isnan(dev.get(dst_buf)).all()


@pytest.mark.parametrize("index", [-1, 8, 2**31 - 1, -(2**31)])
def test_single_elements_outside(dev, index):
    """A 0-d tile of a 1-d array at a negative or too large index is out of bounds (a
    negative one is not element -1)."""

    @ct.kernel
    def element(src, dst, out, i):
        item = src.tiled_view((), padding_mode=ZERO).load((i,))
        ct.store(out, index=(0,), tile=ct.reshape(item, (1,)))
        dst.tiled_view(()).store((i,), ct.full((), 7.0, ct.float32))

    _, src = framed(dev, np.arange(1, 9, dtype=np.float32))
    dst_buf, dst = framed(dev, np.full(8, np.nan, np.float32))
    out = dev.poison(1, np.float32)
    dev.launch((1,), element, (src, dst, out, index))
    np.testing.assert_array_equal(dev.get(out), [0.0])
    assert np.isnan(dev.get(dst_buf)).all()


# ---- read-only NumPy outputs --------------------------------------------------------------------

def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_a_read_only_output_is_refused_before_launch(backend):
    src = np.arange(16, dtype=np.float32)
    dst = _read_only(np.full(16, np.nan, np.float32))
    with pytest.raises(ct.TileArgumentError, match=r"`dst` is a read-only NumPy array .* writes to it"):
        ct.launch(None, (2,), copy_tiles, (src, dst, 8), backend=backend)
    assert np.isnan(dst).all()


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_read_only_inputs_stay_fine_also_on_the_fast_path(backend):
    k = ct.kernel(copy_tiles.fn)
    src = _read_only(np.arange(16, dtype=np.float32))
    for _ in range(2):  # the second launch takes the fast path
        dst = np.full(16, np.nan, np.float32)
        ct.launch(None, (2,), k, (src, dst, 8), backend=backend)
        np.testing.assert_array_equal(dst, src)
    # a read-only output of the same shape must not find the writable one's fast entry
    ro = _read_only(np.full(16, np.nan, np.float32))
    with pytest.raises(ct.TileArgumentError, match="`dst` is a read-only"):
        ct.launch(None, (2,), k, (src, ro, 8), backend=backend)
    assert np.isnan(ro).all()


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_read_only_arrays_written_through_views_lists_scatter_and_atomics(backend):
    @ct.kernel
    def through_slice(a, b):
        ct.store(b.slice(axis=0, start=0, stop=8), index=(0,), tile=ct.load(a, index=(0,), shape=(8,)))

    @ct.kernel
    def through_list(a, outs):
        ct.store(outs[1], index=(0,), tile=ct.load(a, index=(0,), shape=(8,)))

    @ct.kernel
    def by_scatter(a, b):
        ct.scatter(b, ct.arange(8, dtype=ct.int32), ct.load(a, index=(0,), shape=(8,)))

    @ct.kernel
    def by_atomic(a, b):
        ct.atomic_add(b, ct.arange(8, dtype=ct.int32), ct.load(a, index=(0,), shape=(8,)))

    a = np.ones(8, np.float32)
    ro = _read_only(np.zeros(8, np.float32))
    cases = [(through_slice, (a, ro), "b"), (through_list, (a, [np.zeros(8, np.float32), ro]), r"outs\[1\]"),
             (by_scatter, (a, ro), "b"), (by_atomic, (a, ro), "b")]
    for kernel, args, name in cases:
        with pytest.raises(ct.TileArgumentError, match=rf"Argument `{name}` is a read-only NumPy array"):
            ct.launch(None, (1,), kernel, args, backend=backend)
        assert (ro == 0).all()
    ct.launch(None, (1,), through_list, (_read_only(a), [ro, np.zeros(8, np.float32)]), backend=backend)


# ---- NumPy scalars and 0-d arrays ----------------------------------------------------------------

@ct.kernel
def scale_by(x, out, s, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    ct.store(out, index=(0,), tile=(t * s).astype(out.dtype))


@pytest.mark.parametrize("scalar, ir_type", [
    (np.float32(2.5), "f32"), (np.float64(2.5), "f64"), (np.int32(3), "i32"), (np.int64(-3), "i64"),
    (np.int8(-2), "i8"), (np.uint8(200), "u8"), (np.float16(0.5), "f16"), (np.bool_(True), "b1")])
def test_numpy_scalars_are_scalars_of_their_dtype(dev, scalar, ir_type):
    x = np.arange(8, dtype=np.float64)
    out = dev.poison(8, np.float64)
    assert f": {ir_type}" in scale_by.ir(dev.put(x), out, scalar, 8).split("\n")[0]
    dev.launch((1,), scale_by, (dev.put(x), out, scalar, 8))
    np.testing.assert_array_equal(dev.get(out), x * scalar.item())


def test_numpy_scalars_of_unusable_dtypes_are_refused():
    with pytest.raises(TypeError, match="Argument `s`: a NumPy scalar of dtype complex64 cannot be a kernel scalar"):
        scale_by.ir(np.zeros(8), np.zeros(8), np.complex64(1), 8)


def test_zero_d_arrays_are_rank_0_array_arguments(dev):
    """A 0-d NumPy array (or torch tensor) is an array, not a scalar: the kernel can load it
    and store into it (pass `a[()]` for its value as a scalar)."""

    @ct.kernel
    def double(a, out):
        ct.store(out, index=(), tile=ct.load(a, index=(), shape=()) * 2)

    out = dev.put(np.array(np.nan, np.float32))
    assert "array<0d x f32>" in double.ir(dev.put(np.array(3.0, np.float32)), out)
    dev.launch((1,), double, (dev.put(np.array(3.0, np.float32)), out))
    assert dev.get(out) == 6.0


# ---- negative strides ----------------------------------------------------------------------------

@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_negative_strides(backend):
    """The interpreter takes NumPy arrays with negative strides as they are; torch (and so
    the Triton backends) has no such tensors: a TileArgumentError naming the argument, before
    anything is written."""
    src = np.arange(20, dtype=np.float32)[::-1]
    dst = np.full(20, np.nan, np.float32)
    rev_dst = np.full(40, np.nan, np.float32)[::-2]
    if backend == "interpreter":
        ct.launch(None, (3,), copy_tiles, (src, dst, 8), backend=backend)
        np.testing.assert_array_equal(dst, src)
        ct.launch(None, (3,), copy_tiles, (src, rev_dst, 8), backend=backend)
        np.testing.assert_array_equal(rev_dst, src)
        return
    with pytest.raises(ct.TileArgumentError, match=r"Argument `src` cannot be passed to this backend: .*negative "
                                                   r"strides.*np.ascontiguousarray"):
        ct.launch(None, (3,), copy_tiles, (src, dst, 8), backend=backend)
    with pytest.raises(ct.TileArgumentError, match=r"Argument `dst` cannot be passed"):
        ct.launch(None, (3,), copy_tiles, (np.ascontiguousarray(src), rev_dst, 8), backend=backend)
    assert np.isnan(dst).all() and np.isnan(rev_dst).all()


# ---- grids ---------------------------------------------------------------------------------------

def test_grid_entries(dev):
    src, dst = dev.put(np.arange(16, dtype=np.float32)), dev.poison(16, np.float32)
    dev.launch((2,), copy_tiles, (src, dst, 8))  # a fast-path entry exists from here on
    for grid in [(-1,), (2, -3), (1, 1, -1)]:
        with pytest.raises(ValueError, match=r"grid\[\d\] = -\d is negative"):
            dev.launch(grid, copy_tiles, (src, dst, 8))
    for grid in [(2.0,), ("2",), (True,), (None, 1)]:
        with pytest.raises(TypeError, match=r"grid\[0\] = .* must be a non-negative int"):
            dev.launch(grid, copy_tiles, (src, dst, 8))


# ---- Constant specialization keys ----------------------------------------------------------------

@ct.kernel
def reciprocal(out, C: ct.Constant[float]):
    ct.store(out, index=(0,), tile=ct.full((4,), 1.0, ct.float32) / C)


def test_signed_zero_constants_are_different_variants(dev):
    k = ct.kernel(reciprocal.fn)
    for c, want in [(0.0, np.inf), (-0.0, -np.inf), (0.0, np.inf), (-0.0, -np.inf)]:
        out = dev.poison(4, np.float32)
        dev.launch((1,), k, (out, c))
        np.testing.assert_array_equal(dev.get(out), np.full(4, want, np.float32))
    assert len(k.variants) == 2


def test_constant_keys_compare_floats_bitwise():
    nan2 = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    assert constant_key(0.0) != constant_key(-0.0)
    assert constant_key((1, -0.0)) != constant_key((1, 0.0))
    assert constant_key(float("nan")) == constant_key(float("nan"))
    assert constant_key(float("nan")) != constant_key(nan2) != constant_key(-float("nan"))
    assert constant_key(np.float32(-0.0)) != constant_key(np.float32(0.0))
    assert len({constant_key(v) for v in (1, 1.0, True)}) == 3


@ct.kernel
def pick_sign(x, out, flip, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    ct.store(out, index=(0,), tile=ct.where(flip, -t, t))


@pytest.mark.parametrize("flip", [True, False])
def test_python_bool_scalars_reach_the_kernel(dev, flip):
    """A run-time bool argument (Triton's CPU interpreter takes none: it travels as int32 there)."""
    x = np.arange(1, 9, dtype=np.float32)
    out = dev.poison(8, np.float32)
    dev.launch((1,), pick_sign, (dev.put(x), out, flip, 8))
    np.testing.assert_array_equal(dev.get(out), -x if flip else x)
