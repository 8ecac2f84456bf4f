"""Where a host-side call of a tile operation goes.

Outside a kernel, calling `ct.load(...)` (or a `ct.function` helper) is an error. Inside
`ct.static_eval(...)` the front end evaluates the expression with Python, so such calls do reach
the host side: the front end installs a handler here for the duration of the evaluation, which
compiles the side-effect-free operations and rejects the others.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

HostHandler = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


class _Current(threading.local):
    handler: HostHandler | None = None


_CURRENT = _Current()


def host_handler() -> HostHandler | None:
    """The handler of host-side tile calls now installed (None: such calls are errors)."""
    return _CURRENT.handler


@contextmanager
def handling_host_calls(handler: HostHandler) -> Iterator[None]:
    """Route host-side calls of tile operations to `handler(fn, args, kwargs)` inside the block."""
    saved = _CURRENT.handler
    _CURRENT.handler = handler
    try:
        yield
    finally:
        _CURRENT.handler = saved
