"""Tile splitting (tilecraft/passes/tile_split.py, backends/tile_splitting.py): which kernels
qualify, the split variants' IR, how a launch picks its split, and the results of kernels split
N ways on every backend (a registered backend `<name>-tiles<N>`): float64 references on
poisoned outputs, odd sizes (edge tiles, K not a multiple of the tile), the same values as the
unsplit kernel, bit-identical reruns through the fast path. On the GPU also the automatic split."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.tile_splitting import TilePieces, TileSplitKernel, GridVariantLauncher, auto_count
from tilecraft.ir import ops, verify
from tilecraft.library.matmul import matmul_kernel, persistent_matmul_kernel
from tilecraft.passes.ranges import nonnegative
from tilecraft.passes.tile_split import split_factors, tile_splits
from conftest import fast_launchers, kernel_ir, poisoned, run_matmul

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(5)
ZERO = ct.PaddingMode.ZERO


def _mats(m: int, n: int, k: int, dtype=np.float16):
    return RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)


@ct.kernel
def bias_relu(A, B, C, bias, alpha: float, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = relu(alpha * (A @ B) + bias[None, :]), one (tm, tn) tile per block, row-major order."""
    n_cols = ct.cdiv(C.shape[1], tn)
    row, col = ct.bid(0) // n_cols, ct.bid(0) % n_cols
    bias_row = ct.reshape(ct.load(bias, index=(col,), shape=(tn,), padding_mode=ZERO), (1, tn))
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    out = acc * alpha + bias_row
    ct.store(C, index=(row, col), tile=ct.where(out > 0, out, 0.0).astype(C.dtype))


# ---- which kernels qualify ------------------------------------------------------------------------
def _loop(A, B, t):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO),
                     ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO), acc)
    return acc


@ct.kernel
def row_centered(A, B, C, t: ConstInt):
    """A reduction along the tile's columns: each piece would see part of a row."""
    acc = _loop(A, B, t)
    ct.store(C, index=(ct.bid(0), 0), tile=acc - ct.max(acc, axis=1, keepdims=True))


@ct.kernel
def first_rows_only(A, B, C, t: ConstInt):
    """A mask made from arange: positions within the tile."""
    acc = _loop(A, B, t)
    rows = ct.broadcast_to(ct.reshape(ct.arange(t, dtype=ct.int32), (t, 1)), (t, t))
    ct.store(C, index=(ct.bid(0), 0), tile=ct.where(rows < 8, acc, ct.zeros((t, t), dtype=ct.float32)))


@ct.kernel
def stored_transposed(A, B, C, D, t: ConstInt):
    """The accumulator stored as is and transposed: needed split two ways."""
    acc = _loop(A, B, t)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(D, index=(0, ct.bid(0)), tile=ct.permute(acc, (1, 0)))


@ct.kernel
def counted(A, B, C, N, t: ConstInt):
    """An atomic besides the store: it would run once per piece."""
    ct.store(C, index=(ct.bid(0), 0), tile=_loop(A, B, t))
    ct.atomic_add(N, (0,), 1)


@ct.kernel
def printed(A, B, C, t: ConstInt):
    acc = _loop(A, B, t)
    ct.printf("block %d\n", ct.bid(0))
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def plain(A, B, C, t: ConstInt):
    """The kernels above without what declines them (their control)."""
    ct.store(C, index=(ct.bid(0), 0), tile=_loop(A, B, t))


@ct.kernel
def copy_only(A, C, t: ConstInt):
    """No MMA: nothing for more SMs to do."""
    ct.store(C, index=(ct.bid(0), 0), tile=ct.load(A, index=(ct.bid(0), 0), shape=(t, t)))


@ct.kernel
def two_shapes(A, B, C, D, t: ConstInt):
    acc = _loop(A, B, t)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(D, index=(ct.bid(0),), tile=ct.sum(acc, axis=1))


_F32 = np.float32


@pytest.mark.parametrize("kernel,extra", [
    (row_centered, ()), (first_rows_only, ()), (stored_transposed, (np.zeros((32, 64), _F32),)),
    (counted, (np.zeros(1, np.int32),)), (printed, ()), (two_shapes, (np.zeros(64, _F32),)),
])
def test_kernels_that_do_not_qualify(kernel, extra):
    a, b = _mats(64, 32, 32, _F32)
    assert tile_splits(kernel_ir(kernel, a, b, np.zeros((64, 32), _F32), *extra, 32)) is None
    assert tile_splits(kernel_ir(plain, a, b, np.zeros((64, 32), _F32), 32)) is not None  # the control


def test_kernel_without_mma_does_not_qualify():
    a = np.zeros((64, 32), _F32)
    assert tile_splits(kernel_ir(copy_only, a, np.zeros_like(a), 32)) is None


def test_qualifying_kernels_and_their_counts():
    a, b = _mats(256, 512, 192)
    c = np.zeros((256, 512), np.float16)
    for kernel in (matmul_kernel, persistent_matmul_kernel):
        splits = tile_splits(kernel_ir(kernel, a, b, c, 128, 256, 64))
        assert splits is not None and splits.shape == (128, 256)
        assert splits.counts(64) == [2, 4, 8] and splits.counts() == [2, 4, 8, 16, 32, 64, 128]
    bias = np.zeros(512, np.float32)
    assert tile_splits(kernel_ir(bias_relu, a, b, c, bias, 1.0, 64, 64, 32)).counts(64) == []  # no piece below 64


def test_split_factors():
    assert [split_factors((128, 256), n) for n in (1, 2, 4, 8)] == [(1, 1), (1, 2), (2, 2), (2, 4)]
    assert split_factors((64, 64), 2) == (2, 1)  # a tie halves rows first
    assert split_factors((64, 64), 3) is None and split_factors((2, 2), 8) is None


def test_split_variant_ir():
    """The variant verifies, keeps value ids unique, reads pieces (A's rows, B's columns), keeps
    the function it came from unchanged, and leaves its `//` and `%` visibly non-negative."""
    a, b = _mats(256, 512, 192)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((256, 512), np.float16), 128, 256, 64)
    before = [op.name for op in fn.walk()]
    variant = verify(tile_splits(fn).split(8))
    ids = [p.id for p in variant.params] + [r.id for op in variant.walk() for r in op.results]
    assert len(ids) == len(set(ids))
    loads = [op for op in variant.walk() if isinstance(op, ops.Load)]
    assert sorted(op.shape for op in loads) == [(64, 64), (64, 64)]
    assert [op.tile.tile.shape for op in variant.walk() if isinstance(op, ops.Store)] == [(64, 64)]
    assert [op.name for op in fn.walk()] == before
    assert _signed_divisions(variant) == _signed_divisions(fn)  # the split adds none


def _signed_divisions(fn) -> list[int]:
    """The source lines of `fn`'s `//` and `%` whose dividend `ranges.nonnegative` cannot bound."""
    positive = nonnegative(fn)
    return [op.loc.line for op in fn.walk() if isinstance(op, ops.Binary)
            and op.fn in (ops.BinaryFn.FLOORDIV, ops.BinaryFn.MOD) and op.lhs.id not in positive]


def test_automatic_count():
    """The split counts the H200 runs measured best for the sample's 128x256 tiles on 132 SMs."""
    tile = 128 * 256
    assert auto_count((2, 1, 1), 132, [2, 4, 8], tile) == 8      # 256^3
    assert auto_count((8, 1, 1), 132, [2, 4, 8], tile) == 8      # 512^3
    assert auto_count((16, 1, 1), 132, [2, 4, 8], tile) == 8     # 1000x500x700
    assert auto_count((18, 1, 1), 132, [2, 4, 8], tile) == 4     # 768^3
    assert auto_count((32, 1, 1), 132, [2, 4, 8], tile) == 4     # 1024^3
    assert auto_count((72, 1, 1), 132, [2, 4, 8], tile) is None  # 1536^3: a split would need a second wave
    assert auto_count((128, 1, 1), 132, [2, 4, 8], tile) is None  # 2048^3: one full wave
    assert auto_count((288, 1, 1), 132, [2, 4, 8], tile) == 2    # 3072^3: the third wave 18% full
    assert auto_count((384, 1, 1), 132, [2, 4, 8], tile) is None  # 4000x3000x2000: 97% of three waves
    assert auto_count((4, 4, 1), 132, [2, 4, 8], tile) == 8      # every grid axis counts
    assert auto_count((8, 1, 1), 132, [], tile) is None


# ---- results --------------------------------------------------------------------------------------
@pytest.fixture
def tiles_backend(backend_variant):
    """A function making (and registering, for this test) `backend` with tiles split N ways."""
    return lambda count: backend_variant(f"tiles{count}", tile_split=count, stream_k=False)


def _split_taken(kernel, name: str, count: int) -> bool:
    """Whether every variant for backend `name` launched its split `count` ways."""
    compiled = [v.compiled for key, v in kernel.variants.items() if key.backend == name]
    compiled = [wrapped_as(c, TileSplitKernel) for c in compiled]
    return bool(compiled) and all(c is not None and list(c._variants) == [count] for c in compiled)


@pytest.mark.parametrize("count", [2, 4, 8])
@pytest.mark.parametrize("persistent", [False, True])
def test_split_matmul_sample(dev, tiles_backend, count, persistent):
    """100x200x70 fp16 (fp32 output) with 32x64x32 tiles: edge tiles on both axes and a partial
    last K step; the persistent kernel on 3 blocks walks several tiles each. Within fp32
    accumulation of float64, equal to the unsplit kernel up to summation order, and the same
    bits on a rerun (through the fast path's launcher)."""
    m, n, k, tiles = 100, 200, 70, (32, 64, 32)
    a, b = _mats(m, n, k)
    kernel = ct.kernel((persistent_matmul_kernel if persistent else matmul_kernel).fn)  # its own variants
    grid = (3 if persistent else ct.cdiv(m, 32) * ct.cdiv(n, 64), 1, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    unsplit = run_matmul(dev, dev.name, grid, kernel, a, b, tiles)
    name = tiles_backend(count)
    first, again = (run_matmul(dev, name, grid, kernel, a, b, tiles) for _ in range(2))
    np.testing.assert_allclose(first, ref, atol=1e-4 * k, rtol=1e-5)
    np.testing.assert_allclose(first, unsplit, atol=1e-5, rtol=1e-6)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert _split_taken(kernel, name, count)
    assert [type(f) for f in fast_launchers(kernel, name)] == [GridVariantLauncher]


def test_split_epilogue_with_bias_and_relu(dev, tiles_backend):
    """A bias row loaded once per block (reshaped, broadcast), a scalar argument and a `where`:
    the bias is read in pieces with the columns."""
    m, n, k = 70, 130, 50
    a, b = _mats(m, n, k)
    bias = RNG.standard_normal(n).astype(np.float32)
    name = tiles_backend(4)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 64), 1, 1)
    got = run_matmul(dev, name, grid, bias_relu, a, b, (dev.put(bias), -0.5, 32, 64, 32))
    ref = np.maximum(-0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + bias, 0)
    np.testing.assert_allclose(got, ref, atol=1e-4 * k, rtol=1e-5)
    assert _split_taken(bias_relu, name, 4)


@pytest.mark.only_backends("triton")
def test_automatic_split_on_the_gpu(dev):
    """256x256x512 fp16 with the sample's 128x256x64 tiles: 2 blocks, split 8 ways into 64x64
    pieces on a GPU of at least 16 SMs; reruns through the fast path are bit-identical."""
    m, n, k = 256, 256, 512
    a, b = _mats(m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    kernel = ct.kernel(matmul_kernel.fn)
    results = [run_matmul(dev, "triton", (2, 1, 1), kernel, a, b, (128, 256, 64)) for _ in range(3)]
    np.testing.assert_allclose(results[0], ref, atol=1e-4 * k, rtol=1e-5)
    assert _split_taken(kernel, "triton", 8)
    assert [type(f) for f in fast_launchers(kernel, "triton")] == [GridVariantLauncher]
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint32), later.view(np.uint32))


@pytest.mark.only_backends("triton-interpret")
def test_launch_count_from_the_gpus_sm_count(monkeypatch):
    """The Triton backend's choice for a CUDA launch: the SM count asked of the device once, then
    `auto_count` (a CUDA device faked on the CPU); none off CUDA, a forced count on any grid."""
    import torch

    from tilecraft.backends.triton import split_launch

    class Properties:
        multi_processor_count = 132

    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: asked.append(index) or Properties)
    monkeypatch.setattr(split_launch, "_sms", {})
    cpu = [torch.empty(1)]
    a, b, c = np.zeros((256, 64), np.float16), np.zeros((64, 256), np.float16), np.zeros((256, 256), np.float16)
    splits = tile_splits(kernel_ir(matmul_kernel, a, b, c, 128, 256, 64))
    pieces, forced = TilePieces(splits, (2, 4, 8)), TilePieces(splits, (4,), 4)
    assert split_launch.choose_tile_split((8, 1, 1), cpu, pieces) is None
    assert split_launch.choose_tile_split((8, 1, 1), cpu, forced) == 4
    monkeypatch.setattr(split_launch, "_device", lambda args: torch.device("cuda", 0))
    assert split_launch.choose_tile_split((8, 1, 1), cpu, pieces) == 8
    assert split_launch.choose_tile_split((40, 1, 1), cpu, pieces) == 2
    assert asked == [0]


# ---- adversarial kernels: declined, or split with the unsplit kernel's results ---------------------
def _tile_of(C, tn):
    """(row, col) of block bid(0) over C's tiles, row-major."""
    n_cols = ct.cdiv(C.shape[1], tn)
    return ct.bid(0) // n_cols, ct.bid(0) % n_cols


def _product(A, B, row, col, tm, tn, tk, acc):
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    return acc


def _f32(tm, tn):
    return ct.full((tm, tn), 0, dtype=ct.float32)


@ct.kernel
def in_place(X, W, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """X = X @ W with one tile column (N <= tn): each block reads its rows of X whole, then
    overwrites them; split by columns, a piece read columns another piece had written."""
    ct.store(X, index=(ct.bid(0), 0), tile=_product(X, W, ct.bid(0), 0, tm, tn, tk, _f32(tm, tn)))


@ct.kernel
def plus_tile_sum(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = A @ B + sum(C's tile): C's tile read whole, then overwritten."""
    row, col = _tile_of(C, tn)
    total = ct.sum(ct.load(C, index=(row, col), shape=(tm, tn), padding_mode=ZERO))
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk, _f32(tm, tn)) + total)


@ct.kernel
def two_views(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C's tile, then again 8 rows lower through a view: overlapping writes in program order."""
    row, col = _tile_of(C, tn)
    acc = _product(A, B, row, col, tm, tn, tk, _f32(tm, tn))
    ct.store(C, index=(row, col), tile=acc)
    ct.store(C.slice(0, 8, C.shape[0]), index=(row, col), tile=acc * 2)


@ct.kernel
def sliding_view(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """One block: A @ B + i stored at row 8 i for i = 0, 1, through a view made in the loop, the
    second store overwriting most of the first."""
    for i in range(2):
        acc = _product(A, B, 0, 0, tm, tn, tk, _f32(tm, tn))
        ct.store(C.slice(0, i * 8, C.shape[0]), index=(0, 0), tile=acc + i)


@ct.kernel
def list_in_loop(A, B, Cs, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """The product + g stored into each array Cs[g] of a list, which may share memory."""
    for g in range(len(Cs)):
        ct.store(Cs[g], index=(ct.bid(0), 0), tile=_product(A, B, ct.bid(0), 0, tm, tn, tk, _f32(tm, tn)) + g)


@ct.kernel
def column_mask(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """arange along the split columns."""
    row, col = _tile_of(C, tn)
    cols = ct.broadcast_to(ct.reshape(ct.arange(tn, dtype=ct.int32), (1, tn)), (tm, tn))
    acc = _product(A, B, row, col, tm, tn, tk, _f32(tm, tn))
    ct.store(C, index=(row, col), tile=ct.where(cols < 8, acc, 0.0))


@ct.kernel
def operand_also_added(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """A's tile (tk == tn) an MMA operand (rows split) and added to the output (both axes split)."""
    row, col = _tile_of(C, tn)
    acc = _f32(tm, tn)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc) + a.astype(ct.float32)
    ct.store(C, index=(row, col), tile=acc)


@ct.kernel
def k_row_sums(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """A reduction along K of the row-split A tile."""
    row, col = _tile_of(C, tn)
    acc = _f32(tm, tn)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
        acc = acc + ct.sum(a, axis=1, keepdims=True).astype(ct.float32)
    ct.store(C, index=(row, col), tile=acc)


@ct.kernel
def b_by_order(A, Bt, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """B read from B^T with order=(1, 0)."""
    row, col = _tile_of(C, tn)
    acc = _f32(tm, tn)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        b = ct.load(Bt, index=(k, col), shape=(tk, tn), order=(1, 0), padding_mode=ZERO)
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO), b, acc)
    ct.store(C, index=(row, col), tile=acc)


@pytest.mark.parametrize("kernel", [in_place, plus_tile_sum, two_views, sliding_view, list_in_loop, column_mask,
                                    operand_also_added, k_row_sums], ids=lambda k: k.fn.__name__)
def test_more_kernels_that_do_not_qualify(kernel):
    a, b = _mats(70, 64, 64, _F32)
    c = np.zeros((70, 64), _F32)
    args = (a, b) if kernel is in_place else (a, b, [c, c]) if kernel is list_in_loop else (a, b, c)
    assert tile_splits(kernel_ir(kernel, *args, 32, 64, 64)) is None
    assert tile_splits(kernel_ir(accumulate, a, b, c, 32, 64, 64)) is not None  # a control that reads C too


@pytest.mark.parametrize("count", [2, 4])
def test_kernels_ordering_their_own_accesses_run_whole(dev, tiles_backend, count):
    """Three kernels above whose block reads or overwrites what it stored, launched on a backend
    forcing splits: not split, so X @ W in place, C + sum(C's tile) and the sliding view come
    out as float64 says (split 4 ways, none did; `in_place` and `plus_tile_sum` not 2 ways either)."""
    m, n, k = 70, 64, 64
    x, w = _mats(m, n, k, _F32)
    c = RNG.standard_normal((m, n)).astype(_F32)
    a = RNG.standard_normal((m, k)).astype(_F32)
    name, grid, tiles = tiles_backend(count), (ct.cdiv(m, 32), 1, 1), (32, 64, 32)
    X, C, S = dev.put(x), dev.put(c), dev.poison((48, n), _F32)
    dev.launch(grid, in_place, (X, dev.put(w), *tiles), backend=name)
    dev.launch(grid, plus_tile_sum, (dev.put(a), dev.put(w), C, *tiles), backend=name)
    dev.launch((1, 1, 1), sliding_view, (dev.put(a[:32]), dev.put(w), S, *tiles), backend=name)
    xw, aw = x.astype(np.float64) @ w, a.astype(np.float64) @ w
    np.testing.assert_allclose(dev.get(X), xw, atol=1e-4 * k, rtol=1e-5)
    sums = np.repeat([c[r:r + 32].sum(dtype=np.float64) for r in range(0, m, 32)], 32)[:m, None]
    np.testing.assert_allclose(dev.get(C), aw + sums, atol=1e-4 * k, rtol=1e-5)
    np.testing.assert_allclose(dev.get(S)[:40], np.concatenate([aw[:8], aw[:32] + 1]), atol=1e-4 * k, rtol=1e-5)
    assert not any(_split_taken(kernel, name, count) for kernel in (in_place, plus_tile_sum, sliding_view))


@ct.kernel
def branch_store(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Stores under an `if` on the block's tile: acc or -acc in a checkerboard."""
    row, col = _tile_of(C, tn)
    acc = _product(A, B, row, col, tm, tn, tk, _f32(tm, tn))
    if (row + col) % 2 == 0:
        ct.store(C, index=(row, col), tile=acc)
    else:
        ct.store(C, index=(row, col), tile=-acc)


@ct.kernel
def accumulate(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C += A @ B: the accumulator starts as a load of C's tile (read and written in pieces)."""
    row, col = _tile_of(C, tn)
    init = ct.load(C, index=(row, col), shape=(tm, tn), padding_mode=ZERO)
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk, init))


@ct.kernel
def alpha_beta(A, B, C, D, alpha: float, beta: float, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """D = alpha * A @ B + beta * C, and C = A @ B: two stores of one shape."""
    row, col = _tile_of(C, tn)
    acc = _product(A, B, row, col, tm, tn, tk, _f32(tm, tn))
    ct.store(D, index=(row, col), tile=alpha * acc + beta * ct.load(C, index=(row, col), shape=(tm, tn)))
    ct.store(C, index=(row, col), tile=acc)


@ct.kernel
def bias_column(A, B, C, bias, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """A bias per row: a (tm,) load reshaped to (tm, 1), broadcast along the columns."""
    row, col = _tile_of(C, tn)
    column = ct.reshape(ct.load(bias, index=(row,), shape=(tm,), padding_mode=ZERO), (tm, 1))
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk, _f32(tm, tn)) + column)


@ct.kernel
def relu_half(A, B, C, D, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = A @ B (fp32) and D = relu(A @ B) (fp16, `where` with a scalar)."""
    row, col = _tile_of(C, tn)
    acc = _product(A, B, row, col, tm, tn, tk, _f32(tm, tn))
    ct.store(C, index=(row, col), tile=acc)
    ct.store(D, index=(row, col), tile=ct.where(acc > 0, acc, 0.0).astype(D.dtype))


@ct.kernel
def reversed_columns(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Tiles column-major from the last block back, plus bid(0) added to every element."""
    rows = ct.cdiv(C.shape[0], tm)
    t = ct.num_blocks(0) - 1 - ct.bid(0)
    acc = _product(A, B, t % rows, t // rows, tm, tn, tk, _f32(tm, tn))
    ct.store(C, index=(t % rows, t // rows), tile=acc + ct.bid(0).astype(ct.float32))


@ct.kernel
def batched_3d(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Batch bid(1): (1, tm, tk) @ (1, tk, tn) MMAs reshaped to 2-D, stored into the batch's rows
    of C (a view)."""
    row, col = _tile_of(C, tn)
    acc = ct.full((1, tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=2, shape=(1, tm, tk))):
        acc = ct.mma(ct.load(A, index=(ct.bid(1), row, k), shape=(1, tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(ct.bid(1), k, col), shape=(1, tk, tn), padding_mode=ZERO), acc)
    rows = C.slice(0, ct.bid(1) * A.shape[1], (ct.bid(1) + 1) * A.shape[1])
    ct.store(rows, index=(row, col), tile=ct.reshape(acc, (tm, tn)))


@ct.kernel
def typed_acc(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """The accumulator in C's dtype: int8 -> int32, or fp16 -> fp16."""
    row, col = _tile_of(C, tn)
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk, ct.zeros((tm, tn), dtype=C.dtype)))


@ct.kernel
def carried(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Loop-carried besides the accumulator: A's next tile (NaN padding, K masked by an arange
    along K) and the running maximum of the partial sums."""
    row, col = _tile_of(C, tn)
    acc, top = _f32(tm, tn), ct.full((tm, tn), -1e30, dtype=ct.float32)
    a = ct.load(A, index=(row, 0), shape=(tm, tk), padding_mode=ct.PaddingMode.NAN)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        inside = ct.broadcast_to(ct.reshape(ct.arange(tk, dtype=ct.int32) + k * tk < A.shape[1], (1, tk)), (tm, tk))
        nxt = ct.load(A, index=(row, k + 1), shape=(tm, tk), padding_mode=ct.PaddingMode.NAN)
        acc = ct.mma(ct.where(inside, a, ct.zeros((tm, tk), dtype=a.dtype)),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
        top, a = ct.maximum(top, acc), nxt
    ct.store(C, index=(row, col), tile=acc + top)


def _steps(a, b, tk):
    """The partial products of a @ b after each tk-wide K step, in float64."""
    return np.cumsum([a[:, k:k + tk].astype(np.float64) @ b[k:k + tk] for k in range(0, a.shape[1], tk)], axis=0)


def _case(name, m, n, k):
    """(kernel, grid, args, {arg position: float64 reference}) of an accepted kernel; outputs
    poisoned (but C, read by `accumulate` and `alpha_beta`); an arg `dev -> array` makes a view."""
    a, b = _mats(m, n, k)
    ab = a.astype(np.float64) @ b.astype(np.float64)
    c = RNG.standard_normal((m, n)).astype(_F32)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 64), 1, 1)
    out = poisoned((m, n), _F32)
    tiles = (32, 64, 32)
    checkerboard = np.where((np.arange(m)[:, None] // 32 + np.arange(n) // 64) % 2 == 0, 1, -1) * ab
    if name == "branch_store":
        return branch_store, grid, (a, b, out, *tiles), {2: checkerboard}
    if name == "b_transposed_view":  # B a transposed view of B^T (strides (1, k)), read in identity order
        bt = np.ascontiguousarray(b.T)
        return branch_store, grid, (a, lambda dev: dev.permute(dev.put(bt), (1, 0)), out, *tiles), {2: checkerboard}
    if name == "b_by_order":  # B^T read with order=(1, 0): its pieces are cut along B^T's rows
        return b_by_order, grid, (a, np.ascontiguousarray(b.T), out, *tiles), {2: ab}
    if name == "accumulate":
        return accumulate, grid, (a, b, c, *tiles), {2: c + ab}
    if name == "alpha_beta":
        return alpha_beta, grid, (a, b, c, poisoned((m, n), _F32), 0.5, -2.0, *tiles), {2: ab, 3: 0.5 * ab - 2 * c}
    if name == "bias_column":
        bias = RNG.standard_normal(m).astype(_F32)
        return bias_column, grid, (a, b, out, bias, *tiles), {2: ab + bias[:, None]}
    if name == "relu_half":
        return relu_half, grid, (a, b, out, poisoned((m, n), np.float16), *tiles), {2: ab, 3: np.maximum(ab, 0)}
    if name == "reversed_columns":
        tile = np.arange(m)[:, None] // 32 + ct.cdiv(m, 32) * (np.arange(n) // 64)
        return reversed_columns, grid, (a, b, out, *tiles), {2: ab + grid[0] - 1 - tile}
    if name == "batched_3d":
        a3, b3 = np.stack([a, a[::-1]]), np.stack([b, -b])
        ref = np.concatenate([x.astype(np.float64) @ y for x, y in zip(a3, b3)])
        return batched_3d, (grid[0], 2, 1), (a3, b3, poisoned((2 * m, n), _F32), *tiles), {2: ref}
    if name == "int8":
        ai, bi = (RNG.integers(-128, 128, s).astype(np.int8) for s in ((m, k), (k, n)))
        return typed_acc, grid, (ai, bi, poisoned((m, n), np.int32), *tiles), {2: ai.astype(np.float64) @ bi}
    if name == "fp16_acc":
        return typed_acc, grid, (a, b, poisoned((m, n), np.float16), *tiles), {2: ab}
    assert name == "carried"
    steps = _steps(a, b, 32)
    return carried, grid, (a, b, out, *tiles), {2: steps[-1] + steps.max(axis=0)}


def _launch_case(dev, name, kernel, grid, args, outs) -> dict:
    args = [dev.put(x) if isinstance(x, np.ndarray) else x(dev) if callable(x) else x for x in args]
    dev.launch(grid, kernel, tuple(args), backend=name)
    return {i: dev.get(args[i]) for i in outs}


@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("case", ["branch_store", "b_transposed_view", "b_by_order", "accumulate", "alpha_beta",
                                  "bias_column",
                                  "relu_half", "reversed_columns", "batched_3d", "int8", "fp16_acc", "carried"])
def test_split_results_of_accepted_kernels(dev, tiles_backend, case, count):
    """70x130x50 (edge tiles both ways, a partial K step) with 32x64x32 tiles, split 2 ways (by
    columns) and 4 (both): the float64 reference, and the unsplit kernel's values (fp32 to
    summation order, fp16 to a few ulps, ints exactly)."""
    m, n, k = 70, 130, 50
    kernel, grid, args, refs = _case(case, m, n, k)
    kernel = ct.kernel(kernel.fn)  # its own variants
    name = tiles_backend(count)
    unsplit, split = (_launch_case(dev, backend, kernel, grid, args, refs) for backend in (dev.name, name))
    for i, ref in refs.items():
        half = split[i].dtype == np.float16
        np.testing.assert_allclose(split[i], ref, atol=0.1 if half else 1e-4 * k, rtol=1e-2 if half else 1e-5)
        np.testing.assert_allclose(split[i], unsplit[i], atol=0.04 if half else 1e-5, rtol=2e-3 if half else 1e-6)
    assert _split_taken(kernel, name, count)


def _param_facts(fn, *arrays) -> list:
    """The facts a launch gives `fn`'s parameters for `arrays` (its first ones); none for the rest."""
    from tilecraft.backends.base import array_facts
    facts = [array_facts(0, x.shape, tuple(s // x.itemsize for s in x.strides), x.itemsize, False) for x in arrays]
    return [*facts, *[None] * (len(fn.params) - len(facts))]


def test_cuts_name_the_array_axis_of_ordered_loads():
    """B^T read with order=(1, 0): a split of the columns cuts the load's tile dim 1, which is
    B^T's axis 0 (what `piece_facts` must relax)."""
    a, b = _mats(64, 128, 32)
    splits = tile_splits(kernel_ir(b_by_order, a, np.ascontiguousarray(b.T), np.zeros((64, 128), _F32), 32, 64, 32))
    bt = splits.fn.params[1].id
    assert [cut for cut in splits.cuts(2) if cut[0] == bt] == [(bt, 0, 64, 32)]


def test_pieces_past_the_arrays_end_keep_their_bounds_checks():
    """M = 192 with 128-row tiles: the second tile straddles the end, and its lower 64-row piece
    lies wholly past it. 64 divides 192, so the variant's facts must not say so along the cut
    axes (a backend would read such a piece unchecked); axes the user's tiles divide keep it."""
    from tilecraft.backends.tile_splitting import piece_facts

    a, b = _mats(192, 256, 128)
    c = np.zeros((192, 256), np.float32)
    fn = kernel_ir(matmul_kernel, a, b, c, 128, 256, 64)
    splits = tile_splits(fn)
    facts = _param_facts(fn, a, b, c)
    assert [f.dim_pow2 for f in facts[:3]] == [(64, 128), (128, 256), (64, 256)]
    got = piece_facts(splits, 8, facts)  # pieces of 64x64
    assert [f.dim_pow2 for f in got[:3]] == [(32, 128), (128, 256), (32, 256)]
    assert piece_facts(splits, 2, facts)[:3] == facts[:3]  # 128x128 pieces: rows not cut


@pytest.mark.parametrize("count", [2, 8])
def test_split_with_pieces_past_the_arrays_end(dev, tiles_backend, count):
    """The same shapes run: every piece inside the array computed, the rest never written."""
    m, n, k = 192, 256, 128
    a, b = _mats(m, n, k)
    name = tiles_backend(count)
    kernel = ct.kernel(matmul_kernel.fn)
    got = run_matmul(dev, name, (2, 1, 1), kernel, a, b, (128, 256, 64))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), atol=1e-4 * k, rtol=1e-5)
    assert _split_taken(kernel, name, count)


def test_specialized_launcher_chooses_once_per_grid():
    """A specialized launcher's arguments keep their device, so it asks for a grid's split count
    once; a dependent launch asks nothing and runs the kernel as compiled."""
    from tilecraft.backends.interpreter.backend import InterpretedKernel

    m, n, k = 64, 128, 32
    a, b = _mats(m, n, k)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((m, n), np.float32), 32, 64, 32)
    asked = []

    def choose(grid, args):
        asked.append(grid)
        return 2 if grid[0] == 4 else None

    wrapped = TileSplitKernel(InterpretedKernel(fn), tile_splits(fn).split, lambda f, count: InterpretedKernel(f),
                              choose)
    launcher = wrapped.specialize(None)
    for grid in [(4, 1, 1), (4, 1, 1), (2, 1, 1), (4, 1, 1), (2, 1, 1)]:
        c = poisoned((m, n), np.float32)
        launcher.launch(grid, [a, b, c])
        cols = 64 * grid[0] // 2  # the sample's grouped order: 2 blocks cover the first tile column
        np.testing.assert_allclose(c[:, :cols], (a.astype(np.float64) @ b)[:, :cols], atol=1e-4 * k, rtol=1e-5)
    launcher.launch((4, 1, 1), [a, b, poisoned((m, n), np.float32)], dependent=True)
    assert asked == [(4, 1, 1), (2, 1, 1)] and list(wrapped._variants) == [2]


def test_variant_launcher_fused_launch_needs_a_grid_taking_one():
    """Made after a variant's launch, the launcher has the variant's fused launch where the
    variant's launcher makes one for a given grid (the user's, and the one the variant runs);
    one whose fused launch takes no grid (a warp-specialized launcher's, made for the grid it
    ran) gives none: it would be handed the user's grid. It raised a TypeError before, in the GPU
    suite with a staged kernel wrapped once more (gpu-tests-h200-2026-12-03-r.xml.gz)."""
    from types import SimpleNamespace

    made = []
    with_grid = SimpleNamespace(launch=lambda *a, **k: None,
                                fused_launch=lambda grid: made.append(grid) or "fused")
    without = SimpleNamespace(launch=lambda *a, **k: None, fused_launch=lambda: "made for another grid")
    for inner, want in ((with_grid, "fused"), (without, None)):
        variant = SimpleNamespace(launch=lambda *a, **k: None, specialize=lambda args, inner=inner: inner)
        kernel = TileSplitKernel(SimpleNamespace(launch=lambda *a, **k: None), lambda count: "fn",
                                 lambda fn, count, variant=variant: variant, lambda grid, args: 4)
        args = [object()]
        kernel.launch((3, 1, 1), args)
        assert kernel.specialize(args).fused_launch() == want
    assert made == [((3, 1, 1), (12, 1, 1))]


def _split_sources(n: int, k: int, **options) -> tuple[str, str]:
    """The Triton sources of the sample (fp16 n x n x k, 64x128x64 tiles, kernel `options`) as
    compiled and as its variant split 2 ways (a Triton backend's choices)."""
    from tilecraft.backends import BackendKind
    from tilecraft.backends.triton import TritonBackend

    a, b = _mats(n, n, k)
    c = np.zeros((n, n), np.float16)
    fn = kernel_ir(matmul_kernel, a, b, c, 64, 128, 64)
    fn.options.update(options)
    compiled = TritonBackend(BackendKind.TRITON_INTERPRET, tile_split=2).compile(fn, _param_facts(fn, a, b, c))
    assert isinstance(compiled, TileSplitKernel)
    return compiled.main.source, compiled.variant(2).source


@pytest.mark.parametrize("n, k, stages", [(256, 256, "deep"), (250, 252, "narrow")], ids=["rows16", "narrow"])
def test_split_variants_pipeline_deeper(n, k, stages):
    """A split launch runs about one block per SM: the variant's K loop gets DEEP_STAGES pipeline
    stages where the kernel as compiled has the usual 4 (a Triton backend's choice), unless its
    rows are not 16-byte aligned (fp16 rows of 250 or 252 elements): then DEEP_NARROW_STAGES."""
    from tilecraft.backends.triton.heuristics import DEEP_NARROW_STAGES, DEEP_STAGES

    whole, split = _split_sources(n, k)
    assert "num_stages=4)" in whole
    expected = DEEP_STAGES if stages == "deep" else DEEP_NARROW_STAGES
    assert f"num_stages={expected})" in split


def test_split_variants_keep_the_kernels_own_stages():
    """A kernel that names its num_stages keeps them in its split variants, narrow rows or not."""
    assert "num_stages=5)" in _split_sources(250, 252, num_stages=5)[1]
