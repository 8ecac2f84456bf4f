"""Fitting a schedule to the GPU (backends/triton/fitting.py): a kernel whose planned schedule
needs more shared memory than the GPU has, or that Triton's compiler fails on, is lowered again
with less (pipeline depth, then flattening, the grid loop, descriptors) until it builds; one that
fits nowhere gets a located error naming its tiles. Compiled for sm_90 / sm_86 here, no GPU."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import tilecraft as ct  # noqa: E402
from tilecraft.backends.base import wrapped_as  # noqa: E402
from tilecraft.backends.triton.compile import TritonKernel  # noqa: E402
from tilecraft.backends.triton.emitter import Target  # noqa: E402
from tilecraft.backends.triton.fitting import Used, next_schedule  # noqa: E402
from tilecraft.errors import TileCompilerExecutionError  # noqa: E402
from tilecraft.library.matmul import matmul_kernel  # noqa: E402
from tilecraft.tools import inspect_kernel  # noqa: E402
from tilecraft.tools.inspection import compiled_as_launched  # noqa: E402
from triton.runtime.errors import OutOfResources  # noqa: E402


@pytest.fixture(autouse=True)
def _triton_kernels(monkeypatch):
    """These tests fit the Triton kernels to the GPU: on sm_90 the attention kernel would run
    (and be inspected) as its warp-specialized Gluon variant (backends/gluon) instead."""
    monkeypatch.setenv("TILECRAFT_WARP_SPECIALIZE", "0")

ConstInt = ct.Constant[int]


@ct.kernel
def attention(Q, K, V, O, TM: ConstInt, TN: ConstInt, D: ConstInt):
    """Single-head flash attention: online softmax over key/value tiles of TN rows."""
    row = ct.bid(0)
    q = ct.load(Q, index=(row, 0), shape=(TM, D))
    m = ct.full((TM, 1), -math.inf, dtype=ct.float32)
    total = ct.zeros((TM, 1), dtype=ct.float32)
    acc = ct.zeros((TM, D), dtype=ct.float32)
    for j in range(ct.cdiv(K.shape[0], TN)):
        kt = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        s = ct.mma(q, kt, ct.zeros((TM, TN), dtype=ct.float32))
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        scale = ct.exp(m - m_new)
        total = total * scale + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * scale)
        m = m_new
    ct.store(O, index=(row, 0), tile=(acc / total).astype(O.dtype))


@ct.kernel
def wide_k_matmul(A, B, C, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = ct.load(A, index=(ct.bid(0), k), shape=(TM, TK))
        b = ct.load(B, index=(k, ct.bid(1)), shape=(TK, TN))
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc.astype(C.dtype))


def test_attention_kernel_is_right(backend, dev):
    """The kernel the fitting tests compile computes attention (against float64 NumPy)."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((48, 16)).astype(np.float16) for _ in range(3))
    out = np.full((48, 16), np.nan, dtype=np.float16)
    o = dev.put(out)
    dev.launch((3,), attention, (dev.put(q), dev.put(k), dev.put(v), o, 16, 16, 16))
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(dev.get(o).astype(np.float64), want, rtol=2e-2, atol=2e-2)


def test_out_of_shared_memory_gives_up_an_unflattened_grid_loop_first():
    """128x128 tiles at head dim 128: the planned 3-stage pipeline with a grid loop needs ~256
    KiB of shared memory, more than sm_90's 227 KiB. The grid loop is not flattened (two MMAs in
    the loop), so it goes first and the 3 stages stay; the kernel says so."""
    q = torch.empty(1024, 128, dtype=torch.float16)
    info = inspect_kernel(attention, (q, q, q, q, 128, 128, 128), capability=90)
    assert info.fallbacks and info.fallbacks[0][0] == "one program per block (no grid loop)"
    assert "more shared memory than the GPU has" in info.fallbacks[0][1]
    assert len(info.fallbacks) == 1 and info.num_stages == 3 and info.shared_bytes <= 232448
    assert "fitted to the GPU: one program per block" in info.summary()


def test_a_kernel_that_fits_nowhere_names_its_tiles():
    """On sm_86 (99 KiB per block) one stage of 128x256 and 256x128 fp16 tiles is 128 KiB."""
    a, b = torch.empty(256, 512, dtype=torch.float16), torch.empty(512, 256, dtype=torch.float16)
    c = torch.empty(256, 256, dtype=torch.float16)
    with pytest.raises(TileCompilerExecutionError) as info:
        inspect_kernel(wide_k_matmul, (a, b, c, 128, 128, 256), capability=86)
    text = str(info.value)
    assert "does not fit the GPU with any schedule" in text and "101376" in text
    assert "Tried, in order: the planned schedule, pipeline depth" in text
    assert "tile loaded in a pipelined loop: 128x256 float16 (64 KiB)" in text
    assert info.value.loc is not None and info.value.loc.line > 0


def _oom() -> OutOfResources:
    return OutOfResources(262192, 232448, "shared memory")


def test_the_order_things_are_given_up_in():
    """Out of memory: depth first, then the schedule features; a compiler failure: the other way."""
    full = Target(interpret=False, descriptors=True, grid_loop=True, flatten=True)
    step, t = next_schedule(full, _oom(), Used(3, True, True, 1, flattened=True))
    assert (step, t.max_stages) == ("pipeline depth 2", 2)
    step, t = next_schedule(t, _oom(), Used(1, True, True, 1, flattened=True))
    assert step == "the grid loop not flattened" and not t.flatten
    step, t = next_schedule(t, _oom(), Used(1, True, True, 1))
    assert step.startswith("one program per block") and not t.grid_loop
    step, t = next_schedule(t, _oom(), Used(1, False, True, 1))
    assert step.startswith("no tensor descriptors") and not t.descriptors
    assert next_schedule(t, _oom(), Used(1, False, False, 1)) is None

    # a grid loop not flattened into the pipelined loop (attention) goes before the depth
    step, t = next_schedule(replace(full, flatten=False), _oom(), Used(3, True, True, 1, flattened=False))
    assert step.startswith("one program per block") and not t.grid_loop and t.max_stages is None
    step, t = next_schedule(full, _oom(), Used(3, True, True, 1, flattened=True))
    assert step == "pipeline depth 2"

    crash = RuntimeError("PassManager::run failed")
    step, t = next_schedule(full, crash, Used(3, True, True, 1))
    assert step == "the grid loop not flattened"
    bare = replace(full, flatten=False, grid_loop=False, descriptors=False)
    step, t = next_schedule(bare, crash, Used(3, False, False, 1))
    assert step == "pipeline depth 2"
    step, t = next_schedule(full, crash, Used(3, True, True, 2))
    assert step.startswith("one CTA per block") and t.one_cta



def test_the_small_grid_variant_starts_from_the_planned_schedule():
    """The staged tf32 kernel of 128x256x32 tiles runs a flattened grid loop, which keeps its
    pipeline buffers through each tile's 128 KiB epilogue: refitted, it has 2 stages. Grids of
    no more blocks than the GPU runs at once take its one-program-per-block variant, which fits
    the 3 stages planned and must not inherit the refit."""
    a = torch.empty(2048, 2048)
    _, compiled, args = compiled_as_launched(matmul_kernel, (a, a, a, 128, 256, 32), 90)
    staged_args = compiled.staged_args(args)
    looped = wrapped_as(compiled.staged_kernel(args), TritonKernel)
    looped.compile_for(90, staged_args)
    assert looped.lowered.grid_loop and looped.lowered.depth == 2
    assert [step for step, _ in looped.fallbacks] == ["pipeline depth 2"]
    small = looped.small_grid_kernel()
    binary = small.compile_for(90, staged_args)
    assert not small.lowered.grid_loop and small.lowered.depth == 3 and not small.fallbacks
    assert binary.metadata.shared <= 232448


def test_a_num_ctas_hint_triton_cannot_build_is_not_followed():
    """Triton 3.6 fails on this kernel with num_ctas=2 (TritonGPUPlanCTAPass); cuTile takes
    num_ctas as a hint, so the kernel is built with one CTA per block."""
    q = torch.empty(256, 64, dtype=torch.float16)
    info = inspect_kernel(attention.replace_hints(num_ctas=2), (q, q, q, q, 64, 64, 64), capability=90)
    assert info.fallbacks[0][0] == "one CTA per block (the num_ctas hint not followed)"
    assert "makes Triton's compiler fail" in info.fallbacks[0][1]

