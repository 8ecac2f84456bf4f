"""The one way to create IR: appends typed ops to the block being built.

`emit(OpClass, **fields)` builds an op from its named operands and attributes, gives it results
of the types its typing rule (`result_types`) computes and the current source location, and
appends it to the current block. Value ids come from the builder, so they are unique and stable
within one function (0, 1, 2, ... in creation order), whatever process built it.
"""

from __future__ import annotations

import dataclasses
import itertools
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from ..errors import Location, TileInternalError
from .core import Block, IRError, Op, Value
from .types import IRType

O = TypeVar("O", bound=Op)


class Builder:
    """`first_id`: the id of the first value made; a pass adding values to an existing function
    starts past its largest id (`Function.max_id`) so ids stay unique."""

    def __init__(self, first_id: int = 0) -> None:
        self._blocks: list[Block] = []
        self._ids = itertools.count(first_id)
        self.loc: Location | None = None
        self.defs: dict[int, Op] = {}  # value id -> the op this builder emitted that defines it

    @property
    def block(self) -> Block:
        return self._blocks[-1]

    @contextmanager
    def inside(self, block: Block) -> Iterator[Block]:
        """Build into `block` for the duration of the `with`."""
        self._blocks.append(block)
        try:
            yield block
        finally:
            self._blocks.pop()

    def new_value(self, type: IRType, hint: str = "") -> Value:
        """A fresh value that no op defines: a function parameter or block argument."""
        return Value(type, next(self._ids), hint)

    def make(self, cls: type[O], **fields: Any) -> O:
        """Build an op of `cls` with its results, at the current location, without appending it."""
        try:
            draft = cls(**fields, loc=self.loc)
            types = draft.result_types()
        except IRError as e:  # a front-end bug: its typing rule rejects the operands
            raise TileInternalError(f"cannot build {cls.__name__}: {e}", self.loc) from None
        return dataclasses.replace(draft, results=tuple(self.new_value(t) for t in types))

    def emit(self, cls: type[O], **fields: Any) -> O:
        """Build an op of `cls` (see `make`) and append it to the current block."""
        op = self.make(cls, **fields)
        self.block.ops.append(op)
        for r in op.results:
            self.defs[r.id] = op
        return op

    def value(self, cls: type[Op], **fields: Any) -> Value:
        """Emit a single-result op and return its result."""
        return self.emit(cls, **fields).result


def copied_fields(op: Op, value: Callable[[Value], Value], block: Callable[[Block], Block]) -> dict[str, Any]:
    """The fields that build a copy of `op` with `Builder.emit`: its attributes as they are, its
    operands through `value`, its blocks through `block` (passes copying a kernel map both)."""
    fields = {f.name: getattr(op, f.name) for f in dataclasses.fields(op) if f.name not in ("results", "loc")}
    for name in op._operand_fields:
        v = fields[name]
        if isinstance(v, tuple):
            fields[name] = tuple(value(x) for x in v)
        elif v is not None:
            fields[name] = value(v)
    for name in op._block_fields:
        fields[name] = block(fields[name])
    return fields
