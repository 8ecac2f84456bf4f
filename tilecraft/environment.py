"""What each part of tilecraft needs installed, and a clear error when something is missing.

The base install (`pip install tilecraft`: NumPy and ml_dtypes) runs kernels on the NumPy
interpreter. The `triton` and `triton-interpret` backends and `tilecraft inspect` also need
Triton and PyTorch; they call `require` before importing them, so a missing package is named
together with the command that installs it instead of surfacing as a bare ModuleNotFoundError
from deep inside the backend.
"""

from __future__ import annotations

import importlib
from types import ModuleType

TRITON_BACKENDS = "the triton and triton-interpret backends"

# what to run when a package is missing
INSTALL_HINTS: dict[str, str] = {
    "triton": 'pip install "triton==3.6.0" (from a checkout: pip install -e ".[triton]")',
    "torch": ("pip install torch==2.13.0 for the CPU build (enough for the triton-interpret backend "
              "and `tilecraft inspect`); on a CUDA machine install PyTorch's CUDA build instead"),
    "jax": 'pip install "jax>=0.8.2" (on a CUDA machine: "jax[cuda12]" or "jax[cuda13]")',
    "jax_triton": 'pip install "jax-triton>=0.3.1" (it needs JAX with CUDA support and triton>=3.6)',
}


class MissingDependencyError(ImportError):
    """An optional package that the requested feature needs is not installed."""


def require(module: str, needed_by: str) -> ModuleType:
    """Import and return `module`; if it is not installed, raise MissingDependencyError saying
    that `needed_by` (e.g. "the triton and triton-interpret backends") needs it and how to
    install it. An ImportError raised inside an installed package propagates unchanged."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        if exc.name is not None and exc.name.partition(".")[0] != top:
            raise  # the package is there but one of its own imports failed: not ours to explain
        hint = INSTALL_HINTS.get(top, f"pip install {top}")
        raise MissingDependencyError(f"{top} is required by {needed_by} but is not installed ({exc}). "
                                     f"Install it with: {hint}", name=top) from exc
