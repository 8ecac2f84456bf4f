"""Appends ops to the block being built; the front end's only way to create IR."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import Location
from .ops import Block, Opcode, Operation, Value
from .types import IRType


class Builder:
    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self.loc: Location | None = None

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

    def emit(self, opcode: Opcode, operands: list[Value], result_types: list[IRType],
             blocks: list[Block] | None = None, **attrs: Any) -> Operation:
        op = Operation(opcode, list(operands), [Value(t) for t in result_types], attrs,
                       self.loc, blocks or [])
        self.block.ops.append(op)
        return op

    def value(self, opcode: Opcode, operands: list[Value], result_type: IRType, **attrs: Any) -> Value:
        """Emit a single-result op and return its result."""
        return self.emit(opcode, operands, [result_type], **attrs).result
