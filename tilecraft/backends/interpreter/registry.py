"""The rule table of the interpreter and the compiler that turns IR blocks into runner lists.

Each opcode has one rule: a function `(op, compiler) -> runner` called once at compile time. The
runner is a closure `runner(env)` that reads its operands from the environment list `env` (one
slot per IR value, resolved at compile time) and writes its results there, so executing an op
costs one Python call plus the NumPy work.

Slots 0..2 hold the block index (x, y, z) and slots 3..5 the grid extents, as int32 scalars.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...ir import Block, Opcode, Operation, Value

Env = list
Runner = Callable[[Env], None]
Terminator = Callable[[Env], Any]
Rule = Callable[[Operation, "Compiler"], Callable[[Env], Any]]

RULES: dict[Opcode, Rule] = {}
BID_SLOT = 0
NUM_BLOCKS_SLOT = 3
_RESERVED_SLOTS = 6
_TERMINATORS = (Opcode.YIELD, Opcode.CONDITION)


def rule(opcode: Opcode) -> Callable[[Rule], Rule]:
    """Register the decorated function as the interpreter rule of `opcode` (once per opcode)."""
    def register(fn: Rule) -> Rule:
        assert opcode not in RULES, f"duplicate interpreter rule for {opcode}"
        RULES[opcode] = fn
        return fn
    return register


def missing_rules() -> list[Opcode]:
    """Opcodes without a rule (must be empty once every rule module is imported)."""
    return [op for op in Opcode if op not in RULES]


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

    def block(self, block: Block) -> tuple[tuple[Runner, ...], Terminator | None]:
        """Compile `block` into its op runners and the runner of its terminator (YIELD or
        CONDITION, which returns the yielded values), or None if it has none."""
        self.slots(block.args)
        runners: list[Runner] = []
        term = None
        for op in block.ops:
            fn = RULES[op.opcode](op, self)
            if op.opcode in _TERMINATORS and op is block.ops[-1]:
                term = fn
            else:
                runners.append(fn)
        return tuple(runners), term
