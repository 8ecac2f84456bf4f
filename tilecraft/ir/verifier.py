"""Checks every op of a function against its declaration: operands defined before use, attribute
values of their declared types, results of the types its typing rule gives, its invariants
(`check`), and regions ending with the right terminator.

A failure is a bug in the front end or a pass, so it raises `TileInternalError` at the op.
"""

from __future__ import annotations

from typing import Any

from ..errors import TileInternalError
from .core import Block, Function, IRError, Op, attribute_hints, conforms

_HINTS: dict[type[Op], dict[str, Any]] = {}


def _fail(op: Op, msg: str) -> None:
    raise TileInternalError(f"IR verification failed at {op.name}: {msg}", op.loc)


def check_op(op: Op) -> None:
    """Raise IRError if `op` breaks its declaration (not looking into its regions)."""
    hints = _HINTS.get(type(op))
    if hints is None:
        hints = _HINTS[type(op)] = attribute_hints(type(op))
    for name, hint in hints.items():
        if not conforms(getattr(op, name), hint):
            raise IRError(f"attribute {name}={getattr(op, name)!r} is not a {hint}")
    want = op.result_types()
    got = tuple(r.type for r in op.results)
    if got != tuple(want):
        raise IRError(f"result types {[str(t) for t in got]} differ from the typing rule's "
                      f"{[str(t) for t in want]}")
    op.check()
    for blk in op.blocks:
        last = blk.terminator
        if last is None or not last.terminator:
            raise IRError("a region must end with a terminator")
        if any(o.terminator for o in blk.ops[:-1]):
            raise IRError("a terminator in the middle of a region")


def _check_block(block: Block, visible: set[int]) -> None:
    visible = visible | {a.id for a in block.args}
    for op in block.ops:
        for v in op.operands:
            if v.id not in visible:
                _fail(op, f"operand %{v.id} is used before it is defined")
        try:
            check_op(op)
        except IRError as e:
            _fail(op, str(e))
        for blk in op.blocks:
            _check_block(blk, visible)
        visible |= {r.id for r in op.results}


def verify(fn: Function) -> Function:
    """Raise TileInternalError if `fn` breaks an IR rule; return it unchanged otherwise."""
    _check_block(fn.body, {p.id for p in fn.params})
    return fn


__all__ = ["verify", "check_op"]
