"""Block merging (tilecraft/passes/block_merge.py, backends/tile_splitting.py `BlockMergeKernel`):
which kernels qualify, the merged variant's IR, how a launch picks its factor, and the results of
kernels merged F at a time on every backend (a registered backend `<name>-merge<F>`): float64
references on poisoned outputs, odd sizes, programs whose blocks line up and programs whose
blocks do not (run one by one), the same values as the unmerged kernel, bit-identical reruns
through the fast path. On the GPU also the automatic merge."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.interpreter import InterpretedKernel
from tilecraft.backends.tile_splitting import (AUTO_SHAPES, BlockMergeKernel, GridVariantLauncher, MergeFinder,
                                              auto_merge, auto_shapes)
from tilecraft.ir import ops, verify
from tilecraft.library.matmul import matmul_kernel, persistent_matmul_kernel
from tilecraft.passes.block_merge import Merge, StoredTiles, block_merges
from conftest import fast_launchers, kernel_ir, run_matmul

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(11)
ZERO = ct.PaddingMode.ZERO
_F32 = np.float32


def _mats(m: int, n: int, k: int, dtype=_F32):
    return RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)


def _product(A, B, row, col, tm, tn, tk):
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        acc = ct.mma(ct.load(A, index=(row, k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, col), shape=(tk, tn), padding_mode=ZERO), acc)
    return acc


@ct.kernel
def row_major(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Tiles in row-major order: consecutive blocks are consecutive columns, so merged blocks
    never line up (every program runs its blocks one by one)."""
    n_cols = ct.cdiv(C.shape[1], tn)
    ct.store(C, index=(ct.bid(0) // n_cols, ct.bid(0) % n_cols),
             tile=_product(A, B, ct.bid(0) // n_cols, ct.bid(0) % n_cols, tm, tn, tk))


@ct.kernel
def column_major_scaled(A, B, C, scale, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Tiles in column-major order (consecutive blocks are consecutive rows: every program whose
    first row is a multiple of F lines up), each row scaled by `scale` (a load on the rows)."""
    n_rows = ct.cdiv(C.shape[0], tm)
    row, col = ct.bid(0) % n_rows, ct.bid(0) // n_rows
    s = ct.reshape(ct.load(scale, index=(row,), shape=(tm,), padding_mode=ZERO), (tm, 1))
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk) * s)


@ct.kernel
def direct_rows(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """bid(0) itself the row index, inside the loop too: always lined up (no check)."""
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, ct.bid(1)), shape=(tk, tn), padding_mode=ZERO), acc)
    ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc)


@ct.kernel
def shared_rows(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """The rows indexed by a value all blocks share (block b computes column tile b of row tile 0)."""
    ct.store(C, index=(0, ct.bid(0)), tile=_product(A, B, 0, ct.bid(0), tm, tn, tk))


@ct.kernel
def row_also_added(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """bid(0) the row index and also added to the tile in the loop: read as a number, which the
    merged blocks would have to share."""
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(tm, tk), padding_mode=ZERO),
                     ct.load(B, index=(k, 0), shape=(tk, tn), padding_mode=ZERO), acc) + ct.bid(0)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def bid_as_column(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """bid(0) the column index: the merged blocks would have to share it, which they never do."""
    ct.store(C, index=(ct.bid(1), ct.bid(0)), tile=_product(A, B, ct.bid(1), ct.bid(0), tm, tn, tk))


# ---- which kernels qualify ------------------------------------------------------------------------
WIDE_32 = [(1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4), (2, 8), (4, 1), (4, 2), (4, 4), (4, 8)]
"""The merge shapes of 32x32 tiles: at most 128 rows and 256 columns."""


def test_qualifying_kernels_and_their_shapes():
    """Merged tiles of at most 128 x 256 of user tiles of at most 32 x 32, wider than the user's
    only where the columns are indexed by values computed from bid(0), not bid(0) the rows."""
    a, b = _mats(100, 70, 45)
    c = np.zeros((100, 70), _F32)
    for kernel in (matmul_kernel, row_major):
        merges = block_merges(kernel_ir(kernel, a, b, c, 32, 32, 32))
        assert merges is not None and merges.widens and merges.shapes() == WIDE_32
    merges = block_merges(kernel_ir(direct_rows, a, b, c, 32, 32, 32))
    assert not merges.widens and merges.shapes() == [(2, 1), (4, 1)]  # bid(0) the row, bid(1) the column
    assert not merges.pinned  # it reads bid(1), which a launch's evaluation along axis 0 does not cover
    assert block_merges(kernel_ir(matmul_kernel, a, b, c, 64, 32, 32)).shapes() == []  # 2048 elements
    assert (8, 1) in block_merges(kernel_ir(matmul_kernel, a, b, c, 16, 32, 32)).shapes()
    assert block_merges(kernel_ir(column_major_scaled, a, b, c, np.ones(100, _F32), 32, 32, 32)) is not None


@pytest.mark.parametrize("kernel", [persistent_matmul_kernel, shared_rows, row_also_added, bid_as_column],
                         ids=lambda k: k.fn.__name__)
def test_kernels_that_do_not_qualify(kernel):
    a, b = _mats(64, 64, 32)
    assert block_merges(kernel_ir(kernel, a, b, np.zeros((64, 64), _F32), 32, 32, 32)) is None


def test_merged_variant_ir():
    """The variant verifies, keeps value ids unique, reads 128-row tiles of A and C where the
    blocks line up and 32-row ones, without tensor descriptors, where they run one by one, and
    leaves its source unchanged."""
    a, b = _mats(1000, 500, 700)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((1000, 500), _F32), 32, 32, 32)
    before = [op.name for op in fn.walk()]
    merges = block_merges(fn)
    assert len(merges.rows) == len(merges.cols) == 1 and not merges.uniform  # the sample's bid_m and bid_n
    variant = verify(merges.merge(Merge(4)))
    ids = [p.id for p in variant.params] + [r.id for op in variant.walk() for r in op.results]
    assert len(ids) == len(set(ids))
    branch = next(op for op in variant.body.ops if isinstance(op, ops.If))
    loads = lambda block: sorted(op.shape for op in _walk(block) if isinstance(op, ops.Load))  # noqa: E731
    assert loads(branch.then) == [(32, 32), (128, 32)]
    assert loads(branch.orelse) == [(32, 32), (32, 32)]
    hints = lambda block: {op.allow_tma for op in _walk(block) if isinstance(op, (ops.Load, ops.Store))}  # noqa: E731
    assert hints(branch.then) == {None} and hints(branch.orelse) == {False}  # one by one: no descriptors
    assert [op.name for op in fn.walk()] == before
    with pytest.raises(ValueError):
        merges.merge(Merge(3))  # 96 rows: not a shape merges take
    with pytest.raises(ValueError):
        Merge(4, 2, 6)  # the stride must be a multiple of the rows


def _walk(block):
    for op in block.ops:
        yield op
        for inner in op.blocks:
            yield from _walk(inner)


def test_nothing_to_check_when_bid_is_the_row():
    a, b = _mats(64, 64, 32)
    variant = verify(block_merges(kernel_ir(direct_rows, a, b, np.zeros((64, 64), _F32), 16, 16, 16)).merge(Merge(4)))
    assert not any(isinstance(op, ops.If) for op in variant.walk())
    assert sorted(op.shape for op in variant.walk() if isinstance(op, ops.Load)) == [(16, 16), (64, 16)]


def test_automatic_shapes():
    """Automatic merges are of tf32 kernels (fp32 arrays), at least 4 blocks, and leave one wave
    of blocks (TC3's 512 blocks merge 2 x 2, 2048 blocks 4 x 4, TC2's 256 do not) or, 4 x 8
    (else 4 x 4, else 4 x 2; ranked by how full they leave the last wave), two or more (each 0.95
    full), or else 0.7 to 0.95 of one, or else
    4 x 1 on two waves or more."""
    a, b = _mats(100, 70, 45)
    c = np.zeros((100, 70), _F32)
    assert auto_shapes(block_merges(kernel_ir(matmul_kernel, a, b, c, 32, 32, 32))) == list(AUTO_SHAPES)
    assert auto_shapes(block_merges(kernel_ir(matmul_kernel, a, b, c, 16, 32, 32))) == list(AUTO_SHAPES)
    assert auto_shapes(block_merges(kernel_ir(matmul_kernel, a, b, c, 32, 64, 32))) == []  # 2048 elements
    h, g = _mats(100, 70, 45, np.float16)
    assert auto_shapes(block_merges(kernel_ir(matmul_kernel, h, g, c, 32, 32, 32))) == []  # fp16
    col = [(4, 1)]
    assert auto_merge((512, 1, 1), 132, col) == col
    assert auto_merge((528, 1, 1), 132, col) == col  # 132 merged blocks: one full wave
    assert auto_merge((532, 1, 1), 132, col) == []  # 133: a second wave
    assert auto_merge((256, 1, 1), 132, col) == []  # 64 blocks would leave SMs idle
    assert auto_merge((256, 1, 1), 132, [(2, 1), (4, 1)]) == [(2, 1)]  # a shape that keeps them busy
    assert auto_merge((1024, 1, 1), 132, col) == col  # 256 merged blocks, two waves: the last resort
    assert auto_merge((1000, 1, 1), 132, col) == []  # 250: not quite two waves
    assert auto_merge((32, 16, 1), 132, col) == col  # every grid axis counts
    assert auto_merge((512, 1, 1), 132, []) == []
    assert auto_merge((512, 1, 1), 132, AUTO_SHAPES) == [(2, 2), (4, 1)]
    assert auto_merge((2048, 1, 1), 132, AUTO_SHAPES) == [(4, 4), (4, 2), (4, 1)]
    assert auto_merge((1024, 1, 1), 132, AUTO_SHAPES) == [(4, 2), (2, 4), (4, 1)]
    wide = [(4, 8), (4, 4), (4, 2), (4, 1)]  # several waves: the first that lines up, 4 x 1 last
    assert auto_merge((4096, 1, 1), 132, AUTO_SHAPES) == wide  # 2048^3: one wave, else two (1.94)
    assert auto_merge((16384, 1, 1), 132, AUTO_SHAPES) == wide  # 4096^3: several waves of 128x256
    assert auto_merge((8192, 1, 1), 132, AUTO_SHAPES) == wide  # 256 blocks: two waves 0.97 full
    assert auto_merge((4000, 1, 1), 132, AUTO_SHAPES) == [(4, 2), (4, 8), (4, 1)]  # 4 x 4 would leave 1.89
    assert auto_merge((1536, 1, 1), 132, AUTO_SHAPES) == [(4, 4), (4, 1)]  # 1024x1536: 96 blocks, 0.73 of a wave
    assert auto_merge((768, 1, 1), 132, AUTO_SHAPES) == [(4, 2), (2, 4)]
    assert auto_merge((16384, 1, 1), 132, [(4, 1)]) == [(4, 1)]
    # 3000^2: 4 x 8 would fill 2.1 waves, 4 x 4 4.2, which pays more than its narrower tiles cost
    assert auto_merge((94 * 94, 1, 1), 132, AUTO_SHAPES) == [(4, 4), (4, 2), (4, 8), (4, 1)]


def test_automatic_shapes_count_the_programs_found():
    """Launches rank merges by the programs they run as found: 4000x1000 merged 4 x 8 in groups
    runs 128 programs (its last group's 5 row tiles as 2 merged ones), one wave on 132 SMs,
    where 4000 blocks over 32 would be 125, too few to count as one; a shape that does not line
    up is not ranked."""
    arrays, finder = _sample(4000, 1000)
    grid = (4000, 1, 1)
    assert finder.find((4, 8), grid, arrays).programs(grid[0]) == 128
    assert auto_merge(grid, 132, AUTO_SHAPES)[0] == (4, 2)
    assert [(m.rows, m.cols) for m in finder.ranked(grid, arrays, AUTO_SHAPES, 132)][0] == (4, 8)
    assert auto_merge(grid, 132, [(4, 8), (4, 2)], programs=lambda s: None if s == (4, 8) else 500) == [(4, 2)]


def test_specialize_starts_from_the_launch_it_follows():
    """`GridVariantKernel.specialize` gives its launcher the variant's launcher and a quick-path
    launch for the grid of the kernel's last launch only where that launch ran these very
    arguments on a variant: not after a launch of other arguments or of the kernel as compiled,
    and once (a second specialize starts from nothing)."""
    from types import SimpleNamespace
    made = []
    specialized = SimpleNamespace(fused_launch=lambda grid: made.append(("fused", grid)) or "fused")
    variant = SimpleNamespace(launch=lambda grid, args, stream: made.append(("variant", grid)),
                              specialize=lambda args: specialized)
    main = SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: "main's launcher")
    kernel = BlockMergeKernel(main, lambda merge: f"merged {merge.rows}", lambda fn, merge: made.append(fn) or variant,
                              lambda grid, args: Merge(4) if grid[0] % 4 == 0 else Merge(3))
    args, other = [object(), object()], [object(), object()]
    kernel.launch((8, 2, 1), args)
    launcher = kernel.specialize(args)
    assert launcher.fused_launch() == "fused"
    assert made == ["merged 4", ("variant", (2, 2, 1)), ("fused", ((8, 2, 1), (2, 2, 1)))]
    assert kernel.specialize(args).fused_launch() is None  # consumed
    kernel.launch((8, 2, 1), args)
    assert kernel.specialize(other).fused_launch() is None  # other arguments
    kernel.launch((8, 2, 1), args)
    kernel.launch((10, 1, 1), args)  # 3 does not divide 10: the kernel as compiled
    assert made[-1] == "main" and kernel.specialize(args).fused_launch() is None  # main's launcher has none


def test_specialize_after_a_launch_of_the_kernel_as_compiled():
    """After a launch that ran the kernel as compiled (no variant for its grid), the launcher
    starts with that kernel's specialized launcher, which later launches of other unvaried grids
    take too, and has its fused launch for that grid only: made for it where the launcher's
    `fused_launch` takes a grid, else restricted to it (`fused_on_grid`)."""
    from types import SimpleNamespace

    from tilecraft.backends.base import FusedLaunch
    made = []

    def direct_fused(grid=None):
        return FusedLaunch("_go()", {"_go": lambda: True}, grid=None if grid is None else grid[0])

    launched = SimpleNamespace(fused_launch=direct_fused, launch=lambda grid, args, stream: made.append(("fast", grid)))
    main = SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: launched)
    kernel = BlockMergeKernel(main, lambda merge: "merged", lambda fn, merge: None,
                              lambda grid, args: Merge(4) if grid[0] % 4 == 0 else None)
    args = [object(), object()]
    kernel.launch((10, 1, 1), args)
    launcher = kernel.specialize(args)
    fused = launcher.fused_launch()
    assert made == ["main"] and fused.grid == (10, 1, 1)
    launcher.launch((7, 1, 1), args)  # another grid the kernel as compiled runs: its launcher, made once
    assert made[-1] == ("fast", (7, 1, 1))

    any_grid = FusedLaunch("_go(gx)", {"_go": lambda gx: True})  # no grid parameter, no native code
    launched.fused_launch = lambda: any_grid
    kernel.launch((10, 1, 1), args)
    fused = kernel.specialize(args).fused_launch()
    assert fused.grid == (10, 1, 1) and fused.expr == "(gx, gy, gz) == (10, 1, 1) and (_go(gx))"
    kernel.launch((10, 1, 1), args, dependent=True)  # dependent launches never specialize
    assert kernel.specialize(args).fused_launch() is None


# ---- results --------------------------------------------------------------------------------------
@pytest.fixture
def merge_backend(backend_variant):
    """A function making (and registering, for this test) `backend` with its blocks merged as a
    shape (rows, cols) says (a count F: F x 1)."""
    def make(shape: int | tuple[int, int]) -> str:
        rows, cols = (shape, 1) if isinstance(shape, int) else shape
        return backend_variant(f"merge{rows}x{cols}", block_merge=shape, tile_split=False, stream_k=False)
    return make


def _merged(kernel, name: str, shape: int | tuple[int, int]) -> list[Merge] | None:
    """The merges every variant for backend `name` launched, where each launched only merges of
    `shape` (a count F: F x 1); else None."""
    rows, cols = (shape, 1) if isinstance(shape, int) else shape
    compiled = [wrapped_as(v.compiled, BlockMergeKernel) for key, v in kernel.variants.items() if key.backend == name]
    merges = [m for c in compiled if c is not None for m in c._variants]
    ok = compiled and None not in compiled and merges and all((m.rows, m.cols) == (rows, cols) for m in merges)
    return merges if ok else None


@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("m,n,k", [(100, 70, 45), (170, 100, 70)])
def test_merged_matmul_sample(dev, merge_backend, count, m, n, k):
    """fp32 (tf32 MMAs) with 32x32x32 tiles: edge tiles on both axes and a partial last K step.
    At 170x100 the sample's groups are 6 row tiles tall, so with F = 4 some programs line up and
    the others run their blocks one by one. Close to float64, equal to the unmerged kernel up to
    summation order, the same bits on a rerun (through the fast path's launcher)."""
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)  # its own variants
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1)
    if grid[0] % count:
        pytest.skip("the factor does not divide the grid")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    unmerged = run_matmul(dev, dev.name, grid, kernel, a, b, (32, 32, 32))
    name = merge_backend(count)
    first, again = (run_matmul(dev, name, grid, kernel, a, b, (32, 32, 32)) for _ in range(2))
    np.testing.assert_allclose(first, ref, atol=2e-3 * np.sqrt(k), rtol=2e-3)  # tf32
    np.testing.assert_allclose(first, unmerged, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert _merged(kernel, name, count)
    assert [type(f) for f in fast_launchers(kernel, name)] == [GridVariantLauncher]


@pytest.mark.parametrize("kernel", [row_major, column_major_scaled], ids=lambda k: k.fn.__name__)
def test_merged_orders(dev, merge_backend, kernel):
    """fp16 in, fp32 out, 16x32x16 tiles merged 4 at a time: in row-major order no program lines
    up, in column-major order those whose first row is a multiple of 4 do (5 row tiles: the
    others straddle two columns)."""
    m, n, k = 75, 120, 40
    a, b = _mats(m, n, k, np.float16)
    scale = RNG.standard_normal(m).astype(_F32)
    extra = (dev.put(scale),) if kernel is column_major_scaled else ()
    grid = (ct.cdiv(m, 16) * ct.cdiv(n, 32), 1, 1)
    got = run_matmul(dev, merge_backend(4), grid, kernel, a, b, (*extra, 16, 32, 16))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if extra:
        ref = ref * scale[:, None]
    np.testing.assert_allclose(got, ref, atol=1e-4 * k, rtol=1e-5)
    assert _merged(kernel, f"{dev.name}-merge4x1", 4)


def test_merged_2d_grid(dev, merge_backend):
    """bid(0) the row and bid(1) the column on a 2-D grid, merged along axis 0."""
    m, n, k = 70, 50, 33
    a, b = _mats(m, n, k, np.float16)
    grid = (ct.cdiv(m, 16) + 1, ct.cdiv(n, 16), 1)  # one more row of blocks than tiles: past the end
    got = run_matmul(dev, merge_backend(2), grid, direct_rows, a, b, (16, 16, 16))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), atol=1e-4 * k, rtol=1e-5)
    assert _merged(direct_rows, f"{dev.name}-merge2x1", 2)


@pytest.mark.parametrize("shape,m,n,k,want", [((2, 2), 1000, 100, 40, Merge(2, 2, 8, False, 2, 8)),
                                               ((1, 2), 500, 100, 40, Merge(1, 2, 8, False)),
                                               ((4, 2), 380, 100, 33,
                                                Merge(4, 2, 8, False, period=32, groups=1, last=4)),
                                               ((2, 2), 300, 64, 40,
                                                Merge(2, 2, 8, False, period=16, groups=1, last=2)),
                                               ((4, 1), 270, 100, 40, Merge(4, checked=False, head=8))])
def test_merged_rectangles(dev, merge_backend, shape, m, n, k, want):
    """The sample, fp32 (tf32 MMAs) with 32x32x32 tiles, its blocks merged in rectangles of rows
    x columns: its groups of 8 row tiles put a block's right-hand neighbour 8 blocks later, which
    the launch finds (stride 8). At 1000x100 (32 x 4 tiles, the last row tile cut short) every
    program lines up, so the kernel runs unchecked, and they take their rectangles in two groups
    of 8 merged row tiles (`Merge.band`); at 500x100 (unchecked too) one merged row tile is a
    band, too short to regroup; at 380x100 the last group is 4 row tiles tall, so spans of the
    grid's order do not line up, and the spans restart at each group (`Merge.period`), as at
    300x64 (10 x 2 tiles) merged 2 x 2, its first 16 blocks 4 programs, the last group's 4
    blocks 2. With a tail (`Merge.head`): 270x100 (9 x 4 tiles) merged 4 x 1, the last row of
    tiles on its own. Close to float64, equal
    to the unmerged kernel up to summation order, the same bits on a rerun, and (the
    interpreter) the same bits as the merge checked in the kernel."""
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    unmerged = run_matmul(dev, dev.name, grid, kernel, a, b, (32, 32, 32))
    name = merge_backend(shape)
    first, again = (run_matmul(dev, name, grid, kernel, a, b, (32, 32, 32)) for _ in range(2))
    np.testing.assert_allclose(first, ref, atol=2e-3 * np.sqrt(k), rtol=2e-3)
    np.testing.assert_allclose(first, unmerged, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert _merged(kernel, name, shape) == [want]
    if dev.name == "interpreter" and not want.checked and not want.period:
        variant = verify(block_merges(kernel_ir(matmul_kernel, a, b, first, 32, 32, 32)).merge(
            replace(want, checked=True)))
        out = np.full((m, n), np.nan, _F32)
        InterpretedKernel(variant).launch((want.programs(grid[0]), 1, 1), (a, b, out))
        np.testing.assert_array_equal(out.view(np.uint32), first.view(np.uint32))


@pytest.mark.parametrize("shape,m,n", [((4, 4), 438, 200), ((2, 4), 300, 290), ((4, 8), 333, 450)])
def test_merged_in_groups(dev, merge_backend, shape, m, n):
    """The sample, fp32 with 32x32x32 tiles, merged where its groups' columns are cut short (7,
    10 and 15 column tiles) and its last group of rows too (6, 2 and 3 row tiles; at 438 rows
    two merged row tiles, the sample's rows there turned by 2): every program runs merged, tiles
    past the last row and column dropped (`Merge.period`). Close to float64, equal to the
    unmerged kernel up to summation order, the same bits on a rerun."""
    k = 40
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1)
    unmerged = run_matmul(dev, dev.name, grid, kernel, a, b, (32, 32, 32))
    name = merge_backend(shape)
    first, again = (run_matmul(dev, name, grid, kernel, a, b, (32, 32, 32)) for _ in range(2))
    np.testing.assert_allclose(first, a.astype(np.float64) @ b, atol=2e-3 * np.sqrt(k), rtol=2e-3)
    np.testing.assert_allclose(first, unmerged, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    merges = _merged(kernel, name, shape)
    assert merges and all(g.period and not g.head for g in merges)


@pytest.mark.only_backends("triton", "triton-interpret")
def test_merged_staged_operands(dev, backend_variant):
    """The staged kernel (tf32 operands rounded into scratch copies, B transposed: its loads of
    B^T in order (1, 0)) merged 2 x 2, as large tf32 launches run on the GPU."""
    m, n, k = 500, 100, 40
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)
    name = backend_variant("merge-staged", stage_operands=True, block_merge=(2, 2), tile_split=False, stream_k=False)
    got = run_matmul(dev, name, (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1), kernel, a, b, (32, 32, 32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), atol=2e-3 * np.sqrt(k), rtol=2e-3)
    staged = [c for key, v in kernel.variants.items() if key.backend == name for c in v.compiled.compiled_variants]
    assert [list(wrapped_as(c, BlockMergeKernel)._variants) for c in staged] == [[Merge(2, 2, 8, False, 2, 8)]]


@pytest.mark.parametrize("kernel,stride", [(column_major_scaled, 4), (row_major, None)],
                         ids=lambda k: getattr(getattr(k, "fn", None), "__name__", str(k)))
def test_merge_finder(kernel, stride):
    """`MergeFinder` reads the user's order from its index arithmetic, on NumPy arrays and torch
    tensors alike: in column-major order over 4 row tiles a block's right-hand neighbour is 4
    blocks later; in row-major order no rows line up, so it finds none."""
    torch = pytest.importorskip("torch")
    m, n, k = 128, 96, 32
    a, b = _mats(m, n, k)
    c, scale = np.zeros((m, n), _F32), np.ones(m, _F32)
    extra = (scale,) if kernel is column_major_scaled else ()
    finder = MergeFinder(block_merges(kernel_ir(kernel, a, b, c, *extra, 32, 32, 32)))
    grid = (4 * 3, 1, 1)
    want = None if stride is None else Merge(2, 3, stride, checked=False)  # lined up everywhere: unchecked
    for args in ((a, b, c, *extra), tuple(torch.from_numpy(x) for x in (a, b, c, *extra))):
        assert finder.find((2, 3), grid, args) == want
    assert finder.find((2, 1), grid, (a, b, c, *extra)) == (Merge(2, checked=False) if stride else None)
    forced = finder.find((2, 1), grid, (a, b, c, *extra), everywhere=False)
    assert forced == (Merge(2, checked=False) if stride else Merge(2))  # forced: one column merges, checked if needed
    assert finder.find((4, 1), (6, 1, 1), (a, b, c, *extra)) is None  # 4 does not divide the grid


@ct.kernel
def column_major_by_argument(A, B, C, n_rows, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    """Tiles in column-major order over `n_rows` row tiles, a scalar argument."""
    row, col = ct.bid(0) % n_rows, ct.bid(0) // n_rows
    ct.store(C, index=(row, col), tile=_product(A, B, row, col, tm, tn, tk))


def test_unchecked_merges():
    """Where the launch found every program lined up, the merged kernel has one copy of the
    prologue and no branch, and its results are right. A kernel whose prologue reads a scalar
    argument (which may differ between launches of one variant) keeps the check."""
    m, n, k = 128, 128, 40
    a, b = _mats(m, n, k)
    c = np.zeros((m, n), _F32)
    merges = block_merges(kernel_ir(column_major_scaled, a, b, c, np.ones(m, _F32), 32, 32, 32))
    merge = MergeFinder(merges).find((2, 2), (16, 1, 1), (a, b, c, np.ones(m, _F32)))
    assert merges.pinned and merge == Merge(2, 2, 4, checked=False)
    variant = verify(merges.merge(merge))
    assert not any(isinstance(op, (ops.If, ops.For)) and op is not _k_loop(variant) for op in variant.body.ops)
    scale = RNG.standard_normal(m).astype(_F32)
    out = np.full((m, n), np.nan, _F32)
    InterpretedKernel(variant).launch((4, 1, 1), (a, b, out, scale))
    np.testing.assert_allclose(out, (a.astype(np.float64) @ b) * scale[:, None], atol=1e-4 * k, rtol=1e-5)
    by_argument = block_merges(kernel_ir(column_major_by_argument, a, b, c, 4, 32, 32, 32))
    assert not by_argument.pinned
    assert MergeFinder(by_argument).find((2, 2), (16, 1, 1), (a, b, c, 4)) == Merge(2, 2, 4)  # checked
    with pytest.raises(ValueError):
        by_argument.merge(Merge(2, 2, 4, checked=False))


def _k_loop(fn):
    return next(op for op in fn.body.ops if isinstance(op, ops.For))


def test_merges_partition_the_grid():
    """Every merge's programs run each of the user's blocks once, in the grid's order or in groups."""
    grouped = (Merge(4, 4, 8, band=3, group=4), Merge(2, 2, 8, band=2, group=8), Merge(2, 3, 4, band=2, group=6))
    for merge in (Merge(4), Merge(2, 2, 8), Merge(4, 4, 8), Merge(1, 4, 8), Merge(2, 3, 4), Merge(4, 2, 4), *grouped):
        grid = merge.span * 3 if not merge.band else merge.blocks * merge.band * merge.group * 2
        blocks = [merge.block(merge.first(p), i, j) for p in range(grid // merge.blocks)
                  for i in range(merge.rows) for j in range(merge.cols)]
        assert sorted(blocks) == list(range(grid)), merge
    for merge, grid in ((Merge(2, 2, 8, head=4), 20), (Merge(4, 4, 8, band=2, group=4, head=16), 16 * 16 + 37)):
        programs = merge.programs(grid)
        assert merge.user_blocks(programs) == grid
        blocks = [merge.block(merge.first(p), i, j) for p in range(merge.head)
                  for i in range(merge.rows) for j in range(merge.cols)]
        blocks += [merge.alone(p) for p in range(merge.head, programs)]  # on their own
        assert sorted(blocks) == list(range(grid)), merge
    assert Merge(2, 2, 8, head=4).programs(15) is None  # shorter than the head


def _sample(m: int, n: int):
    """The sample's arrays at m x n (no data) and its `MergeFinder` (32x32x32 tiles)."""
    arrays = (np.empty((m, 64), _F32), np.empty((64, n), _F32), np.empty((m, n), _F32))
    return arrays, MergeFinder(block_merges(kernel_ir(matmul_kernel, *arrays, 32, 32, 32)))


def test_merges_with_a_tail():
    """Where the grid's last group of row tiles is cut short (4000 rows: 125 row tiles, 15
    groups of 8 and one of 5), its blocks do not line up. It runs merged, its tiles reaching past
    the last row tile (`Merge.period`); where C has rows there (4100), the merge runs the 15
    groups' blocks merged (a head of 240 programs of 4 x 4, in groups of 6 merged row tiles) and
    each of the last 160 blocks on its own, 400 programs in all. A tail of more than a quarter
    of the grid (350 rows: 11 row tiles, 3 of them past the group, 32 columns) runs in groups."""
    arrays, finder = _sample(4000, 1000)
    merge = finder.find((4, 4), (4000, 1, 1), arrays)
    assert merge == Merge(4, 4, 8, checked=False, period=256, groups=15, last=5) and merge.programs(4000) == 256
    taller = (*arrays[:2], np.empty((4100, 1000), _F32))
    merge = finder.find((4, 4), (4000, 1, 1), taller)
    assert merge == Merge(4, 4, 8, checked=False, band=8, group=6, head=240) and merge.programs(4000) == 400
    arrays, finder = _sample(350, 1000)
    assert finder.find((2, 2), (352, 1, 1), arrays) == Merge(2, 2, 8, False, period=256, groups=1, last=3, shift=2)


def test_merges_in_groups():
    """Columns cut short in every group of the sample's order (3000 columns: 94 column tiles,
    not a multiple of 4 or 8): the spans restart at each group of 8 row tiles (752 blocks), the
    last of a group's 24 spans of 4 columns holding 2, its merged tiles reaching past the last
    column; the grid's last group is 6 row tiles tall, its rows turned by the sample's
    `bid % group_size_m` (block 8272 is row tile 92: shift 2). The launch checks that the
    merged tiles past the grid lie past C's end: with C wider than the product, none merge."""
    arrays, finder = _sample(3000, 3000)
    merge = finder.find((4, 4), (94 * 94, 1, 1), arrays)
    assert merge == Merge(4, 4, 8, checked=False, period=752, groups=11, last=6, shift=2)
    assert merge.programs(94 * 94) == 11 * 48 + 24 * 2 and merge.programs(94 * 94 - 1) is None
    assert finder.find((4, 8), (94 * 94, 1, 1), arrays).programs(94 * 94) == 12 * 24
    wider = (*arrays[:2], np.empty((3000, 3100), _F32))
    assert finder.find((4, 4), (94 * 94, 1, 1), wider) is None


def test_merges_in_groups_with_a_head():
    """Where the last group's merged tiles would reach rows of C that the kernel leaves alone
    (C taller than A: 500 rows against 438, the last group 6 row tiles), its blocks run on
    their own after the merged groups (a head): C as the unmerged kernel leaves it (A @ B, then
    zeros to the end of the last row tile, then C's rows as they were), on the interpreter."""
    a, b = _mats(438, 200, 40)
    out, unmerged = (np.full((500, 200), np.nan, _F32) for _ in range(2))
    merges = block_merges(kernel_ir(matmul_kernel, a, b, out, 32, 32, 32))
    grid = 14 * 7
    merge = MergeFinder(merges).find((4, 4), (grid, 1, 1), (a, b, out))
    assert merge == Merge(4, 4, 8, checked=False, head=4, period=56, groups=1, last=6, shift=4)
    InterpretedKernel(verify(merges.merge(merge))).launch((merge.programs(grid), 1, 1), (a, b, out))
    InterpretedKernel(merges.fn).launch((grid, 1, 1), (a, b, unmerged))
    np.testing.assert_allclose(out[:438], a.astype(np.float64) @ b, atol=2e-3 * np.sqrt(40), rtol=2e-3)
    np.testing.assert_allclose(out, unmerged, atol=1e-5, rtol=1e-5)
    assert (out[438:448] == 0).all() and np.isnan(out[448:]).all()


def test_merges_in_groups_need_bounded_stores():
    """Merged tiles may reach past the grid only where every access on the output axes keeps
    its bounds check and stores into a parameter: a store promising to stay inside its array
    (check_bounds=False) rules merges in groups out."""
    arrays, finder = _sample(3000, 3000)
    fn = finder.merges.fn
    assert finder.merges.stores == (StoredTiles(2, (0, 1), (32, 32)),)
    store = next(i for i, op in enumerate(fn.body.ops) if isinstance(op, ops.Store))
    fn.body.ops[store] = replace(fn.body.ops[store], check_bounds=False)
    unchecked = MergeFinder(block_merges(fn))
    assert unchecked.merges.stores is None and unchecked.find((4, 4), (94 * 94, 1, 1), arrays) is None


def _sample_tile(block: np.ndarray, m_tiles: int, n_tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """The sample's (row, column) tile of `block`s (`swizzle_2d_from_bid`, groups of 8), in NumPy."""
    group = block // (8 * n_tiles)
    height = np.minimum(m_tiles - group * 8, 8)
    return group * 8 + block % height, block % (8 * n_tiles) // height


@pytest.mark.parametrize("m_tiles,n_tiles", [(8, 3), (11, 7), (19, 10), (30, 5), (17, 9)])
@pytest.mark.parametrize("rows,cols", [(4, 4), (2, 4), (4, 8), (8, 2)])
def test_merges_in_groups_cover_the_grid(m_tiles, n_tiles, rows, cols):
    """Merges in groups of the sample's order: their programs' first blocks are at row and
    column tiles that are multiples of the merge's sides, and their rectangles hold every tile
    of the grid once, with tiles past the grid's last row and column tile only."""
    arrays, finder = _sample(m_tiles * 32 - 5, n_tiles * 32 - 3)
    blocks = m_tiles * n_tiles
    merge = finder.find((rows, cols), (blocks, 1, 1), arrays)
    if merge is None or not merge.period:  # whole spans (found otherwise), or too few rows or columns
        assert n_tiles % cols == 0 or m_tiles < 8 or n_tiles < cols
        return
    assert merge.period == 8 * n_tiles and not merge.head
    top, left = _sample_tile(merge.first(np.arange(merge.programs(blocks))), m_tiles, n_tiles)
    assert not (top % rows).any() and not (left % cols).any()
    tiles = [(r, c) for t, l in zip(top, left) for r in range(t, t + rows) for c in range(l, l + cols)]
    inside = sorted(t for t in tiles if t[0] < m_tiles and t[1] < n_tiles)
    assert inside == [(r, c) for r in range(m_tiles) for c in range(n_tiles)]


def test_merge_order():
    """Where the sample's grouped order makes bands of merged row tiles (two per group of 8 user
    row tiles, merged 4 x 4), the launch has programs take them 8 merged row tiles at a time,
    down each column of rectangles before the next, as the sample takes its tiles; where no
    group of 4 to 8 merged row tiles divides the grid's (1280 rows: 10), in the grid's order."""
    finder = MergeFinder(block_merges(kernel_ir(matmul_kernel, *_mats(32, 32, 32), np.zeros((32, 32), _F32),
                                                32, 32, 32)))
    arrays = lambda m, n: (np.empty((m, 64), _F32), np.empty((64, n), _F32), np.empty((m, n), _F32))  # noqa: E731
    merge = finder.find((4, 4), (32 * 32, 1, 1), arrays(1024, 1024))
    assert merge == Merge(4, 4, 8, checked=False, band=8, group=8)
    first = merge.first(np.arange(1024 // 16))
    rows, cols = first % 8 + first // 256 * 8, first % 256 // 8  # the sample's order, 32 x 32 tiles
    assert (rows // 4).tolist() == [p % 8 for p in range(64)] and (cols // 4).tolist() == [p // 8 for p in range(64)]
    assert finder.find((4, 4), (40 * 24, 1, 1), arrays(1280, 768)) == Merge(4, 4, 8, checked=False)
    for band, group in ((2, 2), (2, 3), (-1, 4)):
        with pytest.raises(ValueError):
            Merge(4, 4, 8, band=band, group=group)  # groups: a multiple of a band's 2 merged rows, above it


@pytest.mark.only_backends("triton")
def test_merged_quick_launches(dev):
    """On the GPU: cached `ct.launch`es of an automatically merged kernel (1000x500x64 fp32,
    32x32x32 tiles: 512 blocks) take the C quick path made for the grid of the launch before
    (`GridVariantLauncher.fused_launch`), each right, the grid given in 1 or 3 numbers; it
    declines another grid, having launched nothing."""
    import torch
    m, n, k = 1000, 500, 64
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32),)
    if not auto_merge((*grid, 1, 1), torch.cuda.get_device_properties(0).multi_processor_count, [(4, 1)]):
        pytest.skip("this GPU's SMs would not merge this grid")
    kernel = ct.kernel(matmul_kernel.fn)
    a, b = (torch.from_numpy(x).cuda() for x in _mats(m, n, k))
    want = a.double() @ b.double()
    c = torch.empty(m, n, device="cuda")
    stream, args = torch.cuda.current_stream(), (a, b, c, 32, 32, 32)

    def check(launch) -> None:
        c.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        torch.testing.assert_close(c.double(), want, rtol=2e-3, atol=2e-3 * k ** 0.5)

    check(lambda: ct.launch(stream, grid, kernel, args))  # compiles, makes the fast-path entry and its quick launcher
    assert type(kernel.quick).__name__ == "Quick"
    for i in range(3):
        check(lambda: _assert_true(kernel.quick(stream, grid if i % 2 else (*grid, 1, 1), args)))
    assert kernel.quick(stream, (grid[0] // 2,), args) is False  # another grid: declined


def _assert_true(value) -> None:
    assert value is True


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("m,n,k,shape", [(1000, 500, 700, (2, 2)), (2048, 1024, 512, (4, 4)), (4000, 1000, 64, (4, 8))])
def test_automatic_merge_on_the_gpu(dev, m, n, k, shape):
    """TC3, 1000x500x700 fp32 with the sample's 32x32x32 tiles (512 blocks), 2048x1024x512
    (2048) and 4000x1000x64 (4000, its last group of rows cut short: in groups), merged as
    `auto_merge` says for the GPU's SMs, counting the programs the merges found run (on the
    H200's 132: 2 x 2, 4 x 4 and 4 x 8); reruns through the fast path are bit-identical."""
    import torch
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, b = _mats(m, n, k)
    kernel = ct.kernel(matmul_kernel.fn)
    grid = (ct.cdiv(m, 32) * ct.cdiv(n, 32), 1, 1)
    results = [run_matmul(dev, "triton", grid, kernel, a, b, (32, 32, 32)) for _ in range(3)]
    np.testing.assert_allclose(results[0], a.astype(np.float64) @ b, atol=2e-3 * np.sqrt(k), rtol=2e-3)
    arrays = (a, b, results[0])
    finder = MergeFinder(block_merges(kernel_ir(matmul_kernel, *arrays, 32, 32, 32)))
    shapes = [(m.rows, m.cols) for m in finder.ranked(grid, arrays, AUTO_SHAPES, sms)]
    assert shapes[:1] == [shape] or sms != 132
    if shapes:
        assert _merged(kernel, "triton", shapes[0])
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint32), later.view(np.uint32))
