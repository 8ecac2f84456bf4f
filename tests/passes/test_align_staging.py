"""Operand staging for alignment (passes/operand_staging.py, backends/triton/operand_staging.py):
MMA operand arrays whose layout rules out tensor descriptors are copied into 16-byte aligned
rows in a prologue; which parameters qualify, and staged launches bit-identical to unstaged
ones on poisoned outputs, checked against float64 (forced on the Triton interpreter at odd
sizes, with rows and bases that are not 16-byte aligned; automatic on the GPU at 2049x2051x2053)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import kernel_ir
from tilecraft.backends.base import array_facts
from tilecraft.ir import ops
from tilecraft.library.matmul import matmul_kernel
from tilecraft.passes.operand_staging import Copy, stage_operands

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(11)
ZERO = ct.PaddingMode.ZERO
ALIGN = Copy(rounded=False, transposed=False, misaligned=True)


@ct.kernel
def store_to_a(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO)
        b = ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(A, index=(ct.bid(0), 0), tile=acc.astype(A.dtype))


@ct.kernel
def a_also_added(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO)
        b = ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO)
        acc = ct.mma(a, b, acc) + a.astype(ct.float32)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


def test_facts_that_a_copy_fixes():
    """A base or row stride off 16 bytes, or a transposed view, is fixed by a copy; an aligned
    array needs none, and an empty one or one needing 64-bit offsets stays without TMA anyway."""
    assert array_facts(0, (3001, 3001), (3001, 1), 2, False).tma_by_copy
    assert array_facts(2, (301, 72), (72, 1), 2, False).tma_by_copy
    assert array_facts(0, (64, 64), (1, 64), 2, False).tma_by_copy
    assert not array_facts(0, (3008, 3008), (3008, 1), 2, False).tma_by_copy
    assert not array_facts(0, (0, 3001), (3001, 1), 2, False).tma_by_copy
    assert not array_facts(0, (3001, 3001), (3001, 1), 2, True).tma_by_copy


def test_which_parameters_stage_for_alignment():
    """Only the misaligned parameters named, only if every tile Load of them reaches only MMA
    operands (through casts too); the kernel is unchanged. A float32 tf32 operand that is also
    misaligned is staged once, for both reasons."""
    h = RNG.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    fn = kernel_ir(matmul_kernel, h, h, c.astype(np.float16), 16, 16, 16)
    staged = stage_operands(fn, [0, 1, 2])
    assert staged is not None and staged.params == {0: ALIGN, 1: ALIGN}  # C is stored: never staged
    loads = lambda f: [(op.array.id, op.order) for op in f.walk() if isinstance(op, ops.Load)]  # noqa: E731
    assert loads(staged.fn) == loads(fn)
    assert stage_operands(fn, [1]).params == {1: ALIGN}
    assert stage_operands(fn, []) is None
    assert stage_operands(kernel_ir(store_to_a, h, h, c, 16), [0, 1]).params == {1: ALIGN}
    assert stage_operands(kernel_ir(a_also_added, h, h, c, 16), [0, 1]).params == {1: ALIGN}
    f = h.astype(np.float32)
    both = stage_operands(kernel_ir(matmul_kernel, f, f, c, 16, 16, 16), [0])
    assert both.params == {0: Copy(True, False, True), 1: Copy(True, True, False)}
    assert stage_operands(kernel_ir(matmul_kernel, f, f, c, 16, 16, 16), [0], tf32=False).params == {0: ALIGN}


# ---- results ------------------------------------------------------------------------------------
def _misaligned(dev, x: np.ndarray, offset: bool):
    """`x` on the device: contiguous, or (`offset`) a view starting one element into a buffer,
    so its base is not 16-byte aligned."""
    if not offset:
        return dev.put(x)
    buf = dev.put(np.zeros(x.size + 1, x.dtype))
    view = buf[1:].view(*x.shape)
    view.copy_(dev.put(x))
    return view


def _matmul(dev, backend: str, a, b, m: int, n: int, t: tuple[int, int, int]):
    """C = A @ B (device arrays) by the library sample on `backend` (a fresh kernel object) into a
    poisoned float32 C; also the compiled variants."""
    kernel = ct.kernel(matmul_kernel.fn)
    c = dev.poison((m, n), "float32")
    grid = (ct.cdiv(m, t[0]) * ct.cdiv(n, t[1]), 1, 1)
    if dev.name == "triton":
        import torch
        ct.launch(torch.cuda.current_stream(), grid, kernel, (a, b, c, *t), backend=backend)
        torch.cuda.synchronize()
    else:
        ct.launch(None, grid, kernel, (a, b, c, *t), backend=backend)
    return dev.get(c), [v.compiled for key, v in kernel.variants.items() if key.backend == backend]


def _staged_ran(compiled: list) -> bool:
    from tilecraft.backends.triton.operand_staging import StagedKernel
    return bool(compiled) and all(isinstance(k, StagedKernel) and k.compiled_variants for k in compiled)


@pytest.mark.only_backends("triton-interpret", "triton")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("loads, offset, n", [(True, False, 75), ("tma", False, 75), (True, True, 72)])
def test_forced_alignment_staging_is_bit_identical(dev, staged_backend, dtype, loads, offset, n):
    """100xNx301 with 32x32x32 tiles: A's rows are 602 bytes, B's 150 (N=75), or both are views
    one element into their buffers (N=72: B's rows aligned, its base not). Staged on every
    launch (loads through pointers or, forced, tensor descriptors): the same bits as the
    unstaged kernel, within fp32 accumulation error of float64."""
    import ml_dtypes
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    m, k = 100, 301
    a = RNG.standard_normal((m, k)).astype(np_dtype)
    b = RNG.standard_normal((k, n)).astype(np_dtype)
    da, db = _misaligned(dev, a, offset), _misaligned(dev, b, offset)
    staged, compiled = _matmul(dev, staged_backend[loads], da, db, m, n, (32, 32, 32))
    plain, unstaged = _matmul(dev, staged_backend[False], da, db, m, n, (32, 32, 32))
    assert _staged_ran(compiled) and not _staged_ran(unstaged)
    assert all(c.staged.params == {0: ALIGN, 1: ALIGN} for c in compiled)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(plain, ref, atol=1e-5 * np.sqrt(k), rtol=1e-5)
    np.testing.assert_array_equal(staged.view(np.uint32), plain.view(np.uint32))
    if loads == "tma":
        sources = [s.source for c in compiled for s in c.compiled_variants]
        assert all("A_desc = tl.make_tensor_descriptor" in s and "B_desc" in s for s in sources)
        # staged launches take the full path each time: no host-descriptor variant adds to it
        assert not any(s.host_descriptor_kernel() for c in compiled for s in c.compiled_variants)


@pytest.mark.only_backends("triton")
def test_automatic_alignment_staging_on_the_gpu(dev, staged_backend):
    """2049x2051x2053 fp16 with the sweep's 128x256x64 tiles: rows of 4106 and 4102 bytes and
    both operands above ALIGN_MIN_ELEMENTS, so the plain `triton` backend stages both on sm_90+;
    bit-identical to the unstaged kernel, within fp32 accumulation error of float64."""
    from tilecraft.backends.triton.operand_staging import ALIGN_MIN_ELEMENTS
    import torch
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("alignment staging needs sm_90+")
    m, n, k = 2049, 2051, 2053
    assert min(m * k, k * n) >= ALIGN_MIN_ELEMENTS
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    da, db = dev.put(a), dev.put(b)
    staged, compiled = _matmul(dev, "triton", da, db, m, n, (128, 256, 64))
    plain, _ = _matmul(dev, staged_backend[False], da, db, m, n, (128, 256, 64))
    assert _staged_ran(compiled)
    np.testing.assert_allclose(staged, a.astype(np.float64) @ b.astype(np.float64), atol=1e-4 * np.sqrt(k), rtol=1e-4)
    np.testing.assert_array_equal(staged.view(np.uint32), plain.view(np.uint32))


def test_staged_kernel_uses_descriptors_on_hopper():
    """Compiled for sm_90 (no GPU needed) at 3001^3 fp16 with 128x256x64 tiles: the unstaged
    kernel loads A and B through pointers (rows of 6002 bytes) and spills; the staged one reads
    its aligned copies through tensor descriptors (TMA) and does not spill in its K loop."""
    import torch

    from tilecraft.tools import inspect_kernel
    args = (*(torch.empty(3001, 3001, dtype=torch.float16) for _ in range(3)), 128, 256, 64)
    staged, plain = inspect_kernel(matmul_kernel, args, staged=True), inspect_kernel(matmul_kernel, args)
    assert "A_desc = tl.make_tensor_descriptor" in staged.triton and "B_desc" in staged.triton
    assert "make_tensor_descriptor" not in plain.triton
    assert staged.spill_bytes < plain.spill_bytes
    assert "staged variant" in plain.summary()
