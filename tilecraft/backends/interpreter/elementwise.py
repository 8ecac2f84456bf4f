"""Rules for constants, grid queries, casts and elementwise math.

Elementwise functions are NumPy ufuncs chosen at compile time; float16/bfloat16 operands are
computed in float32 and rounded back once per op. Whether a result needs a final cast to the IR
dtype is decided at compile time by probing the function on one-element inputs.

Directed rounding (RZ/RM/RP on ADD/SUB/MUL/TRUEDIV and SQRT) and flush_to_zero use the
correctly rounded algorithms of `rounding`; RN, FULL and APPROX take the default path (full
precision satisfies APPROX), but for float32 APPROX division, which multiplies by the rounded
reciprocal (`ir.kinds.divides_by_reciprocal`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from ...ir import BinaryFn, CompareFn, UnaryFn, ops
from ...ir.kinds import NON_NEAREST, divides_by_reciprocal
from ...language import dtypes as D
from ...language.dtypes import DType
from .numerics import F32, F64, HALVES, fused_multiply_add, is_floating, make_cast, scalar
from .registry import BID_SLOT, NUM_BLOCKS_SLOT, Compiler, Env, Runner, kind_table, rule
from .rounding import flush_subnormals, rounded_binary, rounded_sqrt


def _order_zeros(fn: Callable[[Any, Any], Any], x: Any, y: Any, *, lowest: bool) -> Any:
    """`fn(x, y)` for a NumPy minimum (`lowest`) or maximum, with -0.0 below +0.0 as PTX
    min/max order them: of two equal operands NumPy returns either, so min(0.0, -0.0) was
    +0.0 or -0.0 by operand order (and by array length, through its SIMD loops)."""
    r = fn(x, y)
    if np.asarray(r).dtype.kind != "f":
        return r
    keep_x = np.signbit(x) if lowest else ~np.signbit(x)
    return np.where(x == y, np.where(keep_x, x, y), r)


def _power(x: Any, y: Any) -> Any:
    """np.power with C99's pow(-0.0, 0.5) = +0.0 and pow(-inf, 0.5) = +inf (CUDA's and
    Triton's pow): NumPy takes sqrt for an exponent of 0.5 it sees as a scalar (a 0-d
    operand, or a broadcast one), which gave -0.0 and NaN there."""
    r = np.power(x, y)
    if np.asarray(r).dtype.kind != "f":
        return r
    return np.where((y == 0.5) & ((x == 0) | (x == -np.inf)), np.abs(x), r)


_UNARY: dict[UnaryFn, Callable[[Any], Any]] = kind_table(UnaryFn, {
    UnaryFn.NEG: np.negative, UnaryFn.ABS: np.abs, UnaryFn.NOT: np.invert,
    UnaryFn.EXP: np.exp, UnaryFn.EXP2: np.exp2, UnaryFn.LOG: np.log, UnaryFn.LOG2: np.log2,
    UnaryFn.SQRT: np.sqrt, UnaryFn.RSQRT: lambda x: np.reciprocal(np.sqrt(x)),
    UnaryFn.SIN: np.sin, UnaryFn.COS: np.cos, UnaryFn.TAN: np.tan, UnaryFn.SINH: np.sinh,
    UnaryFn.COSH: np.cosh, UnaryFn.TANH: np.tanh, UnaryFn.FLOOR: np.floor, UnaryFn.CEIL: np.ceil,
    UnaryFn.ISNAN: np.isnan,
})

_BINARY: dict[BinaryFn, Callable[[Any, Any], Any]] = kind_table(BinaryFn, {
    BinaryFn.ADD: np.add, BinaryFn.SUB: np.subtract, BinaryFn.MUL: np.multiply,
    BinaryFn.TRUEDIV: np.true_divide, BinaryFn.FLOORDIV: np.floor_divide,
    BinaryFn.MOD: np.remainder, BinaryFn.POW: _power,
    BinaryFn.MIN: partial(_order_zeros, np.fmin, lowest=True),
    BinaryFn.MAX: partial(_order_zeros, np.fmax, lowest=False),
    BinaryFn.MIN_NAN: partial(_order_zeros, np.minimum, lowest=True),
    BinaryFn.MAX_NAN: partial(_order_zeros, np.maximum, lowest=False),
    BinaryFn.AND: np.bitwise_and, BinaryFn.OR: np.bitwise_or, BinaryFn.XOR: np.bitwise_xor,
    BinaryFn.SHL: np.left_shift, BinaryFn.SHR: np.right_shift, BinaryFn.ATAN2: np.arctan2,
})


def _float_floordiv(dtype: DType) -> Callable[[Any, Any], Any]:
    """Float `//`: the quotient rounded to `dtype`, then its floor (cuTile divides in the
    dtype, then floors; not NumPy's fmod-based floor_divide)."""
    divide, floor = lift(np.true_divide, [dtype, dtype], dtype), lift(np.floor, [dtype], dtype)
    return lambda x, y: floor(divide(x, y))


_COMPARE: dict[CompareFn, Callable[[Any, Any], Any]] = kind_table(CompareFn, {
    CompareFn.EQ: np.equal, CompareFn.NE: np.not_equal, CompareFn.LT: np.less,
    CompareFn.LE: np.less_equal, CompareFn.GT: np.greater, CompareFn.GE: np.greater_equal,
})


_NARROW_FLOATS = (D.float16, D.bfloat16, D.float32)
_VIA_FLOAT64 = {UnaryFn.TAN, UnaryFn.SINH, UnaryFn.COSH, UnaryFn.TANH, BinaryFn.POW, BinaryFn.ATAN2}
"""Math the GPU takes from libdevice: on float32 and narrower operands computed in float64 and
rounded once, as the Triton backend's stand-ins under Triton's CPU interpreter compute it
(NumPy's float32 pow and atan2 miss the correctly rounded result by a unit in the last place
in about one case of six, so the two CPU backends disagreed)."""


def _via_float64(fn: Callable[..., Any], out: DType) -> Callable[..., Any]:
    """`fn` on the operands widened to float64, its result rounded once to `out`."""
    cast = make_cast(D.float64, out)

    def wide(*xs: Any) -> Any:
        with np.errstate(all="ignore"):
            return cast(fn(*[np.asarray(x, F64) for x in xs]))
    return wide


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




def _flushing(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with subnormal inputs and results flushed to zero of the same sign (float32)."""
    def flushed(*xs: Any) -> Any:
        return flush_subnormals(fn(*[flush_subnormals(x) for x in xs]))
    return flushed


def _unary(f: Callable[[Any], Any], x: int, r: int) -> Runner:
    def run(env: Env) -> None:
        env[r] = f(env[x])
    return run


def _binary(f: Callable[[Any, Any], Any], x: int, y: int, r: int) -> Runner:
    def run(env: Env) -> None:
        env[r] = f(env[x], env[y])
    return run


@rule(ops.Const)
def _const(op: ops.Const, c: Compiler) -> Runner:
    t = op.result.tile
    value = scalar(op.value, t.dtype)
    if t.shape:
        value = np.full(t.shape, value, dtype=value.dtype)
        value.flags.writeable = False
    r = c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = value
    return run


def _grid_query(cls: type[ops.Bid | ops.NumBlocks], base_slot: int) -> None:
    """Bid / NumBlocks: copy the launch's per-axis value from its reserved slot."""
    @rule(cls)
    def compile_op(op: ops.Bid | ops.NumBlocks, c: Compiler) -> Runner:
        src, r = base_slot + op.axis, c.slot(op.result)

        def run(env: Env) -> None:
            env[r] = env[src]
        return run


_grid_query(ops.Bid, BID_SLOT)
_grid_query(ops.NumBlocks, NUM_BLOCKS_SLOT)


@rule(ops.Arange)
def _arange(op: ops.Arange, c: Compiler) -> Runner:
    value = np.arange(op.size, dtype=op.result.tile.dtype.np_dtype)
    value.flags.writeable = False
    r = c.slot(op.result)

    def run(env: Env) -> None:
        env[r] = value
    return run


@rule(ops.Cast)
def _cast(op: ops.Cast, c: Compiler) -> Runner:
    return _unary(make_cast(op.x.tile.dtype, op.dtype, op.rounding), c.slot(op.x), c.slot(op.result))


@rule(ops.Bitcast)
def _bitcast(op: ops.Bitcast, c: Compiler) -> Runner:
    dt = op.dtype.np_dtype
    return _unary(lambda x: np.asarray(x).view(dt), c.slot(op.x), c.slot(op.result))


@rule(ops.Unary)
def _unary_rule(op: ops.Unary, c: Compiler) -> Runner:
    dtype, mode = op.x.tile.dtype, op.rounding
    if op.fn in _VIA_FLOAT64 and dtype in _NARROW_FLOATS:
        f = _via_float64(_UNARY[op.fn], op.result.tile.dtype)
    elif mode not in NON_NEAREST:
        f = lift(_UNARY[op.fn], [dtype], op.result.tile.dtype)
    else:  # a directed rounding: SQRT only (the verifier's rule)
        assert op.fn is UnaryFn.SQRT, op.fn

        def f(x: Any) -> Any:
            return rounded_sqrt(x, dtype, mode)
    if op.flush_to_zero:
        f = _flushing(f)
    return _unary(f, c.slot(op.x), c.slot(op.result))


def _reciprocal_divide(flush: bool) -> Callable[[Any, Any], Any]:
    """float32 RN(x * RN(1 / y)), the reciprocal flushed with `flush` (divides_by_reciprocal)."""
    def f(x: Any, y: Any) -> Any:
        r = np.float32(1) / np.asarray(y, np.float32)
        return np.asarray(x, np.float32) * (flush_subnormals(r) if flush else r)
    return f


@rule(ops.Binary)
def _binary_rule(op: ops.Binary, c: Compiler) -> Runner:
    fn, dtype, mode = op.fn, op.lhs.tile.dtype, op.rounding
    if divides_by_reciprocal(fn, dtype, mode):
        f = _reciprocal_divide(op.flush_to_zero)
    elif fn in _VIA_FLOAT64 and dtype in _NARROW_FLOATS:
        f = _via_float64(_BINARY[fn], op.result.tile.dtype)
    elif mode not in NON_NEAREST:
        if fn is BinaryFn.FLOORDIV and is_floating(dtype):
            f = _float_floordiv(dtype)
        else:
            f = lift(_BINARY[fn], [dtype, dtype], op.result.tile.dtype)
    else:  # a directed rounding of ADD/SUB/MUL/TRUEDIV
        def f(x: Any, y: Any) -> Any:
            return rounded_binary(fn, x, y, dtype, mode)
    if op.flush_to_zero:
        f = _flushing(f)
    return _binary(f, c.slot(op.lhs), c.slot(op.rhs), c.slot(op.result))


@rule(ops.Fma)
def _fma(op: ops.Fma, c: Compiler) -> Runner:
    a, b, z, r = c.slots((op.a, op.b, op.c, op.result))
    dtype, negate_product, negate_addend = op.a.tile.dtype, op.negate_product, op.negate_addend

    def run(env: Env) -> None:
        x, y, w = env[a], env[b], env[z]
        env[r] = fused_multiply_add(np.negative(x) if negate_product else x, y,
                                    np.negative(w) if negate_addend else w, dtype)
    return run


@rule(ops.Compare)
def _compare(op: ops.Compare, c: Compiler) -> Runner:
    return _binary(_COMPARE[op.fn], c.slot(op.lhs), c.slot(op.rhs), c.slot(op.result))


@rule(ops.Where)
def _where(op: ops.Where, c: Compiler) -> Runner:
    cond, x, y, r = c.slots((op.cond, op.x, op.y, op.result))
    where = np.where

    def run(env: Env) -> None:
        env[r] = where(env[cond], env[x], env[y])
    return run
