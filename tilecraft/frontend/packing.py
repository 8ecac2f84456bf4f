"""`ct.pack_to_bytes` / `ct.unpack_from_bytes`: a tile's raw bytes as a 1-D uint8 tile and back,
with cuTile's checks and wording. 8-bit dtypes are a Bitcast; wider and sub-byte ones the IR's
Pack / Unpack."""

from __future__ import annotations

import math
from typing import Any

from ..ir import Value, ops
from ..language import dtypes as dt
from ..language import ops as L
from .builtins import as_dtype
from .registry import handles
from .semantics import describe


@handles(L.pack_to_bytes)
def pack_to_bytes(fc: Any, x: Any, /) -> Value:
    t = fc.sema.to_tile(x)
    d = t.tile.dtype
    if d is dt.bool_:
        raise fc.sema.type_error(f"pack_to_bytes from a {d} tile is not supported")
    n = math.prod(t.tile.shape)
    if (n * d.bitwidth) % 8:
        raise fc.sema.type_error(f"Cannot pack tile {describe(t)}: total bits ({n} * {d.bitwidth}) not divisible by 8")
    flat = fc.sema.reshape(t, (n,))
    if d is dt.uint8:
        return flat
    if d.bitwidth == 8:
        return fc.b.value(ops.Bitcast, x=flat, dtype=dt.uint8)
    return fc.b.value(ops.Pack, x=flat)


@handles(L.unpack_from_bytes)
def unpack_from_bytes(fc: Any, x: Any, /, dtype: Any) -> Value:
    t = fc.sema.to_tile(x)
    d = as_dtype(fc, dtype)
    if t.tile.ndim != 1:
        raise fc.sema.type_error(f"unpack_from_bytes requires a 1D tile, got {t.tile.ndim}D tile with shape "
                                 f"{t.tile.shape}")
    if t.tile.dtype is not dt.uint8:
        raise fc.sema.type_error(f"unpack_from_bytes requires uint8 tile, got {t.tile.dtype} tile")
    if d is dt.bool_:
        raise fc.sema.type_error(f"unpack_from_bytes to a {d} tile is not supported")
    n = t.tile.shape[0]
    if (n * 8) % d.bitwidth:
        raise fc.sema.type_error(f"Cannot unpack tile {describe(t)} to {d}: total bits ({n} * 8) not divisible by "
                                 f"{d.bitwidth}")
    if d is dt.uint8:
        return t
    if d.bitwidth == 8:
        return fc.b.value(ops.Bitcast, x=t, dtype=d)
    return fc.b.value(ops.Unpack, x=t, dtype=d)
