"""Small `@triton.jit` helpers that generated kernels call, as Triton source text.

Each one is copied into a generated module only when its kernel uses it, so the module stays
self-contained and readable. Reductions and scans go through `tl.reduce` /
`tl.associative_scan` with the combine functions here rather than `tl.sum`, `tl.max`, ...:
those are `@triton.jit` library functions that Triton's interpreter can only call when
TRITON_INTERPRET was set before Triton was imported, and they widen small integer types (the
tile language keeps the dtype). Other modules add theirs with `define_helper`: the stand-ins
for what Triton's interpreter gets wrong (`interpret_workarounds`) and the directed-rounding
and flush-to-zero arithmetic (`rounding`, whose HELPERS/NEEDS are merged in at the end).
"""

from . import rounding

HELPERS: dict[str, str] = {}
NEEDS: dict[str, tuple[str, ...]] = {}  # helper -> the helpers it calls


def define_helper(name: str, body: str, needs: tuple[str, ...] = ()) -> None:
    """Register helper `name`: `body` is its source after the name (parameters and body)."""
    assert name not in HELPERS, f"two helpers named {name}"
    HELPERS[name] = f"@triton.jit\ndef {name}{body}"
    NEEDS[name] = needs


define_helper("_tc_floordiv_int", '''(x, y):
    """Integer floor division with Python semantics (rounds toward -inf)."""
    q = x // y
    r = x - q * y
    return tl.where((r != 0) & ((r < 0) != (y < 0)), q - 1, q)
''')

define_helper("_tc_mod_int", '''(x, y):
    """Integer modulo with Python semantics (the sign of the divisor)."""
    r = x % y
    return tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
''')

define_helper("_tc_mod_float", '''(x, y):
    """Float modulo with Python semantics (the sign of the divisor, also for zero results)."""
    r = x % y
    r = tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
    zero = tl.abs(r)
    return tl.where(r == 0, tl.where(y < 0, zero * -1.0, zero), r)
''')

define_helper("_tc_minnum", '''(x, y):
    """Minimum that ignores a NaN operand (also the combine of min reductions), -0.0 below
    +0.0, as PTX min (_tc_min) on the GPU; for Triton's CPU interpreter, whose tl.minimum is
    NumPy's: it propagates NaN and returns either of two zeros. Of two zeros, -(-x + -y) is
    -0.0 unless both are +0.0."""
    low = tl.where(x < y, x, y)
    if low.dtype.is_floating():
        low = tl.where((x == 0) & (y == 0), (x * -1.0 + y * -1.0) * -1.0, low)
        low = tl.where(x != x, y, tl.where(y != y, x, low))
    return low
''')

define_helper("_tc_maxnum", '''(x, y):
    """Maximum that ignores a NaN operand (also the combine of max reductions), +0.0 above
    -0.0 (see _tc_minnum). Of two zeros, x + y is +0.0 unless both are -0.0."""
    high = tl.where(x > y, x, y)
    if high.dtype.is_floating():
        high = tl.where((x == 0) & (y == 0), x + y, high)
        high = tl.where(x != x, y, tl.where(y != y, x, high))
    return high
''')

define_helper("_tc_min", '''(x, y):
    """tl.minimum: on NVIDIA GPUs (PTX min) it already ignores a NaN operand (see _tc_minnum)."""
    return tl.minimum(x, y)
''')

define_helper("_tc_max", '''(x, y):
    """tl.maximum: on NVIDIA GPUs (PTX max) it already ignores a NaN operand (see _tc_maxnum)."""
    return tl.maximum(x, y)
''')

define_helper("_tc_add", '''(a, b):
    """Combine function of sums and cumulative sums."""
    return a + b
''')

define_helper("_tc_mul", '''(a, b):
    """Combine function of products and cumulative products."""
    return a * b
''')

define_helper("_tc_round_tf32", '''(x, MODE: tl.constexpr):
    """float32 rounded to tfloat32's 10 mantissa bits, kept as float32: a bias added to the
    sign-magnitude bits, the low 13 cleared. MODE 0 RN (0xFFF plus the last kept bit: ties to
    even), 1 RZ (0), 2 RM / 3 RP (0x1FFF where the magnitude rounds up), 4 RA (0x1000). Past
    the largest finite goes to infinity; a NaN stays NaN (quieted, payload truncated). The
    interpreter's `round_tf32` takes the same steps."""
    bits = tl.cast(x, tl.uint32, bitcast=True)
    if MODE == 0:
        bits_up = bits + (((bits >> 13) & 1) + 0xFFF)
    elif MODE == 1:
        bits_up = bits
    elif MODE == 4:
        bits_up = bits + 0x1000
    else:
        bits_up = tl.where(((bits >> 31) == 1) == (MODE == 2), bits + 0x1FFF, bits)
    nan = (bits & 0xFFFFE000) | 0x400000
    return tl.cast(tl.where(x != x, nan, bits_up & 0xFFFFE000), tl.float32, bitcast=True)
''')

define_helper("_tc_round_tf32_mma", '''(x):
    """float32 rounded to nearest even tfloat32 for an MMA operand only: PTX cvt.rn.tf32.f32,
    one instruction on sm_90+ (F2FP.TF32) where `_tc_round_tf32` takes seven. Its .b32 result
    is tf32 data as PTX defines it (layout implementation-defined): what the tensor cores read
    is the rounded value, but its low 13 bits and NaN payloads may differ from
    `_tc_round_tf32`'s, so nothing but a tensor-core tl.dot may read it."""
    return tl.inline_asm_elementwise("cvt.rn.tf32.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)
''')


EXP2_FTZ = "_tc_exp2_ftz"
"""float32 exp2 with flush_to_zero on the GPU: `EXP2_FTZ(x)`."""

define_helper(EXP2_FTZ, '''(x):
    """float32 exp2 flushing subnormal operands and results: PTX ex2.approx.ftz.f32, one MUFU.EX2
    (GPU only). tl.exp2 keeps subnormals (compile.GPU_MATH_OPTIONS): ex2.approx.f32, which ptxas
    wraps in a compare and two scalings; flushing around it would cost a dozen more integer ops
    an element, in the hot loop of attention."""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)
''')


for _name, _source in rounding.HELPERS.items():  # their names start with `_tcr_`, ours with `_tc_`
    assert _name not in HELPERS, f"two helpers named {_name}"
    HELPERS[_name] = _source
    NEEDS[_name] = rounding.NEEDS[_name]
