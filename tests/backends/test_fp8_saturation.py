"""Casts to 8-bit floats saturate, as the GPU's `cvt.rn.satfinite` does, on every backend.

PTX ISA (cvt, .satfinite): a NaN input gives NaN in the destination format; an input whose
magnitude exceeds the format's largest finite value (MAX_NORM: 448 for float8_e4m3fn, 57344
for float8_e5m2), an infinity included, gives MAX_NORM with the input's sign. Every other
input rounds to nearest even. Triton emits cvt.rn.satfinite for every fp8 cast on sm_90
(float32 and float16 directly, the other types through float32), which the PTX test below
pins; the interpreter and the generated code under Triton's CPU interpreter follow it (not
ml_dtypes, which gives NaN or inf).

The reference builds each format's values from its definition and rounds exact fractions.
"""

from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import assert_bits_equal, np_dtype

# mantissa bits, exponent bias, largest finite value
FORMATS = {"float8_e4m3fn": (3, 7, 448), "float8_e5m2": (2, 15, 57344)}
NAN_CODE = 0x7F  # a NaN in both formats (NaN bits are not compared, only NaN positions)


def _finite_codes(mant: int, bias: int, top: int) -> tuple[list[Fraction], list[int]]:
    """The non-negative finite values of the format (ascending) and their codes."""
    values, codes = [], []
    for code in range(128):
        e, m = code >> mant, Fraction(code & ((1 << mant) - 1), 1 << mant)
        v = m * Fraction(2) ** (1 - bias) if e == 0 else (1 + m) * Fraction(2) ** (e - bias)
        if v <= top:
            values.append(v)
            codes.append(code)
    return values, codes


def satfinite_reference(x: np.ndarray, dst: str) -> np.ndarray:
    """`x` (any float dtype) converted as cvt.rn.satfinite: NaN stays NaN, the magnitude
    clamped to the largest finite value, then rounded to nearest, ties to the even code."""
    mant, bias, top = FORMATS[dst]
    values, codes = _finite_codes(mant, bias, top)
    out = []
    for v in x.astype(np.float64).ravel():
        if np.isnan(v):
            out.append(NAN_CODE)
            continue
        a = min(Fraction(abs(float(v))), Fraction(top)) if np.isfinite(v) else Fraction(top)
        i = bisect.bisect_left(values, a)
        if values[i] != a:  # between values[i - 1] and values[i]
            below, above = a - values[i - 1], values[i] - a
            if below < above or (below == above and codes[i - 1] % 2 == 0):
                i -= 1
        out.append(codes[i] | (0x80 if np.signbit(v) else 0))
    return np.array(out, np.uint8).view(np_dtype(dst)).reshape(x.shape)


def edge_values() -> np.ndarray:
    """float64 values at and around both formats' limits, both signs."""
    e4_sub, e5_sub = 2.0**-9, 2.0**-16  # smallest subnormals
    vals = [0.0, 1.0, 416.0, 432.0, 440.0, 448.0, 456.0, 464.0, 465.0, 472.0, 480.0, 500.0, 1000.0,
            49152.0, 53248.0, 57344.0, 59392.0, 61440.0, 61441.0, 65504.0, 65536.0, 1e5, 3e38,
            float(np.finfo(np.float32).max), 1e300, np.inf,
            e4_sub, e4_sub / 2, e4_sub * 1.5, e4_sub / 2 * (1 + 2.0**-20), 2.0**-6 * (1 - 2.0**-5),
            e5_sub, e5_sub / 2, e5_sub * 1.5, e5_sub / 2 * (1 + 2.0**-20), 2.0**-14 * (1 - 2.0**-4),
            1e-30, 1e-40, 1e-45, 432.0 + 2.0**-30, 432.0 - 2.0**-30, 53248.0 + 2.0**-20, 448.0 + 2.0**-40]
    vals += list(np.arange(400.0, 530.0, 3.5)) + list(np.arange(49152.0, 66000.0, 1000.0))
    vals = np.array(vals)
    return np.concatenate([vals, -vals, [np.nan, -np.nan]])


@ct.kernel
def cast_to(x, out, T: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (ct.bid(0),), t.astype(out.dtype))


@pytest.mark.parametrize("dst", list(FORMATS))
@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
def test_astype_to_fp8_saturates(dev, src: str, dst: str) -> None:
    """Finite values past the largest finite (ties above it and values that round past it
    included), huge values and infinities give the largest finite value with their sign;
    NaN stays NaN; around the smallest subnormal ties round to even; bit-exact."""
    with np.errstate(over="ignore"):
        x = edge_values().astype(np_dtype(src))
    want = satfinite_reference(x, dst)
    out = dev.poison(x.shape, np_dtype(dst))
    tile = 64
    dev.launch((-(-x.size // tile),), cast_to, (dev.put(x), out, tile))
    assert_bits_equal(dev.get(out), want, f"{src} -> {dst}")


@pytest.mark.parametrize("dst", list(FORMATS))
@pytest.mark.parametrize("src", ["int32", "int64", "uint16"])
def test_astype_int_to_fp8_saturates(dev, src: str, dst: str) -> None:
    """Integers past the largest finite value saturate too (they convert through float32)."""
    info = np.iinfo(src)
    x = np.array([0, 1, 447, 448, 449, 464, 465, 479, 480, 481, 1000, 57344, 61440, 61441, 65535,
                  info.max, info.max - 1, info.min, -448, -465, -61441], dtype=object)
    x = x[(x >= info.min) & (x <= info.max)].astype(src)
    want = satfinite_reference(x, dst)
    out = dev.poison(x.shape, np_dtype(dst))
    dev.launch((1,), cast_to, (dev.put(x), out, 32))
    assert_bits_equal(dev.get(out), want, f"{src} -> {dst}")


@ct.kernel
def cast_both(x, e4, e5, T: ct.Constant[int]):
    t = ct.load(x, (0,), (T,))
    ct.store(e4, (0,), t.astype(ct.float8_e4m3fn))
    ct.store(e5, (0,), t.astype(ct.float8_e5m2))


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8",
                                 "bool", "float8_e4m3fn", "float8_e5m2"])
def test_fp8_casts_are_satfinite_on_the_gpu(src: str) -> None:
    """Every fp8 cast the Triton backend emits is a cvt.rn.satfinite on sm_90 (compiled here,
    no GPU needed): the semantics the CPU backends copy. fp8 to the other fp8 converts the
    source to float32 exactly, then saturates."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.tools import inspect_kernel

    x = torch.empty(128, dtype=getattr(torch, src))
    e4, e5 = torch.empty(128, dtype=torch.float8_e4m3fn), torch.empty(128, dtype=torch.float8_e5m2)
    ptx = inspect_kernel(cast_both, (x, e4, e5, 128), capability=90).stage("ptx")
    casts = [line.split()[0] for line in ptx.splitlines() if ".e4m3" in line or ".e5m2" in line]
    to_fp8 = [c for c in casts if c.split(".")[-2] in ("e4m3x2", "e5m2x2")]
    itself = {"float8_e4m3fn": "e4m3x2", "float8_e5m2": "e5m2x2"}.get(src)  # a cast to itself: none
    assert {c.split(".")[-2] for c in to_fp8} == {"e4m3x2", "e5m2x2"} - {itself}
    assert all(c.startswith("cvt.rn.satfinite.") for c in to_fp8), to_fp8


@pytest.mark.parametrize("src, dst", [(s, d) for s in FORMATS for d in ["float32", "float64", "float16", "bfloat16",
                                                                       *FORMATS] if d != s])
def test_astype_from_fp8_every_code(dev, src: str, dst: str) -> None:
    """Every code of an 8-bit float converts exactly to the wider floats, its NaNs and
    infinities included, and to the other 8-bit float as cvt.rn.satfinite does (e5m2's
    infinity gives 448). Under Triton's CPU interpreter float8_e4m3fn's NaN once read as 480
    and float8_e5m2's infinity and NaNs as 65536 to 114688 (e4m3fn NaN to e5m2 gave 512)."""
    x = np.arange(256, dtype=np.uint8).view(np_dtype(src))
    wide = x.astype(np.float64)
    want = satfinite_reference(wide, dst) if dst in FORMATS else wide.astype(np_dtype(dst))
    out = dev.poison(x.shape, np_dtype(dst))
    dev.launch((4,), cast_to, (dev.put(x), out, 64))
    assert_bits_equal(dev.get(out), want, f"{src} -> {dst}")


@ct.kernel
def constant_fp8(out, C: ct.Constant[float], T: ct.Constant[int]):
    ct.store(out, (0,), ct.full((T,), C, out.dtype))


@pytest.mark.parametrize("dst", list(FORMATS))
def test_fp8_constants_convert_as_casts_do(dev, dst: str) -> None:
    """A float constant of an 8-bit float dtype converts as a cast does: past the largest
    finite value (ties above it and infinities included) it saturates, NaN stays NaN, the rest
    rounds to nearest even once (it was ml_dtypes' conversion: NaN or inf past the range)."""
    x = np.array([1000.0, -1000.0, 464.0, -465.0, 1e5, 61441.0, np.inf, -np.inf, np.nan, 432.0 + 2.0**-30,
                  2.0**-10 * 3, 1e-30, -0.0])
    want = satfinite_reference(x, dst)
    for i, c in enumerate(x.tolist()):
        out = dev.poison((4,), np_dtype(dst))
        dev.launch((1,), constant_fp8, (out, c, 4))
        assert_bits_equal(dev.get(out), np.full(4, want[i]), f"constant {c!r} as {dst}")
