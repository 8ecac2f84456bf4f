"""Tile IR on its own: the verifier rejects what backends must never see; the printer shows types
and source lines; every public op is registered with the front end."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.errors import TileInternalError
from tilecraft.frontend import ArraySpec, ConstSpec, compile_kernel
from tilecraft.frontend.registry import HANDLERS
from tilecraft.ir import (BinaryFn, Block, Builder, Function, Opcode, TileType, Value, format_function,
                          verify)
from tilecraft.language import dtypes as dt
from tilecraft.language.ops import STUBS


def _function(build) -> Function:
    b = Builder()
    fn = Function("k", [], [], Block(), None)
    with b.inside(fn.body):
        build(b)
    return fn


def test_verifier_rejects_mismatched_binary_operands():
    def build(b):
        x = b.value(Opcode.CONST, [], TileType(dt.float32), value=1.0)
        y = b.value(Opcode.CONST, [], TileType(dt.float16), value=1.0)
        b.value(Opcode.BINARY, [x, y], TileType(dt.float32), fn=BinaryFn.ADD)
    with pytest.raises(TileInternalError, match="operand dtypes differ"):
        verify(_function(build))


def test_verifier_rejects_use_before_definition():
    def build(b):
        ghost = Value(TileType(dt.int32))
        b.value(Opcode.BINARY, [ghost, ghost], TileType(dt.int32), fn=BinaryFn.ADD)
    with pytest.raises(TileInternalError, match="used before it is defined"):
        verify(_function(build))


def test_verifier_checks_yield_types():
    def build(b):
        c = b.value(Opcode.CONST, [], TileType(dt.bool_), value=True)
        then, other = Block(), Block()
        with b.inside(then):
            b.emit(Opcode.YIELD, [b.value(Opcode.CONST, [], TileType(dt.int32), value=1)], [])
        with b.inside(other):
            b.emit(Opcode.YIELD, [b.value(Opcode.CONST, [], TileType(dt.float32), value=1.0)], [])
        b.emit(Opcode.IF, [c], [TileType(dt.int32)], blocks=[then, other])
    with pytest.raises(TileInternalError, match="yield types"):
        verify(_function(build))


def scale(a, b, F: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(16,)) * F)


def test_printer_shows_types_constants_and_lines():
    text = format_function(compile_kernel(scale, [ArraySpec(dt.float32, 1)] * 2 + [ConstSpec.of(3)], {}))
    assert "kernel @scale(a %" in text and "array<1d x f32>" in text
    assert "load[shape=(16), order=(0), padding=undetermined]" in text
    assert "const[value=3.0] : f32" in text  # the Constant folded into the IR
    assert "test_ir.py:" in text


def test_kernel_ir_method_matches_the_arguments():
    k = ct.kernel(scale)
    assert "array<1d x f16>" in k.ir(np.zeros(4, np.float16), np.zeros(4, np.float16), 2)


def test_every_public_op_has_a_front_end_handler():
    missing = [s.__name__ for s in STUBS if s not in HANDLERS
               and s.__name__ not in ("static_eval", "static_assert")]  # handled on the AST
    assert not missing, missing
