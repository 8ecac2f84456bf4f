"""Shared checks and typing helpers of the op declarations (`ops`): each raises IRError with
what is wrong."""

from __future__ import annotations

from ..language import dtypes as dt
from ..language.dtypes import DType
from ..language.enums import MemoryOrder, MemoryScope
from .core import Block, Op, Value, need, snake
from .types import ArrayType, IRType, TileType


def check_scalar(v: Value, what: str, dtypes: tuple[DType, ...] | None = None) -> None:
    need(isinstance(v.type, TileType) and v.type.shape == (), f"{what} must be a scalar, got {v.type}")
    if dtypes is not None:
        need(v.tile.dtype in dtypes, f"{what} must be {'/'.join(map(str, dtypes))}, got {v.tile.dtype}")


def tile_type(v: Value, what: str) -> TileType:
    need(isinstance(v.type, TileType), f"{what} must be a tile, got {v.type}")
    return v.tile


def array_type(v: Value, what: str = "array") -> ArrayType:
    need(isinstance(v.type, ArrayType), f"{what} must be an array, got {v.type}")
    return v.type


def check_axis(axis: int, ndim: int) -> None:
    need(0 <= axis < ndim, f"axis {axis} out of range for rank {ndim}")


def check_pow2(shape: tuple[int, ...]) -> None:
    need(all(d > 0 and d & (d - 1) == 0 for d in shape), f"tile shape {shape} must have power-of-two dims")


def check_same_shapes(*vals: Value) -> None:
    shapes = {tile_type(v, "operand").shape for v in vals}
    need(len(shapes) == 1, f"operand shapes differ: {sorted(shapes)}")


def check_index_scalars(index: tuple[Value, ...], arr: ArrayType) -> None:
    need(len(index) == arr.ndim, f"{len(index)} indices for a rank-{arr.ndim} array")
    for v in index:
        check_scalar(v, "tile index", (dt.int32, dt.int64))


def check_permutation(order: tuple[int, ...], ndim: int) -> None:
    need(sorted(order) == list(range(ndim)), f"order {order} is not a permutation of {ndim} axes")


def check_element_access(arr: ArrayType, index: tuple[Value, ...], others: tuple[Value | None, ...]) -> tuple[int, ...]:
    """Shared invariants of gather/scatter/atomics: one integer index tile per array dim and
    values/mask of the index shape; returns that shape."""
    need(len(index) == arr.ndim, f"{len(index)} index tiles for a rank-{arr.ndim} array")
    for v in index:
        need(tile_type(v, "index").dtype.is_int, f"index tiles must be integers, got {v.type}")
    vals = [*index, *(o for o in others if o is not None)]
    if not vals:
        return ()
    check_same_shapes(*vals)
    return vals[0].tile.shape


def check_mask(mask: Value | None) -> None:
    if mask is not None:
        need(tile_type(mask, "mask").dtype is dt.bool_, f"mask must be bool, got {mask.type}")


def check_memory_order(order: MemoryOrder, scope: MemoryScope, allowed: tuple[MemoryOrder, ...]) -> None:
    need(order in allowed, f"memory_order {order.name} is not allowed here")
    need((order is MemoryOrder.WEAK) == (scope is MemoryScope.NONE),
         f"memory_order {order.name} cannot go with memory_scope {scope.name}")


def yield_types(block: Block, kind: type[Op]) -> tuple[IRType, ...]:
    last = block.terminator
    need(isinstance(last, kind), f"a region must end with {snake(kind.__name__)}")
    vals = last.values
    return tuple(v.type for v in vals)


def arg_types(block: Block) -> tuple[IRType, ...]:
    return tuple(a.type for a in block.args)
