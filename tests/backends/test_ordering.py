"""Program order of a block's accesses to one array on the GPU (backends/triton/ordering.py): a
barrier goes before an access that reads what the block wrote, or writes what it read or wrote,
to the same array (cuTile's memory model); accesses to separate arrays get none."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.tools import inspect_kernel  # noqa: E402

T = 64


@ct.kernel
def copy_scaled(a, b):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) * 2.0)


@ct.kernel
def in_place(a):
    i = ct.bid(0)
    ct.store(a, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) * 2.0)


@ct.kernel
def shift_left(a, n: ct.Constant[int]):
    """a[k] = a[k + 1] for the first n-1 tiles' elements, tile by tile: each read must see
    nothing written yet at its place, each write must follow the reads of its tile."""
    for j in range(n - 1):
        nxt = ct.gather(a, ct.arange(T, dtype=ct.int32) + j * T + 1)
        ct.store(a, index=(j,), tile=nxt)


@ct.kernel
def write_then_read(a, out):
    ct.store(a, index=(0,), tile=ct.arange(T, dtype=ct.float32))
    ct.store(out, index=(0,), tile=ct.gather(a, T - 1 - ct.arange(T, dtype=ct.int32)))


def _barriers(kernel, args) -> int:
    return inspect_kernel(kernel, args, capability=90).stage("triton").count("tl.debug_barrier()")


def test_where_barriers_go():
    x = torch.empty(4 * T, dtype=torch.float32)
    assert _barriers(copy_scaled, (x, torch.empty_like(x))) == 0   # separate arrays: disjoint
    assert _barriers(in_place, (x,)) == 1                           # the store follows a read of a
    assert _barriers(write_then_read, (x, torch.empty_like(x))) == 1  # the gather follows a store to a
    assert _barriers(shift_left, (x, 4)) == 2  # store after gather; next iteration's gather after store


def test_reads_see_the_blocks_writes(dev):
    a = np.arange(4 * T, dtype=np.float32)
    d = dev.put(a.copy())
    dev.launch((1,), shift_left, (d, 4))
    want = a.copy()
    want[:3 * T] = a[1:3 * T + 1]
    np.testing.assert_array_equal(dev.get(d), want)
    out = dev.put(np.full(T, np.nan, np.float32))
    dev.launch((1,), write_then_read, (dev.put(np.zeros(T, np.float32)), out))
    np.testing.assert_array_equal(dev.get(out), np.arange(T, dtype=np.float32)[::-1])
