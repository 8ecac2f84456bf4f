"""How front-end values meet where control flow joins (after an `if`, around a loop).

Tuples, frozen-dataclass records and closures (nested defs and lambdas: what they captured and
their default values) are structures of leaves; tiles and loose numbers are the leaves that may
differ between paths (they become IR block arguments / results); anything else must be the same
object on every path.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from ..ir import Value
from . import records
from .semantics import is_loose, is_tile
from .values import LocalFunction, Undefined


def _captured(f: LocalFunction) -> list[str]:
    """The names whose values a closure carries (other closures it sees are compared by identity,
    itself not at all: closures may see each other)."""
    return sorted(k for k, v in f.closure_scope().items()
                  if not k.startswith("$") and not isinstance(v, (Undefined, LocalFunction)))


def _closures_seen(f: LocalFunction) -> dict[str, int]:
    return {k: id(v) for k, v in f.closure_scope().items()
            if isinstance(v, LocalFunction) and k != f.name and not k.startswith("$")}


def _closure_parts(f: LocalFunction) -> tuple[Any, ...]:
    """What a closure carries: the values it sees now (in name order), then its default values."""
    defaults = tuple(p.default for p in f.signature.parameters.values() if p.default is not inspect.Parameter.empty)
    scope = f.closure_scope()
    return tuple(scope[k] for k in _captured(f)) + defaults


def _same_closure_kind(a: Any, b: Any) -> bool:
    """Two closures of one definition that captured the same names (their values may differ)."""
    return isinstance(a, LocalFunction) and isinstance(b, LocalFunction) and a.parsed.fdef is b.parsed.fdef \
        and a.globals is b.globals and _captured(a) == _captured(b) and _closures_seen(a) == _closures_seen(b) \
        and len(_closure_parts(a)) == len(_closure_parts(b))


def _rebuild_closure(template: LocalFunction, parts: tuple[Any, ...]) -> LocalFunction:
    """A closure like `template` that sees `parts` (frozen: the joined values, not its home's)."""
    names = _captured(template)
    scope = {**template.closure_scope(), **dict(zip(names, parts))}
    defaults = iter(parts[len(names):])
    params = [p.replace(default=next(defaults)) if p.default is not inspect.Parameter.empty else p
              for p in template.signature.parameters.values()]
    return dataclasses.replace(template, scope=scope, signature=template.signature.replace(parameters=params),
                               home=None)


def same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, Value) or isinstance(b, Value):
        return False
    if isinstance(a, LocalFunction) or isinstance(b, LocalFunction):
        return _same_closure_kind(a, b) and same(_closure_parts(a), _closure_parts(b))
    if records.is_record(a) or records.is_record(b):
        return type(a) is type(b) and same(records.fields_of(a), records.fields_of(b))
    if is_loose(a) and is_loose(b):
        return type(a) is type(b) and (a == b or (a != a and b != b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def dynamic_leaves(v: Any) -> tuple[list[Any], Callable[[list[Value]], Any]]:
    """Split v into its runtime-able leaves (tiles and numbers) and a function rebuilding it."""
    if records.is_record(v):
        leaves, rebuild_fields = dynamic_leaves(records.fields_of(v))
        return leaves, lambda vals: records.rebuild(v, rebuild_fields(vals))
    if isinstance(v, LocalFunction):
        leaves, rebuild_parts = dynamic_leaves(_closure_parts(v))
        return leaves, lambda vals: _rebuild_closure(v, rebuild_parts(vals))
    if isinstance(v, tuple):
        parts = [dynamic_leaves(x) for x in v]
        counts = [len(p[0]) for p in parts]

        def rebuild(vals: list[Value]) -> Any:
            out, pos = [], 0
            for (_, rb), c in zip(parts, counts):
                out.append(rb(vals[pos:pos + c]))
                pos += c
            return tuple(out)
        return [leaf for p in parts for leaf in p[0]], rebuild
    if is_tile(v) or is_loose(v):
        return [v], lambda vals: vals[0]
    return [], lambda vals: v


def same_static(a: Any, b: Any) -> bool:
    """Whether two values agree in everything that is not a runtime leaf."""
    if isinstance(a, LocalFunction) or isinstance(b, LocalFunction):
        return _same_closure_kind(a, b) and same_static(_closure_parts(a), _closure_parts(b))
    if records.is_record(a) or records.is_record(b):
        return type(a) is type(b) and same_static(records.fields_of(a), records.fields_of(b))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            same_static(x, y) for x, y in zip(a, b))
    dyn_a = is_tile(a) or is_loose(a)
    dyn_b = is_tile(b) or is_loose(b)
    if dyn_a or dyn_b:
        return dyn_a and dyn_b
    return same(a, b)


def pair_leaves(a: Any, b: Any) -> tuple[list[tuple[Any, Any]], Callable[[list[Value]], Any]] | None:
    """Pair up the differing leaves of two branch values; None if their structure differs."""
    if same(a, b):
        return [], lambda vals: a
    if isinstance(a, LocalFunction) or isinstance(b, LocalFunction):
        paired = pair_leaves(_closure_parts(a), _closure_parts(b)) if _same_closure_kind(a, b) else None
        return None if paired is None else (paired[0], lambda vals: _rebuild_closure(a, paired[1](vals)))
    if records.is_record(a) or records.is_record(b):
        paired = pair_leaves(records.fields_of(a), records.fields_of(b)) if type(a) is type(b) else None
        return None if paired is None else (paired[0], lambda vals: records.rebuild(a, paired[1](vals)))
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return None
        parts = [pair_leaves(x, y) for x, y in zip(a, b)]
        if any(p is None for p in parts):
            return None
        counts = [len(p[0]) for p in parts]  # type: ignore[index]

        def rebuild(vals: list[Value]) -> Any:
            out, pos = [], 0
            for p, c in zip(parts, counts):
                out.append(p[1](vals[pos:pos + c]))  # type: ignore[index]
                pos += c
            return tuple(out)
        return [pair for p in parts for pair in p[0]], rebuild  # type: ignore[index]
    if (is_tile(a) or is_loose(a)) and (is_tile(b) or is_loose(b)):
        return [(a, b)], lambda vals: vals[0]
    return None
