"""`ct.compiler_timeout(seconds)`: a time limit for compiling kernel variants.

cuTile runs its compiler in a child process and stops it at the limit. tilecraft compiles in
this process, which cannot be interrupted safely, so the limit is checked when a compile ends:
a variant whose compile (front end, passes and lowering for its backend) took longer raises
TileCompilerTimeoutError before it runs and is not kept, so a tuner skips that configuration
as under cuTile. Triton's own compile of the lowered kernel to GPU code, at its first launch,
is not covered. Like cuTile's, the setting is global to the process, not per thread.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ..errors import TileCompilerTimeoutError

_limit: float | None = None


@contextlib.contextmanager
def compiler_timeout(timeout_sec: float | None) -> Iterator[None]:
    """Within the `with` block, compiles that take longer than `timeout_sec` seconds fail with
    TileCompilerTimeoutError (None: no limit)."""
    global _limit
    if timeout_sec is not None and (isinstance(timeout_sec, bool) or not isinstance(timeout_sec, (int, float))
                                    or not timeout_sec > 0):
        raise ValueError(f"compiler_timeout() needs a positive number of seconds or None, got {timeout_sec!r}")
    previous, _limit = _limit, timeout_sec
    try:
        yield
    finally:
        _limit = previous


def check_compile_time(kernel_name: str, seconds: float) -> None:
    """Raise TileCompilerTimeoutError if compiling `kernel_name` took longer than the limit."""
    if _limit is not None and seconds > _limit:
        raise TileCompilerTimeoutError(
            f"Compiling kernel `{kernel_name}` took {seconds:.2f} s, more than the compiler_timeout of {_limit} s "
            f"(tilecraft compiles in this process and checks the limit when the compile ends)")
