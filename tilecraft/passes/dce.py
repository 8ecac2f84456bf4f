"""Dead-code elimination: drop ops without effects whose results are never used.

Guarantees: ops whose class declares `effects` (memory writes, atomics, prints, asserts, while
loops, terminators) stay, and so does control flow containing them; a loop or if whose results
are unused and whose blocks have no effects is removed.
"""

from __future__ import annotations

from ..ir import Block, Function, Op


def has_effects(op: Op) -> bool:
    """Whether `op` or an op in its regions (terminators aside) has effects."""
    if type(op).effects:
        return True
    return any(has_effects(o) and not type(o).terminator for blk in op.blocks for o in blk.ops)


def _used_ids(block: Block, acc: set[int]) -> None:
    for op in block.ops:
        acc.update(v.id for v in op.operands)
        for blk in op.blocks:
            _used_ids(blk, acc)


def _sweep(block: Block, used: set[int]) -> bool:
    changed = False
    kept = []
    for op in reversed(block.ops):
        if not has_effects(op) and not any(r.id in used for r in op.results):
            changed = True
            continue
        kept.append(op)
        for blk in op.blocks:
            changed |= _sweep(blk, used)
    block.ops = kept[::-1]
    return changed


def eliminate_dead_code(fn: Function) -> Function:
    while True:
        used: set[int] = set()
        _used_ids(fn.body, used)
        if not _sweep(fn.body, used):
            return fn
