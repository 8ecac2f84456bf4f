"""Parameter annotations: `Constant[...]`, `ArrayAnnotation`, `IndexedWithInt64`, `ScalarInt64`; and the
types `Array`, `Tile`, `TiledView` and `Scalar` for annotating kernels and tile code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any


@dataclass(frozen=True)
class ConstantAnnotation:
    """Marks a kernel parameter whose value is folded in at compile time (one variant per value)."""


class _ConstantMeta(type):
    def __getitem__(cls, item: Any) -> Any:
        return Annotated[item, ConstantAnnotation()]


class Constant(metaclass=_ConstantMeta):
    """`ct.Constant[int]` (or bare `ct.Constant`): the argument is a compile-time constant."""


@dataclass(frozen=True, kw_only=True)
class ArrayAnnotation:
    """Array parameter facts: index dtype (int32/int64) and dims fixed at compile time."""

    index_dtype: Any = None
    static_shape_dims: tuple[int, ...] = ()
    static_stride_dims: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for what, dims in (("static_shape_dims", self.static_shape_dims),
                           ("static_stride_dims", self.static_stride_dims)):
            for d in dims:
                if not isinstance(d, int) or isinstance(d, bool):
                    raise TypeError(f"Each entry of {what} must be int, got {d!r}")


class Array:
    """The type of an array parameter, for annotations: `x: ct.Array` or
    `Annotated[ct.Array, ct.ArrayAnnotation(...)]` (any array the launch accepts)."""


class Tile:
    """The type of a tile, for annotations of tile code: `def scale(t: ct.Tile) -> ct.Tile`."""


class TiledView:
    """The type of a tiled view (what `Array.tiled_view` returns), for annotations of tile code."""


Scalar = int | float
"""The type of a scalar (a Python number, or a 0-d tile in tile code), for annotations."""


@dataclass(frozen=True, kw_only=True)
class ListAnnotation:
    """A list-of-arrays parameter whose elements are annotated as one array would be:
    `Annotated[list, ct.ListAnnotation(element=ct.IndexedWithInt64)]`."""

    element: Any = None

    @property
    def array_annotation(self) -> "ArrayAnnotation | None":
        """The elements' ArrayAnnotation (given directly or inside `Annotated[...]`), if any."""
        if isinstance(self.element, ArrayAnnotation):
            return self.element
        return next((m for m in getattr(self.element, "__metadata__", ()) if isinstance(m, ArrayAnnotation)), None)


@dataclass(frozen=True)
class ScalarAnnotation:
    """Types an integer scalar parameter (e.g. int64 instead of the default int32)."""

    dtype: Any







IndexedWithInt64 = Annotated[Any, ArrayAnnotation(index_dtype="int64")]
ScalarInt64 = Annotated[int, ScalarAnnotation("int64")]
