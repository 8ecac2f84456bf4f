"""Lowering of memory ops: tile loads/stores (tensor descriptors or masked pointers), gather,
scatter and atomics, array views and the array shape/stride queries.

Addressing of a tile load/store (spec 2.3): with V = the array with axes permuted by `order`
(V axis k = array axis order[k]), result[x] = V[index * shape + x]. The pointer path computes
that address per element and masks lanes outside the array. A load may instead go through a
tensor descriptor (TMA): it loads the block in array axis order, the hardware pads the lanes
outside, and the block is permuted into V's order. Which access takes which path, which dims
need masks and which loop loads walk a carried pointer tile is decided by the plan (plan.py);
this module only spells the decisions out.

Memory order of tile loads and stores: WEAK is a plain access; RELAXED loads are
`volatile=True`, RELAXED stores a relaxed atomic exchange (tl.store has no ordering option);
ACQUIRE loads and RELEASE stores cannot be expressed with Triton 3.6's tl.load/tl.store.
"""

from __future__ import annotations

from ...ir import AtomicFn, Function, Value, ops
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import MemoryOrder, MemoryScope, PaddingMode
from . import interpret_workarounds as workarounds
from .emitter import ArrayParam, KernelWriter, broadcast_index, covers, rule, shape_of
from .plan import Descriptor, tile_shape
from .spelling import SIGNATURE_TYPES, is_float, negative_zero, py_literal, tl_dtype


def _term(offset: str, stride: str | None) -> str:
    return offset if stride is None else f"{offset} * {stride}"


def _padding_value(w: KernelWriter, mode: PaddingMode, dtype: DType) -> str | None:
    """The `other=` of a masked load, or None where any value will do (UNDETERMINED)."""
    if mode is PaddingMode.UNDETERMINED:
        return None
    bits = workarounds.fp8_padding(mode, dtype)
    if bits is not None:
        return bits
    if mode in (PaddingMode.ZERO, PaddingMode.NEG_ZERO) or not (is_float(dtype) or dtype.is_restricted):
        if mode not in (PaddingMode.ZERO, PaddingMode.NEG_ZERO):
            raise w.unsupported(f"padding mode {mode.name} on a {dtype.name} array")
        if is_float(dtype) or dtype.is_restricted:
            return negative_zero(D.float32) if mode is PaddingMode.NEG_ZERO else "0.0"
        return py_literal(0, dtype)
    value = {PaddingMode.NAN: float("nan"), PaddingMode.POS_INF: float("inf"),
             PaddingMode.NEG_INF: float("-inf")}[mode]
    return py_literal(value, D.float32)


# ---- tensor descriptors and carried pointer tiles (made from the plan) -----------------------

def descriptor_params(w: KernelWriter, fn: Function, params: list[str], signature: dict[str, str],
                      launch: list[str]) -> tuple[tuple[int, int, str], ...]:
    """The plan's tensor descriptors as kernel parameters (`Target.host_descriptors`), each made
    on the host at the launch (Triton's `TensorDescriptor`, of the array's shape and strides,
    as `emit_descriptors` would make it in the kernel). A descriptor made in the kernel is
    written to global memory and fenced by every program, which costs a kernel of thousands of
    short programs several percent (H200: benchmarks/results/attention-probe-h200-2026-12-01-c.json);
    one made on the host costs a few microseconds of host time per launch instead. Appends each
    descriptor to `params`, `signature` and `launch` (its `TensorDescriptor` expression over the
    runtime argument `a<i>`) and names it in `w.descriptors`, which `emit_descriptors` skips.
    Returns, per descriptor, (its position in `launch`, the argument's, `lambda t: ...` making it
    from that array), for launchers that make each array's descriptor once (descriptor_args.py)."""
    position = {p.id: i for i, p in enumerate(fn.params)}
    made = []
    for desc in w.plan.descriptors:
        arr, i, dtype = w.arrays[desc.array.id], position[desc.array.id], desc.array.type.dtype
        w.descriptors[desc] = name = w.fresh(f"{arr.pointer}_desc")
        params.append(name)
        signature[name] = f"tensordesc<{SIGNATURE_TYPES[dtype]}[{', '.join(map(str, desc.block))}]>"
        made.append((len(launch), i, f"lambda t: {_host_descriptor('t', arr, desc)}"))
        launch.append(_host_descriptor(f"a{i}", arr, desc))
    return tuple(made)


def _host_descriptor(a: str, arr: ArrayParam, desc: Descriptor) -> str:
    """The `TensorDescriptor` expression of `desc` over the array named `a` (`arr`: its kernel
    names, whose strides say which are 1)."""
    base = f"{a}.view(torch.uint8)" if desc.array.type.dtype is D.float8_e8m0fnu else a
    shape = ", ".join(f"{a}.shape[{k}]" for k in range(len(arr.shapes)))
    strides = ", ".join(f"{a}.stride({k})" if s else "1" for k, s in enumerate(arr.strides))
    return f"TensorDescriptor({base}, [{shape}], [{strides}], {list(desc.block)}, {desc.padding!r})"


def emit_descriptors(w: KernelWriter) -> None:
    """Make the plan's tensor descriptors, once each, at the top of the kernel (those not taken
    as parameters: `descriptor_params`)."""
    for desc in w.plan.descriptors:
        if desc in w.descriptors:
            continue
        arr = w.arrays[desc.array.id]
        w.descriptors[desc] = name = w.fresh(f"{arr.pointer}_desc")
        w.loc = desc.loc
        strides = ", ".join(s or "1" for s in arr.strides)
        w.emit(f"{name} = tl.make_tensor_descriptor({arr.pointer}, shape=[{', '.join(arr.shapes)}], "
               f"strides=[{strides}], block_shape={list(desc.block)}, padding_option={desc.padding!r})")
    w.loc = None


def emit_pointer_tiles(w: KernelWriter, loop: ops.For) -> list[str]:
    """Make the pointer tiles that the plan gives loads in `loop`'s body, here (before the loop)
    at the first iteration's addresses; returns the statements that advance them by step tiles
    at the end of each iteration."""
    iv = loop.body.args[0]
    advances = []
    for op in w.plan.pointer_tiles.get(loop, ()):
        arr = w.arrays[op.array.id]
        first, lanes, advance = [arr.pointer], [], []
        for k, axis in enumerate(op.order):
            stride = arr.strides[axis]
            start = _scaled(w, arr, loop.lower if op.index[k] is iv else op.index[k], op.shape[k])
            if start != "0":
                first.append(_term(start, stride))
            lanes.append(_term(broadcast_index(f"tl.arange(0, {op.shape[k]})", k, len(op.shape)), stride))
            if op.index[k] is iv:
                advance.append(_term(_scaled(w, arr, loop.step, op.shape[k]), stride))
        name = w.fresh(f"{arr.pointer}_ptrs")
        outer, w.loc = w.loc, op.loc
        w.emit(f"{name} = {' + '.join(first)} + ({' + '.join(lanes)})")
        w.loc = outer
        w.pointer_tiles[op] = name
        advances.append(f"{name} += {' + '.join(advance)}")
    return advances


# ---- tile load / store ----------------------------------------------------------------------

def _tile_address(w: KernelWriter, arr: ArrayParam, op: ops.Load | ops.Store,
                  shape: tuple[int, ...]) -> tuple[str, str | None]:
    """Emit the tile's address; return (pointer expression, mask expression or None).

    The address is a scalar base (the tile's first element) plus lane offsets that depend only
    on the strides, which Triton hoists out of loops; a load the plan gave a loop-carried
    pointer tile uses that instead. Each checked axis (`_tile_start`) gets a mask term: per
    lane along the plan's `masked_axes`, and one uniform `tile inside` predicate along the
    axes the plan elided, where tiles never straddle the end (one scalar test, so accesses
    keep their full vector width) but a tile index may still point outside the array. Loads
    walking a carried pointer tile are not checked along elided axes: the loop's bounds
    choose those tiles, and cuTile leaves wholly outside tiles undefined."""
    masked = w.plan.masked_axes[op]
    if not shape:  # a single element: scalar address, no lanes to mask
        terms = [arr.pointer]
        conds = []
        for axis, v in enumerate(op.index):
            i = _index(w, arr, v)
            terms.append(_term(i, arr.strides[axis]))
            if axis in masked:
                conds.append(f"({i} < {arr.shapes[axis]})" if _known_nonneg(w, v) else
                             f"({i} >= 0) & ({i} < {arr.shapes[axis]})")
        return " + ".join(terms), " & ".join(conds) or None
    pointers = w.pointer_tiles.get(op)
    base, lanes, conds = [arr.pointer], [], []
    for k, axis in enumerate(op.order):
        lane = broadcast_index(f"tl.arange(0, {shape[k]})", k, len(shape))
        lanes.append(_term(lane, arr.strides[axis]))
        checked = op.check_bounds and (axis in masked or pointers is None)
        if pointers is not None and not checked:
            continue
        start, inside = _tile_start(w, arr, op.index[k], shape[k], axis, checked, divides=axis not in masked)
        base.append(_term(start, arr.strides[axis]))
        if axis in masked:
            conds.append(f"({lane} < {arr.shapes[axis]} - {start})")
        elif checked:
            conds.append(inside)
    mask = " & ".join(conds) or None
    if pointers is not None:
        return pointers, mask
    name = w.fresh(f"{arr.pointer}_base")
    w.emit(f"{name} = {' + '.join(base)}")
    return f"{name} + ({' + '.join(lanes)})", mask


def _literal_int(w: KernelWriter, v: Value) -> int | None:
    """The value of integer `v` when the writer holds it as a bare literal, else None."""
    return int(w.expr(v).strip("()")) if w.is_literal(v) else None


def _known_nonneg(w: KernelWriter, v: Value) -> bool:
    """`v` is a literal >= 0 (only literals so far: `LoweringPlan.nonneg`, which no longer
    assumes that arithmetic never overflows, could drop more of these tests)."""
    c = _literal_int(w, v)
    return c is not None and c >= 0


def _tile_start(w: KernelWriter, arr: ArrayParam, v: Value, n: int, axis: int, checked: bool,
                divides: bool = False) -> tuple[str, str]:
    """Emit the first array position of tile `v` (extent `n`) along `axis`; return its name
    and the scalar condition that selected it ("" when not `checked`): exactly `tile v lies in
    the array` where `divides` (the plan knows that `n` divides the axis size) or `v` is a
    literal, the uniform predicate of an elided axis.

    A tile index far outside the array must never wrap into it: `v * n` overflows int32 for
    an index of 2**30 and a tile of 4 (wrapping to 0). A checked start is therefore `v * n`
    only for indices from 0 to size // n (then at most the size: no overflow) and the axis
    size otherwise (every lane out of bounds, so `lane < size - start` masks them all, whatever
    the index was); negative indices lie wholly outside. The test and the select are scalar; the
    per-lane mask keeps its form, and Triton's alignment analysis still sees the start as a
    multiple of gcd(n, 16) where the size is a multiple of 16, so accesses keep their vector
    width."""
    size = arr.shapes[axis]
    start = w.fresh(f"{arr.pointer}_start{axis}")
    c = _literal_int(w, v)
    if c is not None:  # folded: a Python int never wraps
        if c < 0 and checked:
            w.emit(f"{start} = {size}")
            return start, f"({size} < 0)"
        w.emit(f"{start} = {c * n}")
        return start, f"({c * n} < {size})" if checked else ""
    i = _index(w, arr, v)
    if not checked:
        w.emit(f"{start} = {i} * {n}")
        return start, ""
    inside = w.fresh(f"{arr.pointer}_inside{axis}")
    # exact where `n` divides the size (elided masks rely on it); elsewhere tile size // n may
    # start at the end, which the per-lane mask (or the hardware) then covers whole
    bound = f"({i} < {size})" if n == 1 else f"({i} < {size} // {n})" if divides else f"({i} <= {size} // {n})"
    w.emit(f"{inside} = ({i} >= 0) & {bound}")
    w.emit(f"{start} = tl.where({inside}, {i}{'' if n == 1 else f' * {n}'}, {size})")
    return start, inside


def _scaled(w: KernelWriter, arr: ArrayParam, v: Value, n: int) -> str:
    """`v * n` in the array's offset type, folded when `v` is a literal."""
    c = _literal_int(w, v)
    return f"{_index(w, arr, v)} * {n}" if c is None else str(c * n)


def _index(w: KernelWriter, arr: ArrayParam, v: Value) -> str:
    """A tile index operand in the array's offset type."""
    if arr.index64 and v.tile.dtype is not D.int64:
        return f"tl.cast({w.expr(v)}, tl.int64)"
    return w.expr(v)


def _descriptor_offsets(w: KernelWriter, arr: ArrayParam, op: ops.Load | ops.Store,
                        shape: tuple[int, ...]) -> str:
    """The descriptor coordinates of the tile (int32 in the hardware): `index * extent` for
    tiles overlapping the array, else the axis size (wholly outside: the hardware pads a load
    and drops a store), so a far index never wraps into the array (`_tile_start`)."""
    offs = [""] * len(op.order)
    for k, axis in enumerate(op.order):
        start, _ = _tile_start(w, arr, op.index[k], shape[k], axis, True)
        wide = op.index[k].tile.dtype is D.int64 and not w.is_literal(op.index[k])
        offs[axis] = f"{start}.to(tl.int32)" if wide else start  # in [0, size]: fits (never index64)
    return "[" + ", ".join(offs) + "]"


def _plain_order(w: KernelWriter, op: ops.Load | ops.Store, what: str) -> None:
    """Refuse the memory orders Triton's tl.load/tl.store cannot express (ACQUIRE, RELEASE)."""
    if op.memory_order not in (MemoryOrder.WEAK, MemoryOrder.RELAXED):
        raise w.unsupported(f"memory_order={op.memory_order.name} on {what}")


def _permuted(name: str, shape: tuple[int, ...], order: tuple[int, ...]) -> str:
    """`name` (a block in array axis order) permuted into the tile's order (`shape`: the tile's).
    Unit dims are dropped around the permutation: Triton keeps a 2-D transpose of a block in
    shared memory as a view, but copies a 4-D permute through registers (cuTile's attention sample
    loads K as a (1, 1, d, n) tile in transposed order: `benchmarks/attention_probe.py`)."""
    kept = [k for k, extent in enumerate(shape) if extent != 1]
    if len(kept) == len(shape):
        return f"tl.permute({name}, {list(order)})"
    if len(kept) < 2:  # at most one dim is not 1: the elements keep their order
        return f"tl.reshape({name}, {list(shape)})"
    by_array_axis = sorted(order[k] for k in kept)  # the block's non-unit dims, in array order
    block = [shape[order.index(a)] for a in by_array_axis]
    perm = [by_array_axis.index(order[k]) for k in kept]
    return f"tl.reshape(tl.permute(tl.reshape({name}, {block}), {perm}), {list(shape)})"


@rule(ops.Load)
def _load(w: KernelWriter, op: ops.Load) -> None:
    _plain_order(w, op, "load")
    arr = w.arrays[op.array.id]
    result = op.result
    desc = w.plan.descriptor_of.get(op)
    if desc is not None:
        name = w.define(result, f"{arr.pointer}_tile")
        w.emit(f"{name} = {w.descriptors[desc]}.load({_descriptor_offsets(w, arr, op, op.shape)})")
        if op.order != tuple(range(len(op.order))):
            w.emit(f"{name} = {_permuted(name, op.shape, op.order)}")
        return
    shape = tile_shape(op)
    ptr, mask = _tile_address(w, arr, op, shape)
    args = [ptr]
    if mask is not None:
        args.append(f"mask={mask}")
        other = _padding_value(w, op.padding, op.array.type.dtype)
        if other is not None:
            args.append(f"other={other}")
    if op.memory_order is MemoryOrder.RELAXED:
        args.append("volatile=True")
    text = f"tl.load({', '.join(args)})"
    if shape_of(result) != shape:
        text = f"tl.reshape({text}, {list(shape_of(result))})"
    w.assign(result, text, f"{arr.pointer}_tile")


@rule(ops.Store)
def _store(w: KernelWriter, op: ops.Store) -> None:
    _plain_order(w, op, "store")
    dtype = op.tile.tile.dtype
    if op.memory_order is MemoryOrder.RELAXED and dtype.bitwidth not in (32, 64):
        raise w.unsupported(f"memory_order=RELAXED on a store of {dtype.name} (Triton stores atomically "
                            f"only 32- and 64-bit elements)")
    arr = w.arrays[op.array.id]
    desc = w.plan.descriptor_of.get(op)
    if desc is not None:
        offsets = _descriptor_offsets(w, arr, op, shape_of(op.tile))
        w.emit(f"{w.descriptors[desc]}.store({offsets}, {w.tensor(op.tile)})")
        return
    ptr, mask = _tile_address(w, arr, op, tile_shape(op))
    if op.memory_order is MemoryOrder.RELAXED:  # a relaxed atomic write of every lane
        (value,), mask = workarounds.atomic_operands(w, [w.tensor(op.tile)], mask)
        w.emit(_xchg_bits(ptr, value, dtype, mask, _atomic_kw(w, MemoryOrder.RELAXED, op.memory_scope)))
        return
    mask_arg = "" if mask is None else f", mask={mask}"
    w.emit(f"tl.store({ptr}, {w.tensor(op.tile)}{mask_arg})")


# ---- gather / scatter / atomics -------------------------------------------------------------

def _element_address(w: KernelWriter, op: ops.Gather | ops.Scatter | ops.AtomicRMW | ops.AtomicCAS
                     ) -> tuple[ArrayParam, str, str | None]:
    """The array, the pointers to array[index...] and the mask of lanes to touch (in bounds,
    when checked, and `op.mask`).

    Negative indices are out of bounds. An unsigned index is first widened to a signed type
    that holds it, and any index is narrowed to the offset type only after its bounds check,
    so an out-of-range index can never wrap into range."""
    arr = w.arrays[op.array.id]
    terms, conds = [arr.pointer], []
    for axis, v in enumerate(op.index):
        name, dt = w.expr(v), v.tile.dtype
        if op.check_bounds and not dt.signed:
            dt = D.int64 if dt.bitwidth >= 32 else D.int32
            name = w.fresh(f"{arr.pointer}_i{axis}")
            w.emit(f"{name} = tl.cast({w.expr(v)}, {tl_dtype(dt)})")
        if op.check_bounds:
            conds.append(f"({name} >= 0) & ({name} < {arr.shapes[axis]})")
        fits = dt is (D.int64 if arr.index64 else D.int32) or (dt.signed and dt.bitwidth < 32)
        offset = name if fits else f"tl.cast({name}, {arr.index_dtype})"
        terms.append(_term(offset, arr.strides[axis]))
    if op.mask is not None:
        conds.append(w.tensor(op.mask))
    if not conds:
        return arr, " + ".join(terms), None
    mask_name = w.fresh(f"{arr.pointer}_mask")
    w.emit(f"{mask_name} = {' & '.join(conds)}")
    return arr, " + ".join(terms), mask_name


@rule(ops.Gather)
def _gather(w: KernelWriter, op: ops.Gather) -> None:
    arr, ptr, m = _element_address(w, op)
    text = f"tl.load({ptr})" if m is None else f"tl.load({ptr}, mask={m}, other={w.expr(op.padding)})"
    w.assign(op.result, text, f"{arr.pointer}_items")


@rule(ops.Scatter)
def _scatter(w: KernelWriter, op: ops.Scatter) -> None:
    _, ptr, m = _element_address(w, op)
    mask_arg = "" if m is None else f", mask={m}"
    w.emit(f"tl.store({ptr}, {w.tensor(op.value)}{mask_arg})")


_SEM = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire",
        MemoryOrder.RELEASE: "release", MemoryOrder.ACQ_REL: "acq_rel"}
_SCOPE = {MemoryScope.BLOCK: "cta", MemoryScope.DEVICE: "gpu", MemoryScope.SYS: "sys"}
_RMW = covers(AtomicFn, {
    AtomicFn.XCHG: "atomic_xchg", AtomicFn.ADD: "atomic_add", AtomicFn.MAX: "atomic_max",
    AtomicFn.MIN: "atomic_min", AtomicFn.AND: "atomic_and", AtomicFn.OR: "atomic_or",
    AtomicFn.XOR: "atomic_xor"})


def _atomic_kw(w: KernelWriter, order: MemoryOrder, scope: MemoryScope) -> str:
    """The `sem=..., scope=...` arguments of a Triton atomic."""
    sem, where = _SEM.get(order), _SCOPE.get(scope)
    if sem is None or where is None:
        raise w.unsupported(f"atomic memory order {order} / scope {scope}")
    return f"sem={sem!r}, scope={where!r}"


def _xchg_bits(ptr: str, value: str, dtype: DType, mask: str | None, kw: str) -> str:
    """`tl.atomic_xchg` of `value` (of `dtype`) as same-width integers; the old bits."""
    bits = {32: "tl.int32", 64: "tl.int64", 16: "tl.int16"}[dtype.bitwidth]
    return (f"tl.atomic_xchg(tl.cast({ptr}, tl.pointer_type({bits})), "
            f"tl.cast({value}, {bits}, bitcast=True){'' if mask is None else f', mask={mask}'}, {kw})")


@rule(ops.AtomicRMW)
def _atomic_rmw(w: KernelWriter, op: ops.AtomicRMW) -> None:
    kw = _atomic_kw(w, op.memory_order, op.memory_scope)
    arr, ptr, m = _element_address(w, op)
    (value,), m = workarounds.atomic_operands(w, [w.tensor(op.value)], m)
    dtype = op.value.tile.dtype
    if op.fn is AtomicFn.XCHG and workarounds.xchg_as_bits(w, dtype):
        old = _xchg_bits(ptr, value, dtype, m, kw)
        w.assign(op.result, f"tl.cast({old}, {tl_dtype(dtype)}, bitcast=True)", f"{arr.pointer}_old")
        return
    mask_arg = "" if m is None else f", mask={m}"
    w.assign(op.result, f"tl.{_RMW[op.fn]}({ptr}, {value}{mask_arg}, {kw})", f"{arr.pointer}_old")


@rule(ops.AtomicCAS)
def _atomic_cas(w: KernelWriter, op: ops.AtomicCAS) -> None:
    kw = _atomic_kw(w, op.memory_order, op.memory_scope)
    arr, ptr, m = _element_address(w, op)
    (expected, desired), m = workarounds.atomic_operands(w, [w.tensor(op.expected), w.tensor(op.desired)], m)
    if m is None:
        w.assign(op.result, f"tl.atomic_cas({ptr}, {expected}, {desired}, {kw})", f"{arr.pointer}_old")
        return
    # tl.atomic_cas has no mask: masked-off lanes compare-and-swap element 0 with
    # expected -> expected, which never changes memory, and report `expected`. An empty
    # array has no element 0 (its pointer may be null), and no lane can be on, so then
    # nothing runs.
    old = w.define(op.result, f"{arr.pointer}_old")
    cas = (f"{old} = tl.atomic_cas(tl.where({m}, {ptr}, {arr.pointer}), {expected}, "
           f"tl.where({m}, {desired}, {expected}), {kw})")
    sizes = [s for s in arr.shapes if not (s.isdigit() and int(s) > 0)]
    if sizes:
        w.emit(f"{old} = {expected}")
        w.emit(f"if {' & '.join(f'({s} > 0)' for s in sizes)}:")
        with w.indented():
            w.emit(cas)
    else:
        w.emit(cas)
    w.emit(f"{old} = tl.where({m}, {old}, {expected})")


# ---- array views -----------------------------------------------------------------------------

@rule(ops.ListGet)
def _list_get(w: KernelWriter, op: ops.ListGet) -> None:
    """Element `index` of a list argument: its address, shape and strides read from the tables
    (no facts: pointer accesses masked on every dim)."""
    lst, index = w.lists[op.list.id], w.expr(op.index)
    pointer = w.fresh(f"{op.result.hint or 'item'}")
    w.emit(f"{pointer} = tl.load({lst.ptrs} + {index}).to(tl.pointer_type({tl_dtype(op.result.type.dtype)}))")
    dims = []
    for table, part in ((lst.shapes, "shape"), (lst.strides, "stride")):
        names = [w.fresh(f"{pointer}_{part}{k}") for k in range(lst.ndim)]
        for k, name in enumerate(names):
            w.emit(f"{name} = tl.load({table} + {index} * {lst.ndim} + {k})")
        dims.append(names)
    w.arrays[op.result.id] = ArrayParam(pointer, dims[0], list(dims[1]), lst.index64)


@rule(ops.ArraySlice)
def _array_slice(w: KernelWriter, op: ops.ArraySlice) -> None:
    """A view: the base pointer moves by start x stride along the axis, whose size becomes
    stop - start; strides stay (the view's facts: `plan._array_facts`)."""
    arr, axis = w.arrays[op.array.id], op.axis
    pointer = w.fresh(f"{arr.pointer}_view")
    w.emit(f"{pointer} = {arr.pointer} + {_term(w.expr(op.start), arr.strides[axis])}")
    size = w.fresh(f"{pointer}_shape{axis}")
    w.emit(f"{size} = {w.expr(op.stop)} - {w.expr(op.start)}")
    shapes = [size if k == axis else s for k, s in enumerate(arr.shapes)]
    w.arrays[op.result.id] = ArrayParam(pointer, shapes, list(arr.strides), arr.index64)


# ---- array queries --------------------------------------------------------------------------

@rule(ops.ArrayShape, ops.ArrayStride)
def _array_query(w: KernelWriter, op: ops.ArrayShape | ops.ArrayStride) -> None:
    arr = w.arrays[op.array.id]
    dtype = op.result.tile.dtype
    name = (arr.shapes if isinstance(op, ops.ArrayShape) else arr.strides)[op.axis]
    if name is None:
        text, literal = w.const(1, dtype)
        w.alias(op.result, text, literal)
    elif (dtype is D.int64) != arr.index64:
        w.assign(op.result, f"tl.cast({name}, {tl_dtype(dtype)})", "n")
    else:
        w.alias(op.result, name)
