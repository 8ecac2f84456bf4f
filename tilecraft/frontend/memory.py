"""Compilation of memory operations: num_tiles, load/store, gather/scatter and atomics."""

from __future__ import annotations

from typing import Any

from ..ir import AtomicFn, Value, ops
from ..language import dtypes as dt
from ..language import ops as L
from ..language.enums import MemoryOrder, MemoryScope, PaddingMode
from .registry import handles, register
from .semantics import broadcast_shapes, describe, is_array, is_loose, is_tile, type_name


def array_dim(fc: Any, arr: Value, axis: int,
              query: type[ops.ArrayShape | ops.ArrayStride] = ops.ArrayShape) -> Any:
    """`arr.shape[axis]` (or `.strides[axis]` with ops.ArrayStride): a constant int where an
    ArrayAnnotation compiled it in, else a runtime scalar."""
    static = fc.ctx.static_dims.get(arr.id, {}).get((query, axis))
    if static is not None:
        return static
    return fc.b.value(query, array=arr, axis=axis)


def _array(fc: Any, a: Any, fn: str) -> Value:
    if not is_array(a):
        raise fc.sema.type_error(f"{fn}() expects an array as its first argument, got {describe(a)}")
    return a


def _order(fc: Any, order: Any, ndim: int) -> tuple[int, ...]:
    """The `order` argument ('C', 'F' or a permutation of the axes) as axis indices."""
    if order == "C":
        return tuple(range(ndim))
    if order == "F":
        return tuple(reversed(range(ndim)))
    def bad(what: str) -> Exception:
        return fc.sema.arg_error(what, param="order")
    if isinstance(order, str):
        raise bad(f"Expected 'C' or 'F', got '{order}'")
    if not isinstance(order, tuple) or any(isinstance(o, Value) for o in order):
        raise bad("Expected a constant string or integer tuple")
    for i, o in enumerate(order):
        if not isinstance(o, int) or isinstance(o, bool):
            raise bad(f"Expected a tuple of integers, but element #{i} has type {type_name(o)}")
    if len(order) != ndim:
        raise bad(f"Expected tuple of length {ndim}, got {len(order)}")
    for o in order:
        if not -ndim <= o < ndim:
            raise bad(f"Axis {o} is out of range for rank {ndim}")
    norm = tuple(o % ndim for o in order)
    repeated = next((a for a in norm if norm.count(a) > 1), None)
    if repeated is not None:
        raise bad(f"Axis order must be a permutation, but axis {repeated} is used at least twice")
    return norm


def _index(fc: Any, index: Any, ndim: int) -> tuple[Value, ...]:
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != ndim:
        raise fc.sema.type_error(f"Index size {len(idx)} does not match the array rank {ndim}")
    vals = [fc.sema.index_scalar(i) for i in idx]
    wide = any(v.tile.dtype is dt.int64 for v in vals)
    return tuple(fc.sema.cast(v, dt.int64) if wide else v for v in vals)


def _latency(fc: Any, latency: Any) -> int | None:
    """The scheduling hint `latency`: None or a constant int in 1..10."""
    if latency is not None and (not isinstance(latency, int) or isinstance(latency, bool)
                                or not 1 <= latency <= 10):
        raise fc.sema.value_error(f"latency must be an integer constant in 1..10, got {latency!r}")
    return latency


def _hints(fc: Any, latency: Any, allow_tma: Any, check_bounds: Any) -> dict[str, Any]:
    """The tile load/store fields that tune code generation. check_bounds=False promises a
    tile inside the array (backends may then skip bounds masks; a violation is undefined)."""
    if allow_tma is not None and not isinstance(allow_tma, bool):
        raise fc.sema.type_error("allow_tma must be a constant bool")
    return {"latency": _latency(fc, latency), "allow_tma": allow_tma,
            "check_bounds": fc.sema.const_bool(check_bounds, "check_bounds")}


def _memory_order(fc: Any, order: MemoryOrder, scope: MemoryScope, allowed: tuple[MemoryOrder, ...]) -> None:
    if order not in allowed:
        raise fc.sema.type_error(f"memory_order {order.name} is not allowed here")
    if (order == MemoryOrder.WEAK) != (scope == MemoryScope.NONE):
        raise fc.sema.type_error(f"memory_order {order.name} cannot be used with memory_scope {scope.name}")


@handles(L.num_tiles)
def num_tiles(fc: Any, array: Any, /, axis: Any, shape: Any, order: Any = "C") -> Any:
    arr = _array(fc, array, "num_tiles")
    nd = arr.type.ndim
    shape = fc.sema.check_shape(shape, rank=None if shape == () else nd) or (1,) * nd  # (): one element
    perm = _order(fc, order, nd)
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise fc.sema.type_error(f"Axis {axis} is out of range for rank {nd}")
    axis %= nd
    return fc.sema.cdiv(array_dim(fc, arr, perm[axis]), shape[axis])


def array_slice(fc: Any, array: Value, axis: Any, start: Any, stop: Any) -> Value:
    """`array.slice(axis, start, stop)`: a view of `array` restricted to [start, stop) along
    `axis` (its base moves by start x stride; 0 <= start <= stop <= size is the caller's promise).
    Constant bounds make the view's extent along `axis` a compile-time constant, as in cuTile."""
    nd = array.type.ndim
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise fc.sema.type_error(f"slice() axis must be a constant int, got {describe(axis)}")
    if not -nd <= axis < nd:
        raise fc.sema.type_error(f"Axis {axis} is out of range for rank {nd}")
    for name, bound in (("start", start), ("stop", stop)):
        if is_loose(bound) and not isinstance(bound, float) and bound < 0:
            raise fc.sema.type_error(f"Slice {name} must be non-negative, got {bound}")
        d = fc.sema.dtype_of(bound) if is_tile(bound) or is_loose(bound) else None
        if d is None or fc.sema.shape_of(bound) != () or not d.is_int or not d.signed:
            raise fc.sema.arg_error(f"Expected a signed integer scalar, but got {type_name(bound)}", param=name)
    if isinstance(start, int) and isinstance(stop, int) and stop < start:
        raise fc.sema.type_error(f"Slice stop must be greater than or equal to start, got start={start} and "
                                 f"stop={stop}")
    lo, hi = (fc.sema.cast(fc.sema.index_scalar(b, f"slice() {name}"), array.type.index_dtype)
              for name, b in (("start", start), ("stop", stop)))
    view = fc.b.value(ops.ArraySlice, array=array, start=lo, stop=hi, axis=axis % nd)
    static = dict(fc.ctx.static_dims.get(array.id, {}))  # the other sizes and every stride stay
    static.pop((ops.ArrayShape, axis % nd), None)
    if isinstance(start, int) and isinstance(stop, int):
        static[(ops.ArrayShape, axis % nd)] = stop - start
    if static:
        fc.ctx.static_dims[view.id] = static
    return view


def check_padding(fc: Any, padding_mode: Any, dtype: dt.DType) -> PaddingMode:
    """A padding mode for loads from an array of `dtype` (NaN and infinities need a float one)."""
    if not isinstance(padding_mode, PaddingMode):
        raise fc.sema.type_error(f"padding_mode must be a ct.PaddingMode, got {describe(padding_mode)}")
    if padding_mode in (PaddingMode.NAN, PaddingMode.POS_INF, PaddingMode.NEG_INF) and not dtype.is_float \
            and not dtype.is_restricted:
        raise fc.sema.type_error(f"padding_mode {padding_mode.name} needs a float array, got {dtype}")
    return padding_mode


@handles(L.load)
def load(fc: Any, array: Any, /, index: Any, shape: Any, *, order: Any = "C",
         padding_mode: PaddingMode = PaddingMode.UNDETERMINED, check_bounds: bool = True,
         latency: Any = None, allow_tma: Any = None, memory_order: MemoryOrder = MemoryOrder.WEAK,
         memory_scope: MemoryScope = MemoryScope.NONE) -> Value:
    arr = _array(fc, array, "load")
    nd = arr.type.ndim
    shape = fc.sema.check_shape(shape, rank=None if shape == () else nd)  # (): one element, a 0-d tile
    check_padding(fc, padding_mode, arr.type.dtype)
    _memory_order(fc, memory_order, memory_scope, (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.ACQUIRE))
    perm = _order(fc, order, nd)
    idx = _index(fc, index, nd)
    return fc.b.value(ops.Load, array=arr, index=idx, shape=shape, order=perm, padding=padding_mode,
                      memory_order=memory_order, memory_scope=memory_scope,
                      **_hints(fc, latency, allow_tma, check_bounds))


@handles(L.store)
def store(fc: Any, array: Any, /, index: Any, tile: Any, *, order: Any = "C", check_bounds: bool = True,
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
    fc.b.emit(ops.Store, array=arr, index=idx, tile=t, order=perm, memory_order=memory_order,
              memory_scope=memory_scope, **_hints(fc, latency, allow_tma, check_bounds))


def _gather_operands(fc: Any, arr: Value, indices: Any, extra: list[Any], mask: Any,
                     fn: str) -> tuple[tuple[Value, ...], Value | None, tuple[int, ...]]:
    """Index tiles broadcast to their common shape S and the mask broadcast to S; returns
    (index tiles, mask, S). As in cuTile, `extra` operands and the mask must broadcast to S
    and never widen it (one index and eight values would be eight writes to one element)."""
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
    for x in tiles:
        shape = broadcast_shapes(shape, x.tile.shape)
        if shape is None:
            raise fc.sema.type_error(f"{fn}(): index shapes {[t.tile.shape for t in tiles]} are not "
                                     f"broadcastable to a common shape")
    for x in (e for e in (*extra, mask) if is_tile(e)):
        if broadcast_shapes(x.tile.shape, shape) != shape:
            raise fc.sema.type_error(f"{fn}(): shape {x.tile.shape} is not broadcastable to the index shape {shape}")
    m = None
    if mask is not None:
        m = fc.sema.to_tile(mask)
        if m.tile.dtype is not dt.bool_:
            raise fc.sema.type_error(f"{fn}() mask must be a boolean (bool) tile, got {m.tile.dtype}")
        m = fc.sema.broadcast_to(m, shape)
    return tuple(fc.sema.broadcast_to(t, shape) for t in tiles), m, shape


def _element_values(fc: Any, values: list[Any], dtype: dt.DType, shape: tuple[int, ...], what: str) -> list[Value]:
    """Values implicitly cast to the array dtype and broadcast to the index shape."""
    return [fc.sema.broadcast_to(fc.sema.cast_implicit(v, dtype, what), shape) for v in values]


@handles(L.gather)
def gather(fc: Any, array: Any, indices: Any, /, *, mask: Any = None, padding_value: Any = 0,
           check_bounds: bool = True, latency: Any = None) -> Value:
    arr = _array(fc, array, "gather")
    idx, m, shape = _gather_operands(fc, arr, indices, [padding_value], mask, "gather")
    [pad] = _element_values(fc, [padding_value], arr.type.dtype, shape, "padding_value")
    return fc.b.value(ops.Gather, array=arr, index=idx, padding=pad, mask=m,
                      check_bounds=fc.sema.const_bool(check_bounds, "check_bounds"), latency=_latency(fc, latency))


@handles(L.scatter)
def scatter(fc: Any, array: Any, indices: Any, value: Any, /, *, mask: Any = None, check_bounds: bool = True,
            latency: Any = None) -> None:
    arr = _array(fc, array, "scatter")
    idx, m, shape = _gather_operands(fc, arr, indices, [value], mask, "scatter")
    [v] = _element_values(fc, [value], arr.type.dtype, shape, "the scattered value")
    fc.b.emit(ops.Scatter, array=arr, index=idx, value=v, mask=m,
              check_bounds=fc.sema.const_bool(check_bounds, "check_bounds"), latency=_latency(fc, latency))


_WORDS = (dt.int32, dt.int64, dt.uint32, dt.uint64)
ATOMIC_DTYPES: dict[AtomicFn, tuple[dt.DType, ...]] = {
    AtomicFn.XCHG: _WORDS + (dt.float32, dt.float64),
    AtomicFn.ADD: _WORDS + (dt.float32, dt.float64, dt.float16, dt.bfloat16),
    AtomicFn.MAX: _WORDS, AtomicFn.MIN: _WORDS, AtomicFn.AND: _WORDS, AtomicFn.OR: _WORDS, AtomicFn.XOR: _WORDS,
}
"""The array dtypes each read-modify-write atomic supports."""
_CAS_DTYPES = _WORDS + (dt.float32, dt.float64)
_EXACT_UPDATE = (AtomicFn.AND, AtomicFn.OR, AtomicFn.XOR)
"""Atomics whose update must already have the array dtype (no implicit cast)."""


def _atomic_operands(fc: Any, name: str, array: Any, indices: Any, values: list[Any],
                     dtypes: tuple[dt.DType, ...], exact: bool, check_bounds: Any, memory_order: MemoryOrder,
                     memory_scope: MemoryScope, mask: Any = None) -> tuple[dict[str, Any], list[Value]]:
    """The checked fields every atomic shares (array, index, mask, check_bounds, ordering) and
    its `values` cast to the array dtype (`exact`: they must already have it), all broadcast to
    the index shape."""
    arr = _array(fc, array, name)
    d = arr.type.dtype
    if d not in dtypes:
        raise fc.sema.type_error(f"Unsupported array dtype {d} for {name}()")
    op = "tile_atomic_cas" if name == "atomic_cas" else "tile_atomic_rmw"
    if memory_order == MemoryOrder.WEAK:
        raise fc.sema.type_error(f"Invalid memory order for {op}: WEAK ({name}() needs RELAXED, ACQUIRE, "
                                 f"RELEASE or ACQ_REL)")
    if memory_scope == MemoryScope.NONE:
        raise fc.sema.type_error(f"{op} with {memory_order.name} memory ordering requires a memory scope "
                                 f"({name}() needs a memory_scope)")
    for v in values:
        if exact and not is_loose(v) and fc.sema.dtype_of(v) is not d:
            raise fc.sema.type_error(f"Bitwise atomic read-modify-write operations require the update dtype "
                                     f"({fc.sema.dtype_of(v)}) to exactly match the target dtype ({d})")
    idx, m, shape = _gather_operands(fc, arr, indices, values, mask, name)
    fields = {"array": arr, "index": idx, "mask": m, "check_bounds": fc.sema.const_bool(check_bounds, "check_bounds"),
              "memory_order": memory_order, "memory_scope": memory_scope}
    return fields, _element_values(fc, values, d, shape, "the atomic update")


def atomic_update(fc: Any, fn: AtomicFn, array: Any, indices: Any, update: Any, check_bounds: Any,
                  memory_order: MemoryOrder, memory_scope: MemoryScope, mask: Any = None) -> Value:
    """An AtomicRMW on the elements at `indices` (index tiles broadcast together; lanes where
    `mask` is off are skipped); the old values."""
    fields, [value] = _atomic_operands(fc, "atomic_" + fn.value, array, indices, [update], ATOMIC_DTYPES[fn],
                                       fn in _EXACT_UPDATE, check_bounds, memory_order, memory_scope, mask)
    return fc.b.value(ops.AtomicRMW, fn=fn, value=value, **fields)


def _rmw(fn: AtomicFn, stub: Any) -> None:
    def handler(fc: Any, array: Any, indices: Any, update: Any, /, *, check_bounds: bool = True,
                memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
                memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
        return atomic_update(fc, fn, array, indices, update, check_bounds, memory_order, memory_scope)
    register(stub, handler)


for _fn, _stub in ((AtomicFn.XCHG, L.atomic_xchg), (AtomicFn.ADD, L.atomic_add), (AtomicFn.MAX, L.atomic_max),
                   (AtomicFn.MIN, L.atomic_min), (AtomicFn.AND, L.atomic_and), (AtomicFn.OR, L.atomic_or),
                   (AtomicFn.XOR, L.atomic_xor)):
    _rmw(_fn, _stub)


@handles(L.atomic_cas)
def atomic_cas(fc: Any, array: Any, indices: Any, expected: Any, desired: Any, /, *, check_bounds: bool = True,
               memory_order: MemoryOrder = MemoryOrder.ACQ_REL,
               memory_scope: MemoryScope = MemoryScope.DEVICE) -> Value:
    return compare_and_swap(fc, array, indices, expected, desired, check_bounds, memory_order, memory_scope)


def compare_and_swap(fc: Any, array: Any, indices: Any, expected: Any, desired: Any, check_bounds: Any,
                     memory_order: MemoryOrder, memory_scope: MemoryScope, mask: Any = None) -> Value:
    """An AtomicCAS on the elements at `indices` (lanes where `mask` is off are skipped and
    return `expected`); the old values."""
    fields, [exp, des] = _atomic_operands(fc, "atomic_cas", array, indices, [expected, desired], _CAS_DTYPES,
                                          False, check_bounds, memory_order, memory_scope, mask)
    return fc.b.value(ops.AtomicCAS, expected=exp, desired=des, **fields)
