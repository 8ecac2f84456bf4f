"""Wrong constant operands that Python itself would reject (a zero divisor, a 0-d matmul operand,
a reshape no size fits, a runtime tuple slice, a sub-byte dtype called as a constructor): each is
a TileTypeError at the kernel line, with the caret, never Python's own exception from tilecraft's
code."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error


@ct.kernel
def cdiv_by_zero(a):
    ct.store(a, (0,), ct.full((8,), ct.cdiv(3, 0), ct.float32))  # ERR


@ct.kernel
def matmul_with_scalar(a):
    t = ct.load(a, (0,), (8,))
    ct.store(a, (0,), t @ 3)  # ERR


@ct.kernel
def reshape_zero_and_minus_one(a):
    ct.store(a, (0,), ct.reshape(ct.reshape(ct.load(a, (0,), (8,)), (0, -1)), (8,)))  # ERR


@ct.kernel
def reshape_minus_one_without_fit(a):
    ct.store(a, (0,), ct.reshape(ct.reshape(ct.load(a, (0,), (8,)), (3, -1)), (8,)))  # ERR


@ct.kernel
def reshape_runtime_and_minus_one(a):
    ct.store(a, (0,), ct.reshape(ct.reshape(ct.load(a, (0,), (8,)), (ct.bid(0), -1)), (8,)))  # ERR


@ct.kernel
def tuple_slice_runtime(a, n):
    ct.store(a, (0,), ct.full((8,), (1, 2, 3)[0:n][0], ct.float32))  # ERR


@ct.kernel
def tuple_slice_float(a, n):
    ct.store(a, (0,), ct.full((8,), (1, 2, 3)[0:1.5][0], ct.float32))  # ERR


@ct.kernel
def tuple_slice_step_zero(a, n):
    ct.store(a, (0,), ct.full((8,), (1, 2, 3)[::0][0], ct.float32))  # ERR


@ct.kernel
def sub_byte_constructor(a):
    ct.store(a, (0,), ct.full((8,), ct.float4_e2m1fn(1.0), ct.float32))  # ERR


@pytest.mark.parametrize("kernel,args,message", [
    (cdiv_by_zero, (), r"cdiv\(3, 0\) divides by zero"),
    (matmul_with_scalar, (), r"matmul\(\) needs tiles of at least 1 dimension, got shapes \(8,\) and \(\)"),
    (reshape_zero_and_minus_one, (), r"Cannot reshape a tile of shape \(8,\) to \(0, -1\)"),
    (reshape_minus_one_without_fit, (), r"Cannot reshape a tile of shape \(8,\) to \(3, -1\)"),
    (reshape_runtime_and_minus_one, (), r'Invalid argument "shape" of reshape\(\): Expected a constant integer'),
    (tuple_slice_runtime, (3,), "Tuple indices must be constant"),
    (tuple_slice_float, (3,), r"Tuple slice bounds must be integers or None \(step not 0\), got slice\(0, 1.5"),
    (tuple_slice_step_zero, (3,), r"got slice\(None, None, 0\)"),
    (sub_byte_constructor, (), "float4_e2m1fn is a sub-byte dtype and is not callable"),
])
def test_rejected_constant_operands(dev, kernel, args, message):
    a = dev.poison((8,), "float32")
    with pytest.raises(ct.TileTypeError, match=message) as ei:
        dev.launch((1,), kernel, (a, *args))
    check_error(ei, kernel.fn, "# ERR")
    assert np.isnan(dev.get(a)).all()


@ct.kernel
def tuple_slices(a):
    t = (1, 2, 3, 4, 5)[-1:0:-2]
    ct.reshape(ct.reshape(ct.load(a, (0,), (8,)), (2, -1)), (8,))
    ct.store(a, (0,), ct.reshape(ct.reshape(ct.full((8,), t[0] * 10 + t[1], ct.float32), (-1, 4)), (8,)))


def test_constant_slices_and_reshapes_still_compile(dev):
    a = dev.poison((8,), "float32")
    dev.launch((1,), tuple_slices, (a,))
    assert (dev.get(a) == 53.0).all()
