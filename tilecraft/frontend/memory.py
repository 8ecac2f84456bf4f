"""Compilation of memory operations: num_tiles, load/store, gather/scatter and atomics."""

from __future__ import annotations

from typing import Any

from ..ir import AtomicFn, BinaryFn, Opcode, TileType, Value
from ..language import dtypes as dt
from ..language import ops as L
from ..language.enums import MemoryOrder, MemoryScope, PaddingMode
from .registry import handles
from .semantics import broadcast_shapes, describe, is_array, is_loose


def array_dim(fc: Any, arr: Value, axis: int, query: Opcode = Opcode.ARRAY_SHAPE) -> Any:
    """`arr.shape[axis]` (or `.strides[axis]` with ARRAY_STRIDE): a constant int where an
    ArrayAnnotation compiled it in, else a runtime scalar."""
    static = fc.ctx.static_dims.get(arr.id, {}).get((query, axis))
    if static is not None:
        return static
    return fc.b.value(query, [arr], TileType(arr.type.index_dtype), axis=axis)


def _array(fc: Any, a: Any, fn: str) -> Value:
    if not is_array(a):
        raise fc.sema.type_error(f"{fn}() expects an array as its first argument, got {describe(a)}")
    return a


def _order(fc: Any, order: Any, ndim: int) -> tuple[int, ...]:
    if order == "C":
        return tuple(range(ndim))
    if order == "F":
        return tuple(reversed(range(ndim)))
    if not isinstance(order, tuple) or len(order) != ndim or not all(isinstance(o, int) for o in order):
        raise fc.sema.type_error(f"order must be 'C', 'F' or a permutation of {ndim} axes, got {order!r}")
    norm = tuple(o % ndim if -ndim <= o < ndim else -1 for o in order)
    if sorted(norm) != list(range(ndim)):
        raise fc.sema.type_error(f"order {order} is not a permutation of {ndim} axes")
    return norm


def _index(fc: Any, index: Any, ndim: int) -> list[Value]:
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != ndim:
        raise fc.sema.type_error(f"Index size {len(idx)} does not match the array rank {ndim}")
    vals = [fc.sema.index_scalar(i) for i in idx]
    wide = any(v.tile.dtype is dt.int64 for v in vals)
    return [fc.sema.cast(v, dt.int64) if wide else v for v in vals]


def _hints(fc: Any, latency: Any, allow_tma: Any, check_bounds: Any) -> dict[str, Any]:
    """The tile load/store attributes that tune code generation. check_bounds=False promises a
    tile inside the array (backends may then skip bounds masks; a violation is undefined)."""
    if latency is not None and (not isinstance(latency, int) or not 1 <= latency <= 10):
        raise fc.sema.value_error(f"latency must be an integer constant in 1..10, got {latency!r}")
    if allow_tma is not None and not isinstance(allow_tma, bool):
        raise fc.sema.type_error("allow_tma must be a constant bool")
    if not isinstance(check_bounds, bool):
        raise fc.sema.type_error("check_bounds must be a constant bool")
    hints: dict[str, Any] = {"latency": latency, "allow_tma": allow_tma}
    if not check_bounds:  # recorded only when given: the IR reads `check_bounds` as default True
        hints["check_bounds"] = False
    return hints


def _memory_order(fc: Any, order: MemoryOrder, scope: MemoryScope, allowed: tuple[MemoryOrder, ...]) -> None:
    if order not in allowed:
        raise fc.sema.type_error(f"memory_order {order.name} is not allowed here")
    if (order == MemoryOrder.WEAK) != (scope == MemoryScope.NONE):
        raise fc.sema.type_error(f"memory_order {order.name} cannot be used with memory_scope {scope.name}")


@handles(L.num_tiles)
def num_tiles(fc: Any, array: Any, axis: Any, shape: Any, order: Any = "C") -> Any:
    arr = _array(fc, array, "num_tiles")
    nd = arr.type.ndim
    shape = fc.sema.check_shape(shape)
    if len(shape) != nd:
        raise fc.sema.type_error(f"Expected shape length to be {nd}")
    perm = _order(fc, order, nd)
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise fc.sema.type_error(f"Axis {axis} is out of range for rank {nd}")
    axis %= nd
    dim = array_dim(fc, arr, perm[axis])
    if isinstance(dim, int):
        return -(-dim // shape[axis])
    s = fc.sema
    return s.binary(BinaryFn.FLOORDIV, s.binary(BinaryFn.ADD, dim, shape[axis] - 1), shape[axis])


def array_slice(fc: Any, array: Value, axis: Any, start: Any, stop: Any) -> Value:
    """`array.slice(axis, start, stop)`: a view of `array` restricted to [start, stop) along
    `axis` (its base moves by start x stride; 0 <= start <= stop <= size is the caller's promise)."""
    nd = array.type.ndim
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise fc.sema.type_error(f"slice() axis must be a constant int, got {describe(axis)}")
    if not -nd <= axis < nd:
        raise fc.sema.type_error(f"slice() axis {axis} is out of range for a rank-{nd} array")
    for name, bound in (("start", start), ("stop", stop)):
        if isinstance(bound, int) and bound < 0:
            raise fc.sema.type_error(f"slice() {name} must not be negative, got {bound}")
    if isinstance(start, int) and isinstance(stop, int) and stop < start:
        raise fc.sema.type_error(f"slice() stop ({stop}) must not be less than start ({start})")
    bounds = [fc.sema.cast(fc.sema.index_scalar(b, f"slice() {name}"), array.type.index_dtype)
              for name, b in (("start", start), ("stop", stop))]
    return fc.b.value(Opcode.ARRAY_SLICE, [array, *bounds], array.type, axis=axis % nd)


@handles(L.load)
def load(fc: Any, array: Any, index: Any, shape: Any, *, order: Any = "C",
         padding_mode: PaddingMode = PaddingMode.UNDETERMINED, check_bounds: bool = True,
         latency: Any = None, allow_tma: Any = None, memory_order: MemoryOrder = MemoryOrder.WEAK,
         memory_scope: MemoryScope = MemoryScope.NONE) -> Value:
    arr = _array(fc, array, "load")
    nd = arr.type.ndim
    shape = fc.sema.check_shape(shape)
    if len(shape) != nd:
        raise fc.sema.type_error(f"Expected shape length to be {nd}, got shape {shape} for a rank-{nd} array")
    if not isinstance(padding_mode, PaddingMode):
        raise fc.sema.type_error(f"padding_mode must be a ct.PaddingMode, got {describe(padding_mode)}")
    if padding_mode in (PaddingMode.NAN, PaddingMode.POS_INF, PaddingMode.NEG_INF) and not arr.type.dtype.is_float \
            and not arr.type.dtype.is_restricted:
        raise fc.sema.type_error(f"padding_mode {padding_mode.name} needs a float array, got {arr.type.dtype}")
    _memory_order(fc, memory_order, memory_scope, (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.ACQUIRE))
    perm = _order(fc, order, nd)
    idx = _index(fc, index, nd)
    return fc.b.value(Opcode.LOAD, [arr] + idx, TileType(arr.type.dtype, shape), shape=shape, order=perm,
                      padding=padding_mode, **_hints(fc, latency, allow_tma, check_bounds))


@handles(L.store)
def store(fc: Any, array: Any, index: Any, tile: Any, *, order: Any = "C", check_bounds: bool = True,
          latency: Any = None, allow_tma: Any = None, memory_order: MemoryOrder = MemoryOrder.WEAK,
          memory_scope: MemoryScope = MemoryScope.NONE) -> None:
    arr = _array(fc, array, "store")
    nd = arr.type.ndim
    t = fc.sema.cast_implicit(tile, arr.type.dtype, "the stored tile")
    if t.tile.shape == () and nd:
        t = fc.sema.reshape(t, (1,) * nd)
    if t.tile.ndim != nd:
        raise fc.sema.type_error(f"Cannot store a tile of shape {t.tile.shape} into a rank-{nd} array: "
                                 f"the tile rank must equal the array rank")
    _memory_order(fc, memory_order, memory_scope, (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.RELEASE))
    perm = _order(fc, order, nd)
    idx = _index(fc, index, nd)
    fc.b.emit(Opcode.STORE, [arr] + idx + [t], [], order=perm, **_hints(fc, latency, allow_tma, check_bounds))


def _gather_operands(fc: Any, arr: Value, indices: Any, extra: list[Any], mask: Any, fn: str) -> tuple[list[Value], list[Any], Any, tuple[int, ...]]:
    """Index tiles, extra operands and mask broadcast to one shape S."""
    nd = arr.type.ndim
    idx = indices if isinstance(indices, tuple) else (indices,)
    if nd == 0 and indices == ():
        idx = ()
    if len(idx) != nd:
        raise fc.sema.type_error(f"{fn}(): {len(idx)} indices for a rank-{nd} array")
    tiles = []
    for i in idx:
        t = fc.sema.to_tile(i)
        if not t.tile.dtype.is_int:
            raise fc.sema.type_error(f"{fn}() indices must be integers, got {t.tile.dtype}")
        tiles.append(t)
    wide = any(t.tile.dtype.bitwidth == 64 or (not t.tile.dtype.signed and t.tile.dtype.bitwidth == 32) for t in tiles)
    tiles = [fc.sema.cast(t, dt.int64 if wide else dt.int32) for t in tiles]
    shape: tuple[int, ...] | None = ()
    for x in tiles + [e for e in extra if isinstance(e, Value)] + ([mask] if isinstance(mask, Value) else []):
        shape = broadcast_shapes(shape, x.tile.shape)
        if shape is None:
            raise fc.sema.type_error(f"{fn}(): index, value and mask shapes are not broadcastable")
    tiles = [fc.sema.broadcast_to(t, shape) for t in tiles]
    m = None
    if mask is not None:
        m = fc.sema.to_tile(mask)
        if m.tile.dtype is not dt.bool_:
            raise fc.sema.type_error(f"{fn}() mask must be a bool tile, got {m.tile.dtype}")
        m = fc.sema.broadcast_to(m, shape)
    return tiles, extra, m, shape


@handles(L.gather)
def gather(fc: Any, array: Any, indices: Any, *, mask: Any = None, padding_value: Any = 0,
           check_bounds: bool = True, latency: Any = None) -> Value:
    arr = _array(fc, array, "gather")
    idx, _, m, shape = _gather_operands(fc, arr, indices, [padding_value], mask, "gather")
    pad = fc.sema.broadcast_to(fc.sema.cast_implicit(padding_value, arr.type.dtype, "padding_value"), shape)
    ops = [arr] + idx + [pad] + ([m] if m is not None else [])
    return fc.b.value(Opcode.GATHER, ops, TileType(arr.type.dtype, shape), has_mask=m is not None,
                      check_bounds=bool(check_bounds))


@handles(L.scatter)
def scatter(fc: Any, array: Any, indices: Any, value: Any, *, mask: Any = None, check_bounds: bool = True,
            latency: Any = None) -> None:
    arr = _array(fc, array, "scatter")
    idx, _, m, shape = _gather_operands(fc, arr, indices, [value], mask, "scatter")
    v = fc.sema.broadcast_to(fc.sema.cast_implicit(value, arr.type.dtype, "the scattered value"), shape)
    fc.b.emit(Opcode.SCATTER, [arr] + idx + [v] + ([m] if m is not None else []), [],
              has_mask=m is not None, check_bounds=bool(check_bounds))


_ATOMIC_DTYPES = {
    AtomicFn.CAS: (dt.int32, dt.int64, dt.uint32, dt.uint64, dt.float32, dt.float64),
    AtomicFn.XCHG: (dt.int32, dt.int64, dt.uint32, dt.uint64, dt.float32, dt.float64),
    AtomicFn.ADD: (dt.int32, dt.int64, dt.uint32, dt.uint64, dt.float32, dt.float64, dt.float16, dt.bfloat16),
    AtomicFn.MAX: (dt.int32, dt.int64, dt.uint32, dt.uint64),
    AtomicFn.MIN: (dt.int32, dt.int64, dt.uint32, dt.uint64),
    AtomicFn.AND: (dt.int32, dt.int64, dt.uint32, dt.uint64),
    AtomicFn.OR: (dt.int32, dt.int64, dt.uint32, dt.uint64),
    AtomicFn.XOR: (dt.int32, dt.int64, dt.uint32, dt.uint64),
}


def atomic_update(fc: Any, fn: AtomicFn, array: Any, indices: Any, values: list[Any], check_bounds: bool,
                  memory_order: MemoryOrder, memory_scope: MemoryScope) -> Value:
    """An ATOMIC op on the elements at `indices` (index tiles broadcast together); the old values."""
    name = "atomic_" + fn.value
    arr = _array(fc, array, name)
    d = arr.type.dtype
    if d not in _ATOMIC_DTYPES[fn]:
        raise fc.sema.type_error(f"Unsupported array dtype {d} for {name}()")
    if memory_order == MemoryOrder.WEAK or memory_scope == MemoryScope.NONE:
        raise fc.sema.type_error(f"{name}() needs a non-WEAK memory_order and a memory_scope")
    if fn in (AtomicFn.AND, AtomicFn.OR, AtomicFn.XOR):
        for v in values:
            if not is_loose(v) and fc.sema.dtype_of(v) is not d:
                raise fc.sema.type_error(f"{name}() update dtype must equal the array dtype {d}")
    idx, _, _, shape = _gather_operands(fc, arr, indices, values, None, name)
    vals = [fc.sema.broadcast_to(fc.sema.cast_implicit(v, d, "the atomic update"), shape) for v in values]
    return fc.b.value(Opcode.ATOMIC, [arr] + idx + vals, TileType(d, shape), fn=fn, order=memory_order,
                      scope=memory_scope, has_mask=False, check_bounds=bool(check_bounds))


def _rmw(fn: AtomicFn, stub: Any) -> None:
    def handler(fc: Any, array: Any, indices: Any, update: Any, *, check_bounds: bool = True,
                memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
                memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
        return atomic_update(fc, fn, array, indices, [update], check_bounds, memory_order, memory_scope)
    handler.__name__ = stub.__name__
    handles(stub)(handler)


for _fn, _stub in ((AtomicFn.XCHG, L.atomic_xchg), (AtomicFn.ADD, L.atomic_add), (AtomicFn.MAX, L.atomic_max),
                   (AtomicFn.MIN, L.atomic_min), (AtomicFn.AND, L.atomic_and), (AtomicFn.OR, L.atomic_or),
                   (AtomicFn.XOR, L.atomic_xor)):
    _rmw(_fn, _stub)


@handles(L.atomic_cas)
def atomic_cas(fc: Any, array: Any, indices: Any, expected: Any, desired: Any, *, check_bounds: bool = True,
               memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
               memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
    return atomic_update(fc, AtomicFn.CAS, array, indices, [expected, desired], check_bounds, memory_order, memory_scope)
