"""The repeat-launch fast path: a cheap key per argument list that maps straight to a compiled
variant, skipping classification, spec construction and hashing of frozen specs.

The key holds what decides the variant: each tensor's type, dtype, device, strides, 16-byte base
alignment, whether it needs 64-bit indexing and whether it is dense; each Constant's type and value; each scalar's
type. Anything the fast key cannot describe returns None and takes the full path, which also
produces every error message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .args import ParamInfo

_INT32 = (-2**31, 2**31)
_BIG = 2**31


def _arg_key(v: Any, constant: bool, flat: list[Any]) -> Any:
    t = type(v)
    if constant:
        return (t, v)
    if t is int:
        if not _INT32[0] <= v < _INT32[1]:
            raise _Slow
        flat.append(v)
        return int
    if t is float or t is bool:
        flat.append(v)
        return t
    if t is tuple:
        return tuple(_arg_key(x, False, flat) for x in v)
    if t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
        flat.append(v)
        return (v.dtype, v.device, v.stride(), v.data_ptr() & 15 == 0, v.numel() >= _BIG, v.is_contiguous())
    if t is np.ndarray:
        flat.append(v)
        return (v.dtype, v.strides, v.ctypes.data & 15 == 0, v.size >= _BIG, v.flags.c_contiguous)
    raise _Slow


class _Slow(Exception):
    pass


def fast_key(params: list[ParamInfo], args: Any) -> tuple[Any, list[Any]] | None:
    """(key, flat runtime args) for a plain argument tuple, or None to take the full path."""
    if type(args) is not tuple or len(args) != len(params):
        return None
    flat: list[Any] = []
    if any(p.scalar_dtype is not None or p.index64 for p in params):
        return None
    try:
        key = tuple(_arg_key(v, p.constant, flat) for v, p in zip(args, params))
        hash(key)
    except (_Slow, TypeError):
        return None
    return key, flat
