"""Tools on top of the runtime: inspection of every compilation stage, benchmarking against
PyTorch, and the command line.

`inspect_kernel` and `Inspection` come from tools/inspection.py, which imports Triton and torch:
it is loaded on first use, so `tilecraft --help` works without them; tools/benchmarking.py
(`bench_kernel`) imports torch and is loaded by the `bench` command when it runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_SMS", "STAGES", "CommandError", "Inspection", "inspect_kernel"]

STAGES = ("ir", "triton", "ttir", "ttgir", "llir", "ptx", "sass")  # what an Inspection shows

DEFAULT_SMS = 132
"""The SMs an inspection assumes for a grid's launch unless told: an H100's or H200's."""


class CommandError(Exception):
    """A user's mistake on the command line (a bad argument, a missing file or kernel): the
    `tilecraft` command prints the message, without a traceback, and exits with `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def __getattr__(name: str) -> Any:
    if name in ("Inspection", "inspect_kernel"):
        from . import inspection
        return getattr(inspection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
