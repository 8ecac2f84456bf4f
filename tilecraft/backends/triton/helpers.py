"""Small `@triton.jit` helpers that generated kernels call, as Triton source text.

Each one is copied into a generated module only when its kernel uses it, so the module stays
self-contained and readable. Reductions and scans go through `tl.reduce` /
`tl.associative_scan` with the combine functions here rather than `tl.sum`, `tl.max`, ...:
those are `@triton.jit` library functions that Triton's interpreter can only call when
TRITON_INTERPRET was set before Triton was imported, and they widen small integer types (the
tile language keeps the dtype). The `_interp` math helpers stand in for libdevice under the
interpreter (which cannot call libdevice); they compute in float64.
"""

HELPERS: dict[str, str] = {}
NEEDS: dict[str, tuple[str, ...]] = {}  # helper -> the helpers it calls


def _helper(name: str, body: str, needs: tuple[str, ...] = ()) -> None:
    HELPERS[name] = f"@triton.jit\ndef {name}{body}"
    NEEDS[name] = needs


_helper("_tc_floordiv_int", '''(x, y):
    """Integer floor division with Python semantics (rounds toward -inf)."""
    q = x // y
    r = x - q * y
    return tl.where((r != 0) & ((r < 0) != (y < 0)), q - 1, q)
''')

_helper("_tc_mod_int", '''(x, y):
    """Integer modulo with Python semantics (the sign of the divisor)."""
    r = x % y
    return tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
''')

_helper("_tc_mod_float", '''(x, y):
    """Float modulo with Python semantics (the sign of the divisor, also for zero results)."""
    r = x % y
    r = tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
    zero = tl.abs(r)
    return tl.where(r == 0, tl.where(y < 0, zero * -1.0, zero), r)
''')

_helper("_tc_minnum", '''(x, y):
    """Minimum that ignores a NaN operand (also the combine of min reductions)."""
    return tl.where(x != x, y, tl.where(y != y, x, tl.minimum(x, y)))
''')

_helper("_tc_maxnum", '''(x, y):
    """Maximum that ignores a NaN operand (also the combine of max reductions)."""
    return tl.where(x != x, y, tl.where(y != y, x, tl.maximum(x, y)))
''')

_helper("_tc_add", '''(a, b):
    """Combine function of sums and cumulative sums."""
    return a + b
''')

_helper("_tc_mul", '''(a, b):
    """Combine function of products and cumulative products."""
    return a * b
''')

_helper("_tc_argmax", '''(v1, i1, v2, i2):
    """Combine function of argmax over (value, index) pairs: the first index of the largest."""
    take = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)
''')

_helper("_tc_argmin", '''(v1, i1, v2, i2):
    """Combine function of argmin over (value, index) pairs: the first index of the smallest."""
    take = (v1 < v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)
''')

_helper("_tc_tan_interp", '''(x):
    return tl.sin(x) / tl.cos(x)
''')

_helper("_tc_sinh_interp", '''(x):
    # a Taylor series below 1 in magnitude, where exp(x) - exp(-x) would cancel
    x2 = x * x
    s = 1.0
    for j in tl.static_range(9):
        s = s * x2 / ((19 - 2 * j) * (18 - 2 * j)) + 1.0
    return tl.where(tl.abs(x) < 1.0, x * s, (tl.exp(x) - tl.exp(-x)) * 0.5)
''')

_helper("_tc_cosh_interp", '''(x):
    return (tl.exp(x) + tl.exp(-x)) * 0.5
''')

_helper("_tc_tanh_interp", '''(x):
    t = 1.0 - 2.0 / (tl.exp(2.0 * tl.abs(x)) + 1.0)
    small = _tc_sinh_interp(x) / _tc_cosh_interp(x)
    return tl.where(tl.abs(x) < 1.0, small, tl.where(x < 0, -t, t))
''', needs=("_tc_sinh_interp", "_tc_cosh_interp"))

_helper("_tc_pow_interp", '''(x, y):
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = tl.floor(y) == y
    y_odd = y_int & (tl.abs(y % 2.0) == 1.0)
    r = tl.where((x < 0) & y_odd, -r, r)
    r = tl.where((x < 0) & (~y_int), float("nan"), r)
    return tl.where((y == 0) | (x == 1), 1.0, r)
''')

_helper("_tc_atan2_interp", '''(y, x):
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
    r = tl.where(x < 0, 3.141592653589793 - r, r)
    r = tl.where(y < 0, -r, r)
    return tl.where((x != x) | (y != y), float("nan"), r)
''')

_helper("_tc_dense_interp", '''(x):
    """A fresh copy of x: the interpreter's atomics misread broadcast (stride-0) operands."""
    return tl.where(True, x, x)
''')

_helper("_tc_to_bf16_interp", '''(x):
    """float32 -> bfloat16 rounding to nearest even (the interpreter's own cast truncates)."""
    bits = tl.cast(x, tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = tl.full([], 0x7FC0, tl.uint16)
    return tl.cast(tl.where(x != x, nan, tl.cast(bits, tl.uint16)), tl.bfloat16, bitcast=True)
''')

_helper("_tc_f64_to_bf16_interp", '''(x):
    """float64 -> bfloat16 without double rounding: to float32 rounding to odd, then to bf16."""
    f = tl.cast(x, tl.float32)
    back = tl.cast(f, tl.float64)
    inexact = back != x
    bits = tl.cast(f, tl.uint32, bitcast=True)
    bits = tl.where(inexact & (tl.abs(back) > tl.abs(x)), bits - 1, bits) | tl.cast(inexact, tl.uint32)
    return _tc_to_bf16_interp(tl.where(x != x, f, tl.cast(bits, tl.float32, bitcast=True)))
''', needs=("_tc_to_bf16_interp",))

_helper("_tc_round_tf32", '''(x):
    """float32 rounded to tfloat32's 10 mantissa bits (to nearest even), kept as float32."""
    bits = tl.cast(x, tl.uint32, bitcast=True)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return tl.where(x != x, x, tl.cast(bits, tl.float32, bitcast=True))
''')

_helper("_tc_to_fp8_interp", '''(x, MANT: tl.constexpr, BIAS: tl.constexpr, MAXCODE: tl.constexpr,
                      OVF: tl.constexpr, NAN: tl.constexpr):
    """float32 -> the bits of an 8-bit float with MANT mantissa bits and exponent bias BIAS,
    rounding to nearest even (the interpreter's cast does not carry into the exponent)."""
    a = tl.abs(x)
    e = tl.maximum((tl.cast(a, tl.int32, bitcast=True) >> 23) - 127, 1 - BIAS)
    q = tl.cast((e - MANT + 127) << 23, tl.float32, bitcast=True)  # value of the last bit
    y = a / q
    f = tl.floor(y)
    d = y - f
    up = (d > 0.5) | ((d == 0.5) & (f % 2.0 == 1.0))
    code = ((e + BIAS - 1) << MANT) + tl.cast(f, tl.int32) + tl.cast(up, tl.int32)
    code = tl.where((code > MAXCODE) | (a == float("inf")), OVF, code)
    code = tl.where(x != x, NAN, code) | ((tl.cast(x, tl.int32, bitcast=True) >> 31) & 1) << 7
    return tl.cast(code, tl.uint8)
''')
