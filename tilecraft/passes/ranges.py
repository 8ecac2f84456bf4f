"""Value ranges: the interval each integer value of a kernel lies in, proven without assuming
that arithmetic never overflows.

Backends use it to emit plain `//` and `%` where Python's rounding toward -inf and C's rounding
toward zero agree (both operands non-negative), instead of the sign fix-ups Python semantics
need otherwise, and to leave unguarded a loop step known positive (triton/control.py
`loop_bounds`).

Integer arithmetic wraps (cuTile), so an op's interval is computed exactly from its operands'
and kept only when it fits the result's dtype; a result that may have wrapped gets the whole
range of its dtype (`u + 2147483640` for an int32 arange: [-2**31, 2**31 - 1], not >= 0). The
sources: block ids in [0, 2**31 - 2] and grid sizes in [1, 2**31 - 1] (int32; a kernel only
runs on a grid of at least one block, and the library's own launches of transformed kernels may
exceed the public 24-bit grid limit, so that limit is not used), array sizes in [0, the largest
value of their index type] (a slice keeps 0 <= start <= stop <= size: the program's promise),
aranges, constants. Block ids, sizes, tile counts (`ct.cdiv(size, t)`, which the front end
builds from a floor division, so it cannot overflow) and loop counters over them stay
non-negative; `(size + t - 1) // t` of an int32 size does not, since the sum may wrap.
"""

from __future__ import annotations

from typing import Callable, Mapping

from ..ir import BinaryFn, CompareFn, Function, Op, Value, ops
from ..ir.types import TileType
from ..language import dtypes as dt
from ..language.dtypes import DType

Range = tuple[int, int]
"""An inclusive interval [low, high] of integer values."""

_INT32_MAX = 2**31 - 1
_SHAPE_OPS = (ops.Broadcast, ops.Reshape, ops.Permute)


def dtype_range(dtype: DType) -> Range:
    """Every value of integer (or bool) `dtype`."""
    if dtype is dt.bool_:
        return 0, 1
    if dtype.signed:
        return -(1 << (dtype.bitwidth - 1)), (1 << (dtype.bitwidth - 1)) - 1
    return 0, (1 << dtype.bitwidth) - 1


def _fit(r: Range, dtype: DType) -> Range:
    """`r` if every value in it is a value of `dtype` (no wraparound), else `dtype`'s range."""
    full = dtype_range(dtype)
    return r if full[0] <= r[0] and r[1] <= full[1] else full


def _hull(*rs: Range) -> Range:
    return min(r[0] for r in rs), max(r[1] for r in rs)


def _corners(f: Callable[[int, int], int], x: Range, y: Range) -> Range:
    """The range of f over x * y for f monotone in each operand (on each sign of y for //)."""
    return _hull(*((f(a, b),) * 2 for a in x for b in y))


def _divisors(y: Range) -> list[Range]:
    """`y` without 0, as its negative and positive parts: integer division by zero is undefined
    behaviour (spec), so no result needs to hold for it."""
    return [r for r in ((y[0], min(y[1], -1)), (max(y[0], 1), y[1])) if r[0] <= r[1]]


def _mod(x: Range, y: Range) -> Range | None:
    """x % y with the sign of the divisor: in [0, y - 1] for y > 0 (and at most x when x >= 0),
    in [y + 1, 0] for y < 0 (and at least x when x <= 0)."""
    parts = []
    for lo, hi in _divisors(y):
        if lo > 0:
            parts.append((0, min(hi - 1, x[1]) if x[0] >= 0 else hi - 1))
        else:
            parts.append((max(lo + 1, x[0]) if x[1] <= 0 else lo + 1, 0))
    return _hull(*parts) if parts else None


def _bitwise(fn: BinaryFn, x: Range, y: Range, bits: int) -> Range | None:
    """&, |, ^, << and >> where the operands' signs make the result's range plain: x & m lies in
    [0, m] for any m >= 0; | and ^ of non-negative values stay below the next power of two; a
    shift by 0 to bits - 1 places (other amounts are left unbounded) of a non-negative value."""
    if fn is BinaryFn.AND:
        nonneg = [r[1] for r in (x, y) if r[0] >= 0]
        return (0, min(nonneg)) if nonneg else None
    if x[0] < 0 or y[0] < 0:
        return None
    if fn in (BinaryFn.OR, BinaryFn.XOR):
        top = (1 << max(x[1], y[1]).bit_length()) - 1
        return (max(x[0], y[0]) if fn is BinaryFn.OR else 0), top
    if y[1] >= bits:
        return None
    if fn is BinaryFn.SHL:
        return x[0] << y[0], x[1] << y[1]
    return x[0] >> y[1], x[1] >> y[0]  # SHR of a non-negative value: arithmetic and logical agree


def _binary(fn: BinaryFn, x: Range, y: Range, bits: int) -> Range | None:
    """The exact range of `x fn y` (before any wraparound), or None when not tracked."""
    if fn is BinaryFn.ADD:
        return x[0] + y[0], x[1] + y[1]
    if fn is BinaryFn.SUB:
        return x[0] - y[1], x[1] - y[0]
    if fn is BinaryFn.MUL:
        return _corners(lambda a, b: a * b, x, y)
    if fn in (BinaryFn.MIN, BinaryFn.MIN_NAN):
        return min(x[0], y[0]), min(x[1], y[1])
    if fn in (BinaryFn.MAX, BinaryFn.MAX_NAN):
        return max(x[0], y[0]), max(x[1], y[1])
    if fn is BinaryFn.FLOORDIV:
        parts = [_corners(lambda a, b: a // b, x, part) for part in _divisors(y)]
        return _hull(*parts) if parts else None
    if fn is BinaryFn.MOD:
        return _mod(x, y)
    if fn in (BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR, BinaryFn.SHL, BinaryFn.SHR):
        return _bitwise(fn, x, y, bits)
    return None


def _is_integral(v: Value) -> bool:
    return isinstance(v.type, TileType) and v.type.dtype.is_integral


_COMPARE: dict[CompareFn, Callable[[Range, Range], bool | None]] = {
    CompareFn.LT: lambda x, y: True if x[1] < y[0] else False if x[0] >= y[1] else None,
    CompareFn.LE: lambda x, y: True if x[1] <= y[0] else False if x[0] > y[1] else None,
    CompareFn.GT: lambda x, y: _COMPARE[CompareFn.LT](y, x),
    CompareFn.GE: lambda x, y: _COMPARE[CompareFn.LE](y, x),
    CompareFn.EQ: lambda x, y: True if x[0] == x[1] == y[0] == y[1] else False if x[1] < y[0] or y[1] < x[0] else None,
    CompareFn.NE: lambda x, y: None if (same := _COMPARE[CompareFn.EQ](x, y)) is None else not same,
}
"""Per comparison, its outcome for every pair of values in two ranges (None: it varies)."""


class _Ranges:
    """Value id -> range for the integer values met so far; others have their dtype's range.
    `sizes`: (array value id, axis) -> the size known along that axis."""

    def __init__(self, sizes: Mapping[tuple[int, int], int]) -> None:
        self.known: dict[int, Range] = {}
        self.sizes = sizes

    def of(self, v: Value) -> Range:
        known = self.known.get(v.id)
        return dtype_range(v.tile.dtype) if known is None else known

    def result(self, op: Op) -> Range | None:
        """The range of single-result `op`'s integer result, or None for its dtype's range."""
        dtype = op.result.tile.dtype
        if isinstance(op, ops.Bid):
            return 0, _INT32_MAX - 1
        if isinstance(op, ops.NumBlocks):
            return 1, _INT32_MAX
        if isinstance(op, ops.ArrayShape):
            size = self.sizes.get((op.array.id, op.axis))
            return (0, dtype_range(dtype)[1]) if size is None else (size, size)
        if isinstance(op, ops.Arange):
            return _fit((0, op.size - 1), dtype)
        if isinstance(op, ops.Const):
            return int(op.value), int(op.value)
        if isinstance(op, _SHAPE_OPS):
            return self.of(op.x)
        if isinstance(op, ops.Where):
            cond = self.of(op.cond)
            return self.of(op.x) if cond == (1, 1) else self.of(op.y) if cond == (0, 0) else _hull(self.of(op.x),
                                                                                                    self.of(op.y))
        if isinstance(op, ops.Compare) and _is_integral(op.lhs):
            holds = _COMPARE[op.fn](self.of(op.lhs), self.of(op.rhs))
            return None if holds is None else (int(holds), int(holds))
        if isinstance(op, ops.Cast) and _is_integral(op.x):
            return _fit(self.of(op.x), dtype)
        if isinstance(op, ops.Binary):
            exact = _binary(op.fn, self.of(op.lhs), self.of(op.rhs), dtype.bitwidth)
            return None if exact is None else _fit(exact, dtype)
        return None

    def counter(self, loop: ops.For) -> Range:
        """The values `loop`'s counter takes: from its start to below its stop. The body runs
        only with a step of at least 1 (a runtime step <= 0 runs no iteration on every backend)
        and the counter steps only from values below the stop, so it never wraps when the
        largest stop - 1 plus the largest step fits its dtype."""
        dtype = loop.lower.tile.dtype
        low, high, step = self.of(loop.lower)[0], self.of(loop.upper)[1] - 1, max(self.of(loop.step)[1], 1)
        return (low, max(low, high)) if high + step <= dtype_range(dtype)[1] else dtype_range(dtype)


def value_ranges(fn: Function, sizes: Mapping[tuple[int, int], int] | None = None) -> dict[int, Range]:
    """Value id -> the range of the integer (and bool) values of `fn` that the analysis tracks;
    the others (parameters, loop-carried values, loads, ...) may hold any value of their dtype.
    `sizes`: (array value id, axis) -> a size known for that array along that axis (a launch's)."""
    ranges = _Ranges(sizes or {})

    def visit(block: list[Op]) -> None:
        for op in block:
            if len(op.results) == 1 and _is_integral(op.result):
                r = ranges.result(op)
                if r is not None:
                    ranges.known[op.result.id] = r
            if isinstance(op, ops.For):
                ranges.known[op.body.args[0].id] = ranges.counter(op)
            for blk in op.blocks:
                visit(blk.ops)

    visit(fn.body.ops)
    return ranges.known


def at_least(ranges: dict[int, Range], low: int) -> frozenset[int]:
    """ids of the values whose range (`value_ranges`) starts at `low` or more."""
    return frozenset(vid for vid, (lo, _) in ranges.items() if lo >= low)


def nonnegative(fn: Function) -> frozenset[int]:
    """ids of the integer values of `fn` that are never negative."""
    return at_least(value_ranges(fn), 0)
