"""Split-K (tilecraft/passes/split_k.py, backends/splitting.py): which kernels qualify, and the
split kernels' results on every backend, the split forced N ways (a registered backend
`<name>-split<N>`): float64 references on poisoned outputs, odd sizes, K not a multiple of the
tile, more splits than K iterations (empty splits), bit-identical reruns (the fast path's
launcher included), an epilogue reading prologue values. On the GPU also the automatic split."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from conftest import fast_launchers, kernel_ir
from tilecraft.backends.splitting import SplitKernel, SplitLauncher, auto_split
from tilecraft.backends.triton.heuristics import hinted_loops
from tilecraft.backends.base import wrapped_as
from tilecraft.ir import ops, verify
from tilecraft.library.matmul import matmul_kernel, persistent_matmul_kernel
from tilecraft.passes.ranges import at_least, value_ranges
from tilecraft.passes.split_k import FINISH_LATENCY, split_k

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(11)


def _mats(m: int, n: int, k: int, dtype=np.float32):
    return RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)


# ---- which kernels qualify ------------------------------------------------------------------------
@ct.kernel
def store_in_loop(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc)
        ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def two_loops(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def second_grid_axis(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, ct.bid(1)), shape=(t, t)),
                     acc)
    ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc)


@ct.kernel
def nonzero_start(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 1, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def scaled_accumulator(A, B, C, t: ConstInt):
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc * 0.5)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def store_before_loop(A, B, C, t: ConstInt):
    ct.store(C, index=(ct.bid(0), 0), tile=ct.full((t, t), 0, dtype=ct.float32))
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        acc = ct.mma(ct.load(A, index=(ct.bid(0), k), shape=(t, t)), ct.load(B, index=(k, 0), shape=(t, t)), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


@pytest.mark.parametrize("kernel", [store_in_loop, two_loops, second_grid_axis, nonzero_start, scaled_accumulator,
                                    store_before_loop, persistent_matmul_kernel])
def test_kernels_that_do_not_qualify(kernel):
    a, b = _mats(32, 16, 48)
    c = np.zeros((32, 16), np.float32)
    assert split_k(kernel_ir(kernel, a, b, c, 16, 16, 16) if kernel is persistent_matmul_kernel
                   else kernel_ir(kernel, a, b, c, 16)) is None


def test_matmul_sample_splits_into_two_verified_kernels():
    a, b = _mats(100, 72, 300)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((100, 72), np.float32), 32, 32, 32)
    split = split_k(fn)
    assert split is not None and split.acc.shape == (32, 32)
    for part in (split.partial, split.finish):
        verify(part)
        assert part.param_names[-2:] == ["splits", "workspace"] and len(part.params) == len(fn.params) + 2
        ids = [p.id for p in part.params] + [r.id for op in part.walk() for r in op.results]
        assert len(ids) == len(set(ids))  # value ids stay unique
    assert split.workspace_shape(12, 3) == (3 * 12 * 32, 32)
    loop = next(op for op in split.partial.body.ops if type(op).__name__ == "For")
    # the step stays known positive (no guard in the generated loop); the counter, from
    # bid(1) * chunk, is not known non-negative: intervals cannot see that bid(1) < S
    assert loop.step.id in at_least(value_ranges(split.partial), 1)
    assert split_k(fn) is not None and [op.name for op in fn.body.ops][-2:] == ["for", "store"]  # fn unchanged


def test_automatic_split_count():
    """Whole tiles (tiles that may not be cut): splits of grids that fill at most half the SMs, of
    at least MIN_SPLIT_K (512) each, within the SMs, as many as the model finds worth their
    workspace and FINISH (WORKSPACE_K, FINISH_K); none where one split is rated fastest."""
    assert auto_split((2, 1, 1), 132, 16384) == (1, 32)    # 256x256x16384 with 128x256 tiles
    assert auto_split((4, 1, 1), 132, 65536) == (1, 33)    # 256x512x65536: as many as fit the SMs
    assert auto_split((32, 1, 1), 132, 16384) == (1, 4)    # 1024x1024x16384
    assert auto_split((32, 1, 1), 132, 1024) is None  # 1024^3: two splits would not pay their FINISH
    assert auto_split((8, 1, 1), 132, 1023) is None   # K too short for two splits
    assert auto_split((8, 1, 1), 132, 1024) == (1, 2)
    assert auto_split((66, 1, 1), 132, 65536) == (1, 2)
    assert auto_split((67, 1, 1), 132, 65536) is None  # more than half the SMs busy already
    assert auto_split((4, 2, 1), 132, 65536) is None   # 2-D grids keep their kernel
    assert auto_split((4, 1, 1), 132, None) is None    # K's extent not known


def test_automatic_split_of_cut_tiles():
    """Tiles that may be cut: the pieces and splits the model K / (P * S * speed) + WORKSPACE_K
    * G * S + FINISH_K rates fastest, the fastest of every case measured on the H200
    (split-k-search-h200-2026-12-03.json; 128x256 tiles: 128x128 pieces 0.95, 64x128 0.70, 64x64
    0.52 of a whole tile's speed); none where cutting the tiles alone beats every split."""
    cuts, whole = (1, 2, 4, 8), 128 * 256
    assert auto_split((1, 1, 1), 132, 16384, cuts, whole) == (8, 16)   # 128x256x16384
    assert auto_split((2, 1, 1), 132, 16384, cuts, whole) == (4, 16)   # 256x256x16384
    assert auto_split((2, 1, 1), 132, 4096, cuts, whole) == (8, 8)
    assert auto_split((8, 1, 1), 132, 16384, cuts, whole) == (2, 8)    # 512x512x16384
    assert auto_split((8, 1, 1), 132, 4096, cuts, whole) == (4, 4)
    assert auto_split((32, 1, 1), 132, 16384, cuts, whole) == (2, 2)   # 1024x1024x16384
    assert auto_split((4, 1, 1), 132, 65536, cuts, whole) == (2, 16)   # 256x512x65536
    assert auto_split((8, 1, 1), 132, 2048, cuts, whole) is None       # 8 pieces, unsplit
    assert auto_split((2, 1, 1), 132, 16384, (1,), whole) == (1, 32)   # tiles that may not be cut
    assert auto_split((2, 1, 1), 132, 16384, (4,), whole) == (4, 16)   # a count forced for the tiles


def test_split_from_the_gpus_sm_count(monkeypatch):
    """The Triton backend's split of a CUDA launch: `auto_split` on the device's SM count, of
    whole tiles or the tiles cut as the kernel allows (a CUDA device faked on the CPU); none off
    CUDA; forced counts on any 1-D grid, of the tiles cut as forced."""
    import torch

    from tilecraft.backends.tile_splitting import TilePieces
    from tilecraft.backends.triton import split_launch
    from tilecraft.passes.tile_split import tile_splits

    class Properties:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: Properties)
    monkeypatch.setattr(split_launch, "_sms", {})
    a, b = _mats(256, 256, 64, np.float16)
    splits = tile_splits(kernel_ir(matmul_kernel, a, b, np.zeros((256, 256), np.float16), 128, 256, 64))
    whole, cut, forced = TilePieces(None, ()), TilePieces(splits, (2, 4, 8)), TilePieces(splits, (2,), 2)
    args = [torch.empty(1)]
    assert split_launch.choose((2, 1, 1), args, None, 16384, cut) is None
    assert split_launch.choose((2, 1, 1), args, 5, 16384, forced) == (2, 5)
    assert split_launch.choose((2, 3, 1), args, 5, 16384, whole) is None
    monkeypatch.setattr(split_launch, "_device", lambda args: torch.device("cuda", 0))
    assert split_launch.choose((2, 1, 1), args, None, 16384, whole) == (1, 32)
    assert split_launch.choose((2, 1, 1), args, None, 16384, cut) == (4, 16)
    assert split_launch.choose((2, 1, 1), args, None, 16384, forced) == (2, 29)
    assert split_launch.choose((2, 1, 1), args, 3, 16384, cut) == (1, 3)


@ct.kernel
def walks_bt(A, BT, C, t: ConstInt):
    """C = A[:, :t] @ B with B given transposed (BT = B^T): the loop walks BT's axis 1 only,
    through a view in the other order."""
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(BT, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), 0), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(BT, index=(k, 0), shape=(t, t), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)


def test_the_split_reads_k_from_the_array_the_loop_walks():
    """`SplitK.k_extent`: the extent of the array axis the K loop loads tile by tile (A's columns
    for the sample; where the loop walks only a view of BT in the other order, BT's columns)."""
    a, b = _mats(64, 32, 640, np.float16)
    sample = split_k(kernel_ir(matmul_kernel, a, b, np.zeros((64, 32), np.float16), 64, 32, 64))
    assert sample.walks == (0, 1) and sample.k_extent((a, b, None)) == 640
    bt = np.zeros((32, 640), np.float16)
    other = split_k(kernel_ir(walks_bt, a, bt, np.zeros((64, 32), np.float32), 32))
    assert other.walks == (1, 1) and other.k_extent((a, bt, None)) == 640


# ---- results --------------------------------------------------------------------------------------
@pytest.fixture
def split_backend(backend_variant):
    """A function making (and registering, for this test) `backend` with the split forced N ways."""
    return lambda splits: backend_variant(f"split{splits}", split_k=splits)


def _split_taken(kernel, name: str) -> bool:
    """Whether every variant for backend `name` launched its split parts (on sm_90+ a float32
    kernel comes wrapped in a tf32 StagedKernel, which runs the split kernel when not staging)."""
    compiled = [v.compiled for key, v in kernel.variants.items() if key.backend == name]
    compiled = [wrapped_as(c, SplitKernel) for c in compiled]
    return bool(compiled) and all(c is not None and c.compiled_variants for c in compiled)


@pytest.mark.parametrize("dtype,splits", [("float32", 3), ("float16", 13)])
def test_split_matmul_sample(dev, split_backend, dtype, splits):
    """100x72x300 with 32x32x32 tiles: 12 blocks, 10 K iterations (the last a partial tile);
    13 splits leave three empty. Reruns (through the fast path) are bit-identical."""
    m, n, k, t = 100, 72, 300, 32
    a, b = _mats(m, n, k, np.dtype(dtype))
    name = split_backend(splits)
    grid = (ct.cdiv(m, t) * ct.cdiv(n, t), 1, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 2e-2 * np.sqrt(k) if dtype == "float32" else 1e-2 * np.sqrt(k)  # tf32 operands / fp16 output
    kernel = ct.kernel(matmul_kernel.fn)  # its own variants and fast-path launchers
    results = []
    for _ in range(3 if dev.name == "triton" else 2):  # the GPU's third uses specialized launchers
        c = dev.poison((m, n), dtype)
        dev.launch(grid, kernel, (dev.put(a), dev.put(b), c, t, t, t), backend=name)
        results.append(dev.get(c))
        np.testing.assert_allclose(results[-1].astype(np.float64), ref, atol=tol, rtol=0)
    assert _split_taken(kernel, name)
    assert [type(f) for f in fast_launchers(kernel, name)] == [SplitLauncher]  # ran the second time
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint8), later.view(np.uint8))


@pytest.mark.parametrize("dtype,pieces,splits,piece", [("float32", 4, 3, (32, 32)), ("float16", 2, 5, (32, 64))])
def test_split_of_cut_tiles(dev, backend_variant, dtype, pieces, splits, piece):
    """100x72x300 with 64x64x32 tiles (4 blocks, the last row and column of tiles straddling the
    ends), each tile cut into `pieces` (of shape `piece`) and its K loop split `splits` ways:
    PARTIAL on (4 * pieces, splits, 1), within the tolerance of float64 on a poisoned output."""
    m, n, k, t = 100, 72, 300, 64
    a, b = _mats(m, n, k, np.dtype(dtype))
    name = backend_variant(f"cut{pieces}-split{splits}", split_k=splits, tile_split=pieces, stream_k=False)
    kernel = ct.kernel(matmul_kernel.fn)
    c = dev.poison((m, n), dtype)
    dev.launch((4, 1, 1), kernel, (dev.put(a), dev.put(b), c, t, t, 32), backend=name)
    tol = 2e-2 * np.sqrt(k) if dtype == "float32" else 1e-2 * np.sqrt(k)  # tf32 operands / fp16 output
    np.testing.assert_allclose(dev.get(c).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                               atol=tol, rtol=0)
    split = [wrapped_as(v.compiled, SplitKernel) for key, v in kernel.variants.items() if key.backend == name]
    assert split and all(s._parts.keys() == {pieces} for s in split)
    assert split[0].split_of(pieces).acc.shape == piece


@ct.kernel
def scaled_matmul_bias(A, B, C, bias, alpha: float, t: ConstInt):
    """C = alpha * (A @ B) + bias[None, :], one (t, t) tile per block in row-major block order."""
    n_cols = ct.cdiv(C.shape[1], t)
    row, col = ct.bid(0) // n_cols, ct.bid(0) % n_cols
    bias_tile = ct.load(bias, index=(col,), shape=(t,), padding_mode=ct.PaddingMode.ZERO)
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(row, k), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, col), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    out = acc * alpha + ct.reshape(bias_tile, (1, t))
    ct.store(C, index=(row, col), tile=out.astype(C.dtype))


@pytest.mark.parametrize("t", [16, 32])
def test_split_epilogue_reads_prologue_values(dev, split_backend, t):
    """The epilogue scales by a scalar argument and adds a bias loaded before the loop (t = 32:
    FINISH on 8-row slices (rows of 128 bytes), the bias row broadcast to the slice)."""
    m, n, k = 40, 24, 70
    a, b = _mats(m, n, k, np.float16)
    bias = RNG.standard_normal(n).astype(np.float32)
    name = split_backend(4)
    c = dev.poison((m, n), "float32")
    dev.launch((ct.cdiv(m, t) * ct.cdiv(n, t), 1, 1), scaled_matmul_bias,
               (dev.put(a), dev.put(b), c, dev.put(bias), -1.5, t), backend=name)
    ref = -1.5 * (a.astype(np.float64) @ b.astype(np.float64)) + bias
    np.testing.assert_allclose(dev.get(c), ref, atol=1e-4 * k, rtol=1e-5)
    assert _split_taken(scaled_matmul_bias, name)


@pytest.mark.only_backends("triton")
def test_automatic_split_on_the_gpu(dev):
    """256x256x8192 fp16 with the sample's 128x256x64 tiles: 2 blocks and a long K loop, so 8
    splits of 1024, of the tiles cut into 8 64x64 pieces (automatic: 128 blocks on the H200's 132
    SMs); within fp32-accumulation tolerance of float64 on poisoned outputs, and bit-identical on
    reruns, which take the runtime's quick path (`SplitLauncher`); on a stream other than the
    current one the quick path declines and the launch runs the normal way, as right."""
    torch = pytest.importorskip("torch")
    m, n, k = 256, 256, 8192
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
    want = (a.double() @ b.double()).cpu().numpy()
    kernel = ct.kernel(matmul_kernel.fn)
    stream, side = torch.cuda.current_stream(), torch.cuda.Stream()
    results = []
    for i in range(4):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        args = (a, b, c, 128, 256, 64)
        if i == 0:
            ct.launch(stream, (2, 1, 1), kernel, args)  # compiles; the fast-path entry and its quick launcher
        elif i < 3:
            assert kernel.quick(stream, (2, 1, 1), args) is True
        else:
            assert kernel.quick(side, (2, 1, 1), args) is False
            side.wait_stream(stream)
            ct.launch(side, (2, 1, 1), kernel, args)
            side.synchronize()
        results.append(c.cpu().numpy())
        np.testing.assert_allclose(results[-1].astype(np.float64), want, atol=0.05 + 2e-3 * np.abs(want).max(),
                                   rtol=2e-3)
    assert kernel.quick(stream, (3, 1, 1), args) is False  # another grid: declined
    assert _split_taken(kernel, "triton")
    split = [wrapped_as(v.compiled, SplitKernel) for v in kernel.variants.values()]
    assert [s._parts.keys() for s in split] == [{8}]
    for later in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint16), later.view(np.uint16))


def test_split_launcher_after_an_unsplit_launch():
    """Specialized after a launch it did not split, the launcher starts with the wrapped kernel's
    launcher and its fused launch for that grid only (`fused_on_grid`), so unsplit launches keep
    the runtime's quick path; after a split launch, or of other arguments, it has none. The split
    is chosen once per grid."""
    from types import SimpleNamespace

    from tilecraft.backends.base import FusedLaunch
    made, chosen = [], []
    any_grid = FusedLaunch("_go(gx)", {"_go": lambda gx: True})
    inner = SimpleNamespace(fused_launch=lambda: any_grid, launch=lambda grid, args, stream: made.append(grid))
    main = SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: inner)
    part = SimpleNamespace(launch=lambda grid, args, stream: made.append(("part", grid)),
                           specialize=lambda args: part)
    split = SimpleNamespace(partial="P", finish="F", slices=2, acc=SimpleNamespace(shape=(4, 4)),
                            workspace_shape=lambda blocks, splits: (splits * blocks * 4, 4))
    kernel = SplitKernel(main, split, lambda fn, of, pieces: part,
                         lambda grid, args: chosen.append(grid) or ((1, 3) if grid[0] == 2 else None),
                         lambda shape, args, stream: np.empty(shape))
    args = [object(), object()]
    kernel.launch((5, 1, 1), args)
    launcher = kernel.specialize(args)
    fused = launcher.fused_launch()
    assert made == ["main"] and fused.grid == (5, 1, 1) and launcher.main is inner
    launcher.launch((5, 1, 1), args)
    launcher.launch((5, 1, 1), args)
    launcher.launch((2, 1, 1), args)
    assert made[1:] == [(5, 1, 1), (5, 1, 1), ("part", (2, 3, 1)), ("part", (2, 2, 1))]
    assert chosen == [(5, 1, 1), (5, 1, 1), (2, 1, 1)]  # the kernel's launch, then once per grid
    kernel.launch((2, 1, 1), args)  # split, with no quick workspace: no fused launch, nor the wrapped kernel's launcher
    after_split = kernel.specialize(args)
    assert after_split.fused_launch() is None and after_split.main is None
    kernel.launch((5, 1, 1), args)
    assert kernel.specialize([object(), object()]).fused_launch() is None  # other arguments


def test_split_launcher_quick_path_after_a_split_launch():
    """Specialized after a split launch, with the backend's quick workspace, the launcher's fused
    launch runs that grid's PARTIAL and FINISH on a workspace from it; it declines, launching
    nothing, on other grids and where the quick workspace declines (not the current stream)."""
    from types import SimpleNamespace
    made, works = [], []
    part = SimpleNamespace(launch=lambda grid, args, stream: made.append((grid, args[-2], args[-1].shape)),
                           specialize=lambda args: part)
    main = SimpleNamespace(launch=lambda *a, **k: made.append("main"), specialize=lambda args: main)
    split = SimpleNamespace(partial="P", finish="F", slices=2, acc=SimpleNamespace(shape=(4, 4)),
                            workspace_shape=lambda blocks, splits: (splits * blocks * 4, 4))

    def quick(shape, args, stream):
        return np.empty(shape) if stream == "current" else None
    kernel = SplitKernel(main, split, lambda fn, of, pieces: part, lambda grid, args: (1, 3) if grid[0] == 2 else None,
                         lambda shape, args, stream: works.append(shape) or np.empty(shape),
                         quick_workspace=quick)
    args = [object(), object()]
    kernel.launch((2, 1, 1), args)
    assert made == [((2, 3, 1), 3, (24, 4)), ((2, 2, 1), 3, (24, 4))] and works == [(24, 4)]
    fused = kernel.specialize(args).fused_launch()
    assert fused.grid == (2, 1, 1)

    def run(grid, stream):
        return eval(fused.expr, dict(fused.env), dict(zip(("gx", "gy", "gz"), grid), a0=args[0], a1=args[1],
                                                       stream=stream))
    made.clear()
    assert run((2, 1, 1), "current") and made == [((2, 3, 1), 3, (24, 4)), ((2, 2, 1), 3, (24, 4))]
    assert not run((2, 1, 1), "other") and not run((5, 1, 1), "current")
    assert len(made) == 2 and works == [(24, 4)]  # nothing more launched, no workspace the normal way


# ---- FINISH on row slices -------------------------------------------------------------------------
@ct.kernel
def row_centered(A, B, C, t: ConstInt):
    """C = A @ B minus each row's maximum: an epilogue that reads whole rows (a reduction)."""
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ct.PaddingMode.ZERO), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc - ct.max(acc, axis=1, keepdims=True))


@ct.kernel
def first_rows_only(A, B, C, t: ConstInt):
    """C = A @ B with rows past the tile's first 8 zeroed: the epilogue depends on the row."""
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ct.PaddingMode.ZERO), acc)
    rows = ct.broadcast_to(ct.reshape(ct.arange(t, dtype=ct.int32), (t, 1)), (t, t))
    ct.store(C, index=(ct.bid(0), 0), tile=ct.where(rows < 8, acc, ct.zeros((t, t), dtype=ct.float32)))


@ct.kernel
def stored_twice(A, B, C, D, t: ConstInt):
    """C = A @ B, and D the same: two stores in the epilogue."""
    acc = ct.full((t, t), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(t, t))):
        a = ct.load(A, index=(ct.bid(0), k), shape=(t, t), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.load(B, index=(k, 0), shape=(t, t), padding_mode=ct.PaddingMode.ZERO), acc)
    ct.store(C, index=(ct.bid(0), 0), tile=acc)
    ct.store(D, index=(ct.bid(0), 0), tile=acc)


def _finish_tiles(split) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape of the tile FINISH loads from the workspace, shape of the tile it stores)."""
    load = next(op for op in split.finish.walk() if isinstance(op, ops.Load) and op.array.hint == "workspace")
    store = next(op for op in split.finish.walk() if isinstance(op, ops.Store))
    return load.shape, store.tile.tile.shape


def test_finish_runs_on_row_slices_where_the_epilogue_is_elementwise():
    a, b = _mats(64, 64, 64, np.float16)
    c = np.zeros((64, 64), np.float16)
    sample = split_k(kernel_ir(matmul_kernel, a, b, c, 128, 256, 64))
    assert sample.slices == 128 and _finish_tiles(sample) == ((1, 256), (1, 256))  # rows of 1 KiB
    load = next(op for op in sample.finish.walk() if isinstance(op, ops.Load))
    assert load.latency == FINISH_LATENCY and hinted_loops(sample.finish)  # its loads overlap on the GPU
    bias = np.zeros(64, np.float32)
    scaled = split_k(kernel_ir(scaled_matmul_bias, a, b, c, bias, 2.0, 64))  # a row of bias broadcast: sliced
    assert scaled.slices == 16 and _finish_tiles(scaled) == ((4, 64), (4, 64))  # 4 rows of 256 bytes
    assert split_k(kernel_ir(scaled_matmul_bias, a, b, c, bias, 2.0, 16)).slices == 1  # one slice of 16 rows
    c32 = np.zeros((64, 64), np.float32)
    for kernel, args in ((row_centered, (a, b, c32, 64)), (first_rows_only, (a, b, c32, 64)),
                         (stored_twice, (a, b, c32, c32.copy(), 64))):
        split = split_k(kernel_ir(kernel, *args))
        assert split.slices == 1 and _finish_tiles(split) == ((64, 64), (64, 64)), kernel
    for split in (sample, scaled):
        verify(split.finish)


def test_finish_is_a_dependent_launch_of_partial():
    """PARTIAL lets its dependents launch after its store; FINISH waits for PARTIAL's grid before
    it reads the workspace. Compiled for sm_90 (no GPU needed), FINISH's kernel asks for a
    programmatic dependent launch (Triton's launch_pdl) and waits in its PTX; PARTIAL's launches
    plainly and lets its dependents go. For sm_80, which has no griddepcontrol, neither has the
    controls nor launches as a dependent. Launched plainly (the interpreters), neither control
    does anything: every other test of the split runs through them."""
    pytest.importorskip("triton")
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.triton import TritonBackend
    from tilecraft.ir.kinds import GridDependency
    a, b = _mats(256, 256, 4096, np.float16)
    fn = kernel_ir(matmul_kernel, a, b, np.zeros((256, 256), np.float16), 128, 256, 64)
    split = split_k(fn)
    store, last = split.partial.body.ops[-2:]
    assert isinstance(store, ops.Store) and isinstance(last, ops.GridDependencyControl)
    assert last.action is GridDependency.LAUNCH_DEPENDENTS
    body = split.finish.body.ops
    wait = next(i for i, op in enumerate(body) if isinstance(op, ops.GridDependencyControl))
    assert body[wait].action is GridDependency.WAIT
    total = next(i for i, op in enumerate(body) if isinstance(op, ops.For))  # the sum of the workspace tiles
    assert wait < total and not any(isinstance(op, ops.Load) for op in body[:wait])
    compiled = wrapped_as(TritonBackend(BackendKind.TRITON, capability=90, split_k=4).compile(fn, [None] * 3),
                          SplitKernel)
    partial, finish = (kernel.compile_for(90) for kernel in compiled.parts(1))
    assert finish.metadata.launch_pdl and "griddepcontrol.wait" in finish.asm["ptx"]
    assert not partial.metadata.launch_pdl and "griddepcontrol.launch_dependents" in partial.asm["ptx"]
    ampere = wrapped_as(TritonBackend(BackendKind.TRITON, capability=80, split_k=4).compile(fn, [None] * 3),
                        SplitKernel)  # no griddepcontrol before sm_90: both launch plainly, without the controls
    for kernel in (kernel.compile_for(80) for kernel in ampere.parts(1)):
        assert not kernel.metadata.launch_pdl and "griddepcontrol" not in kernel.asm["ptx"]


@pytest.mark.parametrize("m,n,k,tm,tn,tk,splits", [
    (200, 72, 40, 64, 32, 16, 5),     # 3 K iterations for 5 splits; M, N not multiples of the tile
    (130, 100, 300, 64, 64, 32, 3),   # K not a multiple of tk; the last tile's last slices outside C
])
def test_sliced_finish_matches_the_unsplit_kernel(dev, split_backend, m, n, k, tm, tn, tk, splits):
    """FINISH on (G, tm // 16, 1) blocks: within reassociation of the unsplit kernel's result
    (fp32 output), float64 reference, poisoned outputs, bit-identical reruns."""
    a, b = _mats(m, n, k, np.float16)
    grid = (ct.cdiv(m, tm) * ct.cdiv(n, tn), 1, 1)
    kernel = ct.kernel(matmul_kernel.fn)
    c = dev.poison((m, n), "float32")
    dev.launch(grid, kernel, (dev.put(a), dev.put(b), c, tm, tn, tk))
    unsplit = dev.get(c)
    name = split_backend(splits)
    results = []
    for _ in range(2):
        c = dev.poison((m, n), "float32")
        dev.launch(grid, kernel, (dev.put(a), dev.put(b), c, tm, tn, tk), backend=name)
        results.append(dev.get(c))
    assert _split_taken(kernel, name)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = 4 * k * np.finfo(np.float32).eps * (np.abs(a64) @ np.abs(b64))  # fp32 sums, any order
    np.testing.assert_array_less(np.abs(results[0] - unsplit), bound + 1e-30)
    np.testing.assert_array_less(np.abs(results[0] - a64 @ b64), bound + 1e-30)
    np.testing.assert_array_equal(results[0].view(np.uint8), results[1].view(np.uint8))


def test_unsliced_finish_keeps_whole_row_epilogues(dev, split_backend):
    """An epilogue reducing rows runs on whole tiles: results as unsplit (float64 reference)."""
    m, n, k, t = 100, 32, 90, 32
    a, b = _mats(m, n, k, np.float16)
    name = split_backend(3)
    c = dev.poison((m, n), "float32")
    dev.launch((ct.cdiv(m, t), 1, 1), row_centered, (dev.put(a), dev.put(b), c, t), backend=name)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(dev.get(c), prod - prod.max(axis=1, keepdims=True), atol=1e-4 * k, rtol=1e-5)
    assert _split_taken(row_centered, name)
