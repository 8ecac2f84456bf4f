"""Stream-K (tilecraft/passes/stream_k.py, backends/stream_k.py): which kernels qualify, how a
launch picks it, and the results of kernels run on N programs on every backend (a registered
backend `<name>-sk<N>`): float64 references on poisoned outputs, odd sizes (edge tiles, K not a
multiple of the tile), tiles cut between 2 or more programs, programs with nothing to do, loops
of no iteration, the unsplit kernel's values up to summation order, bit-identical reruns through
the fast path, programs run in any order; kernels of unusual shape (K loops from parameters with
steps, grid queries in branches, epilogues of two stores and an atomic, prologue loads, int32 and
float64 accumulators). On the GPU also the automatic choice."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.stream_k import StreamKKernel, StreamKLauncher, auto_programs
from tilecraft.ir import ops, verify
from tilecraft.library.matmul import matmul_kernel, persistent_matmul_kernel
from tilecraft.passes.stream_k import SUM_ROWS, stream_k
from conftest import fast_launchers, kernel_ir, run_matmul

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(11)
ZERO = ct.PaddingMode.ZERO


def _mats(m: int, n: int, k: int, dtype=np.float16):
    return RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)


@ct.kernel
def residual(A, B, C, R, k_tiles: int, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = A[:, :k_tiles * tk] @ B[:k_tiles * tk] + R, one (tm, tn) tile per block in
    column-major order: the epilogue reads R at the block's tile; k_tiles may be 0."""
    n_rows = ct.cdiv(C.shape[0], tm)
    row, col = ct.bid(0) % n_rows, ct.bid(0) // n_rows
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(k_tiles):
        a = ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    out = acc + ct.load(R, index=(row, col), shape=(tm, tn), padding_mode=ZERO)
    ct.store(C, index=(row, col), tile=out)


@ct.kernel
def triangular(A, B, C, t: ConstInt):
    """Block b sums the first b + 1 K tiles: a trip count that depends on the block."""
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.bid(0) + 1):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO),
                     ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


# ---- which kernels qualify ------------------------------------------------------------------------
def test_qualifying_kernels():
    a, b = _mats(64, 64, 64)
    c = np.zeros((64, 64), np.float32)
    found = stream_k(kernel_ir(matmul_kernel, a, b, c, 32, 32, 32))
    assert found is not None and found.acc.shape == (32, 32)
    verify(found.fn)
    assert found.workspace_shape(5, 40) == (2 * 5 * 32 + 2, 32) and found.counter_rows(40) == 2
    assert stream_k(kernel_ir(residual, a, b, c, c, 2, 32, 32, 32)) is not None
    # a tile loop around the K loop, and a K loop whose trip count depends on the block
    assert stream_k(kernel_ir(persistent_matmul_kernel, a, b, c, 32, 32, 32)) is None
    assert stream_k(kernel_ir(triangular, a, b, c, 32)) is None


def test_automatic_program_count():
    """One program per SM where a 1-D grid of large tiles fills at most 80% of its waves' block
    slots and at least half the SMs; fewer tiles are left to tile splitting."""
    tile = 128 * 256
    assert auto_programs((72, 1, 1), 132, tile) == 132  # 1536^3: 55% of one wave
    assert auto_programs((288, 1, 1), 132, tile) == 132  # 3072^3: 73% of three waves
    assert auto_programs((384, 1, 1), 132, tile) is None  # 4000x3000x2000: 97%
    assert auto_programs((132, 1, 1), 132, tile) is None
    assert auto_programs((32, 1, 1), 132, tile) is None  # 1024^3: tile splitting's
    assert auto_programs((72, 1, 1), 132, 64 * 64) is None  # small tiles: several blocks per SM
    assert auto_programs((72, 2, 1), 132, tile) is None


# ---- results --------------------------------------------------------------------------------------
@pytest.fixture
def stream_backend(backend_variant):
    """A function making (and registering, for this test) `backend` running stream-K on N programs."""
    return lambda programs: backend_variant(f"sk{programs}", stream_k=programs)


def _stream_taken(kernel, name: str) -> bool:
    """Whether every variant for backend `name` launched its stream-K kernel (on the GPU it may
    be wrapped in a StagedKernel: misaligned rows)."""
    compiled = [wrapped_as(v.compiled, StreamKKernel) for key, v in kernel.variants.items() if key.backend == name]
    return bool(compiled) and all(c is not None and c._variant is not None for c in compiled)


@pytest.mark.parametrize("programs", [1, 5, 7, 40, 300])
def test_stream_k_matmul_sample(dev, stream_backend, programs):
    """100x200x70 fp16 (fp32 output) with 32x64x32 tiles: 28 tiles of 3 K steps each (the last
    partial) on P programs: whole tiles (1), tiles cut once (5, 7), in three (40), and programs
    with nothing to do (300 > 84 iterations). Within fp32 accumulation of float64, equal to the
    unsplit kernel up to summation order, and the same bits on a rerun (the fast path)."""
    m, n, k, tiles = 100, 200, 70, (32, 64, 32)
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)  # its own variants
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 64), 1, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    unsplit = run_matmul(dev, dev.name, grid, kernel, a, b, tiles)
    name = stream_backend(programs)
    first, again = (run_matmul(dev, name, grid, kernel, a, b, tiles) for _ in range(2))
    np.testing.assert_allclose(first, ref, atol=1e-4 * k, rtol=1e-5)
    np.testing.assert_allclose(first, unsplit, atol=1e-5, rtol=1e-6)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert _stream_taken(kernel, name)
    assert [type(f) for f in fast_launchers(kernel, name)] == [StreamKLauncher]


@pytest.mark.parametrize("k_tiles", [0, 1, 5])
def test_stream_k_epilogue_reads_the_tile(dev, stream_backend, k_tiles):
    """The residual kernel (column-major tile order, R read at the block's tile in the epilogue)
    on 6 programs: with no K step every tile still gets its epilogue (C = R), with one each tile
    is one program's, with five tiles are cut between programs."""
    m, n, tk = 70, 90, 16
    a, b = _mats(m, n, 5 * tk)
    r = RNG.standard_normal((m, n)).astype(np.float32)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1)
    kernel = ct.kernel(residual.fn)
    name = stream_backend(6)
    got = run_matmul(dev, name, grid, kernel, a, b, (dev.put(r), k_tiles, 32, 32, tk))
    used = k_tiles * tk
    ref = a[:, :used].astype(np.float64) @ b[:used].astype(np.float64) + r
    np.testing.assert_allclose(got, ref, atol=1e-4 * max(used, 1), rtol=1e-5)
    assert _stream_taken(kernel, name)


def test_declined_kernels_run_as_written(dev, stream_backend):
    """A kernel stream-K declines (a block-dependent trip count) runs as compiled."""
    t = 32
    a, b = _mats(3 * t, t, 3 * t)
    kernel = ct.kernel(triangular.fn)
    name = stream_backend(4)
    got = run_matmul(dev, name, (3, 1, 1), kernel, a, b, (t,))
    ref = np.concatenate([a[i * t:(i + 1) * t, :(i + 1) * t].astype(np.float64) @ b[:(i + 1) * t].astype(np.float64)
                          for i in range(3)])
    np.testing.assert_allclose(got, ref, atol=1e-2, rtol=1e-5)
    assert not any(wrapped_as(v.compiled, StreamKKernel) for v in kernel.variants.values())


@pytest.mark.only_backends("triton")
def test_automatic_stream_k_on_the_gpu(dev, monkeypatch):
    """With TILECRAFT_STREAM_K=1, 1152x1152x512 fp16 with 128x128x64 tiles: 81 tiles fill 61% of
    a wave of 132 SMs, so a GPU with 100 to 162 SMs runs them as stream-K; reruns through the
    fast path are bit-identical."""
    import torch
    monkeypatch.setenv("TILECRAFT_STREAM_K", "1")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if not 100 <= sms <= 162:
        pytest.skip(f"{sms} SMs")
    m = n = 1152
    k = 512
    a, b = _mats(m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    kernel = ct.kernel(matmul_kernel.fn)
    results = [run_matmul(dev, "triton", (81, 1, 1), kernel, a, b, (128, 128, 64)) for _ in range(3)]
    np.testing.assert_allclose(results[0], ref, atol=1e-4 * k, rtol=1e-5)
    assert _stream_taken(kernel, "triton")
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint32), later.view(np.uint32))


# ---- kernels of unusual shape -----------------------------------------------------------------------
@ct.kernel
def strided(A, B, C, lo: int, hi: int, step: int, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = the sum over K tiles k in range(lo, hi, step) of A[:, k] @ B[k, :], row-major tiles."""
    cols = ct.cdiv(C.shape[1], tn)
    row, col = ct.bid(0) // cols, ct.bid(0) % cols
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(lo, hi, step):
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    ct.store(C, index=(row, col), tile=acc)


@ct.kernel
def grid_games(A, B, C, Count, t: ConstInt):
    """Tiles in reverse order (num_blocks read in a prologue branch); the epilogue stores acc plus
    num_blocks or -acc by the block's parity, then counts its runs with an atomic."""
    if ct.bid(0) % 3 == 0:
        tile = ct.num_blocks(0) - 1 - ct.bid(0)
    else:
        tile = ct.num_blocks(0) - 1 - ct.bid(0) + 0
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], t)):
        acc = ct.mma(ct.load(A, index=(tile, k), shape=(t, t), padding_mode=ZERO),
                     ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO), acc)
    if ct.bid(0) % 2 == 0:
        ct.store(C, index=(tile, 0), tile=acc + ct.num_blocks(0))
    else:
        ct.store(C, index=(tile, 0), tile=-acc)
    ct.atomic_add(Count, ct.bid(0), 1)


@ct.kernel
def bias_rows(A, B, C, Bias, Alpha, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = alpha * A @ B + bias: alpha loaded once (no grid query), the bias row per tile, both
    before the loop; an element-wise epilogue of row broadcasts; column-major tiles."""
    rows = ct.cdiv(C.shape[0], tm)
    row, col = ct.bid(0) % rows, ct.bid(0) // rows
    alpha = ct.load(Alpha, index=(0, 0), shape=(1, 1))
    bias = ct.load(Bias, index=(0, col), shape=(1, tn), padding_mode=ZERO)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], tk)):
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    ct.store(C, index=(row, col), tile=acc * alpha + bias)


@ct.kernel
def typed(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """C = A @ B accumulated in C's dtype (int32 from int8, float64 from float64)."""
    cols = ct.cdiv(C.shape[1], tn)
    row, col = ct.bid(0) // cols, ct.bid(0) % cols
    acc = ct.full((tm, tn), 0, dtype=C.dtype)
    for k in range(ct.cdiv(A.shape[1], tk)):
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    ct.store(C, index=(row, col), tile=acc)


def _unsplit_and_streamed(dev, stream_backend, fn, programs, grid, a, b, args, dtype="float32"):
    """(the kernel's result as written, on `programs` stream-K programs), stream-K taken."""
    kernel = ct.kernel(fn)
    unsplit = run_matmul(dev, dev.name, grid, kernel, a, b, args, dtype)
    name = stream_backend(programs)
    streamed = run_matmul(dev, name, grid, kernel, a, b, args, dtype)
    assert _stream_taken(kernel, name)
    return unsplit, streamed


@pytest.mark.parametrize("lo, hi, step, programs", [(1, 6, 2, 4), (2, 7, 3, 3), (0, 6, 4, 5), (5, 2, 1, 3),
                                                    (4, 5, 2, 12)])
def test_k_loop_bounds_and_step_from_parameters(dev, stream_backend, lo, hi, step, programs):
    """range(lo, hi, step) over 6 K tiles (the last partial): steps of 2 to 4 from K tiles past
    the first, no iteration (every tile its epilogue on zeros), one per tile on more programs
    than iterations."""
    m, n, k, tk = 40, 70, 6 * 16 - 5, 16
    a, b = _mats(m, n, k)
    grid = (ct.cdiv(m, 16) * ct.cdiv(n, 32), 1, 1)
    unsplit, got = _unsplit_and_streamed(dev, stream_backend, strided.fn, programs, grid, a, b,
                                         (lo, hi, step, 16, 32, tk))
    ref = sum((a[:, i * tk:(i + 1) * tk].astype(np.float64) @ b[i * tk:(i + 1) * tk].astype(np.float64)
               for i in range(lo, hi, step)), np.zeros((m, n)))
    np.testing.assert_allclose(got, ref, atol=1e-3, rtol=1e-5)
    np.testing.assert_allclose(got, unsplit, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("programs", [1, 4, 9])
def test_grid_queries_in_prologue_and_epilogue(dev, stream_backend, programs):
    """bid(0) and num_blocks(0) read in a prologue branch and in epilogue branches are the tile
    and the user's grid; the epilogue (two stores, an atomic) runs once per tile."""
    t, tiles = 16, 5
    a, b = _mats(tiles * t, t, 3 * t + 5)
    kernel = ct.kernel(grid_games.fn)
    name = stream_backend(programs)
    count = dev.put(np.zeros(tiles, np.int32))
    got = run_matmul(dev, name, (tiles, 1, 1), kernel, a, b, (count, t))
    assert _stream_taken(kernel, name)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    ref = np.empty_like(prod)
    for bid in range(tiles):
        rows = slice((tiles - 1 - bid) * t, (tiles - bid) * t)
        ref[rows] = prod[rows] + tiles if bid % 2 == 0 else -prod[rows]
    np.testing.assert_allclose(got, ref, atol=1e-3, rtol=1e-5)
    np.testing.assert_array_equal(dev.get(count), np.ones(tiles, np.int32))


@pytest.mark.parametrize("tm, programs", [(16, 3), (64, 5), (64, 1)])
def test_prologue_loads_and_row_broadcasts(dev, stream_backend, tm, programs):
    """A scalar loaded once and a bias row loaded per tile: 16-row tiles summed whole, 64-row
    ones in two slices (checked here)."""
    m, n, k, tn, tk = 70, 40, 50, 16, 16
    a, b = _mats(m, n, k)
    bias = RNG.standard_normal((1, n)).astype(np.float32)
    alpha = np.array([[-1.5]], np.float32)
    found = stream_k(kernel_ir(bias_rows, a, b, np.zeros((m, n), np.float32), bias, alpha, tm, tn, tk))
    slots = [op.shape for op in found.fn.walk() if isinstance(op, ops.Load) and op.array is found.fn.params[-1]]
    assert slots == [(min(tm, SUM_ROWS), tn)] * 2
    grid = (ct.cdiv(m, tm) * ct.cdiv(n, tn), 1, 1)
    unsplit, got = _unsplit_and_streamed(dev, stream_backend, bias_rows.fn, programs, grid, a, b,
                                         (dev.put(bias), dev.put(alpha), tm, tn, tk))
    ref = -1.5 * (a.astype(np.float64) @ b.astype(np.float64)) + bias
    np.testing.assert_allclose(got, ref, atol=1e-3, rtol=1e-5)
    np.testing.assert_allclose(got, unsplit, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_int32_and_float64_accumulators(dev, stream_backend, dtype):
    """int8 operands into int32 (exact, as unsplit) and float64 ones into float64: 2 tiles of 3
    K steps on 4 programs (both tiles cut)."""
    m, n, k, tm, tn, tk, programs = 20, 13, 40, 16, 16, 16, 4
    if dtype == "int32":
        a, b = RNG.integers(-128, 128, (m, k), dtype=np.int8), RNG.integers(-128, 128, (k, n), dtype=np.int8)
        ref = a.astype(np.int64) @ b.astype(np.int64)
    else:
        a, b = _mats(m, n, k, np.float64)
        ref = a @ b
    grid = (ct.cdiv(m, tm) * ct.cdiv(n, tn), 1, 1)
    unsplit, got = _unsplit_and_streamed(dev, stream_backend, typed.fn, programs, grid, a, b, (tm, tn, tk), dtype)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=1e-12)
    np.testing.assert_allclose(got, unsplit, atol=1e-12, rtol=1e-12)


@pytest.mark.only_backends("interpreter")
@pytest.mark.parametrize("seed", range(3))
def test_programs_in_any_order(dev, stream_backend, monkeypatch, seed):
    """The GPU runs programs in any order, so the last segment of a cut tile to arrive may be any:
    the interpreter's blocks run in shuffled orders (its `range` patched), results unchanged."""
    from tilecraft.backends.interpreter import backend as interpreter
    order = np.random.default_rng(seed)
    m, n, k, tiles = 100, 200, 70, (32, 64, 32)
    a, b = _mats(m, n, k)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 64), 1, 1)
    kernel = ct.kernel(matmul_kernel.fn)
    names = [stream_backend(p) for p in (5, 7, 40)]
    expected = [run_matmul(dev, name, grid, kernel, a, b, tiles) for name in names]
    monkeypatch.setattr(interpreter, "range", lambda count: order.permutation(count).tolist(), raising=False)
    for name, want in zip(names, expected):
        got = run_matmul(dev, name, grid, kernel, a, b, tiles)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
