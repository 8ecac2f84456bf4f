"""Tile IR on its own: every op is a complete typed declaration; the verifier rejects what
backends must never see; the printer shows types and source lines; every public op is
registered with the front end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.errors import TileInternalError
from tilecraft.frontend import ArraySpec, ConstSpec, compile_kernel
from tilecraft.frontend.registry import HANDLERS
from tilecraft.ir import (OP_CLASSES, BinaryFn, Block, Builder, Function, Op, TileType, format_function, ops,
                          verify)
from tilecraft.ir.core import attribute_hints
from tilecraft.ir.types import ArrayType
from tilecraft.language import dtypes as dt
from tilecraft.language.enums import MemoryOrder, MemoryScope
from tilecraft.language.ops import STUBS


def _function(build) -> Function:
    b = Builder()
    fn = Function("k", [], [], Block(), None)
    with b.inside(fn.body):
        build(b)
    return fn


def _const(b: Builder, value, dtype=dt.float32):
    return b.value(ops.Const, value=value, dtype=dtype)


@pytest.mark.parametrize("cls", OP_CLASSES, ids=lambda c: c.__name__)
def test_every_op_is_a_frozen_documented_declaration(cls):
    assert issubclass(cls, Op) and cls.__doc__ and cls.__doc__.strip()
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    hints = attribute_hints(cls)
    assert set(hints) == set(cls._attr_fields)
    assert all(h is not dict and getattr(h, "__origin__", None) is not dict for h in hints.values())
    fields = cls._operand_fields + cls._block_fields + cls._attr_fields
    assert len(fields) == len(set(fields)) == len(dataclasses.fields(cls)) - 2  # + results, loc


def test_op_classes_have_distinct_printed_names():
    names = [c.__name__ for c in OP_CLASSES]
    assert len(set(names)) == len(names) and {"Load", "For", "Yield", "Mma"} <= set(names)


def test_builder_gives_results_from_the_typing_rule_and_ids_per_function():
    b1, b2 = Builder(), Builder()
    for b in (b1, b2):
        blk = Block()
        with b.inside(blk):
            x = _const(b, 1.0)
            y = b.value(ops.Binary, fn=BinaryFn.ADD, lhs=x, rhs=x)
        assert (x.id, y.id) == (0, 1)  # stable per function, not a process-wide counter
        assert y.type == TileType(dt.float32)
    assert blk.ops[1].operands == (x, x)


def test_ops_are_frozen():
    b = Builder()
    with b.inside(Block()):
        op = b.emit(ops.Const, value=2, dtype=dt.int32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.value = 3


def test_verifier_rejects_mismatched_binary_operands():
    def build(b):
        x, y = _const(b, 1.0), _const(b, 1.0, dt.float16)
        b.value(ops.Binary, fn=BinaryFn.ADD, lhs=x, rhs=y)
    with pytest.raises(TileInternalError, match="operand types differ"):
        verify(_function(build))


def test_verifier_rejects_use_before_definition():
    def build(b):
        ghost = b.new_value(TileType(dt.int32))
        b.value(ops.Binary, fn=BinaryFn.ADD, lhs=ghost, rhs=ghost)
    with pytest.raises(TileInternalError, match="used before it is defined"):
        verify(_function(build))


def test_verifier_checks_yield_types():
    def build(b):
        c = _const(b, True, dt.bool_)
        then, other = Block(), Block()
        with b.inside(then):
            b.emit(ops.Yield, values=(_const(b, 1, dt.int32),))
        with b.inside(other):
            b.emit(ops.Yield, values=(_const(b, 1.0),))
        b.emit(ops.If, cond=c, then=then, orelse=other)
    with pytest.raises(TileInternalError, match="both branches yield the same types"):
        verify(_function(build))


def test_verifier_checks_attribute_types_and_values():
    def wrong_type(b):
        b.value(ops.Bid, axis="0")

    def out_of_range(b):
        b.value(ops.Bid, axis=3)

    def bad_rounding(b):
        x = _const(b, 1, dt.int32)
        b.value(ops.Binary, fn=BinaryFn.ADD, lhs=x, rhs=x, rounding=ct.RoundingMode.RZ)

    for build, match in ((wrong_type, "attribute axis='0'"), (out_of_range, "axis 3 out of range"),
                         (bad_rounding, "needs float operands")):
        with pytest.raises(TileInternalError, match=match):
            verify(_function(build))


def test_verifier_checks_memory_ops():
    def store_wrong_dtype(b):
        arr = b.new_value(ArrayType(dt.float16, 1))
        i = _const(b, 0, dt.int32)
        b.emit(ops.Store, array=arr, index=(i,), tile=_const(b, 1.0), order=(0,))

    def acquire_store(b):
        arr = b.new_value(ArrayType(dt.float32, 1))
        i = _const(b, 0, dt.int32)
        b.emit(ops.Store, array=arr, index=(i,), tile=_const(b, 1.0), order=(0,),
               memory_order=MemoryOrder.ACQUIRE, memory_scope=MemoryScope.DEVICE)

    for build, match in ((store_wrong_dtype, "differs from the array dtype"), (acquire_store, "not allowed")):
        fn = _function(build)
        with pytest.raises(TileInternalError, match=match):
            _check_block_only(fn)


def _check_block_only(fn: Function) -> None:
    """Verify a function whose ops use arrays that are not its parameters (hand-built tests)."""
    fn.params.extend(v for op in fn.walk() for v in op.operands if isinstance(v.type, ArrayType))
    verify(fn)


def test_builder_reports_a_typing_rule_failure_as_internal_error():
    b = Builder()
    with b.inside(Block()), pytest.raises(TileInternalError, match="cannot build Permute"):
        b.value(ops.Permute, x=_const(b, 1.0), axes=(0,))


def scale(a, b, F: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(16,)) * F)


def test_printer_shows_types_constants_and_lines():
    text = format_function(compile_kernel(scale, [ArraySpec(dt.float32, 1)] * 2 + [ConstSpec.of(3)], {}))
    assert "kernel @scale(a %" in text and "array<1d x f32>" in text
    assert "load[shape=(16), order=(0)]" in text  # default attributes are left out
    assert "const[value=3.0, dtype=float32] : f32" in text  # the Constant folded into the IR
    assert "test_ir.py:" in text


def test_kernel_ir_method_matches_the_arguments():
    k = ct.kernel(scale)
    assert "array<1d x f16>" in k.ir(np.zeros(4, np.float16), np.zeros(4, np.float16), 2)


def test_every_public_op_has_a_front_end_handler():
    missing = [s.__name__ for s in STUBS if s not in HANDLERS
               and s.__name__ not in ("static_eval", "static_assert")]  # handled on the AST
    assert not missing, missing
