"""tf32 operand staging (passes/operand_staging.py, backends/triton/operand_staging.py): which
parameters qualify, the prologue's rounding (nearest even, as the backend rounds MMA operands:
special values, ties, round-ups across an exponent, transposed copies with padded rows), and
staged launches bit-identical to unstaged ones on poisoned outputs, checked against float64
(forced on the Triton interpreter at odd sizes; automatic on the GPU at 2048^3)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import kernel_ir
from tilecraft.backends.tile_splitting import BlockMergeKernel
from tilecraft.ir import ops, verify
from tilecraft.language import dtypes as dt
from tilecraft.library.matmul import matmul_kernel
from tilecraft.passes.operand_staging import Copy, stage_operands

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(5)
ZERO = ct.PaddingMode.ZERO


def _mats(m: int, n: int, k: int):
    return RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)


def _rn_tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to nearest even tfloat32 on the bits (NaN: quieted, payload truncated)."""
    bits = x.view(np.uint32).astype(np.uint64)
    up = ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    nan = ((bits & 0xFFFFE000) | 0x400000).astype(np.uint32)
    return np.where(np.isnan(x), nan, up).view(np.float32)


# ---- which parameters qualify ------------------------------------------------------------------
def test_library_matmul_stages_a_as_is_and_b_transposed():
    a, b = _mats(100, 72, 300)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((100, 72), np.float32), 32, 32, 32)
    staged = stage_operands(fn)
    assert staged is not None and staged.params == {0: Copy(True, False, False), 1: Copy(True, True, False)}
    verify(staged.fn)
    ops_of = lambda f, cls: [op for op in f.walk() if isinstance(op, cls)]  # noqa: E731
    assert not [c for c in ops_of(staged.fn, ops.Cast) if c.dtype is dt.tfloat32]
    assert [(c.x.id, c.dtype) for c in ops_of(staged.fn, ops.Bitcast)] == [
        (c.x.id, dt.tfloat32) for c in ops_of(fn, ops.Cast) if c.dtype is dt.tfloat32]
    assert {(load.array.id, load.order) for load in ops_of(staged.fn, ops.Load)} == {(0, (0, 1)), (1, (1, 0))}
    # N = B.shape[1] is the copy's axis 0; A's queries are unchanged
    assert {(q.array.id, q.axis) for q in ops_of(staged.fn, ops.ArrayShape)} == {(0, 0), (1, 0), (0, 1)}
    assert [c.rounding for c in ops_of(fn, ops.Cast) if c.dtype is dt.tfloat32] == [None, None]  # fn unchanged
    assert {load.order for load in ops_of(fn, ops.Load)} == {(0, 1)}


def test_tf32_staging_threshold_follows_the_mma_width():
    """tf32 operands stage from 2M elements where every MMA has 64 rows or more (Hopper's wgmma
    reads B K-major only; below, mma.sync on operands rounded in registers is faster), from 16M
    where an MMA is narrower (mma.sync takes B from registers in
    any layout: the copy pays only on large problems); misaligned operands from 4M."""
    from tilecraft.backends.triton import operand_staging as st
    a, b = _mats(128, 64, 64)
    c = np.zeros((128, 64), np.float32)
    assert st.mma_rows(kernel_ir(matmul_kernel, a, b, c, 64, 32, 32)) == 64  # wgmma
    assert st.mma_rows(kernel_ir(matmul_kernel, a, b, c, 32, 64, 32)) == 32  # narrower
    rounded = Copy(True, False, False)
    assert st._min_elements(rounded, narrow=False) == 2**21 and st._min_elements(rounded, narrow=True) == 2**24
    assert st._min_elements(Copy(True, True, True), narrow=False) == 2**22


@ct.kernel
def store_to_a(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        b = ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(A, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def rounded_a_read_elsewhere(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        b = ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        acc = ct.mma(a, b, acc) + a.astype(ct.float32)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def a_times_a(A, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        x = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        y = ct.load(A, index=(k, 0), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        acc = ct.mma(x, y, acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def directed_rounding(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.astype(ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ZERO), ct.tfloat32,
                      rounding_mode=ct.RoundingMode.RZ)
        b = ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ZERO).astype(ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


def test_parameters_that_do_not_qualify():
    """An array also stored to, a rounded tile read by more than MMAs, an array feeding both
    operands (it would need both copies) and a cast rounding otherwise than to nearest keep
    their parameter unstaged; the other operand still stages."""
    a, b = _mats(32, 32, 64)
    a = np.ascontiguousarray(a[:, :32])
    c = np.zeros((32, 32), np.float32)
    b_only = {1: Copy(True, True, False)}
    assert stage_operands(kernel_ir(store_to_a, a, b[:32], c, 16)).params == b_only
    assert stage_operands(kernel_ir(rounded_a_read_elsewhere, a, b[:32], c, 16)).params == b_only
    assert stage_operands(kernel_ir(directed_rounding, a, b[:32], c, 16)).params == b_only
    assert stage_operands(kernel_ir(a_times_a, a, c, 16)) is None
    half = a.astype(np.float16)
    assert stage_operands(kernel_ir(matmul_kernel, half, half, c.astype(np.float16), 16, 16, 16)) is None  # no tf32


# ---- results ------------------------------------------------------------------------------------
def _matmul(dev, backend: str, a: np.ndarray, b: np.ndarray, t: tuple[int, int, int]):
    """C = A @ B by the library sample on `backend` (a fresh kernel object), on a poisoned C;
    also the compiled variants."""
    m, n = a.shape[0], b.shape[1]
    kernel = ct.kernel(matmul_kernel.fn)
    c = dev.poison((m, n), "float32")
    grid = (ct.cdiv(m, t[0]) * ct.cdiv(n, t[1]), 1, 1)
    if dev.name == "triton":
        import torch
        ct.launch(torch.cuda.current_stream(), grid, kernel, (dev.put(a), dev.put(b), c, *t), backend=backend)
        torch.cuda.synchronize()
    else:
        ct.launch(None, grid, kernel, (dev.put(a), dev.put(b), c, *t), backend=backend)
    return dev.get(c), [v.compiled for key, v in kernel.variants.items() if key.backend == backend]


def _staged_ran(compiled: list) -> bool:
    from tilecraft.backends.triton.operand_staging import StagedKernel
    return bool(compiled) and all(isinstance(k, StagedKernel) and k.compiled_variants for k in compiled)


@pytest.mark.only_backends("triton-interpret", "triton")
@pytest.mark.parametrize("loads", [True, "tma"])
def test_forced_staging_is_bit_identical(dev, staged_backend, loads):
    """100x72x302 with 32x32x32 tiles (K not a multiple of the tile, the copies' rows padded),
    staged on every launch (loads through pointers or tensor descriptors): the same bits as the
    unstaged kernel on the GPU (the same within BLAS reassociation on Triton's interpreter; seen on
    the H200 host's NumPy), which is within tf32 error of float64 (of the rounded inputs)."""
    a, b = _mats(100, 72, 302)
    staged, compiled = _matmul(dev, staged_backend[loads], a, b, (32, 32, 32))
    plain, unstaged = _matmul(dev, staged_backend[False], a, b, (32, 32, 32))
    assert _staged_ran(compiled) and not _staged_ran(unstaged)
    from tilecraft.backends.base import kernels_within
    within = [id(k) for k in kernels_within(compiled[0])]  # what benchmarks search for the kernel that ran
    assert within[0] == id(compiled[0]) and {id(compiled[0].main), *map(id, compiled[0].compiled_variants)} <= set(within)
    ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
    np.testing.assert_allclose(plain, ref, atol=1e-5 * np.sqrt(302), rtol=1e-5)
    if dev.name == "triton":
        np.testing.assert_array_equal(staged.view(np.uint32), plain.view(np.uint32))
    else:  # Triton's interpreter sums each dot in NumPy's BLAS, whose order can follow the layout:
        # seen up to 8e-6 apart (4 ulps of sums near 20) in a CI run; operands truncated to tf32
        # instead of rounded to nearest would be up to about 6e-2 apart here
        np.testing.assert_allclose(staged, plain, rtol=1e-6, atol=3e-5)
    if loads == "tma":
        assert all("make_tensor_descriptor" in k.source for c in compiled for k in c.compiled_variants)


def _staged_splits(compiled: list) -> list:
    """The split-K wrapper of each compiled variant's staged kernel (None where it has none)."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.splitting import SplitKernel
    return [wrapped_as(v, SplitKernel) for c in compiled for v in c.compiled_variants]


@pytest.mark.only_backends("triton-interpret", "triton")
def test_staged_launches_split(dev, backend_variant):
    """100x72x302 with 32x32x32 tiles, staged and split 3 ways on every launch: PARTIAL and FINISH
    of the staged kernel run on the copies, within tf32 error of float64 (of the rounded inputs)
    on a poisoned output."""
    name = backend_variant("staged-split3", stage_operands=True, split_k=3, stream_k=False)
    a, b = _mats(100, 72, 302)
    got, compiled = _matmul(dev, name, a, b, (32, 32, 32))
    assert _staged_ran(compiled)
    splits = _staged_splits(compiled)
    assert splits and all(s is not None and s.compiled_variants for s in splits)
    ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.sqrt(302), rtol=1e-5)


@pytest.mark.only_backends("triton")
def test_automatic_staged_split_on_the_gpu(dev):
    """256x256x16384 float32 with 128x256x32 tiles: 4M-element operands, so the launch stages,
    and 2 blocks walking a long K loop, so it splits the staged kernel (its tiles cut into
    pieces); within tf32 error of float64 (of the rounded inputs) on a poisoned output."""
    import torch
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tf32 staging needs sm_90+")
    a, b = _mats(256, 256, 16384)
    got, compiled = _matmul(dev, "triton", a, b, (128, 256, 32))
    assert _staged_ran(compiled)
    splits = _staged_splits(compiled)
    assert splits and all(s is not None and s.compiled_variants for s in splits)
    ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.sqrt(16384), rtol=1e-5)


def _special(shape: tuple[int, int]) -> np.ndarray:
    """Random values with NaNs, infinities, the largest finite (rounds to infinity), a value
    rounding up into the next binade, exact ties both ways, subnormals and signed zeros."""
    x = RNG.standard_normal(shape).astype(np.float32)
    bits = np.array([0x7FC00000, 0x7F800001, 0xFF800000, 0x7F800000, 0x7F7FFFFF, 0x3FFFF000, 0x3F801000,
                     0x3F803000, 0x00001FFF, 0x80000001, 0x80000000, 0x00000000, 0x3F800FFF], np.uint32)
    flat = x.reshape(-1)
    spots = RNG.choice(flat.size, bits.size, replace=False)
    flat[spots] = bits.view(np.float32)
    return x


@pytest.mark.only_backends("triton-interpret", "triton")
@pytest.mark.parametrize("transposed", [False, True])
def test_prologue_rounds_like_the_backend(dev, transposed):
    """The prologue's copy of a 70x45 array holding special values: the bits of nearest-even
    rounding (a NaN stays a NaN), transposed or not, rows padded to 16 bytes."""
    from tilecraft.backends.triton.operand_staging import stage_copy
    x = _special((70, 45))
    out = stage_copy(dev.put(x), Copy(True, transposed, False), None, dev.name != "triton")
    assert tuple(out.shape) == ((45, 70) if transposed else (70, 45))
    assert out.stride() == ((72, 1) if transposed else (48, 1))
    got, want = dev.get(out), _rn_tf32(x.T if transposed else x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    bits = got.view(np.uint32) & (0xFFFFFFFF if dev.name != "triton" else 0xFFFFE000)  # cvt: tf32 in the top bits
    np.testing.assert_array_equal(bits[finite], want.view(np.uint32)[finite])


@pytest.mark.only_backends("triton-interpret", "triton")
def test_staged_special_values_match_unstaged(dev, staged_backend):
    """Special values in both operands: staged and unstaged results agree bit for bit (NaN as NaN)."""
    a, b = _special((40, 96)), _special((96, 48))
    staged, compiled = _matmul(dev, staged_backend[True], a, b, (16, 16, 32))
    plain, _ = _matmul(dev, staged_backend[False], a, b, (16, 16, 32))
    assert _staged_ran(compiled) and np.isnan(plain).any()
    assert np.array_equal(np.isnan(staged), np.isnan(plain))
    np.testing.assert_array_equal(staged[~np.isnan(plain)].view(np.uint32), plain[~np.isnan(plain)].view(np.uint32))


@pytest.mark.only_backends("triton")
def test_automatic_staging_on_the_gpu(dev, staged_backend):
    """2048^3 float32 with the sample's 128x128x32 tiles: 2**22 elements per operand, so the
    plain `triton` backend stages on sm_90+; bit-identical to the unstaged kernel, within tf32
    error of float64 (of the rounded inputs)."""
    import torch
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tf32 staging needs sm_90+")
    a, b = _mats(2048, 2048, 2048)
    staged, compiled = _matmul(dev, "triton", a, b, (128, 128, 32))
    plain, _ = _matmul(dev, staged_backend[False], a, b, (128, 128, 32))
    assert _staged_ran(compiled)
    ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
    np.testing.assert_allclose(staged, ref, atol=1e-4 * np.sqrt(2048), rtol=1e-5)
    np.testing.assert_array_equal(staged.view(np.uint32), plain.view(np.uint32))


@pytest.mark.only_backends("triton")
def test_merged_launches_stage_on_the_gpu(dev):
    """2048x2048x1024 float32 with the sample's 32x32x32 tiles (2M-element operands, too few for
    tiles that narrow): its 4096 blocks merge into wgmma-sized tiles, so the launch stages; twice
    (the second through the launcher chosen per grid, the third through its quick launch for
    that grid), each on a poisoned output within tf32 error of float64 (of the rounded inputs);
    the quick launch declines another grid."""
    import torch
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tf32 staging needs sm_90+")
    a, b = _mats(2048, 2048, 1024)
    ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
    kernel = ct.kernel(matmul_kernel.fn)
    args, stream = (dev.put(a), dev.put(b)), torch.cuda.current_stream()
    for i in range(3):
        c = dev.poison((2048, 2048), "float32")
        if i < 2:
            ct.launch(stream, (64 * 64, 1, 1), kernel, (*args, c, 32, 32, 32))
        else:
            assert kernel.quick(stream, (64 * 64, 1, 1), (*args, c, 32, 32, 32)) is True
        torch.cuda.synchronize()
        np.testing.assert_allclose(dev.get(c), ref, atol=1e-4 * np.sqrt(1024), rtol=1e-5)
    assert kernel.quick(stream, (64, 1, 1), (*args, c, 32, 32, 32)) is False
    assert _staged_ran([v.compiled for v in kernel.variants.values()])
    from tilecraft.backends.triton.operand_staging import StagingPerGrid
    assert [type(entry[0]) for entry in kernel.fast.values()] == [StagingPerGrid]


@pytest.mark.only_backends("triton")
def test_cached_staged_launches(dev, staged_backend, monkeypatch):
    """Repeat launches of one specialization staged automatically (any size, here) take the
    StagedLauncher (prologues through the C launcher, the runtime's quick path): fresh operands at new addresses each time, on the
    current stream and on another one, on poisoned outputs; each result the unstaged kernel's
    bits, within tf32 error of float64."""
    import torch

    from tilecraft.backends.triton import operand_staging
    monkeypatch.setattr(operand_staging, "STAGE_MIN_ELEMENTS", 0)
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tf32 staging needs sm_90+")
    kernel, t, m, n, k = ct.kernel(matmul_kernel.fn), (64, 32, 32), 100, 72, 300  # rows 16-byte aligned
    grid = (ct.cdiv(m, 64) * ct.cdiv(n, 32), 1, 1)
    side = torch.cuda.Stream()
    for round_, stream in enumerate([torch.cuda.current_stream()] * 3 + [side]):
        a, b = _mats(m, n, k)
        c, args = dev.poison((m, n), "float32"), (dev.put(a), dev.put(b))
        torch.cuda.synchronize()
        ct.launch(stream, grid, kernel, (*args, c, *t))  # the side stream is not the current one
        stream.synchronize()
        plain, _ = _matmul(dev, staged_backend[False], a, b, t)
        np.testing.assert_array_equal(dev.get(c).view(np.uint32), plain.view(np.uint32))
        ref = _rn_tf32(a).astype(np.float64) @ _rn_tf32(b).astype(np.float64)
        np.testing.assert_allclose(dev.get(c), ref, atol=1e-5 * np.sqrt(k), rtol=1e-5)
        if round_ == 0:
            assert [type(entry[0]) for entry in kernel.fast.values()] == [operand_staging.StagedLauncher]
            assert kernel.quick is not None


def test_staged_kernel_runs_async_wgmma_on_hopper():
    """Compiled for sm_90 (no GPU needed) at 8192^3 with 128x128x32 tiles: the staged kernel's
    wgmmas overlap (a warp_group_dot_wait with pendings > 0) and B goes from TMA to the MMA as a
    shared-memory view (no local_load); the unstaged kernel copies B through registers."""
    import re

    import torch

    from tilecraft.tools import inspect_kernel
    args = (*(torch.empty(8192, 8192) for _ in range(3)), 128, 128, 32)
    staged, plain = inspect_kernel(matmul_kernel, args, staged=True), inspect_kernel(matmul_kernel, args)
    pendings = lambda info: [int(p) for p in re.findall(r"warp_group_dot_wait.*?pendings = (\d+)",  # noqa: E731
                                                          info.stage("ttgir"))]
    assert max(pendings(staged)) > 0 and "ttg.local_load" not in staged.stage("ttgir")
    assert "staged kernel's" in staged.summary() and "staged variant" in plain.summary()
    assert "ttg.local_load" in plain.stage("ttgir")


def _compiled_for_hopper(m: int, n: int, k: int, t: tuple[int, int, int]):
    """(the matmul sample compiled for sm_90 as a launch of m x k by k x n float32 arrays with tiles
    `t` would compile it, and the arguments as the launch passes them: uninitialized CPU arrays)."""
    import torch

    from tilecraft.tools.inspection import compiled_as_launched
    _, compiled, args = compiled_as_launched(matmul_kernel, (torch.empty(m, k), torch.empty(k, n), torch.empty(m, n), *t))
    return compiled, args


def test_narrow_kernels_stage_where_the_launch_merges_wide(monkeypatch):
    """The sample's 32x32x32 tiles (mma.sync MMAs): at 2048^3 (4M-element operands, below
    NARROW_STAGE_MIN_ELEMENTS) a launch stages where its grid merges into tiles of 64 rows or
    more (the staged kernel's automatic merge: one wave of 4 x 8 on 132 SMs), not where
    it does not merge (a grid of 64 blocks) nor in a programmatic dependent launch; 1024^3 (1M)
    never stages and 4096^3 (16M) stages on any grid. Such launches get a launcher that chooses
    per grid."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.triton import operand_staging
    from tilecraft.backends.triton.split_launch import assumed_sms
    monkeypatch.setattr(operand_staging, "_on_gpu", lambda arrays: True)  # CPU arrays stand for CUDA ones
    with assumed_sms(132):
        kernel, args = _compiled_for_hopper(2048, 2048, 2048, (32, 32, 32))
        assert isinstance(kernel, operand_staging.StagedKernel)
        assert kernel.stages(args, False, (4096, 1, 1)) and not kernel.stages(args, True, (4096, 1, 1))
        assert not kernel.stages(args, False, (64, 1, 1))
        merging = wrapped_as(kernel.staged_kernel(args), BlockMergeKernel)
        merge = merging.count((4096, 1, 1), kernel.staged_args(args), False)
        assert (merge.rows, merge.cols) == (4, 8)
        assert isinstance(kernel.specialize(args), operand_staging.StagingPerGrid)
        small, small_args = _compiled_for_hopper(1024, 1024, 1024, (32, 32, 32))
        assert not small.stages(small_args, False, (1024, 1, 1))
        large, large_args = _compiled_for_hopper(4096, 4096, 4096, (32, 32, 32))
        assert large.stages(large_args, False, (16384, 1, 1)) and large.stages(large_args, False, (64, 1, 1))


def test_staging_per_grid_launcher():
    """`StagingPerGrid` launches each grid as `stages` chose for it once: staged grids through the
    staged fast launcher (made once), the others through main (the full way first, then its
    specialized launcher, a programmatic dependent launch always the full way)."""
    from types import SimpleNamespace

    from tilecraft.backends.triton.operand_staging import StagingPerGrid
    ran, asked = [], []

    def stages(args, dependent, grid):
        asked.append(grid)
        return grid[0] > 100

    fast = SimpleNamespace(launch=lambda grid, args, stream: ran.append(("main fast", grid)))
    main = SimpleNamespace(launch=lambda grid, args, stream, dependent=False: ran.append(("main", grid, dependent)),
                           specialize=lambda args: fast)
    staged = SimpleNamespace(launch=lambda grid, args, stream: ran.append(("staged", grid)))
    made = []
    owner = SimpleNamespace(main=main, stages=stages, staged_launcher=lambda args: made.append(args) or staged)
    launcher = StagingPerGrid(owner, ("a",))
    for grid in [(4096, 1, 1), (64, 1, 1), (4096, 1, 1), (64, 1, 1)]:
        launcher.launch(grid, ("a",), None)
    launcher.launch((4096, 1, 1), ("a",), None, dependent=True)
    assert ran == [("staged", (4096, 1, 1)), ("main", (64, 1, 1), False), ("staged", (4096, 1, 1)),
                   ("main fast", (64, 1, 1)), ("main", (4096, 1, 1), True)]
    assert asked == [(4096, 1, 1), (64, 1, 1)] and made == [("a",)]


def test_staging_per_grid_fused_launch():
    """Made after a launch of these very arguments (`StagedKernel.specialize` passes its grid and
    whether it staged), `StagingPerGrid` has a fused launch for that grid only: the staged fast
    launcher's where it staged (restricted to the grid), main's specialized launcher's where it
    did not; none after a launch of other arguments."""
    from types import SimpleNamespace

    from tilecraft.backends.base import FusedLaunch
    from tilecraft.backends.base import LastLaunch
    from tilecraft.backends.triton.operand_staging import StagedKernel, StagingPerGrid
    staged_fused = FusedLaunch("_staged((gx, gy, gz))", {"_staged": lambda grid: grid})
    main_fused = FusedLaunch("_main()", {}, grid=(64, 1, 1))
    fast = SimpleNamespace(fused_launch=lambda: main_fused)
    main = SimpleNamespace(launch=lambda *a, **k: None, specialize=lambda args: fast)
    staged = SimpleNamespace(fused_launch=lambda: staged_fused)
    owner = SimpleNamespace(main=main, staged_launcher=lambda args: staged, stages=lambda args, dependent, grid: True)
    fused = StagingPerGrid(owner, ("a",), ((4096, 1, 1), True)).fused_launch()
    assert fused.grid == (4096, 1, 1)
    run = lambda grid: eval(fused.expr, dict(fused.env, gx=grid[0], gy=grid[1], gz=grid[2]))  # noqa: E731, S307
    assert run((4096, 1, 1)) == (4096, 1, 1) and run((64, 1, 1)) is False
    assert StagingPerGrid(owner, ("a",), ((64, 1, 1), False)).fused_launch() is main_fused
    assert StagingPerGrid(owner, ("a",), ((32, 1, 1), False)).fused_launch() is None  # main's is for another grid
    assert StagingPerGrid(owner, ("a",)).fused_launch() is None

    kernel = StagedKernel.__new__(StagedKernel)  # only launch's record and specialize's reading of it
    kernel.main, kernel._last_run = main, LastLaunch()
    kernel.stages = lambda args, dependent, grid: not dependent and grid[0] > 100
    kernel._by_grid = lambda args: True
    args, other = ("a", "b"), ("c", "d")
    kernel.staged_kernel = lambda args: SimpleNamespace(launch=lambda *a: None)
    kernel.staged = SimpleNamespace(params={})
    kernel.staged_launcher = lambda args: staged
    kernel.launch((4096, 1, 1), args)
    assert kernel.specialize(args).fused_launch().grid == (4096, 1, 1)
    kernel.launch((4096, 1, 1), args)
    assert kernel.specialize(other).fused_launch() is None
    kernel.launch((64, 1, 1), args)
    assert kernel.specialize(args).fused_launch() is main_fused
    kernel.launch((64, 1, 1), args, dependent=True)
    assert kernel.specialize(args).fused_launch() is None
