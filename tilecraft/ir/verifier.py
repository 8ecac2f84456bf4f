"""Checks the structural rules of Tile IR that backends rely on (see `ops` module docstring).

A failure is a bug in the front end or a pass, so it raises `TileInternalError` at the op.
"""

from __future__ import annotations

from ..errors import TileInternalError
from ..language.dtypes import bool_
from .ops import Block, Function, Opcode, Operation, Value
from .types import ArrayType, ListType, TileType

_ELEMENTWISE = {Opcode.UNARY, Opcode.BINARY, Opcode.COMPARE, Opcode.WHERE}
_TERMINATED = {Opcode.FOR: (Opcode.YIELD,), Opcode.IF: (Opcode.YIELD, Opcode.YIELD),
               Opcode.WHILE: (Opcode.CONDITION, Opcode.YIELD)}


def _fail(op: Operation, msg: str) -> None:
    raise TileInternalError(f"IR verification failed at {op.opcode.value}: {msg}", op.loc)


def _check_op(op: Operation) -> None:
    tiles = [v.type for v in op.operands if isinstance(v.type, TileType)]
    if op.opcode in _ELEMENTWISE:
        if len({t.shape for t in tiles}) != 1:
            _fail(op, f"operand shapes differ: {[str(t) for t in tiles]}")
        if op.opcode == Opcode.BINARY and tiles[0].dtype is not tiles[1].dtype:
            _fail(op, "operand dtypes differ")
        if op.opcode == Opcode.WHERE and (tiles[0].dtype is not bool_ or tiles[1] != tiles[2]):
            _fail(op, "where needs a bool condition and two values of one type")
    elif op.opcode in (Opcode.LOAD, Opcode.STORE):
        arr = op.operands[0].type
        if not isinstance(arr, ArrayType):
            _fail(op, "first operand is not an array")
        nidx = len(op.operands) - 1 - (op.opcode == Opcode.STORE)
        if nidx != arr.ndim:
            _fail(op, f"{nidx} indices for a rank-{arr.ndim} array")
        if op.opcode == Opcode.STORE and op.operands[-1].tile.dtype is not arr.dtype:
            _fail(op, "stored tile dtype differs from the array dtype")
    elif op.opcode == Opcode.ARRAY_SLICE:
        arr, start, stop = op.operands
        if not isinstance(arr.type, ArrayType) or op.result.type != arr.type:
            _fail(op, "slices an array into an array of the same type")
        if not 0 <= op.attrs["axis"] < arr.type.ndim:
            _fail(op, f"axis {op.attrs['axis']} out of range")
        if any(not isinstance(v.type, TileType) or v.tile.shape or v.tile.dtype is not arr.type.index_dtype
               for v in (start, stop)):
            _fail(op, "start and stop must be scalars of the array's index type")
    elif op.opcode in (Opcode.REDUCE_WITH, Opcode.SCAN_WITH):
        last = op.blocks[0].terminator if len(op.blocks) == 1 else None
        dtypes = [v.tile.dtype for v in op.operands]
        if last is None or last.opcode != Opcode.YIELD or len(op.blocks[0].args) != 2 * len(dtypes) \
                or [v.type for v in last.operands] != [TileType(d, ()) for d in dtypes]:
            _fail(op, "the combine block must take 2N scalars and yield N scalars of the operand dtypes")
    elif op.opcode == Opcode.LIST_GET:
        lst, index = op.operands
        if not isinstance(lst.type, ListType) or op.result.type != lst.type.elem:
            _fail(op, "picks an array of the list's element type")
        if not isinstance(index.type, TileType) or index.tile.shape or not index.tile.dtype.is_int:
            _fail(op, "the index must be an integer scalar")
    elif op.opcode == Opcode.BROADCAST:
        src, dst = op.operands[0].tile.shape, op.attrs["shape"]
        if len(src) != len(dst) or any(s not in (1, d) for s, d in zip(src, dst)):
            _fail(op, f"cannot broadcast {src} to {dst}")
    if op.opcode in _TERMINATED:
        want = _TERMINATED[op.opcode]
        if len(op.blocks) != len(want):
            _fail(op, "wrong number of blocks")
        for blk, term in zip(op.blocks, want):
            last = blk.terminator
            if last is None or last.opcode != term:
                _fail(op, f"block must end with {term.value}")
            vals = last.operands[1:] if term == Opcode.CONDITION else last.operands
            if [v.type for v in vals] != [r.type for r in op.results]:
                _fail(op, f"{term.value} types {[str(v.type) for v in vals]} differ from results "
                          f"{[str(r.type) for r in op.results]}")


def _check_block(block: Block, visible: set[int]) -> None:
    visible = visible | {a.id for a in block.args}
    for op in block.ops:
        for v in op.operands:
            if v.id not in visible:
                _fail(op, f"operand %{v.id} is used before it is defined")
        _check_op(op)
        for blk in op.blocks:
            _check_block(blk, visible)
        visible |= {r.id for r in op.results}


def verify(fn: Function) -> Function:
    """Raise TileInternalError if `fn` breaks an IR rule; return it unchanged otherwise."""
    _check_block(fn.body, {p.id for p in fn.params})
    return fn


def uses(fn: Function) -> dict[int, int]:
    """Count of uses of each value id (for dead-code elimination)."""
    counts: dict[int, int] = {}
    for op in fn.walk():
        for v in op.operands:
            counts[v.id] = counts.get(v.id, 0) + 1
    return counts


__all__ = ["verify", "uses", "Value"]
