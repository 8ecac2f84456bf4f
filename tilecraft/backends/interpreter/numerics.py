"""Numeric helpers of the interpreter: dtype conversions with the language's rounding rules.

Conversions are built once per op (`make_cast`) and return a function of one value (NumPy array
or scalar). Float-to-float casts round to nearest even by default, on the exact value: from
float64 to the narrow formats the value first goes to float32 by round-to-odd, so the final
rounding is not a double rounding. tfloat32 is float32 storage rounded to 10 mantissa bits.
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
_UINT = {np.dtype(t).itemsize: np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)}
Convert = Callable[[Any], Any]


def compute_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype arithmetic on `dtype` runs in: float32 for float16/bfloat16 (as GPUs do)."""
    return F32 if dtype in HALVES else dtype.np_dtype


def is_floating(dtype: DType) -> bool:
    """Float or restricted float (tfloat32, float8): values with a floating-point format."""
    return dtype.is_float or dtype.is_restricted


def round_tf32(x: Any) -> np.ndarray:
    """Round float32 values to tfloat32 (10 explicit mantissa bits), nearest even on the bit
    pattern; infinities stay, NaNs stay NaN (quieted). In-place steps: this is on the hot path
    of float32 matmuls."""
    f = np.asarray(x, F32)
    u = f.reshape(-1).view(np.uint32)
    r = u >> 13
    r &= 1
    r += 0xFFF
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
    """Round `wide` (float32 or float64 values) to `dst` (a float type), nearest even."""
    if dst is D.float64 or dst is D.float32 or dst is D.float16:
        return wide.astype(dst.np_dtype, copy=False)
    if src == F64:
        wide = _f64_to_f32_odd(wide)
    if dst is D.tfloat32:
        return round_tf32(wide)
    return wide.astype(dst.np_dtype)


def _directed(rn: Any, exact: Any, dst: DType, mode: RoundingMode) -> Any:
    """Turn the nearest-even result `rn` into RZ/RM/RP by stepping one unit in the last place
    where `rn` lies on the wrong side of the exact value (formats are sign-magnitude)."""
    rn = np.asarray(rn)
    r64 = rn.astype(F64)
    exact = np.asarray(exact, F64)
    if mode is RoundingMode.RZ:
        fix = np.abs(r64) > np.abs(exact)
    elif mode is RoundingMode.RM:
        fix = r64 > exact
    else:
        fix = r64 < exact
    if not fix.any():
        return rn
    ut = _UINT[rn.dtype.itemsize]
    step = ut.type(1 << 13 if dst is D.tfloat32 else 1)
    sign = ut.type(1 << (8 * ut.itemsize - 1) if dst.signed else 0)
    bits = rn.view(ut)
    mag = bits & ~sign
    toward_zero = np.abs(r64) > np.abs(exact)
    moved = np.where(toward_zero, mag - step, mag + step) | np.where(exact < 0, sign, ut.type(0))
    return np.where(fix, moved, bits).astype(ut).view(rn.dtype)


def _float_to_int(x: Any, dst: np.dtype) -> Any:
    """Truncate toward zero, saturating at the type's range, NaN → 0 (like PTX cvt.rzi)."""
    w = np.asarray(x).astype(F64)
    info = np.iinfo(dst)
    big, small = w >= float(info.max), w <= float(info.min)
    bad = big | small | (w != w)
    r = np.where(bad, 0.0, w).astype(dst)
    return np.where(big, dst.type(info.max), np.where(small, dst.type(info.min), r))


def _widen(x: Any, wide: np.dtype) -> np.ndarray:
    return np.asarray(x).astype(wide, copy=False)


def make_cast(src: DType, dst: DType, rounding: RoundingMode | None = None) -> Convert:
    """A function converting values of `src` to `dst` with the language's conversion rules."""
    if src is dst or (src is D.tfloat32 and dst is D.float32):
        return lambda x: x
    dnp = dst.np_dtype
    if dst is D.bool_:
        if is_floating(src):
            wide = F64 if src is D.float64 else F32
            return lambda x: np.not_equal(np.asarray(x).astype(wide), 0)
        return lambda x: np.not_equal(x, 0)
    if not is_floating(src):  # bool or integer source
        if not is_floating(dst) or dst in (D.float16, D.float32, D.float64):
            return lambda x: np.asarray(x).astype(dnp)
        return lambda x: _round_nearest(np.asarray(x).astype(F64), F64, dst)
    wide = F64 if src is D.float64 else F32
    if not is_floating(dst):
        return lambda x: _float_to_int(x, dnp)
    if rounding in (RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP):
        mode = rounding
        return lambda x: _directed(_round_nearest(_widen(x, wide), wide, dst), x, dst, mode)
    return lambda x: _round_nearest(_widen(x, wide), wide, dst)


def fill_value(mode: PaddingMode | None, dtype: DType) -> np.generic:
    """The padding element of a load for `mode` in `dtype` (0 where the value does not exist in
    an integer or bool type)."""
    value = PADDING_VALUES[mode or PaddingMode.UNDETERMINED]
    if not is_floating(dtype):
        value = 0
    return np.array(value, F64).astype(dtype.np_dtype)[()]


def scalar(value: Any, dtype: DType) -> np.generic:
    """A Python number as a NumPy scalar of `dtype` (tfloat32 rounded); an integer out of the
    type's range raises OverflowError."""
    if dtype is D.tfloat32:
        return round_tf32(np.float32(value))[()]
    return np.array(value, dtype=dtype.np_dtype)[()]
