"""NumPy references and comparison helpers for the op tests (no tilecraft imports).

References are computed independently of tilecraft: in float64 (or exact integers) and then
rounded once to the dtype under test.
"""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F8E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
F8E5M2 = np.dtype(ml_dtypes.float8_e5m2)

# relative tolerances by result dtype name (atol is scaled from them by the caller's magnitude)
RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2, "tfloat32": 1e-3,
        "float8_e4m3fn": 1.3e-1, "float8_e5m2": 2.6e-1}


def rng(*seed: Any) -> np.random.Generator:
    """A generator seeded deterministically from ints and strings (stable across processes,
    unlike hash())."""
    return np.random.default_rng([zlib.crc32(str(s).encode()) for s in seed])


def np_dtype(name: str) -> np.dtype:
    """NumPy dtype for a tilecraft dtype name (bfloat16/float8 through ml_dtypes)."""
    if name == "bool_":
        return np.dtype(np.bool_)
    if hasattr(ml_dtypes, name) and name.startswith(("bfloat", "float8")):
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def is_float(d: Any) -> bool:
    d = np.dtype(d)
    return d.kind == "f" or d in (BF16, F8E4M3, F8E5M2)


def random_array(g: np.random.Generator, shape: Any, dtype: Any, lo: float = -4, hi: float = 4) -> np.ndarray:
    """Random values in [lo, hi) (integers for integer dtypes, 0/1 for bool), cast to dtype."""
    d = np.dtype(dtype)
    if d.kind == "b":
        return g.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        lo_, hi_ = max(int(lo), int(info.min)), min(int(hi), int(info.max))
        return g.integers(lo_, hi_, shape, dtype=d, endpoint=True)
    return g.uniform(lo, hi, shape).astype(d)


def wrap(x: Any, dtype: Any) -> np.ndarray:
    """Exact integers (Python ints / int64 / uint64 / object) wrapped to `dtype`."""
    d = np.dtype(dtype)
    bits = 8 * d.itemsize
    v = np.asarray(x, dtype=object)
    f = np.vectorize(lambda n: ((int(n) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
                     if d.kind == "i" else int(n) % (1 << bits), otypes=[object])
    return f(v).astype(d) if v.size else v.astype(d)


def rtol_for(dtype: Any) -> float:
    return RTOL.get(np.dtype(dtype).name, 0.0)


def assert_close(got: np.ndarray, want: np.ndarray, dtype: Any = None, rtol: float | None = None,
                 atol: float | None = None, msg: str = "") -> None:
    """Compare with the dtype's tolerance; NaNs must match NaNs; integers and bools exactly."""
    got = np.asarray(got)
    want = np.asarray(want)
    d = np.dtype(dtype) if dtype is not None else got.dtype
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    if not is_float(d):
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=msg)
        return
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    if rtol is None:
        rtol = rtol_for(d)
    if atol is None:
        finite = np.abs(w64[np.isfinite(w64)])
        scale = float(finite.max()) if finite.size else 1.0
        atol = rtol * max(scale, 1e-30) * 0.1
    np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)


def assert_bits_equal(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    """Exact equality of float values including NaN positions and the sign of zero."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{msg}: dtype {got.dtype} != {want.dtype}"
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    gnan = np.isnan(got.astype(np.float64))
    wnan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(gnan, wnan, err_msg=f"{msg}: NaN positions differ")
    np.testing.assert_array_equal(np.where(gnan, 0, got.view(ut)), np.where(wnan, 0, want.view(ut)),
                                  err_msg=msg)


def assert_within_ulps(got: np.ndarray, want: np.ndarray, ulps: float, dtype: Any = np.float32,
                       msg: str = "") -> None:
    """`got` (float32 or bfloat16) within `ulps` units in the last place of the exact `want`
    (float64), the unit being the dtype's spacing at `want`: 2**-149 (float32) or 2**-133
    (bfloat16) among subnormals, so a flushed subnormal is off by its whole value. A `want` of
    zero or infinity must be got exactly, sign included."""
    got, want = np.asarray(got).astype(np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    exact = (want == 0) | np.isinf(want)
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]), err_msg=f"{msg}: signs")
    np.testing.assert_array_equal(got[exact], want[exact], err_msg=msg)
    assert np.dtype(dtype) in (np.float32, BF16), dtype
    scale = 2.0 ** 16 if np.dtype(dtype) == BF16 else 1.0  # bfloat16 keeps 8 of float32's 24 bits
    unit = np.spacing(np.abs(want[~exact]).astype(np.float32)).astype(np.float64) * scale
    err = np.abs(got[~exact] - want[~exact]) / unit
    off = ~(err <= ulps)  # NaN is off too
    if off.any():
        k = int(np.argmax(np.where(off, np.nan_to_num(err, nan=np.inf), -1)))
        raise AssertionError(f"{msg}: {err[k]:.3g} ulps > {ulps} (got {float(got[~exact][k])!r}, want "
                             f"{float(want[~exact][k])!r}); {int(off.sum())} of {err.size} off")


def round_tf32(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """float32 → tfloat32 (11 significant bits, float32's exponents, subnormals included),
    computed in float64 on the grid of the value's last place: "rn" nearest even, "ra" nearest
    away from zero, "rz" toward zero, "rm" / "rp" down / up. Past the largest finite: infinity,
    or the largest finite where the mode rounds that way."""
    with np.errstate(invalid="ignore", over="ignore"):
        x = np.asarray(x, np.float32).astype(np.float64)
        e = np.frexp(x)[1]                   # x = m * 2**e, 0.5 <= |m| < 1
        q = np.ldexp(1.0, np.maximum(e - 1, -126) - 10)
        y = x / q                            # exact: a power-of-two scaling
        t = np.trunc(y)
        r = {"rn": np.round(y), "rz": t, "rm": np.floor(y), "rp": np.ceil(y),
             "ra": np.where(np.abs(y - t) >= 0.5, t + np.sign(y), t)}[mode] * q
        top = (2 - 2.0**-10) * 2.0**127
        to_top = {"rn": False, "ra": False, "rz": True, "rm": r > 0, "rp": r < 0}[mode]
        r = np.where(np.abs(r) > top, np.copysign(np.where(to_top, top, np.inf), r), r)
        return np.where(np.isfinite(x), r, x).astype(np.float32)


def tf32_edge_values(g: np.random.Generator, shape: Any, subnormals: bool = False) -> np.ndarray:
    """float32 values whose rounding to tfloat32 is easy to get wrong: exact ties at even and
    odd last bits, one below / above a tie, mantissas that carry into the exponent, values that
    round past the largest finite, infinities, quiet and signalling NaNs of both signs, zeros
    (and subnormals, ties among them); the rest random normal numbers."""
    sign = g.integers(0, 2, shape, dtype=np.uint32) << 31
    exp = g.integers(127 - 40, 127 + 40, shape, dtype=np.uint32) << 23
    high = g.integers(0, 1 << 10, shape, dtype=np.uint32) << 13
    low = g.choice(np.array([0x1000, 0x1000, 0x0FFF, 0x1001, 0x1FFF, 0x0001, 0], np.uint32), shape)
    low = np.where(g.random(shape) < 0.3, g.integers(0, 1 << 13, shape, dtype=np.uint32), low)
    bits = sign | exp | high | low
    special = np.array([0x3FFFF000, 0x3FFFFFFF, 0x7F7FFFFF, 0x7F7FF000, 0x7F7FEFFF, 0xFF7FF000, 0x7F800000,
                        0xFF800000, 0x7FC00000, 0x7F800001, 0xFFBFFFFF, 0x00000000, 0x80000000], np.uint32)
    if subnormals:
        tiny = g.random(shape) < 0.1
        bits = np.where(tiny, bits & 0x807FFFFF, bits)
        special = np.concatenate([special, np.array([0x00001000, 0x80003000, 0x007FF000, 0x007FFFFF], np.uint32)])
    pick = g.random(shape) < 0.08
    bits[pick] = g.choice(special, int(pick.sum()))
    return bits.view(np.float32)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def padded_tiles(a: np.ndarray, tile: tuple[int, ...], fill: Any) -> np.ndarray:
    """`a` padded with `fill` up to a whole number of tiles per dim."""
    shape = tuple(cdiv(n, t) * t for n, t in zip(a.shape, tile))
    out = np.full(shape, fill, a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out
