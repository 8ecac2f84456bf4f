"""What variables hold after a `while True:` loop, which only a `break` can end (cuTile's rule
that a loop's results come from its exits).

Every exit is a break, so after the loop a variable holds the value it had at one of them:
- when every break sees the same compile-time value, the variable is that constant afterwards
  (`a = 1; break` on every path keeps `a` usable as a tile size);
- a variable first assigned inside the loop is defined afterwards when every break assigns it,
  all with one type: the loop carries it from a placeholder of that type, which no exit can
  observe. Different types at two breaks are cuTile's 'Type of `x` depends on path taken'.

The breaks are seen through the snapshots `record_break` takes of the scope where the rewritten
loop sets its break flag; a first compile of the loop in a scratch block finds the variables to
carry and their types (compiling is free of side effects on the kernel).
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..ir import Block, TileType, Value
from .merge import dynamic_leaves, pair_leaves, same
from .records import has_runtime
from .values import Undefined

Snapshot = dict[str, Any]
_UNSET: Any = object()  # a name a snapshot lacks (None is a value: `return None`)


def exits_only_by_break(node: ast.While) -> bool:
    """A `while True:` (or any constant-true test) loop with a break."""
    return bool(getattr(node, "tc_break", False)) and isinstance(node.test, ast.Constant) and bool(node.test.value)


@contextmanager
def collecting(fc: Any) -> Iterator[list[Snapshot]]:
    """Snapshots of the scope at each break of the loop compiled inside the block."""
    exits: list[Snapshot] = []
    fc.loop_exits.append(exits)
    try:
        yield exits
    finally:
        fc.loop_exits.pop()


def record_break(fc: Any) -> None:
    """Called where the innermost loop's break flag is set."""
    if fc.loop_exits:
        fc.loop_exits[-1].append(dict(fc.scope))


def prepare(fc: Any, new: set[str], compile_loop: Callable[[], None], line_key: Callable[[str], str],
            mismatch: Callable[..., str], partial: set[str] = frozenset()) -> dict[str, Any]:
    """For the variables `new` first assigned in the loop: the placeholder to carry each one
    every break defines with one type, or an Undefined saying why it differs between breaks
    (a name in `partial` needs only the breaks that define it: it is read only after those)."""
    saved = fc.scope
    try:
        with fc.b.inside(Block()), collecting(fc) as exits:
            fc.scope = dict(saved)
            compile_loop()
    finally:
        fc.scope = saved
    out: dict[str, Any] = {}
    for n in sorted(new):
        seen = [(s.get(n, _UNSET), s.get(line_key(n))) for s in exits]
        if n in partial:
            seen = [(v, line) for v, line in seen if v is not _UNSET and not isinstance(v, Undefined)]
        if not seen or any(v is _UNSET or isinstance(v, Undefined) for v, _ in seen):
            continue
        first, first_line = seen[0]
        for v, line in seen[1:]:
            if not _same_types(fc, first, v):
                out[n] = Undefined(mismatch(n, (v, line), (first, first_line)))
                break
        else:
            if has_runtime(first) or not all(same(first, v) for v, _ in seen):
                out[n] = _placeholder(fc, first)
            elif n in partial:  # one constant at every exit that defines it (`return None`, `return 1`)
                out[n] = first
    return out


def settle(fc: Any, exits: list[Snapshot], names: set[str]) -> None:
    """After the loop: a variable every break saw as one compile-time value is that value."""
    for n in names:
        seen = [s.get(n) for s in exits]
        if seen and not any(v is None or isinstance(v, Undefined) or has_runtime(v) for v in seen) \
                and all(same(seen[0], v) for v in seen[1:]):
            fc.scope[n] = seen[0]


def _leaf_type(fc: Any, v: Any) -> TileType:
    return v.type if isinstance(v, Value) else TileType(fc.sema.loose_dtype(v), ())


def _same_types(fc: Any, a: Any, b: Any) -> bool:
    paired = pair_leaves(a, b)
    return paired is not None and all(_leaf_type(fc, x) == _leaf_type(fc, y) for x, y in paired[0])


def _placeholder(fc: Any, v: Any) -> Any:
    """`v`'s structure with each runtime-able leaf a zero of its type (never observed)."""
    leaves, rebuild = dynamic_leaves(v)
    zeros = []
    for leaf in leaves:
        t = _leaf_type(fc, leaf)
        zeros.append(fc.sema.broadcast_to(fc.sema.const(0, t.dtype), t.shape))
    return rebuild(zeros)
