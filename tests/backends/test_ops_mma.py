"""mma and matmul/@ for every input/accumulator pairing, K loops over partial tiles, batching,
1-D promotion. References: inputs rounded to the operand dtype, products summed in float64;
the error bound is tol * (|A| @ |B| + |acc|) per element.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import cdiv, np_dtype, rng, round_tf32, wrap

ZERO = ct.PaddingMode.ZERO
M, N, K = 19, 21, 37
TM = TN = TK = 16


def to_operand(x: np.ndarray, name: str) -> np.ndarray:
    """x (float64 / int) rounded to the operand dtype `name`, as float64 (ints as int64)."""
    if name == "tfloat32":
        return round_tf32(x.astype(np.float32)).astype(np.float64)
    d = np_dtype(name)
    if d.kind in "iu":
        return x.astype(d).astype(np.int64)
    return x.astype(np.float32).astype(d).astype(np.float64)


def assert_mma_close(got: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, tol: float) -> None:
    want = np.matmul(a, b) + c
    bound = tol * (np.matmul(np.abs(a), np.abs(b)) + np.abs(c)) + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert not np.isnan(got.astype(np.float64)).any(), "unwritten (NaN) output elements"
    assert (err <= bound).all(), f"max error/bound {float((err / bound).max()):.3g} (tol {tol})"


@functools.lru_cache(maxsize=None)
def mma_kernel(op_dtype: Any, acc_dtype: Any) -> Any:
    """D = A @ B + C over a K loop of partial tiles; operands cast to op_dtype in the kernel."""
    @ct.kernel
    def k(A, B, C, D, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        acc = ct.load(C, (bm, bn), (tm, tn), padding_mode=ct.PaddingMode.ZERO).astype(acc_dtype)
        for kk in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
            a = ct.load(A, (bm, kk), (tm, tk), padding_mode=ct.PaddingMode.ZERO).astype(op_dtype)
            b = ct.load(B, (kk, bn), (tk, tn), padding_mode=ct.PaddingMode.ZERO).astype(op_dtype)
            acc = ct.mma(a, b, acc)
        ct.static_assert(acc.dtype == acc_dtype)
        ct.store(D, (bm, bn), acc)
    return k


MMA_CASES = [
    # (array dtype, operand dtype, accumulator dtype, tolerance)
    ("float16", "float16", "float32", 1e-5),
    ("float16", "float16", "float16", 1e-2),
    ("bfloat16", "bfloat16", "float32", 1e-5),
    ("float32", "tfloat32", "float32", 1e-3),
    ("float32", "float32", "float32", 1e-5),
    ("float64", "float64", "float64", 1e-12),
    ("float8_e4m3fn", "float8_e4m3fn", "float32", 1e-5),
    ("float8_e5m2", "float8_e5m2", "float32", 1e-5),
    ("float8_e4m3fn", "float8_e4m3fn", "float16", 1e-2),
    ("int8", "int8", "int32", 0),
    ("uint8", "uint8", "int32", 0),
]


@pytest.mark.parametrize("arr, op, acc, tol", MMA_CASES)
def test_mma_k_loop_partial_tiles(dev, arr: str, op: str, acc: str, tol: float) -> None:
    g = rng("mma", arr, op, acc)
    da, dacc = np_dtype(arr), np_dtype(acc)
    if da.kind in "iu":
        lo = -128 if da.kind == "i" else 0
        a = g.integers(lo, 128, (M, K)).astype(da)
        b = g.integers(lo, 128, (K, N)).astype(da)
        c = g.integers(-2**20, 2**20, (M, N)).astype(dacc)
    else:
        a = g.uniform(-2, 2, (M, K)).astype(np.float32).astype(da)
        b = g.uniform(-2, 2, (K, N)).astype(np.float32).astype(da)
        c = g.uniform(-2, 2, (M, N)).astype(dacc)
    d = dev.poison((M, N), dacc)
    dev.launch((cdiv(M, TM), cdiv(N, TN)), mma_kernel(getattr(ct, op), getattr(ct, acc)),
               (dev.put(a), dev.put(b), dev.put(c), d, TM, TN, TK))
    got = dev.get(d)
    if da.kind in "iu":
        want = a.astype(np.int64) @ b.astype(np.int64) + c
        np.testing.assert_array_equal(got, wrap(want, dacc))
    else:
        aa, bb = to_operand(a.astype(np.float64), op), to_operand(b.astype(np.float64), op)
        assert_mma_close(got, aa, bb, c.astype(np.float64), tol)


@pytest.mark.parametrize("arr", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("tiles, shape", [((2, 8, 16), (3, 11, 37)), ((64, 32, 64), (61, 29, 63)),
                                          ((16, 64, 32), (13, 64, 30))])
def test_mma_float64_tiles(dev, arr: str, tiles: tuple[int, int, int], shape: tuple[int, int, int]) -> None:
    """float64 MMA (operands loaded as float64 or converted from 16-bit floats, as matmul
    promotes them) on small and large tiles: the Triton backend sums products over K in
    chunks (here 1, 32 and 8 of them); the error is float64 rounding only."""
    g = rng("mma-f64", arr, *tiles)
    tm, tn, tk = tiles
    m, n, k = shape
    a = g.uniform(-2, 2, (m, k)).astype(np.float32).astype(np_dtype(arr))
    b = g.uniform(-2, 2, (k, n)).astype(np.float32).astype(np_dtype(arr))
    c = g.uniform(-2, 2, (m, n))
    d = dev.poison((m, n), np.float64)
    dev.launch((cdiv(m, tm), cdiv(n, tn)), mma_kernel(ct.float64, ct.float64),
               (dev.put(a), dev.put(b), dev.put(c), d, tm, tn, tk))
    assert_mma_close(dev.get(d), a.astype(np.float64), b.astype(np.float64), c, 1e-14 * k)


@ct.kernel
def mma_mixed_int8_kernel(A, B, C):
    a = ct.load(A, (0, 0), (16, 32), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(B, (0, 0), (32, 16), padding_mode=ct.PaddingMode.ZERO)
    ct.store(C, (0, 0), ct.mma(a, b, ct.zeros((16, 16), ct.int32)))


def test_mma_int8_uint8_mixed(dev) -> None:
    g = rng("mixed")
    a = g.integers(-128, 128, (13, 30)).astype(np.int8)
    b = g.integers(0, 256, (30, 11)).astype(np.uint8)
    c = dev.poison((13, 11), np.int32)
    dev.launch((1,), mma_mixed_int8_kernel, (dev.put(a), dev.put(b), c))
    np.testing.assert_array_equal(dev.get(c), a.astype(np.int64) @ b.astype(np.int64))


@ct.kernel
def mma_batched_kernel(A, B, C, D, tb: ct.Constant[int], tm: ct.Constant[int], tn: ct.Constant[int],
                       tk: ct.Constant[int]):
    """3-D batched mma with a K loop; the batch dim is tiled too (partial last batch tile)."""
    bb, bm, bn = ct.bid(2), ct.bid(0), ct.bid(1)
    acc = ct.load(C, (bb, bm, bn), (tb, tm, tn), padding_mode=ct.PaddingMode.ZERO)
    for kk in range(ct.num_tiles(A, 2, (tb, tm, tk))):
        a = ct.load(A, (bb, bm, kk), (tb, tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, (bb, kk, bn), (tb, tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(D, (bb, bm, bn), acc)


@pytest.mark.parametrize("dtype, acc, tol", [("float32", "float32", 1e-5), ("float16", "float32", 1e-5)])
def test_mma_batched_3d(dev, dtype: str, acc: str, tol: float) -> None:
    g = rng("batched", dtype)
    nb = 3
    a = g.uniform(-2, 2, (nb, M, K)).astype(dtype)
    b = g.uniform(-2, 2, (nb, K, N)).astype(dtype)
    c = g.uniform(-2, 2, (nb, M, N)).astype(acc)
    d = dev.poison((nb, M, N), acc)
    dev.launch((cdiv(M, 16), cdiv(N, 16), cdiv(nb, 2)), mma_batched_kernel,
               (dev.put(a), dev.put(b), dev.put(c), d, 2, 16, 16, 16))
    assert_mma_close(dev.get(d), a.astype(np.float64), b.astype(np.float64), c.astype(np.float64), tol)


@ct.kernel
def mma_broadcast_batch_kernel(A, B, D):
    """A 2-D x operand broadcast against a 3-D y: out[i] = A @ B[i]."""
    a = ct.load(A, (0, 0), (16, 16), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(B, (0, 0, 0), (2, 16, 16), padding_mode=ct.PaddingMode.ZERO)
    ct.store(D, (0, 0, 0), ct.mma(a, b, ct.zeros((2, 16, 16), ct.float32)))


def test_mma_broadcast_batch(dev) -> None:
    g = rng("bcast-batch")
    a = g.uniform(-2, 2, (13, 15)).astype(np.float32)
    b = g.uniform(-2, 2, (2, 15, 9)).astype(np.float32)
    d = dev.poison((2, 13, 9), np.float32)
    dev.launch((1,), mma_broadcast_batch_kernel, (dev.put(a), dev.put(b), d))
    assert_mma_close(dev.get(d), a.astype(np.float64), b.astype(np.float64), np.zeros((2, 13, 9)), 1e-5)


# ---- matmul and @ ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def matmul_kernel(ta: tuple[int, ...], tb: tuple[int, ...], form: str) -> Any:
    """out = load(A, ta) @ load(B, tb) (operator or function form), stored at the origin."""
    @ct.kernel
    def k(A, B, out):
        a = ct.load(A, (0,) * len(ta), ta, padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, (0,) * len(tb), tb, padding_mode=ct.PaddingMode.ZERO)
        r = a @ b if form == "op" else ct.matmul(a, b)
        ct.static_assert(r.dtype == out.dtype, "matmul result dtype")
        ct.store(out, (0,) * r.ndim, r)
    return k


@pytest.mark.parametrize("form", ["op", "fn"])
@pytest.mark.parametrize("da, db, dout, tol", [
    ("float32", "float32", "float32", 1e-5), ("float16", "float16", "float16", 1e-2),
    ("bfloat16", "bfloat16", "bfloat16", 1e-2), ("float16", "float32", "float32", 1e-5),
    ("float64", "float64", "float64", 1e-12),
])
def test_matmul_2d_dtypes(dev, da: str, db: str, dout: str, tol: float, form: str) -> None:
    """Inputs promote to a common dtype, accumulate (f16 in f16) and come back in that dtype."""
    g = rng("matmul", da, db)
    a = g.uniform(-2, 2, (13, 30)).astype(np_dtype(da))
    b = g.uniform(-2, 2, (30, 11)).astype(np_dtype(db))
    out = dev.poison((13, 11), np_dtype(dout))
    dev.launch((1,), matmul_kernel((16, 32), (32, 16), form), (dev.put(a), dev.put(b), out))
    assert_mma_close(dev.get(out), a.astype(np.float64), b.astype(np.float64), np.zeros((13, 11)), tol)


def test_matmul_int8_accumulates_in_int32_then_wraps(dev) -> None:
    g = rng("matmul-int8")
    a = g.integers(-128, 128, (16, 32)).astype(np.int8)
    b = g.integers(-128, 128, (32, 16)).astype(np.int8)
    out = dev.poison((16, 16), np.int8)
    dev.launch((1,), matmul_kernel((16, 32), (32, 16), "op"), (dev.put(a), dev.put(b), out))
    np.testing.assert_array_equal(dev.get(out), wrap(a.astype(np.int64) @ b.astype(np.int64), np.int8))


@pytest.mark.parametrize("ta, tb, sa, sb", [
    ((32,), (32, 16), (30,), (30, 11)),          # vector @ matrix -> (16,)
    ((16, 32), (32,), (13, 30), (30,)),          # matrix @ vector -> (16,)
    ((32,), (32,), (30,), (30,)),                # vector @ vector -> scalar
    ((2, 16, 32), (32, 16), (2, 13, 30), (30, 11)),   # batched @ 2-D
])
def test_matmul_promotion_of_1d_and_batch(dev, ta: Any, tb: Any, sa: Any, sb: Any) -> None:
    g = rng("matmul-1d", str(ta), str(tb))
    a = g.uniform(-2, 2, sa).astype(np.float32)
    b = g.uniform(-2, 2, sb).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = dev.poison(want.shape, np.float32)
    dev.launch((1,), matmul_kernel(ta, tb, "op"), (dev.put(a), dev.put(b), out))
    got = dev.get(out)
    bound = 1e-5 * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert got.shape == want.shape and (np.abs(got - want) <= bound + 1e-30).all()


@pytest.mark.parametrize("form", ["op", "fn"])
@pytest.mark.parametrize("ta, tb, sa, sb", [
    ((1, 16, 32), (4, 32, 16), (1, 13, 30), (3, 30, 11)),   # a's batch of 1 broadcasts (cuTile's FFT)
    ((4, 16, 32), (1, 32, 16), (3, 13, 30), (1, 30, 11)),   # b's batch of 1 broadcasts
    ((16, 32), (4, 32, 16), (13, 30), (3, 30, 11)),          # 2-D @ batched
    ((32,), (4, 32, 16), (30,), (3, 30, 11)),                # vector @ batched -> (B, N)
    ((4, 16, 32), (32,), (3, 13, 30), (30,)),                # batched @ vector -> (B, M)
])
def test_matmul_broadcasts_batch_dims_like_numpy(dev, ta: Any, tb: Any, sa: Any, sb: Any, form: str) -> None:
    """The batch dims of the operands broadcast as np.matmul's do (arrays of 3 batches: the
    tile's fourth is padding, masked off on store)."""
    g = rng("matmul-bcast", str(ta), str(tb))
    a = g.uniform(-2, 2, sa).astype(np.float32)
    b = g.uniform(-2, 2, sb).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = dev.poison(want.shape, np.float32)
    dev.launch((1,), matmul_kernel(ta, tb, form), (dev.put(a), dev.put(b), out))
    bound = 1e-5 * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    got = dev.get(out)
    assert got.shape == want.shape and (np.abs(got - want) <= bound + 1e-30).all()


@ct.kernel
def mma_broadcast_lhs_batch_kernel(A, B, C, D):
    """x of batch 1 against y of batch 4: out[i] = A[0] @ B[i] + C[i]."""
    a = ct.load(A, (0, 0, 0), (1, 16, 16), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(B, (0, 0, 0), (4, 16, 16), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(C, (0, 0, 0), (4, 16, 16), padding_mode=ct.PaddingMode.ZERO)
    ct.store(D, (0, 0, 0), ct.mma(a, b, c))


def test_mma_broadcasts_a_batch_of_one(dev) -> None:
    g = rng("mma-bcast-1")
    a = g.uniform(-2, 2, (1, 13, 15)).astype(np.float32)
    b = g.uniform(-2, 2, (3, 15, 9)).astype(np.float32)
    c = g.uniform(-2, 2, (3, 13, 9)).astype(np.float32)
    d = dev.poison((3, 13, 9), np.float32)
    dev.launch((1,), mma_broadcast_lhs_batch_kernel, (dev.put(a), dev.put(b), dev.put(c), d))
    assert_mma_close(dev.get(d), a.astype(np.float64), b.astype(np.float64), c.astype(np.float64), 1e-5)


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("form", ["op", "fn"])
def test_matmul_incompatible_batches_are_a_located_error(dev, form: str) -> None:
    kernel = matmul_kernel((2, 16, 32), (4, 32, 16), form)
    a, b = np.zeros((2, 16, 32), np.float32), np.zeros((4, 32, 16), np.float32)
    with pytest.raises(ct.TileTypeError, match=r"Incompatible shapes for matrix mul on tiles: "
                                               r"\(2, 16, 32\), \(4, 32, 16\)\.(.|\n)*test_ops_mma.py"):
        dev.launch((1,), kernel, (a, b, np.zeros((4, 16, 16), np.float32)))


@ct.kernel
def matmul_tf32_kernel(A, B, out):
    a = ct.load(A, (0, 0), (16, 32), padding_mode=ct.PaddingMode.ZERO).astype(ct.tfloat32)
    b = ct.load(B, (0, 0), (32, 16), padding_mode=ct.PaddingMode.ZERO).astype(ct.tfloat32)
    r = a @ b
    ct.static_assert(r.dtype == ct.float32)
    ct.store(out, (0, 0), r)


def test_matmul_tfloat32(dev) -> None:
    g = rng("tf32")
    a = g.uniform(-2, 2, (13, 30)).astype(np.float32)
    b = g.uniform(-2, 2, (30, 11)).astype(np.float32)
    out = dev.poison((13, 11), np.float32)
    dev.launch((1,), matmul_tf32_kernel, (dev.put(a), dev.put(b), out))
    assert_mma_close(dev.get(out), round_tf32(a).astype(np.float64), round_tf32(b).astype(np.float64),
                     np.zeros((13, 11)), 1e-3)


@pytest.mark.parametrize("dtype, tol", [("float16", 2e-3), ("bfloat16", 1e-2)])
def test_library_matmul_more_tiles_than_the_gpu_runs_at_once(dev, dtype: str, tol: float) -> None:
    """The sample matmul (128x256x64 tiles) on more output tiles than the GPU runs at once, so
    the Triton backend's grid loop gives each program several tiles (on the H200: 264 tiles,
    132 programs; under Triton's interpreter: 9 tiles, 3 programs); odd sizes on every edge."""
    from tilecraft.library import matmul_kernel
    m, n, k = (3000, 2600, 200) if dev.name == "triton" else (300, 520, 72)
    gen = rng(f"many-tiles-{dtype}")
    a = to_operand(gen.standard_normal((m, k)), dtype)
    b = to_operand(gen.standard_normal((k, n)), dtype)
    out = dev.poison((m, n), np_dtype(dtype))
    grid = (cdiv(m, 128) * cdiv(n, 256), 1, 1)
    dev.launch(grid, matmul_kernel, (dev.put(a.astype(np_dtype(dtype))), dev.put(b.astype(np_dtype(dtype))), out,
                                     128, 256, 64))
    assert_mma_close(dev.get(out), a, b, np.zeros((m, n)), tol)


@ct.kernel
def grouped_matmul_kernel(As, Bs, Cs, programs: ct.Constant[int], tm: ct.Constant[int], tn: ct.Constant[int],
                          tk: ct.Constant[int]):
    """C_g = A_g @ B_g for every problem g of the lists; `programs` blocks share all the tiles."""
    tile = ct.bid(0)
    first = 0
    for g in range(len(As)):
        A, B, C = As[g], Bs[g], Cs[g]
        tiles_n = ct.num_tiles(B, 1, (tk, tn))
        end = first + ct.num_tiles(A, 0, (tm, tk)) * tiles_n
        while tile < end:
            bm, bn = (tile - first) // tiles_n, (tile - first) % tiles_n
            acc = ct.zeros((tm, tn), dtype=ct.float32)
            for k in range(ct.num_tiles(A, 1, (tm, tk))):
                acc = ct.mma(ct.load(A, (bm, k), (tm, tk), padding_mode=ZERO),
                             ct.load(B, (k, bn), (tk, tn), padding_mode=ZERO), acc)
            ct.store(C, (bm, bn), acc.astype(C.dtype))
            tile += programs
        first = end


def test_grouped_matmul_over_lists_of_arrays(dev) -> None:
    """The grouped GEMM pattern of cuTile's samples: lists of differently sized problems, a
    runtime index into them, a while loop over shared tiles; odd sizes everywhere."""
    gen = rng("grouped")
    shapes = [(37, 21, 45), (16, 50, 9), (70, 33, 64)]
    As = [to_operand(gen.standard_normal((m, k)), "float16") for m, n, k in shapes]
    Bs = [to_operand(gen.standard_normal((k, n)), "float16") for m, n, k in shapes]
    Cs = [dev.poison((m, n), np.float32) for m, n, k in shapes]
    dev.launch((3,), grouped_matmul_kernel, ([dev.put(a.astype(np.float16)) for a in As],
                                             [dev.put(b.astype(np.float16)) for b in Bs], Cs, 3, 16, 16, 16))
    for a, b, c in zip(As, Bs, Cs):
        assert_mma_close(dev.get(c), a, b, np.zeros((a.shape[0], b.shape[1])), 1e-3)
