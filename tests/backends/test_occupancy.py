"""Occupancy bounds for kernels that pass over the same stretch of an array several times
(tilecraft/backends/triton/occupancy.py): which kernels, how many blocks per SM, how much
shared memory a launch asks for to get there; on the GPU, a bounded LayerNorm's results."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import kernel_ir
from tilecraft.backends.triton.occupancy import MIN_BLOCKS, blocks_bound, shared_for
from tilecraft.passes.resident_rows import Reread, reread
from tilecraft.library.matmul import matmul_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from layernorm import layernorm, reference  # noqa: E402
from softmax import softmax  # noqa: E402

H200_SHARED = 233472  # bytes of shared memory per SM
MB = 2**20


def test_which_kernels_pass_over_an_array_again():
    """The LayerNorm sample walks x's row (axis 1, one element across) in three loops; the
    softmax sample reads its row once, and a matmul's K loop each tile once."""
    x, w = np.zeros((64, 8192), np.float32), np.zeros(8192, np.float32)
    assert reread(kernel_ir(layernorm, x, w, w, x.copy(), 1e-5, 1024)) == Reread(0, 1, 1)
    assert reread(kernel_ir(softmax, x, x.copy(), 8192)) is None
    a = np.zeros((64, 64), np.float32)
    assert reread(kernel_ir(matmul_kernel, a, a, a.copy(), 32, 32, 32)) is None


def test_blocks_per_sm_keep_the_rows_within_l2():
    """fp32 rows of 8192 columns on the H200 (132 SMs, 60 MB of L2; 16 blocks per SM, 69 MB of
    rows): 6 blocks per SM. Rows of 4096 columns fit at 16 per SM (35 MB), not at 32 (13 then);
    16384 columns would leave 2, too few."""
    l2 = 60 * MB
    assert blocks_bound(8192 * 4, 132, l2, 16) == 6
    assert blocks_bound(4096 * 4, 132, l2, 16) is None
    assert blocks_bound(4096 * 4, 132, l2, 32) == 13
    assert blocks_bound(16384 * 4, 132, l2, 16) is None
    assert blocks_bound(8192 * 4, 132, 40 * MB, 16) == MIN_BLOCKS


@pytest.mark.parametrize("blocks", [4, 5, 6, 9, 12])
def test_shared_memory_asked_for_leaves_that_many_blocks(blocks):
    """Whole units of 128 bytes, plus the 1 KB the GPU reserves per block, `blocks` to an SM."""
    want = shared_for(blocks, H200_SHARED, 2048)
    assert want is not None and 2048 < want <= 48 * 1024 and want % 128 == 0
    assert H200_SHARED // (want + 1024) == blocks
    assert shared_for(blocks, H200_SHARED, 60 * 1024) is None  # the kernel takes more already


@pytest.mark.only_backends("triton")
def test_bounded_layernorm_on_the_gpu(dev, monkeypatch):
    """8192 rows of 8192 fp32 columns, resident rows off (they would take this launch): the
    specialized launcher asks for more shared memory than the kernel uses; each of two launches
    (the second through that launcher) matches float64 on a poisoned output."""
    import torch

    monkeypatch.setenv("TILECRAFT_RESIDENT_ROWS", "0")

    import tilecraft as ct
    from tilecraft.backends.triton.launching import DirectLauncher
    gen = np.random.default_rng(3)
    x = gen.standard_normal((8192, 8192)).astype(np.float32) * 3 + 1
    w, b = gen.standard_normal(8192).astype(np.float32), gen.standard_normal(8192).astype(np.float32)
    want = reference(x, w, b, 1e-5)
    kernel = ct.kernel(layernorm.fn)
    X, W, B = dev.put(x), dev.put(w), dev.put(b)
    for _ in range(2):
        y = dev.poison(x.shape, "float32")
        ct.launch(torch.cuda.current_stream(), (8192,), kernel, (X, W, B, y, 1e-5, 1024))
        torch.cuda.synchronize()
        np.testing.assert_allclose(dev.get(y), want, rtol=1e-5, atol=1e-5)
    launchers = [entry[0] for entry in kernel.fast.values()]
    assert len(launchers) == 1 and isinstance(launchers[0], DirectLauncher)
    native = launchers[0]._launcher
    assert native is not None and native.head[2] > 4096  # shared memory asked for, beyond the kernel's own
