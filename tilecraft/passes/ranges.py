"""Lower-bound analysis: which integer values can never be negative (or are at least 1).

Backends use it to emit plain `//` and `%` where Python's rounding toward -inf and C's rounding
toward zero agree (both operands non-negative), instead of the sign fix-ups Python semantics
need otherwise, and to leave unguarded a loop step known positive (triton/control.py
`loop_bounds`). Block ids, array sizes, tile counts (`(size + t - 1) // t`) and loop counters
over them all qualify. Integer arithmetic is assumed not to overflow (index arithmetic stays
far below 2**31 on arrays that fit int32 offsets).
"""

from __future__ import annotations

from ..ir import BinaryFn, Function, Op, ops

_SOURCES: dict[type[Op], int] = {ops.Bid: 0, ops.NumBlocks: 1, ops.ArrayShape: 0, ops.Arange: 0}
"""Ops whose (integer) result has a known lower bound whatever their operands."""
_SHAPE_OPS = (ops.Broadcast, ops.Reshape, ops.Permute)
_BITWISE = {BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR, BinaryFn.SHR}


def _binary_bound(fn: BinaryFn, x: int | None, y: int | None, y_const: int | None) -> int | None:
    """Lower bound of `x fn y` from the operands' lower bounds (None: unknown)."""
    if fn is BinaryFn.MAX:
        known = [b for b in (x, y) if b is not None]
        return max(known) if known else None
    if x is None:
        return None
    if fn is BinaryFn.SUB:
        return x - y_const if y_const is not None else None
    if y is None:
        return None
    if fn is BinaryFn.ADD:
        return x + y
    if fn is BinaryFn.MIN:
        return min(x, y)
    if x < 0 or y < 0:
        return None
    if fn is BinaryFn.MUL:
        return x * y
    if fn in (BinaryFn.FLOORDIV, BinaryFn.MOD) or fn in _BITWISE:
        return 0
    return None


def _result_bound(op: Op, bounds: dict[int, int], consts: dict[int, int]) -> int | None:
    """Lower bound of single-result `op` (None: unknown); records integer constants in `consts`."""
    if type(op) in _SOURCES:
        return _SOURCES[type(op)]
    if isinstance(op, ops.Const):
        if not isinstance(op.value, (bool, int)):
            return None
        consts[op.result.id] = int(op.value)
        return int(op.value)
    if isinstance(op, _SHAPE_OPS):
        return bounds.get(op.x.id)
    if isinstance(op, ops.Cast):  # widening an integer (or not changing it) keeps its value
        src, dst = op.x.tile.dtype, op.result.tile.dtype
        widening = src.is_int and dst.is_int and (dst.bitwidth > src.bitwidth or dst is src)
        return bounds.get(op.x.id) if widening else None
    if isinstance(op, ops.Binary) and op.result.tile.dtype.is_int:
        return _binary_bound(op.fn, bounds.get(op.lhs.id), bounds.get(op.rhs.id), consts.get(op.rhs.id))
    return None


def nonnegative(fn: Function) -> frozenset[int]:
    """ids of the integer values of `fn` that are never negative."""
    return at_least(lower_bounds(fn), 0)


def at_least(bounds: dict[int, int], low: int) -> frozenset[int]:
    """ids of the values whose lower bound (`lower_bounds`) is `low` or more."""
    return frozenset(vid for vid, bound in bounds.items() if bound >= low)


def lower_bounds(fn: Function) -> dict[int, int]:
    """Value id -> a lower bound, for the integer values of `fn` that have one. A loop's
    induction variable is bounded by its start when its step is not negative (a loop whose
    runtime step is not positive runs no iteration on every backend)."""
    bounds: dict[int, int] = {}
    consts: dict[int, int] = {}

    def visit(block: list[Op]) -> None:
        for op in block:
            if len(op.results) == 1:
                bound = _result_bound(op, bounds, consts)
                if bound is not None:
                    bounds[op.result.id] = bound
            if isinstance(op, ops.For):
                lb, step = bounds.get(op.lower.id), bounds.get(op.step.id)
                if lb is not None and step is not None and step >= 0:
                    bounds[op.body.args[0].id] = lb
            for blk in op.blocks:
                visit(blk.ops)

    visit(fn.body.ops)
    return bounds
