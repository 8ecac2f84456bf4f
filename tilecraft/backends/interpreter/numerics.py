"""Numeric helpers of the interpreter: dtype conversions with the language's rounding rules.

Conversions are built once per op (`make_cast`) and return a function of one value (NumPy array
or scalar). Casts to a float round to nearest even by default, on the exact value: from float64
(or a 64-bit integer) to the narrow formats the value first goes to a wider format by
round-to-odd, so the final rounding is not a double rounding. RZ/RM/RP step the nearest result
one unit where it lies on the wrong side of the exact value, RA where it broke a tie toward
zero. tfloat32 is float32 storage rounded to 10 mantissa bits (on the bits, every mode). Casts
to 8-bit floats saturate as the GPU's cvt.rn.satfinite does (`_to_fp8`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import PADDING_VALUES, PaddingMode, RoundingMode

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
HALVES = (D.float16, D.bfloat16)
UINT_OF_SIZE = {np.dtype(t).itemsize: np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)}
"""The unsigned NumPy dtype of each item size (for bit-pattern views)."""
Convert = Callable[[Any], Any]


def compute_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype arithmetic on `dtype` runs in: float32 for float16/bfloat16 (as GPUs do)."""
    return F32 if dtype in HALVES else dtype.np_dtype


def is_floating(dtype: DType) -> bool:
    """Float or restricted float (tfloat32, float8): values with a floating-point format."""
    return dtype.is_float or dtype.is_restricted


def round_tf32(x: Any, mode: RoundingMode | None = None) -> np.ndarray:
    """Round float32 values to tfloat32 (10 explicit mantissa bits) on the bit pattern: add a
    bias to the sign-magnitude bits and clear the low 13. The bias by `mode` (None: RN): RN
    0xFFF plus the last kept bit (ties to even), RA 0x1000, RZ 0, RM/RP 0x1FFF where the
    magnitude rounds up (negative / positive values). A value rounding past the largest finite
    becomes infinity, infinities stay, NaNs stay NaN (quieted, payload truncated). The Triton
    helper `_tc_round_tf32` takes the same steps. In place: this is on the hot path of float32
    matmuls."""
    f = np.asarray(x, F32)
    u = f.reshape(-1).view(np.uint32)
    if mode is None or mode is RoundingMode.RN:
        r = u >> 13
        r &= 1
        r += 0xFFF
    elif mode in (RoundingMode.RM, RoundingMode.RP):  # up in magnitude when the sign says so
        r = np.where((u >> 31 == 1) == (mode is RoundingMode.RM), np.uint32(0x1FFF), np.uint32(0))
    else:
        r = np.full_like(u, 0x1000 if mode is RoundingMode.RA else 0)
    r += u
    r &= 0xFFFFE000
    nan = np.isnan(f.reshape(-1))
    if nan.any():
        r[nan] = (u[nan] & 0xFFFFE000) | 0x00400000
    return r.view(F32).reshape(f.shape)


def _f64_to_f32_odd(x: Any) -> np.ndarray:
    """float64 → float32 rounding to odd: truncate, then set the last bit if inexact. A later
    round-to-nearest to a format of at most 22 mantissa bits is then correctly rounded."""
    x = np.asarray(x, F64)
    r = x.astype(F32)
    r64 = r.astype(F64)
    bits = np.asarray(r).view(np.uint32)
    bits = np.where(np.abs(r64) > np.abs(x), bits - 1, bits)
    return np.where(r64 != x, bits | 1, bits).astype(np.uint32).view(F32)


def _round_nearest(wide: Any, src: np.dtype, dst: DType) -> Any:
    """Round `wide` (float32 or float64 values; float64 may be rounded to odd) to `dst` (a float
    type), nearest even."""
    if dst is D.float64 or dst is D.float32 or dst is D.float16:
        return wide.astype(dst.np_dtype, copy=False)
    if src == F64:
        wide = _f64_to_f32_odd(wide)
    return wide.astype(dst.np_dtype)


def _directed(rn: Any, diff: Any, dst: DType, mode: RoundingMode) -> Any:
    """Turn the nearest-even result `rn` into RZ/RM/RP by stepping one unit in the last place
    where it lies on the wrong side of the exact value, into RA by stepping away from zero at
    the ties it broke toward zero; `diff` is exact - rn (exact itself: both are narrow values
    or rn is the exact value's nearest; NaN where nothing is to fix). Formats are
    sign-magnitude."""
    rn = np.asarray(rn)
    r64 = rn.astype(F64)
    diff = np.asarray(diff, F64)
    above, below = diff < 0, diff > 0  # rn above / below the exact value
    away = ((r64 > 0) & above) | ((r64 < 0) & below)  # |rn| > |exact|
    if mode is RoundingMode.RA:
        fix = (above | below) & ~away
    else:
        fix = away if mode is RoundingMode.RZ else above if mode is RoundingMode.RM else below
    if not fix.any():
        return rn
    ut = UINT_OF_SIZE[rn.dtype.itemsize]
    sign = ut.type(1 << (8 * ut.itemsize - 1) if dst.signed else 0)
    bits = rn.view(ut)
    mag = bits & ~sign
    negative = (r64 < 0) | ((r64 == 0) & above)  # the exact value's sign
    moved = (np.where(away, mag - 1, mag + 1) | np.where(negative, sign, ut.type(0))).astype(ut)
    if mode is RoundingMode.RA:  # a tie: the exact value is halfway to the next value away
        with np.errstate(invalid="ignore"):
            fix &= 2 * np.abs(diff) == np.abs(moved.view(rn.dtype).astype(F64) - r64)
    return np.where(fix, moved, bits).astype(ut).view(rn.dtype)


def _float_to_int(x: Any, dst: np.dtype) -> Any:
    """Truncate toward zero, saturating at the type's range, NaN → 0 (like PTX cvt.rzi)."""
    w = np.asarray(x).astype(F64)
    info = np.iinfo(dst)
    big, small = w >= float(info.max), w <= float(info.min)
    bad = big | small | (w != w)
    r = np.where(bad, 0.0, w).astype(dst)
    return np.where(big, dst.type(info.max), np.where(small, dst.type(info.min), r))


def _int_to_f64(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integers (or bools) as float64 rounded to nearest, and the exact error x - result (as a
    float64: the parts of a 64-bit integer split at bit 32 make every step exact)."""
    x = np.asarray(x)
    r = x.astype(F64)
    if x.dtype.itemsize < 8:
        return r, np.zeros_like(r)
    high = (x >> 32).astype(F64) * 2.0**32
    return r, (high - r) + (x & 0xFFFFFFFF).astype(F64)


def _to_odd(r: np.ndarray, err: np.ndarray) -> np.ndarray:
    """The float64 value r + err (err below half an ulp of r) rounded to odd."""
    even = (r.view(np.uint64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(r, np.where(err > 0, np.inf, -np.inf)), r)


def fused_multiply_add(a: Any, b: Any, c: Any, dst: DType) -> np.ndarray:
    """a * b + c rounded once to nearest `dst` (float16, bfloat16 or float32; the operands of
    that type). The product is exact in float64 (at most 48 significant bits); the sum rounded
    to float64 and its exact error (TwoSum) give the sum rounded to odd, which then rounds to
    `dst` correctly (a double rounding would not: a product exactly halfway between two
    float32 numbers plus a tiny addend rounded to the tie in float64, then to even)."""
    with np.errstate(all="ignore"):
        p = np.asarray(a, F64) * np.asarray(b, F64)
        c = np.asarray(c, F64)
        s = p + c
        t = s - p
        err = np.where(np.isfinite(s), (p - (s - t)) + (c - t), 0.0)
        return _round_nearest(_to_odd(s, err), F64, dst)


def _int_to_float(dst: DType, mode: RoundingMode | None) -> Convert:
    """Integer (or bool) to float conversion, correctly rounded by `mode` (None: nearest)."""
    if mode is None and dst in (D.float16, D.float32, D.float64):
        return lambda x: np.asarray(x).astype(dst.np_dtype)  # C conversions round correctly

    def convert(x: Any) -> Any:
        r, err = _int_to_f64(x)
        if dst is D.float64:
            rn, diff = r, err
        else:
            odd = _to_odd(r, err)
            rn = _round_nearest(odd, F64, dst)
            diff = odd - rn.astype(F64)
        return rn if mode is None else _directed(rn, diff, dst, mode)
    return convert


def _to_tf32(src: DType, mode: RoundingMode | None) -> Convert:
    """Conversion to tfloat32: to float32, exactly or rounded to odd (from float64 and
    integers), then rounded to 10 mantissa bits by `mode` (round_tf32)."""
    if src is D.float64:
        return lambda x: round_tf32(_f64_to_f32_odd(x), mode)
    if is_floating(src):
        return lambda x: round_tf32(np.asarray(x).astype(F32, copy=False), mode)
    return lambda x: round_tf32(_f64_to_f32_odd(_to_odd(*_int_to_f64(x))), mode)


def _float_to_float(src: DType, dst: DType, mode: RoundingMode | None) -> Convert:
    """Float to float conversion, correctly rounded by `mode` (None: nearest)."""
    wide = F64 if src is D.float64 else F32

    def nearest(x: Any) -> Any:
        return _round_nearest(np.asarray(x).astype(wide, copy=False), wide, dst)
    if mode is None:
        return nearest

    def directed(x: Any) -> Any:
        rn = nearest(x)
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, nothing to fix
            diff = np.asarray(x).astype(F64) - rn.astype(F64)
        return _directed(rn, diff, dst, mode)
    return directed


def _to_fp8(src: DType, dst: DType, mode: RoundingMode | None) -> Convert:
    """Conversion to an 8-bit float as the GPU's `cvt.rn.satfinite` does it: an input beyond
    the largest finite value (an infinity too) becomes that value with its sign, then the
    value rounds (so 464, a tie, and 500 give 448 in float8_e4m3fn, where ml_dtypes gives
    NaN; 1e5 and inf give 57344 in float8_e5m2, not inf); a NaN stays a NaN. Integers and
    float64 clip in float64 (exact within the range), the other floats in float32."""
    limit = dst.max_finite
    wide = F64 if src is D.float64 or not is_floating(src) else F32
    convert = _float_to_float(D.float64 if wide == F64 else D.float32, dst, mode)
    return lambda x: convert(np.clip(np.asarray(x).astype(wide, copy=False), -limit, limit))


def make_cast(src: DType, dst: DType, rounding: RoundingMode | None = None) -> Convert:
    """A function converting values of `src` to `dst` with the language's conversion rules
    (`rounding` RN/RZ/RM/RP/RA applies to float results; None and RN are nearest even)."""
    if src is dst or (src is D.tfloat32 and dst is D.float32):
        return lambda x: x
    dnp = dst.np_dtype
    if dst is D.bool_:
        if is_floating(src):
            wide = F64 if src is D.float64 else F32
            return lambda x: np.not_equal(np.asarray(x).astype(wide), 0)
        return lambda x: np.not_equal(x, 0)
    if not is_floating(dst):
        if is_floating(src):
            return lambda x: _float_to_int(x, dnp)
        return lambda x: np.asarray(x).astype(dnp)
    mode = rounding if rounding in (RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP, RoundingMode.RA) else None
    if dst is D.tfloat32:
        return _to_tf32(src, mode)
    if dst in D.FLOAT8_VALUE_DTYPES:
        return _to_fp8(src, dst, mode)
    if is_floating(src):
        return _float_to_float(src, dst, mode)
    return _int_to_float(dst, mode)


def fill_value(mode: PaddingMode, dtype: DType) -> np.generic:
    """The padding element of a load for `mode` in `dtype` (0 where the value does not exist in
    an integer or bool type)."""
    value = PADDING_VALUES[mode]
    if not is_floating(dtype):
        value = 0
    return np.array(value, F64).astype(dtype.np_dtype)[()]


def scalar(value: Any, dtype: DType) -> np.generic:
    """A Python number as a NumPy scalar of `dtype` (tfloat32 rounded); an integer out of the
    type's range raises OverflowError."""
    if dtype is D.tfloat32:
        return round_tf32(np.float32(value))[()]
    return np.array(value, dtype=dtype.np_dtype)[()]
