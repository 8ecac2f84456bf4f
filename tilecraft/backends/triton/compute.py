"""Lowering rules for values, casts, shapes, elementwise math, reductions, scans and MMA.

Dtype policy: bfloat16 arithmetic runs in float32 (the interpreter keeps bf16 as raw bits; the
GPU widens anyway); float16 runs natively except for division and transcendental math, which
run in float32 and round back.
"""

from __future__ import annotations

from ...ir import BinaryFn, CompareFn, Opcode, Operation, ReduceFn, ScanFn, UnaryFn, Value
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import RoundingMode
from .emitter import KernelWriter, broadcast_index, is_float, rule, shape_of, tl_dtype


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
    return f"tl.cast({w.tensor(v)}, {tl_dtype(dtype)})"


def _result(w: KernelWriter, op: Operation, text: str, computed: DType, hint: str = "t") -> None:
    """Assign `text` (of dtype `computed`) to the op's result, cast to its dtype."""
    want = op.result.tile.dtype
    if tl_dtype(computed) != tl_dtype(want):
        text = w.cast(text, computed, want)
    w.assign(op.result, text, hint)


# ---- values ---------------------------------------------------------------------------------

@rule(Opcode.CONST)
def _const(w: KernelWriter, op: Operation) -> None:
    text, literal = w.const(op.attrs["value"], op.result.tile.dtype)
    if literal:
        w.alias(op.result, text, literal=True)
    else:
        w.assign(op.result, text, "c")


@rule(Opcode.BID, Opcode.NUM_BLOCKS)
def _grid(w: KernelWriter, op: Operation) -> None:
    axis = op.attrs["axis"]
    hint = ("bid" if op.opcode == Opcode.BID else "nblocks") + "xyz"[axis]
    loop = w.grid_loop
    if loop is None:
        fn = "program_id" if op.opcode == Opcode.BID else "num_programs"
        w.assign(op.result, f"tl.{fn}({axis})", hint)
    elif op.opcode == Opcode.NUM_BLOCKS:
        w.alias(op.result, loop.sizes[axis])
    else:  # the block id the grid loop is running, unravelled x fastest
        x, y, _ = loop.sizes
        text = {0: f"{loop.tile} % {x}", 1: f"({loop.tile} // {x}) % {y}", 2: f"{loop.tile} // ({x} * {y})"}
        w.assign(op.result, text[axis], hint)


@rule(Opcode.ARANGE)
def _arange(w: KernelWriter, op: Operation) -> None:
    w.assign(op.result, f"tl.arange(0, {op.attrs['size']})", "idx")


_ROUNDING = {RoundingMode.RN: None, RoundingMode.RZ: "rtz"}


@rule(Opcode.CAST)
def _cast(w: KernelWriter, op: Operation) -> None:
    x = op.operands[0]
    src, dst = x.tile.dtype, op.attrs["dtype"]
    rounding = op.attrs.get("rounding")
    if D.float8_e8m0fnu in (src, dst) and src is not dst:
        raise w.unsupported("casts to or from float8_e8m0fnu")
    if dst is D.tfloat32 and src is not D.tfloat32:
        # tf32 is fp32 data. tl.dot(input_precision="tf32") rounds MMA operands itself, so only
        # a value that is also used otherwise is rounded here (a load feeding a dot stays
        # direct); 16-bit floats are exact in tf32.
        only_mma = all(u.opcode == Opcode.MMA for u in w.users.get(op.result.id, []))
        if src is D.float32 and only_mma:
            w.alias(op.result, w.expr(x), w.is_literal(x))
            return
        value = w.tensor(x) if src is D.float32 else w.cast(w.tensor(x), src, D.float32)
        if not only_mma and src.bitwidth >= 32:
            value = f"{w.need_helper('_tc_round_tf32')}({value})"
        w.assign(op.result, value, "t")
        return
    if tl_dtype(src) == tl_dtype(dst):  # e.g. tfloat32 -> float32: same data
        w.alias(op.result, w.expr(x), w.is_literal(x))
        return
    if dst is D.bool_:
        w.assign(op.result, f"{_as(w, x, _arith_dtype(src))} != 0", "t")
        return
    narrowing = is_float(src) and is_float(dst) and dst.bitwidth < src.bitwidth
    mode = None
    if rounding is not None and not (rounding is RoundingMode.RZI and is_float(src) and dst.is_int):
        if rounding not in _ROUNDING or (_ROUNDING[rounding] and not narrowing):
            raise w.unsupported(f"rounding mode {rounding.name} for a cast from {src.name} to {dst.name}")
        mode = _ROUNDING[rounding]
    extra = f", fp_downcast_rounding={mode!r}" if mode else ""
    w.assign(op.result, w.cast(w.tensor(x), src, dst, extra), "t")


@rule(Opcode.BITCAST)
def _bitcast(w: KernelWriter, op: Operation) -> None:
    x = op.operands[0]
    w.assign(op.result, f"tl.cast({w.tensor(x)}, {tl_dtype(op.attrs['dtype'])}, bitcast=True)", "t")


# ---- shapes ---------------------------------------------------------------------------------

def _splat_literal(w: KernelWriter, op: Operation) -> bool:
    """A constant broadcast or reshaped into a tile becomes `tl.full`."""
    x = op.operands[0]
    if not w.is_literal(x):
        return False
    w.assign(op.result, f"tl.full({_shape(shape_of(op.result))}, {w.expr(x)}, "
                        f"{tl_dtype(op.result.tile.dtype)})", "t")
    return True


@rule(Opcode.BROADCAST)
def _broadcast(w: KernelWriter, op: Operation) -> None:
    x = op.operands[0]
    if shape_of(x) == shape_of(op.result):
        w.alias(op.result, w.expr(x), w.is_literal(x))
    elif not _splat_literal(w, op):
        w.assign(op.result, f"tl.broadcast_to({w.expr(x)}, {_shape(shape_of(op.result))})", "t")


@rule(Opcode.RESHAPE)
def _reshape(w: KernelWriter, op: Operation) -> None:
    x = op.operands[0]
    src, dst = shape_of(x), shape_of(op.result)
    if src == dst:
        w.alias(op.result, w.expr(x), w.is_literal(x))
    elif not _splat_literal(w, op):
        fn = "broadcast_to" if not src else "reshape"  # a scalar is splat, not reshaped
        w.assign(op.result, f"tl.{fn}({w.expr(x)}, {_shape(dst)})", "t")


@rule(Opcode.PERMUTE)
def _permute(w: KernelWriter, op: Operation) -> None:
    x, axes = op.operands[0], list(op.attrs["axes"])
    if axes == sorted(axes):
        w.alias(op.result, w.expr(x))
    else:
        w.assign(op.result, f"tl.permute({w.expr(x)}, {axes})", "t")


@rule(Opcode.CAT)
def _cat(w: KernelWriter, op: Operation) -> None:
    # tl.cat may reorder elements; join stacks on a new last axis, which is moved in front of
    # `axis` and merged with it, so all of a comes before all of b.
    a, b = op.operands
    rank, axis = len(shape_of(a)), op.attrs["axis"] % len(shape_of(a))
    dims = list(range(axis)) + [rank] + list(range(axis, rank))
    joined = f"tl.join({w.expr(a)}, {w.expr(b)})"
    w.assign(op.result, f"tl.reshape(tl.permute({joined}, {dims}), {_shape(shape_of(op.result))})", "t")


@rule(Opcode.EXTRACT)
def _extract(w: KernelWriter, op: Operation) -> None:
    # View x as (grid0, sub0, grid1, sub1, ...), zero every grid position but `index` and sum
    # the grid axes away. Working on the bits (as unsigned ints) keeps every value exact.
    x, index = op.operands[0], op.operands[1:]
    full = shape_of(x)
    sub = tuple(op.attrs["shape"]) or (1,) * len(full)
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


# ---- elementwise ----------------------------------------------------------------------------

_UNARY_TL = {UnaryFn.EXP: "tl.exp", UnaryFn.EXP2: "tl.exp2", UnaryFn.LOG: "tl.log",
             UnaryFn.LOG2: "tl.log2", UnaryFn.RSQRT: "tl.rsqrt", UnaryFn.SIN: "tl.sin",
             UnaryFn.COS: "tl.cos", UnaryFn.FLOOR: "tl.floor", UnaryFn.CEIL: "tl.ceil"}
_UNARY_LIBDEVICE = {UnaryFn.TAN: "tan", UnaryFn.SINH: "sinh", UnaryFn.COSH: "cosh", UnaryFn.TANH: "tanh"}


@rule(Opcode.UNARY)
def _unary(w: KernelWriter, op: Operation) -> None:
    fn: UnaryFn = op.attrs["fn"]
    x = op.operands[0]
    dtype = x.tile.dtype
    if fn is UnaryFn.ISNAN:
        v = _as(w, x, _arith_dtype(dtype))
        w.assign(op.result, f"{v} != {v}", "isnan")
        return
    if fn is UnaryFn.NOT:
        if dtype.is_int and not dtype.signed:  # the interpreter cannot make unsigned all-ones
            w.assign(op.result, f"{w.tensor(x)} ^ {2 ** dtype.bitwidth - 1}", "t")
        else:
            w.assign(op.result, f"~{w.tensor(x)}", "t")
        return
    if fn in (UnaryFn.NEG, UnaryFn.ABS):
        compute = _arith_dtype(dtype)
        v = _as(w, x, compute) if compute is not dtype else w.tensor(x)
        if fn is UnaryFn.ABS:
            text = f"tl.abs({v})"
        else:  # Triton's unary minus is 0 - x, which turns 0.0 into +0.0; * -1 is exact
            text = f"{v} * -1.0" if is_float(compute) else f"-{v}"
        _result(w, op, text, compute)
        return
    if not is_float(dtype):
        raise w.unsupported(f"{fn.name.lower()} of {dtype.name}")
    compute = _math_dtype(dtype)
    v = _as(w, x, compute) if compute is not dtype else w.tensor(x)
    if fn is UnaryFn.SQRT:
        text = f"tl.sqrt_rn({v})" if compute is D.float32 else f"tl.sqrt({v})"
    elif fn in _UNARY_TL:
        text = f"{_UNARY_TL[fn]}({v})"
    elif w.target.interpret:
        helper = w.need_helper(f"_tc_{fn.value}_interp")
        text, compute = f"{helper}(tl.cast({v}, tl.float64))", D.float64
    else:
        text = f"{w.libdevice(_UNARY_LIBDEVICE[fn])}({v})"
    _result(w, op, text, compute)


_BINARY_OPS = {BinaryFn.ADD: "+", BinaryFn.SUB: "-", BinaryFn.MUL: "*", BinaryFn.AND: "&",
               BinaryFn.OR: "|", BinaryFn.XOR: "^", BinaryFn.SHL: "<<", BinaryFn.SHR: ">>"}
_FLOAT_MATH = {BinaryFn.TRUEDIV, BinaryFn.FLOORDIV, BinaryFn.MOD, BinaryFn.POW, BinaryFn.ATAN2}


def _operands(w: KernelWriter, x: Value, y: Value, compute: DType) -> tuple[str, str]:
    """Both operands in `compute`; two bare literals would be folded by Python (with unbounded
    ints), so the first one is then typed."""
    a = w.tensor(x) if w.is_literal(x) and w.is_literal(y) else _as(w, x, compute)
    return a, _as(w, y, compute)


@rule(Opcode.BINARY)
def _binary(w: KernelWriter, op: Operation) -> None:
    fn: BinaryFn = op.attrs["fn"]
    x, y = op.operands
    dtype = x.tile.dtype
    compute = _math_dtype(dtype) if is_float(dtype) and fn in _FLOAT_MATH else _arith_dtype(dtype)
    signs_agree = x.id in w.nonneg and y.id in w.nonneg  # Python's and C's // and % coincide
    text = _binary_text(w, fn, *_operands(w, x, y, compute), compute, signs_agree)
    if fn in (BinaryFn.POW, BinaryFn.ATAN2) and w.target.interpret:
        compute = D.float64
    _result(w, op, text, compute)


def _binary_text(w: KernelWriter, fn: BinaryFn, a: str, b: str, dtype: DType, nonneg: bool = False) -> str:
    """Triton expression of `a fn b` computed in `dtype` (float64 for the `_interp` helpers);
    `nonneg`: both operands are known non-negative."""
    floating = is_float(dtype)
    if fn in _BINARY_OPS:
        return f"{a} {_BINARY_OPS[fn]} {b}"
    if fn is BinaryFn.TRUEDIV:
        return f"tl.math.div_rn({a}, {b})" if dtype is D.float32 else f"{a} / {b}"
    if fn is BinaryFn.FLOORDIV:
        if floating:
            return f"tl.floor({_binary_text(w, BinaryFn.TRUEDIV, a, b, dtype)})"
        return f"{w.need_helper('_tc_floordiv_int')}({a}, {b})" if dtype.signed and not nonneg else f"{a} // {b}"
    if fn is BinaryFn.MOD:
        if floating:
            return f"{w.need_helper('_tc_mod_float')}({a}, {b})"
        return f"{w.need_helper('_tc_mod_int')}({a}, {b})" if dtype.signed and not nonneg else f"{a} % {b}"
    if fn in (BinaryFn.MIN, BinaryFn.MAX, BinaryFn.MIN_NAN, BinaryFn.MAX_NAN):
        name = "min" if fn in (BinaryFn.MIN, BinaryFn.MIN_NAN) else "max"
        if not floating:
            return f"tl.{name}imum({a}, {b})"
        if fn in (BinaryFn.MIN, BinaryFn.MAX):
            return f"{w.need_helper(f'_tc_{name}num')}({a}, {b})"
        return f"tl.{name}imum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"
    if fn in (BinaryFn.POW, BinaryFn.ATAN2):
        if w.target.interpret:
            helper = w.need_helper(f"_tc_{fn.value}_interp")
            return f"{helper}(tl.cast({a}, tl.float64), tl.cast({b}, tl.float64))"
        return f"{w.libdevice(fn.value)}({a}, {b})"
    raise w.unsupported(f"binary function {fn.name}")


_COMPARE = {CompareFn.EQ: "==", CompareFn.NE: "!=", CompareFn.LT: "<", CompareFn.LE: "<=",
            CompareFn.GT: ">", CompareFn.GE: ">="}


@rule(Opcode.COMPARE)
def _compare(w: KernelWriter, op: Operation) -> None:
    x, y = op.operands
    a, b = _operands(w, x, y, _arith_dtype(x.tile.dtype))
    w.assign(op.result, f"{a} {_COMPARE[op.attrs['fn']]} {b}", "cond")


@rule(Opcode.WHERE)
def _where(w: KernelWriter, op: Operation) -> None:
    c, x, y = op.operands
    w.assign(op.result, f"tl.where({w.expr(c)}, {w.tensor(x)}, {w.tensor(y)})", "t")


# ---- reductions, scans, mma -----------------------------------------------------------------

def _widened(w: KernelWriter, x: Value) -> tuple[str, DType]:
    """Operand of a reduction or scan: bool counts as int32, bf16 runs in fp32."""
    dtype = x.tile.dtype
    compute = D.int32 if dtype is D.bool_ else _arith_dtype(dtype)
    return _as(w, x, compute), compute


_COMBINE = {ReduceFn.SUM: "_tc_add", ReduceFn.PROD: "_tc_mul", ReduceFn.MAX: "_tc_maxnum",
            ReduceFn.MIN: "_tc_minnum", ReduceFn.ARGMAX: "_tc_argmax", ReduceFn.ARGMIN: "_tc_argmin",
            ScanFn.CUMSUM: "_tc_add", ScanFn.CUMPROD: "_tc_mul"}


@rule(Opcode.REDUCE)
def _reduce(w: KernelWriter, op: Operation) -> None:
    fn: ReduceFn = op.attrs["fn"]
    x = op.operands[0]
    v, compute = _widened(w, x)
    axis, keep = op.attrs["axis"], bool(op.attrs.get("keepdims", False))
    combine = w.need_helper(_COMBINE[fn])
    if fn not in (ReduceFn.ARGMAX, ReduceFn.ARGMIN):
        _result(w, op, f"tl.reduce({v}, {axis}, {combine}, keep_dims={keep})", compute, fn.value)
        return
    shape = shape_of(x)
    if is_float(compute):  # NaN never wins: it becomes the identity of the search
        fill = 'float("-inf")' if fn is ReduceFn.ARGMAX else 'float("inf")'
        clean = w.fresh("t")
        w.emit(f"{clean} = tl.where({v} != {v}, {fill}, {v})")
        v = clean
    index = broadcast_index(f"tl.arange(0, {shape[axis]})", axis, len(shape))
    if len(shape) > 1:
        index = f"tl.broadcast_to({index}, {_shape(shape)})"
    _result(w, op, f"tl.reduce(({v}, {index}), {axis}, {combine}, keep_dims={keep})[1]", D.int32, "arg")


@rule(Opcode.REDUCE_WITH, Opcode.SCAN_WITH)
def _combine(w: KernelWriter, op: Operation) -> None:
    """tl.reduce / tl.associative_scan with the op's combine block as a generated function
    (Triton needs no identity: every reduced axis has at least one element)."""
    block = op.blocks[0]
    fn = w.function("combine", block.args, block.ops[:-1], block.ops[-1].operands)
    xs = [w.tensor(v) for v in op.operands]
    arg = xs[0] if len(xs) == 1 else f"({', '.join(xs)})"
    axis = op.attrs["axis"]
    if op.opcode == Opcode.REDUCE_WITH:
        text = f"tl.reduce({arg}, {axis}, {fn}, keep_dims={op.attrs['keepdims']})"
    else:
        text = f"tl.associative_scan({arg}, {axis}, {fn}, reverse={op.attrs['reverse']})"
    names = [w.define(r, "r") for r in op.results]
    w.emit(f"{', '.join(names)} = {text}")


@rule(Opcode.SCAN)
def _scan(w: KernelWriter, op: Operation) -> None:
    v, compute = _widened(w, op.operands[0])
    combine = w.need_helper(_COMBINE[op.attrs["fn"]])
    reverse = bool(op.attrs.get("reverse", False))
    _result(w, op, f"tl.associative_scan({v}, {op.attrs['axis']}, {combine}, reverse={reverse})",
            compute, op.attrs["fn"].value)


@rule(Opcode.MMA)
def _mma(w: KernelWriter, op: Operation) -> None:
    a, b, acc = op.operands
    adt, cdt = a.tile.dtype, acc.tile.dtype
    if a.tile.shape[-1] < (32 if adt.bitwidth == 8 else 16) or adt is not b.tile.dtype:
        _mma_fma(w, op)  # tl.dot needs K >= 16 (32 for 8-bit types) and one operand dtype
        return
    x, y = w.tensor(a), w.tensor(b)
    if w.target.interpret and adt is D.bfloat16:  # the interpreter's dot reads bf16 as raw bits
        x, y = f"tl.cast({x}, tl.float32)", f"tl.cast({y}, tl.float32)"
    if adt is D.tfloat32:
        precision = ', input_precision="tf32"'
    elif adt in (D.float32, D.float64):
        precision = ', input_precision="ieee"'
    else:
        precision = ""
    w.assign(op.result, f"tl.dot({x}, {y}, {w.tensor(acc)}{precision}, out_dtype={tl_dtype(cdt)})", "acc")


def _mma_fma(w: KernelWriter, op: Operation) -> None:
    """MMA as a broadcast multiply and a sum over K (in the accumulator's dtype)."""
    a, b, acc = op.operands
    cdt = acc.tile.dtype
    compute = _math_dtype(cdt) if is_float(cdt) else cdt
    rank = len(shape_of(a))
    lead = ":, " * (rank - 2)
    x = f"{_as(w, a, compute)}[{lead}:, :, None]"
    y = f"{_as(w, b, compute)}[{lead}None, :, :]"
    add = w.need_helper("_tc_add")
    _result(w, op, f"{_as(w, acc, compute)} + tl.reduce({x} * {y}, {rank - 1}, {add})", compute, "acc")


# ---- debugging ------------------------------------------------------------------------------

@rule(Opcode.PRINT)
def _print(w: KernelWriter, op: Operation) -> None:
    # Best effort: Triton prints every element on a line of its own after a prefix, so each
    # tile is printed after the text before it (format specs are not applied).
    pieces = [p.replace("\n", " ").strip() for p in op.attrs.get("pieces", ())]
    if not op.operands:
        w.emit(f"tl.device_print({' '.join(p for p in pieces if p)!r})")
    for k, v in enumerate(op.operands):
        w.emit(f"tl.device_print({pieces[k] if k < len(pieces) else ''!r}, {w.tensor(v)})")


@rule(Opcode.ASSERT)
def _assert(w: KernelWriter, op: Operation) -> None:
    w.emit(f"tl.device_assert({w.tensor(op.operands[0])}, {str(op.attrs.get('message', ''))!r})")
