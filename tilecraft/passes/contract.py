"""Multiply-add contraction: `a * b + c` as one fused multiply-add, rounded once.

cuTile's compiler fuses a float multiplication that feeds an addition or subtraction (its own
conformance tests check for `fma` in the bytecode: `x * y + z`, `x * y - z`, `z + x * y`,
`z - x * y`), and GPU compilers do the same unless told not to. Left to the GPU compiler,
the fusion would happen on the GPU only, where LLVM decides, and the CPU backends would round
twice: a kernel's results would differ between backends in the last bit. So the decision is
made here, once, in the IR, and every backend computes the `Fma` op exactly (the Triton
backend compiles with LLVM's own contraction off: `compile.GPU_MATH_OPTIONS`).

What is fused: an ADD or SUB of float16, bfloat16 or float32 tiles (`ops.FMA_DTYPES`), with no
rounding mode or flush-to-zero, one of whose operands is the result of such a MUL in the same
block that nothing else uses (its left operand first where both are). `x * x + y` fuses; in
`t = x * y; t + t` the product is used twice and stays a multiplication, as in cuTile. float64
is not fused (no backend here emulates its fused multiply-add exactly).
"""

from __future__ import annotations

from collections import Counter

from ..ir import Block, Function, Op, ops
from ..ir.kinds import BinaryFn


def _plain(op: Op | None, fns: tuple[BinaryFn, ...]) -> bool:
    """Whether `op` is a Binary of one of `fns` on FMA_DTYPES, rounded to nearest, not flushed."""
    return (isinstance(op, ops.Binary) and op.fn in fns and op.rounding is None and not op.flush_to_zero
            and op.lhs.tile.dtype in ops.FMA_DTYPES)


def _uses(block: Block, count: Counter) -> None:
    for op in block.ops:
        count.update(v.id for v in op.operands)
        for blk in op.blocks:
            _uses(blk, count)


def _contract(block: Block, uses: Counter) -> None:
    made: dict[int, ops.Binary] = {}  # result id -> a single-use MUL of this block
    out: list[Op] = []
    for op in block.ops:
        for blk in op.blocks:
            _contract(blk, uses)
        if _plain(op, (BinaryFn.ADD, BinaryFn.SUB)):
            sub = op.fn is BinaryFn.SUB
            fused = None
            if op.lhs.id in made:  # a * b + c, a * b - c
                mul, addend = made.pop(op.lhs.id), op.rhs
                fused = ops.Fma(a=mul.lhs, b=mul.rhs, c=addend, negate_addend=sub, results=op.results, loc=op.loc)
            elif op.rhs.id in made:  # c + a * b, c - a * b
                mul, addend = made.pop(op.rhs.id), op.lhs
                fused = ops.Fma(a=mul.lhs, b=mul.rhs, c=addend, negate_product=sub, results=op.results, loc=op.loc)
            if fused is not None:
                out = [o for o in out if o is not mul]
                out.append(fused)
                continue
        if _plain(op, (BinaryFn.MUL,)) and uses[op.result.id] == 1:
            made[op.result.id] = op
        out.append(op)
    block.ops = out


def contract_multiply_adds(fn: Function) -> Function:
    """Fuse every multiplication feeding an addition or subtraction that qualifies (module
    docstring) into one `Fma`."""
    uses: Counter = Counter()
    _uses(fn.body, uses)
    _contract(fn.body, uses)
    return fn

