"""Array conversions for BackendSpec.to_array: NumPy arrays <-> CPU torch tensors, without
copying (bfloat16 and float8 through their bit patterns)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..language import dtypes as dt


def as_numpy(x: Any) -> np.ndarray:
    """`x` (a NumPy array or a CPU torch tensor) as a NumPy array sharing its memory."""
    if isinstance(x, np.ndarray):
        return x
    import torch
    d = dt.to_dtype(x.dtype)
    if d is dt.bfloat16:
        return x.view(torch.int16).numpy().view(d.np_dtype)
    if d is not None and d.bitwidth == 8 and d.is_restricted:
        return x.view(torch.uint8).numpy().view(d.np_dtype)
    return x.numpy()


def as_torch(x: Any) -> Any:
    """`x` (a NumPy array or a torch tensor) as a torch tensor sharing its memory; ValueError
    for negative strides, which torch cannot express."""
    if not isinstance(x, np.ndarray):
        return x
    if any(s < 0 for s in x.strides):
        raise ValueError(f"a NumPy array with negative strides {x.strides} has no torch view (torch tensors cannot "
                         f"have negative strides); pass np.ascontiguousarray(...) of it, or use the interpreter "
                         f"backend, which takes it as is")
    import torch
    d = dt.to_dtype(x.dtype)
    if d is dt.bfloat16:
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    if d is not None and d.bitwidth == 8 and d.is_restricted:
        return torch.from_numpy(x.view(np.uint8)).view(getattr(torch, d.name))
    return torch.from_numpy(x)
