"""Reductions and scans: sum/prod/max/min/argmax/argmin and cumsum/cumprod.

Without options they are plain Reduce / Scan ops. A rounding mode or flush_to_zero makes them a
ReduceWith / ScanWith whose combine block is the one Binary op that carries the options.
NaN propagation of max/min/argmax/argmin is composed from plain reductions (or, with options,
is the combine function's).
"""

from __future__ import annotations

import math
from typing import Any

from ..ir import BinaryFn, Block, CompareFn, ReduceFn, ScanFn, UnaryFn, Value, ops
from ..ir.kinds import DIRECTED
from ..language import dtypes as dt
from ..language import ops as L
from ..language.dtypes import DType
from ..language.enums import RoundingMode
from .builtins import norm_axis, tile_of
from .registry import register
from .semantics import PLAIN, FloatOptions


_FOLDS: dict[Any, tuple[BinaryFn, float]] = {
    ReduceFn.SUM: (BinaryFn.ADD, -0.0), ReduceFn.PROD: (BinaryFn.MUL, 1.0),
    ReduceFn.MAX: (BinaryFn.MAX, -math.inf), ReduceFn.MIN: (BinaryFn.MIN, math.inf),
    ScanFn.CUMSUM: (BinaryFn.ADD, -0.0), ScanFn.CUMPROD: (BinaryFn.MUL, 1.0),
}
"""Reduction/scan -> (its binary function, identity) for a combine block that carries a
rounding mode or flush_to_zero (float operands only). The sum's identity is -0.0: 0.0 + -0.0
is +0.0 except under RM, where the identity is 0.0 instead (`_folded`)."""
_PROPAGATING = {BinaryFn.MAX: BinaryFn.MAX_NAN, BinaryFn.MIN: BinaryFn.MIN_NAN}
_ARG = (ReduceFn.ARGMAX, ReduceFn.ARGMIN)


def _folded(fc: Any, fn: Any, dtype: DType, fp: FloatOptions,
            propagate_nan: bool = False) -> tuple[tuple[float], Block]:
    """(identities, combine block) of a ReduceWith/ScanWith computing `fn` with `fp`."""
    op, identity = _FOLDS[fn]
    if propagate_nan:
        op = _PROPAGATING[op]
    if op is BinaryFn.ADD and fp.rounding is RoundingMode.RM:
        identity = 0.0
    return (identity,), fc.sema.combine_block(op, dtype, fp)


def _reduce_axes(fc: Any, t: Value, fn: ReduceFn, axes: list[int], keepdims: bool, fp: FloatOptions,
                 nan_wins: bool) -> Value:
    """Reduce `t` along `axes` (descending). Options go into a combine block (whose function
    also propagates NaN); plain reductions compose NaN propagation (`_nan_wins`)."""
    r = t
    for a in axes:
        if fp.given:
            ids, block = _folded(fc, fn, r.tile.dtype, fp, nan_wins)
            r = fc.b.emit(ops.ReduceWith, xs=(r,), axis=a, keepdims=keepdims, identities=ids, combine=block).result
        else:
            r = fc.b.value(ops.Reduce, fn=fn, x=r, axis=a, keepdims=keepdims)
    return _nan_wins(fc, t, fn, axes, keepdims, r) if nan_wins and not fp.given else r


def _nan_wins(fc: Any, t: Value, fn: ReduceFn, axes: list[int], keepdims: bool, r: Value) -> Value:
    """propagate_nan=True, composed from plain reductions: where a reduced slice of `t` holds a
    NaN, max/min give NaN and argmax/argmin the index of its first NaN instead of `r`."""
    s = fc.sema
    nan = s.cast(s.unary(UnaryFn.ISNAN, t), dt.int32)
    has = _reduce_axes(fc, nan, ReduceFn.MAX, axes, keepdims, PLAIN, False)
    has = s.compare(CompareFn.NE, has, 0)
    if fn in _ARG:
        return s.where(has, _reduce_axes(fc, nan, ReduceFn.ARGMAX, axes[:1], keepdims, PLAIN, False), r)
    return s.where(has, float("nan"), r)


def _reduce(fc: Any, fn: ReduceFn, name: str, x: Any, axis: Any, keepdims: Any, fp: FloatOptions,
            propagate_nan: Any) -> Value:
    """sum/prod/max/min/argmax/argmin over `axis` (None: all; a tuple but for arg-reductions)."""
    keepdims = fc.sema.const_bool(keepdims, "keepdims")
    propagate_nan = fc.sema.const_bool(propagate_nan, "propagate_nan")
    t = tile_of(fc, x)
    if t.tile.dtype.is_restricted:
        raise fc.sema.type_error(f"Non-arithmetic dtype {t.tile.dtype} is unsupported for reduction")
    if t.tile.dtype is dt.bool_:
        t = fc.sema.cast(t, dt.int32)
    fc.sema.check_float_options(fp, t.tile.dtype)
    ndim = t.tile.ndim
    if ndim == 0:
        return fc.sema.const(0, dt.int32) if fn in _ARG else t
    nan_wins = propagate_nan and fn not in (ReduceFn.SUM, ReduceFn.PROD) and t.tile.dtype.is_float
    if axis is None and fn in _ARG:
        flat = fc.sema.reshape(t, (math.prod(t.tile.shape),))
        r = _reduce_axes(fc, flat, fn, [0], False, fp, nan_wins)
        return fc.sema.reshape(r, (1,) * ndim) if keepdims else r
    if fn in _ARG and isinstance(axis, tuple):
        raise fc.sema.type_error(f"{name}() does not support a tuple of axes")
    axes = tuple(range(ndim)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    norm = sorted({norm_axis(fc, a, ndim) for a in axes}, reverse=True)
    if len(norm) != len(axes):
        repeated = next(a for a in axes if sum(norm_axis(fc, b, ndim) == norm_axis(fc, a, ndim) for b in axes) > 1)
        raise fc.sema.type_error(f"Repeated reduction axis {repeated}")
    return _reduce_axes(fc, t, fn, norm, keepdims, fp, nan_wins)


def _additive_reduction(fn: ReduceFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, /, axis: Any = None, *, keepdims: Any = False, rounding_mode: Any = None,
                flush_to_zero: Any = False) -> Value:
        fp = fc.sema.float_options(stub.__name__, DIRECTED, rounding_mode, flush_to_zero)
        return _reduce(fc, fn, stub.__name__, x, axis, keepdims, fp, False)
    register(stub, handler)


def _extremum(fn: ReduceFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, /, axis: Any = None, *, keepdims: Any = False, flush_to_zero: Any = False,
                propagate_nan: Any = False) -> Value:
        fp = fc.sema.float_options(stub.__name__, (), None, flush_to_zero)
        return _reduce(fc, fn, stub.__name__, x, axis, keepdims, fp, propagate_nan)
    register(stub, handler)


def _arg_extremum(fn: ReduceFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, /, axis: Any = None, *, keepdims: Any = False, propagate_nan: Any = False) -> Value:
        return _reduce(fc, fn, stub.__name__, x, axis, keepdims, PLAIN, propagate_nan)
    register(stub, handler)


_additive_reduction(ReduceFn.SUM, L.sum)
_additive_reduction(ReduceFn.PROD, L.prod)
_extremum(ReduceFn.MAX, L.max)
_extremum(ReduceFn.MIN, L.min)
_arg_extremum(ReduceFn.ARGMAX, L.argmax)
_arg_extremum(ReduceFn.ARGMIN, L.argmin)


def _scan(fn: ScanFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, /, axis: Any = 0, *, reverse: Any = False, rounding_mode: Any = None,
                flush_to_zero: Any = False) -> Value:
        name = stub.__name__
        fp = fc.sema.float_options(name, DIRECTED, rounding_mode, flush_to_zero)
        reverse = fc.sema.const_bool(reverse, "reverse")
        t = tile_of(fc, x)
        if axis is None:
            raise fc.sema.arg_error("Expected an integer constant, but given value has type None", param="axis")
        if t.tile.dtype.is_restricted:
            raise fc.sema.type_error(f"Non-arithmetic dtype {t.tile.dtype} is unsupported for scan")
        if t.tile.dtype is dt.bool_:
            t = fc.sema.cast(t, dt.int32)
        fc.sema.check_float_options(fp, t.tile.dtype)
        a = norm_axis(fc, axis, t.tile.ndim)
        if not fp.given:
            return fc.b.value(ops.Scan, fn=fn, x=t, axis=a, reverse=reverse)
        ids, block = _folded(fc, fn, t.tile.dtype, fp)
        return fc.b.emit(ops.ScanWith, xs=(t,), axis=a, reverse=reverse, identities=ids, combine=block).result
    register(stub, handler)


_scan(ScanFn.CUMSUM, L.cumsum)
_scan(ScanFn.CUMPROD, L.cumprod)
