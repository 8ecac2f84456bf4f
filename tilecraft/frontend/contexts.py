"""`with` statements over `@contextlib.contextmanager` generators (cuTile's generator-based
context managers).

Calling such a function in tile code makes a `GeneratorContextManager` (the generator function
and its arguments; a value like any other, entered by one `with` at most). `with` compiles the
generator like an inlined helper split at its one `yield`: the statements before it run on entry
(the yielded value binds the `as` target), the with body runs, then the statements after the
`yield` (the cleanup) run on every way out of the body: at its end, and on `return` from the
function (the return rewrite ends each path of a `with` body that may return with a `return` or
an `ExitWith`; break and continue only skip the rest of the body). The open managers of a
function live in its scope under `WITHS`, innermost last, so that each path knows which it is
inside. As in cuTile, the generator has exactly one reachable `yield`, at its top level (a `with`
body there counts as top level), and never returns.

A nested function made by the generator sees the generator's variables as they are when it is
called (closures read their defining function's current scope, see `LocalFunction`); on exit the
closures the `with`'s function holds are frozen to the generator's final values, as cuTile does.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import types
from dataclasses import dataclass
from typing import Any

from ..errors import Location, TileSyntaxError, TileTypeError
from .rewrite import EnterWith, ExitWith
from .semantics import type_name
from .values import LocalFunction

WITHS = "$withs"
"""Hidden scope name: the context managers open in a function, innermost last."""


@contextlib.contextmanager
def _probe() -> Any:
    yield


_HELPER_CODE = _probe.__code__
"""The code of the wrapper contextlib.contextmanager puts around every generator function."""


def cutile_type(x: Any) -> str:
    """How cuTile names the type of a front-end value in messages (`Tile[int32,()]`); a context
    manager by its call."""
    return str(x) if isinstance(x, GeneratorContextManager) else type_name(x)


class GeneratorContextManager:
    """`cm(*args, **kwargs)` of a @contextmanager function `cm`, not yet entered."""

    __slots__ = ("func", "args", "kwargs", "entered")

    def __init__(self, func: types.FunctionType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.entered = False

    def __str__(self) -> str:
        args = ", ".join(map(cutile_type, self.args))
        kwargs = ", ".join(f"{k}: {cutile_type(v)}" for k, v in self.kwargs.items())
        return f"GeneratorContextManager[{self.func}, args=[{args}], kwargs={{{kwargs}}}]"


def _operators() -> None:
    """Arithmetic on a context manager fails with cuTile's wording."""
    symbols = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
               "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
    for name, sym in symbols.items():
        def forward(self: Any, other: Any, sym: str = sym) -> Any:
            raise TypeError(f"Unsupported operand types for {sym}: {cutile_type(self)} and {cutile_type(other)}")

        def reflected(self: Any, other: Any, sym: str = sym) -> Any:
            raise TypeError(f"Unsupported operand types for {sym}: {cutile_type(other)} and {cutile_type(self)}")
        setattr(GeneratorContextManager, f"__{name}__", forward)
        setattr(GeneratorContextManager, f"__r{name}__", reflected)


_operators()


def context_manager_call(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> GeneratorContextManager | None:
    """The manager `fn(*args, **kwargs)` makes when `fn` is a @contextmanager function (or one
    bound to an object, as a method); None for any other callable."""
    bound: tuple[Any, ...] = ()
    if isinstance(fn, types.MethodType):
        bound, fn = (fn.__self__,), fn.__func__
    if getattr(fn, "__code__", None) is not _HELPER_CODE:
        return None
    return GeneratorContextManager(fn.__wrapped__, (*bound, *args), dict(kwargs))


@dataclass(frozen=True)
class _Open:
    """An entered manager: its generator's compiler, that compiler's scope at the `yield`, the
    statements after the `yield`, and the `with` statement that entered it."""

    sub: Any
    at_yield: dict[str, Any]
    cleanup: list[ast.stmt]
    node: ast.With


# ---- the generator's one yield ------------------------------------------------------------------------
def _nodes(stmts: list[ast.stmt]) -> list[ast.AST]:
    """Every node of `stmts`, nested functions excluded (their yields and returns are theirs)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(reversed(stmts))
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(reversed(list(ast.iter_child_nodes(n))))
    return out


def _flatten(stmts: list[ast.stmt], target: ast.AST) -> list[ast.stmt]:
    """`stmts` with each `with` that holds `target` opened into its entry, body and exit (a
    `with` body is the generator's top level, as in cuTile)."""
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, ast.With) and target in _nodes(s.body):
            out += [EnterWith(s), *_flatten(s.body, target), ExitWith(s)]
        else:
            out.append(s)
    return out


def _split(sub: Any, at: Location) -> tuple[list[ast.stmt], ast.Yield, list[ast.stmt]]:
    """(setup, the yield, cleanup) of the generator `sub` compiles; cuTile's checks."""
    body = sub.parsed.fdef.body
    nodes = _nodes(body)
    ret = next((n for n in nodes if isinstance(n, ast.Return)), None)
    if ret is not None:
        raise TileSyntaxError("Returning from a generator-based context manager is not supported", sub.loc(ret))
    yields = sorted((n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))),
                    key=lambda n: (n.lineno, n.col_offset))
    if not yields:
        raise TileTypeError("Expected a generator function, but no reachable `yield` statement has been found", at)
    if len(yields) > 1:
        raise TileTypeError(f"Generator-based context manager must have one `yield` statement (another `yield` "
                            f"found on line {yields[0].lineno})", sub.loc(yields[1]))
    flat = _flatten(body, yields[0])
    k = next((i for i, s in enumerate(flat) if isinstance(s, ast.Expr) and s.value is yields[0]), None)
    if k is None or isinstance(yields[0], ast.YieldFrom):
        raise TileTypeError("`yield` statement of a generator-based context manager must be placed outside of "
                            "loops and conditional statements", at)
    return flat[:k], yields[0], flat[k + 1:]


# ---- entering and leaving ---------------------------------------------------------------------------
def _enter(fc: Any, manager: Any, node: ast.With, expr: ast.expr) -> Any:
    """Run `manager`'s setup; push it on the open managers; the yielded value."""
    if not isinstance(manager, GeneratorContextManager):
        raise TileTypeError(f"Object of type {cutile_type(manager)} cannot be used as a context manager",
                            fc.loc(expr))
    if manager.entered:
        raise TileTypeError("Context manager cannot be reused", fc.loc(expr))
    manager.entered = True
    sub = fc.callee(manager.func, list(manager.args), manager.kwargs, expr)
    setup, yielded, cleanup = _split(sub, fc.loc(expr))
    fc.ctx.depth += 1
    try:
        sub.run_body(setup)
        value = sub.expr(yielded.value) if yielded.value is not None else None
    finally:
        fc.ctx.depth -= 1
    fc.scope[WITHS] = fc.scope.get(WITHS, ()) + (_Open(sub, dict(sub.scope), cleanup, node),)
    return value


def enter_with(fc: Any, node: ast.With) -> None:
    """Enter the managers of `with a as x, b as y:` in order, binding the targets."""
    for item in node.items:
        value = _enter(fc, fc.expr(item.context_expr), node, item.context_expr)
        if item.optional_vars is not None:
            fc.assign(item.optional_vars, value)


def _leave(fc: Any, entry: _Open) -> None:
    """Compile `entry`'s cleanup (from its state at the `yield`, so that every way out gets the
    same cleanup), then freeze the closures `fc` holds over the generator's scope."""
    sub = entry.sub
    sub.scope = dict(entry.at_yield)
    fc.ctx.depth += 1
    try:
        sub.run_body(entry.cleanup)
    finally:
        fc.ctx.depth -= 1
    for name, value in fc.scope.items():
        fc.scope[name] = _frozen(value, sub)


def _frozen(value: Any, home: Any) -> Any:
    """`value` with its closures over `home`'s scope fixed to that scope as it is now."""
    if isinstance(value, LocalFunction) and value.home is home:
        return dataclasses.replace(value, scope=dict(home.scope), home=None)
    if isinstance(value, tuple):
        return tuple(_frozen(v, home) for v in value)
    return value


def exit_with(fc: Any, node: ast.With) -> None:
    """Leave the `with` statement `node`: its managers' cleanups, innermost first."""
    open_ = fc.scope.get(WITHS, ())
    while open_ and open_[-1].node is node:
        entry, open_ = open_[-1], open_[:-1]
        fc.scope[WITHS] = open_
        _leave(fc, entry)


def close_withs(fc: Any) -> None:
    """On `return`: the cleanups of every manager open in this function, innermost first."""
    open_ = fc.scope.get(WITHS, ())
    fc.scope[WITHS] = ()
    for entry in reversed(open_):
        _leave(fc, entry)


def compile_with(fc: Any, node: ast.With) -> None:
    """`with cm(...) as x, ...: body` (see the module docstring)."""
    before = fc.scope.get(WITHS, ())
    enter_with(fc, node)
    fc.run_body(node.body)
    if getattr(node, "tc_exits_inside", False):  # every path left through a return or an ExitWith
        fc.scope[WITHS] = before
    else:
        exit_with(fc, node)
