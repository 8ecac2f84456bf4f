"""How front-end values meet where control flow joins (after an `if`, around a loop), and the
If that joins two branches (`merge_branches`).

Tuples, frozen-dataclass records, tiled views (their array) and closures (nested defs and
lambdas: what they captured and their default values) are structures of leaves; tiles, loose
numbers and arrays are the leaves that may differ between paths (they become IR block arguments
/ results; arrays as the choice among them); anything else must be the same object on every
path.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from ..ir import Block, TileType, Value, ops
from . import records
from .rewrite import LOOPRET, RETVAL
from .array_choice import chosen, compatible, is_array_like, selector_in, union
from .semantics import is_loose, is_tile, type_name
from .values import LocalFunction, Undefined
from .views import TiledView


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


def _composite(v: Any) -> tuple[Any, tuple[Any, ...], Callable[[tuple[Any, ...]], Any]] | None:
    """(kind, parts, rebuild) of a value whose parts may differ between paths while its kind may
    not: a record (kind: its class; parts: its fields) or a tiled view (kind: its tile shape,
    padding and steps; part: its array, so `tv = y.tiled_view(T)` in a loop over `x`'s view is
    carried as the choice of array). None for other values."""
    if records.is_record(v):
        return type(v), records.fields_of(v), lambda parts: records.rebuild(v, parts)
    if isinstance(v, TiledView):
        return (TiledView, v.tile_shape, v.padding, v.steps), (v.array,), \
            lambda parts: dataclasses.replace(v, array=parts[0])
    return None


def is_leaf(v: Any) -> bool:
    """A value that may differ between paths: a tile, a Python number, or an array (carried as
    the choice among the arrays it may be, array_choice.py)."""
    return is_tile(v) or is_loose(v) or is_array_like(v)


def same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, Value) or isinstance(b, Value):
        return False
    if isinstance(a, LocalFunction) or isinstance(b, LocalFunction):
        return _same_closure_kind(a, b) and same(_closure_parts(a), _closure_parts(b))
    ca, cb = _composite(a), _composite(b)
    if ca is not None or cb is not None:
        return ca is not None and cb is not None and ca[0] == cb[0] and same(ca[1], cb[1])
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
    composite = _composite(v)
    if composite is not None:
        _, parts, rebuild_composite = composite
        leaves, rebuild_parts = dynamic_leaves(parts)
        return leaves, lambda vals: rebuild_composite(rebuild_parts(vals))
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
    if is_leaf(v):
        return [v], lambda vals: vals[0]
    return [], lambda vals: v


def same_static(a: Any, b: Any) -> bool:
    """Whether two values agree in everything that is not a runtime leaf."""
    if isinstance(a, LocalFunction) or isinstance(b, LocalFunction):
        return _same_closure_kind(a, b) and same_static(_closure_parts(a), _closure_parts(b))
    ca, cb = _composite(a), _composite(b)
    if ca is not None or cb is not None:
        return ca is not None and cb is not None and ca[0] == cb[0] and same_static(ca[1], cb[1])
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            same_static(x, y) for x, y in zip(a, b))
    dyn_a = is_leaf(a)
    dyn_b = is_leaf(b)
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
    ca, cb = _composite(a), _composite(b)
    if ca is not None or cb is not None:
        paired = pair_leaves(ca[1], cb[1]) if ca is not None and cb is not None and ca[0] == cb[0] else None
        return None if paired is None else (paired[0], lambda vals: ca[2](paired[1](vals)))  # type: ignore[index]
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
    if is_leaf(a) and is_leaf(b):
        return [(a, b)], lambda vals: vals[0]
    return None


LINE = "$line:"
"""Scope keys `$line:x` hold the line where `x` was last assigned (for mismatch messages)."""

IFEXP = "$ifexp"
"""The result of `a if cond else b`, merged like a variable both branches assign."""

_MISSING = object()


def path_msg(name: str, *values: tuple[Any, int | None]) -> str:
    """cuTile's message for a variable whose type differs between paths: each (value, line of
    its assignment), the later path first."""
    what = {RETVAL: "return value", LOOPRET: "return value", IFEXP: "the conditional expression"}.get(name, f"`{name}`")
    text = " vs. ".join(f"{type_name(v)}" + (f" (line {line})" if line is not None else "") for v, line in values)
    return f"Type of {what} depends on path taken" + (f": {text}" if values else "")


class _Mismatch(Exception):
    pass


class _InnerArray(Exception):
    """An array made inside a branch cannot be chosen after it (array_choice.py)."""


def merge_branches(fc: Any, cond: Value, branches: list[tuple[Block, dict[str, Any]]]) -> None:
    """Emit an If with the values that differ between the branches (then, else: each a block
    and the scope at its end) as results, and bind them in `fc.scope`."""
    (tblk, tscope), (eblk, escope) = branches
    names = sorted(n for n in set(tscope) | set(escope) if not n.startswith(LINE)
                   and not same(tscope.get(n, _MISSING), escope.get(n, _MISSING)))
    for n in set(tscope) - set(names):  # the same on both paths (possibly not as before the `if`)
        fc.scope[n] = tscope[n]
    yields: tuple[list[Value], list[Value]] = ([], [])
    rebuilds: list[tuple[str, Callable[[list[Value]], Any], int]] = []
    for n in names:
        tv, ev = tscope.get(n, _MISSING), escope.get(n, _MISSING)
        if _MISSING in (tv, ev) or isinstance(tv, Undefined) or isinstance(ev, Undefined):
            why = f"`{n}` is possibly undefined: it is not assigned on every path"
            fc.scope[n] = tv if isinstance(tv, Undefined) else ev if isinstance(ev, Undefined) else Undefined(why)
            continue
        mismatch = Undefined(path_msg(n, (ev, escope.get(LINE + n)), (tv, tscope.get(LINE + n))))
        pairs = pair_leaves(tv, ev)
        if pairs is None:
            fc.scope[n] = mismatch
            continue
        dyn, rebuild = pairs
        try:
            tvals = _materialize_pairs(fc, dyn, tblk, eblk)
        except _Mismatch:
            fc.scope[n] = mismatch
            continue
        except _InnerArray:
            what = "the result" if n == IFEXP else f"`{n}`"
            fc.scope[n] = Undefined(f"{what} may be an array made inside a branch: tilecraft chooses at run time "
                                    f"only among arrays that exist before the `if`")
            continue
        yields[0].extend(t for t, _, _ in tvals)
        yields[1].extend(e for _, e, _ in tvals)
        rebuilds.append((n, lambda vals, rebuild=rebuild, decode=[d for _, _, d in tvals]:
                         rebuild([f(v) for f, v in zip(decode, vals)]), len(tvals)))
    for blk, ys in zip((tblk, eblk), yields):
        with fc.b.inside(blk):
            fc.b.emit(ops.Yield, values=tuple(ys))
    op = fc.b.emit(ops.If, cond=cond, then=tblk, orelse=eblk)
    pos = 0
    for n, rebuild, count in rebuilds:
        fc.scope[n] = rebuild(op.results[pos:pos + count])
        pos += count


def _materialize_pairs(fc: Any, pairs: list[tuple[Any, Any]], tblk: Block,
                       eblk: Block) -> list[tuple[Value, Value, Callable[[Value], Any]]]:
    """The IR values the two branches yield for each pair of differing leaves, and how to read
    the If's result for it. As in cuTile the types must be equal, a Python number counting as a
    scalar of its default dtype (1 is int32, 2.0 float32): an int in one branch and a float in
    the other is an error. Two arrays yield which of them (array_choice.py)."""
    out: list[tuple[Value, Value, Callable[[Value], Any]]] = []
    for tv, ev in pairs:
        if is_array_like(tv) or is_array_like(ev):
            options = union(tv, ev)
            if not (is_array_like(tv) and is_array_like(ev) and compatible(options)):
                raise _Mismatch
            inner = {r.id for blk in (tblk, eblk) for op in blk.ops for r in op.results}
            if any(o.id in inner for o in options):
                raise _InnerArray
            sels = []
            for v, blk in ((tv, tblk), (ev, eblk)):
                with fc.b.inside(blk):
                    sels.append(selector_in(fc, v, options))
            out.append((sels[0], sels[1], lambda r, options=options: chosen(r, options)))
            continue
        types = [v.type if isinstance(v, Value) else TileType(fc.sema.loose_dtype(v), ()) for v in (tv, ev)]
        if types[0] != types[1]:
            raise _Mismatch
        pair = []
        for v, blk in ((tv, tblk), (ev, eblk)):
            if isinstance(v, Value):
                pair.append(v)
                continue
            with fc.b.inside(blk):
                pair.append(fc.sema.const(v, types[0].dtype))
        out.append((pair[0], pair[1], lambda r: r))
    return out
