"""Rules for constants, grid queries, casts and elementwise math.

Elementwise functions are NumPy ufuncs chosen at compile time; float16/bfloat16 operands are
computed in float32 and rounded back once per op. Whether a result needs a final cast to the IR
dtype is decided at compile time by probing the function on one-element inputs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ir import BinaryFn, CompareFn, Opcode, Operation, UnaryFn
from ...language.dtypes import DType
from .numerics import F32, HALVES, is_floating, make_cast, scalar
from .registry import BID_SLOT, NUM_BLOCKS_SLOT, Compiler, Env, Runner, rule

_UNARY: dict[UnaryFn, Callable[[Any], Any]] = {
    UnaryFn.NEG: np.negative, UnaryFn.ABS: np.abs, UnaryFn.NOT: np.invert,
    UnaryFn.EXP: np.exp, UnaryFn.EXP2: np.exp2, UnaryFn.LOG: np.log, UnaryFn.LOG2: np.log2,
    UnaryFn.SQRT: np.sqrt, UnaryFn.RSQRT: lambda x: np.reciprocal(np.sqrt(x)),
    UnaryFn.SIN: np.sin, UnaryFn.COS: np.cos, UnaryFn.TAN: np.tan, UnaryFn.SINH: np.sinh,
    UnaryFn.COSH: np.cosh, UnaryFn.TANH: np.tanh, UnaryFn.FLOOR: np.floor, UnaryFn.CEIL: np.ceil,
    UnaryFn.ISNAN: np.isnan,
}

_BINARY: dict[BinaryFn, Callable[[Any, Any], Any]] = {
    BinaryFn.ADD: np.add, BinaryFn.SUB: np.subtract, BinaryFn.MUL: np.multiply,
    BinaryFn.TRUEDIV: np.true_divide, BinaryFn.FLOORDIV: np.floor_divide,
    BinaryFn.MOD: np.remainder, BinaryFn.POW: np.power,
    BinaryFn.MIN: np.fmin, BinaryFn.MAX: np.fmax,
    BinaryFn.MIN_NAN: np.minimum, BinaryFn.MAX_NAN: np.maximum,
    BinaryFn.AND: np.bitwise_and, BinaryFn.OR: np.bitwise_or, BinaryFn.XOR: np.bitwise_xor,
    BinaryFn.SHL: np.left_shift, BinaryFn.SHR: np.right_shift, BinaryFn.ATAN2: np.arctan2,
}


def _float_floordiv(x: Any, y: Any) -> Any:
    """Float `//` is floor(x / y) (not NumPy's fmod-based floor_divide)."""
    return np.floor(np.true_divide(x, y))


_COMPARE: dict[CompareFn, Callable[[Any, Any], Any]] = {
    CompareFn.EQ: np.equal, CompareFn.NE: np.not_equal, CompareFn.LT: np.less,
    CompareFn.LE: np.less_equal, CompareFn.GT: np.greater, CompareFn.GE: np.greater_equal,
}


def lift(fn: Callable[..., Any], ins: list[DType], out: DType) -> Callable[..., Any]:
    """`fn` made exact for the IR: halves computed in float32, the result in the `out` dtype."""
    if any(d in HALVES for d in ins):
        raw = fn
        if len(ins) == 1:
            def fn(x):
                return raw(x.astype(F32))
        else:
            def fn(x, y):
                return raw(x.astype(F32), y.astype(F32))
    with np.errstate(all="ignore"):
        probe = np.asarray(fn(*[np.ones(1, d.np_dtype) for d in ins]))
    if probe.dtype == out.np_dtype:
        return fn
    inner, dt = fn, out.np_dtype

    def cast(*xs):
        return inner(*xs).astype(dt)
    return cast


def _unary(f: Callable[[Any], Any], op: Operation, c: Compiler) -> Runner:
    x, r = c.slot(op.operands[0]), c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = f(env[x])
    return run


def _binary(f: Callable[[Any, Any], Any], op: Operation, c: Compiler) -> Runner:
    (x, y), r = c.slots(op.operands), c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = f(env[x], env[y])
    return run


@rule(Opcode.CONST)
def _const(op: Operation, c: Compiler) -> Runner:
    t = op.result.tile
    value = scalar(op.attrs["value"], t.dtype)
    if t.shape:
        value = np.full(t.shape, value, dtype=value.dtype)
        value.flags.writeable = False
    r = c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = value
    return run


def _grid_query(opcode: Opcode, base_slot: int) -> None:
    """BID / NUM_BLOCKS: copy the launch's per-axis value from its reserved slot."""
    @rule(opcode)
    def compile_op(op: Operation, c: Compiler) -> Runner:
        src, r = base_slot + op.attrs["axis"], c.slot(op.result)

        def run(env: Env) -> None:
            env[r] = env[src]
        return run


_grid_query(Opcode.BID, BID_SLOT)
_grid_query(Opcode.NUM_BLOCKS, NUM_BLOCKS_SLOT)


@rule(Opcode.ARANGE)
def _arange(op: Operation, c: Compiler) -> Runner:
    value = np.arange(op.attrs["size"], dtype=op.result.tile.dtype.np_dtype)
    value.flags.writeable = False
    r = c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = value
    return run


@rule(Opcode.CAST)
def _cast(op: Operation, c: Compiler) -> Runner:
    conv = make_cast(op.operands[0].tile.dtype, op.attrs["dtype"], op.attrs.get("rounding"))
    return _unary(conv, op, c)


@rule(Opcode.BITCAST)
def _bitcast(op: Operation, c: Compiler) -> Runner:
    dt = op.attrs["dtype"].np_dtype
    return _unary(lambda x: np.asarray(x).view(dt), op, c)


@rule(Opcode.UNARY)
def _unary_rule(op: Operation, c: Compiler) -> Runner:
    src = op.operands[0].tile.dtype
    return _unary(lift(_UNARY[op.attrs["fn"]], [src], op.result.tile.dtype), op, c)


@rule(Opcode.BINARY)
def _binary_rule(op: Operation, c: Compiler) -> Runner:
    fn, dtype = op.attrs["fn"], op.operands[0].tile.dtype
    f = _float_floordiv if fn is BinaryFn.FLOORDIV and is_floating(dtype) else _BINARY[fn]
    return _binary(lift(f, [dtype, dtype], op.result.tile.dtype), op, c)


@rule(Opcode.COMPARE)
def _compare(op: Operation, c: Compiler) -> Runner:
    return _binary(_COMPARE[op.attrs["fn"]], op, c)


@rule(Opcode.WHERE)
def _where(op: Operation, c: Compiler) -> Runner:
    (cond, x, y), r = c.slots(op.operands), c.slot(op.result)
    where = np.where

    def run(env: Env) -> None:
        env[r] = where(env[cond], env[x], env[y])
    return run
