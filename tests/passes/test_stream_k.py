"""Stream-K (tilecraft/passes/stream_k.py, backends/stream_k.py): which kernels qualify, how a
launch picks it, and the results of kernels run on N programs on every backend (a registered
backend `<name>-sk<N>`): float64 references on poisoned outputs, odd sizes (edge tiles, K not a
multiple of the tile), tiles cut between 2 or more programs, programs with nothing to do, loops
of no iteration, the unsplit kernel's values up to summation order, bit-identical reruns through
the fast path. On the GPU also the automatic choice."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.stream_k import StreamKKernel, StreamKLauncher, auto_programs
from tilecraft.ir import verify
from tilecraft.library.matmul import matmul_kernel, persistent_matmul_kernel
from tilecraft.passes.stream_k import stream_k
from conftest import kernel_ir

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


def _run(dev, name, grid, kernel, a, b, args) -> np.ndarray:
    c = dev.poison((a.shape[0], b.shape[1]), "float32")
    dev.launch(grid, kernel, (dev.put(a), dev.put(b), c, *args), backend=name)
    return dev.get(c)


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
    unsplit = _run(dev, dev.name, grid, kernel, a, b, tiles)
    name = stream_backend(programs)
    first, again = (_run(dev, name, grid, kernel, a, b, tiles) for _ in range(2))
    np.testing.assert_allclose(first, ref, atol=1e-4 * k, rtol=1e-5)
    np.testing.assert_allclose(first, unsplit, atol=1e-5, rtol=1e-6)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert _stream_taken(kernel, name)
    assert [type(hit[0]) for key, hit in kernel.fast.items() if key[1] == name] == [StreamKLauncher]


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
    got = _run(dev, name, grid, kernel, a, b, (dev.put(r), k_tiles, 32, 32, tk))
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
    got = _run(dev, name, (3, 1, 1), kernel, a, b, (t,))
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
    results = [_run(dev, "triton", (81, 1, 1), kernel, a, b, (128, 128, 64)) for _ in range(3)]
    np.testing.assert_allclose(results[0], ref, atol=1e-4 * k, rtol=1e-5)
    assert _stream_taken(kernel, "triton")
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint32), later.view(np.uint32))
