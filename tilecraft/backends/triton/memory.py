"""Lowering of memory ops: tile loads/stores (tensor descriptors or masked pointers), gather,
scatter and atomics, and the array shape/stride queries.

Addressing of a tile load/store (spec 2.3): with V = the array with axes permuted by `order`
(V axis k = array axis order[k]), result[x] = V[index * shape + x]. The pointer path computes
that address per element and masks lanes outside the array. A load may instead go through a
tensor descriptor (TMA): it loads the block in array axis order, the hardware pads the lanes
outside, and the block is permuted into V's order.
"""

from __future__ import annotations

import numpy as np

from ..base import ArrayFacts
from ...ir import AtomicFn, Function, Opcode, Operation, Value
from ...ir.types import ArrayType
from ...language import dtypes as D
from ...language.enums import PADDING_VALUES, MemoryOrder, MemoryScope, PaddingMode
from .emitter import (ArrayParam, KernelWriter, broadcast_index, is_float, negative_zero, py_literal,
                      rule, shape_of, tl_dtype)
from .heuristics import is_persistent


def _term(offset: str, stride: str | None) -> str:
    return offset if stride is None else f"{offset} * {stride}"


def _order(op: Operation, ndim: int) -> tuple[int, ...]:
    order = op.attrs.get("order")
    return tuple(range(ndim)) if order is None else tuple(order)


def _padding_value(w: KernelWriter, mode: PaddingMode, dtype) -> str | None:
    """The `other=` of a masked load, or None where any value will do (UNDETERMINED)."""
    if mode is PaddingMode.UNDETERMINED:
        return None
    if dtype.is_restricted and dtype.bitwidth == 8 and mode is not PaddingMode.ZERO:
        # 8-bit floats: the exact bit pattern (Triton's interpreter converts NaN/inf wrongly)
        bits = int(np.array(PADDING_VALUES[mode]).astype(dtype.np_dtype).view(np.uint8))
        return f"tl.cast(tl.full([], {bits}, tl.uint8), {tl_dtype(dtype)}, bitcast=True)"
    if mode in (PaddingMode.ZERO, PaddingMode.NEG_ZERO) or not (is_float(dtype) or dtype.is_restricted):
        if mode not in (PaddingMode.ZERO, PaddingMode.NEG_ZERO):
            raise w.unsupported(f"padding mode {mode.name} on a {dtype.name} array")
        if is_float(dtype) or dtype.is_restricted:
            return negative_zero(D.float32) if mode is PaddingMode.NEG_ZERO else "0.0"
        return py_literal(0, dtype)
    value = {PaddingMode.NAN: float("nan"), PaddingMode.POS_INF: float("inf"),
             PaddingMode.NEG_INF: float("-inf")}[mode]
    return py_literal(value, D.float32)


# ---- tensor descriptors ---------------------------------------------------------------------

def _descriptor_padding(mode: PaddingMode, dtype) -> str | None:
    if mode in (PaddingMode.ZERO, PaddingMode.UNDETERMINED):
        return "zero"
    if mode is PaddingMode.NAN and (is_float(dtype) or dtype.is_restricted):
        return "nan"
    return None


def _descriptor_block(op: Operation) -> tuple[tuple[int, ...], str] | None:
    """(block shape in array axis order, padding option) if tile load/store `op` may use a
    descriptor (stores only in array axis order)."""
    arr: ArrayType = op.operands[0].type
    if op.attrs.get("allow_tma") is False or not 2 <= arr.ndim <= 5 or arr.dtype is D.bool_:
        return None
    if op.opcode == Opcode.STORE:
        shape = shape_of(op.operands[-1])
        padding: str | None = "zero"
        if not _is_identity(_order(op, arr.ndim)):
            return None
    else:
        shape = tuple(op.attrs["shape"])
        padding = _descriptor_padding(op.attrs.get("padding", PaddingMode.UNDETERMINED), arr.dtype)
    if padding is None or len(shape) != arr.ndim:
        return None
    order = _order(op, arr.ndim)
    block = [0] * arr.ndim
    for k, axis in enumerate(order):
        block[axis] = shape[k]
    if block[-1] * arr.dtype.itemsize < 16 or max(block) > 256:
        return None
    return tuple(block), padding


def prefer_descriptor(facts: ArrayFacts, persistent: bool) -> bool:
    """Whether a descriptor beats masked pointers for this array (H200, Triton 3.6, 2026-11-29
    benchmarks/results): pointers vectorize fully and ran 2-10% faster when every size and stride
    is a multiple of 16 elements, but 2-14x slower otherwise (e.g. 4000x3000x2000 bf16: 35 vs 491
    TFLOP/s); persistent matmuls ran 2-5% faster with descriptors either way."""
    return persistent or not facts.divisible16


def plan_descriptors(w: KernelWriter, fn: Function) -> None:
    """Choose the tile loads and stores that use tensor descriptors; emit each descriptor once,
    at the top of the kernel (creating one inside a loop would rebuild it every iteration).

    Stores use descriptors only into dense arrays (`ArrayFacts.tma_store_ok`): on the H200
    (Triton 3.6) a descriptor store into a view with a gap after its last dimension wrote its
    padding lanes into the gap, while descriptor loads padded correctly."""
    if not w.target.descriptors:
        return
    persistent = w.grid_loop or is_persistent(fn)
    made: dict[tuple, str] = {}
    for op in fn.walk():
        if op.opcode not in (Opcode.LOAD, Opcode.STORE):
            continue
        arr = w.arrays.get(op.operands[0].id)  # views made in the kernel: not yet (no descriptors)
        choice = _descriptor_block(op)
        if choice is None or arr is None or arr.facts is None:
            continue
        if not (arr.facts.tma_store_ok if op.opcode == Opcode.STORE else arr.facts.tma_ok):
            continue
        if not w.target.force_descriptors and not prefer_descriptor(arr.facts, persistent):
            continue
        key = (op.operands[0].id, *choice)
        if key not in made:
            block, padding = choice
            made[key] = name = w.fresh(f"{arr.pointer}_desc")
            w.loc = op.loc
            strides = ", ".join(s or "1" for s in arr.strides)
            w.emit(f"{name} = tl.make_tensor_descriptor({arr.pointer}, shape=[{', '.join(arr.shapes)}], "
                   f"strides=[{strides}], block_shape={list(block)}, padding_option={padding!r})")
        w.plans[id(op)] = made[key]
    w.loc = None


# ---- tile load / store ----------------------------------------------------------------------

def _tile_address(w: KernelWriter, arr: ArrayParam, op: Operation, index: list[Value],
                  shape: tuple[int, ...], order: tuple[int, ...]) -> tuple[str, str | None]:
    """Emit the tile's address; return (pointer expression, mask expression or None).

    The address is a scalar base (the tile's first element) plus lane offsets that depend only
    on the strides, which Triton hoists out of loops; a load that `plan_increments` gave a
    loop-carried pointer tile uses that instead. A dim needs a mask term unless its tiles never
    straddle the array's end (`ArrayFacts.tiles_evenly`) or the access promised
    `check_bounds=False`."""
    check = op.attrs.get("check_bounds", True)
    if not shape:  # a single element: scalar address, no lanes to mask
        terms = [arr.pointer]
        conds = []
        for axis, v in enumerate(index):
            i = _index(w, arr, v)
            terms.append(_term(i, arr.strides[axis]))
            if check:
                conds.append(f"({i} < {arr.shapes[axis]})")
        return " + ".join(terms), " & ".join(conds) or None
    pointers = w.increments.get(id(op))
    base, lanes, conds = [arr.pointer], [], []
    for k, axis in enumerate(order):
        masked = check and not (arr.facts is not None and arr.facts.tiles_evenly(axis, shape[k]))
        lane = broadcast_index(f"tl.arange(0, {shape[k]})", k, len(shape))
        lanes.append(_term(lane, arr.strides[axis]))
        if pointers is not None and not masked:
            continue
        start = w.fresh(f"{arr.pointer}_start{axis}")
        w.emit(f"{start} = {_scaled(w, arr, index[k], shape[k])}")
        base.append(_term(start, arr.strides[axis]))
        if masked:
            conds.append(f"({lane} < {arr.shapes[axis]} - {start})")
    mask = " & ".join(conds) or None
    if pointers is not None:
        return pointers, mask
    name = w.fresh(f"{arr.pointer}_base")
    w.emit(f"{name} = {' + '.join(base)}")
    return f"{name} + ({' + '.join(lanes)})", mask


def plan_increments(w: KernelWriter, loop: Operation) -> list[str]:
    """Give the pointer-path tile loads directly in FOR `loop`'s body whose indices are the
    induction variable or loop-invariant a pointer tile carried by the loop: emitted here
    (before the loop) for the first iteration, advanced by the returned statements at the end
    of each iteration. Like a hand-written Triton K loop, this ran ~5% faster than addressing
    from a fresh base per iteration (TC2 on the H200: benchmarks/results/probe-tc2-*)."""
    lb, _, step = loop.operands[:3]
    body = loop.blocks[0]
    iv = body.args[0]
    # values a direct child may use that change per iteration (nested blocks' values are not visible)
    inside = {a.id for a in body.args} | {r.id for o in body.ops for r in o.results}
    advances = []
    for op in body.ops:
        if op.opcode != Opcode.LOAD or id(op) in w.plans or len(op.attrs["shape"]) != len(op.operands) - 1:
            continue
        index = op.operands[1:]
        if op.operands[0].id in inside or not any(v is iv for v in index) \
                or any(v.id in inside and v is not iv for v in index):
            continue
        arr = w.arrays[op.operands[0].id]
        shape, order = tuple(op.attrs["shape"]), _order(op, len(index))
        first, lanes, advance = [arr.pointer], [], []
        for k, axis in enumerate(order):
            stride = arr.strides[axis]
            start = _scaled(w, arr, lb if index[k] is iv else index[k], shape[k])
            if start != "0":
                first.append(_term(start, stride))
            lanes.append(_term(broadcast_index(f"tl.arange(0, {shape[k]})", k, len(shape)), stride))
            if index[k] is iv:
                advance.append(_term(_scaled(w, arr, step, shape[k]), stride))
        name = w.fresh(f"{arr.pointer}_ptrs")
        outer, w.loc = w.loc, op.loc
        w.emit(f"{name} = {' + '.join(first)} + ({' + '.join(lanes)})")
        w.loc = outer
        w.increments[id(op)] = name
        advances.append(f"{name} += {' + '.join(advance)}")
    return advances


def _scaled(w: KernelWriter, arr: ArrayParam, v: Value, n: int) -> str:
    """`v * n` in the array's offset type, folded when `v` is a literal."""
    if w.is_literal(v):
        return str(int(w.expr(v).strip("()")) * n)
    return f"{_index(w, arr, v)} * {n}"


def _index(w: KernelWriter, arr: ArrayParam, v: Value) -> str:
    """A tile index operand in the array's offset type."""
    if arr.index64 and v.tile.dtype is not D.int64:
        return f"tl.cast({w.expr(v)}, tl.int64)"
    return w.expr(v)


def _descriptor_offsets(w: KernelWriter, index: list[Value], shape, order) -> str:
    offs = [""] * len(order)
    for k, axis in enumerate(order):
        offs[axis] = f"{w.expr(index[k])} * {shape[k]}"
    return "[" + ", ".join(offs) + "]"


def _is_identity(order: tuple[int, ...]) -> bool:
    return order == tuple(range(len(order)))


@rule(Opcode.LOAD)
def _load(w: KernelWriter, op: Operation) -> None:
    arr = w.arrays[op.operands[0].id]
    index = op.operands[1:]
    dtype = op.operands[0].type.dtype
    shape = tuple(op.attrs["shape"])
    order = _order(op, len(index))
    desc = w.plans.get(id(op))
    result = op.result
    if desc is not None:
        name = w.define(result, f"{arr.pointer}_tile")
        w.emit(f"{name} = {desc}.load({_descriptor_offsets(w, index, shape, order)})")
        if not _is_identity(order):
            w.emit(f"{name} = tl.permute({name}, {list(order)})")
        return
    if len(shape) != len(index):  # `()` on an n-d array: one element
        shape = ()
    ptr, mask = _tile_address(w, arr, op, index, shape, order)
    args = [ptr]
    if mask is not None:
        args.append(f"mask={mask}")
        other = _padding_value(w, op.attrs.get("padding", PaddingMode.UNDETERMINED), dtype)
        if other is not None:
            args.append(f"other={other}")
    text = f"tl.load({', '.join(args)})"
    if shape_of(result) != shape:
        text = f"tl.reshape({text}, {list(shape_of(result))})"
    w.assign(result, text, f"{arr.pointer}_tile")


@rule(Opcode.STORE)
def _store(w: KernelWriter, op: Operation) -> None:
    arr = w.arrays[op.operands[0].id]
    index, tile = op.operands[1:-1], op.operands[-1]
    shape = shape_of(tile)
    order = _order(op, len(index))
    desc = w.plans.get(id(op))
    if desc is not None:
        w.emit(f"{desc}.store({_descriptor_offsets(w, index, shape, order)}, {w.tensor(tile)})")
        return
    if len(shape) != len(index):
        shape = ()
    ptr, mask = _tile_address(w, arr, op, index, shape, order)
    mask_arg = "" if mask is None else f", mask={mask}"
    w.emit(f"tl.store({ptr}, {w.tensor(tile)}{mask_arg})")


# ---- gather / scatter / atomics -------------------------------------------------------------

def _element_address(w: KernelWriter, arr: ArrayParam, idx: list[Value], check: bool,
                     mask: Value | None) -> tuple[str, str | None]:
    """Pointers to array[idx...] and the mask of lanes to touch (in bounds and `mask`).

    Negative indices are out of bounds. An unsigned index is first widened to a signed type
    that holds it, and any index is narrowed to the offset type only after its bounds check,
    so an out-of-range index can never wrap into range."""
    terms, conds = [arr.pointer], []
    for axis, v in enumerate(idx):
        name, dt = w.expr(v), v.tile.dtype
        if check and not dt.signed:
            dt = D.int64 if dt.bitwidth >= 32 else D.int32
            name = w.fresh(f"{arr.pointer}_i{axis}")
            w.emit(f"{name} = tl.cast({w.expr(v)}, {tl_dtype(dt)})")
        if check:
            conds.append(f"({name} >= 0) & ({name} < {arr.shapes[axis]})")
        fits = dt is (D.int64 if arr.index64 else D.int32) or (dt.signed and dt.bitwidth < 32)
        offset = name if fits else f"tl.cast({name}, {arr.index_dtype})"
        terms.append(_term(offset, arr.strides[axis]))
    if mask is not None:
        conds.append(w.tensor(mask))
    if not conds:
        return " + ".join(terms), None
    mask_name = w.fresh(f"{arr.pointer}_mask")
    w.emit(f"{mask_name} = {' & '.join(conds)}")
    return " + ".join(terms), mask_name


def _element_operands(w: KernelWriter, op: Operation, nvals: int) -> tuple[ArrayParam, str, str | None, list[Value]]:
    """For GATHER/SCATTER/ATOMIC `(array, *idx, *vals[, mask])`: the array, the element
    pointers, the lane mask (bounds and `mask`) and the value operands."""
    ndim = op.operands[0].type.ndim
    idx, vals = op.operands[1:1 + ndim], op.operands[1 + ndim:1 + ndim + nvals]
    mask = op.operands[1 + ndim + nvals] if op.attrs.get("has_mask") else None
    arr = w.arrays[op.operands[0].id]
    ptr, m = _element_address(w, arr, idx, op.attrs.get("check_bounds", True), mask)
    return arr, ptr, m, list(vals)


@rule(Opcode.GATHER)
def _gather(w: KernelWriter, op: Operation) -> None:
    arr, ptr, m, (pad,) = _element_operands(w, op, 1)
    text = f"tl.load({ptr})" if m is None else f"tl.load({ptr}, mask={m}, other={w.expr(pad)})"
    w.assign(op.result, text, f"{arr.pointer}_items")


@rule(Opcode.SCATTER)
def _scatter(w: KernelWriter, op: Operation) -> None:
    _, ptr, m, (value,) = _element_operands(w, op, 1)
    mask_arg = "" if m is None else f", mask={m}"
    w.emit(f"tl.store({ptr}, {w.tensor(value)}{mask_arg})")


_SEM = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire",
        MemoryOrder.RELEASE: "release", MemoryOrder.ACQ_REL: "acq_rel"}
_SCOPE = {MemoryScope.BLOCK: "cta", MemoryScope.DEVICE: "gpu", MemoryScope.SYS: "sys"}
_RMW = {AtomicFn.XCHG: "atomic_xchg", AtomicFn.ADD: "atomic_add", AtomicFn.MAX: "atomic_max",
        AtomicFn.MIN: "atomic_min", AtomicFn.AND: "atomic_and", AtomicFn.OR: "atomic_or",
        AtomicFn.XOR: "atomic_xor"}


@rule(Opcode.ATOMIC)
def _atomic(w: KernelWriter, op: Operation) -> None:
    fn: AtomicFn = op.attrs["fn"]
    sem = _SEM.get(op.attrs.get("order", MemoryOrder.ACQ_REL))
    scope = _SCOPE.get(op.attrs.get("scope", MemoryScope.DEVICE))
    if sem is None or scope is None:
        raise w.unsupported(f"atomic memory order {op.attrs.get('order')} / scope {op.attrs.get('scope')}")
    arr, ptr, m, vals = _element_operands(w, op, 2 if fn is AtomicFn.CAS else 1)
    operands = [w.tensor(v) for v in vals]
    if w.target.interpret:
        dense = w.need_helper("_tc_dense_interp")
        operands = [f"{dense}({v})" for v in operands]
        m = m and f"{dense}({m})"
    kw = f"sem={sem!r}, scope={scope!r}"
    dtype = op.operands[0].type.dtype
    if fn is AtomicFn.XCHG and w.target.interpret and is_float(dtype):
        # the interpreter exchanges integers only: exchange the bits
        bits = {32: "tl.int32", 64: "tl.int64", 16: "tl.int16"}[dtype.bitwidth]
        old = (f"tl.atomic_xchg(tl.cast({ptr}, tl.pointer_type({bits})), "
               f"tl.cast({operands[0]}, {bits}, bitcast=True){'' if m is None else f', mask={m}'}, {kw})")
        w.assign(op.result, f"tl.cast({old}, {tl_dtype(dtype)}, bitcast=True)", f"{arr.pointer}_old")
        return
    if fn is not AtomicFn.CAS:
        mask_arg = "" if m is None else f", mask={m}"
        w.assign(op.result, f"tl.{_RMW[fn]}({ptr}, {operands[0]}{mask_arg}, {kw})", f"{arr.pointer}_old")
        return
    expected, desired = operands
    if m is None:
        w.assign(op.result, f"tl.atomic_cas({ptr}, {expected}, {desired}, {kw})", f"{arr.pointer}_old")
        return
    # tl.atomic_cas has no mask: masked-off lanes compare-and-swap element 0 with
    # expected -> expected, which never changes memory, and report `expected`.
    old = w.define(op.result, f"{arr.pointer}_old")
    w.emit(f"{old} = tl.atomic_cas(tl.where({m}, {ptr}, {arr.pointer}), {expected}, "
           f"tl.where({m}, {desired}, {expected}), {kw})")
    w.emit(f"{old} = tl.where({m}, {old}, {expected})")


# ---- array views -----------------------------------------------------------------------------

@rule(Opcode.LIST_GET)
def _list_get(w: KernelWriter, op: Operation) -> None:
    """Element `index` of a list argument: its address, shape and strides read from the tables
    (no facts: pointer accesses masked on every dim)."""
    lst, index = w.lists[op.operands[0].id], w.expr(op.operands[1])
    pointer = w.fresh(f"{op.result.hint or 'item'}")
    w.emit(f"{pointer} = tl.load({lst.ptrs} + {index}).to(tl.pointer_type({tl_dtype(op.result.type.dtype)}))")
    dims = []
    for table, part in ((lst.shapes, "shape"), (lst.strides, "stride")):
        names = [w.fresh(f"{pointer}_{part}{k}") for k in range(lst.ndim)]
        for k, name in enumerate(names):
            w.emit(f"{name} = tl.load({table} + {index} * {lst.ndim} + {k})")
        dims.append(names)
    w.arrays[op.result.id] = ArrayParam(pointer, dims[0], list(dims[1]), lst.index64, None)


@rule(Opcode.ARRAY_SLICE)
def _array_slice(w: KernelWriter, op: Operation) -> None:
    """A view: the base pointer moves by start x stride along the axis, whose size becomes
    stop - start; strides stay. Alignment and tiling facts are unknown for the view (pointer
    accesses with masks on every dim)."""
    src, start, stop = op.operands
    arr, axis = w.arrays[src.id], op.attrs["axis"]
    pointer = w.fresh(f"{arr.pointer}_view")
    w.emit(f"{pointer} = {arr.pointer} + {_term(w.expr(start), arr.strides[axis])}")
    size = w.fresh(f"{pointer}_shape{axis}")
    w.emit(f"{size} = {w.expr(stop)} - {w.expr(start)}")
    shapes = [size if k == axis else s for k, s in enumerate(arr.shapes)]
    f = arr.facts
    facts = None if f is None else ArrayFacts(aligned16=False, unit_last=f.unit_last, strides16=f.strides16,
                                              index64=f.index64)
    w.arrays[op.result.id] = ArrayParam(pointer, shapes, list(arr.strides), arr.index64, facts)


# ---- array queries --------------------------------------------------------------------------

@rule(Opcode.ARRAY_SHAPE, Opcode.ARRAY_STRIDE)
def _array_query(w: KernelWriter, op: Operation) -> None:
    arr = w.arrays[op.operands[0].id]
    axis = op.attrs["axis"]
    dtype = op.result.tile.dtype
    name = (arr.shapes if op.opcode == Opcode.ARRAY_SHAPE else arr.strides)[axis]
    if name is None:
        text, literal = w.const(1, dtype)
        w.alias(op.result, text, literal)
    elif (dtype is D.int64) != arr.index64:
        w.assign(op.result, f"tl.cast({name}, {tl_dtype(dtype)})", "n")
    else:
        w.alias(op.result, name)
