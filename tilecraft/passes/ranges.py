"""Lower-bound analysis: which integer values can never be negative.

Backends use it to emit plain `//` and `%` where Python's rounding toward -inf and C's rounding
toward zero agree (both operands non-negative), instead of the sign fix-ups Python semantics
need otherwise. Block ids, array sizes, tile counts (`(size + t - 1) // t`) and loop counters
over them all qualify. Integer arithmetic is assumed not to overflow (index arithmetic stays
far below 2**31 on arrays that fit int32 offsets).
"""

from __future__ import annotations

from ..ir import BinaryFn, Function, Opcode, Operation

_SOURCES = {Opcode.BID: 0, Opcode.NUM_BLOCKS: 1, Opcode.ARRAY_SHAPE: 0, Opcode.ARANGE: 0}
_SHAPE_OPS = {Opcode.BROADCAST, Opcode.RESHAPE, Opcode.PERMUTE}
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


def _result_bound(op: Operation, bounds: dict[int, int], consts: dict[int, int]) -> int | None:
    code = op.opcode
    ins = [bounds.get(v.id) for v in op.operands]
    if code in _SOURCES:
        return _SOURCES[code]
    if code == Opcode.CONST:
        value = op.attrs["value"]
        if not isinstance(value, (bool, int)):
            return None
        consts[op.result.id] = int(value)
        return int(value)
    if code in _SHAPE_OPS:
        return ins[0]
    if code == Opcode.CAST:  # widening an integer (or not changing it) keeps its value
        src, dst = op.operands[0].tile.dtype, op.result.tile.dtype
        widening = src.is_int and dst.is_int and (dst.bitwidth > src.bitwidth or dst is src)
        return ins[0] if widening else None
    if code == Opcode.BINARY and op.result.tile.dtype.is_int:
        return _binary_bound(op.attrs["fn"], ins[0], ins[1], consts.get(op.operands[1].id))
    return None


def nonnegative(fn: Function) -> set[int]:
    """ids of the integer values of `fn` that are never negative. A loop's induction variable
    counts when its start and step do (a negative runtime step is undefined in cuTile)."""
    bounds: dict[int, int] = {}
    consts: dict[int, int] = {}

    def visit(ops: list[Operation]) -> None:
        for op in ops:
            if len(op.results) == 1:
                bound = _result_bound(op, bounds, consts)
                if bound is not None:
                    bounds[op.result.id] = bound
            if op.opcode == Opcode.FOR:
                lb, _, step = (bounds.get(v.id) for v in op.operands[:3])
                if lb is not None and step is not None and step >= 0:
                    bounds[op.blocks[0].args[0].id] = lb
            for block in op.blocks:
                visit(block.ops)

    visit(fn.body.ops)
    return {vid for vid, bound in bounds.items() if bound >= 0}
