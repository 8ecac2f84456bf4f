"""The Tile IR operations: one frozen, typed declaration per op (or op family).

Reading a declaration tells its operands (fields of type Value), attributes (the other fields),
result type (`result_types`, the typing rule) and invariants (`check`); see `core` for how the
fields are sorted. Ops are built only through `Builder.emit` / `Builder.value`. Backends register
one rule per op class and a test keeps every class covered (`OP_CLASSES`).

Conventions the front end guarantees (and `check` enforces): elementwise operands share one
shape; broadcasting and promotion are explicit ops before them; tile-load indices are int32 or
int64 scalars, one per array dim; gather/scatter/atomic index tiles, values and masks share one
shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..language import dtypes as dt
from ..language import formatting
from ..language.dtypes import DType
from ..language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode
from .checks import (arg_types, array_type, check_axis, check_element_access, check_index_scalars, check_mask,
                     check_memory_order, check_permutation, check_pow2, check_same_shapes, check_scalar, tile_type,
                     yield_types)
from .control_ops import Condition, For, If, While, Yield  # noqa: F401  (ops of this set, declared there)
from .core import Block, Op, Value, declared, need, op
from .kinds import (DIRECTED, ROUNDED_BINARY, UNARY_RULES, AtomicFn, BinaryFn, CompareFn, GridDependency, Operand,
                    ReduceFn, ScanFn, UnaryFn)
from .types import ListType, TileType


# ---- constants and grid queries -----------------------------------------------------------------------
@op
class Const(Op):
    """A scalar constant; `value` is already converted to `dtype` (wrapped or rounded)."""

    value: bool | int | float
    dtype: DType

    def result_types(self):
        return (TileType(self.dtype),)

    def check(self):
        if self.dtype is dt.bool_:
            need(isinstance(self.value, bool), "a bool constant holds a bool")
        elif self.dtype.is_int:
            need(isinstance(self.value, int) and not isinstance(self.value, bool), "an int constant holds an int")
            lo = -(1 << (self.dtype.bitwidth - 1)) if self.dtype.signed else 0
            need(lo <= self.value < lo + (1 << self.dtype.bitwidth), f"{self.value} out of range of {self.dtype}")
        else:
            need(isinstance(self.value, float), "a float constant holds a float")


@dataclass(frozen=True, eq=False, kw_only=True)
class _GridQuery(Op):
    """A grid property along axis 0, 1 or 2 (int32); not an op itself."""

    axis: int

    def result_types(self):
        return (TileType(dt.int32),)

    def check(self):
        check_axis(self.axis, 3)


@op
class Bid(_GridQuery):
    """This block's index along grid axis 0, 1 or 2 (int32)."""


@op
class NumBlocks(_GridQuery):
    """The grid's size along axis 0, 1 or 2 (int32)."""


# ---- arrays ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False, kw_only=True)
class _ArrayQuery(Op):
    """A run-time property of `array` along `axis`, in the array's index type; not an op itself."""

    array: Value
    axis: int

    def result_types(self):
        return (TileType(array_type(self.array).index_dtype),)

    def check(self):
        check_axis(self.axis, array_type(self.array).ndim)


@op
class ArrayShape(_ArrayQuery):
    """`array.shape[axis]` at run time, in the array's index type."""


@op
class ArrayStride(_ArrayQuery):
    """`array.strides[axis]` (in elements) at run time, in the array's index type."""


@op
class ArraySlice(Op):
    """A view of `array` restricted to [start, stop) along `axis` (0 <= start <= stop <= size is
    the program's promise); same type as `array`."""

    array: Value
    start: Value
    stop: Value
    axis: int

    def result_types(self):
        return (array_type(self.array),)

    def check(self):
        arr = array_type(self.array)
        check_axis(self.axis, arr.ndim)
        for v in (self.start, self.stop):
            check_scalar(v, "slice bound", (arr.index_dtype,))


@op
class ListGet(Op):
    """Element `index` of a list argument (an array; out of range is undefined)."""

    list: Value
    index: Value

    def result_types(self):
        need(isinstance(self.list.type, ListType), f"list_get needs a list, got {self.list.type}")
        return (self.list.type.elem,)

    def check(self):
        need(tile_type(self.index, "index").dtype.is_int and self.index.tile.shape == (), "the index must be an integer scalar")


# ---- memory -------------------------------------------------------------------------------------------
_LOAD_ORDERS = (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.ACQUIRE)
_STORE_ORDERS = (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.RELEASE)


@op
class Load(Op):
    """The tile at tile coordinate `index` of `array` viewed with axes permuted by `order` and cut
    into `shape` tiles: result[x] = V[index * shape + x], V axis k = array axis order[k]. Lanes
    outside the array get `padding`'s value. `shape == ()` on an n-d array loads one element.

    check_bounds=False promises a tile inside the array (masks may be skipped); latency (1..10)
    and allow_tma are scheduling hints; memory_order/scope order the load (WEAK: plain)."""

    array: Value
    index: tuple[Value, ...]
    shape: tuple[int, ...]
    order: tuple[int, ...]
    padding: PaddingMode = PaddingMode.UNDETERMINED
    check_bounds: bool = True
    latency: int | None = None
    allow_tma: bool | None = None
    memory_order: MemoryOrder = MemoryOrder.WEAK
    memory_scope: MemoryScope = MemoryScope.NONE

    def result_types(self):
        return (TileType(array_type(self.array).dtype, self.shape),)

    def check(self):
        arr = array_type(self.array)
        check_index_scalars(self.index, arr)
        need(len(self.shape) in (0, arr.ndim), f"a rank-{len(self.shape)} tile of a rank-{arr.ndim} array")
        check_pow2(self.shape)
        check_permutation(self.order, arr.ndim)
        need(self.latency is None or 1 <= self.latency <= 10, f"latency {self.latency} not in 1..10")
        check_memory_order(self.memory_order, self.memory_scope, _LOAD_ORDERS)


@op
class Store(Op):
    """Store `tile` (of the array's dtype) at tile coordinate `index`; lanes outside the array are
    dropped. Hints and ordering as for Load."""

    array: Value
    index: tuple[Value, ...]
    tile: Value
    order: tuple[int, ...]
    check_bounds: bool = True
    latency: int | None = None
    allow_tma: bool | None = None
    memory_order: MemoryOrder = MemoryOrder.WEAK
    memory_scope: MemoryScope = MemoryScope.NONE

    effects = True

    def check(self):
        arr = array_type(self.array)
        check_index_scalars(self.index, arr)
        t = tile_type(self.tile, "stored tile")
        need(t.dtype is arr.dtype, f"stored tile dtype {t.dtype} differs from the array dtype {arr.dtype}")
        need(t.ndim in (0, arr.ndim), f"a rank-{t.ndim} tile stored into a rank-{arr.ndim} array")
        check_permutation(self.order, arr.ndim)
        need(self.latency is None or 1 <= self.latency <= 10, f"latency {self.latency} not in 1..10")
        check_memory_order(self.memory_order, self.memory_scope, _STORE_ORDERS)


@op
class Gather(Op):
    """result[x] = array[index_0[x], index_1[x], ...]; lanes out of bounds (when check_bounds) or
    masked off get `padding` (a tile of the result)."""

    array: Value
    index: tuple[Value, ...]
    padding: Value
    mask: Value | None = None
    check_bounds: bool = True
    latency: int | None = None

    def result_types(self):
        return (TileType(array_type(self.array).dtype, tile_type(self.padding, "padding").shape),)

    def check(self):
        arr = array_type(self.array)
        check_element_access(arr, self.index, (self.padding, self.mask))
        need(self.padding.tile.dtype is arr.dtype, "padding has the array dtype")
        check_mask(self.mask)


@op
class Scatter(Op):
    """array[index_0[x], ...] = value[x] for lanes in bounds (when check_bounds) and not masked."""

    array: Value
    index: tuple[Value, ...]
    value: Value
    mask: Value | None = None
    check_bounds: bool = True
    latency: int | None = None

    effects = True

    def check(self):
        arr = array_type(self.array)
        check_element_access(arr, self.index, (self.value, self.mask))
        need(self.value.tile.dtype is arr.dtype, "the value has the array dtype")
        check_mask(self.mask)


_ATOMIC_ORDERS = (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE, MemoryOrder.ACQ_REL)


def _check_atomic(op: "AtomicRMW | AtomicCAS", values: tuple[Value, ...]) -> None:
    """Invariants shared by the atomics: element access, operands of the array dtype, ordering."""
    arr = array_type(op.array)
    check_element_access(arr, op.index, (*values, op.mask))
    need(all(v.tile.dtype is arr.dtype for v in values), "atomic operands have the array dtype")
    check_mask(op.mask)
    need(op.memory_order in _ATOMIC_ORDERS, f"memory_order {op.memory_order.name} on an atomic")
    need(op.memory_scope is not MemoryScope.NONE, "an atomic needs a memory scope")


@op
class AtomicRMW(Op):
    """Per lane, atomically array[idx] = fn(array[idx], value); returns the old values (lanes
    skipped, out of bounds or masked off, return 0). Lanes apply as if one at a time in
    row-major lane order."""

    fn: AtomicFn
    array: Value
    index: tuple[Value, ...]
    value: Value
    mask: Value | None = None
    check_bounds: bool = True
    memory_order: MemoryOrder = MemoryOrder.ACQ_REL
    memory_scope: MemoryScope = MemoryScope.DEVICE

    effects = True

    def result_types(self):
        return (self.value.type,)

    def check(self):
        _check_atomic(self, (self.value,))


@op
class AtomicCAS(Op):
    """Per lane, atomically: if the bits of array[idx] equal expected's, store desired; returns
    the old values (skipped lanes return `expected`)."""

    array: Value
    index: tuple[Value, ...]
    expected: Value
    desired: Value
    mask: Value | None = None
    check_bounds: bool = True
    memory_order: MemoryOrder = MemoryOrder.ACQ_REL
    memory_scope: MemoryScope = MemoryScope.DEVICE

    effects = True

    def result_types(self):
        return (self.expected.type,)

    def check(self):
        _check_atomic(self, (self.expected, self.desired))


# ---- tile construction, conversion and shape ----------------------------------------------------------
@op
class Arange(Op):
    """The int32 tile [0, 1, ..., size-1]."""

    size: int

    def result_types(self):
        return (TileType(dt.int32, (self.size,)),)

    def check(self):
        check_pow2((self.size,))


@op
class Cast(Op):
    """Value conversion to `dtype`: float→int truncates toward zero (saturating, NaN → 0),
    int→bool is != 0, to a float rounds by `rounding` (None: nearest even; RN, RZ, RM, RP, RA:
    nearest with ties away from zero)."""

    x: Value
    dtype: DType
    rounding: RoundingMode | None = None

    def result_types(self):
        return (tile_type(self.x, "x").with_dtype(self.dtype),)

    def check(self):
        if self.rounding is not None:
            need(self.rounding in DIRECTED + (RoundingMode.RA,), f"rounding mode {self.rounding.name} on a cast")
            need(self.dtype.is_float or self.dtype.is_restricted, "a rounding mode needs a float result")
        need(self.x.tile.dtype not in dt.PACKED_DTYPES and self.dtype not in dt.PACKED_DTYPES,
             f"cast {self.x.tile.dtype} -> {self.dtype} of a packed dtype")


@op
class Bitcast(Op):
    """The same bits read as `dtype` (same bit width, not bool)."""

    x: Value
    dtype: DType

    def result_types(self):
        return (tile_type(self.x, "x").with_dtype(self.dtype),)

    def check(self):
        src = self.x.tile.dtype
        need(src.bitwidth == self.dtype.bitwidth and dt.bool_ not in (src, self.dtype),
             f"bitcast {src} -> {self.dtype} changes the bit width or involves bool")


@op
class Pack(Op):
    """The bytes of the 1-D tile x (not bool, not 8-bit: those are a Bitcast) as a 1-D uint8 tile,
    first element first, each element's bytes little-endian; sub-byte elements fill each byte
    from its low bits (element 2k in bits 0-3, 2k+1 in bits 4-7 for a 4-bit dtype)."""

    x: Value

    def result_types(self):
        t = tile_type(self.x, "x")
        need(t.ndim == 1, f"pack of a rank-{t.ndim} tile")
        bits = t.shape[0] * t.dtype.bitwidth
        need(bits % 8 == 0, f"pack of {bits} bits")
        return (TileType(dt.uint8, (bits // 8,)),)

    def check(self):
        src = self.x.tile.dtype
        need(src is not dt.bool_ and src.bitwidth != 8, f"pack of {src}")


@op
class Unpack(Op):
    """The inverse of Pack: the 1-D uint8 tile x read as a 1-D tile of `dtype` (not bool, not
    8-bit)."""

    x: Value
    dtype: DType

    def result_types(self):
        t = tile_type(self.x, "x")
        need(t.ndim == 1 and t.dtype is dt.uint8, f"unpack of {t}")
        bits = t.shape[0] * 8
        need(bits % self.dtype.bitwidth == 0, f"unpack of {bits} bits to {self.dtype}")
        return (TileType(self.dtype, (bits // self.dtype.bitwidth,)),)

    def check(self):
        need(self.dtype is not dt.bool_ and self.dtype.bitwidth != 8, f"unpack to {self.dtype}")


@op
class Broadcast(Op):
    """NumPy broadcast to `shape` of the same rank (dims of 1 grow)."""

    x: Value
    shape: tuple[int, ...]

    def result_types(self):
        return (TileType(tile_type(self.x, "x").dtype, self.shape),)

    def check(self):
        src = self.x.tile.shape
        need(len(src) == len(self.shape) and all(s in (1, d) for s, d in zip(src, self.shape)),
             f"cannot broadcast {src} to {self.shape}")


@op
class Reshape(Op):
    """Row-major reshape to `shape` (same element count)."""

    x: Value
    shape: tuple[int, ...]

    def result_types(self):
        return (TileType(tile_type(self.x, "x").dtype, self.shape),)

    def check(self):
        n = 1
        for d in self.x.tile.shape:
            n *= d
        m = 1
        for d in self.shape:
            m *= d
        need(n == m, f"cannot reshape {self.x.tile.shape} to {self.shape}")


@op
class Permute(Op):
    """Result axis k is input axis axes[k]."""

    x: Value
    axes: tuple[int, ...]

    def result_types(self):
        t = tile_type(self.x, "x")
        check_permutation(self.axes, t.ndim)
        return (TileType(t.dtype, tuple(t.shape[a] for a in self.axes)),)


@op
class Cat(Op):
    """lhs and rhs (same dtype, same dims but `axis`) concatenated along `axis`."""

    lhs: Value
    rhs: Value
    axis: int

    def result_types(self):
        a, b = tile_type(self.lhs, "lhs"), tile_type(self.rhs, "rhs")
        need(a.ndim == b.ndim and a.dtype is b.dtype, f"cat of {a} and {b}")
        check_axis(self.axis, a.ndim)
        shape = list(a.shape)
        shape[self.axis] += b.shape[self.axis]
        return (TileType(a.dtype, tuple(shape)),)

    def check(self):
        a, b = self.lhs.tile, self.rhs.tile
        need(all(p == q for k, (p, q) in enumerate(zip(a.shape, b.shape)) if k != self.axis),
             f"cat of {a} and {b}: dims other than {self.axis} differ")
        check_pow2(self.results[0].tile.shape if self.results else ())


@op
class Extract(Op):
    """Sub-tile `index` (int scalars, one per dim) of x cut into `shape` blocks."""

    x: Value
    index: tuple[Value, ...]
    shape: tuple[int, ...]

    def result_types(self):
        return (TileType(tile_type(self.x, "x").dtype, self.shape),)

    def check(self):
        src = self.x.tile.shape
        need(len(self.shape) == len(src) == len(self.index), f"extract of rank {len(self.shape)} from rank {len(src)}")
        need(all(d % s == 0 for d, s in zip(src, self.shape)), f"{self.shape} does not divide {src}")
        for v in self.index:
            check_scalar(v, "extract index", (dt.int32, dt.int64))


@op
class Insert(Op):
    """x with its sub-tile `index` (int scalars, one per dim) of the grid of `value.shape` blocks
    replaced by `value` (same dtype and rank); the inverse of Extract. An index outside the grid
    changes nothing."""

    x: Value
    value: Value
    index: tuple[Value, ...]

    def result_types(self):
        return (tile_type(self.x, "x"),)

    def check(self):
        dst, sub = self.x.tile, tile_type(self.value, "value")
        need(dst.dtype is sub.dtype, f"insert of {sub.dtype} into {dst.dtype}")
        need(len(sub.shape) == len(dst.shape) == len(self.index), f"insert of rank {sub.ndim} into rank {dst.ndim}")
        need(all(d % s == 0 for d, s in zip(dst.shape, sub.shape)), f"{sub.shape} does not divide {dst.shape}")
        for v in self.index:
            check_scalar(v, "insert index", (dt.int32, dt.int64))


# ---- elementwise ----------------------------------------------------------------------------------------
def _check_rounding(rounding: RoundingMode | None, ftz: bool, dtype: DType, approx_ok: bool) -> None:
    if rounding is not None:
        allowed = DIRECTED + ((RoundingMode.FULL, RoundingMode.APPROX) if approx_ok else ())
        need(rounding in allowed, f"rounding mode {rounding.name} not allowed here")
        need(dtype.is_float, f"a rounding mode needs float operands, got {dtype}")
        if rounding in (RoundingMode.FULL, RoundingMode.APPROX):
            need(dtype is dt.float32, "FULL/APPROX only on float32")
    if ftz:
        need(dtype is dt.float32, f"flush_to_zero only on float32, got {dtype}")


@op
class Unary(Op):
    """fn(x) per element, typed by `kinds.UNARY_RULES[fn]`, which also lists the rounding modes
    and flush_to_zero (float32: subnormal inputs and results become ±0) each fn accepts."""

    fn: UnaryFn
    x: Value
    rounding: RoundingMode | None = None
    flush_to_zero: bool = False

    def result_types(self):
        t = tile_type(self.x, "x")
        return (t.with_dtype(dt.bool_) if UNARY_RULES[self.fn].bool_result else t,)

    def check(self):
        rule, d = UNARY_RULES[self.fn], self.x.tile.dtype
        need(not d.is_restricted, f"{self.fn.value} of {d}")
        need(rule.operand is not Operand.FLOAT or d.is_float, f"{self.fn.value} needs a float operand, got {d}")
        need(rule.operand is not Operand.MATH or d.is_float, f"{self.fn.value} computes in a float dtype, got {d}")
        need(rule.operand is not Operand.INTEGRAL or d.is_integral, f"{self.fn.value} needs ints or bool, got {d}")
        if self.rounding is not None:
            need(self.rounding in rule.rounding, f"rounding mode {self.rounding.name} on {self.fn.value}")
            _check_rounding(self.rounding, False, d, True)
        if self.flush_to_zero:
            need(rule.flush_to_zero, f"flush_to_zero on {self.fn.value}")
            _check_rounding(None, True, d, False)


@op
class Binary(Op):
    """fn(lhs, rhs) per element on operands of one type. ADD/SUB/MUL/TRUEDIV may carry a
    rounding mode (RN/RZ/RM/RP; TRUEDIV also FULL/APPROX) and flush_to_zero (float32; also on
    MIN/MAX)."""

    fn: BinaryFn
    lhs: Value
    rhs: Value
    rounding: RoundingMode | None = None
    flush_to_zero: bool = False

    def result_types(self):
        return (tile_type(self.lhs, "lhs"),)

    def check(self):
        need(self.lhs.type == self.rhs.type, f"operand types differ: {self.lhs.type}, {self.rhs.type}")
        d = self.lhs.tile.dtype
        if self.rounding is not None:
            need(self.fn in ROUNDED_BINARY, f"rounding mode on {self.fn.value}")
        if self.flush_to_zero:
            need(self.fn in ROUNDED_BINARY | {BinaryFn.MIN, BinaryFn.MAX, BinaryFn.MIN_NAN, BinaryFn.MAX_NAN},
                 f"flush_to_zero on {self.fn.value}")
        _check_rounding(self.rounding, self.flush_to_zero, d, self.fn is BinaryFn.TRUEDIV)


FMA_DTYPES = (dt.float16, dt.bfloat16, dt.float32)
"""The dtypes an Fma takes: each backend computes it exactly rounded once (passes/contract.py)."""


@op
class Fma(Op):
    """(±a) * b + (±c) per element, rounded once to nearest even (a fused multiply-add; the
    signs: `negate_product`, `negate_addend`); all three of one type, a float of FMA_DTYPES.
    Made by passes/contract.py from a multiplication feeding an addition or subtraction."""

    a: Value
    b: Value
    c: Value
    negate_product: bool = False
    negate_addend: bool = False

    def result_types(self):
        return (tile_type(self.a, "a"),)

    def check(self):
        need(self.a.type == self.b.type == self.c.type,
             f"fma operand types differ: {self.a.type}, {self.b.type}, {self.c.type}")
        need(self.a.tile.dtype in FMA_DTYPES, f"fma of {self.a.tile.dtype}")


@op
class Compare(Op):
    """fn(lhs, rhs) per element -> bool; floats ordered except NE (NaN != NaN)."""

    fn: CompareFn
    lhs: Value
    rhs: Value

    def result_types(self):
        return (tile_type(self.lhs, "lhs").with_dtype(dt.bool_),)

    def check(self):
        need(self.lhs.type == self.rhs.type, f"operand types differ: {self.lhs.type}, {self.rhs.type}")


@op
class Where(Op):
    """x where cond else y (cond bool; all three of one shape, x and y of one type)."""

    cond: Value
    x: Value
    y: Value

    def result_types(self):
        return (tile_type(self.x, "x"),)

    def check(self):
        check_same_shapes(self.cond, self.x, self.y)
        need(self.cond.tile.dtype is dt.bool_ and self.x.type == self.y.type,
             "where needs a bool condition and two values of one type")


# ---- reductions, scans, matrix multiply ------------------------------------------------------------------
@op
class Reduce(Op):
    """fn over `axis` (keepdims keeps it as 1). SUM/PROD keep the dtype (integers wrap); MAX/MIN
    ignore NaN; ARGMAX/ARGMIN give the int32 first index of the extreme, ignoring NaN."""

    fn: ReduceFn
    x: Value
    axis: int
    keepdims: bool = False

    def result_types(self):
        t = tile_type(self.x, "x")
        check_axis(self.axis, t.ndim)
        shape = t.shape[:self.axis] + ((1,) if self.keepdims else ()) + t.shape[self.axis + 1:]
        arg = self.fn in (ReduceFn.ARGMAX, ReduceFn.ARGMIN)
        return (TileType(dt.int32 if arg else t.dtype, shape),)

    def check(self):
        d = self.x.tile.dtype
        need(not d.is_restricted and d is not dt.bool_, f"reduce of {d}")


@op
class Scan(Op):
    """Inclusive fn-scan along `axis` (reverse: from the end)."""

    fn: ScanFn
    x: Value
    axis: int
    reverse: bool = False

    def result_types(self):
        t = tile_type(self.x, "x")
        check_axis(self.axis, t.ndim)
        return (t,)

    def check(self):
        d = self.x.tile.dtype
        need(not d.is_restricted and d is not dt.bool_, f"scan of {d}")


def _check_combine(xs: tuple[Value, ...], identities: tuple[Any, ...], combine: Block) -> None:
    scalars = tuple(TileType(v.tile.dtype) for v in xs)
    need(len(identities) == len(xs), "one identity per operand")
    for v, ident in zip(xs, identities):
        need(not (v.tile.dtype.is_integral and isinstance(ident, float)),
             f"a float identity {ident!r} for a {v.tile.dtype} operand")
    need(arg_types(combine) == scalars + scalars, "the combine block takes 2N scalars of the operand dtypes")
    need(yield_types(combine, Yield) == scalars, "the combine block yields N scalars of the operand dtypes")
    check_same_shapes(*xs)


@op
class ReduceWith(Op):
    """Reduce the tiles `xs` (one shape) along `axis` with the `combine` block: combine(*a, *b)
    on 0-d values yields N 0-d values; `identities` are its neutral elements."""

    xs: tuple[Value, ...]
    axis: int
    keepdims: bool
    identities: tuple[bool | int | float, ...]
    combine: Block

    def result_types(self):
        need(len(self.xs) > 0, "reduce_with needs operands")
        t = tile_type(self.xs[0], "x")
        check_axis(self.axis, t.ndim)
        shape = t.shape[:self.axis] + ((1,) if self.keepdims else ()) + t.shape[self.axis + 1:]
        return tuple(TileType(x.tile.dtype, shape) for x in self.xs)

    def check(self):
        _check_combine(self.xs, self.identities, self.combine)


@op
class ScanWith(Op):
    """Inclusive scan of `xs` along `axis` with the `combine` block (as ReduceWith)."""

    xs: tuple[Value, ...]
    axis: int
    reverse: bool
    identities: tuple[bool | int | float, ...]
    combine: Block

    def result_types(self):
        need(len(self.xs) > 0, "scan_with needs operands")
        check_axis(self.axis, tile_type(self.xs[0], "x").ndim)
        return tuple(x.type for x in self.xs)

    def check(self):
        _check_combine(self.xs, self.identities, self.combine)


MMA_ACCUMULATORS: dict[DType, tuple[DType, ...]] = {
    dt.float16: (dt.float16, dt.float32), dt.bfloat16: (dt.float32,), dt.float32: (dt.float32,),
    dt.tfloat32: (dt.float32,), dt.float64: (dt.float64,), dt.float8_e4m3fn: (dt.float16, dt.float32),
    dt.float8_e5m2: (dt.float16, dt.float32), dt.int8: (dt.int32,), dt.uint8: (dt.int32,),
}
"""Operand dtype -> the accumulator dtypes MMA allows (the first is matmul's)."""


@op
class Mma(Op):
    """a @ b + acc on 2-D or 3-D (batched, equal batch) tiles; result type = acc's. float32
    operands multiply exactly (the tf32 path is the tfloat32 dtype); use_fast_acc (fp8 only)
    allows a less precise accumulation inside the K loop."""

    a: Value
    b: Value
    acc: Value
    use_fast_acc: bool = False

    def result_types(self):
        return (tile_type(self.acc, "acc"),)

    def check(self):
        a, b, c = self.a.tile, self.b.tile, self.acc.tile
        need(a.ndim == b.ndim == c.ndim and a.ndim in (2, 3), f"mma ranks {a.ndim}, {b.ndim}, {c.ndim}")
        need(a.shape[:-2] == b.shape[:-2] == c.shape[:-2], "mma batch dims differ")
        need(a.shape[-1] == b.shape[-2] and c.shape[-2:] == (a.shape[-2], b.shape[-1]),
             f"mma shapes {a.shape} @ {b.shape} -> {c.shape}")
        ints = (dt.int8, dt.uint8)
        need(a.dtype is b.dtype or (a.dtype in ints and b.dtype in ints), f"mma of {a.dtype} and {b.dtype}")
        need(c.dtype in MMA_ACCUMULATORS.get(a.dtype, ()), f"mma of {a.dtype} into {c.dtype}")
        need(not self.use_fast_acc or a.dtype in (dt.float8_e4m3fn, dt.float8_e5m2), "use_fast_acc needs fp8")


# ---- utilities -------------------------------------------------------------------------------------------
@op
class Print(Op):
    """Print `format` (C printf, one conversion per tile; language/formatting.py says how)."""

    format: str
    tiles: tuple[Value, ...]

    effects = True

    def check(self):
        convs = formatting.conversions(self.format)
        need(convs is not None and len(convs) == len(self.tiles) and all(
            formatting.accepts(c.spec, tile_type(v, "printed value").dtype) for c, v in zip(convs, self.tiles)),
            f"print format {self.format!r} does not fit its tiles")


@op
class Assert(Op):
    """Trap with `message` if any element of the bool tile `cond` is False."""

    cond: Value
    message: str

    effects = True

    def check(self):
        need(tile_type(self.cond, "cond").dtype is dt.bool_, "assert needs a bool tile")


@op
class GridDependencyControl(Op):
    """A programmatic-dependent-launch control (`GridDependency`): ordering between this grid and
    the grids before and after it on the stream; no value."""

    action: GridDependency

    effects = True


OP_CLASSES: tuple[type[Op], ...] = declared()
"""Every op class, in declaration order (backends and tests walk it)."""
