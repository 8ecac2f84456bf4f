"""A multiplication feeding an addition or subtraction is one fused multiply-add
(tilecraft/passes/contract.py), as cuTile makes it: every backend computes it rounded once,
bit for bit against the exact value (Python fractions), special values included; what is not
fused (a product used twice, float64, a directed rounding) rounds twice everywhere, the GPU
too (LLVM's own contraction is off)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from tests.backends.optest_utils import np_dtype

ConstInt = ct.Constant[int]


@ct.kernel
def fused(X, Y, Z, O0, O1, O2, O3, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(X, index=(i,), shape=(T,))
    y = ct.load(Y, index=(i,), shape=(T,))
    z = ct.load(Z, index=(i,), shape=(T,))
    ct.store(O0, index=(i,), tile=x * y + z)
    ct.store(O1, index=(i,), tile=x * y - z)
    ct.store(O2, index=(i,), tile=z + x * y)
    ct.store(O3, index=(i,), tile=z - x * y)


@ct.kernel
def unfused(X, Y, Z, O0, O1, O2, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(X, index=(i,), shape=(T,))
    y = ct.load(Y, index=(i,), shape=(T,))
    z = ct.load(Z, index=(i,), shape=(T,))
    t = x * y
    ct.store(O0, index=(i,), tile=t + t)  # the product used twice: not fused
    ct.store(O1, index=(i,), tile=ct.mul(x, y, rounding_mode=ct.RoundingMode.RZ) + z)
    ct.store(O2, index=(i,), tile=ct.add(x * y, z, rounding_mode=ct.RoundingMode.RZ))


def test_which_multiplications_fuse():
    x32, x64 = np.zeros(16, np.float32), np.zeros(16, np.float64)
    text = fused.ir(*[x32] * 7, 16)
    assert text.count("= fma") == 4 and "fn=mul" not in text
    assert text.count("negate_product=True") == 1 and text.count("negate_addend=True") == 1
    assert "= fma" not in fused.ir(*[x64] * 7, 16)  # float64: no backend here fuses it exactly
    assert "= fma" not in unfused.ir(*[x32] * 6, 16)


def _nearest(x: Fraction, dtype: np.dtype) -> float:
    """The float of `dtype` nearest the exact `x` (not 0), ties to even, past the largest
    finite value by half its unit in the last place: infinity."""
    u = np.dtype(f"u{dtype.itemsize}")
    top = float(ml_dtypes.finfo(dtype).max)
    below = float(np.array([int(np.array([top], dtype).view(u)[0]) - 1], u).view(dtype)[0])
    if abs(x) >= Fraction(top) + (Fraction(top) - Fraction(below)) / 2:
        return float("inf") if x > 0 else float("-inf")
    guess = int(np.array([float(x)]).astype(dtype).view(u)[0])
    near = [np.array([b], u).view(dtype)[0] for b in (guess - 1, guess, guess + 1) if 0 <= b < 2 ** (8 * u.itemsize)]
    near = [float(v) for v in near if np.isfinite(float(v))]
    return min(near, key=lambda v: (abs(Fraction(v) - x), int(np.array([v]).astype(dtype).view(u)[0]) & 1))


def _fma(a: float, b: float, c: float, dtype: np.dtype) -> float:
    """a * b + c rounded once to `dtype` (special values as IEEE 754's fusedMultiplyAdd)."""
    if not all(np.isfinite([a, b, c])):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))  # the product never overflows here
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # -0 only for (-0) + (-0): a zero product of operands of opposite signs, and -0
        return -0.0 if a * b == 0 and np.signbit(a) != np.signbit(b) and np.signbit(c) else 0.0
    return _nearest(exact, dtype)


def _inputs(dtype: np.dtype, n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    z = (rng.standard_normal(n) * 0.25).astype(dtype)
    info = ml_dtypes.finfo(dtype)
    cases = [  # (x, y, z)
        (0.0, 1.0, -0.0), (-0.0, 1.0, -0.0), (-0.0, 1.0, 0.0), (1.5, 2.0, -3.0),
        (np.inf, 0.0, 1.0), (np.inf, 1.0, -np.inf), (np.nan, 1.0, 1.0), (1.0, 1.0, np.inf),
        (float(info.max), 2.0, -float(info.max)),  # the product alone overflows; the sum does not
        (float(info.max), 1.0, float(info.max)),  # overflows to infinity
        (float(info.tiny), 0.5, 0.0),  # a subnormal result
    ]
    if dtype == np.float32:  # a product halfway between two float32s, plus a tiny addend: rounds up
        cases.append((1 + 2.0 ** -12, 1 + 2.0 ** -12, 2.0 ** -80))
    for k, (a, b, c) in enumerate(cases):
        x[k], y[k], z[k] = a, b, c
    return x, y, z


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fused_multiply_adds_round_once_bit_for_bit(dev, dtype):
    d = np_dtype(dtype)
    n = 90  # three tiles of 32, the last partial
    x, y, z = _inputs(d, n)
    outs = [dev.poison((n,), d) for _ in range(4)]
    dev.launch((3,), fused, (dev.put(x), dev.put(y), dev.put(z), *outs, 32))
    got = [dev.get(o).astype(np.float64) for o in outs]
    a, b, c = (v.astype(np.float64) for v in (x, y, z))
    for row, (sp, sc) in enumerate(((1, 1), (1, -1), (1, 1), (-1, 1))):  # x*y+z, x*y-z, z+x*y, z-x*y
        want = np.array([_fma(sp * p, q, sc * r, d) for p, q, r in zip(a, b, c)])
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got[row]), nan, err_msg=f"row {row}")
        np.testing.assert_array_equal(got[row][~nan], want[~nan], err_msg=f"row {row}")
        np.testing.assert_array_equal(np.signbit(got[row][~nan]), np.signbit(want[~nan]), err_msg=f"row {row}")


def test_unfused_multiply_adds_round_twice(dev):
    """A product used twice, and ops with a directed rounding, are not fused on any backend:
    the GPU rounds the product on its own too."""
    d = np.dtype(np.float32)
    n = 64
    x, y, z = _inputs(d, n)
    x[:3], y[:3], z[:3] = 1 + 2.0 ** -12, 1 + 2.0 ** -12, 2.0 ** -80
    outs = [dev.poison((n,), d) for _ in range(3)]
    dev.launch((2,), unfused, (dev.put(x), dev.put(y), dev.put(z), *outs, 32))
    got = [dev.get(o) for o in outs]
    with np.errstate(all="ignore"):
        product = x * y  # float32, rounded
        np.testing.assert_array_equal(got[0], product + product)
    assert got[1][0] == np.float32(1 + 2.0 ** -11)  # the product truncated (RZ), then the tiny addend lost
    assert got[2][0] == np.float32(1 + 2.0 ** -11)  # the product rounded to even, then the sum truncated


def test_the_gpu_fuses_exactly_what_the_ir_does():
    """sm_90 PTX compiled here: each Fma is one fma.rn instruction, and nothing else is fused
    (LLVM's contraction is off: the product used twice, the directed roundings and float64
    stay separate multiplications and additions)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.tools import inspect_kernel

    def ptx(kernel, dtype, arrays):
        x = torch.empty(64, dtype=dtype)
        return inspect_kernel(kernel, (*[x] * arrays, 32), capability=90).stage("ptx")

    fused_ptx = ptx(fused, torch.float32, 7)  # (x * y + z and z + x * y: one fma, LLVM's common subexpression)
    assert "fma.rn.f32" in fused_ptx and not any(f"{op}.rn.f32" in fused_ptx for op in ("mul", "add", "sub"))
    assert "fma.rn" not in ptx(fused, torch.float64, 7)
    unfused_ptx = ptx(unfused, torch.float32, 6)
    assert "fma.rn" not in unfused_ptx and "mul.rn.f32" in unfused_ptx and "add.rn.f32" in unfused_ptx
