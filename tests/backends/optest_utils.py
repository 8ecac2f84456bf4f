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


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 → tfloat32 (10 mantissa bits), round to nearest even, computed in float64."""
    x = np.asarray(x, np.float32).astype(np.float64)
    m, e = np.frexp(x)                       # x = m * 2**e, 0.5 <= |m| < 1
    scaled = m * 2.0 ** 11                   # 11 significant bits (1 implicit + 10)
    r = np.round(scaled)                     # NumPy rounds half to even
    return np.ldexp(r / 2.0 ** 11, e).astype(np.float32)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def padded_tiles(a: np.ndarray, tile: tuple[int, ...], fill: Any) -> np.ndarray:
    """`a` padded with `fill` up to a whole number of tiles per dim."""
    shape = tuple(cdiv(n, t) * t for n, t in zip(a.shape, tile))
    out = np.full(shape, fill, a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out
