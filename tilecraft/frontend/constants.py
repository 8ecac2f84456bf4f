"""What a scalar's value is at compile time where its ops say so: strictly typed constants
(`ct.int16(2)`, and `n + ct.int16(2)` for a Constant `n`) folded in their dtype, as cuTile folds
them, for the places that need a Python value: `ct.static_assert`, and `float()`, `int()`,
`bool()` or another host function called on one (which gives a loosely typed constant). The
IR keeps its ops; only these places read the folded value.

Folded: Const; Cast between bool, integers and float16 / bfloat16 / float32 / float64 (to
nearest; a float into an integer only where finite and in range); + - * & | ^ and the
comparisons on those dtypes (to nearest, no flush_to_zero); negation. NumPy computes them in
the operands' dtype: integers wrap as on every backend, and float16 / bfloat16 arithmetic, which
NumPy does in float32 and rounds once more, is still correctly rounded (float32 holds more than
twice their digits plus two). Anything else folds to None: not known.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from ..ir import BinaryFn, CompareFn, Op, TileType, UnaryFn, Value, ops
from ..language import dtypes as dt
from ..language.enums import RoundingMode

_DTYPES = frozenset((dt.bool_, dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64,
                     dt.float16, dt.bfloat16, dt.float32, dt.float64))

_BINARY: dict[BinaryFn, Callable[[Any, Any], Any]] = {
    BinaryFn.ADD: operator.add, BinaryFn.SUB: operator.sub, BinaryFn.MUL: operator.mul,
    BinaryFn.AND: operator.and_, BinaryFn.OR: operator.or_, BinaryFn.XOR: operator.xor}
_COMPARE: dict[CompareFn, Callable[[Any, Any], Any]] = {
    CompareFn.EQ: operator.eq, CompareFn.NE: operator.ne, CompareFn.LT: operator.lt,
    CompareFn.LE: operator.le, CompareFn.GT: operator.gt, CompareFn.GE: operator.ge}


def known_value(defs: dict[int, Op], v: Any) -> bool | int | float | None:
    """`v`'s value as a Python number where its defining ops (`defs`: value id -> op) fold, else
    None (also for anything but a 0-d tile of a folded dtype)."""
    x = _fold(defs, v)
    return None if x is None else x.item()


def _nearest(rounding: RoundingMode | None) -> bool:
    return rounding in (None, RoundingMode.RN)


def _fold(defs: dict[int, Op], v: Any) -> np.generic | None:
    if not (isinstance(v, Value) and isinstance(v.type, TileType) and v.type.shape == () and v.type.dtype in _DTYPES):
        return None
    op = defs.get(v.id)
    out = v.type.dtype.np_dtype
    with np.errstate(all="ignore"):
        if isinstance(op, ops.Const):
            return np.array(op.value).astype(out)[()]
        if isinstance(op, ops.Cast) and _nearest(op.rounding):
            x = _fold(defs, op.x)
            if x is None or (np.issubdtype(out, np.integer) and not _fits(x, out)):
                return None
            return np.array(x).astype(out)[()]
        if isinstance(op, ops.Unary) and op.fn is UnaryFn.NEG and _nearest(op.rounding) and not op.flush_to_zero:
            x = _fold(defs, op.x)
            return None if x is None else np.negative(x)
        if isinstance(op, ops.Binary) and _nearest(op.rounding) and not op.flush_to_zero:
            return _binary(op.fn, _fold(defs, op.lhs), _fold(defs, op.rhs), out)
        if isinstance(op, ops.Compare) and op.fn in _COMPARE:
            a, b = _fold(defs, op.lhs), _fold(defs, op.rhs)
            return None if a is None or b is None else np.bool_(_COMPARE[op.fn](a, b))
    return None


def _binary(fn: BinaryFn, a: np.generic | None, b: np.generic | None, out: np.dtype) -> np.generic | None:
    if a is None or b is None or fn not in _BINARY:
        return None
    if fn in (BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR) and not isinstance(a, (np.integer, np.bool_)):
        return None
    return np.array(_BINARY[fn](a, b)).astype(out)[()]


def _fits(x: np.generic, dtype: np.dtype) -> bool:
    """Whether `x` converts to the integer `dtype` by the rules every backend shares: an
    integer wraps; a float must be finite and truncate into the range."""
    if isinstance(x, (np.integer, np.bool_)):
        return True
    f = float(x)
    if not math.isfinite(f):
        return False
    info = np.iinfo(dtype)
    return info.min <= math.trunc(f) <= info.max
