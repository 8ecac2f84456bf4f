"""astype between float formats in every rounding mode cuTile accepts, on every backend: bit
for bit against references built from NumPy's round-to-nearest conversion and `nextafter`
(independent of tilecraft's bit stepping), plus the front end's table of accepted modes.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import BF16, assert_bits_equal, rng, round_tf32, tf32_edge_values

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning")

RN, RZ, RM, RP, RA = (ct.RoundingMode.RN, ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP,
                      ct.RoundingMode.RA)
TILE = 256


@functools.lru_cache(maxsize=None)
def cast_kernel(dst: Any, mode: Any) -> Any:
    """out = x.astype(dst, rounding_mode=mode), stored as float32 when dst is tfloat32."""
    @ct.kernel
    def k(x, out):
        t = ct.load(x, (ct.bid(0),), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        y = t.astype(dst, rounding_mode=mode)
        ct.store(out, (ct.bid(0),), y.astype(ct.float32) if dst == ct.tfloat32 else y)
    return k


def run_cast(dev: Any, x: np.ndarray, dst: Any, mode: Any, out_dtype: Any) -> np.ndarray:
    out = dev.poison(x.shape, out_dtype)
    dev.launch((-(-x.size // TILE),), cast_kernel(dst, mode), (dev.put(x), out))
    return dev.get(out)


def reference(x: np.ndarray, out: np.dtype, mode: Any) -> np.ndarray:
    """x (float64 values) converted to `out` in `mode`: NumPy's nearest, stepped one place with
    nextafter where it lies on the wrong side of x (RA: where x is halfway between it and the
    next value away from zero). Sources of at most 32 bits, or float64 into float32 (NumPy
    converts those directly, rounding once)."""
    with np.errstate(all="ignore"):
        rn = x.astype(out)
        r = rn.astype(np.float64)
        toward = {RZ: np.copysign(0.0, r), RM: np.full_like(r, -np.inf), RP: np.full_like(r, np.inf),
                  RA: np.copysign(np.inf, x)}.get(mode)
        if toward is None:
            return rn
        wrong = {RZ: np.abs(r) > np.abs(x), RM: r > x, RP: r < x}.get(mode)
        if mode is RA:  # nearest with ties away: only the ties RN broke toward zero change
            nxt = np.nextafter(rn, toward.astype(out)).astype(np.float64)
            wrong = (np.abs(r) < np.abs(x)) & (2 * np.abs(x - r) == np.abs(nxt - r))
        stepped = np.nextafter(rn, toward.astype(out))
        return np.where(wrong & np.isfinite(x), stepped, rn)


def f64_samples(g: np.random.Generator, n: int) -> np.ndarray:
    """float64 values for a float32 result: random 53-bit values over float32's whole range,
    exact float32 values and ties, values past the largest finite and in the subnormal range,
    signed zeros, infinities, NaN."""
    x = np.ldexp(g.uniform(0.5, 1, n), g.integers(-160, 130, n)) * g.choice([-1.0, 1.0], n)
    f = x.astype(np.float32).astype(np.float64)
    half = np.abs(np.nextafter(f.astype(np.float32), np.float32(np.inf)).astype(np.float64) - f) / 2
    x = np.where(g.random(n) < 0.15, f, x)                      # exact
    x = np.where(g.random(n) < 0.15, f + np.copysign(half, f), x)  # ties
    x[:12] = [3.5e38, -3.5e38, 3.4028235677973366e38, 1e-46, -1e-46, 7e-46, 0.0, -0.0,
              np.inf, -np.inf, np.nan, 1 + 0.6 * 2.0**-23]
    return x


@pytest.mark.parametrize("mode", [None, RN, RZ, RM, RP])
def test_float64_to_float32(dev, mode) -> None:
    x = f64_samples(rng("f64-f32", str(mode)), 1000)
    got = run_cast(dev, x, ct.float32, mode, np.float32)
    assert_bits_equal(got, reference(x, np.dtype(np.float32), mode), f"float64 -> float32 {mode}")


def test_float64_to_float32_example() -> None:
    """The reference itself on one value 0.6 of an ulp above 1 (and its negation)."""
    v = np.array([1 + 0.6 * 2.0**-23, -(1 + 0.6 * 2.0**-23)])
    lo, hi = np.float32(1), np.nextafter(np.float32(1), np.float32(2))
    want = {RN: [hi, -hi], RZ: [lo, -lo], RM: [lo, -hi], RP: [hi, -lo]}
    for mode, w in want.items():
        np.testing.assert_array_equal(reference(v, np.dtype(np.float32), mode), np.array(w, np.float32))


@pytest.mark.parametrize("mode", [None, RZ, RM, RP, RA])
def test_bfloat16_to_float16_every_value(dev, mode) -> None:
    """All 65536 bfloat16 values: overflow, the float16 subnormal range, ties everywhere."""
    x = np.arange(1 << 16, dtype=np.uint16).view(BF16)
    got = run_cast(dev, x, ct.float16, mode, np.float16)
    assert_bits_equal(got, reference(x.astype(np.float64), np.dtype(np.float16), mode), f"bf16 -> f16 {mode}")


@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
def test_float32_to_half_toward_zero(dev, dst) -> None:
    g = rng("f32-rz", dst)
    bits = g.integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        x = np.where(np.abs(x) < 1e-30, x * np.float32(2.0**100), x)   # many in the half's range
        x = np.where(np.abs(x) > 1e30, x * np.float32(2.0**-100), x)
    out = np.dtype(np.float16) if dst == "float16" else BF16
    got = run_cast(dev, x, getattr(ct, dst), RZ, out)
    assert_bits_equal(got, reference(x.astype(np.float64), out, RZ), f"float32 -> {dst} RZ")


@pytest.mark.parametrize("mode", [None, RN, RZ, RA])
def test_float32_to_tfloat32_modes(dev, mode) -> None:
    x = tf32_edge_values(rng("tf32-modes", str(mode)), (1000,), subnormals=True)
    got = run_cast(dev, x, ct.tfloat32, mode, np.float32)
    assert_bits_equal(got, round_tf32(x, {None: "rn", RN: "rn", RZ: "rz", RA: "ra"}[mode]), f"tf32 {mode}")


@pytest.mark.parametrize("src", ["float16", "bfloat16", "float64"])
def test_other_floats_to_tfloat32(dev, src) -> None:
    """16-bit floats are exact in tfloat32; float64 rounds once (not through float32: a value
    just above a tfloat32 tie rounds up although float32 would make it the tie)."""
    g = rng("to-tf32", src)
    if src == "float64":
        x = f64_samples(g, 1000)
        x = np.where(np.abs(x) < 2.0**-120, x * 2.0**40, x)  # no subnormal results
        x[12:16] = [1 + 2.0**-11 + 2.0**-40, -(1 + 2.0**-11 + 2.0**-40), 1 + 3 * 2.0**-11, 1 + 2.0**-11]
        want = np.array([round_tf32_f64(v) for v in x], np.float32)
    else:
        bits = np.arange(1 << 16, dtype=np.uint16)
        x = bits.view(np.float16 if src == "float16" else BF16)
        want = x.astype(np.float32)
    got = run_cast(dev, x, ct.tfloat32, None, np.float32)
    assert_bits_equal(got, want, f"{src} -> tfloat32")


def round_tf32_f64(v: float) -> float:
    """One float64 rounded to tfloat32, nearest even, from its exact value (Python floats)."""
    import math
    if not math.isfinite(v) or v == 0:
        return v
    q = 2.0 ** (max(math.frexp(v)[1] - 1, -126) - 10)
    r = round(v / q) * q
    return math.copysign(math.inf, r) if abs(r) > (2 - 2.0**-10) * 2.0**127 else r


# ---- the front end's table ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _cast_with(dst: Any, mode: Any) -> Any:
    @ct.kernel
    def k(x, y):
        t = ct.load(x, (0,), (2,)).astype(dst, rounding_mode=mode)
        ct.store(y, (0,), t.astype(ct.float32))
    return k


def _ones(dtype: Any) -> np.ndarray:
    return np.ones(2, dtype.np_dtype)


@pytest.mark.parametrize("src, dst, mode", [
    (ct.float64, ct.float32, RA), (ct.float32, ct.tfloat32, RM), (ct.float32, ct.float16, RM),
    (ct.float32, ct.bfloat16, RP), (ct.float32, ct.float8_e4m3fn, RZ), (ct.float8_e8m0fnu, ct.float32, RA),
    (ct.float8_e8m0fnu, ct.float16, RP), (ct.float32, ct.float8_e8m0fnu, None)])
def test_rejected_rounding_modes(src, dst, mode) -> None:
    shown = mode or RN
    with pytest.raises(ct.TileTypeError, match=f"rounding_mode={shown} is not supported for conversion "
                                               f"from {src} to {dst}, supported rounding modes"):
        ct.launch(None, (1,), _cast_with(dst, mode), (_ones(src), np.zeros(2, np.float32)))


@pytest.mark.parametrize("src, dst", [(ct.int32, ct.float32), (ct.float32, ct.int32), (ct.bool_, ct.float16)])
@pytest.mark.parametrize("mode", [RN, RZ, RA])
def test_rounding_only_between_floats(src, dst, mode) -> None:
    with pytest.raises(ct.TileTypeError, match="rounding_mode is only valid for float to float conversions"):
        ct.launch(None, (1,), _cast_with(dst, mode), (_ones(src), np.zeros(2, np.float32)))


@pytest.mark.parametrize("src, dst, mode", [
    (ct.float16, ct.float64, RA), (ct.bfloat16, ct.float16, RM), (ct.float8_e5m2, ct.float16, RA),
    (ct.float16, ct.tfloat32, RA), (ct.float32, ct.float32, RM), (ct.float64, ct.tfloat32, RZ)])
def test_accepted_rounding_modes(dev, src, dst, mode) -> None:
    out = dev.poison((2,), np.float32)
    dev.launch((1,), _cast_with(dst, mode), (dev.put(_ones(src)), out))
    np.testing.assert_array_equal(dev.get(out), [1.0, 1.0])


@ct.kernel
def _tf32_rz_matmul(a, b, c):
    x = ct.load(a, (0, 0), (64, 32)).astype(ct.tfloat32, rounding_mode=RZ)
    y = ct.load(b, (0, 0), (32, 64)).astype(ct.tfloat32, rounding_mode=RZ)
    ct.store(c, (0, 0), ct.mma(x, y, ct.full((64, 64), 0.0, dtype=ct.float32)))


def test_tf32_rz_mma_operand_keeps_a_low_payload_nan(dev) -> None:
    """A NaN whose payload lies only in the low 13 bits stays a NaN when rounded toward zero to
    tfloat32 for an MMA (a tensor core reading the float32 bits would truncate it to infinity):
    its row of the product is NaN, every other row finite and equal to the float64 product of
    the truncated operands."""
    g = rng("tf32-rz-mma")
    a = g.uniform(0.5, 1.0, (64, 32)).astype(np.float32)
    b = g.uniform(0.5, 1.0, (32, 64)).astype(np.float32)
    a[5, 7] = np.uint32(0x7F800001).view(np.float32)
    out = dev.poison((64, 64), np.float32)
    dev.launch((1,), _tf32_rz_matmul, (dev.put(a), dev.put(b), out))
    got = dev.get(out)
    assert np.isnan(got[5]).all()
    rest = np.delete(np.arange(64), 5)
    want = round_tf32(a, "rz").astype(np.float64) @ round_tf32(b, "rz").astype(np.float64)
    np.testing.assert_allclose(got[rest], want[rest], rtol=1e-5)
