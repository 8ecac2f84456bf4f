"""Correctly rounded arithmetic in the four IEEE rounding modes, as `@triton.jit` helper source
for generated kernels: the Triton twin of `backends/interpreter/rounding.py`, whose docstring
gives the method and the semantics. Each helper mirrors the NumPy function of the same name
(less `_tcr` and the dtype suffix; `_tcr_binary_*` / `_tcr_sqrt_*` / `_tcr_flush_f32` are
`rounded_binary` / `rounded_sqrt` / `flush_subnormals`), so both give the same bits.

    name = rounded_call(BinaryFn.ADD, float32, RoundingMode.RZ)   # '_tcr_add_f32_rz'
    ... f"{name}(x, y)" ...                                       # x, y: float32 tiles
    ... f"{cast_call(float16)}(x, {CAST_MODES[mode]})" ...        # astype(float16, mode)
    ... f"{FLUSH_HELPER}(x)" ...                                  # flush_to_zero on float32

A rounded helper takes operands holding values of its dtype (in that dtype, or widened to a
wider float type: float16/bfloat16 as float32, say; the widening is exact) and returns its
dtype; x and y broadcast as Triton's operators do. The mode is baked into the name (one thin
wrapper per fn, dtype and mode around `_tcr_binary_<dtype>(x, y, FN, MODE)` /
`_tcr_sqrt_<dtype>(x, MODE)`, whose FN and MODE are tl.constexpr). HELPERS maps each name to
its source (`@triton.jit def ...`), NEEDS to the helpers it calls; a generated module copies in
what it calls, as with `helpers.py` (all names here start with `_tcr_`).

The same code runs under Triton's CPU interpreter and compiled for NVIDIA GPUs: no libdevice, no
inline assembly; bfloat16 is handled as bits (the interpreter keeps it as raw bits); float64 is
divided with `/` and rooted with `tl.sqrt`, which round to nearest on float64 in both (the
float32 ones do not on the GPU, so float16/bfloat16/float32 compute in float64). Products that
are inexact never feed an addition, so Triton's default fusion of multiply-add into FMA on the
GPU cannot change a result (it does fuse some of the exact ones).
"""

from __future__ import annotations

from ...ir.kinds import BinaryFn, UnaryFn
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import RoundingMode

HELPERS: dict[str, str] = {}
NEEDS: dict[str, tuple[str, ...]] = {}  # helper -> the helpers it calls

FLUSH_HELPER = "_tcr_flush_f32"
"""flush_to_zero: `FLUSH_HELPER(x)` on float32 makes subnormals zeros of their sign."""

_MODES = {RoundingMode.RN: (0, "rn"), RoundingMode.RZ: (1, "rz"), RoundingMode.RM: (2, "rm"),
          RoundingMode.RP: (3, "rp")}
_FNS = {BinaryFn.ADD: (0, "add"), BinaryFn.SUB: (1, "sub"), BinaryFn.MUL: (2, "mul"),
        BinaryFn.TRUEDIV: (3, "truediv")}
_SHORT = {D.float16: "f16", D.bfloat16: "bf16", D.float32: "f32", D.float64: "f64"}
# short name -> (bits of +inf, magnitude bits of the canonical NaN)
_SPECIAL = {"f16": (0x7C00, 0x7E00), "bf16": (0x7F80, 0x7FC0), "f32": (0x7F800000, 0x7FC00000),
            "f64": (0x7FF0000000000000, 0x7FF8000000000000)}


def rounded_call(fn: BinaryFn | UnaryFn, dtype: DType, mode: RoundingMode) -> str:
    """The helper computing `fn` (ADD, SUB, MUL, TRUEDIV: called as `name(x, y)`; SQRT: as
    `name(x)`) on `dtype` (float16, bfloat16, float32, float64) rounded in `mode` (RN, RZ, RM,
    RP)."""
    if dtype not in _SHORT:
        raise TypeError(f"Rounded arithmetic is defined on float16, bfloat16, float32 and float64, not {dtype}")
    if mode not in _MODES:
        raise ValueError(f"Rounding mode {mode} is not one of RN, RZ, RM, RP")
    if fn is UnaryFn.SQRT:
        op = "sqrt"
    elif fn in _FNS:
        op = _FNS[fn][1]
    else:
        raise ValueError(f"{fn} is not a rounded function (ADD, SUB, MUL, TRUEDIV, SQRT)")
    return f"_tcr_{op}_{_SHORT[dtype]}_{_MODES[mode][1]}"


CAST_MODES = {RoundingMode.RZ: 1, RoundingMode.RM: 2, RoundingMode.RP: 3, RoundingMode.RA: 4}
"""The MODE argument of the cast helpers for each mode they round in."""


def cast_call(dtype: DType) -> str:
    """The helper converting a float of another format to `dtype` (float16, bfloat16, float32),
    called as `name(x, CAST_MODES[mode])`, correctly rounded in that mode."""
    if dtype not in _SHORT or dtype is D.float64:
        raise TypeError(f"Rounded casts go to float16, bfloat16 and float32, not {dtype}")
    return f"_tcr_cast_{_SHORT[dtype]}"


def _helper(name: str, body: str, needs: tuple[str, ...] = ()) -> None:
    assert name not in HELPERS, f"two helpers named {name}"
    HELPERS[name] = f"@triton.jit\ndef {name}{body}"
    NEEDS[name] = needs


# ---- shared pieces --------------------------------------------------------------------------

_helper("_tcr_sign", '''(d):
    """-1, 0 or 1 (int32) for the sign of float d (0 for NaN)."""
    return tl.where(d > 0, 1, tl.where(d < 0, -1, 0))
''')

_helper("_tcr_to_f64", '''(x):
    """x widened (exactly) to float64; bfloat16 through its bits (raw bits in the interpreter)."""
    if x.dtype == tl.bfloat16:
        bits = tl.cast(tl.cast(x, tl.uint16, bitcast=True), tl.uint32) << 16
        return tl.cast(tl.cast(bits, tl.float32, bitcast=True), tl.float64)
    else:
        return tl.cast(x, tl.float64)
''')

_helper("_tcr_two_sum_err", '''(a, b, s):
    """The error (a + b) - s of s = fl(a + b), exactly (Knuth's TwoSum: additions only)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)
''')

_helper("_tcr_directed", '''(neg, mag, sigma, MODE: tl.constexpr):
    """Step the nearest result (sign bit, magnitude bits: int64) one unit toward the exact value,
    which lies on side sigma of it, where MODE (0 RN, 1 RZ, 2 RM, 3 RP) rounds that way."""
    if MODE == 0:
        out_neg = neg
        out_mag = mag
    else:
        if MODE == 1:
            move = (mag != 0) & (sigma == tl.where(neg != 0, 1, -1))
        elif MODE == 2:
            move = sigma < 0
        else:
            move = sigma > 0
        up = (mag == 0) | ((sigma > 0) == (neg == 0))  # away from zero (from zero: to sigma's side)
        new_neg = tl.where(mag == 0, tl.where(sigma < 0, 1, 0), neg)
        new_mag = tl.where(up, mag + 1, mag - 1)
        out_neg = tl.where(move, new_neg, neg)
        out_mag = tl.where(move, new_mag, mag)
    return out_neg, out_mag
''')

_helper("_tcr_exact_zero_sign", '''(neg, mag, sigma, a, b, FN: tl.constexpr, MODE: tl.constexpr):
    """The sign of an exact zero sum (FN 0 add, 1 sub with b negated): -0.0 under RM unless both
    addends are +0.0, as IEEE says."""
    if FN <= 1:
        if MODE == 2:
            pos_zeros = (tl.cast(a, tl.int64, bitcast=True) == 0) & (tl.cast(b, tl.int64, bitcast=True) == 0)
            neg = tl.where((mag == 0) & (sigma == 0) & (~pos_zeros), 1, neg)
    return neg
''')

_helper("_tcr_canonical_nan", '''(neg, mag, INF: tl.constexpr, NAN: tl.constexpr):
    """Any NaN becomes the canonical quiet NaN (sign 0, magnitude bits NAN)."""
    isnan = mag > INF
    return tl.where(isnan, 0, neg), tl.where(isnan, NAN, mag)
''')

# ---- exact signs on float64 -----------------------------------------------------------------

_helper("_tcr_decompose", '''(a):
    """(M, E), int64, with |a| = M * 2**E and 2**52 <= M < 2**53, for finite nonzero float64 a
    (subnormals are scaled by 2**64 first)."""
    sub = ((tl.cast(a, tl.int64, bitcast=True) >> 52) & 0x7FF) == 0
    u = tl.cast(tl.where(sub, a * 18446744073709551616.0, a), tl.int64, bitcast=True)
    e = (u >> 52) & 0x7FF
    return (u & 0xFFFFFFFFFFFFF) | 0x10000000000000, e - tl.where(sub, 1139, 1075)
''')

_helper("_tcr_decompose_raw", '''(r):
    """(M, E), int64, with |r| = M * 2**E, M < 2**53 read off the bits (not normalized)."""
    u = tl.cast(r, tl.int64, bitcast=True)
    e = (u >> 52) & 0x7FF
    return (u & 0xFFFFFFFFFFFFF) | tl.where(e != 0, 0x10000000000000, 0), tl.maximum(e, 1) - 1075
''')

_helper("_tcr_cmp", '''(x, s, y, z):
    """sign(x * 2**s - y * z), int32, for int64 0 <= x, y, z < 2**54 and s >= 0 with
    x * 2**s < 2**108: both sides as (hi, lo) in base 2**54, y * z from 27-bit limbs."""
    s = tl.minimum(tl.maximum(s, 0), 117)
    y1 = y >> 27
    y0 = y & 0x7FFFFFF
    z1 = z >> 27
    z0 = z & 0x7FFFFFF
    mid = y1 * z0 + y0 * z1
    lo = y0 * z0 + ((mid & 0x7FFFFFF) << 27)
    hi = y1 * z1 + (mid >> 27) + (lo >> 54)
    lo = lo & 0x3FFFFFFFFFFFFF
    s54 = tl.minimum(s, 54)
    xhi = (x >> (54 - s54)) << (tl.maximum(s, 54) - 54)
    one = tl.full([], 1, tl.int64)
    xlo = (x & ((one << (54 - s54)) - 1)) << tl.minimum(s, 53)
    return tl.where(xhi != hi, tl.where(xhi > hi, 1, -1), tl.where(xlo > lo, 1, tl.where(xlo < lo, -1, 0)))
''')

_helper("_tcr_sigma64", '''(a, b, r, FN: tl.constexpr):
    """sign(exact - r) (int32) for r = RN(a op b) on float64, op by FN (0 add, 1 sub with b
    already negated, 2 mul, 3 div); 0 where the exact result is infinite or NaN."""
    finite = (tl.abs(a) < float("inf")) & (tl.abs(b) < float("inf"))
    r_sign = tl.where(tl.cast(r, tl.int64, bitcast=True) < 0, -1, 1)
    r_finite = tl.abs(r) < float("inf")
    if FN <= 1:
        sig = _tcr_sign(_tcr_two_sum_err(a, b, r))
        return tl.where(finite, tl.where(r_finite, sig, -r_sign), 0)
    else:
        ma, ea = _tcr_decompose(a)
        mb, eb = _tcr_decompose(b)
        mr, er = _tcr_decompose_raw(r)
        if FN == 2:
            c = -_tcr_cmp(mr, er - ea - eb, ma, mb)
        else:
            c = _tcr_cmp(ma, ea - er - eb + 1, mr, mb * 2)
        sig = tl.where(r_finite, tl.where(r == 0, r_sign, c * r_sign), -r_sign)
        return tl.where(finite & (a != 0) & (b != 0), sig, 0)
''', ("_tcr_sign", "_tcr_two_sum_err", "_tcr_decompose", "_tcr_decompose_raw", "_tcr_cmp"))

_helper("_tcr_sigma_sqrt64", '''(a, r):
    """sign(sqrt(a) - r) = sign(a - r * r) (int32) for r = RN(sqrt(a)) on float64."""
    ma, ea = _tcr_decompose(a)
    mr, er = _tcr_decompose_raw(r)
    return tl.where((a > 0) & (a < float("inf")), _tcr_cmp(ma, ea - 2 * er, mr, mr), 0)
''', ("_tcr_decompose", "_tcr_decompose_raw", "_tcr_cmp"))

# ---- rounding float64 to nearest in each format, packing ------------------------------------

_helper("_tcr_to_odd32", '''(v):
    """The bits (int32) of float64 v rounded to float32 by rounding to odd: truncated toward
    zero, the last bit set when inexact (NaN stays a NaN)."""
    f = tl.cast(v, tl.float32)
    back = tl.cast(f, tl.float64)
    inexact = (back != v) & (v == v)
    bits = tl.cast(f, tl.int32, bitcast=True)
    bits = tl.where(inexact & (tl.abs(back) > tl.abs(v)), bits - 1, bits)
    return bits | tl.cast(inexact, tl.int32)
''')

_helper("_tcr_nearest_f32", '''(v):
    """float64 v rounded to nearest float32: (sign bit, magnitude bits, the result in float64)."""
    r = tl.cast(v, tl.float32)
    bits = tl.cast(r, tl.int32, bitcast=True)
    return tl.cast((bits >> 31) & 1, tl.int64), tl.cast(bits & 0x7FFFFFFF, tl.int64), tl.cast(r, tl.float64)
''')

_helper("_tcr_nearest_f16", '''(v):
    """float64 v rounded to nearest float16 (through float32 rounded to odd)."""
    r = tl.cast(tl.cast(_tcr_to_odd32(v), tl.float32, bitcast=True), tl.float16)
    bits = tl.cast(r, tl.int16, bitcast=True)
    return tl.cast((bits >> 15) & 1, tl.int64), tl.cast(bits & 0x7FFF, tl.int64), tl.cast(r, tl.float64)
''', ("_tcr_to_odd32",))

_helper("_tcr_nearest_bf16", '''(v):
    """float64 v rounded to nearest bfloat16 (through float32 rounded to odd, then on the bits)."""
    odd = _tcr_to_odd32(v)
    neg = tl.cast((odd >> 31) & 1, tl.int64)
    mag32 = tl.cast(odd & 0x7FFFFFFF, tl.int64)
    mag = (mag32 + 0x7FFF + ((mag32 >> 16) & 1)) >> 16
    r = tl.cast(tl.cast(tl.cast(mag << 16, tl.uint32), tl.float32, bitcast=True), tl.float64)
    return neg, mag, r * tl.where(neg != 0, -1.0, 1.0)
''', ("_tcr_to_odd32",))

_helper("_tcr_sign_mag_f64", '''(v):
    """(sign bit, magnitude bits) of float64 v, int64."""
    u = tl.cast(v, tl.int64, bitcast=True)
    return (u >> 63) & 1, u & 0x7FFFFFFFFFFFFFFF
''')

_helper("_tcr_pack_f16", '''(neg, mag):
    return tl.cast(tl.cast(mag | (neg << 15), tl.uint16), tl.float16, bitcast=True)
''')

_helper("_tcr_pack_bf16", '''(neg, mag):
    return tl.cast(tl.cast(mag | (neg << 15), tl.uint16), tl.bfloat16, bitcast=True)
''')

_helper("_tcr_pack_f32", '''(neg, mag):
    return tl.cast(tl.cast(mag | (neg << 31), tl.uint32), tl.float32, bitcast=True)
''')

_helper("_tcr_pack_f64", '''(neg, mag):
    return tl.cast(tl.where(neg != 0, mag - 9223372036854775807 - 1, mag), tl.float64, bitcast=True)
''')

# ---- the rounded operations -----------------------------------------------------------------

_NARROW_BINARY = '''(x, y, FN: tl.constexpr, MODE: tl.constexpr):
    """x op y on {name} rounded in MODE (0 RN, 1 RZ, 2 RM, 3 RP), op by FN (0 add, 1 sub,
    2 mul, 3 div), computed in float64."""
    a, b = tl.broadcast(_tcr_to_f64(x), _tcr_to_f64(y))  # (the interpreter mis-broadcasts 0-d bools)
    if FN == 1:
        b = b * -1.0
    if FN <= 1:
        v = a + b
        sv = _tcr_sign(_tcr_two_sum_err(a, b, v))
    elif FN == 2:
        v = a * b
        sv = 0
    else:
        v = a / b
        sv = 0
    neg, mag, r64 = _tcr_nearest_{s}(v)
    sigma = tl.where(r64 != v, _tcr_sign(v - r64), sv)
    sigma = tl.where(tl.abs(v) < float("inf"), sigma, 0)
    neg, mag = _tcr_directed(neg, mag, sigma, MODE)
    neg = _tcr_exact_zero_sign(neg, mag, sigma, a, b, FN, MODE)
    neg, mag = _tcr_canonical_nan(neg, mag, {inf}, {nan})
    return _tcr_pack_{s}(neg, mag)
'''

_NARROW_SQRT = '''(x, MODE: tl.constexpr):
    """sqrt(x) on {name} rounded in MODE (0 RN, 1 RZ, 2 RM, 3 RP), computed in float64."""
    v = tl.sqrt(_tcr_to_f64(x))
    neg, mag, r64 = _tcr_nearest_{s}(v)
    sigma = tl.where(tl.abs(v) < float("inf"), _tcr_sign(v - r64), 0)
    neg, mag = _tcr_directed(neg, mag, sigma, MODE)
    neg, mag = _tcr_canonical_nan(neg, mag, {inf}, {nan})
    return _tcr_pack_{s}(neg, mag)
'''

_F64_BINARY = '''(x, y, FN: tl.constexpr, MODE: tl.constexpr):
    """x op y on float64 rounded in MODE (0 RN, 1 RZ, 2 RM, 3 RP), op by FN (0 add, 1 sub,
    2 mul, 3 div)."""
    a, b = tl.broadcast(tl.cast(x, tl.float64), tl.cast(y, tl.float64))  # (see _tcr_binary_f32)
    if FN == 1:
        b = b * -1.0
    if FN <= 1:
        v = a + b
    elif FN == 2:
        v = a * b
    else:
        v = a / b
    neg, mag = _tcr_sign_mag_f64(v)
    sigma = _tcr_sigma64(a, b, v, FN)
    neg, mag = _tcr_directed(neg, mag, sigma, MODE)
    neg = _tcr_exact_zero_sign(neg, mag, sigma, a, b, FN, MODE)
    neg, mag = _tcr_canonical_nan(neg, mag, {inf}, {nan})
    return _tcr_pack_f64(neg, mag)
'''

_F64_SQRT = '''(x, MODE: tl.constexpr):
    """sqrt(x) on float64 rounded in MODE (0 RN, 1 RZ, 2 RM, 3 RP)."""
    a = tl.cast(x, tl.float64)
    v = tl.sqrt(a)
    neg, mag = _tcr_sign_mag_f64(v)
    neg, mag = _tcr_directed(neg, mag, _tcr_sigma_sqrt64(a, v), MODE)
    neg, mag = _tcr_canonical_nan(neg, mag, {inf}, {nan})
    return _tcr_pack_f64(neg, mag)
'''

_CAST = '''(x, MODE: tl.constexpr):
    """x (a float of another format) converted to {name} in MODE (1 RZ, 2 RM, 3 RP, 4 RA:
    ties away from zero), from its exact value in float64; NaNs as the plain conversion."""
    v = _tcr_to_f64(x)
    neg, mag, r64 = _tcr_nearest_{s}(v)
    sigma = tl.where((r64 != v) & (tl.abs(v) < float("inf")), _tcr_sign(v - r64), 0)
    if MODE == 4:  # only a tie broken toward zero changes: v halfway to the next value away
        nxt = _tcr_to_f64(_tcr_pack_{s}(neg, mag + 1))
        tie = (sigma == tl.where(neg != 0, -1, 1)) & (tl.abs(v - r64) * 2.0 == tl.abs(nxt - r64))
        mag = tl.where(tie, mag + 1, mag)
    else:
        neg, mag = _tcr_directed(neg, mag, sigma, MODE)
    return _tcr_pack_{s}(neg, mag)
'''

_FINISH = ("_tcr_directed", "_tcr_canonical_nan", "_tcr_exact_zero_sign")

for _dtype, _s in _SHORT.items():
    _inf, _nan = (hex(v) for v in _SPECIAL[_s])
    _fill = dict(s=_s, name=_dtype.name, inf=_inf, nan=_nan)
    if _s == "f64":
        _helper("_tcr_binary_f64", _F64_BINARY.format(**_fill),
                ("_tcr_sign_mag_f64", "_tcr_sigma64", "_tcr_pack_f64") + _FINISH)
        _helper("_tcr_sqrt_f64", _F64_SQRT.format(**_fill),
                ("_tcr_sign_mag_f64", "_tcr_sigma_sqrt64", "_tcr_pack_f64") + _FINISH)
    else:
        _common = ("_tcr_to_f64", "_tcr_sign", f"_tcr_nearest_{_s}", f"_tcr_pack_{_s}") + _FINISH
        _helper(f"_tcr_binary_{_s}", _NARROW_BINARY.format(**_fill), _common + ("_tcr_two_sum_err",))
        _helper(f"_tcr_sqrt_{_s}", _NARROW_SQRT.format(**_fill), _common)
        _helper(f"_tcr_cast_{_s}", _CAST.format(**_fill), _common)
    for _mode, (_code, _m) in _MODES.items():
        for _fn, (_fcode, _op) in _FNS.items():
            _helper(f"_tcr_{_op}_{_s}_{_m}", f"(x, y):\n    return _tcr_binary_{_s}(x, y, {_fcode}, {_code})\n",
                    (f"_tcr_binary_{_s}",))
        _helper(f"_tcr_sqrt_{_s}_{_m}", f"(x):\n    return _tcr_sqrt_{_s}(x, {_code})\n", (f"_tcr_sqrt_{_s}",))

_helper(FLUSH_HELPER, '''(x):
    """float32 x with subnormals (nonzero, |x| < 2**-126) replaced by zeros of their sign."""
    bits = tl.cast(x, tl.int32, bitcast=True)
    bits = tl.where((bits & 0x7F800000) == 0, bits ^ (bits & 0x7FFFFFFF), bits)
    return tl.cast(bits, tl.float32, bitcast=True)
''')
