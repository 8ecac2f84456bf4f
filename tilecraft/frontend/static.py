"""`ct.static_eval`, `ct.static_assert` and `ct.static_iter`: Python evaluated inside tile code.

The argument expression runs as Python, compiled as a lambda over the local names it reads, so
comprehensions, generators and calls of plain Python functions behave as on the host. Local
compile-time values are passed as themselves; runtime values (tiles, arrays) as symbols
(`symbols.py`) whose dtype and shape are known and whose arithmetic compiles into the kernel.
The rules and wording follow cuTile: the three functions must be called by name, the
expression may not assign, and an exception it raises becomes a TileStaticEvalError.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import keyword
import types
from functools import partial
from typing import Any

import numpy as np

from ..errors import TileError, TileStaticAssertionError, TileStaticEvalError, TileSyntaxError, TileTypeError
from ..ir import Value
from ..language import ops as L
from ..language.dispatch import handling_host_calls
from . import records
from .builtins import call
from .constants import known_value
from .registry import handles
from .semantics import describe
from .symbols import Evaluation, unwrap, wrap
from .values import Undefined

KEYWORD_FUNCTIONS = {"static_eval": L.static_eval, "static_assert": L.static_assert,
                     "static_iter": L.static_iter}
"""The functions that work like keywords: their argument is not compiled but evaluated."""

MAX_STATIC_ITER_ITEMS = 1000


class Kind(enum.Enum):
    """What a Python-evaluated expression is (named in error messages as cuTile does)."""

    EVAL = "static_eval()"
    STATIC_DEF = "@static_def function"
    ASSERT_CONDITION = "static_assert() condition"
    ASSERT_MESSAGE = "static_assert() message"
    ITER_ITERABLE = "static_iter() iterable"


def keyword_function(fc: Any, func: ast.expr) -> str | None:
    """The name of the keyword-like function `func` calls by name (`ct.static_eval`,
    `cuda.tile.static_eval`, `static_eval` imported), or None for any other callee."""
    if isinstance(func, ast.Name):
        stub = KEYWORD_FUNCTIONS.get(func.id)
        if func.id in fc.scope:
            return func.id if stub is not None and fc.scope[func.id] is stub else None
        value = fc.globals.get(func.id)
        return next((name for name, s in KEYWORD_FUNCTIONS.items() if s is value), None)
    if isinstance(func, ast.Attribute) and func.attr in KEYWORD_FUNCTIONS and _is_name_chain(func.value):
        module = fc.expr(func.value)
        if isinstance(module, types.ModuleType) and getattr(module, func.attr, None) is KEYWORD_FUNCTIONS[func.attr]:
            return func.attr
    return None


def _is_name_chain(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def indirect_use(name: str, loc: Any) -> TileSyntaxError:
    """The error for calling a keyword-like function through another name."""
    return TileSyntaxError(f"{name}() must be used directly by name, e.g. cuda.tile.{name}() or ct.{name}().", loc)


def _indirect(name: str) -> Any:
    def handler(fc: Any, *args: Any, **kwargs: Any) -> Any:
        raise indirect_use(name, fc.b.loc)
    return handler


for _name, _stub in KEYWORD_FUNCTIONS.items():
    handles(_stub)(_indirect(_name))


def evaluate(fc: Any, node: ast.expr, kind: Kind) -> Any:
    """Evaluate `node` as Python in the current scope; the raw result (symbols not unwrapped)."""
    stored = sorted(n.target.id for n in ast.walk(node)
                    if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))
    if stored:
        raise TileSyntaxError(f"static_eval() expression attempted to modify a local variable '{stored[0]}'",
                              fc.loc(node))
    read = {n.id: n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    params = sorted(name for name in read if name in fc.scope and name.isidentifier() and not keyword.iskeyword(name))
    for name in params:
        if isinstance(fc.scope[name], Undefined):
            raise fc.type_error(fc.scope[name].reason, read[name])
    lam = ast.Lambda(args=ast.arguments(posonlyargs=[ast.arg(arg=p) for p in params], args=[], vararg=None,
                                        kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
                     body=node)
    tree = ast.fix_missing_locations(ast.copy_location(ast.Expression(body=ast.copy_location(lam, node)), node))
    fn = eval(compile(tree, fc.parsed.filename, "eval"), dict(fc.globals))  # noqa: S307 (the kernel's own code)
    return _run(fc, kind, node, fn, [fc.scope[p] for p in params], {})


def _run(fc: Any, kind: Kind, node: ast.AST | None, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`fn(*args, **kwargs)` as Python, front-end values passed as symbols; a Python exception
    it raises becomes a TileStaticEvalError."""
    ev = Evaluation(fc, kind.value, node)
    try:
        with handling_host_calls(partial(_host_call, ev)):
            return fn(*(wrap(a, ev) for a in args), **{k: wrap(v, ev) for k, v in kwargs.items()})
    except TileError:
        raise
    except Exception as exc:
        text = f": {exc}" if str(exc) else ""
        raise TileStaticEvalError(f"Exception was raised inside {kind.value} ({type(exc).__name__}{text})",
                                  ev.loc()) from exc


def call_static_def(fc: Any, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> Any:
    """A call of a `ct.static_def` function: run as Python; fields it sets on a dataclass
    argument (`object.__setattr__(self, ...)` in an `__init__`) become front-end values too."""
    result = _run(fc, Kind.STATIC_DEF, node, fn, args, kwargs)
    for a in args:
        if records.is_record(a):
            for f in dataclasses.fields(a):
                if hasattr(a, f.name):
                    object.__setattr__(a, f.name, as_constant(fc, getattr(a, f.name), node))
    return as_constant(fc, result, node)


def _host_call(ev: Evaluation, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A tile operation called by Python code under evaluation: the pure ones are compiled."""
    if fn in L.STATIC_EVAL_OK:
        result = call(ev.fc, fn, [unwrap(a) for a in args], {k: unwrap(v) for k, v in kwargs.items()}, ev.node)
        return wrap(result, ev)
    verb = "used" if fn in KEYWORD_FUNCTIONS.values() else "called"
    raise TileStaticEvalError(f"{fn.__name__}() cannot be {verb} inside {ev.where}.", ev.loc())


def as_constant(fc: Any, value: Any, node: ast.AST | None) -> Any:
    """A Python-evaluated result as a front-end value: symbols become their IR values; mutable
    containers cannot be kernel values (cuTile: 'Cannot create constant ...'), nor instances of
    dataclasses tile code cannot use."""
    out = unwrap(value)
    problem = _non_constant(out)
    if problem is not None:
        raise TileTypeError(problem, fc.loc(node) if node is not None else fc.b.loc)
    return out


def _non_constant(v: Any) -> str | None:
    if isinstance(v, (list, dict, set, bytearray)):
        t = type(v)
        prefix = "" if t.__module__ == "builtins" else f"{t.__module__}."
        return f"Cannot create constant from value of type {prefix}{t.__qualname__}."
    if isinstance(v, tuple):
        return next((p for p in map(_non_constant, v) if p is not None), None)
    if records.is_record(v):
        return records.class_problem(type(v))
    return None


# ---- the three functions -----------------------------------------------------------------------
def static_call(fc: Any, name: str, node: ast.Call) -> Any:
    """`ct.static_eval(expr)` or `ct.static_assert(cond, msg)` called by name."""
    if name == "static_eval":
        if len(node.args) != 1 or node.keywords:
            raise TileSyntaxError("static_eval() expects a single expression", fc.loc(node))
        return as_constant(fc, evaluate(fc, node.args[0], Kind.EVAL), node)
    if name == "static_assert":
        return _static_assert(fc, node)
    raise TileSyntaxError("static_iter() is only allowed as iterable in a `for` loop, "
                          "i.e. `for i in ct.static_iter(...)`", fc.loc(node))


def _static_assert(fc: Any, node: ast.Call) -> None:
    if not 1 <= len(node.args) <= 2 or node.keywords:
        raise TileSyntaxError("static_assert(cond, msg=None, /) expects one or two positional arguments",
                              fc.loc(node))
    cond_node = node.args[0]
    cond = unwrap(evaluate(fc, cond_node, Kind.ASSERT_CONDITION))
    if isinstance(cond, Value):
        cond = known_value(fc.b.defs, cond)  # strictly typed constants fold (constants.py)
        if cond is None:
            raise fc.type_error("static_assert() condition must be a compile-time constant", cond_node)
    if not isinstance(cond, (bool, np.bool_)):
        raise fc.type_error(f"static_assert() condition must be a boolean, not {describe(cond)}", cond_node)
    if cond:
        return None
    message = evaluate(fc, node.args[1], Kind.ASSERT_MESSAGE) if len(node.args) == 2 else None
    text = "" if message is None else str(message)
    raise TileStaticAssertionError(f"Static assertion failed: {text}" if text else "Static assertion failed",
                                   fc.loc(node))


def static_iter_items(fc: Any, call_node: ast.Call) -> list[Any]:
    """The items of `ct.static_iter(iterable)` (a for loop's iterable), as front-end values."""
    if len(call_node.args) != 1 or call_node.keywords:
        raise TileSyntaxError("static_iter() expects a single expression", fc.loc(call_node))
    arg = call_node.args[0]
    iterable = evaluate(fc, arg, Kind.ITER_ITERABLE)
    try:
        it = iter(iterable)
    except Exception as exc:
        text = f": {exc}" if str(exc) else ""
        raise TileTypeError(f"Invalid static_iter() iterable{text}", fc.loc(arg)) from None
    items: list[Any] = []
    while True:
        try:
            item = next(it)
        except StopIteration:
            return items
        except TileError:
            raise
        except Exception as exc:
            text = f": {exc}" if str(exc) else ""
            raise TileTypeError(f"Error was raised while obtaining item #{len(items)} from the static_iter() "
                                f"iterable{text}", fc.loc(arg)) from None
        if len(items) == MAX_STATIC_ITER_ITEMS:
            raise TileStaticEvalError(f"Maximum number of iterations ({MAX_STATIC_ITER_ITEMS}) has been reached "
                                      f"while unpacking the static_iter() iterable", fc.loc(arg))
        try:
            items.append(as_constant(fc, item, arg))
        except TileTypeError as exc:
            raise TileStaticEvalError(f"Invalid item #{len(items)} of static_iter() iterable: {exc.message}",
                                      fc.loc(arg)) from None
