"""Compile errors of tile kernels, all rooted at `TileError`, each carrying a source location.

The message shows `file:line:col`, the source line and a caret under the column, followed by
the call chain through inlined helper functions.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where an IR op came from: a kernel source position plus the chain of inlined calls."""

    file: str
    line: int
    col: int
    function: str = ""
    caller: "Location | None" = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def render(self, max_frames: int = 24) -> str:
        """`file:line:col`, the source line, and a caret; then each caller, innermost first (the
        first `max_frames`, then how many more: deep recursion has a long chain)."""
        parts = []
        loc: Location | None = self
        shown = 0
        while loc is not None:
            if shown == max_frames:
                more = 0
                while loc is not None:
                    more, loc = more + 1, loc.caller
                parts.append(f"  ... and {more} more calls")
                break
            shown += 1
            text = linecache.getline(loc.file, loc.line).rstrip("\n")
            where = f'  File "{loc.file}", line {loc.line}, column {loc.col + 1}'
            if loc.function:
                where += f", in {loc.function}"
            parts.append(where)
            if text:
                stripped = text.lstrip()
                indent = len(text) - len(stripped)
                parts.append("    " + stripped)
                parts.append("    " + " " * max(0, loc.col - indent) + "^")
            loc = loc.caller
        return "\n".join(parts)


class TileError(Exception):
    """Base of every tilecraft compile error; `loc` says where in the kernel it arose."""

    def __init__(self, message: str, loc: Location | None = None) -> None:
        self.message = message
        self.loc = loc
        super().__init__(self._format())

    def _format(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.message}\n{self.loc.render()}"


class TileSyntaxError(TileError):
    """A Python construct that tile code does not support."""


class TileTypeError(TileError):
    """A type, shape or dtype rule of the language is violated."""


class TileValueError(TileError):
    """A compile-time value is out of its allowed range."""


class TileUnsupportedFeatureError(TileError):
    """A feature the chosen target or tilecraft does not support."""


class TileUnsupportedCallError(TileError):
    """A call tile code cannot make: a builtin with effects outside the kernel (eval, open, ...)
    or the construction of a class that is neither a dataclass, an enum nor a dtype."""


UnsupportedCallError = TileUnsupportedCallError
"""cuTile's name of TileUnsupportedCallError."""


class TileArgumentError(TileTypeError, TypeError):
    """Launch arguments that do not fit the kernel's parameters (also a TypeError, as in cuTile)."""


class TileRecursionError(TileError):
    """Inlining of helper functions went too deep."""


class TileStaticEvalError(TileError):
    """`ct.static_eval` / `ct.static_iter` failed."""


class TileStaticAssertionError(TileError):
    """`ct.static_assert` or `ct.ensure_constant` failed."""


class TileAssertionError(TileError, AssertionError):
    """A `ct.assert_` failed while the kernel ran (also an AssertionError). `loc` is the assert in
    the kernel source. On the GPU (a device-side assert) the CUDA context of the process is lost
    with it: see docs/testing.md."""


class TileInternalError(TileError):
    """A bug in tilecraft: please report it with the kernel."""


class TileCompilerExecutionError(TileError):
    """A backend compiler (e.g. Triton) rejected the generated code."""


class TileCompilerTimeoutError(TileError):
    """A backend compiler ran past its time limit."""
