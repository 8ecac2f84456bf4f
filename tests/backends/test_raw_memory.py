"""`Array.get_raw_memory()` beyond the atomics (test_ops_memory.py has offsets in row-major order,
masked atomics and the broadcast error): `.dtype`, 0-d offsets, broadcasting of values, masks and
padding to the offsets' shape, hints, and program order with tile and element accesses."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import poisoned


@ct.kernel
def _dtype_kernel(x, y):
    mem = x.get_raw_memory()
    ct.static_assert(mem.dtype == x.dtype)
    ct.static_assert(mem.dtype == y.dtype)
    y.get_raw_memory().store_offset(ct.arange(4, dtype=ct.int32), ct.full((4,), 3, dtype=mem.dtype))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint32"])
def test_dtype_is_the_array_dtype(dev, dtype):
    y = dev.poison(6, dtype)
    dev.launch((1,), _dtype_kernel, (dev.put(np.zeros(2, dtype)), y))
    want = np.concatenate([np.full(4, 3, dtype), poisoned(2, dtype)])
    np.testing.assert_array_equal(dev.get(y), want)


def test_dtype_mismatch_fails_the_static_assert():
    with pytest.raises(ct.TileStaticAssertionError):
        ct.launch(None, (1,), _dtype_kernel, (np.zeros(2, np.float32), np.zeros(6, np.int32)))


@ct.kernel
def _broadcasts(x, y, z, pad: ct.Constant[float]):
    mem_x, mem_y, mem_z = x.get_raw_memory(), y.get_raw_memory(), z.get_raw_memory()
    one = mem_x.load_offset(4)                        # a 0-d offset: one element, a 0-d tile
    mem_y.store_offset(0, one)
    o = ct.reshape(ct.arange(8, dtype=ct.int64), (4, 2)) + 1
    t = mem_x.load_offset(o, mask=o % 3 != 0, padding_value=pad, latency=4)  # padding broadcasts
    mem_y.store_offset(o, t, latency=2)
    mem_z.store_offset(o, ct.reshape(ct.arange(4, dtype=ct.float32), (4, 1)))  # (4, 1) value onto (4, 2)
    every = ct.full((1,), True, dtype=ct.bool_)       # a (1,) mask onto (8,) offsets
    mem_z.store_offset(ct.arange(8, dtype=ct.int32) + 9, mem_x.load_offset(ct.arange(8, dtype=ct.int32), mask=every))


def test_values_masks_and_padding_broadcast_to_the_offsets(dev):
    x = np.random.default_rng(2).standard_normal(10).astype(np.float32)
    y, z = dev.poison(10, np.float32), dev.poison(18, np.float32)
    dev.launch((1,), _broadcasts, (dev.put(x), y, z, -7.5))
    o = np.arange(8).reshape(4, 2) + 1
    want_y = np.full(10, np.nan, np.float32)
    want_y[o] = np.where(o % 3 != 0, x[o], -7.5)
    want_y[0] = x[4]
    np.testing.assert_array_equal(dev.get(y), want_y)
    want_z = np.full(18, np.nan, np.float32)
    want_z[o] = np.broadcast_to(np.arange(4, dtype=np.float32).reshape(4, 1), (4, 2))
    want_z[9:17] = x[:8]
    np.testing.assert_array_equal(dev.get(z), want_z)


@ct.kernel
def _program_order(a):
    """Raw-memory accesses interleaved with tile and element accesses to the same array: each
    read sees every earlier write."""
    mem = a.get_raw_memory()
    ct.store(a, index=(0,), tile=ct.full((2,), 5.0, dtype=ct.float32))   # a[0:2] = 5
    mem.store_offset(2, mem.load_offset(1) + 1.0)                        # a[2] = 6
    ct.scatter(a, ct.arange(4, dtype=ct.int32) + 3, ct.gather(a, ct.arange(4, dtype=ct.int32)) * 2.0)  # a[3:7]
    mem.store_offset(ct.arange(4, dtype=ct.int64) + 7, mem.load_offset(ct.arange(4, dtype=ct.int64) + 3) - 1.0)
    t = ct.load(a, index=(2,), shape=(4,))                               # a[8:12] after the writes
    ct.store(a, index=(3,), tile=t + 100.0)                              # a[12:16]


def test_program_order_with_tile_and_element_accesses(dev):
    a = dev.put(np.zeros(16, np.float32))
    dev.launch((1,), _program_order, (a,))
    want = np.zeros(16, np.float32)
    want[0:2] = 5
    want[2] = want[1] + 1
    want[3:7] = want[0:4] * 2
    want[7:11] = want[3:7] - 1
    want[12:16] = want[8:12] + 100
    np.testing.assert_array_equal(dev.get(a), want)


def test_unknown_attribute_is_a_located_type_error():
    @ct.kernel
    def k(x):
        x.get_raw_memory().shape
    with pytest.raises(ct.TileTypeError, match="RawArrayMemory has no attribute `shape`"):
        ct.launch(None, (1,), k, (np.zeros(4, np.float32),))
