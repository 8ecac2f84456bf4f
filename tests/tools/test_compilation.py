"""`tilecraft.compilation`: cuTile's kernel signatures and constraints, the signature tilecraft
compiles under for given arguments, and export_kernel compiling each signature before saying
that it cannot write cuTile's binaries."""

from __future__ import annotations

import io
import math
from typing import Annotated

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                   ListConstraint, ScalarConstraint, TupleConstraint, demangle_kernel_name,
                                   export_kernel, mangle_kernel_name)

V1, V2 = CallingConvention.cutile_python_v1(), CallingConvention.cutile_python_v2()


def _array(dtype=ct.float32, ndim=1, **kw):
    kw = {"index_dtype": ct.int32, "stride_lower_bound_incl": 0, "alias_groups": (),
          "may_alias_internally": False, **kw}
    return ArrayConstraint(dtype, ndim, **kw)


# ---- calling conventions -----------------------------------------------------------------------------------
def test_calling_conventions():
    assert (V1.name, V1.code, V1.version) == ("cutile_python_v1", "t1", 1)
    assert (V2.name, V2.code, V2.version) == ("cutile_python_v2", "t2", 2)
    assert CallingConvention.from_code("t2") == V2 and CallingConvention.from_code("t1") is V1
    with pytest.raises(ValueError, match="Unknown calling convention code 't3'"):
        CallingConvention.from_code("t3")
    with pytest.raises(AttributeError, match="has no attribute 'cutile_python_v3'"):
        CallingConvention.cutile_python_v3()


# ---- constraints ---------------------------------------------------------------------------------------------
def test_array_constraint_normalizes_per_dim_assumptions():
    c = _array(ct.float16, 3, stride_constant=(None, 64, 1), stride_divisible_by=(8, 8, 1),
               shape_divisible_by=(16, 1, 32),
               shape_constant=(None, 48, None), stride_lower_bound_incl=(0, 0, None), base_addr_divisible_by=16)
    assert c.stride_constant == (None, 64, 1)
    assert c.stride_divisible_by == (8, 1, 1)           # known strides need no divisor
    assert c.stride_lower_bound_incl == (0, None, None)  # ... nor a lower bound
    assert c.shape_constant == (None, 48, None) and c.shape_divisible_by == (16, 1, 32)
    assert c == _array(ct.float16, 3, stride_constant=(None, 64, 1), stride_divisible_by=(8, 1, 1),
                       shape_divisible_by=(16, 1, 32), shape_constant=(None, 48, None),
                       stride_lower_bound_incl=(0, 0, None), base_addr_divisible_by=16)


@pytest.mark.parametrize("kw, error, message", [
    ({"stride_constant": (None, 1), "stride_divisible_by": (1, 4)}, ValueError,
     r"stride_constant\[1\] is set to 1, which is not divisible by 4"),
    ({"shape_constant": (8, None), "shape_divisible_by": 16}, ValueError,
     r"shape_constant\[0\] is set to 8, which is not divisible by 16"),
    ({"stride_constant": (-4, 1), "stride_lower_bound_incl": 0}, ValueError,
     r"stride_lower_bound_incl\[0\] is set to -4, which is less than the lower bound 0"),
    ({"stride_constant": (1, 2, 3)}, ValueError, r"Length of `stride_constant` \(1, 2, 3\) doesn't match ndim=2"),
    ({"shape_constant": (-1, None)}, ValueError, r"Element #0 of `shape_constant` must be non-negative"),
    ({"shape_constant": (True, None)}, TypeError, r"Element #0 of `shape_constant` must be None or int"),
    ({"stride_divisible_by": 0}, TypeError, r"Element #0 of `stride_divisible_by` must be strictly positive"),
    ({"index_dtype": ct.int16}, ValueError, r"`index_dtype` must be int32 or int64, got int16"),
    ({"base_addr_divisible_by": 0}, ValueError, r"`base_addr_divisible_by` must be strictly positive"),
    ({"alias_groups": "a"}, TypeError, r"`alias_groups` cannot be a string"),
])
def test_array_constraint_rejects_inconsistent_assumptions(kw, error, message):
    with pytest.raises(error, match=message):
        _array(ct.float32, 2, **kw)


def test_other_constraints():
    with pytest.raises(TypeError, match="Expected a DType for the `dtype` parameter, got 'float32'"):
        ScalarConstraint("float32")
    with pytest.raises(TypeError, match="ListConstraint only supports an ArrayConstraint"):
        ListConstraint(ScalarConstraint(ct.int32), alias_groups=(), elements_may_alias=False)
    assert TupleConstraint([1, (2.0,)]).items == (ConstantConstraint(1), TupleConstraint([ConstantConstraint(2.0)]))
    # Constants are equal only with the same type and bits: 1, 1.0 and True differ; NaN equals itself.
    assert ConstantConstraint(1) != ConstantConstraint(1.0) != ConstantConstraint(True)
    assert ConstantConstraint(math.nan) == ConstantConstraint(math.nan)
    assert ConstantConstraint(0.0) != ConstantConstraint(-0.0)
    with pytest.raises(TypeError, match="Unexpected constant value type"):
        ConstantConstraint("x")


# ---- signatures ------------------------------------------------------------------------------------------------
def test_signature_shorthands_and_symbol():
    sig = KernelSignature([13, ScalarConstraint(ct.int32), (10, 2.5)], V2)
    assert sig.parameters == (ConstantConstraint(13), ScalarConstraint(ct.int32),
                              TupleConstraint([ConstantConstraint(10), ConstantConstraint(2.5)]))
    assert sig.symbol is None and sig.with_symbol("k_a").symbol == "k_a" and sig.with_symbol("k_a") != sig
    with pytest.raises(TypeError, match="`symbol` must be a string"):
        KernelSignature([], V1, symbol=3)
    with pytest.raises(TypeError, match="Unsupported calling convention"):
        KernelSignature([], "cutile_python_v1")
    with pytest.raises(TypeError, match="Can't interpret 'x' as a parameter constraint"):
        KernelSignature(["x"], V1)


def test_calling_convention_v1_has_no_tuples_or_static_shapes():
    with pytest.raises(ValueError, match=r"Tuple parameters are not supported by calling convention "
                                         r"cutile_python_v1; version >= 2 is required"):
        KernelSignature([(ScalarConstraint(ct.int32),)], V1)
    with pytest.raises(ValueError, match=r"Static array shapes are not supported by calling convention "
                                         r"cutile_python_v1; version >= 2 is required"):
        KernelSignature([_array(shape_constant=(8,))], V1)
    KernelSignature([_array(shape_constant=(8,)), (1,)], V2)


def test_alias_groups_are_checked_across_parameters():
    a = _array(alias_groups=("g",))
    KernelSignature([a, a], V1)
    with pytest.raises(ValueError, match="Alias group `g` is mentioned only once"):
        KernelSignature([a, _array()], V1)
    with pytest.raises(ValueError, match=r"Alias group `g` occurs more than once in the group list \['g', 'g'\]"):
        KernelSignature([_array(alias_groups=("g", "g")), a], V1)
    lst = ListConstraint(_array(), alias_groups=("g",), elements_may_alias=False)
    with pytest.raises(ValueError, match="used in two constraints of different types ArrayConstraint and "
                                         "ListConstraint"):
        KernelSignature([a, lst], V1)


@ct.kernel
def copy16(x, out, scale, n: ct.Constant[int]):
    ct.store(out, (0,), ct.load(x, (0,), (16,)) * scale)


@ct.kernel
def annotated(x: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(0,))], w: ct.IndexedWithInt64,
              xs, pair):
    pass


def test_from_kernel_args_states_what_tilecraft_specializes_on():
    buf = np.zeros(100, np.float32)
    x, out = buf[:64], np.zeros(64, np.float32)
    sig = KernelSignature.from_kernel_args(copy16, (x, out, 2.0, 7), V1)
    assert sig.calling_convention is V1 and sig.symbol is None
    ax, aout, scale, n = sig.parameters
    assert ax == _array(ct.float32, 1, stride_constant=(1,), shape_divisible_by=64, base_addr_divisible_by=16)
    assert aout == ax and scale == ScalarConstraint(ct.float32) and n == ConstantConstraint(7)

    # An array one element off 16 bytes, with a stride of 2, 1000 long: none of those facts.
    odd = np.zeros(2002, np.float32)[1::2]
    [c, *_] = KernelSignature.from_kernel_args(copy16, (odd, out, 2.0, 7), V1).parameters
    assert (c.base_addr_divisible_by, c.stride_constant, c.stride_divisible_by) == (1, (None,), (1,))
    assert c.shape_divisible_by == (1,)   # 1001: no power of two in 16..256 divides it

    # 2-D, a zero stride (a broadcast view), annotations, lists and tuples.
    m = np.broadcast_to(np.zeros((1, 48), np.float16), (32, 48))
    w = np.zeros((5, 32), np.int8)
    sig = KernelSignature.from_kernel_args(annotated, (m, w, [w, w], (1, 2.0)), V2)
    cm, cw, cl, ct_ = sig.parameters
    assert cm.shape_constant == (32, None) and cm.stride_constant == (None, 1) and cm.may_alias_internally
    assert cm.stride_divisible_by == (8, 1) and cm.shape_divisible_by == (1, 16)   # 16 bytes = 8 float16
    assert cw == _array(ct.int8, 2, index_dtype=ct.int64, stride_constant=(None, 1), stride_divisible_by=(16, 1),
                        shape_divisible_by=(1, 32), base_addr_divisible_by=16)
    # List elements get no facts: nothing is assumed about them.
    assert cl == ListConstraint(_array(ct.int8, 2, stride_lower_bound_incl=None, may_alias_internally=True),
                                alias_groups=(), elements_may_alias=True)
    assert ct_ == TupleConstraint([ScalarConstraint(ct.int32), ScalarConstraint(ct.float32)])
    with pytest.raises(ValueError, match="Static array shapes are not supported by calling convention "
                                         "cutile_python_v1"):
        KernelSignature.from_kernel_args(annotated, (m, w, [w], (1, 2.0)), V1)
    with pytest.raises(ct.TileArgumentError, match="Kernel expects 4 arguments but 1 was given"):
        KernelSignature.from_kernel_args(copy16, (x,), V1)


# ---- export ------------------------------------------------------------------------------------------------------
@ct.kernel
def fixed_length(x, out, k: ct.Constant[int]):
    ct.static_assert(x.shape[0] == 8, "x must hold 8 elements")
    ct.store(out, (0,), ct.load(x, (0,), (8,)) + k)


@ct.kernel
def mistyped(x, out):
    ct.store(out, (0,), ct.load(x, (0,), (8,)) + "text")


def test_export_compiles_every_signature_then_says_it_writes_nothing():
    good = KernelSignature([_array(shape_constant=(8,)), _array(), 3], V2)
    bad = KernelSignature([_array(shape_constant=(16,)), _array(), 3], V2)
    sink = io.BytesIO()
    with pytest.raises(ct.TileUnsupportedFeatureError, match=r"`fixed_length` compiled for all 1 signature\(s\), "
                                                             r"but tilecraft cannot write cubin output"):
        export_kernel(fixed_length, [good], sink, gpu_code="sm_90", output_format="cubin")
    assert sink.getvalue() == b""
    # The constraints reach the compiler: a compiled-in size of 16 fails the kernel's static_assert.
    with pytest.raises(ct.TileStaticAssertionError, match="x must hold 8 elements"):
        export_kernel(fixed_length, [good, bad], sink, gpu_code="sm_90", output_format="cubin")
    with pytest.raises(ct.TileTypeError, match=r"test_compilation.py"):
        export_kernel(mistyped, [KernelSignature([_array(), _array()], V1)], sink, gpu_code="sm_90",
                      output_format="cubin")
    with pytest.raises(ct.TileUnsupportedFeatureError, match="tileir_bytecode"):
        export_kernel(fixed_length, [good], sink, output_format="tileir_bytecode")


def test_export_checks_signatures_against_the_kernel():
    sink = io.BytesIO()

    def export(*params, **kw):
        kw = {"gpu_code": "sm_90", "output_format": "cubin", **kw}
        export_kernel(fixed_length, [KernelSignature(list(params), V2)], sink, **kw)

    with pytest.raises(ValueError, match="gpu_code is required when output_format is 'cubin'"):
        export(_array(), _array(), 3, gpu_code=None)
    with pytest.raises(ValueError, match="Unknown output format 'ptx'"):
        export(_array(), _array(), 3, output_format="ptx")
    with pytest.raises(TypeError, match="has 3 parameters but the signature gives 2 constraints"):
        export(_array(), _array())
    with pytest.raises(TypeError, match="'out': ConstantConstraint is only valid for parameters annotated as "
                                        "Constant"):
        export(_array(), 4, 3)
    with pytest.raises(TypeError, match="'k': a Constant parameter needs a ConstantConstraint, got ScalarConstraint"):
        export(_array(), _array(), ScalarConstraint(ct.int32))
    lst = ListConstraint(_array(), alias_groups=(), elements_may_alias=False)
    with pytest.raises(ct.TileUnsupportedFeatureError, match="'x': tilecraft compiles the length of a list"):
        export(lst, _array(), 3)


@ct.kernel
def sum_list(xs, out):
    acc = ct.zeros((16,), ct.float32)
    for i in range(len(xs)):
        acc = acc + ct.load(xs[i], (0,), (16,))
    ct.store(out, (0,), acc)


@ct.kernel
def bad_rank(x):
    ct.load(x, (0, 0), (2, 2, 4))


def test_export_of_signatures_from_launch_arguments_compiles_as_the_launch():
    xs, out = [np.zeros(16, np.float32)] * 3, np.zeros(16, np.float32)
    sig = KernelSignature.from_kernel_args(sum_list, (xs, out), V1)
    # The launch's list length travels with the signature (a ListConstraint has none).
    with pytest.raises(ct.TileUnsupportedFeatureError, match="compiled for all 1 signature"):
        export_kernel(sum_list, [sig.with_symbol("s")], io.BytesIO(), gpu_code="sm_90", output_format="cubin")
    with pytest.raises(ct.TileUnsupportedFeatureError, match="tilecraft compiles the length of a list"):
        export_kernel(sum_list, [KernelSignature(sig.parameters, V1)], io.BytesIO(), gpu_code="sm_90",
                      output_format="cubin")
    bad = KernelSignature.from_kernel_args(bad_rank, (np.zeros((4, 4), np.float32),), V1)
    with pytest.raises(ct.TileTypeError, match="test_compilation.py"):
        export_kernel(bad_rank, [bad], io.BytesIO(), gpu_code="sm_90", output_format="cubin")


def test_names_are_not_mangled():
    with pytest.raises(ct.TileUnsupportedFeatureError, match="exports no kernel binaries"):
        mangle_kernel_name("k", KernelSignature([], V1))
    with pytest.raises(ct.TileUnsupportedFeatureError, match="exports no kernel binaries"):
        demangle_kernel_name("k_Kt1")
