"""`Array.tiled_view`: an array seen as a grid of tiles, loaded and stored by tile index.

A view is a compile-time object: `view.load(index)` becomes a tile load of the array. Tile i
along an axis starts at element i x traversal_steps; where the step equals the tile extent that
is an ordinary tile index, otherwise the array is first sliced to start there (overlapping or
gapped tiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import AtomicFn, BinaryFn, Value, ops
from ..language import dtypes as dt
from ..language.enums import MemoryOrder, MemoryScope, PaddingMode
from .memory import ATOMIC_DTYPES, array_dim, array_slice, atomic_update, load, store
from .semantics import broadcast_shapes, describe


@dataclass(frozen=True)
class TiledView:
    array: Value
    tile_shape: tuple[int, ...]  # () : unit tiles, loaded as 0-d tiles
    padding: PaddingMode
    steps: tuple[int, ...]       # traversal_steps

    @property
    def dtype(self) -> dt.DType:
        return self.array.type.dtype

    @property
    def extents(self) -> tuple[int, ...]:
        return self.tile_shape or (1,) * self.array.type.ndim

    def _type_name(self) -> str:
        """In messages: TiledView[float32,(4,8)] (its dtype and tile shape)."""
        return f"TiledView[{self.dtype},({','.join(map(str, self.tile_shape))})]"


def _ints(x: Any) -> Any:
    return (x,) if isinstance(x, int) and not isinstance(x, bool) else x


def tiled_view(fc: Any, array: Value, tile_shape: Any, *, padding_mode: PaddingMode = PaddingMode.UNDETERMINED,
               traversal_steps: Any = None) -> TiledView:
    nd = array.type.ndim
    tile_shape = _ints(tile_shape)
    shape = fc.sema.check_shape(tile_shape, "tile_shape", rank=nd) if tile_shape != () else ()
    if not isinstance(padding_mode, PaddingMode):
        raise fc.sema.type_error(f"padding_mode must be a ct.PaddingMode, got {describe(padding_mode)}")
    steps = _ints(traversal_steps) if traversal_steps is not None else (shape or (1,) * nd)
    if isinstance(steps, tuple) and len(steps) != nd:
        raise fc.sema.type_error(f"Expected traversal_steps length to be {nd}, got {len(steps)}")
    if not isinstance(steps, tuple) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise fc.sema.type_error(f"traversal_steps must be {nd} positive constant ints, got {traversal_steps!r}")
    for axis, s in enumerate(steps):
        if s <= 0:
            raise fc.sema.type_error(f"Element {axis} of traversal_steps {steps} is not positive")
    return TiledView(array, shape, padding_mode, steps)


def _tile_index(fc: Any, view: TiledView, index: Any) -> tuple[Any, ...]:
    """A view tile index as a tuple of one entry per array dim."""
    nd = view.array.type.ndim
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != nd:
        raise fc.sema.type_error(f"Index size {len(idx)} does not match the tiled view rank {nd}")
    return idx


def _origin(fc: Any, view: TiledView, index: Any) -> tuple[Value, tuple[Any, ...]]:
    """(array, tile index) of an ordinary tile access that covers the view's tile `index`."""
    arr, out = view.array, []
    for axis, (i, step, extent) in enumerate(zip(_tile_index(fc, view, index), view.steps, view.extents)):
        if step == extent:
            out.append(i)
            continue
        start = fc.sema.binary(BinaryFn.MUL, fc.sema.index_scalar(i), step)
        arr = array_slice(fc, arr, axis, start, array_dim(fc, arr, axis))
        out.append(0)
    return arr, tuple(out)


def view_load(fc: Any, view: TiledView, index: Any, *, check_bounds: bool = True, latency: Any = None,
              allow_tma: Any = None) -> Value:
    arr, idx = _origin(fc, view, index)
    tile = load(fc, arr, idx, view.extents, padding_mode=view.padding, check_bounds=check_bounds,
                latency=latency, allow_tma=allow_tma)
    return tile if view.tile_shape else fc.sema.reshape(tile, ())


def view_store(fc: Any, view: TiledView, index: Any, tile: Any, *, check_bounds: bool = True,
               latency: Any = None, allow_tma: Any = None) -> None:
    t = fc.sema.cast_implicit(tile, view.dtype, "the stored tile")
    _check_fits(fc, view, "Tile", t.tile.shape)
    t = fc.sema.broadcast_to(t, view.extents)
    arr, idx = _origin(fc, view, index)
    store(fc, arr, idx, t, check_bounds=check_bounds, latency=latency, allow_tma=allow_tma)


def _check_fits(fc: Any, view: TiledView, what: str, shape: tuple[int, ...]) -> None:
    """A tile stored or combined into `view` must broadcast to its tiles (cuTile's wording)."""
    if broadcast_shapes(shape, view.extents) != view.extents:
        raise fc.sema.type_error(f"{what} shape {shape} is not broadcastable to the tiled view's tile shape "
                                 f"{view.tile_shape}")


def view_num_tiles(fc: Any, view: TiledView, axis: Any) -> Any:
    """cdiv(size, step) along `axis` (int32)."""
    nd = view.array.type.ndim
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise fc.sema.type_error(f"num_tiles() axis must be a constant int in [-{nd}, {nd}), got {axis!r}")
    tiles = fc.sema.cdiv(array_dim(fc, view.array, axis % nd), view.steps[axis % nd])
    return tiles if isinstance(tiles, int) else fc.sema.cast(tiles, dt.int32)


def _atomic_store(fn: AtomicFn) -> Any:
    def handler(fc: Any, view: TiledView, index: Any, update: Any, /) -> None:
        """Atomically combine `update` (broadcast to the tile) into the view's tile `index`:
        relaxed, device scope; lanes outside the array are skipped."""
        if view.array.type.dtype not in ATOMIC_DTYPES[fn]:
            raise fc.sema.type_error(f"Unsupported tiled view dtype {view.array.type.dtype} for "
                                     f"atomic_store_{fn.value}()")
        _check_fits(fc, view, "Update", fc.sema.shape_of(update))
        nd = view.array.type.ndim
        s, lanes = fc.sema, []
        for axis, (i, step, extent) in enumerate(zip(_tile_index(fc, view, index), view.steps, view.extents)):
            origin = s.binary(BinaryFn.MUL, s.index_scalar(i), step)
            offsets = fc.b.value(ops.Arange, size=extent)
            offsets = s.reshape(offsets, tuple(extent if k == axis else 1 for k in range(nd)))
            lanes.append(s.binary(BinaryFn.ADD, offsets, origin))
        atomic_update(fc, fn, view.array, tuple(lanes), update, True, MemoryOrder.RELAXED, MemoryScope.DEVICE)
    handler.__name__ = f"atomic_store_{fn.value}"
    return handler


VIEW_METHODS = {"load": view_load, "store": view_store, "num_tiles": view_num_tiles,
                **{f"atomic_store_{fn.value}": _atomic_store(fn) for fn in (AtomicFn.ADD, AtomicFn.MAX, AtomicFn.MIN,
                                                                             AtomicFn.AND, AtomicFn.OR, AtomicFn.XOR)}}
VIEW_ATTRS = {"dtype": "dtype", "tile_shape": "tile_shape", "traversal_steps": "steps"}  # name -> field
