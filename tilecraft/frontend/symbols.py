"""Runtime values as Python code under `ct.static_eval` sees them (cuTile's "symbols").

A symbol stands for an IR value. Its compile-time facts are plain attributes (`dtype`,
`shape`, `ndim`; an array's `shape` and `strides` are symbols or ints); arithmetic, comparisons
and `@` on tile symbols compile into the kernel and give new symbols. Methods such as
`tile.reshape` can be taken (and returned to the kernel) but not called, like nested functions:
they are tile code, which Python evaluation cannot run. Converting a symbol to a Python number
or bool is an error, since its value is only known when the kernel runs.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import TileError, TileStaticEvalError
from ..ir import CompareFn, Value, ops
from . import records
from .array_choice import ArrayChoice
from .builtins import attribute, divmod_
from .constants import known_value
from .raw_memory import RawMemory
from .semantics import dtype_name, is_array, is_tile
from .values import BoundMethod, LocalFunction
from .views import TiledView


@dataclass(frozen=True)
class Evaluation:
    """One Python evaluation: the compiler it emits into, what it is (for messages) and where
    (`node` None: at the statement being compiled)."""

    fc: Any
    where: str
    node: ast.AST | None

    def loc(self) -> Any:
        return self.fc.loc(self.node) if self.node is not None else self.fc.b.loc


class Symbol:
    """A runtime value (array, list of arrays, tiled view, ...) seen from Python evaluation."""

    __slots__ = ("_value", "_ev")

    def __init__(self, value: Any, ev: Evaluation) -> None:
        self._value = value
        self._ev = ev

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        ev = self._ev
        try:
            result = attribute(ev.fc, self._value, name, ev.node)
        except TileError as exc:
            raise AttributeError(exc.message) from None
        if isinstance(result, BoundMethod):
            return SymbolicCallable(result, name, ev)
        return wrap(result, ev)

    def __repr__(self) -> str:
        v = self._value
        if is_array(v):
            static = self._ev.fc.ctx.static_dims.get(v.id, {})
            dims = ", ".join(str(static.get((ops.ArrayShape, a), "?")) for a in range(v.type.ndim))
            return f"<array[{dtype_name(v.type.dtype)}, ({dims})]>"
        return f"<{v.type}>" if isinstance(v, Value) else f"<{type(v).__name__}>"


def _value_as(what: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A conversion of a symbolic tile to a Python value: `convert` of the value a strictly
    typed constant folds to (constants.py); cuTile's ValueError for any other tile."""
    def method(self: Any) -> Any:
        known = known_value(self._ev.fc.b.defs, self._value)
        if known is None:
            raise ValueError(f"Symbolic tile has no concrete value and thus cannot be converted to {what}")
        return convert(known)
    return method


class SymbolicTile(Symbol):
    """A runtime tile (or scalar): its operators compile into the kernel."""

    __slots__ = ()

    @property
    def dtype(self) -> Any:
        return self._value.type.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.type.shape

    @property
    def ndim(self) -> int:
        return len(self._value.type.shape)

    def __repr__(self) -> str:
        return f"<tile[{dtype_name(self.dtype)}, {self.shape}]>"

    def _binop(self, op: ast.operator, a: Any, b: Any) -> Any:
        ev = self._ev
        return wrap(ev.fc.binop(op, unwrap(a), unwrap(b), ev.node), ev)

    def _compare(self, fn: CompareFn, other: Any) -> Any:
        return wrap(self._ev.fc.sema.compare(fn, self._value, unwrap(other)), self._ev)

    def _unary(self, op: ast.unaryop) -> Any:
        return wrap(self._ev.fc.unaryop(op, self._value, self._ev.node), self._ev)

    def __neg__(self) -> Any:
        return self._unary(ast.USub())

    def __invert__(self) -> Any:
        return self._unary(ast.Invert())

    def __divmod__(self, other: Any) -> Any:
        return wrap(divmod_(self._ev.fc, self._value, unwrap(other)), self._ev)

    def __rdivmod__(self, other: Any) -> Any:
        return wrap(divmod_(self._ev.fc, unwrap(other), self._value), self._ev)

    __bool__ = _value_as("boolean", bool)
    __int__ = _value_as("an integer", int)
    __index__ = _value_as("an integer", operator.index)
    __float__ = _value_as("a float", float)
    __hash__ = None  # type: ignore[assignment]  (== builds a tile)


def _operators() -> None:
    ops_by_name = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult, "truediv": ast.Div, "floordiv": ast.FloorDiv,
                   "mod": ast.Mod, "pow": ast.Pow, "and": ast.BitAnd, "or": ast.BitOr, "xor": ast.BitXor,
                   "lshift": ast.LShift, "rshift": ast.RShift, "matmul": ast.MatMult}
    for name, op in ops_by_name.items():
        setattr(SymbolicTile, f"__{name}__", lambda self, other, op=op: self._binop(op(), self, other))
        setattr(SymbolicTile, f"__r{name}__", lambda self, other, op=op: self._binop(op(), other, self))
    for name, fn in (("eq", CompareFn.EQ), ("ne", CompareFn.NE), ("lt", CompareFn.LT), ("le", CompareFn.LE),
                     ("gt", CompareFn.GT), ("ge", CompareFn.GE)):
        setattr(SymbolicTile, f"__{name}__", lambda self, other, fn=fn: self._compare(fn, other))


_operators()


class SymbolicCallable:
    """A tile-code function (nested def, tile method, ...) seen from Python evaluation: it can be
    passed around and returned, not called."""

    __slots__ = ("target", "name", "_ev")

    def __init__(self, target: Any, name: str, ev: Evaluation) -> None:
        self.target = target
        self.name = name
        self._ev = ev

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TileStaticEvalError(f"{self.name}() cannot be called inside {self._ev.where}.", self._ev.loc())

    def __repr__(self) -> str:
        return f"<tile function {self.name}>"


def wrap(v: Any, ev: Evaluation) -> Any:
    """A front-end value as Python evaluation sees it."""
    if isinstance(v, Value):
        return SymbolicTile(v, ev) if is_tile(v) else Symbol(v, ev)
    if isinstance(v, (TiledView, RawMemory, ArrayChoice)):
        return Symbol(v, ev)
    if isinstance(v, tuple):
        return tuple(wrap(x, ev) for x in v)
    if isinstance(v, LocalFunction):
        return SymbolicCallable(v, v.name, ev)
    if isinstance(v, BoundMethod):
        return SymbolicCallable(v, v.name or v.handler.__name__, ev)
    if records.is_record(v) and records.has_runtime(v):
        return records.rebuild(v, tuple(wrap(x, ev) for x in records.fields_of(v)))
    return v


def unwrap(v: Any) -> Any:
    """The front-end value of what Python evaluation produced (symbols inside tuples and
    dataclass instances included)."""
    if isinstance(v, Symbol):
        return v._value
    if isinstance(v, SymbolicCallable):
        return v.target
    if isinstance(v, tuple):
        return tuple(unwrap(x) for x in v)
    if records.is_record(v) and _has_symbol(v):
        return records.rebuild(v, tuple(unwrap(x) for x in records.fields_of(v)))
    return v


def _has_symbol(v: Any) -> bool:
    if isinstance(v, (Symbol, SymbolicCallable)):
        return True
    if isinstance(v, tuple):
        return any(map(_has_symbol, v))
    if records.is_record(v):
        return any(_has_symbol(getattr(v, f.name)) for f in dataclasses.fields(v))
    return False
