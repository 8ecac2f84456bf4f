"""Tests written against mutations that an earlier mutation-testing run found the suite let
through (each test fails with its mutation applied; see docs/testing.md):

  swizzle   the grouped block order of the matmul library dropping `num_bid_m - first_bid_m`
            (only wrong when the row tiles are more than, and not a multiple of, GROUP_SIZE_M)
  ieee-dot  float32 `tl.dot` switching from input_precision="ieee" to "tf32" (Triton's CPU
            interpreter ignores input_precision: the source check runs everywhere, the
            numerics check can only fail on the GPU)
  where-i64 int64 `where` computed through float64 (exact only below 2**53)
"""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import cdiv, round_tf32
from tilecraft.library import matmul_kernel, persistent_matmul_kernel, swizzle_2d, swizzle_2d_from_bid

ZERO = ct.PaddingMode.ZERO


# ---- swizzle: every output tile written exactly once -------------------------------------------

@ct.kernel
def swizzle_owner_kernel(out, M: int, N: int, tm: ct.Constant[int], tn: ct.Constant[int]):
    """out[bid_m, bid_n] = bid for the tile `swizzle_2d` gives this block (1x1 output tiles)."""
    bid_m, bid_n = swizzle_2d(M, N, tm, tn, 8)
    ct.store(out, (bid_m, bid_n), ct.full((1, 1), ct.bid(0), dtype=ct.int32))


@ct.kernel
def persistent_swizzle_count_kernel(out, M: int, N: int, tm: ct.Constant[int], tn: ct.Constant[int]):
    """out[bid_m, bid_n] += 1 for each tile id `swizzle_2d_from_bid` maps there, each block
    looping over tile ids like the persistent matmul (as many ids as tiles: a tile counted
    twice leaves another at 0)."""
    total = ct.cdiv(M, tm) * ct.cdiv(N, tn)
    for tile_id in range(ct.bid(0), total, ct.num_blocks(0)):
        bid_m, bid_n = swizzle_2d_from_bid(M, N, tm, tn, 8, tile_id)
        ct.store(out, (bid_m, bid_n), ct.load(out, (bid_m, bid_n), (1, 1)) + 1)


# (M, N) with 128x256 tiles: row tiles 9 (the case that exposed the mutation: 128 rows unwritten
# at M=1152, N=512), 17, 8, 1; column tiles 2, 3, 5, 3
SWIZZLE_SHAPES = [(1152, 512), (2176, 700), (1024, 1280), (100, 513)]


@pytest.mark.parametrize("persistent", [False, True], ids=["one-tile-per-block", "persistent"])
def test_swizzle_writes_every_tile_once(dev, persistent: bool) -> None:
    for m, n in SWIZZLE_SHAPES:
        tiles_m, tiles_n = cdiv(m, 128), cdiv(n, 256)
        if persistent:
            out = dev.put(np.zeros((tiles_m, tiles_n), np.int32))
            dev.launch((5,), persistent_swizzle_count_kernel, (out, m, n, 128, 256))
            got = dev.get(out)
            assert (got == 1).all(), f"M={m}, N={n}: times each tile was written:\n{got}"
            continue
        out = dev.poison((tiles_m, tiles_n), np.int32, -1)
        dev.launch((tiles_m * tiles_n,), swizzle_owner_kernel, (out, m, n, 128, 256))
        got = dev.get(out)
        assert (got >= 0).all(), f"M={m}, N={n}: tiles {np.argwhere(got < 0).tolist()} never written"
        assert sorted(got.ravel().tolist()) == list(range(tiles_m * tiles_n)), f"M={m}, N={n}: {got}"


@pytest.mark.parametrize("persistent", [False, True], ids=["matmul_kernel", "persistent_matmul_kernel"])
def test_library_matmul_writes_every_element_at_1152x512(dev, persistent: bool) -> None:
    """The library kernels themselves with 128x256 tiles at M=1152 (9 row tiles, one group of 8
    and one of 1), N=512; K=16 keeps it cheap on the CPU backends."""
    m, n, k = 1152, 512, 16
    gen = np.random.default_rng(1152)
    a = gen.standard_normal((m, k)).astype(np.float16)
    b = gen.standard_normal((k, n)).astype(np.float16)
    out = dev.poison((m, n), np.float32)
    grid = (5,) if persistent else (cdiv(m, 128) * cdiv(n, 256),)
    dev.launch(grid, persistent_matmul_kernel if persistent else matmul_kernel,
               (dev.put(a), dev.put(b), out, 128, 256, 16))
    got = dev.get(out)
    unwritten = np.isnan(got)
    rows = np.unique(np.where(unwritten)[0])
    assert not unwritten.any(), f"{unwritten.sum()} elements unwritten, in rows {rows[0]}..{rows[-1]}"
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(a).max() * np.abs(b).max() * k)


# ---- fp32 dot: IEEE, not tf32 --------------------------------------------------------------------

def mma_kernel_for(op_dtype):
    @ct.kernel
    def k(A, B, C, tk: ct.Constant[int]):
        acc = ct.zeros((16, 16), dtype=ct.float32)
        for kk in range(ct.num_tiles(A, axis=1, shape=(16, tk))):
            a = ct.load(A, (ct.bid(0), kk), (16, tk), padding_mode=ZERO).astype(op_dtype)
            b = ct.load(B, (kk, ct.bid(1)), (tk, 16), padding_mode=ZERO).astype(op_dtype)
            acc = ct.mma(a, b, acc)
        ct.store(C, (ct.bid(0), ct.bid(1)), acc)
    return k


MMA_FP32 = mma_kernel_for(ct.float32)
MMA_TF32 = mma_kernel_for(ct.tfloat32)


@ct.kernel
def matmul_fp32_kernel(A, B, C):
    ct.store(C, (0, 0), ct.load(A, (0, 0), (16, 32)) @ ct.load(B, (0, 0), (32, 16)))


def _triton_source(kernel, args, interpret: bool) -> str:
    """The Triton source `kernel` is lowered to for `args`, for Triton's interpreter or for an
    sm_90 GPU (lowering only: no GPU needed)."""
    pytest.importorskip("triton")
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.triton import TritonBackend
    specs, _, _ = kernel.describe(args)
    ir = kernel.lower(specs, None if interpret else "sm_90")
    backend = (TritonBackend(BackendKind.TRITON_INTERPRET) if interpret
               else TritonBackend(BackendKind.TRITON, capability=90))
    return backend.compile(ir, [None] * len(ir.params)).source


@pytest.mark.parametrize("interpret", [True, False], ids=["interpret", "sm_90"])
def test_fp32_dot_asks_for_ieee_and_tf32_dot_for_tf32(interpret: bool) -> None:
    torch = pytest.importorskip("torch")
    a, b, c = torch.zeros(32, 64), torch.zeros(64, 32), torch.zeros(32, 32)
    for kernel, want in ((MMA_FP32, "ieee"), (MMA_TF32, "tf32")):
        source = _triton_source(kernel, (a, b, c, 16), interpret)
        dots = [line for line in source.splitlines() if "tl.dot(" in line]
        assert dots and all(f'input_precision="{want}"' in line for line in dots), "\n".join(dots) or source
    source = _triton_source(matmul_fp32_kernel, (a, b, c), interpret)
    dots = [line for line in source.splitlines() if "tl.dot(" in line]
    assert dots and all('input_precision="ieee"' in line for line in dots), "\n".join(dots) or source


def test_fp32_mma_is_exact_to_fp32_not_tf32(dev) -> None:
    """float32 operands whose low mantissa bits matter, against float64: tf32 (10 mantissa bits)
    is ~1e-4 off here (the test checks that most elements would break the bound), the bound
    1e-5 is above K * 2**-24 (float32 sums in any order). Only the GPU run can fail this:
    Triton's CPU interpreter computes in float32 whatever input_precision says."""
    gen = np.random.default_rng(2024)
    m, n, k = 32, 32, 64
    a = (1.0 + gen.integers(1, 2**13, (m, k)) * 2.0**-23).astype(np.float32)  # the bits tf32 drops
    a *= gen.choice([-1.0, 1.0], (m, k)).astype(np.float32)
    b = gen.standard_normal((k, n)).astype(np.float32)
    out = dev.poison((m, n), np.float32)
    dev.launch((2, 2), MMA_FP32, (dev.put(a), dev.put(b), out, 16))
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = 1e-5 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    tf32 = round_tf32(a).astype(np.float64) @ round_tf32(b).astype(np.float64)
    assert (np.abs(tf32 - want) > bound).mean() > 0.5, "the bound must tell tf32 from fp32"
    err = np.abs(dev.get(out).astype(np.float64) - want)
    assert (err <= bound).all(), f"max error/bound {float((err / bound).max()):.3g}: operands rounded (tf32?)"


# ---- int64 where: exact beyond 2**53 -------------------------------------------------------------

BIG = np.array([2**62 + 1, -(2**62) - 3, 2**53 + 1, 2**63 - 1, -(2**63), 2**53 - 1, 12345678901234567, -7],
               dtype=np.int64)


@ct.kernel
def where_tiles_kernel(c, x, y, out):
    cond = ct.load(c, (0,), (8,))
    ct.store(out, (0,), ct.where(cond, ct.load(x, (0,), (8,)), ct.load(y, (0,), (8,))))


@ct.kernel
def where_scalar_kernel(c, x, s: ct.ScalarInt64, out, out2):
    cond = ct.load(c, (0,), (8,))
    tx = ct.load(x, (0,), (8,))
    ct.store(out, (0,), ct.where(cond, tx, s))
    ct.store(out2, (0,), ct.where(cond, s, tx + 1))


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_where_keeps_64_bit_integers_exact(dev, dtype: str) -> None:
    x = BIG.view(dtype)
    y = x[::-1].copy()
    cond = np.array([1, 0, 1, 0, 1, 1, 0, 0], dtype=bool)
    out = dev.poison(8, dtype)
    dev.launch((1,), where_tiles_kernel, (dev.put(cond), dev.put(x), dev.put(y), out))
    got = dev.get(out)
    assert got.dtype == np.dtype(dtype) and got.tolist() == np.where(cond, x, y).tolist()


def test_where_with_an_int64_scalar_beyond_2_to_53(dev) -> None:
    s = 2**62 + 1
    cond = np.array([1, 0, 1, 0, 1, 1, 0, 0], dtype=bool)
    out, out2 = dev.poison(8, np.int64), dev.poison(8, np.int64)
    dev.launch((1,), where_scalar_kernel, (dev.put(cond), dev.put(BIG), s, out, out2))
    assert dev.get(out).tolist() == np.where(cond, BIG, np.int64(s)).tolist()
    with np.errstate(over="ignore"):
        assert dev.get(out2).tolist() == np.where(cond, np.int64(s), BIG + 1).tolist()
