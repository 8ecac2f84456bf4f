"""`ct.static_eval` and `ct.static_assert`: compile-time evaluation inside tile code."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import TileStaticAssertionError, TileStaticEvalError
from ..ir import Value
from ..language import ops as L
from .values import Undefined


class Proxy:
    """A runtime tile or array seen from static_eval: exposes shape, dtype and ndim."""

    def __init__(self, value: Value) -> None:
        self.value = value
        t = value.type
        self.dtype = t.dtype
        self.ndim = t.ndim
        self.shape = getattr(t, "shape", None)

    def __repr__(self) -> str:
        kind = "array" if self.shape is None else "tile"
        shape = ", ".join("?" for _ in range(self.ndim)) if self.shape is None else ", ".join(map(str, self.shape))
        return f"<{kind}[{self.dtype}, ({shape})]>"


def _wrap(v: Any) -> Any:
    if isinstance(v, Value):
        return Proxy(v)
    if isinstance(v, tuple):
        return tuple(_wrap(x) for x in v)
    return v


def _unwrap(v: Any) -> Any:
    if isinstance(v, Proxy):
        return v.value
    if isinstance(v, tuple):
        return tuple(_unwrap(x) for x in v)
    return v


def static_eval(fc: Any, node: ast.expr) -> Any:
    for n in ast.walk(node):
        if isinstance(n, ast.NamedExpr):
            raise TileStaticEvalError("static_eval() does not allow assignment", fc.loc(n))
    names = {k: _wrap(v) for k, v in fc.scope.items() if not isinstance(v, Undefined) and not k.startswith("$")}
    code = compile(ast.fix_missing_locations(ast.Expression(node)), fc.parsed.filename, "eval")
    try:
        return _unwrap(eval(code, dict(fc.globals), names))  # noqa: S307 (the user's own kernel code)
    except Exception as exc:
        raise TileStaticEvalError(f"static_eval() failed: {type(exc).__name__}: {exc}", fc.loc(node)) from None


def static_call(fc: Any, fn: Any, node: ast.Call) -> Any:
    if fn is L.static_eval:
        if len(node.args) != 1 or node.keywords:
            raise fc.type_error("static_eval() takes exactly one expression", node)
        return static_eval(fc, node.args[0])
    if not 1 <= len(node.args) <= 2:
        raise fc.type_error("static_assert() takes a condition and an optional message", node)
    cond = fc.expr(node.args[0])
    if isinstance(cond, Value) or not isinstance(cond, (bool, int)):
        raise fc.type_error("static_assert() condition must be a compile-time bool", node.args[0])
    if not cond:
        msg = str(fc.expr(node.args[1])) if len(node.args) == 2 else ""
        text = f"Static assertion failed: {msg}" if msg else "Static assertion failed"
        raise TileStaticAssertionError(text, fc.loc(node))
    return None
