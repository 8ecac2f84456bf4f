"""The rule table of the interpreter and the compiler that turns IR blocks into runner lists.

Each op class has one rule: a function `(op, compiler) -> runner` called once at compile time.
The runner is a closure `runner(env)` that reads its operands from the environment list `env`
(one slot per IR value, resolved at compile time) and writes its results there, so executing
an op costs one Python call plus the NumPy work.

Sub-kind tables (which NumPy function computes each UnaryFn, BinaryFn, ...) are declared with
`kind_table`, which checks at import that every member of the enum has an entry.

Slots 0..2 hold the block index (x, y, z) and slots 3..5 the grid extents, as int32 scalars.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...ir import OP_CLASSES, Block, Op, Value
from ..tables import KindTables

Env = list
Runner = Callable[[Env], None]
Terminator = Callable[[Env], Any]
Rule = Callable[[Any, "Compiler"], Callable[[Env], Any]]

RULES: dict[type[Op], Rule] = {}
kind_table = KindTables("interpreter")
KIND_TABLES = kind_table.tables
BID_SLOT = 0
NUM_BLOCKS_SLOT = 3
_RESERVED_SLOTS = 6


def rule(cls: type[Op]) -> Callable[[Rule], Rule]:
    """Register the decorated function as the interpreter rule of op class `cls` (once)."""
    def register(fn: Rule) -> Rule:
        assert cls not in RULES, f"duplicate interpreter rule for {cls.__name__}"
        RULES[cls] = fn
        return fn
    return register


def missing_rules() -> list[type[Op]]:
    """Op classes without a rule (must be empty once every rule module is imported)."""
    return [cls for cls in OP_CLASSES if cls not in RULES]


class Compiler:
    """Assigns environment slots to IR values and compiles blocks into runners."""

    def __init__(self) -> None:
        self._slots: dict[int, int] = {}
        self.size = _RESERVED_SLOTS

    def slot(self, value: Value) -> int:
        """The environment index of `value` (assigned on first request)."""
        s = self._slots.get(value.id)
        if s is None:
            s = self._slots[value.id] = self.size
            self.size += 1
        return s

    def slots(self, values: Sequence[Value]) -> tuple[int, ...]:
        """The environment indices of `values`."""
        return tuple(self.slot(v) for v in values)

    def opt_slot(self, value: Value | None) -> int | None:
        """The slot of an optional operand (a mask), or None."""
        return None if value is None else self.slot(value)

    def block(self, block: Block) -> tuple[tuple[Runner, ...], Terminator | None]:
        """Compile `block` into its op runners and the runner of its terminator (Yield or
        Condition, which returns the values it passes on), or None if it has none."""
        self.slots(block.args)
        runners: list[Runner] = []
        term = None
        for op in block.ops:
            fn = RULES[type(op)](op, self)
            if type(op).terminator and op is block.ops[-1]:
                term = fn
            else:
                runners.append(fn)
        return tuple(runners), term

    def region(self, block: Block) -> tuple[tuple[Runner, ...], Terminator]:
        """`block` of a control-flow op or combine region, which ends with its terminator."""
        runners, term = self.block(block)
        assert term is not None, "a region ends with a terminator (the verifier's rule)"
        return runners, term
