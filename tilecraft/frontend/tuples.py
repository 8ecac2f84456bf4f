"""Comparisons that involve tuples in tile code: `==` / `!=` item by item, `x in (a, b, ...)`.

Tuples are compile-time containers, but their items may be runtime scalars; then the result is
a runtime bool built from the items' comparisons (cuTile's rules and wording: ordering
comparisons of tuples, non-scalar items and `in` with tile operands are errors).
"""

from __future__ import annotations

from typing import Any

from ..ir import BinaryFn, CompareFn, Value
from .records import has_runtime
from .semantics import is_tile, type_name

_NAMES = {CompareFn.EQ: "eq", CompareFn.NE: "ne", CompareFn.LT: "lt", CompareFn.LE: "le", CompareFn.GT: "gt",
          CompareFn.GE: "ge"}


def equal(fc: Any, x: Any, y: Any) -> Any:
    """`x == y`: a Python bool for compile-time operands, else a runtime bool."""
    if isinstance(x, tuple) and isinstance(y, tuple):
        return tuple_compare(fc, CompareFn.EQ, x, y)
    if isinstance(x, Value) or isinstance(y, Value):
        if isinstance(x, tuple) or isinstance(y, tuple):
            return False
        return fc.sema.compare(CompareFn.EQ, x, y)
    return x == y


def tuple_compare(fc: Any, fn: CompareFn, x: tuple[Any, ...], y: tuple[Any, ...]) -> Any:
    """`x == y` or `x != y` of two tuples (other comparisons are errors, as in cuTile)."""
    if fn not in (CompareFn.EQ, CompareFn.NE):
        raise fc.sema.type_error(f"Operator '{_NAMES[fn]}' is not supported for tuples")
    if not has_runtime(x) and not has_runtime(y):
        return (x == y) == (fn is CompareFn.EQ)
    if len(x) != len(y):
        return fn is CompareFn.NE
    for item in (*x, *y):
        if is_tile(item) and item.tile.shape != ():
            raise fc.sema.type_error("Tuple comparison is not supported for non-scalar elements")
        if isinstance(item, Value) and not is_tile(item):
            raise fc.sema.type_error(f"Tuple comparison is not supported for elements of type {type_name(item)}")
    result: Any = True
    for a, b in zip(x, y):
        same = equal(fc, a, b)
        if same is False:
            result = False
            break
        if same is not True:
            result = same if result is True else fc.sema.binary(BinaryFn.AND, result, same)
    if fn is CompareFn.EQ:
        return result
    return (not result) if isinstance(result, bool) else fc.sema.compare(CompareFn.EQ, result, False)


def contains(fc: Any, x: Any, items: tuple[Any, ...]) -> Any:
    """`x in items`: the items are compared in order; a compile-time match ends the search."""
    result: Any = None
    for item in items:
        same = equal(fc, x, item)
        if isinstance(same, Value):
            if same.tile.shape != ():
                raise fc.sema.type_error(f"'in' requires scalar operands, but got shape {same.tile.shape}")
            result = same if result is None else fc.sema.binary(BinaryFn.OR, result, same)
        elif same:
            return True
    return False if result is None else result
