"""Backend instances and the conversion of array arguments to what each backend takes."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..backends.base import Backend, BackendKind
from ..backends.interpreter import InterpreterBackend
from ..language import dtypes as dt
from .args import ArrayArg, ListArg, is_torch_tensor


@lru_cache(maxsize=None)
def backend_for(kind: BackendKind) -> Backend:
    if kind == BackendKind.INTERPRETER:
        return InterpreterBackend()
    from ..backends.triton import TritonBackend  # imports triton: only when asked for
    return TritonBackend(kind)


def _torch_to_numpy(t: Any) -> np.ndarray:
    """A NumPy view of a CPU tensor (bfloat16/float8 through their bit patterns)."""
    import torch
    d = dt.to_dtype(t.dtype)
    if d in (dt.bfloat16,):
        return t.view(torch.int16).numpy().view(d.np_dtype)
    if d is not None and d.bitwidth == 8 and d.is_restricted:
        return t.view(torch.uint8).numpy().view(d.np_dtype)
    return t.numpy()


def _numpy_to_torch(a: np.ndarray) -> Any:
    import torch
    d = dt.to_dtype(a.dtype)
    if d is dt.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if d is not None and d.bitwidth == 8 and d.is_restricted:
        return torch.from_numpy(a.view(np.uint8)).view(getattr(torch, d.name))
    return torch.from_numpy(a)


def convert_arrays(flat: list[Any], kind: BackendKind) -> list[Any]:
    """The backend's argument list: arrays as the backend takes them (lists as lists of those)."""
    out = []
    for x in flat:
        if isinstance(x, ListArg):
            out.append(convert_arrays(list(x.items), kind))
        elif isinstance(x, ArrayArg):
            data = x.data
            if kind == BackendKind.INTERPRETER and is_torch_tensor(data):
                data = _torch_to_numpy(data)
            elif kind != BackendKind.INTERPRETER and isinstance(data, np.ndarray):
                data = _numpy_to_torch(data)
            out.append(data)
        else:
            out.append(x)
    return out


def device_arch(arrays: list[ArrayArg | ListArg]) -> str | None:
    """`sm_<major><minor>` of the device holding the arrays."""
    import torch
    index = arrays[0].data.device.index if arrays else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}"
