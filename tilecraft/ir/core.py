"""The pieces every Tile IR op is made of: values, blocks, the `Op` base class and the `@op`
declaration decorator, attribute type checks, and kernel functions.

An op class declares its fields; a field annotated `Value`, `Value | None` or
`tuple[Value, ...]` is an operand (in declaration order, `op.operands` flattens them); a field
annotated `Block` is a region (`op.blocks`); every other field is a typed attribute, checked
against its annotation by the verifier (`conforms`). Beside the fields, `result_types()` is the
op's typing rule (the builder makes the results from it) and `check()` its invariants.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from ..errors import Location
from .types import IRType, TileType


class IRError(Exception):
    """A broken IR invariant (raised by `check`; the verifier adds the op's location)."""


def need(cond: bool, msg: str) -> None:
    """Raise IRError(msg) unless `cond`."""
    if not cond:
        raise IRError(msg)


# ---- values and blocks ------------------------------------------------------------------------------
class Value:
    """An SSA value: the result of one op or an argument of a block or function. `id` is unique
    within its function (numbered by the function's builder, from 0)."""

    __slots__ = ("type", "id", "hint")

    def __init__(self, type: IRType, id: int, hint: str = "") -> None:
        self.type = type
        self.id = id
        self.hint = hint

    @property
    def tile(self) -> TileType:
        """The type of a tile value (IRError for an array or list)."""
        if not isinstance(self.type, TileType):
            raise IRError(f"expected a tile, got {self.type}")
        return self.type

    def __repr__(self) -> str:
        return f"%{self.hint or 'v'}{self.id}: {self.type}"


@dataclass(eq=False)
class Block:
    """A straight-line list of ops with arguments (loop-carried values, induction variable)."""

    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)

    @property
    def terminator(self) -> "Op | None":
        return self.ops[-1] if self.ops else None


# ---- the op base class and its registry -------------------------------------------------------------
_DECLARED: list[type["Op"]] = []


@dataclass(frozen=True, eq=False, kw_only=True)
class Op:
    """Base of every op: results (made by the builder from `result_types`) and location."""

    results: tuple[Value, ...] = ()
    loc: Location | None = None

    effects: ClassVar[bool] = False      # writes memory, prints, traps or may not terminate
    terminator: ClassVar[bool] = False   # ends a block (YIELD, CONDITION)
    _operand_fields: ClassVar[tuple[str, ...]] = ()
    _block_fields: ClassVar[tuple[str, ...]] = ()
    _attr_fields: ClassVar[tuple[str, ...]] = ()

    # the typing rule and the invariants, overridden per op
    def result_types(self) -> tuple[IRType, ...]:
        return ()

    def check(self) -> None:
        """Raise IRError if an invariant the backends rely on is broken."""

    # derived views
    @cached_property
    def operands(self) -> tuple[Value, ...]:
        out: list[Value] = []
        for name in self._operand_fields:
            v = getattr(self, name)
            if isinstance(v, tuple):
                out.extend(v)
            elif v is not None:
                out.append(v)
        return tuple(out)

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(getattr(self, name) for name in self._block_fields)

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self
        return self.results[0]

    @property
    def name(self) -> str:
        """The op's name in printed IR (`binary`, `load`, ...)."""
        return snake(type(self).__name__)

    def attributes(self) -> dict[str, Any]:
        """The typed attributes by field name (for printing and attribute checks)."""
        return {name: getattr(self, name) for name in self._attr_fields}


def snake(name: str) -> str:
    """`AtomicRMW` -> `atomic_rmw`, `NumBlocks` -> `num_blocks`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


_OPERAND_ANNOTATIONS = {"Value", "Value | None", "tuple[Value, ...]"}


def op(cls: type) -> type:
    """Declare an op class: a frozen keyword-only dataclass, fields sorted into operands, regions
    and attributes by annotation, registered in OP_CLASSES."""
    cls = dataclass(frozen=True, eq=False, kw_only=True)(cls)
    own = [f for f in dataclasses.fields(cls) if f.name not in ("results", "loc")]
    cls._operand_fields = tuple(f.name for f in own if f.type in _OPERAND_ANNOTATIONS)
    cls._block_fields = tuple(f.name for f in own if f.type == "Block")
    cls._attr_fields = tuple(f.name for f in own if f.type not in _OPERAND_ANNOTATIONS and f.type != "Block")
    _DECLARED.append(cls)
    return cls


def declared() -> tuple[type[Op], ...]:
    """Every op class declared so far, in declaration order."""
    return tuple(_DECLARED)


def attribute_hints(cls: type[Op]) -> dict[str, Any]:
    """The resolved annotations of an op class's attributes (for the verifier)."""
    hints = typing.get_type_hints(cls)
    return {name: hints[name] for name in cls._attr_fields}


def conforms(value: Any, hint: Any) -> bool:
    """Whether `value` has type `hint` (classes, unions, `tuple[X, ...]`, None)."""
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, h) for h in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(args) == len(value) and all(conforms(v, h) for v, h in zip(value, args))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, float)
    return isinstance(value, hint)


@dataclass(eq=False)
class Function:
    """One specialized kernel: its runtime parameters (flattened) and body."""

    name: str
    params: list[Value]
    param_names: list[str]
    body: Block
    loc: Location | None
    options: dict[str, Any] = field(default_factory=dict)

    def max_id(self) -> int:
        """The largest value id of the function (-1 when it has none)."""
        ids = [p.id for p in self.params]
        blocks = [self.body]
        while blocks:
            block = blocks.pop()
            ids += [a.id for a in block.args]
            for op in block.ops:
                ids += [r.id for r in op.results]
                blocks += op.blocks
        return max(ids, default=-1)

    def walk(self):
        """Every op, depth first, in program order."""
        stack = [iter(self.body.ops)]
        while stack:
            op = next(stack[-1], None)
            if op is None:
                stack.pop()
                continue
            yield op
            for blk in reversed(op.blocks):
                stack.append(iter(blk.ops))
