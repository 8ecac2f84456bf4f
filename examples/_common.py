"""Shared plumbing of the samples: pick where to run, move arrays there, time a launch."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def device_name(backend: str | None) -> str:
    if backend in (None, "triton") and cuda_available():
        import torch
        return f"triton on {torch.cuda.get_device_name()}"
    return backend or "interpreter (NumPy, CPU)"


def to_device(a: np.ndarray, backend: str | None) -> Any:
    """A CUDA tensor where a GPU runs the kernel, a CPU tensor for triton-interpret, else NumPy."""
    if backend in (None, "triton") and cuda_available():
        import torch
        return torch.from_numpy(a).cuda()
    if backend == "triton-interpret":
        import torch
        return torch.from_numpy(a)
    return a


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return x.float().cpu().numpy() if str(x.dtype) == "torch.bfloat16" else x.cpu().numpy()


def stream_for(x: Any) -> Any:
    if getattr(x, "is_cuda", False):
        import torch
        return torch.cuda.current_stream()
    return None


def timed(fn: Callable[[], None], x: Any) -> float:
    """Seconds one call of fn takes (synchronizing the GPU when x lives there)."""
    sync = getattr(x, "is_cuda", False)
    if sync:
        import torch
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if sync:
        import torch
        torch.cuda.synchronize()
    return time.perf_counter() - start


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    out64 = np.asarray(out, dtype=np.float64)
    return float(np.linalg.norm(out64 - ref) / np.linalg.norm(ref))
