"""Flash attention as users write it, on every backend; on an sm_90 GPU it runs as the
warp-specialized Gluon kernel (backends/gluon), which these tests also compile for sm_90 on the
CPU (Gluon has no interpreter) and check the structure of (passes/warp_specialize.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.base import wrapped_as
from tilecraft.passes.warp_specialize import streamed_loop

from conftest import gluon_matmul_case, gluon_variant_launches, kernel_ir


@ct.kernel
def flash_attention(Q, K, V, Out, scale: float, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int],
                    HEADS: ct.Constant[int], GROUP: ct.Constant[int], CAUSAL: ct.Constant[bool]):
    """softmax(Q K^T * scale) V for TM query rows of one (batch, head); the keys and values are
    those of head // GROUP; CAUSAL: query row r sees keys 0..r."""
    block = ct.bid(0)
    batch = ct.bid(1) // HEADS
    head = ct.bid(1) % HEADS
    kv_head = head // GROUP
    q = ct.load(Q, index=(batch, head, block, 0), shape=(1, 1, TM, D)).reshape((TM, D))
    m = ct.full((TM, 1), -math.inf, dtype=ct.float32)
    total = ct.full((TM, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TM, D), 0.0, dtype=ct.float32)
    keys = K.shape[2]
    if CAUSAL:
        end = ct.cdiv(min((block + 1) * TM, keys), TN)
    else:
        end = ct.cdiv(keys, TN)
    rows = (block * TM + ct.arange(TM, dtype=ct.int32))[:, None]
    base2 = scale * 1.4426950408889634
    for j in range(0, end):
        kt = ct.load(K, index=(batch, kv_head, 0, j), shape=(1, 1, D, TN), order=(0, 1, 3, 2)).reshape((D, TN))
        s = ct.mma(q, kt, ct.full((TM, TN), 0.0, dtype=ct.float32))
        cols = (j * TN + ct.arange(TN, dtype=ct.int32))[None, :]
        seen = cols < keys
        if CAUSAL:
            seen = seen & (rows >= cols)
        s = ct.where(seen, s * base2, -math.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m - m_new)
        total = total * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(batch, kv_head, j, 0), shape=(1, 1, TN, D)).reshape((TN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m = m_new
    out = (acc / total).astype(Out.dtype)
    ct.store(Out, index=(batch, head, block, 0), tile=out.reshape((1, 1, TM, D)))


@ct.kernel
def tile_matmul(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = ct.load(A, index=(ct.bid(0), k), shape=(TM, TK))
        b = ct.load(B, index=(k, ct.bid(1)), shape=(TK, TN))
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc.astype(C.dtype))


def _reference(q, k, v, scale, group, causal):
    """float64 attention of [B, H, S, D] arrays (K and V with H // group heads)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)


def _inputs(batch, heads, group, seq_q, seq_k, d, dtype, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, seq_q, d)).astype(dtype)
    k = rng.standard_normal((batch, heads // group, seq_k, d)).astype(dtype)
    v = rng.standard_normal((batch, heads // group, seq_k, d)).astype(dtype)
    return q, k, v


def _run(dev, backend, q, k, v, tm, tn, group, causal):
    batch, heads, seq, d = q.shape
    out = dev.poison(q.shape, q.dtype)
    scale = 1 / math.sqrt(d)
    grid = (math.ceil(seq / tm), batch * heads, 1)
    dev.launch(grid, flash_attention, (dev.put(q), dev.put(k), dev.put(v), out, scale, tm, tn, d, heads, group, causal),
               backend=backend)
    return dev.get(out).astype(np.float64), _reference(q, k, v, scale, group, causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [64, 80])
def test_attention_small(dev, backend, causal, seq):
    """Every backend (the GPU through the Gluon variant): 64x32 tiles over 64 or 80 keys (a
    partial last key tile and query block), two query heads per key head."""
    import ml_dtypes
    q, k, v = _inputs(1, 4, 2, seq, seq, 64, ml_dtypes.bfloat16, seed=seq + causal)
    got, want = _run(dev, backend, q, k, v, 64, 32, 2, causal)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tm,tn,d", [(128, 128, 128), (64, 128, 128), (128, 64, 64), (128, 128, 64), (64, 64, 64)])
@pytest.mark.parametrize("seq", [512, 300])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attention_gluon(dev, backend, causal, tm, tn, d, seq, dtype):
    """On the GPU: the warp-specialized variant runs (not the Triton kernel) and matches float64."""
    import ml_dtypes
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    q, k, v = _inputs(2, 4, 2, seq, seq, d, np_dtype, seed=tm + tn + d + seq)
    before = gluon_variant_launches(flash_attention)
    got, want = _run(dev, backend, q, k, v, tm, tn, 2, causal)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    # paired 64-row blocks need an even grid: 300 rows make 5 blocks, which run as the Triton kernel
    assert gluon_variant_launches(flash_attention) == before + (tm == 128 or seq % (2 * tm) == 0)


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tm", [128, 64])
@pytest.mark.parametrize("seq", [1024, 1000, 1400])
def test_attention_gluon_runs_many_blocks_per_program(dev, backend, causal, tm, seq):
    """On the GPU, more blocks than SMs (2 batches x 16 heads x 8, 11, 16 or 22 query blocks):
    the persistent variant's programs each run several units of blocks c and X - 1 - c (one
    block where they meet: an odd X, 1400 rows), their ring slots, phases, ping-pong turns and
    double-buffered resident copies running on from block to block (with causal 64-row pairs,
    loops of different lengths); every block matches float64."""
    import ml_dtypes
    q, k, v = _inputs(2, 16, 2, seq, seq, 128, ml_dtypes.bfloat16, seed=tm + seq + causal)
    before = gluon_variant_launches(flash_attention)
    got, want = _run(dev, backend, q, k, v, tm, 128, 2, causal)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    assert gluon_variant_launches(flash_attention) == before + 1


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m,n,k", [(4096, 2048, 256), (3700, 2056, 296), (2300, 5000, 1000)])
def test_matmul_gluon(dev, backend, dtype, m, n, k):
    """On the H200's 132 SMs: the sample matmul (128x256x64 tiles) on grids it deals evenly
    (256, 261 and 360 blocks) runs as the Gluon variant (programs looping over two or three
    blocks; partial tiles at the M, N and K ends: TMA fills zeros and clips the stores) and
    matches float64."""
    import ml_dtypes
    from tilecraft.library import matmul_kernel
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k)).astype(np_dtype), rng.standard_normal((k, n)).astype(np_dtype)
    c = dev.poison((m, n), np_dtype)
    before = gluon_variant_launches(matmul_kernel)
    grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)
    dev.launch(grid, matmul_kernel, (dev.put(a), dev.put(b), c, 128, 256, 64), backend=backend)
    got = dev.get(c).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    # each product exact in float32, the sum rounded once into the output dtype
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * math.sqrt(k))
    assert gluon_variant_launches(matmul_kernel) == before + 1


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("m,n,k", [(2048, 4096, 1024), (2000, 4000, 1072)])
def test_tf32_matmul_gluon(dev, backend, m, n, k):
    """On the H200: a float32 matmul with 128x256x32 tiles and operands of 2**21 elements or more
    is staged (rounded to tfloat32, B transposed) and the staged kernel runs as the Gluon variant
    (tf32 wgmma; each 64x256 float32 tile stored in two column halves) on its 256 blocks
    (partial tiles at the M, N and K ends in the second case); matches float64 of the rounded
    operands on a poisoned output."""
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton.operand_staging import StagedKernel
    from tilecraft.library import matmul_kernel

    def launches() -> int:
        staged = [wrapped_as(v.compiled, StagedKernel) for v in matmul_kernel.variants.values()]
        return sum(k.variant_launches for s in staged if s is not None for k in s.compiled_variants
                   if isinstance(k, WarpSpecializedKernel))
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = dev.poison((m, n), np.float32)
    before = launches()
    grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)
    dev.launch(grid, matmul_kernel, (dev.put(a), dev.put(b), c, 128, 256, 32), backend=backend)
    rounded = [(x.view(np.uint32).astype(np.uint64) + 0xFFF + ((x.view(np.uint32) >> 13) & 1)) & 0xFFFFE000
               for x in (a, b)]
    a64, b64 = (r.astype(np.uint32).view(np.float32).astype(np.float64) for r in rounded)
    want = a64 @ b64
    np.testing.assert_allclose(dev.get(c), want, rtol=1e-5, atol=1e-4 * math.sqrt(k))
    assert launches() == before + 1
    # again through the fast path on half the grid, which the variant does not take (128 blocks
    # on 132 SMs): the Triton kernel's launcher writes those blocks' tiles, the rest stays poisoned
    c2 = dev.poison((m, n), np.float32)
    dev.launch((grid[0] // 2, 1, 1), matmul_kernel, (dev.put(a), dev.put(b), c2, 128, 256, 32), backend=backend)
    got, written = dev.get(c2), ~np.isnan(dev.get(c2))
    assert written.mean() == pytest.approx(0.5, abs=0.05) and launches() == before + 1
    np.testing.assert_allclose(got[written], want[written], rtol=1e-5, atol=1e-4 * math.sqrt(k))


# ---- on the CPU: which kernels qualify, and the variant compiled for sm_90 -------------------------
def _attention_args(tm, tn, d, causal, seq=256, dtype="bfloat16"):
    import torch
    q = torch.empty(2, 4, seq, d, dtype=getattr(torch, dtype))
    kv = torch.empty(2, 2, seq, d, dtype=getattr(torch, dtype))
    return (q, kv, kv, q, 0.125, tm, tn, d, 4, 2, causal)


def _attention_ir(args: tuple, capability: int = 90) -> tuple:
    """flash_attention's IR for sm_<capability> and `args`, the facts per IR parameter (None
    but for arrays) and the flat launch arguments."""
    from tilecraft.ir import ArrayType
    specs, arrays, flat = flash_attention.describe(args)
    ir = flash_attention.lower(specs, f"sm_{capability}")
    facts = iter(a.facts for a in arrays)
    return ir, [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params], flat


@pytest.mark.parametrize("causal", [False, True])
def test_streamed_loop_found(causal):
    """K and V are streamed, Q resident; P V is the deferred MMA, its accumulator rescaled."""
    pytest.importorskip("torch")
    found = streamed_loop(kernel_ir(flash_attention, *_attention_args(128, 64, 64, causal)))
    assert found is not None and found.rows == 128
    assert [s.transposed for s in found.streamed] == [True, False] and len(found.resident) == 1
    assert found.deferred is found.mmas[1] and [op.name for op in found.rescale] == ["binary"]


@ct.kernel
def two_matmuls(A, B, X, Y, C, D):
    """C = A @ B in float16 and D = X @ Y in tf32, in one loop."""
    acc = ct.full((64, 64), 0, dtype=ct.float32)
    acc2 = ct.full((64, 64), 0, dtype=ct.float32)
    zero = ct.PaddingMode.ZERO
    for k in range(ct.num_tiles(A, axis=1, shape=(64, 32))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(64, 32), padding_mode=zero),
                     ct.load(B, index=(k, 0), shape=(32, 64), padding_mode=zero), acc)
        acc2 = ct.mma(ct.load(X, index=(ct.bid(0), k), shape=(64, 32), padding_mode=zero).astype(ct.tfloat32),
                      ct.load(Y, index=(k, 0), shape=(32, 64), padding_mode=zero).astype(ct.tfloat32), acc2)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(D, index=(ct.bid(0), 0), tile=acc2)


def test_tf32_and_16_bit_mmas_do_not_share_a_streamed_loop():
    """A loop with a float16 MMA and a tf32 one (its operands staged) gets no Gluon variant: the
    variant's accumulator layouts take one wgmma K for the whole kernel. Each alone qualifies."""
    from tilecraft.passes.operand_staging import stage_operands
    h, f = np.zeros((128, 64), np.float16), np.zeros((128, 64), np.float32)
    staged = stage_operands(kernel_ir(two_matmuls, h, h[:64], f, f[:64], f, f))
    assert staged is not None and set(staged.params) == {2, 3}
    assert streamed_loop(staged.fn) is None
    assert streamed_loop(kernel_ir(tile_matmul, h, h[:64], h, 64, 64, 32)) is not None


def test_matmul_is_a_chained_streamed_loop():
    """Both operands of a matmul stream, nothing is resident, and its one MMA accumulates into
    the value it is yielded as (chained); attention's loop is not chained."""
    pytest.importorskip("torch")
    a = np.zeros((256, 256), np.float16)
    found = streamed_loop(kernel_ir(tile_matmul, a, a, a, 128, 128, 64))
    assert found is not None and found.chained and found.deferred is None
    assert len(found.streamed) == 2 and not found.resident and found.rows == 128
    assert not streamed_loop(kernel_ir(flash_attention, *_attention_args(128, 64, 64, False))).chained


@pytest.mark.parametrize("dtype,shape", [("bfloat16", (4000, 3000, 2000)), ("float16", (4096, 4096, 4096))])
def test_gluon_matmul_compiles_for_sm90(dtype, shape):
    """The sample matmul (128x256x64) as the Gluon variant: two compute partitions of 64 rows,
    each reading its own half of A from slots the load partition fills per partition, B's slots
    shared; one MMA in flight; persistent, its stores left in flight till the next block's; it
    compiles for sm_90 here without spills."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.backends.arrays import as_torch
    from tilecraft.backends.gluon import GluonKernel, lower
    from tilecraft.backends.triton.fitting import shared_memory_limit
    from tilecraft.ir import ArrayType
    from tilecraft.library import matmul_kernel
    from tilecraft.runtime.args import backend_args
    from tilecraft.tools.inspection import _resources
    m, n, k = shape
    a, b = torch.empty(m, k, dtype=getattr(torch, dtype)), torch.empty(k, n, dtype=getattr(torch, dtype))
    specs, arrays, flat = matmul_kernel.describe((a, b, torch.empty(m, n, dtype=a.dtype), 128, 256, 64))
    ir = matmul_kernel.lower(specs, "sm_90")
    facts = iter(x.facts for x in arrays)
    facts = [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params]
    kernel = GluonKernel(lower(ir, facts, streamed_loop(ir)))
    src = kernel.source
    assert src.count("_compute, (") == 2 and kernel.lowered.persistent
    assert "ring0.index(slot * 2 + piece)" in src and "warpgroup_mma_wait(1, " in src
    assert src.count("tma.store_wait(0)") == 2  # before a block's store, and after the last
    assert kernel.lowered.chained and not kernel.lowered.units_paired  # equal work: striding over blocks
    binary = kernel.compile_for(90, backend_args(flat, as_torch))
    _, spills = _resources(binary.asm["cubin"])
    assert binary.metadata.shared <= shared_memory_limit(90) and spills == 0


def test_gluon_tf32_matmul_compiles_for_sm90():
    """float32 8192^3 with 128x256x32 tiles: the operands are staged and the staged kernel's
    Gluon variant issues tf32 wgmmas (m64n256k8) on the copies, keeps 3 ring slots by storing
    each 64x256 float32 tile in two column halves, and compiles for sm_90 without spills."""
    import re
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.backends.arrays import as_torch
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton import TritonBackend
    from tilecraft.backends.triton.fitting import shared_memory_limit
    from tilecraft.backends.triton.operand_staging import StagedKernel, scratch_layout
    from tilecraft.ir import ArrayType
    from tilecraft.library import matmul_kernel
    from tilecraft.runtime.args import backend_args
    from tilecraft.tools.inspection import _resources
    x = torch.empty(8192, 8192)
    specs, arrays, flat = matmul_kernel.describe((x, x, x, 128, 256, 32))
    ir = matmul_kernel.lower(specs, "sm_90")
    facts = iter(a.facts for a in arrays)
    compiled = TritonBackend(BackendKind.TRITON, capability=90).compile(
        ir, [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params])
    assert isinstance(compiled, StagedKernel)
    args = backend_args(flat, as_torch)
    staged = compiled.staged_kernel(args)
    assert isinstance(staged, WarpSpecializedKernel)
    kernel = staged.variant()
    assert kernel.lowered.stages == 3 and "gl.split(" in kernel.source
    copies = list(args)
    for i, copy in compiled.staged.params.items():
        copies[i] = torch.empty_strided(*scratch_layout(x.shape, copy.transposed, 4))
    binary = kernel.compile_for(90, copies)
    assert set(re.findall(r"wgmma\.mma_async\.[\w.]+", binary.asm["ptx"])) == {
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32"}
    _, spills = _resources(binary.asm["cubin"])
    assert binary.metadata.shared <= shared_memory_limit(90) and spills == 0


@pytest.mark.parametrize("blocks,runs", [(128, False), (255, False), (256, True), (264, True), (288, False),
                                         (384, True), (396, True), (2048, True)])
def test_gluon_matmul_takes_grids_it_deals_evenly(blocks, runs):
    """On 132 SMs a matmul runs as the Gluon variant on grids of 256 blocks or more whose last
    round of programs is at least 85% full (3072^3's 288 blocks: 18%), else as the Triton kernel."""
    from tilecraft.backends.gluon.lower import deals_evenly
    assert deals_evenly(blocks, 132) == runs


@pytest.mark.parametrize("tm,tn,d,causal", [(128, 128, 128, False), (128, 64, 64, True), (64, 128, 64, True),
                                             (64, 128, 128, False)])
def test_gluon_compiles_for_sm90(tm, tn, d, causal):
    """The Gluon variant of flash_attention compiles for sm_90 here, in shared memory, without
    spills beyond a few bytes, with the producer warp and the deferred MMA in its source."""
    pytest.importorskip("triton")
    from tilecraft.backends.arrays import as_torch
    from tilecraft.backends.gluon import GluonKernel, lower
    from tilecraft.backends.triton.fitting import shared_memory_limit
    from tilecraft.runtime.args import backend_args
    from tilecraft.tools.inspection import _resources
    ir, facts, flat = _attention_ir(_attention_args(tm, tn, d, causal))
    kernel = GluonKernel(lower(ir, facts, streamed_loop(ir)))
    assert "gl.warp_specialize(" in kernel.source and "warpgroup_mma_wait(1, " in kernel.source
    # two compute partitions (row halves, or two of the user's blocks; causal blocks end their
    # loops at different iterations, and the one done first drains the rest of the slots)
    assert kernel.source.count("_compute, (") == 2
    assert kernel.lowered.grid_divisor == (2 if tm == 64 else 1)
    assert ("hi_all" in kernel.source) == (tm == 64 and causal)
    binary = kernel.compile_for(90, backend_args(flat, as_torch))
    _, spills = _resources(binary.asm["cubin"])
    assert binary.metadata.shared <= shared_memory_limit(90) and spills <= 16


@pytest.mark.parametrize("case", ["one partition of 8 warps", "two of 4, ping-pong"])
def test_gluon_barriers_count_every_arriving_thread(case):
    """Compute partitions arrive on the slots' `empty` barriers and the ping-pong turns from
    every thread (Schedule.arrive): each such barrier expects all threads of the partitions
    arriving on it. One partition of 8 warps (row_sums_too at 128 rows: its Sums store keeps
    the rows whole) and two of 4 (attention's row halves) compile for sm_90 here."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.backends.arrays import as_torch
    from tilecraft.backends.gluon import GluonKernel, lower
    from tilecraft.ir import ArrayType
    from tilecraft.runtime.args import backend_args
    if case.startswith("one"):
        q, k = torch.zeros(256, 64, dtype=torch.float16), torch.zeros(64, 256, dtype=torch.float16)
        specs, arrays, flat = row_sums_too.describe((q, k, q, torch.zeros(256, 8), 128, 64, 64, 4))
        ir = row_sums_too.lower(specs, "sm_90")
        facts = iter(a.facts for a in arrays)
        facts = [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params]
        warps, consumers, turns = 8, 1, False
    else:
        ir, facts, flat = _attention_ir(_attention_args(128, 128, 64, False))
        warps, consumers, turns = 4, 2, True
    kernel = GluonKernel(lower(ir, facts, streamed_loop(ir)))
    src = kernel.source
    assert kernel.lowered.num_warps == warps and src.count("_compute, (") == consumers
    counts = dict(re.findall(r"mbarrier\.init\((\w+)\.index\(\w+\), count=(\d+)\)", src))
    empties = {int(c) for n, c in counts.items() if n.startswith("empty")}
    assert empties == {consumers * warps * 32}
    assert [int(counts[n]) for n in ("turn_mine", "turn_theirs") if n in counts] == ([warps * 32] * 2 if turns else [])
    assert "mbarrier.arrive(" not in src and "increment_count=False" in src
    kernel.compile_for(90, backend_args(flat, as_torch))


@pytest.mark.parametrize("capability,knob,wrapped", [(90, "", True), (90, "0", False), (100, "", False), (80, "", False)])
def test_backend_wraps_on_hopper_only(monkeypatch, capability, knob, wrapped):
    """The Triton backend gives a streamed-loop kernel its Gluon variant on sm_90 only (wgmma),
    unless TILECRAFT_WARP_SPECIALIZE=0; the kernel as compiled stays inside for the rest."""
    pytest.importorskip("triton")
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton import TritonBackend
    monkeypatch.setenv("TILECRAFT_WARP_SPECIALIZE", knob)
    ir, facts, _ = _attention_ir(_attention_args(128, 128, 64, False), capability)
    compiled = TritonBackend(BackendKind.TRITON, capability=capability).compile(ir, facts)
    assert isinstance(compiled, WarpSpecializedKernel) == wrapped


@pytest.mark.parametrize("tn,wrapped", [(256, True), (128, False)])
def test_backend_wraps_wide_matmuls_only(tn, wrapped):
    """A matmul gets the Gluon variant on sm_90 with 256-column tiles only (lower.CHAINED_MIN_N)."""
    pytest.importorskip("triton")
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton import TritonBackend
    from tilecraft.ir import ArrayType
    torch = pytest.importorskip("torch")
    a = torch.zeros(1024, 1024, dtype=torch.float16)
    specs, arrays, _ = tile_matmul.describe((a, a, a, 128, tn, 64))
    ir = tile_matmul.lower(specs, "sm_90")
    facts = iter(x.facts for x in arrays)
    compiled = TritonBackend(BackendKind.TRITON, capability=90).compile(
        ir, [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params])
    assert isinstance(compiled, WarpSpecializedKernel) == wrapped


# ---- kernels the schedule would run wrongly: declined (or not deferred) ----------------------------
@ct.kernel
def rescale_first(Q, K, V, Out, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    """P V with the accumulator halved at the top of the body, before the first MMA."""
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
    acc = ct.full((TM, D), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(K.shape[0], TN)):
        acc = acc * 0.5
        kt = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        p = ct.mma(q, kt, ct.full((TM, TN), 0.0, dtype=ct.float32)).astype(Q.dtype)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(p, v, acc)
    ct.store(Out, index=(ct.bid(0), 0), tile=acc.astype(Out.dtype))


@ct.kernel
def previous_max(Q, K, Out, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    """Carries the row max and the one before it (`m` yielded into `m_prev`'s slot)."""
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
    m = ct.full((TM, 1), -math.inf, dtype=ct.float32)
    m_prev = ct.full((TM, 1), -math.inf, dtype=ct.float32)
    for j in range(ct.cdiv(K.shape[1], TN)):
        k = ct.load(K, index=(0, j), shape=(D, TN))
        s = ct.mma(q, k, ct.full((TM, TN), 0.0, dtype=ct.float32))
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        m_prev = m
        m = m_new
    ct.store(Out, index=(ct.bid(0), 0), tile=ct.broadcast_to(m - m_prev, (TM, TN)).astype(Out.dtype))


@ct.kernel
def row_sums_too(Q, K, Out, Sums, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int],
                 W: ct.Constant[int]):
    """Q K^T summed over the key blocks, and its row sums stored as W equal columns."""
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(K.shape[1], TN)):
        acc = ct.mma(q, ct.load(K, index=(0, j), shape=(D, TN)), acc)
    ct.store(Out, index=(ct.bid(0), 0), tile=acc.astype(Out.dtype))
    ct.store(Sums, index=(ct.bid(0), ct.bid(1)), tile=ct.broadcast_to(ct.sum(acc, axis=1, keepdims=True), (TM, W)))


def test_rescale_ahead_of_the_first_mma_is_not_deferred():
    """The schedule waits for the previous iteration's P V only after issuing Q K^T: a rescale
    op ahead of that would read the accumulator of two iterations before, so no MMA is deferred
    (the loop still qualifies and runs its MMAs in order)."""
    q = np.zeros((256, 64), np.float16)
    found = streamed_loop(kernel_ir(rescale_first, q, q, q, q, 128, 64, 64))
    assert found is not None and found.deferred is None


def test_carried_value_moved_to_another_slot_is_assigned_at_once():
    """`m_prev = m; m = m_new` yields a carried value into another slot: the generated loop
    assigns the yielded values all at once (through a temporary), as Triton's loops do, so
    `m_prev` gets the old `m` (one after the other it would read the new one)."""
    pytest.importorskip("triton")
    from tilecraft.backends.gluon import lower
    q, k = np.zeros((256, 64), np.float16), np.zeros((64, 256), np.float16)
    ir = kernel_ir(previous_max, q, k, q, 64, 64, 64)
    found = streamed_loop(ir)
    assert found is not None
    source = lower(ir, [None] * len(ir.params), found).source
    loop = source[source.index("    for j in range("):]
    assert re.search(r"\n\s+(tmp\w*) = (acc\w*)\n(.|\n)*= \1\n", loop), loop


@pytest.mark.parametrize("columns", [1, 2, 4])
def test_store_narrower_than_a_tma_box_is_declined(columns):
    """A float32 store of 1 or 2 columns spans 4 or 8 bytes a row, less than a TMA box's 16:
    declined (its tensor descriptor would fail at launch, past the fallback); 4 columns qualify.
    The loop is a streamed loop either way: the backend's descriptor rule declines the store."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.gluon import WarpSpecializedKernel
    from tilecraft.backends.triton import TritonBackend
    from tilecraft.ir import ArrayType
    q, k = torch.zeros(256, 64, dtype=torch.float16), torch.zeros(64, 256, dtype=torch.float16)
    specs, arrays, _ = row_sums_too.describe((q, k, q, torch.zeros(256, 8), 64, 64, 64, columns))
    ir = row_sums_too.lower(specs, "sm_90")
    assert streamed_loop(ir) is not None
    facts = iter(a.facts for a in arrays)
    compiled = TritonBackend(BackendKind.TRITON, capability=90).compile(
        ir, [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params])
    assert isinstance(compiled, WarpSpecializedKernel) == (columns == 4)


@pytest.mark.parametrize("capability", [90, 80])
def test_inspect_shows_what_runs(capability):
    """`tilecraft inspect` shows the Gluon variant where it is what launches (sm_90), the Triton
    kernel elsewhere."""
    pytest.importorskip("triton")
    from tilecraft.tools import inspect_kernel
    info = inspect_kernel(flash_attention, _attention_args(128, 128, 64, True), capability=capability)
    assert info.warp_specialized == ("shown" if capability == 90 else "")
    assert ("gl.warp_specialize(" in info.triton) == (capability == 90) and info.shared_bytes > 0
    assert ("warp-specialized: on this GPU" in info.summary()) == (capability == 90)


def test_inspect_names_a_matmuls_variant():
    """A matmul's Gluon variant runs only on grids dealt evenly to the SMs: inspect shows the
    Triton kernel and says so."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.library import matmul_kernel
    from tilecraft.tools import inspect_kernel
    a = torch.empty(4096, 4096, dtype=torch.float16)
    info = inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 64), capability=90)
    assert info.warp_specialized == "variant" and "tl.dot(" in info.triton
    assert "warp-specialized variant: grids of 256 blocks" in info.summary()


def test_inspect_shows_a_matmuls_variant_when_asked(capsys):
    """`warp_specialized=True` (`--warp-specialized`) shows the matmul's Gluon variant, the kernel
    large grids run: its Gluon source, warps and registers, and says which grids run it; a kernel
    without one, and the variant asked for with the staged kernel or a grid, are a clear error."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pathlib import Path
    from tilecraft.__main__ import main as cli
    from tilecraft.library import matmul_kernel
    from tilecraft.tools import inspect_kernel
    a = torch.empty(4096, 4096, dtype=torch.float16)
    info = inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 64), capability=90, warp_specialized=True)
    assert info.warp_specialized == "shown variant" and "warp_specialize(" in info.triton
    assert "warpgroup_mma" in info.triton and info.num_warps == 4 and info.registers and info.spill_bytes == 0
    assert "warp-specialized variant shown: grids of 256 blocks" in info.summary()
    with pytest.raises(ValueError, match="no warp-specialized Gluon variant"):
        inspect_kernel(matmul_kernel, (a, a, a, 64, 64, 32), capability=90, warp_specialized=True)
    for other in ({"staged": True}, {"grid": (256,)}):  # what a grid runs is asked for without it
        with pytest.raises(ValueError, match="shown on its own"):
            inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 64), capability=90, warp_specialized=True, **other)
    path = Path(__import__("tilecraft").__file__).parent / "library" / "matmul.py"
    assert cli(["inspect", f"{path}:matmul_kernel", *["float16[4096,4096]"] * 3, "128", "256", "64",
                "--warp-specialized", "--stage", "triton"]) == 0
    assert "# Gluon code generated by tilecraft" in capsys.readouterr().out


def test_inspect_names_a_staged_tf32_matmuls_variant():
    """A tf32 matmul's staged kernel has the Gluon variant too (on grids dealt evenly): inspect
    with staged=True shows the staged Triton kernel and says so; with a grid the variant takes
    (2048 blocks of 128x256: 16 rounds on 132 SMs, the last 68 full) it shows the variant, as
    launches on that grid run it, and with one it does not take (140 blocks) the Triton kernel;
    128-column tiles have none."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.library import matmul_kernel
    from tilecraft.tools import inspect_kernel
    a = torch.empty(8192, 8192)
    info = inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 32), capability=90, staged=True)
    assert info.staging == "shown" and info.warp_specialized == "variant"
    assert "warp-specialized variant: grids of 256 blocks" in info.summary()
    on_grid = inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 32), capability=90, grid=(2048,))
    assert on_grid.staging == "shown" and on_grid.warp_specialized == "shown variant"
    assert "warp_specialize(" in on_grid.triton and on_grid.num_warps == 4
    assert "runs this grid as its warp-specialized Gluon variant (shown)" in on_grid.summary()
    short = inspect_kernel(matmul_kernel, (a, a, a, 128, 256, 32), capability=90, grid=(140,))
    assert short.staging == "shown" and short.warp_specialized == "variant" and "tl.dot(" in short.triton
    assert "Gluon variant (shown)" not in short.summary()
    narrow = inspect_kernel(matmul_kernel, (a, a, a, 128, 128, 32), capability=90, staged=True)
    assert narrow.staging == "shown" and narrow.warp_specialized == ""


def test_inspect_reports_a_variant_given_up(monkeypatch):
    """A variant that does not build is given up: inspect shows the Triton kernel, with the reason."""
    pytest.importorskip("triton")
    from tilecraft.backends.gluon import GluonKernel
    from tilecraft.tools import inspect_kernel

    def fails(self, capability=90, args=None):
        raise RuntimeError("PassManager::run failed")
    monkeypatch.setattr(GluonKernel, "compile_for", fails)
    info = inspect_kernel(flash_attention, _attention_args(128, 128, 64, False, seq=384), capability=90)
    assert not info.warp_specialized and "tl.dot(" in info.triton
    assert "the warp-specialized Gluon variant (it does not build (RuntimeError: PassManager::run failed))" in info.summary()


# ---- parameters named like the generated module's own names -----------------------------------------
@ct.kernel
def scaled_row_sums(Q, K, Out, s: int, c: float, grid_x: float, TM: ct.Constant[int], TN: ct.Constant[int],
                    D: ct.Constant[int]):
    """Out[b] = c * sum over j < s of Q[b] K[j]^T + grid_x: Q resident, K streamed (a chained
    loop); its scalars are named as the Gluon module names its own loop variables and grid."""
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for j in range(s):
        kt = ct.load(K, index=(j, 0), shape=(TN, D), order=(1, 0))
        acc = ct.mma(q, kt, acc)
    ct.store(Out, index=(ct.bid(0), 0), tile=(acc * c + grid_x).astype(Out.dtype))


def _scaled_row_sums_variant():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.backends.arrays import as_torch
    from tilecraft.backends.gluon import GluonKernel, lower
    from tilecraft.ir import ArrayType
    from tilecraft.runtime.args import backend_args
    q, k = torch.zeros(512, 64, dtype=torch.bfloat16), torch.zeros(256, 64, dtype=torch.bfloat16)
    specs, arrays, flat = scaled_row_sums.describe((q, k, q, 4, 0.5, 1.0, 128, 64, 64))
    ir = scaled_row_sums.lower(specs, "sm_90")
    facts = iter(x.facts for x in arrays)
    facts = [next(facts) if isinstance(p.type, ArrayType) else None for p in ir.params]
    return GluonKernel(lower(ir, facts, streamed_loop(ir))), backend_args(flat, as_torch)


def test_gluon_kernel_passes_its_parameters_unchanged():
    """The kernel function that allocates shared memory and forks hands the partitions its
    parameters as launched: nothing in it rebinds one (Python's `for s in gl.static_range(3)`
    leaves s == 2 behind, so the partitions read a trip count `s` of 2, found by running the
    generated source under a threaded CPU emulation of its barriers)."""
    import ast
    kernel, _ = _scaled_row_sums_variant()
    top = next(f for f in ast.parse(kernel.source).body
               if isinstance(f, ast.FunctionDef) and f.name == kernel.lowered.name)
    params = {a.arg for a in top.args.args}
    bound = {t.id for node in ast.walk(top) for t in ast.walk(node)
             if isinstance(node, (ast.For, ast.Assign)) and isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    assert "s" in params and "c" in params and not bound & params


def test_gluon_compiles_a_kernel_with_a_parameter_named_like_its_grid():
    """A kernel parameter named grid_x makes the persistent module name its grid grid_x_1, ...;
    compile_for (what inspect runs, which gives the variant up where it fails) compiles it."""
    kernel, args = _scaled_row_sums_variant()
    assert kernel.lowered.persistent and "grid_x_1: tl.int32" in kernel.source
    kernel.compile_for(90, args)


# ---- cached launches of the variant without JITFunction.run -------------------------------------------
class _Compiled:
    """Stands in for Triton's CompiledKernel: records its launcher's calls."""

    function, packed_metadata = "function", "metadata"

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def run(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_, *flat):
        self.calls.append(("direct", (gx, gy, gz), stream, (function, metadata, launch_metadata, enter, exit_), flat))


class _JIT:
    """Stands in for a Gluon JITFunction: `fn[grid](*flat, **options)` records and returns a compiled kernel."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def __getitem__(self, grid):
        def run(*flat, **options):
            self.calls.append(("jit", grid, None, options, flat))
            return _Compiled(self.calls)
        return run


def _plain(flat: tuple) -> list:
    """A launch's arguments with each tensor descriptor as (shape, strides, block), comparable."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    return [(list(x.shape), list(x.strides), list(x.block_shape)) if isinstance(x, TensorDescriptor)
            else x.data_ptr() if hasattr(x, "data_ptr") else x for x in flat]


def test_cached_variant_launches_call_the_compiled_kernel(monkeypatch):
    """A specialized launcher's second launch on a grid calls the compiled kernel its first launch
    returned, with the arguments and grid Triton's JITFunction.run would pass it, the launch hooks
    and metadata left out; another grid goes through JITFunction.run again (the persistent variant
    takes the grid as ints, which Triton specializes)."""
    from tilecraft.backends.gluon import kernel as gluon_kernel
    monkeypatch.setattr(gluon_kernel, "_multiprocessors", lambda args: 132)
    monkeypatch.setattr(gluon_kernel, "current_stream", lambda: 7)
    variant, args = _scaled_row_sums_variant()
    calls: list = []
    variant._fn = _JIT(calls)

    class Main:
        def launch(self, *a, **k):
            raise AssertionError("the Triton kernel ran")

    ws = gluon_kernel.WarpSpecializedKernel(Main(), lambda: variant)
    launcher = ws.specialize(args)
    for grid in [(264, 1, 1)] * 3 + [(396, 1, 1), (264, 1, 1)]:  # grids a matmul-like variant takes
        launcher.launch(grid, args)
    assert ws.variant_launches == 5
    kinds = [c[0] for c in calls]
    assert kinds == ["jit", "direct", "direct", "jit", "jit"]
    first = calls[0]
    assert first[3]["enable_reflect_ftz"] is False  # the options are the compiled kernel's
    for call in calls[1:3]:
        _, grid, stream, head, flat = call
        assert grid == first[1] and stream == 7 and head == ("function", "metadata", None, None, None)
        assert _plain(flat) == _plain(first[4])


@pytest.mark.only_backends("triton")
def test_matmul_gluon_cached_launches(dev, backend):
    """On the H200: the Gluon matmul launched six times, on two sets of arrays in turn, each
    output poisoned before its launch, is right every time, through the fast path's launcher
    (from the third launch on, the compiled kernel called without JITFunction.run, each array's
    descriptors encoded once: a launch must take the descriptors of its own arrays)."""
    torch = pytest.importorskip("torch")
    from tilecraft.library import matmul_kernel
    kernel = matmul_kernel.replace_hints()  # its own cache: the first launches compile
    a, b, c, want, grid = gluon_matmul_case("cuda")
    b2 = torch.randn_like(b)
    cases = [(b, c, want), (b2, torch.empty_like(c), a.double() @ b2.double())]
    for i in range(6):
        b_i, c_i, want_i = cases[i % 2]
        c_i.fill_(float("nan"))
        dev.launch(grid, kernel, (a, b_i, c_i, 128, 256, 64), backend=backend)
        torch.testing.assert_close(c_i.double(), want_i, rtol=1e-2, atol=1e-2 * math.sqrt(a.shape[1]))
    assert gluon_variant_launches(kernel) == 6


@pytest.mark.only_backends("triton")
def test_matmul_gluon_quick_launches(dev, backend):
    """On the H200: cached `ct.launch`es of the Gluon matmul (no `backend` option) take the C
    quick path made for the grid of the launch before (`GluonKernel.fused_launch`): each right,
    on two sets of arrays in turn (each array's maps its own), the grid given in 1 or 3 numbers;
    it declines a launch on another grid (which `ct.launch` then runs through the fast path's
    launcher), having launched nothing."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon variant runs on sm_90")
    from tilecraft.library import matmul_kernel
    kernel = matmul_kernel.replace_hints()  # its own cache and quick launcher
    a, b, c, want, grid = gluon_matmul_case("cuda")
    b2 = torch.randn_like(b)
    cases = [(b, c, want), (b2, torch.empty_like(c), a.double() @ b2.double())]
    stream = torch.cuda.current_stream()

    def check(i, launch_grid, quick):
        b_i, c_i, want_i = cases[i % 2]
        c_i.fill_(float("nan"))
        args = (a, b_i, c_i, 128, 256, 64)
        if quick:
            assert kernel.quick(stream, launch_grid, args) is True
        else:
            ct.launch(stream, launch_grid, kernel, args)
        torch.testing.assert_close(c_i.double(), want_i, rtol=1e-2, atol=1e-2 * math.sqrt(a.shape[1]))

    check(0, grid, quick=False)  # compiles, makes the fast-path entry and its quick launcher
    assert type(kernel.quick).__name__ == "Quick"
    for i in range(1, 5):
        check(i, grid if i % 2 else grid[:1], quick=True)
    assert kernel.quick(stream, (grid[0] + 2,), (a, b, c, 128, 256, 64)) is False  # another grid: declined
    assert gluon_variant_launches(kernel) == 1  # the others ran in C


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("m, n, k, tn", [(512, 512, 512, 256), (1000, 700, 300, 256), (2048, 2048, 512, 256),
                                         (4000, 3000, 256, 128)])
def test_small_matmul_quick_launches(dev, backend, m, n, k, tn):
    """On the H200: a matmul whose grid the Gluon variant does not take (few blocks: the Triton
    kernel runs it, split into pieces, or at 128 blocks as compiled, one program per block;
    768 blocks of 128x128 run through the grid loop) takes the C quick path on cached
    `ct.launch`es like the variant's grids do (`fused_on_grid`), each right on new outputs,
    and declines another grid."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon variant runs on sm_90")
    from tilecraft.library import matmul_kernel
    kernel = matmul_kernel.replace_hints()  # its own cache and quick launcher
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
    want = a.double() @ b.double()
    grid = (math.ceil(m / 128) * math.ceil(n / tn), 1, 1)
    stream = torch.cuda.current_stream()
    for i in range(4):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        args = (a, b, c, 128, tn, 64)
        if i == 0:
            ct.launch(stream, grid, kernel, args)  # compiles, makes the fast-path entry and its quick launcher
        else:
            assert kernel.quick(stream, grid, args) is True
        torch.testing.assert_close(c.double(), want, rtol=1e-2, atol=1e-2 * math.sqrt(k))
    assert kernel.quick(stream, (grid[0] + 1, 1, 1), args) is False  # another grid: declined
    assert gluon_variant_launches(kernel) == 0


def test_specialize_starts_from_the_launch_it_follows():
    """`WarpSpecializedKernel.specialize` gives its launcher the grid and compiled kernel of the
    kernel's last launch (its direct launch and quick-path launch are made for them) only where
    that launch ran these very arguments on the variant: not after a launch of other arguments
    or on the Triton kernel, and once (a second specialize starts from nothing)."""
    pytest.importorskip("triton")
    from types import SimpleNamespace

    from tilecraft.backends.gluon.kernel import WarpSpecializedKernel
    made = []
    variant = SimpleNamespace(
        takes=lambda grid, args: grid[0] % 2 == 0, launch=lambda grid, args, stream: ("compiled", grid),
        expanded=lambda compiled: ("expanded", compiled),
        direct=lambda compiled, expanded: made.append(("direct", compiled)) or (lambda *a: None),
        fused_launch=lambda expanded, grid, args: made.append(("fused", grid)) or "fused")
    main = SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: "main's launcher")
    kernel = WarpSpecializedKernel(main, lambda: variant)
    args, other = [object(), object()], [object(), object()]
    kernel.launch((4, 1, 1), args)
    launcher = kernel.specialize(args)
    assert launcher.fused_launch() == "fused" and launcher._direct[0] == (4, 1, 1)
    assert made == [("direct", ("compiled", (4, 1, 1))), ("fused", (4, 1, 1))]
    assert kernel.specialize(args).fused_launch() is None  # consumed
    kernel.launch((4, 1, 1), args)
    assert kernel.specialize(other).fused_launch() is None  # other arguments
    kernel.launch((4, 1, 1), args)
    kernel.launch((3, 1, 1), args)  # the Triton kernel's launch: the variant's before it is not the last
    assert made[-1] == "main" and kernel.specialize(args).fused_launch() is None  # main's launcher has none
    assert kernel.variant_launches == 3


def test_specialize_after_a_launch_on_the_triton_kernel():
    """Specialized after a launch that ran on the Triton kernel (a grid the variant does not
    take), the launcher starts with that kernel's specialized launcher and its fused launch for
    that grid only (`fused_on_grid`): one made for any grid is restricted to it, one made for
    another grid is not taken; launches on other grids still choose per grid."""
    pytest.importorskip("triton")
    from types import SimpleNamespace

    from tilecraft.backends.base import FusedLaunch
    from tilecraft.backends.gluon.kernel import WarpSpecializedKernel
    made: list = []
    variant = SimpleNamespace(takes=lambda grid, args: grid[0] % 2 == 0,
                              launch=lambda grid, args, stream: made.append("variant") or "compiled",
                              expanded=lambda compiled: None, direct=lambda compiled, expanded: None)

    def main_with(fused: FusedLaunch | None) -> SimpleNamespace:
        inner = SimpleNamespace(fused_launch=lambda: fused, launch=lambda *a, **k: made.append("main's launcher"))
        return SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: inner)

    args = [object(), object()]
    any_grid = FusedLaunch("_go(gx)", {"_go": lambda gx: made.append(("quick", gx)) or True})
    kernel = WarpSpecializedKernel(main_with(any_grid), lambda: variant)
    kernel.launch((3, 1, 1), args)
    launcher = kernel.specialize(args)
    fused = launcher.fused_launch()
    assert fused.grid == (3, 1, 1) and fused.native is None
    run = lambda grid: eval(fused.expr, dict(fused.env, gx=grid[0], gy=grid[1], gz=grid[2]))  # noqa: S307
    assert run((3, 1, 1)) is True and run((5, 1, 1)) is False and made[-1] == ("quick", 3)
    launcher.launch((5, 1, 1), args)
    launcher.launch((6, 1, 1), args)
    assert made[-2:] == ["main's launcher", "variant"]

    other_grid = FusedLaunch("_go(gx)", {}, grid=(7, 1, 1))
    kernel = WarpSpecializedKernel(main_with(other_grid), lambda: variant)
    kernel.launch((3, 1, 1), args)
    assert kernel.specialize(args).fused_launch() is None
    kernel.launch((7, 1, 1), args)
    assert kernel.specialize(args).fused_launch() is other_grid
    kernel.launch((7, 1, 1), args, dependent=True)  # dependent launches never specialize
    assert kernel.specialize(args).fused_launch() is None


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tm", [128, 64])
def test_attention_gluon_quick_launches(dev, backend, causal, tm):
    """On the H200: cached `ct.launch`es of attention's Gluon variant run in the C quick
    launcher made for their grid (persistent programs, paired 64-row blocks), each on new
    queries, keys and values, each right."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon variant runs on sm_90")
    import ml_dtypes
    kernel = flash_attention.replace_hints()  # its own cache and quick launcher
    stream = torch.cuda.current_stream()
    batch, heads, group, seq, d = 2, 8, 2, 512, 128
    grid = (seq // tm, batch * heads, 1)
    for i in range(3):
        q, k, v = _inputs(batch, heads, group, seq, seq, d, ml_dtypes.bfloat16, seed=i + tm + causal)
        out = dev.poison(q.shape, q.dtype)
        args = (dev.put(q), dev.put(k), dev.put(v), out, 1 / math.sqrt(d), tm, 128, d, heads, group, causal)
        if i == 0:
            ct.launch(stream, grid, kernel, args)
            assert type(kernel.quick).__name__ == "Quick"
        else:
            assert kernel.quick(stream, grid, args) is True
        want = _reference(q, k, v, 1 / math.sqrt(d), group, causal)
        np.testing.assert_allclose(dev.get(out).astype(np.float64), want, rtol=2e-2, atol=2e-2)
    assert gluon_variant_launches(kernel) == 1  # the others ran in C
