"""`with` statements over the user's `@contextlib.contextmanager` generators.

The generator is compiled like an inlined helper split at its one `yield`: the statements before
it run where the `with` starts (the yielded value binds the `as` target), the `with` body runs,
then the statements after the `yield` (cleanup, also reached when the body breaks or continues,
whose flags only skip the body). As in cuTile the `yield` must be a top-level statement of the
generator (not inside a loop or branch) and the generator may not `return`.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from ..errors import TileSyntaxError, TileTypeError, TileUnsupportedFeatureError


def _split(sub: Any, name: str, loc: Any) -> tuple[list[ast.stmt], ast.Yield, list[ast.stmt]]:
    """(setup, the yield, cleanup) of a generator body."""
    body = sub.parsed.fdef.body
    tops = [i for i, s in enumerate(body) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield)]
    every = [n for s in body for n in ast.walk(s) if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if len(tops) != 1 or len(every) != 1:
        raise TileSyntaxError(f"Context manager {name}() must have exactly one `yield`, as a statement of its "
                              f"own outside loops and branches", loc)
    if any(isinstance(n, ast.Return) for s in body for n in ast.walk(s)):
        raise TileSyntaxError(f"Context manager {name}() cannot `return`", loc)
    k = tops[0]
    return body[:k], body[k].value, body[k + 1:]


def compile_with(fc: Any, node: ast.With) -> None:
    """Compile `with cm(args) as x, ...: body` (see module docstring)."""
    if any(isinstance(n, ast.Return) for s in node.body for n in ast.walk(s)):
        raise TileUnsupportedFeatureError("`return` inside a `with` body is not supported", fc.loc(node))
    cleanups = []
    fc.ctx.depth += 1
    try:
        for item in node.items:
            expr = item.context_expr
            if not isinstance(expr, ast.Call):
                raise TileTypeError("`with` needs a call of a @contextlib.contextmanager function", fc.loc(expr))
            fn = fc.expr(expr.func)
            gen = getattr(fn, "__wrapped__", None)
            if gen is None or not inspect.isgeneratorfunction(gen):
                raise TileTypeError(f"`with` needs a @contextlib.contextmanager function, got "
                                    f"{getattr(fn, '__name__', type(fn).__name__)}", fc.loc(expr))
            args = [fc.expr(a) for a in expr.args]
            kwargs = {kw.arg: fc.expr(kw.value) for kw in expr.keywords}
            sub = fc.callee(gen, args, kwargs, expr)
            setup, yielded, cleanup = _split(sub, gen.__name__, fc.loc(expr))
            sub.run_body(setup)
            value = sub.expr(yielded.value) if yielded.value is not None else None
            if item.optional_vars is not None:
                fc.assign(item.optional_vars, value)
            cleanups.append((sub, cleanup))
        fc.run_body(node.body)
        for sub, cleanup in reversed(cleanups):
            sub.run_body(cleanup)
    finally:
        fc.ctx.depth -= 1
