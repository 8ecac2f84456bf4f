"""One table from public tile functions (and Python builtins) to their front-end handlers."""

from __future__ import annotations

from typing import Any, Callable

HANDLERS: dict[Any, Callable[..., Any]] = {}


def handles(*targets: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn(fc, *args, **kwargs)` as the compilation of calls to each target."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for t in targets:
            HANDLERS[t] = fn
        return fn
    return register


def register(stub: Any, handler: Callable[..., Any]) -> None:
    """Make `handler` (made by a factory for several stubs) the compilation of `stub`, named
    after it (error messages and signatures show that name)."""
    handler.__name__ = handler.__qualname__ = stub.__name__
    HANDLERS[stub] = handler
