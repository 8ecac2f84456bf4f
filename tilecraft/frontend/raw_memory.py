"""`array.get_raw_memory()`: element access by linear offset (cuTile's RawArrayMemory).

`load_offset`, `store_offset`, `atomic_<fn>_offset` and `atomic_cas_offset` take tiles of element
offsets from the array's first element. An offset names the element it reaches in row-major order
of the array's shape — the raw memory offset for a dense array, which is what cuTile's pointer
arithmetic addresses. Offsets become array indices (divmod by the run-time dims) and the access
compiles to gather / scatter / atomics; an offset outside the array touches nothing (loads give
the padding value), where raw memory would be undefined. Values and masks broadcast to the
offsets' shape, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..ir import AtomicFn, BinaryFn, Value
from ..language import dtypes as dt
from ..language.enums import MemoryOrder, MemoryScope
from .memory import array_dim, atomic_update, compare_and_swap, gather, scatter
from .semantics import broadcast_shapes


@dataclass(frozen=True)
class RawMemory:
    """The memory of an array argument, addressed by element offsets."""

    array: Value
    dtype: dt.DType  # the array's element dtype: `mem.dtype`, a compile-time constant as in cuTile


def get_raw_memory(fc: Any, array: Value, /) -> RawMemory:
    return RawMemory(array, array.type.dtype)


def _offsets(fc: Any, mem: RawMemory, offset: Any, others: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    """Array indices of `offset` (row-major over the run-time dims); `others` (values, masks)
    must broadcast to the offsets' shape."""
    off = fc.sema.to_tile(offset)
    if not off.tile.dtype.is_int:
        raise fc.sema.type_error(f"{what}() offsets must be integers, got {off.tile.dtype}")
    for x in (o for o in others if o is not None):
        shape = fc.sema.shape_of(x)
        if broadcast_shapes(shape, off.tile.shape) != off.tile.shape:
            raise fc.sema.type_error(f"{what}(): shape {shape} is not broadcastable to the offset shape "
                                     f"{off.tile.shape}")
    nd = mem.array.type.ndim
    index = []
    rest: Any = off
    for axis in reversed(range(1, nd)):
        dim = array_dim(fc, mem.array, axis)
        index.append(fc.sema.binary(BinaryFn.MOD, rest, dim))
        rest = fc.sema.binary(BinaryFn.FLOORDIV, rest, dim)
    index.append(rest)
    return tuple(reversed(index))


def load_offset(fc: Any, mem: RawMemory, offset: Any, /, *, mask: Any = None, padding_value: Any = 0,
                latency: Any = None) -> Value:
    idx = _offsets(fc, mem, offset, (mask, padding_value), "load_offset")
    return gather(fc, mem.array, idx, mask=mask, padding_value=padding_value, latency=latency)


def store_offset(fc: Any, mem: RawMemory, offset: Any, value: Any, /, *, mask: Any = None,
                 latency: Any = None) -> None:
    idx = _offsets(fc, mem, offset, (mask, value), "store_offset")
    scatter(fc, mem.array, idx, value, mask=mask, latency=latency)


def _atomic(fn: AtomicFn) -> Callable[..., Value]:
    def handler(fc: Any, mem: RawMemory, offset: Any, value: Any, /, *, mask: Any = None,
                memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
                memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
        name = f"atomic_{fn.value}_offset"
        idx = _offsets(fc, mem, offset, (value, mask), name)
        return atomic_update(fc, fn, mem.array, idx, value, True, memory_order, memory_scope, mask)
    handler.__name__ = f"atomic_{fn.value}_offset"
    return handler


def atomic_cas_offset(fc: Any, mem: RawMemory, offset: Any, expected: Any, desired: Any, /, *,
                      mask: Any = None, memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
                      memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
    idx = _offsets(fc, mem, offset, (expected, desired, mask), "atomic_cas_offset")
    return compare_and_swap(fc, mem.array, idx, expected, desired, True, memory_order, memory_scope, mask)


RAW_MEMORY_METHODS: dict[str, Callable[..., Any]] = {
    "load_offset": load_offset, "store_offset": store_offset, "atomic_cas_offset": atomic_cas_offset,
    **{f"atomic_{fn.value}_offset": _atomic(fn) for fn in AtomicFn},
}
