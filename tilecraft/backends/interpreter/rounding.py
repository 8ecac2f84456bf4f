"""Correctly rounded float arithmetic in the four IEEE rounding modes, vectorized with NumPy: the
reference that every backend matches bit for bit.

`rounded_binary` (x + y, x - y, x * y, x / y) and `rounded_sqrt` round the exact result in one of
RN (to nearest even), RZ (toward zero), RM (toward -inf) and RP (toward +inf), on float16,
bfloat16, float32 or float64 operands, the result in the same dtype. Special values follow IEEE
754 (an exact zero sum is -0.0 under RM, +0.0 otherwise, unless both operands are -0.0; overflow
gives the largest finite value where the mode rounds toward zero); every NaN result is the
canonical quiet NaN (positive, only the top mantissa bit set), so all backends agree on its bits.
`flush_subnormals` turns float32 subnormals into zeros of the same sign (flush_to_zero).

Method: compute r, the result rounded to nearest, and sigma, the sign of (exact - r), exactly;
then step r by one unit in the last place toward the exact value where the mode asks for it
(`_directed`, on the sign and magnitude bits, so subnormals, zeros and infinities step right).

* float16, bfloat16, float32 compute in float64: v = a op b. Products are exact (<= 48 bits);
  sums carry their exact error (TwoSum); a float64 quotient or square root equals a float32
  value only if the exact one does (53 >= 2 * 24 + 2), so rounding v twice (float64, then the
  target) is harmless and, when v != r, sign(v - r) is sigma. float64 -> float16 / bfloat16
  goes through float32 rounded to odd, so that second rounding is not a double rounding either.
* float64: sums use TwoSum (additions only). Products, quotients and square roots compare
  integers: with |a| = Ma * 2**Ea, |b| = Mb * 2**Eb (53-bit significands) and |r| = Mr * 2**Er,
  sign(|a * b| - |r|) is sign(Ma * Mb - Mr * 2**(Er - Ea - Eb)), and likewise for a / b and
  sqrt(a); the 106-bit products are formed from 27-bit limbs in int64 (`_cmp`).

No step multiplies two floats whose product is inexact and then adds, so a compiler's fusion of
multiply-add into FMA cannot change the results; the Triton helpers (backends/triton/rounding.py)
mirror these functions line for line.
"""

from __future__ import annotations

import numpy as np

from ...ir.kinds import BinaryFn
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import RoundingMode

_MODE_CODE = {RoundingMode.RN: 0, RoundingMode.RZ: 1, RoundingMode.RM: 2, RoundingMode.RP: 3}
"""The rounding modes handled here, numbered as the Triton helpers number them."""

_FN_CODE = {BinaryFn.ADD: 0, BinaryFn.SUB: 1, BinaryFn.MUL: 2, BinaryFn.TRUEDIV: 3}
"""The rounded binary functions, numbered as the Triton helpers number them."""

# dtype -> (bit width, unsigned storage dtype, bits of +inf, magnitude bits of the canonical NaN)
_FORMATS: dict[DType, tuple[int, np.dtype, int, int]] = {
    D.float16: (16, np.dtype(np.uint16), 0x7C00, 0x7E00),
    D.bfloat16: (16, np.dtype(np.uint16), 0x7F80, 0x7FC0),
    D.float32: (32, np.dtype(np.uint32), 0x7F800000, 0x7FC00000),
    D.float64: (64, np.dtype(np.uint64), 0x7FF0000000000000, 0x7FF8000000000000),
}

_MASK27 = (1 << 27) - 1
_MASK52 = (1 << 52) - 1
_MASK54 = (1 << 54) - 1


# ---- helpers on bits ------------------------------------------------------------------------

def _check(dtype: DType, mode: RoundingMode) -> None:
    if dtype not in _FORMATS:
        raise TypeError(f"Rounded arithmetic is defined on float16, bfloat16, float32 and float64, not {dtype}")
    if mode not in _MODE_CODE:
        raise ValueError(f"Rounding mode {mode} is not one of RN, RZ, RM, RP")


def _sign(d: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 as int64 (0 for NaN)."""
    return (d > 0).astype(np.int64) - (d < 0).astype(np.int64)


def _to_f64(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Values of `dtype` widened (exactly) to float64."""
    if dtype is D.bfloat16:
        bits = x.view(np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _sign_mag(x: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """(sign bit, magnitude bits) of `x` (of `dtype`) as int64 arrays."""
    width, udt, _, _ = _FORMATS[dtype]
    u = x.view(udt).astype(np.uint64)
    neg = (u >> np.uint64(width - 1)).astype(np.int64)
    mag = (u & np.uint64((1 << (width - 1)) - 1)).astype(np.int64)
    return neg, mag


def _pack(neg: np.ndarray, mag: np.ndarray, dtype: DType) -> np.ndarray:
    """The values of `dtype` with these sign and magnitude bits."""
    width, udt, _, _ = _FORMATS[dtype]
    u = mag.astype(np.uint64) | (neg.astype(np.uint64) << np.uint64(width - 1))
    return u.astype(udt).view(dtype.np_dtype)


def _to_odd32(v: np.ndarray) -> np.ndarray:
    """The bits (int64) of float64 `v` rounded to float32 by rounding to odd: truncated toward
    zero, the last bit set when inexact (NaN stays a NaN)."""
    f = v.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != v) & (v == v)
    bits = f.view(np.uint32).astype(np.int64)
    bits = np.where(inexact & (np.abs(back) > np.abs(v)), bits - 1, bits)
    return bits | inexact.astype(np.int64)


def _nearest(v: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 `v` rounded to nearest even in the narrow `dtype`: (sign bit, magnitude bits, the
    rounded value as float64)."""
    if dtype is D.float32:
        r = v.astype(np.float32)
        neg, mag = _sign_mag(r, dtype)
        return neg, mag, r.astype(np.float64)
    odd = _to_odd32(v)
    neg = (odd >> 31) & 1
    if dtype is D.float16:
        r = (odd & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float16)
        _, mag = _sign_mag(r, dtype)
        return neg, mag, r.astype(np.float64)
    mag32 = odd & 0x7FFFFFFF  # bfloat16: the top half of float32, rounded to nearest even
    mag = (mag32 + 0x7FFF + ((mag32 >> 16) & 1)) >> 16
    r64 = (mag << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    return neg, mag, r64 * np.where(neg != 0, -1.0, 1.0)  # NaN: made canonical later


def _directed(neg: np.ndarray, mag: np.ndarray, sigma: np.ndarray, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Step the nearest result (sign bit, magnitude bits) one unit toward the exact value, which
    lies on side `sigma` of it, where mode (0 RN, 1 RZ, 2 RM, 3 RP) rounds that way."""
    if mode == 1:
        move = (mag != 0) & (sigma == np.where(neg != 0, 1, -1))
    elif mode == 2:
        move = sigma < 0
    elif mode == 3:
        move = sigma > 0
    else:
        return neg, mag
    up = (mag == 0) | ((sigma > 0) == (neg == 0))  # away from zero (from zero: to sigma's side)
    new_neg = np.where(mag == 0, (sigma < 0).astype(np.int64), neg)
    new_mag = np.where(up, mag + 1, mag - 1)
    return np.where(move, new_neg, neg), np.where(move, new_mag, mag)


def _canonical_nan(neg: np.ndarray, mag: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    _, _, inf, nan = _FORMATS[dtype]
    isnan = mag > inf
    return np.where(isnan, 0, neg), np.where(isnan, nan, mag)


# ---- exact signs on float64 -----------------------------------------------------------------

def _two_sum_err(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The error (a + b) - s of s = fl(a + b), exactly (Knuth's TwoSum)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def _decompose(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, E), int64, with |a| = M * 2**E and 2**52 <= M < 2**53, for finite nonzero float64 a
    (subnormals are scaled by 2**64 first)."""
    sub = ((a.view(np.int64) >> 52) & 0x7FF) == 0
    u = np.where(sub, a * 2.0 ** 64, a).view(np.int64)
    e = (u >> 52) & 0x7FF
    return (u & _MASK52) | (1 << 52), e - np.where(sub, 1139, 1075)


def _decompose_raw(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, E), int64, with |r| = M * 2**E, M < 2**53 read off the bits (not normalized)."""
    u = r.view(np.int64)
    e = (u >> 52) & 0x7FF
    return (u & _MASK52) | np.where(e != 0, 1 << 52, 0), np.maximum(e, 1) - 1075


def _cmp(x: np.ndarray, s: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """sign(x * 2**s - y * z), int64, for int64 0 <= x, y, z < 2**54 and s >= 0 with
    x * 2**s < 2**108: both sides as (hi, lo) in base 2**54, y * z from 27-bit limbs."""
    s = np.clip(s, 0, 117)
    y1, y0, z1, z0 = y >> 27, y & _MASK27, z >> 27, z & _MASK27
    mid = y1 * z0 + y0 * z1
    lo = y0 * z0 + ((mid & _MASK27) << 27)
    hi = y1 * z1 + (mid >> 27) + (lo >> 54)
    lo = lo & _MASK54
    s54 = np.minimum(s, 54)
    xhi = (x >> (54 - s54)) << (np.maximum(s, 54) - 54)
    xlo = (x & ((np.int64(1) << (54 - s54)) - 1)) << np.minimum(s, 53)
    return np.where(xhi != hi, _sign(xhi - hi), _sign(xlo - lo))


def _finite(a: np.ndarray) -> np.ndarray:
    return np.abs(a) < np.inf


def _sigma64(fn: int, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """sign(exact - r) for r = RN(a op b) on float64 (b already negated for a subtraction); 0
    where the exact result is infinite or NaN."""
    finite = _finite(a) & _finite(b)
    r_sign = np.where(r.view(np.int64) < 0, -1, 1)
    if fn <= 1:
        sig = _sign(_two_sum_err(a, b, r))
        return np.where(finite, np.where(_finite(r), sig, -r_sign), 0)
    ma, ea = _decompose(a)
    mb, eb = _decompose(b)
    mr, er = _decompose_raw(r)
    if fn == 2:  # sign(|a * b| - |r|)
        c = -_cmp(mr, er - ea - eb, ma, mb)
    else:  # sign(|a| - |r| * |b|), one bit of headroom: Ea - Er - Eb >= -1
        c = _cmp(ma, ea - er - eb + 1, mr, mb * 2)
    sig = np.where(~_finite(r), -r_sign, np.where(r == 0, r_sign, c * r_sign))
    return np.where(finite & (a != 0) & (b != 0), sig, 0)


def _sigma_sqrt64(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """sign(sqrt(a) - r) = sign(a - r * r) for r = RN(sqrt(a)) on float64 (r is normal)."""
    ma, ea = _decompose(a)
    mr, er = _decompose_raw(r)
    return np.where((a > 0) & (a < np.inf), _cmp(ma, ea - 2 * er, mr, mr), 0)


# ---- the public functions -------------------------------------------------------------------

def rounded_binary(fn: BinaryFn, x: np.ndarray, y: np.ndarray, dtype: DType, mode: RoundingMode) -> np.ndarray:
    """x fn y (ADD, SUB, MUL or TRUEDIV) on values of float dtype `dtype`, correctly rounded in
    `mode` (RN, RZ, RM or RP); the result has `dtype` and the operands' broadcast shape.
    Operands are converted to `dtype` first (a no-op for values of that storage type)."""
    _check(dtype, mode)
    if fn not in _FN_CODE:
        raise ValueError(f"{fn} is not a rounded binary function (ADD, SUB, MUL, TRUEDIV)")
    code, m = _FN_CODE[fn], _MODE_CODE[mode]
    x, y = np.broadcast_arrays(np.asarray(x, dtype.np_dtype), np.asarray(y, dtype.np_dtype))
    shape = x.shape
    x, y = np.ravel(x), np.ravel(y)
    with np.errstate(all="ignore"):
        a, b = _to_f64(x, dtype), _to_f64(y, dtype)
        if code == 1:
            b = b * -1.0
        if dtype is D.float64:
            v = a + b if code <= 1 else a * b if code == 2 else a / b
            neg, mag = _sign_mag(v, dtype)
            sigma = _sigma64(code, a, b, v)
        else:
            if code <= 1:
                v = a + b
                sv = _sign(_two_sum_err(a, b, v))
            else:
                v = a * b if code == 2 else a / b
                sv = np.zeros(v.shape, np.int64)
            neg, mag, r64 = _nearest(v, dtype)
            sigma = np.where(_finite(v), np.where(r64 != v, _sign(v - r64), sv), 0)
        neg, mag = _directed(neg, mag, sigma, m)
        if code <= 1 and m == 2:  # an exact zero sum is -0.0 under RM unless both operands are +0.0
            both_pos_zero = (a.view(np.int64) == 0) & (b.view(np.int64) == 0)
            neg = np.where((mag == 0) & (sigma == 0) & ~both_pos_zero, 1, neg)
        neg, mag = _canonical_nan(neg, mag, dtype)
    return _pack(neg, mag, dtype).reshape(shape)


def rounded_sqrt(x: np.ndarray, dtype: DType, mode: RoundingMode) -> np.ndarray:
    """sqrt(x) on values of float dtype `dtype`, correctly rounded in `mode` (RN, RZ, RM, RP)."""
    _check(dtype, mode)
    m = _MODE_CODE[mode]
    x = np.asarray(x, dtype.np_dtype)
    shape = x.shape
    with np.errstate(all="ignore"):
        a = _to_f64(np.ravel(x), dtype)
        v = np.sqrt(a)
        if dtype is D.float64:
            neg, mag = _sign_mag(v, dtype)
            sigma = _sigma_sqrt64(a, v)
        else:
            neg, mag, r64 = _nearest(v, dtype)
            sigma = np.where(_finite(v), _sign(v - r64), 0)
        neg, mag = _directed(neg, mag, sigma, m)
        neg, mag = _canonical_nan(neg, mag, dtype)
    return _pack(neg, mag, dtype).reshape(shape)


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """float32 values with subnormals (nonzero, |x| < 2**-126) replaced by zeros of their sign."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise TypeError(f"Flush to zero is defined on float32 values, not {x.dtype}")
    bits = x.view(np.uint32)
    flushed = np.where((bits & np.uint32(0x7F800000)) == 0, bits & np.uint32(0x80000000), bits)
    return flushed.astype(np.uint32).view(np.float32).reshape(x.shape)
