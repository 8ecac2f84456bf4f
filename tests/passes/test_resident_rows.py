"""Resident rows (passes/resident_rows.py, backends/resident_rows.py): a kernel walking an array's
row in several passes runs, for each row length launched, unrolled with each tile loaded once.
Which loads merge (not across a store to the same array, an atomic or an ordered load), the
limits on unrolling, and launches forced onto the variants on every backend at odd sizes:
poisoned outputs, float64 references, the kernel as compiled (the same bits on the CPU; on the
GPU a sum's order follows the variant's warps); on the GPU, the automatic choice."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft as ct
from conftest import kernel_ir
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.resident_rows import ResidentRowsKernel
from tilecraft.backends.triton.heuristics import resident_warps
from tilecraft.ir import ops, verify
from tilecraft.passes.resident_rows import MAX_RESIDENT_BYTES, MAX_TRIPS, Reread, resident_rows
from tilecraft.passes.ranges import value_ranges

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from layernorm import layernorm, normalize_row, reference  # noqa: E402
from softmax import softmax_tiled  # noqa: E402

ConstInt = ct.Constant[int]
ZERO = ct.PaddingMode.ZERO
RNG = np.random.default_rng(11)


def _loads(fn, param: int) -> int:
    return sum(1 for op in fn.walk() if isinstance(op, ops.Load) and op.array is fn.params[param])


def _layernorm_ir(cols: int, tile: int, dtype=np.float32):
    x, w = np.zeros((3, cols), dtype), np.zeros(cols, dtype)
    return kernel_ir(layernorm, x, w, w, x.copy(), 1e-5, tile)


@ct.kernel
def double_then_sum(x, out, TILE: ConstInt):
    """Doubles its row in place, then sums it: the second pass must read the doubled tiles."""
    row = ct.bid(0)
    tiles = ct.num_tiles(x, axis=1, shape=(1, TILE))
    for j in range(tiles):
        t = ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
        ct.store(x, index=(row, j), tile=t * 2)
    total = ct.zeros((1, TILE), dtype=ct.float32)
    for j in range(tiles):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    ct.store(out, index=(row,), tile=ct.sum(total, axis=1))


@ct.kernel
def sum_count_sum(x, counter, out, TILE: ConstInt):
    """Two passes over its row with an atomic in between (which ends merging)."""
    row = ct.bid(0)
    tiles = ct.num_tiles(x, axis=1, shape=(1, TILE))
    total = ct.zeros((1, TILE), dtype=ct.float32)
    for j in range(tiles):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    ct.atomic_add(counter, 0, 1)
    for j in range(tiles):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    ct.store(out, index=(row,), tile=ct.sum(total, axis=1))


@ct.kernel
def passes_by_count(x, out, count, TILE: ConstInt):
    """Two passes over `count` tiles (a scalar argument, not the row's length)."""
    row = ct.bid(0)
    total = ct.zeros((1, TILE), dtype=ct.float32)
    for j in range(count):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    for j in range(count):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    ct.store(out, index=(row,), tile=ct.sum(total, axis=1))


@ct.kernel
def layernorm_persistent(x, weight, bias, y, eps, TILE_N: ConstInt):
    """The LayerNorm example's row in a loop over the rows a program runs."""
    for row in range(ct.bid(0), x.shape[0], ct.num_blocks(0)):
        normalize_row(x, weight, bias, y, eps, row, TILE_N)


# ---- the pass ------------------------------------------------------------------------------------
def test_layernorm_variant_loads_each_tile_of_its_row_once():
    fn = _layernorm_ir(1000, 256)
    rows = resident_rows(fn)
    assert rows is not None and rows.found == Reread(0, 1, 1) and rows.trips(1000) == (4, 4, 4)
    variant = verify(rows.variant(1000))
    assert not [op for op in variant.walk() if isinstance(op, ops.For)]
    assert (_loads(fn, 0), _loads(variant, 0)) == (3, 4)      # three passes of 4 tiles: 4 loads
    assert (_loads(variant, 1), _loads(variant, 2)) == (4, 4)  # weight and bias: one pass each
    assert not [op for op in variant.walk() if isinstance(op, ops.ArrayShape) and op.axis == 1]  # a constant
    assert _loads(fn, 0) == 3  # the kernel as compiled is unchanged


def test_a_persistent_kernel_holds_its_rows_within_each_iteration():
    x, w = np.zeros((9, 100), np.float32), np.zeros(100, np.float32)
    rows = resident_rows(kernel_ir(layernorm_persistent, x, w, w, x.copy(), 1e-5, 32))
    assert rows is not None and rows.trips(100) == (4, 4, 4)
    variant = verify(rows.variant(100))
    (outer,) = [op for op in variant.walk() if isinstance(op, ops.For)]  # the loop over rows stays
    assert _loads(variant, 0) == 4 and all(op in outer.body.ops for op in variant.walk()
                                          if isinstance(op, ops.Load) and op.array is variant.params[0])


def test_a_store_to_the_walked_array_or_an_atomic_ends_merging():
    x = np.zeros((2, 100), np.float32)
    doubled = resident_rows(kernel_ir(double_then_sum, x, np.zeros(2, np.float32), 32))
    assert doubled.trips(100) == (4, 4) and _loads(doubled.variant(100), 0) == 8
    counted = resident_rows(kernel_ir(sum_count_sum, x, np.zeros(1, np.int32), np.zeros(2, np.float32), 32))
    assert _loads(counted.variant(100), 0) == 8


def test_no_variant_beyond_the_limits_or_for_trip_counts_the_length_does_not_fix():
    rows = resident_rows(_layernorm_ir(64, 16))
    assert rows.trips(16 * MAX_TRIPS) == (MAX_TRIPS,) * 3 and rows.trips(16 * MAX_TRIPS + 1) is None
    tile = 4096  # float32: 16 KB a tile
    wide = resident_rows(_layernorm_ir(tile, tile))
    fits = MAX_RESIDENT_BYTES // (4 * tile)
    assert wide.trips(fits * tile) is not None and wide.trips(fits * tile + 1) is None
    assert wide.held(fits * tile) == MAX_RESIDENT_BYTES
    x = np.zeros((2, 64), np.float32)
    by_count = resident_rows(kernel_ir(passes_by_count, x, np.zeros(2, np.float32), 2, 32))
    assert by_count is not None and by_count.trips(64) is None
    with pytest.raises(ValueError, match="no resident variant"):
        by_count.variant(64)


def test_a_known_size_makes_the_tile_count_exact():
    fn = _layernorm_ir(1000, 256)
    loop = next(op for op in fn.body.ops if isinstance(op, ops.For))
    assert value_ranges(fn)[loop.upper.id] != (4, 4)
    for size, tiles in ((1000, 4), (1024, 4), (1025, 5), (0, 0)):
        assert value_ranges(fn, {(fn.params[0].id, 1): size})[loop.upper.id] == (tiles, tiles)


def test_warps_grow_with_the_bytes_a_block_holds():
    assert [resident_warps(kb * 1024) for kb in (1, 16, 32, 64, 128, 512)] == [4, 4, 4, 8, 16, 16]


# ---- launches -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cols,tile", [(37, 16), (1000, 256), (64, 64)])
def test_layernorm_forced_resident_matches_float64_and_the_kernel_as_compiled(dev, backend_variant, cols, tile):
    """On a CPU backend the same bits as the kernel as compiled: the same ops in the same order."""
    resident, plain = (backend_variant(n, resident_rows=on) for n, on in (("resident", True), ("plain", False)))
    x = (RNG.standard_normal((5, cols)) * 3 + 1).astype(np.float32)
    w, b = RNG.standard_normal(cols).astype(np.float32), RNG.standard_normal(cols).astype(np.float32)
    outs = {}
    for backend in (resident, plain):
        kernel = ct.kernel(layernorm.fn)  # its own variants
        y = dev.poison(x.shape, np.float32)
        dev.launch((5,), kernel, (dev.put(x), dev.put(w), dev.put(b), y, 1e-5, tile), backend=backend)
        outs[backend] = dev.get(y)
        compiled = [wrapped_as(v.compiled, ResidentRowsKernel) for v in kernel.variants.values()]
        assert [list(c._variants) for c in compiled if c is not None] == ([[cols]] if backend == resident else [])
    np.testing.assert_allclose(outs[resident], reference(x, w, b, 1e-5), rtol=1e-5, atol=1e-5)
    if dev.name == "triton":
        np.testing.assert_allclose(outs[resident], outs[plain], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(outs[resident], outs[plain])


@pytest.mark.parametrize("cols,tile", [(37, 16), (1000, 256)])
def test_tiled_softmax_resident_matches_float64(dev, backend_variant, cols, tile):
    """The softmax example walking its row three times (max, sum of exponentials, normalize):
    one load per tile in the variant; rows padded with -inf past their end."""
    x = np.zeros((3, cols), np.float32)
    rows = resident_rows(kernel_ir(softmax_tiled, x, x.copy(), tile))
    assert _loads(rows.variant(cols), 0) == -(-cols // tile)
    name = backend_variant("resident", resident_rows=True)
    x = (RNG.standard_normal((6, cols)) * 4).astype(np.float32)
    y = dev.poison(x.shape, np.float32)
    dev.launch((6,), ct.kernel(softmax_tiled.fn), (dev.put(x), y, tile), backend=name)
    x64 = x.astype(np.float64)
    want = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(dev.get(y), want / want.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_persistent_layernorm_resident_matches_float64(dev, backend_variant):
    """3 programs over 7 rows of 100 columns (tiles of 32: the last one cut short)."""
    name = backend_variant("resident", resident_rows=True)
    x = (RNG.standard_normal((7, 100)) * 3 + 1).astype(np.float32)
    w, b = RNG.standard_normal(100).astype(np.float32), RNG.standard_normal(100).astype(np.float32)
    y = dev.poison(x.shape, np.float32)
    kernel = ct.kernel(layernorm_persistent.fn)
    dev.launch((3,), kernel, (dev.put(x), dev.put(w), dev.put(b), y, 1e-5, 32), backend=name)
    np.testing.assert_allclose(dev.get(y), reference(x, w, b, 1e-5), rtol=1e-5, atol=1e-5)
    (compiled,) = [wrapped_as(v.compiled, ResidentRowsKernel) for v in kernel.variants.values()]
    assert list(compiled._variants) == [100]


def test_stores_into_the_walked_array_are_read_back(dev, backend_variant):
    name = backend_variant("resident", resident_rows=True)
    x = RNG.standard_normal((3, 100)).astype(np.float32)
    xs, out = dev.put(x), dev.poison((3,), np.float32)
    kernel = ct.kernel(double_then_sum.fn)
    dev.launch((3,), kernel, (xs, out, 32), backend=name)
    np.testing.assert_array_equal(dev.get(xs), x * 2)
    np.testing.assert_allclose(dev.get(out), 2 * x.astype(np.float64).sum(axis=1), rtol=1e-5)


def test_each_row_length_gets_its_variant_and_lengths_beyond_the_limit_run_as_compiled(dev, backend_variant):
    name = backend_variant("resident", resident_rows=True)
    kernel = ct.kernel(layernorm.fn)
    for cols in (40, 24, 16 * MAX_TRIPS + 1, 40):
        x = RNG.standard_normal((2, cols)).astype(np.float32)
        w, b = np.ones(cols, np.float32), np.zeros(cols, np.float32)
        y = dev.poison(x.shape, np.float32)
        dev.launch((2,), kernel, (dev.put(x), dev.put(w), dev.put(b), y, 1e-5, 16), backend=name)
        np.testing.assert_allclose(dev.get(y), reference(x, w, b, 1e-5), rtol=1e-4, atol=1e-4)
    compiled = [wrapped_as(v.compiled, ResidentRowsKernel) for v in kernel.variants.values()]
    assert sorted(length for c in compiled for length in c._variants) == [24, 40]


def test_only_the_first_few_row_lengths_get_variants(monkeypatch):
    """Each variant is a compile of its own: after `MAX_LENGTHS` lengths, new ones run the
    kernel as compiled; lengths already given variants keep them."""
    from tilecraft.backends import resident_rows as module
    monkeypatch.setattr(module, "MAX_LENGTHS", 2)
    choose = module.RowLengths(resident_rows(_layernorm_ir(64, 16)))
    grid = (1, 1, 1)
    shaped = [np.zeros((1, cols), np.float32) for cols in (40, 16 * MAX_TRIPS + 1, 24, 56, 40)]
    assert [choose(grid, [x]) for x in shaped] == [40, None, 24, None, 40]


@pytest.mark.only_backends("triton")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_wide_rows_run_resident_on_the_gpu(dev, dtype):
    """512 rows of 16384 columns (64 KB fp32 rows, which three passes read from DRAM): a launch
    runs the variant for that length unasked (on 8 warps for fp32, 4 for bf16); two launches (the second
    through the runtime's specialized launcher) match float64 on poisoned outputs."""
    import torch

    from tilecraft.backends.tile_splitting import GridVariantLauncher
    cols = 16384
    kind = getattr(torch, dtype)
    x = (torch.randn(512, cols, device="cuda") * 3 + 1).to(kind)
    w, b = (torch.randn(cols, device="cuda").to(kind) for _ in range(2))
    want = reference(*(t.double().cpu().numpy() for t in (x, w, b)), 1e-5)
    kernel = ct.kernel(layernorm.fn)
    for _ in range(2):
        y = torch.full_like(x, float("nan"))
        ct.launch(torch.cuda.current_stream(), (512,), kernel, (x, w, b, y, 1e-5, 1024))
        torch.cuda.synchronize()
        tol = 1e-5 if dtype == "float32" else 1e-2
        np.testing.assert_allclose(y.double().cpu().numpy(), want, rtol=tol, atol=tol)
    (launcher,) = [entry[0] for entry in kernel.fast.values()]
    assert isinstance(launcher, GridVariantLauncher)
    (compiled,) = [wrapped_as(v.compiled, ResidentRowsKernel) for v in kernel.variants.values()]
    assert list(compiled._variants) == [cols]
    assert compiled._variants[cols].lowered.config.num_warps == (8 if dtype == "float32" else 4)
