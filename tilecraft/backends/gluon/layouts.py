"""Register layouts of the compute partition's tiles (Gluon makes every layout explicit).

Gluon tensors carry a layout; ops on two tensors need the same one. Tiles made from nothing
(constants, aranges) take `AutoLayout`, which Gluon resolves from their uses; an MMA's result
has the wgmma accumulator layout of its N (`NVMMADistributedLayout`, instr_shape [16, N, 16],
the partition's warps stacked along M). `classes` gives every value the N of the accumulator
layout it has (None: auto, or a scalar; OPAQUE: a reshape of such a tile, whose layout Gluon
derives), and says which operands must be converted where two accumulator layouts meet, and
which broadcasts are left to the ops using them (Gluon broadcasts a [M, 1] operand itself;
converting the [M, 1] tile is cheaper than converting its broadcast)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ...ir import Op, Value, ops

OPAQUE = -1
"""The class of a reshaped accumulator-layout tile: it may meet only auto-layout tiles."""

_MIXING = (ops.Binary, ops.Compare, ops.Where, ops.Fma)


class NotLowerable(Exception):
    """The kernel cannot run with the warp-specialized schedule: tiles whose layouts the emitter
    cannot reconcile meet in one op, its rings do not fit in shared memory, ... (the Triton
    kernel runs instead)."""


@dataclass
class Classes:
    """What `classes` computed (see the module docstring)."""

    of: dict[int, int | None] = field(default_factory=dict)
    converts: dict[Op, dict[int, int]] = field(default_factory=dict)  # op -> operand id -> class to take
    elided: set[int] = field(default_factory=set)  # broadcast results the ops using them broadcast

    def get(self, v: Value) -> int | None:
        return self.of.get(v.id)


def _shape(v: Value) -> tuple[int, ...]:
    return v.tile.shape if hasattr(v.type, "shape") else ()


def classes(blocks: list[list[Op]], loop: ops.For, users: dict[int, list[Op]]) -> Classes:
    """The classes of the values of `blocks` (prologue, loop body, epilogue; the loop's carried
    values take their yielded values' class, found by iterating to a fixpoint)."""
    c = Classes()
    _elide_broadcasts(c, blocks, users)
    body = loop.body
    for _ in range(3):
        before = dict(c.of)
        for block in blocks:
            for op in block:
                _visit(c, op)
        for arg, init, y in zip(body.args[1:], loop.init, body.terminator.values):
            c.of[arg.id] = c.get(y) if c.get(y) is not None else c.get(init)
        for res, y in zip(loop.results, body.terminator.values):
            c.of[res.id] = c.get(y)
        if c.of == before:
            return c
    raise NotLowerable("the loop's carried layouts do not settle")


def _elide_broadcasts(c: Classes, blocks: list[list[Op]], users: dict[int, list[Op]]) -> None:
    for block in blocks:
        for op in _walk(block):
            if not isinstance(op, ops.Broadcast) or not _shape(op.x):
                continue
            us = users.get(op.result.id, [])
            if us and all(isinstance(u, _MIXING) and any(
                    o.id not in c.elided and o is not op.result and _shape(o) == _shape(u.result) for o in u.operands)
                    for u in us):
                c.elided.add(op.result.id)


def _walk(block: list[Op]) -> Iterator[Op]:
    for op in block:
        yield op
        for blk in op.blocks:
            yield from _walk(blk.ops)


def _visit(c: Classes, op: Op) -> None:
    if isinstance(op, ops.Mma):
        c.of[op.result.id] = op.result.tile.shape[-1]
        return
    if isinstance(op, ops.If):
        for blk in op.blocks:
            for o in blk.ops:
                _visit(c, o)
        for res, a, b in zip(op.results, op.then.terminator.values, op.orelse.terminator.values):
            ca, cb = c.get(a), c.get(b)
            if ca is not None and cb is not None and ca != cb:
                raise NotLowerable("the branches of an if yield tiles of two layouts")
            c.of[res.id] = ca if ca is not None else cb
        return
    if isinstance(op, ops.Reshape):
        src = c.get(op.x)
        c.of[op.result.id] = None if src is None else src if _shape(op.x) == _shape(op.result) else OPAQUE
        return
    if not op.results or len(op.results) != 1:
        return
    known = [(v, c.get(v)) for v in op.operands if c.get(v) is not None]
    kinds = {k for _, k in known}
    if len(kinds) <= 1:
        c.of[op.result.id] = kinds.pop() if kinds else None
        return
    if OPAQUE in kinds:
        raise NotLowerable("a reshaped accumulator tile meets another layout")
    full = [k for v, k in known if _shape(v) == _shape(op.result)]
    target = full[0] if full else known[0][1]
    c.of[op.result.id] = target
    c.converts[op] = {v.id: target for v, k in known if k != target}
