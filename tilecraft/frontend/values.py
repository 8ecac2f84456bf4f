"""Front-end values that are neither IR values nor plain Python objects."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Undefined:
    """A name that has no single value here; using it is an error with this reason (a
    TileSyntaxError when `syntax`, as for a variable read before it is bound, else a
    TileTypeError)."""

    reason: str
    syntax: bool = False


@dataclass
class ParsedFunction:
    fdef: ast.FunctionDef | ast.Lambda
    filename: str
    col_offset: int


@dataclass
class LocalFunction:
    """A nested `def` or `lambda` in tile code and its signature (defaults evaluated when the
    definition ran, as in Python). Its body sees the variables of the function that defined it,
    `home` (a FunctionCompiler), as they are when it is called, as Python closures do; a closure
    frozen when its home's context-manager scope ended (home None) sees `scope` instead."""

    parsed: ParsedFunction
    scope: dict[str, Any]
    globals: dict[str, Any]
    name: str
    signature: inspect.Signature
    home: Any = None

    def closure_scope(self) -> dict[str, Any]:
        """A fresh scope holding the variables the body closes over."""
        return dict(self.home.scope if self.home is not None else self.scope)


@dataclass
class BoundMethod:
    """`tile.astype` and friends: a builtin handler with its receiver, and the method's public
    name (for messages; the handler's own name when empty)."""

    handler: Callable[..., Any]
    receiver: Any
    name: str = ""


