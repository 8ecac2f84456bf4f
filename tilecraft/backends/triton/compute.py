"""Lowering rules for values, casts, shapes, elementwise math, reductions, scans and MMA.

Dtype policy: bfloat16 arithmetic runs in float32 (the interpreter keeps bf16 as raw bits; the
GPU widens anyway); float16 runs natively except for division and transcendental math, which
run in float32 and round back.

Rounding options of Binary/Unary: a directed mode (RZ, RM, RP) calls the correctly rounded
helper of `rounding.py` on the operands in their own dtype; `flush_to_zero` (float32) flushes
subnormal operands and the result through its FLUSH_HELPER. RN, FULL, APPROX and no mode take
the ordinary path (RN is what it computes; FULL/APPROX permit no less precision than it has),
but for float32 APPROX division: a times the rounded reciprocal of b (`ir.kinds.divides_by_reciprocal`).
"""

from __future__ import annotations

from typing import Callable

from ...ir import BinaryFn, Block, CompareFn, Op, ReduceFn, ScanFn, UnaryFn, Value, ops
from ...ir.kinds import NON_NEAREST, GridDependency, divides_by_reciprocal
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import RoundingMode
from . import interpret_workarounds as workarounds
from . import helpers, rounding
from .emitter import KernelWriter, broadcast_index, covers, rule, shape_of
from .heuristics import dot_mma
from .spelling import is_float, tl_dtype


def _shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---- dtype policy ---------------------------------------------------------------------------

def _arith_dtype(dtype: DType) -> DType:
    return D.float32 if dtype is D.bfloat16 else dtype


def _math_dtype(dtype: DType) -> DType:
    return D.float32 if dtype in (D.float16, D.bfloat16) else dtype


def _as(w: KernelWriter, v: Value, dtype: DType) -> str:
    """Operand `v` converted to `dtype` (bare literals stay bare: Triton types them weakly)."""
    if v.tile.dtype is dtype or tl_dtype(v.tile.dtype) == tl_dtype(dtype):
        return w.expr(v)
    return w.cast(w.tensor(v), v.tile.dtype, dtype)


def _result(w: KernelWriter, op: Op, text: str, computed: DType, hint: str = "t") -> None:
    """Assign `text` (of dtype `computed`) to the op's result, cast to its dtype."""
    want = op.result.tile.dtype
    if tl_dtype(computed) != tl_dtype(want):
        text = w.cast(text, computed, want)
    w.assign(op.result, text, hint)


# ---- values ---------------------------------------------------------------------------------

@rule(ops.Const)
def _const(w: KernelWriter, op: ops.Const) -> None:
    text, literal = w.const(op.value, op.result.tile.dtype)
    if literal:
        w.alias(op.result, text, literal=True)
    else:
        w.assign(op.result, text, "c")


@rule(ops.Bid, ops.NumBlocks)
def _grid(w: KernelWriter, op: ops.Bid | ops.NumBlocks) -> None:
    axis = op.axis
    bid = isinstance(op, ops.Bid)
    hint = ("bid" if bid else "nblocks") + "xyz"[axis]
    loop = w.grid_loop
    if loop is None:
        fn = "program_id" if bid else "num_programs"
        w.assign(op.result, f"tl.{fn}({axis})", hint)
    elif not bid:
        w.alias(op.result, loop.sizes[axis])
    else:  # the block id the grid loop is running, unravelled x fastest
        x, y, _ = loop.sizes
        text = {0: f"{loop.tile} % {x}", 1: f"({loop.tile} // {x}) % {y}", 2: f"{loop.tile} // ({x} * {y})"}
        w.assign(op.result, text[axis], hint)


@rule(ops.Arange)
def _arange(w: KernelWriter, op: ops.Arange) -> None:
    w.assign(op.result, f"tl.arange(0, {op.size})", "idx")


@rule(ops.Cast)
def _cast(w: KernelWriter, op: ops.Cast) -> None:
    """Conversions: `tl.cast`, but a float rounded in a mode other than RN goes through the
    correctly rounded cast helper of `rounding.py` where it is inexact (into float16,
    bfloat16, float32; 8-bit floats only round to nearest), and tfloat32 through `_cast_tf32`."""
    x = op.x
    src, dst = x.tile.dtype, op.dtype
    if dst is D.float8_e8m0fnu and src is not dst:
        raise w.unsupported("casts to float8_e8m0fnu")
    if src is D.float8_e8m0fnu and dst is not src:
        _cast_from_e8m0(w, op)
        return
    if dst is D.tfloat32 and src is not D.tfloat32:
        _cast_tf32(w, op)
        return
    if tl_dtype(src) == tl_dtype(dst):  # e.g. tfloat32 -> float32: same data
        w.alias(op.result, w.expr(x), w.is_literal(x))
        return
    if dst is D.bool_:  # 8-bit floats compare in float32 (Triton cannot compare them to 0)
        wide = D.float32 if src in D.FLOAT8_VALUE_DTYPES else _arith_dtype(src)
        w.assign(op.result, f"{_as(w, x, wide)} != 0", "t")
        return
    mode = op.rounding if op.rounding in rounding.CAST_MODES else None
    floats = all(is_float(d) or d.is_restricted for d in (src, dst))
    if mode is not None and not (floats and dst.bitwidth > src.bitwidth):  # a wider float is exact
        if not floats or dst not in (D.float16, D.bfloat16, D.float32):
            raise w.unsupported(f"rounding mode {mode.name} for a cast from {src.name} to {dst.name}")
        helper = w.need_helper(rounding.cast_call(dst))
        w.assign(op.result, f"{helper}({w.tensor(x)}, {rounding.CAST_MODES[mode]})", "t")
        return
    w.assign(op.result, w.cast(w.tensor(x), src, dst), "t")


def _cast_from_e8m0(w: KernelWriter, op: ops.Cast) -> None:
    """float8_e8m0fnu (raw uint8 bits e: 2**(e - 127), e = 255 NaN) to another dtype: decoded to
    float32, which holds every value exactly (e = 0 is the float32 subnormal 2**-127; the others
    are float32's exponent field, e << 23), then converted from float32 as any float32 is."""
    e = w.fresh("e8m0")
    w.emit(f"{e} = tl.cast({w.tensor(op.x)}, tl.int32)")
    f32 = w.fresh("t")
    w.emit(f"{f32} = tl.where({e} == 255, float('nan'), tl.where({e} == 0, {2.0 ** -127!r}, "
           f"tl.cast({e} << 23, tl.float32, bitcast=True)))")
    dst, mode = op.dtype, op.rounding if op.rounding in rounding.CAST_MODES else None
    if dst in (D.float32, D.tfloat32):  # every value is exact in tfloat32 too
        w.alias(op.result, f32)
    elif dst is D.bool_:
        w.assign(op.result, f"{f32} != 0", "t")
    elif mode is not None and dst in (D.float16, D.bfloat16):
        w.assign(op.result, f"{w.need_helper(rounding.cast_call(dst))}({f32}, {rounding.CAST_MODES[mode]})", "t")
    else:
        w.assign(op.result, w.cast(f32, D.float32, dst), "t")


_TF32_MODE = {None: 0, RoundingMode.RN: 0, **rounding.CAST_MODES}
"""The MODE argument of `_tc_round_tf32` for each rounding mode of a cast."""


def _cast_tf32(w: KernelWriter, op: ops.Cast) -> None:
    """A float to tfloat32 (fp32 data): to float32 (exact, or rounded to odd from float64, so
    the one rounding below is correct), then rounded on the bits by `_tc_round_tf32`, as the
    interpreter does. Every MMA operand is rounded here, so tl.dot's tf32 mode, which drops the
    low 13 bits (truncation on the tensor cores), finds them zero; 16-bit and 8-bit floats are
    exact in tf32 and only widened. On sm_90+ a round to nearest even that only tensor-core
    MMAs read is one `cvt.rn.tf32.f32` instead (`_tc_round_tf32_mma`): the same rounded
    values, at a seventh of the instructions (in a tf32 matmul's K loop, rounding both tiles
    with the bit sequence issued more instructions than the MMAs took cycles). Other modes keep
    the bit helper everywhere, even toward zero, which the tensor cores' truncation would give
    for free but for a NaN whose payload lies only in the low 13 bits (the MMA would read an
    infinity). The staged kernels of `passes.operand_staging` read copies rounded already:
    they reinterpret the bits (a Bitcast), which costs nothing."""
    x, src = op.x, op.x.tile.dtype
    if not is_float(src) and not src.is_restricted:
        raise w.unsupported(f"casts from {src.name} to tfloat32")
    if src is D.float64:
        value = f"tl.cast({w.need_helper('_tcr_to_odd32')}({w.tensor(x)}), tl.float32, bitcast=True)"
    else:
        value = w.tensor(x) if src is D.float32 else w.cast(w.tensor(x), src, D.float32)
    if src.bitwidth >= 32 and _TF32_MODE[op.rounding] == 0 and _only_tensor_core_operand(w, op.result):
        value = f"{w.need_helper('_tc_round_tf32_mma')}({value})"
    elif src.bitwidth >= 32:
        value = f"{w.need_helper('_tc_round_tf32')}({value}, {_TF32_MODE[op.rounding]})"
    w.assign(op.result, value, "t")


def _only_tensor_core_operand(w: KernelWriter, value: Value) -> bool:
    """Whether `value` is read only as operand A or B of MMAs that run as a tl.dot, compiled
    for a GPU with `cvt.rn.tf32.f32` (never under the interpreter)."""
    users = w.plan.users.get(value.id, ())
    return (w.target.cvt_tf32 and not w.target.interpret and bool(users)
            and all(isinstance(u, ops.Mma) and value is not u.acc and dot_mma(u) for u in users))


@rule(ops.Bitcast)
def _bitcast(w: KernelWriter, op: ops.Bitcast) -> None:
    w.assign(op.result, f"tl.cast({w.tensor(op.x)}, {tl_dtype(op.dtype)}, bitcast=True)", "t")


_UINT = {16: D.uint16, 32: D.uint32, 64: D.uint64}


def _byte_shifts(bits: DType) -> str:
    """The shift of each byte of a `bits`-wide element, as a (1, bytes) tile of that dtype."""
    return f"(tl.arange(0, {bits.bitwidth // 8}) * 8).to({tl_dtype(bits)})[None, :]"


@rule(ops.Pack)
def _pack(w: KernelWriter, op: ops.Pack) -> None:
    # Each element as an unsigned int of its width, shifted right by 0, 8, 16, ... bits: an
    # (n, bytes) tile of its bytes, least significant first (little-endian), flattened.
    x = op.x
    bits = _UINT[x.tile.dtype.bitwidth]
    raw = f"tl.cast({w.tensor(x)}, {tl_dtype(bits)}, bitcast=True)[:, None]"
    split = f"(({raw} >> {_byte_shifts(bits)}) & 0xFF).to(tl.uint8)"
    w.assign(op.result, f"tl.reshape({split}, {_shape(shape_of(op.result))})", "packed")


@rule(ops.Unpack)
def _unpack(w: KernelWriter, op: ops.Unpack) -> None:
    # The bytes as an (n, bytes) tile, each widened and shifted to its place, summed per row in
    # the element's width (the bytes do not overlap, so the sum is exact), then read as the dtype.
    bits = _UINT[op.dtype.bitwidth]
    n = shape_of(op.result)[0]
    rows = f"tl.reshape({w.tensor(op.x)}, {_shape((n, bits.bitwidth // 8))}).to({tl_dtype(bits)})"
    word = f"tl.reduce({rows} << {_byte_shifts(bits)}, 1, {w.need_helper('_tc_add')})"
    w.assign(op.result, f"tl.cast({word}, {tl_dtype(op.dtype)}, bitcast=True)", "unpacked")


# ---- shapes ---------------------------------------------------------------------------------

def _splat_literal(w: KernelWriter, op: ops.Broadcast | ops.Reshape) -> bool:
    """A constant broadcast or reshaped into a tile becomes `tl.full`."""
    x = op.x
    if not w.is_literal(x):
        return False
    w.assign(op.result, f"tl.full({_shape(shape_of(op.result))}, {w.expr(x)}, "
                        f"{tl_dtype(op.result.tile.dtype)})", "t")
    return True


@rule(ops.Broadcast)
def _broadcast(w: KernelWriter, op: ops.Broadcast) -> None:
    x = op.x
    if shape_of(x) == shape_of(op.result):
        w.alias(op.result, w.expr(x), w.is_literal(x))
    elif not _splat_literal(w, op):
        w.assign(op.result, f"tl.broadcast_to({w.expr(x)}, {_shape(shape_of(op.result))})", "t")


@rule(ops.Reshape)
def _reshape(w: KernelWriter, op: ops.Reshape) -> None:
    x = op.x
    src, dst = shape_of(x), shape_of(op.result)
    if src == dst:
        w.alias(op.result, w.expr(x), w.is_literal(x))
    elif _splat_literal(w, op):
        return
    elif src and w.index_expands and (index := _unit_dims_added(src, dst)) is not None:
        w.assign(op.result, f"{w.expr(x)}[{index}]", "t")
    else:
        fn = "broadcast_to" if not src else "reshape"  # a scalar is splat, not reshaped
        w.assign(op.result, f"tl.{fn}({w.expr(x)}, {_shape(dst)})", "t")


def _unit_dims_added(src: tuple[int, ...], dst: tuple[int, ...]) -> str | None:
    """The subscript (`:, None`) that makes `dst` of `src` by adding unit dims, matching src's
    dims first from the left; None where `dst` is not so made. Triton keeps the layout a
    reduction left (`x[:, None]` of a row sum is the parent layout again), where `tl.reshape`
    may pick another: the cuTile LayerNorm sample's 1-D mean, unrolled (passes/resident_rows.py),
    compiled in 50 s into code holding every row tile in every thread (28.8 ms a launch on the
    H200 at bf16 8192x4096, against 0.05 ms in order: benchmarks/results/side-by-side-h200-2026-12-02-g.json)."""
    parts, k = [], 0
    for d in dst:
        if k < len(src) and d == src[k]:
            parts.append(":")
            k += 1
        elif d == 1:
            parts.append("None")
        else:
            return None
    return ", ".join(parts) if k == len(src) else None


@rule(ops.Permute)
def _permute(w: KernelWriter, op: ops.Permute) -> None:
    x, axes = op.x, list(op.axes)
    if axes == sorted(axes):
        w.alias(op.result, w.expr(x))
    else:
        w.assign(op.result, f"tl.permute({w.expr(x)}, {axes})", "t")


@rule(ops.Cat)
def _cat(w: KernelWriter, op: ops.Cat) -> None:
    # tl.cat may reorder elements; join stacks on a new last axis, which is moved in front of
    # `axis` and merged with it, so all of a comes before all of b.
    a, b = op.lhs, op.rhs
    rank, axis = len(shape_of(a)), op.axis % len(shape_of(a))
    dims = list(range(axis)) + [rank] + list(range(axis, rank))
    joined = f"tl.join({w.expr(a)}, {w.expr(b)})"
    w.assign(op.result, f"tl.reshape(tl.permute({joined}, {dims}), {_shape(shape_of(op.result))})", "t")


@rule(ops.Extract)
def _extract(w: KernelWriter, op: ops.Extract) -> None:
    # View x as (grid0, sub0, grid1, sub1, ...), zero every grid position but `index` and sum
    # the grid axes away. Working on the bits (as unsigned ints) keeps every value exact.
    x, index = op.x, op.index
    full = shape_of(x)
    sub = op.shape or (1,) * len(full)
    if len(sub) != len(full):
        sub = (1,) * len(full)
    dtype = x.tile.dtype
    bits = {8: D.uint8, 16: D.uint16, 32: D.uint32, 64: D.uint64}[dtype.bitwidth]
    stem = op.result.hint or "sub"
    t = w.fresh(stem)
    src = f"tl.cast({w.expr(x)}, tl.uint8)" if dtype is D.bool_ else \
        f"tl.cast({w.expr(x)}, {tl_dtype(bits)}, bitcast=True)"
    split = [d for g, s in zip(full, sub) for d in (g // s, s)]
    w.emit(f"{t} = tl.reshape({src}, {_shape(split)})")
    for k, (g, s) in enumerate(zip(full, sub)):
        if g == s:
            continue
        pick = broadcast_index(f"tl.arange(0, {g // s})", 2 * k, len(split))
        add = w.need_helper("_tc_add")
        w.emit(f"{t} = tl.reduce(tl.where({pick} == {w.expr(index[k])}, {t}, 0), {2 * k}, {add}, keep_dims=True)")
    t = f"tl.reshape({t}, {_shape(shape_of(op.result))})"
    if dtype is D.bool_:
        w.assign(op.result, f"{t} != 0", "sub")
    else:
        w.assign(op.result, f"tl.cast(tl.cast({t}, {tl_dtype(bits)}), {tl_dtype(dtype)}, bitcast=True)", "sub")


@rule(ops.Insert)
def _insert(w: KernelWriter, op: ops.Insert) -> None:
    # View x as (grid0, sub0, grid1, sub1, ...) and value as (1, sub0, 1, sub1, ...); select
    # value where every grid coordinate equals `index` (none does for an index outside the grid).
    x, value, index = op.x, op.value, op.index
    full, sub = shape_of(x), shape_of(value)
    if not full:
        w.alias(op.result, w.expr(value), w.is_literal(value))
        return
    split = [d for g, s in zip(full, sub) for d in (g // s, s)]
    picks = [f"({broadcast_index(f'tl.arange(0, {g // s})', 2 * k, len(split))} == {w.expr(index[k])})"
             for k, (g, s) in enumerate(zip(full, sub))]
    rows = f"tl.reshape({w.tensor(value)}, {_shape(d for s in sub for d in (1, s))})"
    picked = f"tl.where({' & '.join(picks)}, {rows}, tl.reshape({w.tensor(x)}, {_shape(split)}))"
    w.assign(op.result, f"tl.reshape({picked}, {_shape(full)})", op.result.hint or "ins")


# ---- elementwise ----------------------------------------------------------------------------

def _directed(mode: RoundingMode | None) -> RoundingMode | None:
    """`mode` if it needs the correctly rounded helpers (RZ, RM, RP); None for the ordinary path."""
    return mode if mode in NON_NEAREST else None


def _flush(w: KernelWriter, text: str) -> str:
    """`text` (float32) with subnormals flushed to zeros of the same sign."""
    return f"{w.need_helper(rounding.FLUSH_HELPER)}({text})"


def _rounded(w: KernelWriter, op: ops.Unary | ops.Binary, mode: RoundingMode, args: list[str]) -> str:
    """The correctly rounded `op.fn` of `args` (in the op's dtype) in directed `mode`."""
    return f"{w.need_helper(rounding.rounded_call(op.fn, op.result.tile.dtype, mode))}({', '.join(args)})"


def _libdevice(w: KernelWriter, name: str, args: list[str], compute: DType) -> tuple[str, DType]:
    """`libdevice.<name>(*args)` computed in `compute`, or its interpreter stand-in (float64)."""
    stand_in = workarounds.libdevice_stand_in(w, name, args)
    if stand_in is not None:
        return stand_in, D.float64
    return f"{w.libdevice(name)}({', '.join(args)})", compute


def _isnan(w: KernelWriter, op: ops.Unary) -> None:
    v = _as(w, op.x, _arith_dtype(op.x.tile.dtype))
    w.assign(op.result, f"{v} != {v}", "isnan")


def _not(w: KernelWriter, op: ops.Unary) -> None:
    x = w.tensor(op.x)
    w.assign(op.result, workarounds.unsigned_not(x, op.x.tile.dtype) or f"~{x}", "t")


def _neg_abs(w: KernelWriter, op: ops.Unary) -> None:
    dtype = op.x.tile.dtype
    compute = _arith_dtype(dtype)
    v = _as(w, op.x, compute) if compute is not dtype else w.tensor(op.x)
    if op.fn is UnaryFn.ABS:
        text = f"tl.abs({v})"
    else:  # Triton's unary minus is 0 - x, which turns 0.0 into +0.0; * -1 is exact
        text = f"{v} * -1.0" if is_float(compute) else f"-{v}"
    _result(w, op, text, compute)


_MATH = {UnaryFn.EXP: "exp", UnaryFn.EXP2: "exp2", UnaryFn.LOG: "log", UnaryFn.LOG2: "log2",
         UnaryFn.SQRT: "sqrt", UnaryFn.RSQRT: "rsqrt", UnaryFn.SIN: "sin", UnaryFn.COS: "cos",
         UnaryFn.FLOOR: "floor", UnaryFn.CEIL: "ceil", UnaryFn.TAN: "tan", UnaryFn.SINH: "sinh",
         UnaryFn.COSH: "cosh", UnaryFn.TANH: "tanh"}
"""Float math: `tl.<name>`, or `libdevice.<name>` for those in _LIBDEVICE."""
_LIBDEVICE = {UnaryFn.TAN, UnaryFn.SINH, UnaryFn.COSH, UnaryFn.TANH}


def _flushes_itself(w: KernelWriter, fn: UnaryFn, compute: DType) -> bool:
    """Whether float32 `fn` with flush_to_zero is one GPU instruction that flushes subnormal
    operands and results itself: exp2, PTX ex2.approx.ftz.f32 (`helpers.EXP2_FTZ`), needs no
    flush helpers around it (they cost a dozen integer ops an element, in the hot loop of
    attention). Not under Triton's CPU interpreter, which has no PTX."""
    return fn is UnaryFn.EXP2 and compute is D.float32 and not w.target.interpret


def _math(w: KernelWriter, op: ops.Unary) -> None:
    """Float math; float16/bfloat16 compute in float32 (SQRT rounds correctly in float32)."""
    dtype = op.x.tile.dtype
    if not is_float(dtype):
        raise w.unsupported(f"{op.fn.name.lower()} of {dtype.name}")
    mode = _directed(op.rounding)
    if mode is not None:  # SQRT in a directed mode
        v = _flush(w, w.tensor(op.x)) if op.flush_to_zero else w.tensor(op.x)
        text, compute = _rounded(w, op, mode, [v]), dtype
    else:
        compute = _math_dtype(dtype)
        v = _as(w, op.x, compute) if compute is not dtype else w.tensor(op.x)
        if op.flush_to_zero and _flushes_itself(w, op.fn, compute):
            _result(w, op, f"{w.need_helper(helpers.EXP2_FTZ)}({v})", compute)
            return
        if op.flush_to_zero:
            v = _flush(w, v)
        if op.fn is UnaryFn.SQRT:
            text = f"tl.sqrt_rn({v})" if compute is D.float32 else f"tl.sqrt({v})"
        elif op.fn in _LIBDEVICE:
            text, compute = _libdevice(w, _MATH[op.fn], [v], compute)
        else:
            text = f"tl.{_MATH[op.fn]}({v})"
    if op.flush_to_zero:
        text = _flush(w, text)
    _result(w, op, text, compute)


_UNARY = covers(UnaryFn, {UnaryFn.ISNAN: _isnan, UnaryFn.NOT: _not, UnaryFn.NEG: _neg_abs,
                          UnaryFn.ABS: _neg_abs, **{fn: _math for fn in _MATH}})


@rule(ops.Unary)
def _unary(w: KernelWriter, op: ops.Unary) -> None:
    _UNARY[op.fn](w, op)


BinaryText = Callable[[KernelWriter, str, str, DType, bool], tuple[str, DType]]
"""(writer, a, b, compute dtype, both operands non-negative) -> (expression, its dtype)."""


def _infix(symbol: str) -> BinaryText:
    return lambda w, a, b, dtype, nonneg: (f"{a} {symbol} {b}", dtype)


def _truediv(w: KernelWriter, a: str, b: str, dtype: DType, nonneg: bool) -> tuple[str, DType]:
    return (f"tl.math.div_rn({a}, {b})" if dtype is D.float32 else f"{a} / {b}"), dtype


def _floordiv(w: KernelWriter, a: str, b: str, dtype: DType, nonneg: bool) -> tuple[str, DType]:
    if is_float(dtype):  # float16 and bfloat16 floor in `_binary`
        return f"tl.floor({_truediv(w, a, b, dtype, nonneg)[0]})", dtype
    return (f"{w.need_helper('_tc_floordiv_int')}({a}, {b})" if dtype.signed and not nonneg else f"{a} // {b}"), dtype


def _mod(w: KernelWriter, a: str, b: str, dtype: DType, nonneg: bool) -> tuple[str, DType]:
    if is_float(dtype):
        return f"{w.need_helper('_tc_mod_float')}({a}, {b})", dtype
    return (f"{w.need_helper('_tc_mod_int')}({a}, {b})" if dtype.signed and not nonneg else f"{a} % {b}"), dtype


def _nan_ignoring(w: KernelWriter, name: str) -> str:
    """The helper taking the min or max (`name`) of two values, a NaN operand ignored. On the
    GPU, PTX min/max (what tl.minimum/tl.maximum become) already ignore a NaN operand (IEEE
    minNum/maxNum): the plain one, a single instruction, is the same function; Triton's CPU
    interpreter computes them with NumPy, which propagates NaN and returns either of two zeros
    (PTX orders -0.0 below +0.0), so it gets the NaN checks and the order of zeros."""
    return w.need_helper(f"_tc_{name}num" if w.target.interpret else f"_tc_{name}")


def _extreme(name: str, nan_wins: bool) -> BinaryText:
    """min/max: integers plain; floats ignore a NaN operand (helper) or propagate it."""
    def text(w: KernelWriter, a: str, b: str, dtype: DType, nonneg: bool) -> tuple[str, DType]:
        if not is_float(dtype):
            return f"tl.{name}imum({a}, {b})", dtype
        if not nan_wins:
            return f"{_nan_ignoring(w, name)}({a}, {b})", dtype
        stand_in = workarounds.nan_propagating_extreme(w, name, a, b)
        return stand_in or f"tl.{name}imum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)", dtype
    return text


def _libm(name: str) -> BinaryText:
    return lambda w, a, b, dtype, nonneg: _libdevice(w, name, [a, b], dtype)


_BINARY: dict[BinaryFn, BinaryText] = covers(BinaryFn, {
    BinaryFn.ADD: _infix("+"), BinaryFn.SUB: _infix("-"), BinaryFn.MUL: _infix("*"),
    BinaryFn.AND: _infix("&"), BinaryFn.OR: _infix("|"), BinaryFn.XOR: _infix("^"),
    BinaryFn.SHL: _infix("<<"), BinaryFn.SHR: _infix(">>"),
    BinaryFn.TRUEDIV: _truediv, BinaryFn.FLOORDIV: _floordiv, BinaryFn.MOD: _mod,
    BinaryFn.MIN: _extreme("min", False), BinaryFn.MAX: _extreme("max", False),
    BinaryFn.MIN_NAN: _extreme("min", True), BinaryFn.MAX_NAN: _extreme("max", True),
    BinaryFn.POW: _libm("pow"), BinaryFn.ATAN2: _libm("atan2")})
_FLOAT_MATH = {BinaryFn.TRUEDIV, BinaryFn.FLOORDIV, BinaryFn.MOD, BinaryFn.POW, BinaryFn.ATAN2}


def _operands(w: KernelWriter, x: Value, y: Value, compute: DType) -> tuple[str, str]:
    """Both operands in `compute`; two bare literals would be folded by Python (with unbounded
    ints), so the first one is then typed."""
    a = w.tensor(x) if w.is_literal(x) and w.is_literal(y) else _as(w, x, compute)
    return a, _as(w, y, compute)


@rule(ops.Binary)
def _binary(w: KernelWriter, op: ops.Binary) -> None:
    x, y = op.lhs, op.rhs
    dtype = x.tile.dtype
    mode = _directed(op.rounding)
    by_reciprocal = divides_by_reciprocal(op.fn, dtype, op.rounding)
    if mode is not None or op.flush_to_zero or by_reciprocal:  # typed operands in their own dtype
        a, b = w.tensor(x), w.tensor(y)
        if op.flush_to_zero:
            a, b = _flush(w, a), _flush(w, b)
    if mode is not None:
        text, compute = _rounded(w, op, mode, [a, b]), dtype
    elif by_reciprocal:
        reciprocal = _truediv(w, "1.0", b, D.float32, False)[0]
        text, compute = f"{a} * {_flush(w, reciprocal) if op.flush_to_zero else reciprocal}", D.float32
    else:
        compute = _math_dtype(dtype) if is_float(dtype) and op.fn in _FLOAT_MATH else _arith_dtype(dtype)
        if not op.flush_to_zero:
            a, b = _operands(w, x, y, compute)
        signs_agree = x.id in w.plan.nonneg and y.id in w.plan.nonneg  # Python's and C's // and % coincide
        if op.fn is BinaryFn.FLOORDIV and dtype in (D.float16, D.bfloat16):
            # cuTile divides in the dtype, then floors: the float32 quotient rounds to it first
            quotient = w.cast(_truediv(w, a, b, compute, False)[0], compute, dtype)
            text = f"tl.floor({w.cast(quotient, dtype, compute)})"
        else:
            text, compute = _BINARY[op.fn](w, a, b, compute, signs_agree)
    if op.flush_to_zero:
        text = _flush(w, text)
    _result(w, op, text, compute)


@rule(ops.Fma)
def _fma(w: KernelWriter, op: ops.Fma) -> None:
    """tl.fma on the GPU (one rounding; LLVM's own contraction is off: compile.GPU_MATH_OPTIONS);
    under Triton's interpreter, whose tl.fma rounds twice, the sum rounded to odd in float64
    (`_tc_fma_interp`), cast to the dtype (rounding once)."""
    dtype = op.a.tile.dtype
    if w.target.interpret:
        a, b, c = (w.cast(w.tensor(v), dtype, D.float64) for v in (op.a, op.b, op.c))
        compute, call = D.float64, w.need_helper("_tc_fma_interp")
    else:
        a, b, c = (w.tensor(v) for v in (op.a, op.b, op.c))
        compute, call = dtype, "tl.fma"
    a = f"({a}) * -1.0" if op.negate_product else a  # not unary minus: Triton's is 0 - x, which gives -0.0 as +0.0
    c = f"({c}) * -1.0" if op.negate_addend else c
    _result(w, op, f"{call}({a}, {b}, {c})", compute)


_COMPARE = covers(CompareFn, {CompareFn.EQ: "==", CompareFn.NE: "!=", CompareFn.LT: "<", CompareFn.LE: "<=",
                              CompareFn.GT: ">", CompareFn.GE: ">="})


@rule(ops.Compare)
def _compare(w: KernelWriter, op: ops.Compare) -> None:
    a, b = _operands(w, op.lhs, op.rhs, _arith_dtype(op.lhs.tile.dtype))
    w.assign(op.result, f"{a} {_COMPARE[op.fn]} {b}", "cond")


@rule(ops.Where)
def _where(w: KernelWriter, op: ops.Where) -> None:
    w.assign(op.result, f"tl.where({w.expr(op.cond)}, {w.tensor(op.x)}, {w.tensor(op.y)})", "t")


# ---- reductions, scans, mma -----------------------------------------------------------------

def _widened(w: KernelWriter, x: Value, accumulates: bool) -> tuple[str, DType]:
    """Operand of a reduction or scan: bool counts as int32, bf16 runs in fp32, and float16
    sums and products (`accumulates`) accumulate in fp32 and round once, as the interpreter's
    do (min/max are exact in any width)."""
    dtype = x.tile.dtype
    compute = D.int32 if dtype is D.bool_ else D.float32 if accumulates and dtype is D.float16 else _arith_dtype(dtype)
    return _as(w, x, compute), compute


_REDUCE_COMBINE = covers(ReduceFn, {
    ReduceFn.SUM: "_tc_add", ReduceFn.PROD: "_tc_mul", ReduceFn.MAX: "max", ReduceFn.MIN: "min",
    ReduceFn.ARGMAX: "max", ReduceFn.ARGMIN: "min"})
"""Each reduction's combine helper; "max"/"min": the NaN-ignoring one (`_nan_ignoring`)."""
_SCAN_COMBINE = covers(ScanFn, {ScanFn.CUMSUM: "_tc_add", ScanFn.CUMPROD: "_tc_mul"})


@rule(ops.Reduce)
def _reduce(w: KernelWriter, op: ops.Reduce) -> None:
    fn, x = op.fn, op.x
    v, compute = _widened(w, x, fn in (ReduceFn.SUM, ReduceFn.PROD))
    axis, keep = op.axis, op.keepdims
    name = _REDUCE_COMBINE[fn]
    combine = _nan_ignoring(w, name) if name in ("max", "min") else w.need_helper(name)
    if fn not in (ReduceFn.ARGMAX, ReduceFn.ARGMIN):
        _result(w, op, f"tl.reduce({v}, {axis}, {combine}, keep_dims={keep})", compute, fn.value)
        return
    # Two passes, as the interpreter: the extreme ignoring NaN, then the first index holding it
    # (0 where none does: an all-NaN slice). A (value, index) tuple reduction would be one pass,
    # but Triton lets the reshape feeding it reorder the values (not the index) when a reduction
    # is its only user, which is what flattening for axis=None gives.
    n = shape_of(x)[axis]
    if v != w.tensor(x):  # a widening cast, used twice: computed once
        wide = w.fresh("t")
        w.emit(f"{wide} = {v}")
        v = wide
    best = w.fresh("best")
    w.emit(f"{best} = tl.reduce({v}, {axis}, {combine}, keep_dims=True)")
    index = broadcast_index(f"tl.arange(0, {n})", axis, len(shape_of(x)))
    first = w.need_helper("_tc_min")  # of int32 indices
    text = f"tl.reduce(tl.where({v} == {best}, {index}, {n}), {axis}, {first}, keep_dims={keep}) % {n}"
    _result(w, op, text, D.int32, "arg")


def _flushing_fold(block: Block) -> bool:
    """Whether combine `block` is one flush_to_zero Binary (a reduction or scan with
    flush_to_zero): its fold from the identity flushes the first element too, a combine that
    tl.reduce / tl.associative_scan never compute (they pass that element, a length-1 axis's
    only one, through as is)."""
    body = block.ops[:-1]
    return len(body) == 1 and isinstance(body[0], ops.Binary) and body[0].flush_to_zero


def _captured(block: Block) -> list[Value]:
    """The values from outside `block` that its ops use (scalars: see frontend/combine.py), in
    order of first use."""
    inside = {a.id for a in block.args}
    found: dict[int, Value] = {}
    for op in block.ops:
        for v in op.operands:
            if v.id not in inside:
                found.setdefault(v.id, v)
        inside.update(r.id for r in op.results)
    return list(found.values())


@rule(ops.ReduceWith, ops.ScanWith)
def _combine(w: KernelWriter, op: ops.ReduceWith | ops.ScanWith) -> None:
    """tl.reduce / tl.associative_scan with the op's combine block as a generated function
    (Triton needs no identity: every reduced axis has at least one element). With flush_to_zero
    the operand is flushed first (`_flushing_fold`): one select an element, which the combine
    would apply to every other element anyway.

    A generated function sees only its parameters, so each scalar the block uses from outside
    rides along as one more operand, splat to the operands' shape, that the function passes
    through unchanged: every element of it is the scalar, whichever elements Triton combines."""
    block = op.combine
    last = block.terminator
    assert isinstance(last, ops.Yield)
    n = len(op.xs)
    captured = _captured(block)
    params = [*block.args[:n], *captured, *block.args[n:], *[None] * len(captured)]
    fn = w.function("combine", params, block.ops[:-1], (*last.values, *captured))
    xs = [w.tensor(v) for v in op.xs]
    if _flushing_fold(block):
        xs = [_flush(w, x) for x in xs]
    shape = _shape(shape_of(op.xs[0]))
    xs += [f"tl.broadcast_to({w.tensor(v)}, {shape})" for v in captured]
    arg = xs[0] if len(xs) == 1 else f"({', '.join(xs)})"
    if isinstance(op, ops.ReduceWith):
        text = f"tl.reduce({arg}, {op.axis}, {fn}, keep_dims={op.keepdims})"
    else:
        text = f"tl.associative_scan({arg}, {op.axis}, {fn}, reverse={op.reverse})"
    names = [w.define(r, "r") for r in op.results] + ["_"] * len(captured)
    w.emit(f"{', '.join(names)} = {text}")


@rule(ops.Scan)
def _scan(w: KernelWriter, op: ops.Scan) -> None:
    v, compute = _widened(w, op.x, True)
    combine = w.need_helper(_SCAN_COMBINE[op.fn])
    _result(w, op, f"tl.associative_scan({v}, {op.axis}, {combine}, reverse={op.reverse})",
            compute, op.fn.value)


@rule(ops.Mma)
def _mma(w: KernelWriter, op: ops.Mma) -> None:
    """tl.dot. fp8 operands accumulate at the tensor cores' reduced precision within one MMA
    and are promoted to the fp32 accumulator after it (`max_num_imprecise_acc=K`), which keeps
    cuTile's fp8 BatchMatMul sample within 1e-5 of torch._scaled_mm (H200, 2026-12-01); with
    `use_fast_acc` the accumulator itself stays imprecise across MMAs (Triton's sm_90 default)."""
    a, b, acc = op.a, op.b, op.acc
    adt, cdt = a.tile.dtype, acc.tile.dtype
    k = a.tile.shape[-1]
    if not dot_mma(op):
        _mma_fma(w, op)
        return
    x, y = workarounds.dot_operands(w, w.tensor(a), w.tensor(b), adt)
    if adt is D.tfloat32:
        precision = ', input_precision="tf32"'
    elif adt in (D.float32, D.float64):
        precision = ', input_precision="ieee"'
    else:
        precision = ""
    fast = f", max_num_imprecise_acc={k}" if adt.bitwidth == 8 and not op.use_fast_acc else ""
    wide = workarounds.dot_accumulator(w, cdt)
    c = w.tensor(acc) if wide is cdt else f"{w.tensor(acc)}.to({tl_dtype(wide)})"
    dot = f"tl.dot({x}, {y}, {c}{precision}{fast}, out_dtype={tl_dtype(wide)})"
    w.assign(op.result, dot if wide is cdt else f"{dot}.to({tl_dtype(cdt)})", "acc")


_FMA_CHUNK_ELEMENTS = 4096
"""The most elements one broadcast product of `_mma_fma` may have: K is cut into chunks to stay
below it (the product of a whole 64x64x32 float64 tile would need 1024 registers a thread)."""


def _k_chunks(w: KernelWriter, text: str, shape: tuple[int, ...], axis: int, size: int) -> list[str]:
    """Tile `text` of `shape` cut along `axis` into contiguous pieces of `size` (a power of two),
    in order: halves by reshaping the axis to (2, half), moving the 2 last and `tl.split`."""
    if shape[axis] <= size:
        return [text]
    half = shape[axis] // 2
    rank = len(shape)
    split = shape[:axis] + (2, half) + shape[axis + 1:]
    perm = [d for d in range(rank + 1) if d != axis] + [axis]
    lo, hi = w.fresh("klo"), w.fresh("khi")
    w.emit(f"{lo}, {hi} = tl.split(tl.permute(tl.reshape({text}, {_shape(split)}), {perm}))")
    piece = shape[:axis] + (half,) + shape[axis + 1:]
    return _k_chunks(w, lo, piece, axis, size) + _k_chunks(w, hi, piece, axis, size)


def _mma_fma(w: KernelWriter, op: ops.Mma) -> None:
    """MMA as broadcast multiplies and sums over K in the accumulator's dtype, K cut into chunks
    so no product tile exceeds _FMA_CHUNK_ELEMENTS; the chunk sums are added in K order, then
    the accumulator (as the interpreter adds it to the whole product)."""
    a, b, acc = op.a, op.b, op.acc
    cdt = acc.tile.dtype
    compute = _math_dtype(cdt) if is_float(cdt) else cdt
    sa, sb, so = shape_of(a), shape_of(b), shape_of(op.result)
    rank = len(sa)
    outer = 1
    for d in so:
        outer *= d
    chunk = 1 << max(0, (_FMA_CHUNK_ELEMENTS // outer).bit_length() - 1)
    x, y = w.fresh("fa"), w.fresh("fb")
    w.emit(f"{x} = {_as(w, a, compute)}")
    w.emit(f"{y} = {_as(w, b, compute)}")
    lead, (m, k), n = so[:-2], sa[-2:], so[-1]
    add = w.need_helper("_tc_add")
    total = None
    for xc, yc in zip(_k_chunks(w, x, sa, rank - 1, chunk), _k_chunks(w, y, sb, rank - 2, chunk)):
        kc = min(k, chunk)
        # unit dims by reshape: Triton turns sum(x[:, :, None] * y[None, :, :], 1) of float32
        # into a tf32 tl.dot (its CombineBroadcastMulReduce), losing float32 precision
        xs = f"tl.reshape({xc}, {_shape(lead + (m, kc, 1))})"
        ys = f"tl.reshape({yc}, {_shape(lead + (1, kc, n))})"
        part = f"tl.reduce({xs} * {ys}, {rank - 1}, {add})"
        if total is None:
            total = part
        else:
            t = w.fresh("kacc")
            w.emit(f"{t} = {total} + {part}")
            total = t
    _result(w, op, f"{_as(w, acc, compute)} + {total}", compute, "acc")


# ---- grid dependency control ------------------------------------------------------------------

@rule(ops.GridDependencyControl)
def _grid_dependency(w: KernelWriter, op: ops.GridDependencyControl) -> None:
    """PTX griddepcontrol (Triton's gdc helpers), on GPUs that have it (`Target.grid_dependency`,
    sm_90+). Triton's CPU interpreter and older GPUs have no such instruction and run each
    launch after the work before it, which orders them already."""
    if w.target.interpret or not w.target.grid_dependency:
        return
    helper = "gdc_wait" if op.action is GridDependency.WAIT else "gdc_launch_dependents"
    w.emit(f"tl.extra.cuda.{helper}()")


# ---- debugging ------------------------------------------------------------------------------

@rule(ops.Assert)
def _assert(w: KernelWriter, op: ops.Assert) -> None:
    w.emit(f"tl.device_assert({w.tensor(op.cond)}, {op.message!r})")
