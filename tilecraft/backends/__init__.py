"""The backends, one package each, and the one line per backend that makes it known to the runtime.

A new backend is a new package here (a class with `compile(fn, facts)`, see base.Backend) and one
`register(BackendSpec(...))` line below; `lazy` imports the package at its first launch only.
"""

from .arrays import as_numpy, as_torch
from .base import BackendKind
from .registry import CPU, CUDA, BackendSpec, lazy, register

register(BackendSpec("interpreter", CPU, lazy(".interpreter:InterpreterBackend"), as_numpy, default=True))
register(BackendSpec("triton", CUDA, lazy(".triton:TritonBackend", BackendKind.TRITON), as_torch,
                     packages=("triton",), default=True))
register(BackendSpec("triton-interpret", CPU, lazy(".triton:TritonBackend", BackendKind.TRITON_INTERPRET), as_torch,
                     packages=("triton",)))
