"""Tuple comprehensions in tile code, `tuple(e for x in ct.static_iter(...) if c ...)`, unrolled
at compile time into a tuple of front-end values.

Scoping is Python's: the first iterable is evaluated in the enclosing scope; the targets of every
`for` clause are local to the comprehension, so a later iterable, an `if` or the element reading
one before its clause has bound it is an "Undefined variable" (cuTile's TileSyntaxError), and
none of them leaks out. The comprehension's variables live in one scope of its own that
functions defined inside it close over, so a lambda stored in the tuple sees their last values,
as in Python. `if` conditions must be compile-time. Besides `ct.static_iter(...)` (cuTile's
form), a compile-time tuple or range is accepted as an iterable.
"""

from __future__ import annotations

import ast
import builtins
from collections import ChainMap
from typing import Any

from ..errors import TileSyntaxError
from ..ir import Value
from .static import MAX_STATIC_ITER_ITEMS, keyword_function, static_iter_items
from .values import Undefined

_STATIC_IF = ("Tuple comprehension if-conditions must be statically known; if the condition can be evaluated "
              "at compile time, wrap it with ct.static_eval()")


def tuple_comprehension(fc: Any, node: ast.GeneratorExp) -> tuple[Any, ...]:
    """The values of generator expression `node`, compiled by `fc` (a FunctionCompiler)."""
    gens = node.generators
    if any(g.is_async for g in gens):
        raise fc.syntax_error("async in tuple comprehension is not supported", node)
    targets = [_target_names(fc, g.target) for g in gens]
    local = set().union(*targets)
    _check_iterables(fc, gens, targets, local)
    cells: dict[str, Any] = {n: Undefined(f"Undefined variable {n} used", syntax=True) for n in local}
    inner = type(fc)(fc.ctx, fc.parsed, fc.globals, ChainMap(cells, fc.scope), fc.caller, fc.name)
    out: list[Any] = []

    def unroll(k: int) -> None:
        if k == len(gens):
            out.append(inner.expr(node.elt))
            return
        gen = gens[k]
        for item in _items(fc if k == 0 else inner, gen.iter):
            inner.assign(gen.target, item)
            if all(_static_condition(inner, c) for c in gen.ifs):
                unroll(k + 1)

    unroll(0)
    return tuple(out)


def _target_names(fc: Any, target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple):
        return set().union(*(_target_names(fc, t) for t in target.elts))
    raise fc.syntax_error("Tuple comprehension target must be a name or tuple unpacking", target)


def _check_iterables(fc: Any, gens: list[ast.comprehension], targets: list[set[str]], local: set[str]) -> None:
    """Names of the comprehension read by an iterable before a clause binds them: the first
    iterable sees the enclosing scope instead (where the name must exist), later ones see only
    the targets of earlier clauses."""
    bound: set[str] = set()
    for k, gen in enumerate(gens):
        for n in ast.walk(gen.iter):
            if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in local):
                continue
            known = (n.id in fc.scope or n.id in fc.globals or hasattr(builtins, n.id)) if k == 0 else n.id in bound
            if not known:
                raise fc.syntax_error(f"Undefined variable {n.id} used", n)
        bound |= targets[k]


def _items(fc: Any, it: ast.expr) -> list[Any]:
    """The items of one `for` clause's iterable: `ct.static_iter(...)`, or a compile-time tuple
    or range."""
    if isinstance(it, ast.Call) and keyword_function(fc, it.func) == "static_iter":
        return static_iter_items(fc, it)
    value = fc.expr(it)
    if isinstance(value, Value) or not isinstance(value, (tuple, range)):
        raise TileSyntaxError("All iterables in a tuple comprehension must be wrapped in ct.static_iter(), "
                              "e.g. tuple(... for x in ct.static_iter(...))", fc.loc(it))
    if len(value) > MAX_STATIC_ITER_ITEMS:
        raise fc.type_error(f"A tuple comprehension iterates over at most {MAX_STATIC_ITER_ITEMS} items", it)
    return list(value)


def _static_condition(fc: Any, cond: ast.expr) -> bool:
    truth = fc.static_truth(fc.expr(cond))
    if truth is None:
        raise fc.type_error(_STATIC_IF, cond)
    return truth
