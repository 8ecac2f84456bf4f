"""`ct.mma_scaled`: block-scaled fp8 MMA (float8_e8m0fnu scales over blocks of 32 along K)
against a float64 NumPy reference, batched and not, with partial tiles; cuTile's typing errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from optest_utils import np_dtype, rng

E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
ZERO = ct.PaddingMode.ZERO


@ct.kernel
def scaled_2d(X, SX, Y, SY, Acc, Out, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    """Scales arrive as their bits (uint8): Triton's CPU interpreter takes no float8_e8m0fnu arrays."""
    x = ct.load(X, (0, 0), (tm, tk), padding_mode=ZERO)
    sx = ct.bitcast(ct.load(SX, (0, 0), (tm, tk // 32), padding_mode=ZERO), ct.float8_e8m0fnu)
    y = ct.load(Y, (0, 0), (tk, tn), padding_mode=ZERO)
    sy = ct.bitcast(ct.load(SY, (0, 0), (tk // 32, tn), padding_mode=ZERO), ct.float8_e8m0fnu)
    acc = ct.load(Acc, (0, 0), (tm, tn), padding_mode=ZERO)
    ct.store(Out, (0, 0), ct.mma_scaled(x, sx, y, sy, acc))


@ct.kernel
def scaled_batched(X, SX, Y, SY, Out, tb: ct.Constant[int], tm: ct.Constant[int], tn: ct.Constant[int],
                   tk: ct.Constant[int]):
    """A 2-D x (and its scales) against a batch of y: out[b] = scaled(x) @ scaled(y[b])."""
    x = ct.load(X, (0, 0), (tm, tk), padding_mode=ZERO)
    sx = ct.load(SX, (0, 0), (tm, tk // 32), padding_mode=ZERO)
    y = ct.load(Y, (0, 0, 0), (tb, tk, tn), padding_mode=ZERO)
    sy = ct.load(SY, (0, 0, 0), (tb, tk // 32, tn), padding_mode=ZERO)
    ct.store(Out, (0, 0, 0), ct.mma_scaled(x, sx, y, sy, ct.zeros((tb, tm, tn), ct.float32)))


def _operand(g, shape, dtype):
    """fp8 values in [-4, 4] (rounded to the dtype) and e8m0 scales 2**-4 .. 2**4."""
    return g.uniform(-4, 4, shape).astype(np_dtype(dtype))


def _scales(g, shape):
    return (2.0 ** g.integers(-4, 5, shape)).astype(E8M0)


@ct.kernel
def decode_scales(S, U, X, Y, Out):
    """x and y all ones, y's scales all 2**0 (U), x's scales S: out[i, j] = 32 * S[i, 0] (scales
    as bits: Triton's CPU interpreter takes no float8_e8m0fnu arrays)."""
    sx = ct.bitcast(ct.load(S, (0, 0), (16, 1)), ct.float8_e8m0fnu)
    sy = ct.bitcast(ct.load(U, (0, 0), (1, 16)), ct.float8_e8m0fnu)
    x, y = ct.load(X, (0, 0), (16, 32)), ct.load(Y, (0, 0), (32, 16))
    ct.store(Out, (0, 0), ct.mma_scaled(x, sx, y, sy, ct.zeros((16, 16), ct.float32)))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the sums that are inf
def test_mma_scaled_decodes_every_scale(dev):
    """Each of the 256 scale encodings (2**(e - 127); e = 0 is a float32 subnormal, 255 NaN),
    16 at a time."""
    ones = np.ones((16, 32), np.dtype(ml_dtypes.float8_e4m3fn))
    x, y, unit = dev.put(ones), dev.put(ones.T.copy()), dev.put(np.full((1, 16), 127, np.uint8))
    for chunk in np.arange(256, dtype=np.uint8).reshape(16, 16):
        out = dev.poison((16, 16), np.float32)
        dev.launch((1,), decode_scales, (dev.put(chunk.reshape(16, 1)), unit, x, y, out))
        with np.errstate(over="ignore"):   # 32 * 2**127 is inf in float32, as the float32 sum is
            want = (32 * chunk.view(E8M0).astype(np.float64)).astype(np.float32)   # ml_dtypes' decoding
        np.testing.assert_array_equal(dev.get(out), np.repeat(want[:, None], 16, axis=1))


def _reference(x, sx, y, sy, acc):
    """sum_k x[i,k] sx[i,k//32] y[k,j] sy[k//32,j] + acc, in float64."""
    xs = x.astype(np.float64) * np.repeat(sx.astype(np.float64), 32, axis=-1)
    ys = y.astype(np.float64) * np.repeat(sy.astype(np.float64), 32, axis=-2)
    return np.matmul(xs, ys) + acc


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_mma_scaled_2d(dev, dtype):
    g = rng("mma-scaled", dtype)
    m, n, k = 13, 11, 64   # partial tiles in M and N (their padding is zero), two scale blocks in K
    x, sx = _operand(g, (m, k), dtype), _scales(g, (m, k // 32))
    y, sy = _operand(g, (k, n), dtype), _scales(g, (k // 32, n))
    acc = g.uniform(-100, 100, (m, n)).astype(np.float32)
    out = dev.poison((m, n), np.float32)
    args = (x, sx.view(np.uint8), y, sy.view(np.uint8), acc)
    dev.launch((1,), scaled_2d, tuple(dev.put(a) for a in args) + (out, 16, 16, 64))
    want = _reference(x, sx, y, sy, acc.astype(np.float64))
    # Every product is exact in float32; only the float32 sums round: (K + 1) roundings at most.
    bound = (k + 1) * 2.0 ** -24 * (np.abs(_reference(np.abs(x.astype(np.float64)), sx, np.abs(y.astype(np.float64)), sy, 0))
                    + np.abs(acc))
    assert (np.abs(dev.get(out) - want) <= bound).all()


def test_mma_scaled_broadcasts_batches(dev):
    """With the scales loaded from float8_e8m0fnu arrays, as cuTile's samples do."""
    g = rng("mma-scaled-batched")
    b, m, n, k = 3, 16, 9, 64
    x, sx = _operand(g, (m, k), "float8_e4m3fn"), _scales(g, (m, k // 32))
    y, sy = _operand(g, (b, k, n), "float8_e4m3fn"), _scales(g, (b, k // 32, n))
    out = dev.poison((b, m, n), np.float32)
    dev.launch((1,), scaled_batched, tuple(dev.put(a) for a in (x, sx, y, sy)) + (out, 4, 16, 16, 64))
    want = _reference(x, sx, y, sy, 0.0)
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def _typing_kernel(xs, sxs, ys, sys_, accs, dx="float8_e4m3fn", dsx="float8_e8m0fnu", dy=None, dsy=None,
                   dacc="float32"):
    """A kernel calling mma_scaled on tiles of the given shapes and dtype names."""
    dy, dsy = dy or dx, dsy or dsx
    t = {name: getattr(ct, name) for name in {dx, dsx, dy, dsy, dacc}}

    @ct.kernel
    def k():
        ct.mma_scaled(ct.zeros(xs, t[dx]), ct.zeros(sxs, t[dsx]), ct.zeros(ys, t[dy]), ct.zeros(sys_, t[dsy]),
                      ct.zeros(accs, t[dacc]))
    return k


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("args, message", [
    (((16, 64), (16, 4), (64, 16), (4, 16), (16, 16)),
     r"For mma_scaled with dtype=float8_e4m3fn, scale_dtype=float8_e8m0fnu: x.shape\[1\] must be an exact multiple "
     r"of x_scale.shape\[1\] with scaling block size B = K // K_s in \{32\}, got x.shape\[1\] = 64 and "
     r"x_scale.shape\[1\] = 4"),
    (((16, 64), (8, 2), (64, 16), (2, 16), (16, 16)),
     r"x_scale shape \(8, 2\) is not compatible with x shape \(16, 64\). All dimensions except K axis 1 must match"),
    (((16, 64), (16, 2), (64, 16), (2, 16), (16, 8)), r"Expect acc shape to be \(16, 16\), got \(16, 8\)"),
    (((16,), (16, 2), (64, 16), (2, 16), (16, 16)), r"Expect shape of `x` to be 2D or 3D, got \(16,\)"),
    (((2, 16, 64), (2, 16, 2), (4, 64, 16), (4, 2, 16), (4, 16, 16)),
     r"Incompatible shapes for matrix mul on tiles: \(2, 16, 64\), \(4, 64, 16\)."),
])
def test_mma_scaled_shape_errors(dev, args, message):
    with pytest.raises(ct.TileTypeError, match=message + r"(.|\n)*test_mma_scaled.py"):
        dev.launch((1,), _typing_kernel(*args), ())


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("dtypes, message", [
    ({"dy": "float8_e5m2"}, "x and y must have the same dtype, got float8_e4m3fn and float8_e5m2"),
    ({"dsy": "float8_e4m3fn"}, "x_scale and y_scale must have the same dtype"),
    ({"dx": "float16"}, "Unsupported input dtype float16 for mma_scaled, supported input dtypes are "
                        "float8_e4m3fn, float8_e5m2"),
    ({"dsx": "float8_e4m3fn"}, "Unsupported scale dtype float8_e4m3fn for input dtype float8_e4m3fn, supported "
                               "scale dtypes are float8_e8m0fnu"),
    ({"dacc": "float16"}, "Unsupported acc dtype float16 for mma_scaled, expected float32"),
])
def test_mma_scaled_dtype_errors(dev, dtypes, message):
    shapes = ((16, 64), (16, 2), (64, 16), (2, 16), (16, 16))
    with pytest.raises(ct.TileTypeError, match=message):
        dev.launch((1,), _typing_kernel(*shapes, **dtypes), ())
