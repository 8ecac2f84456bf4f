"""`x ** 2` as `x * x` on floats: the GPU's `pow` is a long libdevice routine, and a row kernel
that squares every element (a variance: cuTile's LayerNorm sample) ran at half the memory
bandwidth because of it (`benchmarks/row_probe.py`, H200 run of 2026-12-01).

The rewrite keeps every result bit: pow(x, 2) is x² rounded once, which is what one
multiplication gives, NaN, infinities and signed zeros included; so every backend computes
`x * x` and they still agree. Other exponents are left alone (x * x * x rounds twice).
"""

from __future__ import annotations

import dataclasses

from ..ir import Block, Function, Op, ops
from ..ir.kinds import BinaryFn


def splat_constant(op: Op | None, defs: dict[int, Op]) -> ops.Const | None:
    """The Const that `op` makes, possibly broadcast or reshaped to a tile (`defs`: the defining
    op of each value id seen so far), else None."""
    while isinstance(op, (ops.Broadcast, ops.Reshape)):
        op = defs.get(op.x.id)
    return op if isinstance(op, ops.Const) else None


def _constant_two(op: Op | None, defs: dict[int, Op]) -> bool:
    """Whether `op` makes the float constant 2, possibly broadcast or reshaped to a tile."""
    const = splat_constant(op, defs)
    return const is not None and const.dtype.is_float and const.value == 2.0


def _rewrite(block: Block, defs: dict[int, Op]) -> None:
    for i, op in enumerate(block.ops):
        for r in op.results:
            defs[r.id] = op
        if (isinstance(op, ops.Binary) and op.fn is BinaryFn.POW and op.lhs.tile.dtype.is_float
                and _constant_two(defs.get(op.rhs.id), defs)):
            block.ops[i] = dataclasses.replace(op, fn=BinaryFn.MUL, rhs=op.lhs)
        for blk in op.blocks:
            _rewrite(blk, defs)


def square_powers(fn: Function) -> Function:
    """Rewrite every float `pow(x, 2)` of `fn` as `x * x`."""
    _rewrite(fn.body, {})
    return fn
