"""`ct.load_advanced_indexing` / `ct.store_advanced_indexing` with `ct.Slice` (cuTile 1.7).

An index tuple names one element range per array dim: exactly one 1-D integer tile (the sparse
dim: its values pick elements along that dim, in any order, repeats allowed) and a `ct.Slice(start,
length)` for every other dim (the dense dims: `start` at run time, `length` a power-of-two
constant). The tile is the cartesian product, shaped (len_0, ..., len_{n-1}). Both compile to the
element-wise Gather / Scatter of `gather`/`scatter`: each dim's element indices are a tile laid
along that axis, broadcast to the tile shape. Lanes outside the array are padded on load and
skipped on store (cuTile leaves a tile entirely outside the array undefined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import BinaryFn, Value, ops
from ..language import ops as L
from ..language.enums import PADDING_VALUES, PaddingMode
from .memory import _array, _hints, check_padding, gather, scatter
from .registry import handles
from .semantics import describe, is_loose, is_tile

_FN = "load_advanced_indexing/store_advanced_indexing"


@dataclass(frozen=True)
class IndexSlice:
    """`ct.Slice(start, length)`: a signed integer start (constant or run-time scalar) and a
    length that must be a constant where the slice is used."""

    start: Any
    length: Any


def _signed_scalar(fc: Any, x: Any, what: str) -> Any:
    """`x` if it is a signed integer scalar (a constant stays a constant)."""
    if is_loose(x) and isinstance(x, int) and not isinstance(x, bool):
        return x
    if not is_tile(x) or x.tile.shape != () or not x.tile.dtype.is_int or not x.tile.dtype.signed:
        raise fc.sema.type_error(f"ct.Slice {what} must be a signed integer scalar, got {describe(x)}")
    return x


@handles(L.Slice)
def make_slice(fc: Any, start: Any, length: Any, /) -> IndexSlice:
    return IndexSlice(_signed_scalar(fc, start, "start"), _signed_scalar(fc, length, "length"))


def _parse(fc: Any, indices: Any, ndim: int) -> tuple[int, tuple[int, ...]]:
    """Check an advanced index tuple against an array of rank `ndim`: (sparse dim, tile shape)."""
    if not isinstance(indices, tuple):
        raise fc.sema.type_error(f"{_FN} indices must be a tuple, got {describe(indices)}")
    if len(indices) != ndim:
        raise fc.sema.type_error(f"{_FN} index length {len(indices)} does not match array rank {ndim}")
    sparse: list[int] = []
    shape: list[int] = []
    for dim, item in enumerate(indices):
        if is_tile(item):
            if item.tile.ndim != 1:
                raise fc.sema.type_error(f"Sparse index at dim {dim} must be a 1D integer tile, got {item.tile.ndim}D")
            if not item.tile.dtype.is_int:
                raise fc.sema.type_error(f"Sparse index at dim {dim} must be an integer tile, "
                                         f"got dtype {item.tile.dtype}")
            sparse.append(dim)
            shape.append(item.tile.shape[0])
        elif isinstance(item, IndexSlice):
            if isinstance(item.length, Value):
                raise fc.sema.type_error(f"ct.Slice length at dim {dim} must be a compile-time constant in {_FN}")
            if item.length <= 0:
                raise fc.sema.type_error(f"ct.Slice length at dim {dim} must be a positive integer, got {item.length}")
            shape.append(item.length)
        else:
            raise fc.sema.type_error(f"{_FN} index at dim {dim} must be a 1D integer Tile (sparse dim) or "
                                     f"ct.Slice(start, length) (dense dim), got type {describe(item)}")
    if not sparse:
        raise fc.sema.type_error(f"{_FN}: exactly one index must be a 1D integer Tile (the sparse dim); none found")
    if len(sparse) > 1:
        raise fc.sema.type_error(f"{_FN}: exactly one index must be a 1D integer Tile (the sparse dim); "
                                 f"found {len(sparse)} at dims {sparse}")
    for dim, n in enumerate(shape):
        if n & (n - 1):
            raise fc.sema.type_error(f"Index at dim {dim} has size {n}; must be a power of two")
    return sparse[0], tuple(shape)


def _element_indices(fc: Any, indices: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Value, ...]:
    """Per dim, the element index of every lane of the tile, as a tile laid along that axis."""
    s, out = fc.sema, []
    for axis, item in enumerate(indices):
        if isinstance(item, IndexSlice):
            item = s.binary(BinaryFn.ADD, fc.b.value(ops.Arange, size=item.length), item.start)
        out.append(s.reshape(item, tuple(n if k == axis else 1 for k, n in enumerate(shape))))
    return tuple(out)


def _checked(fc: Any, array: Any, indices: Any, fn: str) -> tuple[Value, tuple[Value, ...], tuple[int, ...]]:
    arr = _array(fc, array, fn)
    if arr.type.ndim < 2:
        other = "gather" if fn.startswith("load") else "scatter"
        raise fc.sema.type_error(f"{fn} requires a 2D or higher-rank array; use ct.{other}() for 1D arrays")
    _, shape = _parse(fc, indices, arr.type.ndim)
    return arr, _element_indices(fc, indices, shape), shape


@handles(L.load_advanced_indexing)
def load_advanced_indexing(fc: Any, array: Any, indices: Any, /, *,
                           padding_mode: PaddingMode = PaddingMode.UNDETERMINED, latency: Any = None,
                           allow_tma: Any = None) -> Value:
    arr, idx, _ = _checked(fc, array, indices, "load_advanced_indexing")
    dtype = arr.type.dtype
    pad = PADDING_VALUES[check_padding(fc, padding_mode, dtype)]
    hints = _hints(fc, latency, allow_tma, True)
    return gather(fc, arr, idx, padding_value=pad if dtype.is_float or dtype.is_restricted else 0,
                  latency=hints["latency"])


@handles(L.store_advanced_indexing)
def store_advanced_indexing(fc: Any, array: Any, indices: Any, tile: Any, /, *, latency: Any = None,
                            allow_tma: Any = None) -> None:
    arr, idx, shape = _checked(fc, array, indices, "store_advanced_indexing")
    t = fc.sema.to_tile(tile)
    if t.tile.shape != shape:
        raise fc.sema.type_error(f"Tile shape {t.tile.shape} does not match the shape implied by indices {shape}")
    t = fc.sema.cast_implicit(t, arr.type.dtype, "the stored tile")
    hints = _hints(fc, latency, allow_tma, True)
    scatter(fc, arr, idx, t, latency=hints["latency"])
