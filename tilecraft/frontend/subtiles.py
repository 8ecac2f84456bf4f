"""`ct.extract` and `ct.insert`: reading and replacing one block of a tile cut into a grid of
equal sub-tiles. Both resolve the grid index with the same checks and cuTile's wording."""

from __future__ import annotations

from typing import Any

from ..ir import Value, ops
from ..language import ops as L
from .registry import handles
from .semantics import is_loose


def _subtile_index(fc: Any, x: Value, shape: tuple[int, ...], index: Any, noun: str) -> tuple[Value, ...]:
    """The grid index of the `shape` block of `x` as int scalars; `noun` names the block in
    messages ("result" for extract, "value" for insert). A constant index must be in the grid
    (a run-time one is the program's promise)."""
    items = index if isinstance(index, tuple) else (index,)
    src = x.tile.shape
    if len(items) != len(src):
        raise fc.sema.type_error(f"Index size {len(items)} does not match the tile rank {len(src)}")
    for i, (d, s, item) in enumerate(zip(src, shape, items)):
        if d % s:
            raise fc.sema.type_error(f"Input shape {src} is not divisible by {noun} shape {shape} at dimension #{i}")
        if is_loose(item) and not 0 <= item < d // s:
            raise fc.sema.type_error(f"Index {item} out of bounds at dimension #{i}: valid range is [0, {d // s}) "
                                     f"in tile space (input shape {src}, {noun} shape {shape})")
    return tuple(fc.sema.index_scalar(item, f"{'extract' if noun == 'result' else 'insert'}() index")
                 for item in items)


@handles(L.extract)
def extract(fc: Any, x: Any, /, index: Any, shape: Any) -> Value:
    t = fc.sema.to_tile(x)
    shape = tuple(shape) if isinstance(shape, tuple) else (shape,)
    squeeze = shape == ()
    if squeeze:
        shape = (1,) * t.tile.ndim
    if len(shape) != t.tile.ndim:
        raise fc.sema.type_error(f"Expected shape length to be {t.tile.ndim}, got {len(shape)}")
    fc.sema.check_shape(shape)
    idx = _subtile_index(fc, t, shape, index, "result")
    out = fc.b.value(ops.Extract, x=t, index=idx, shape=shape)
    return fc.sema.reshape(out, ()) if squeeze else out


@handles(L.insert)
def insert(fc: Any, x: Any, /, index: Any, value: Any) -> Value:
    t, v = fc.sema.to_tile(x), fc.sema.to_tile(value)
    if v.tile.dtype is not t.tile.dtype:
        raise fc.sema.type_error(f"Cannot insert a tile of dtype {v.tile.dtype} into a tile of dtype {t.tile.dtype}")
    if v.tile.ndim == 0:
        v = fc.sema.reshape(v, (1,) * t.tile.ndim)
    elif v.tile.ndim != t.tile.ndim:
        raise fc.sema.type_error(f"Value rank {v.tile.ndim} does not match the tile rank {t.tile.ndim}")
    idx = _subtile_index(fc, t, v.tile.shape, index, "value")
    return fc.b.value(ops.Insert, x=t, value=v, index=idx)
