"""Everything the Triton backend does only because Triton's CPU interpreter (TRITON_INTERPRET=1,
Triton 3.6) gets something wrong, in one place: each function below says what the interpreter
does wrong and returns the replacement spelling (or None where the ordinary code is right).

Most apply only under the interpreter (`Target.interpret`), so GPU code stays what Triton does
best. Three apply on the GPU too, because the spelling they choose is just as good there and
one spelling keeps both modes' code the same: bfloat16 constants made from float32
(`bf16_constant`), 8-bit-float padding written as bits (`fp8_padding`) and the bitwise not of
unsigned integers as an exclusive or (`unsigned_not`).

The helpers whose names end in `_interp` stand in for libdevice and for the interpreter's
wrong conversions; like every helper they are copied into a generated module only when used.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import PADDING_VALUES, PaddingMode
from .helpers import define_helper
from .spelling import fp8_bits, is_float, negative_zero, py_literal, tl_dtype

if TYPE_CHECKING:
    from .emitter import KernelWriter


# ---- conversions ------------------------------------------------------------------------------

# 8-bit float formats for the interpreter's conversion: mantissa bits, exponent bias, largest
# finite value, NaN code
_FP8_FORMAT = {D.float8_e4m3fn: (3, 7, 448.0, 0x7F), D.float8_e5m2: (2, 15, 57344.0, 0x7E)}


def cast(w: "KernelWriter", text: str, src: DType, dst: DType) -> str | None:
    """`text` converted from `src` to `dst` where the interpreter's own `tl.cast` is wrong: to
    bfloat16 it truncates instead of rounding (and converts integers as if bfloat16 were
    uint16), to 8-bit floats it rounds without carrying into the exponent and gives NaN or
    inf past the largest finite value (the GPU's cvt.rn.satfinite saturates), from 8-bit
    floats it reads NaN and infinity codes as numbers (`_tc_from_fp8_interp`), and from
    bfloat16 to float32/float64 it flushes subnormals to zero. None: `tl.cast` is right (or
    not under the interpreter)."""
    if not w.target.interpret or src is dst:
        return None
    if src is D.bfloat16 and dst in (D.float32, D.float64):  # bfloat16 is the top half of float32
        wide = f"tl.cast(tl.cast(tl.cast({text}, tl.uint16, bitcast=True), tl.uint32) << 16, tl.float32, bitcast=True)"
        return wide if dst is D.float32 else f"tl.cast({wide}, tl.float64)"
    if src in _FP8_FORMAT and dst in (D.float16, D.float32, D.bfloat16):
        wide = f"{w.need_helper('_tc_from_fp8_interp')}({text}, {src is D.float8_e5m2})"
        return wide if dst is D.float32 else cast(w, wide, D.float32, dst) or f"tl.cast({wide}, {tl_dtype(dst)})"
    if dst in _FP8_FORMAT:
        if src is not D.float32:
            text = f"tl.cast({text}, tl.float32)"
        args = ", ".join(map(str, _FP8_FORMAT[dst]))
        return f"tl.cast({w.need_helper('_tc_to_fp8_interp')}({text}, {args}), {tl_dtype(dst)}, bitcast=True)"
    if dst is not D.bfloat16:
        return None
    if src is D.float32:
        return f"{w.need_helper('_tc_to_bf16_interp')}({text})"
    if src.bitwidth <= 16:  # exact in float32
        return f"{w.need_helper('_tc_to_bf16_interp')}(tl.cast({text}, tl.float32))"
    if src in (D.int64, D.uint64):  # rounding them to float64 first would round twice
        text = f"{w.need_helper('_tc_int64_to_f64_sticky_interp')}({text})"
    elif src is not D.float64:
        text = f"tl.cast({text}, tl.float64)"
    return f"{w.need_helper('_tc_f64_to_bf16_interp')}({text})"


def bf16_constant(w: "KernelWriter", value: float) -> str:
    """A bfloat16 constant: the interpreter cannot make one with `tl.full(..., tl.bfloat16)`,
    so it is made in float32 and converted (on the GPU too: Triton folds it). The value is
    rounded to bfloat16 here first, so the conversion is exact: the interpreter's cast
    truncates (3.14 became 3.125, not 3.140625) and flushes subnormals (1e-40 became 0.0), so
    under the interpreter it converts as `cast` does. A value that rounds to -0.0 (-1e-45) is
    `negative_zero`: Triton makes every constant equal to zero +0.0."""
    rounded = float(np.array(value, dtype=D.bfloat16.np_dtype)[()])
    if rounded == 0 and math.copysign(1.0, rounded) < 0:
        return negative_zero(D.bfloat16)
    wide = f"tl.full([], {py_literal(rounded, D.bfloat16)}, tl.float32)"
    return cast(w, wide, D.float32, D.bfloat16) or f"tl.cast({wide}, tl.bfloat16)"


def fp8_padding(mode: PaddingMode, dtype: DType) -> str | None:
    """The `other=` of a masked load of an 8-bit float array padded with NaN, -0.0 or an
    infinity, as its exact bit pattern: the interpreter converts those values to 8-bit floats
    wrongly. None for other dtypes and for zero padding (which converts correctly)."""
    if not (dtype.is_restricted and dtype.bitwidth == 8) or mode is PaddingMode.ZERO:
        return None
    return fp8_bits(PADDING_VALUES[mode], dtype)


# ---- arithmetic -------------------------------------------------------------------------------

def unsigned_not(x: str, dtype: DType) -> str | None:
    """The bitwise not of an unsigned integer tile as `x ^ all-ones`: `~x` makes an all-ones
    constant of the unsigned type, which the interpreter cannot. None for other dtypes."""
    if dtype.is_int and not dtype.signed:
        return f"{x} ^ {2 ** dtype.bitwidth - 1}"
    return None


def libdevice_stand_in(w: "KernelWriter", name: str, args: list[str]) -> str | None:
    """A float64 expression standing in for `libdevice.<name>(*args)`, which the interpreter
    cannot call (tan, sinh, cosh, tanh, pow, atan2; the `_tc_<name>_interp` helpers compute in
    float64, so the result is float64). None on the GPU."""
    if not w.target.interpret:
        return None
    helper = w.need_helper(f"_tc_{name}_interp")
    return f"{helper}({', '.join(f'tl.cast({a}, tl.float64)' for a in args)})"


def nan_propagating_extreme(w: "KernelWriter", name: str, a: str, b: str) -> str | None:
    """`tl.minimum` / `tl.maximum` (`name`: "min" or "max") of float tiles with
    `propagate_nan=ALL`: the interpreter's returns either of two zeros where PTX min.NaN /
    max.NaN order -0.0 below +0.0, so it becomes the `_tc_<name>_nan_interp` helper. None on
    the GPU."""
    if not w.target.interpret:
        return None
    return f"{w.need_helper(f'_tc_{name}_nan_interp')}({a}, {b})"


def dot_operands(w: "KernelWriter", a: str, b: str, dtype: DType) -> tuple[str, str]:
    """The operands of `tl.dot`: the interpreter's dot reads bfloat16 tiles as raw bits, so
    they are widened to float32 first (exact)."""
    if w.target.interpret and dtype is D.bfloat16:
        return f"tl.cast({a}, tl.float32)", f"tl.cast({b}, tl.float32)"
    return a, b


def dot_accumulator(w: "KernelWriter", dtype: DType) -> DType:
    """The dtype `tl.dot` accumulates in for an accumulator of `dtype`: the interpreter's dot
    rounds a @ b to a float16 accumulator's dtype and then its sum with the accumulator again
    (2048 + 1 + 1 gave 2048, not 2050), so a float16 accumulator's dot runs in float32 and is
    rounded once after it, as the interpreter backend rounds (tests/backends/
    test_compute_differential.py)."""
    if w.target.interpret and dtype is D.float16:
        return D.float32
    return dtype


# ---- atomics and parameters -------------------------------------------------------------------

def atomic_operands(w: "KernelWriter", operands: list[str], mask: str | None) -> tuple[list[str], str | None]:
    """The value operands and mask of an atomic: the interpreter's atomics misread broadcast
    (stride-0) tiles, so each becomes a fresh dense copy (`_tc_dense_interp`)."""
    if not w.target.interpret:
        return operands, mask
    dense = w.need_helper("_tc_dense_interp")
    return [f"{dense}({v})" for v in operands], mask and f"{dense}({mask})"


def xchg_as_bits(w: "KernelWriter", dtype: DType) -> bool:
    """Whether an atomic exchange of `dtype` must exchange the bits as integers: the
    interpreter's `tl.atomic_xchg` accepts integers only."""
    return w.target.interpret and is_float(dtype)


def python_numbers(w: "KernelWriter") -> bool:
    """Whether scalar parameters and `range` loop counters reach the kernel as Python numbers,
    which the kernel must then give their type: the interpreter passes arguments as they are (a
    float64 for a float32 parameter, unbounded ints) and its `range` yields ints, on which
    `tl.full(shape, i)` or `x + i` fail with "'int' object has no attribute 'type'"."""
    return w.target.interpret


def float_arguments(flat: tuple) -> tuple:
    """The Triton arguments `flat` with every float as an interpreter tensor of its value: the
    interpreter makes a float argument equal to 0 into +0.0 (its scalar constants test
    `value == 0`), so -0.0 lost its sign (the GPU's launcher keeps it). The kernel casts the
    tensor to its parameter's type as it casts a Python float; the tensor is float32 where that
    holds the value exactly (the interpreter casts only float32 to bfloat16 right), else float64."""
    return tuple(_float_tensor(float(a)) if isinstance(a, (float, np.floating)) else a for a in flat)


def _float_tensor(value: float) -> Any:
    import triton.language as tl
    from triton.runtime.interpreter import interpreter_builder

    with np.errstate(over="ignore"):
        exact = value != value or float(np.float32(value)) == value
    if exact:
        return tl.tensor(interpreter_builder.get_fp32(value), tl.float32)
    return tl.tensor(interpreter_builder.get_fp64(value), tl.float64)


def bools_as_ints(w: "KernelWriter") -> bool:
    """Whether bool scalar parameters travel as int32 (then cast to bool in the kernel): the
    interpreter cannot take a bool argument, Python's or NumPy's ("numpy data itemsize (32 bits)
    exceeds dtype primitive_bitwidth (1 bits)": it puts the value in an int32 array typed int1)."""
    return w.target.interpret


@contextlib.contextmanager
def device_asserts() -> Iterator[None]:
    """Run one launch with `tl.device_assert` live: the interpreter only checks device asserts
    when its builder's options say `debug` (with integer overflow checks off: tile integers
    wrap)."""
    from triton.runtime import interpreter as triton_interpreter

    builder = triton_interpreter.interpreter_builder
    saved = builder.options
    builder.options = replace(saved, debug=True, sanitize_overflow=False)
    try:
        yield
    finally:
        builder.options = saved


# ---- the interpreter itself -------------------------------------------------------------------

def fix_scalar_index() -> None:
    """Let the interpreter turn its scalars into Python ints under NumPy >= 2.4.

    Triton 3.6's interpreter gives its tensors `__index__ = int(self.handle.data)` (used for
    loop bounds, among others), where a scalar's data is a one-element array of one dimension:
    NumPy 2.3 converts that with a DeprecationWarning, NumPy 2.4 refuses ("only 0-dimensional
    arrays can be converted to Python scalars"), so every kernel with a run-time loop failed.
    This wraps the interpreter's tensor patching to take the element first. Called when the
    Triton backend is imported; idempotent; a no-op for a Triton without that hook."""
    from triton.runtime import interpreter as triton_interpreter

    patch = getattr(triton_interpreter, "_patch_lang_tensor", None)
    if patch is None or hasattr(patch, "wrapped"):
        return

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", _scalar_index)

    patch_lang_tensor.wrapped = patch  # type: ignore[attr-defined]  # Triton's own, for tests
    triton_interpreter._patch_lang_tensor = patch_lang_tensor


def _scalar_index(self: Any) -> int:
    data = self.handle.data
    return int(data.item() if data.size == 1 else data)


# ---- helper sources ---------------------------------------------------------------------------

define_helper("_tc_tan_interp", '''(x):
    return tl.sin(x) / tl.cos(x)
''')

define_helper("_tc_sinh_interp", '''(x):
    # a Taylor series below 1 in magnitude, where exp(x) - exp(-x) would cancel
    x2 = x * x
    s = 1.0
    for j in tl.static_range(9):
        s = s * x2 / ((19 - 2 * j) * (18 - 2 * j)) + 1.0
    big = _tc_half_exp_interp(tl.abs(x))
    mid = tl.where(tl.abs(x) < 709.0, (tl.exp(x) - tl.exp(-x)) * 0.5, tl.where(x < 0, -big, big))
    return tl.where(tl.abs(x) < 1.0, x * s, mid)
''', needs=("_tc_half_exp_interp",))

define_helper("_tc_cosh_interp", '''(x):
    return tl.where(tl.abs(x) < 709.0, (tl.exp(x) + tl.exp(-x)) * 0.5, _tc_half_exp_interp(tl.abs(x)))
''', needs=("_tc_half_exp_interp",))

define_helper("_tc_half_exp_interp", '''(x):
    # exp(x) / 2 for float64 x past 709.78, where exp(x) overflows but exp(x) / 2 (sinh and
    # cosh there) is finite up to 710.47: the square of exp(x / 2), halved before squaring
    h = tl.exp(x * 0.5)
    return (h * 0.5) * h
''')

define_helper("_tc_tanh_interp", '''(x):
    t = 1.0 - 2.0 / (tl.exp(2.0 * tl.abs(x)) + 1.0)
    small = _tc_sinh_interp(x) / _tc_cosh_interp(x)
    return tl.where(tl.abs(x) < 1.0, small, tl.where(x < 0, -t, t))
''', needs=("_tc_sinh_interp", "_tc_cosh_interp"))

define_helper("_tc_pow_interp", '''(x, y):
    # C99 pow (as libdevice) on float64: a negative sign bit (-0.0 too) with an odd integer y
    # flips the sign; a finite negative x with a non-integer y is NaN; (-1) ** +-inf is 1.
    # Integer exponents up to 64 in magnitude multiply |x| by squaring (exact where the power
    # is: exp2(y * log2(3.0)) for y = 7 gave 2186.9999999999995, which float16 rounds to 2186
    # where 3 ** 7 = 2187 rounds to 2188), unless that overflows or underflows
    ax = tl.abs(x)
    r = tl.exp2(y * tl.log2(ax))
    y_int = tl.floor(y) == y
    n = tl.cast(tl.where(y_int & (tl.abs(y) <= 64), tl.abs(y), 0.0), tl.int32)
    p = ax * 0.0 + 1.0  # (NaN for an infinite x, which the formula above takes)
    b = ax
    for j in tl.static_range(7):
        p = tl.where(((n >> j) & 1) == 1, p * b, p)
        b = b * b
    by_squaring = (n > 0) & (p > 0) & (p < float("inf"))
    r = tl.where(by_squaring, tl.where(y < 0, 1.0 / p, p), r)
    y_odd = y_int & (tl.abs(y % 2.0) == 1.0)
    r = tl.where((tl.cast(x, tl.int64, bitcast=True) < 0) & y_odd, r * -1.0, r)
    r = tl.where((x < 0) & (ax != float("inf")) & (~y_int), float("nan"), r)
    r = tl.where((ax == 1) & (tl.abs(y) == float("inf")), 1.0, r)
    return tl.where((y == 0) | (x == 1), 1.0, r)
''')

define_helper("_tc_fma_interp", '''(a, b, c):
    # a * b + c of float64 tiles holding narrower floats, rounded to odd in float64 (the exact
    # product, then the sum and its exact error, TwoSum): the interpreter's tl.fma rounds the
    # product and the sum apart; casting this to the float rounds once (compute.py `_fma`)
    p = a * b
    s = p + c
    t = s - p
    err = (p - (s - t)) + (c - t)
    bits = tl.cast(s, tl.int64, bitcast=True)
    inexact = (err != 0) & (s == s) & (tl.abs(s) != float("inf"))
    step = tl.where((err > 0) == (s > 0), 1, -1)  # toward the exact value: sign-magnitude bits
    return tl.where(inexact & ((bits & 1) == 0), tl.cast(bits + step, tl.float64, bitcast=True), s)
''')

define_helper("_tc_atan2_interp", '''(y, x):
    ax = tl.abs(x)
    ay = tl.abs(y)
    hi = tl.maximum(ax, ay)
    lo = tl.minimum(ax, ay)
    t = tl.where(hi == 0, 0.0, tl.where(lo == hi, 1.0, lo / hi))
    big = t > 0.41421356237309503
    u = tl.where(big, (t - 1.0) / (t + 1.0), t)
    u2 = u * u
    p = u2 * 0.0  # atan(u) / u = sum_k (-1)^k u^2k / (2k + 1); |u| <= tan(pi / 8)
    for j in tl.static_range(22):
        p = p * u2 + (1.0 - 2.0 * ((21 - j) % 2)) / (2 * (21 - j) + 1)
    r = u * p
    r = tl.where(big, r + 0.7853981633974483, r)
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)
    r = tl.where(tl.cast(x, tl.int64, bitcast=True) < 0, 3.141592653589793 - r, r)  # -0.0 too
    r = tl.where(tl.cast(y, tl.int64, bitcast=True) < 0, r * -1.0, r)  # -0.0 gives -0.0
    return tl.where((x != x) | (y != y), float("nan"), r)
''')

define_helper("_tc_min_nan_interp", '''(x, y):
    return tl.where(x != x, x, tl.where(y != y, y, _tc_minnum(x, y)))
''', needs=("_tc_minnum",))

define_helper("_tc_max_nan_interp", '''(x, y):
    return tl.where(x != x, x, tl.where(y != y, y, _tc_maxnum(x, y)))
''', needs=("_tc_maxnum",))

define_helper("_tc_dense_interp", '''(x):
    """A fresh copy of x: the interpreter's atomics misread broadcast (stride-0) operands."""
    return tl.where(True, x, x)
''')

define_helper("_tc_to_bf16_interp", '''(x):
    """float32 -> bfloat16 rounding to nearest even (the interpreter's own cast truncates)."""
    bits = tl.cast(x, tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = tl.full([], 0x7FC0, tl.uint16)
    return tl.cast(tl.where(x != x, nan, tl.cast(bits, tl.uint16)), tl.bfloat16, bitcast=True)
''')

define_helper("_tc_f64_to_bf16_interp", '''(x):
    """float64 -> bfloat16 without double rounding: to float32 rounding to odd, then to bf16."""
    f = tl.cast(x, tl.float32)
    back = tl.cast(f, tl.float64)
    inexact = back != x
    bits = tl.cast(f, tl.uint32, bitcast=True)
    bits = tl.where(inexact & (tl.abs(back) > tl.abs(x)), bits - 1, bits) | tl.cast(inexact, tl.uint32)
    return _tc_to_bf16_interp(tl.where(x != x, f, tl.cast(bits, tl.float32, bitcast=True)))
''', needs=("_tc_to_bf16_interp",))

define_helper("_tc_int64_to_f64_sticky_interp", '''(x):
    """A 64-bit integer as a float64 that rounds to bfloat16 (or float32) as the integer does:
    exact below 2**53; above, the low 11 bits fold into one sticky bit, so the float64 is exact
    and keeps whether the integer lay above a rounding midpoint (as cvt.rn.bf16.s64 sees it)."""
    a = tl.cast(tl.abs(x), tl.uint64, bitcast=True)  # |int64 min| is 2**63 as uint64
    short = (a >> 11) | tl.cast((a & 0x7FF) != 0, tl.uint64)
    f = tl.where(a >= 9007199254740992, tl.cast(short, tl.float64) * 2048.0, tl.cast(a, tl.float64))
    return tl.where(x < 0, -f, f)
''')

define_helper("_tc_from_fp8_interp", '''(x, E5M2: tl.constexpr):
    """An 8-bit float -> float32, exactly: the interpreter's cast reads the formats' special
    codes as numbers (float8_e4m3fn's NaN 0x7F as 480, float8_e5m2's infinity 0x7C as 65536
    and its NaNs as 81920 to 114688). e5m2 is the top byte of a float16; e4m3fn's cast is
    right but for its NaN, which becomes float32's quiet NaN with its sign."""
    bits = tl.cast(x, tl.uint8, bitcast=True)
    if E5M2:
        return tl.cast(tl.cast(tl.cast(bits, tl.uint16) << 8, tl.float16, bitcast=True), tl.float32)
    nan = tl.cast((tl.cast(bits, tl.uint32) << 24) | 0x7FC00000, tl.float32, bitcast=True)  # with its sign
    return tl.where((bits & 0x7F) == 0x7F, nan, tl.cast(x, tl.float32))
''')

define_helper("_tc_to_fp8_interp", '''(x, MANT: tl.constexpr, BIAS: tl.constexpr, TOP: tl.constexpr,
                      NAN: tl.constexpr):
    """float32 -> the bits of an 8-bit float with MANT mantissa bits and exponent bias BIAS,
    rounding to nearest even (the interpreter's cast does not carry into the exponent), as
    cvt.rn.satfinite: a magnitude past the largest finite value TOP (an infinity too) is TOP
    before rounding; a NaN is the code NAN, with its sign."""
    a = tl.where(tl.abs(x) < TOP, tl.abs(x), TOP)
    e = tl.maximum((tl.cast(a, tl.int32, bitcast=True) >> 23) - 127, 1 - BIAS)
    q = tl.cast((e - MANT + 127) << 23, tl.float32, bitcast=True)  # value of the last bit
    y = a / q
    f = tl.floor(y)
    d = y - f
    up = (d > 0.5) | ((d == 0.5) & (f % 2.0 == 1.0))
    code = ((e + BIAS - 1) << MANT) + tl.cast(f, tl.int32) + tl.cast(up, tl.int32)
    code = tl.where(x != x, NAN, code) | ((tl.cast(x, tl.int32, bitcast=True) >> 31) & 1) << 7
    return tl.cast(code, tl.uint8)
''')
