"""Arrays chosen at run time: a variable that holds one array or another after an `if` or a loop
(`alias = X if c else Y`; `alias = Y` inside a loop).

The IR has no array-valued control flow, so the front end carries the choice as an int32
selector (which of `options`, arrays that exist before the branch or loop) through the If / For /
While, and compiles each use of the chosen array once per option, under an if/else chain on the
selector (`dispatch`). The options must share dtype and rank; an array made inside a loop cannot
be carried around it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..ir import ArrayType, CompareFn, Value
from ..language import dtypes as dt
from .semantics import is_array


@dataclass(frozen=True, eq=False)
class ArrayChoice:
    """The `selector`-th (an int32 scalar) of `options`."""

    selector: Value
    options: tuple[Value, ...]

    @property
    def type(self) -> ArrayType:
        return self.options[0].type


def is_array_like(x: Any) -> bool:
    return is_array(x) or isinstance(x, ArrayChoice)


def options_of(x: Any) -> tuple[Value, ...]:
    return x.options if isinstance(x, ArrayChoice) else (x,)


def union(*xs: Any) -> tuple[Value, ...]:
    """The options of all `xs`, first seen first (the first one's keep their positions)."""
    out: list[Value] = []
    for x in xs:
        out += [o for o in options_of(x) if all(o is not p for p in out)]
    return tuple(out)


def compatible(options: tuple[Value, ...]) -> bool:
    """Whether the arrays can stand for one another (one dtype and rank)."""
    return all((o.type.dtype, o.type.ndim) == (options[0].type.dtype, options[0].type.ndim) for o in options)


def selector_in(fc: Any, x: Any, options: tuple[Value, ...]) -> Value:
    """The index of the array `x` (or of the array an ArrayChoice holds) within `options`."""
    def index(o: Value) -> int:
        return next(i for i, p in enumerate(options) if p is o)
    if not isinstance(x, ArrayChoice):
        return fc.sema.const(index(x), dt.int32)
    if x.options == options[:len(x.options)]:
        return x.selector
    out = fc.sema.const(index(x.options[0]), dt.int32)
    for k, o in enumerate(x.options[1:], 1):
        out = fc.sema.where(fc.sema.compare(CompareFn.EQ, x.selector, k), index(o), out)
    return out


def chosen(selector: Value, options: tuple[Value, ...]) -> Any:
    """The front-end value for `selector` over `options` (the array itself if only one)."""
    return options[0] if len(options) == 1 else ArrayChoice(selector, options)


def dispatch(fc: Any, choice: ArrayChoice, apply: Callable[[Value], Any]) -> Any:
    """`apply` to the chosen array: compiled once per option, under an if/else chain on the
    selector, the results joined as the branches of an `if` are."""
    def from_option(k: int) -> Any:
        if k == len(choice.options) - 1:
            return apply(choice.options[k])
        cond = fc.sema.compare(CompareFn.EQ, choice.selector, k)
        return fc.branch_value(cond, lambda: apply(choice.options[k]), lambda: from_option(k + 1))
    return from_option(0)


def find(values: Any) -> ArrayChoice | None:
    """The first ArrayChoice among `values` (arguments of a call)."""
    return next((v for v in values if isinstance(v, ArrayChoice)), None)
