"""IR types: tiles (a 0-d tile is a scalar) and arrays in global memory."""

from __future__ import annotations

from dataclasses import dataclass

from ..language.dtypes import DType, int32, int64


@dataclass(frozen=True)
class TileType:
    """An immutable value of static `shape` (every dim a power of two); `()` is a scalar."""

    dtype: DType
    shape: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    def with_dtype(self, dtype: DType) -> "TileType":
        return TileType(dtype, self.shape)

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype.short
        return f"tile<{'x'.join(map(str, self.shape))}x{self.dtype.short}>"


@dataclass(frozen=True)
class ArrayType:
    """A strided view of global memory: dtype and rank static, shape and strides at run time.

    `index64` makes shapes, strides and offsets 64-bit (arrays whose sizes, strides or largest
    reachable offset do not fit int32: `backends.base.needs_index64`).
    """

    dtype: DType
    ndim: int
    index64: bool = False

    @property
    def index_dtype(self) -> DType:
        """The dtype of this array's shapes, strides and offsets."""
        return int64 if self.index64 else int32

    def __str__(self) -> str:
        return f"array<{self.ndim}d x {self.dtype.short}{', i64' if self.index64 else ''}>"


@dataclass(frozen=True)
class ListType:
    """A kernel argument holding `length` arrays of one type (`lst[i]` picks one at run time)."""

    elem: ArrayType
    length: int

    def __str__(self) -> str:
        return f"list<{self.length} x {self.elem}>"


IRType = TileType | ArrayType | ListType


def scalar(dtype: DType) -> TileType:
    return TileType(dtype, ())
