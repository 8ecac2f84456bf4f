"""What the GPU lowering leaves to the GPU's own instructions (checked on sm_90 code compiled
here, no GPU needed)."""

from __future__ import annotations

import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.tools import inspect_kernel  # noqa: E402

ConstInt = ct.Constant[int]


@ct.kernel
def softmax_rows(X, Y, TN: ConstInt):
    x = ct.load(X, index=(ct.bid(0), 0), shape=(1, TN))
    p = ct.exp2(x - ct.max(x, axis=1, keepdims=True), flush_to_zero=True)
    ct.store(Y, index=(ct.bid(0), 0), tile=p / ct.sum(p, axis=1, keepdims=True))


def test_the_gpu_instructions_already_ignore_nan_and_flush():
    """On the GPU, max ignoring NaN is one PTX max.f32 and exp2 with flush_to_zero one
    ex2.approx.ftz.f32 (helpers.EXP2_FTZ; both IEEE-conforming for what tilecraft promises), so
    the generated code has no NaN checks or flush helpers there; Triton's CPU interpreter keeps
    them (NumPy propagates NaN and keeps subnormals). The PTX check pins the lowering relied on."""
    x = torch.empty(4, 256, dtype=torch.float32)
    info = inspect_kernel(softmax_rows, (x, x, 256), capability=90)
    source, ptx = info.stage("triton"), info.stage("ptx")
    assert "_tc_maxnum(" not in source and "_tcr_flush" not in source and "_tc_max(" in source
    assert "ex2.approx.ftz.f32" in ptx and "max.f32" in ptx


@ct.kernel
def subnormal_math(X, Y, TN: ConstInt):
    x = ct.load(X, index=(0,), shape=(TN,))
    y = ct.floor(x) + ct.ceil(x) + ct.rsqrt(x) + ct.exp2(x) + x // 3.0 + x % 3.0 + x / 3.0 + ct.exp(x)
    y = y + ct.log(x) + ct.log2(x) + ct.sqrt(x) + ct.sin(x) + ct.cos(x) + ct.atan2(x, y)
    ct.store(Y, index=(0,), tile=y)


@ct.kernel
def subnormal_libdevice_math(X, Y, TN: ConstInt):
    x = ct.load(X, index=(0,), shape=(TN,))
    ct.store(Y, index=(0,), tile=ct.tan(x) + ct.sinh(x) + ct.cosh(x) + ct.tanh(x) + ct.pow(x, x + 1.0))


def _ftz_instructions(ptx: str) -> set[str]:
    """The PTX instructions (opcode with its modifiers) of `ptx` that flush subnormals (.ftz)."""
    return {line.split()[0] for line in ptx.splitlines() if ".ftz" in line and not line.lstrip().startswith("//")}


def test_math_without_flush_to_zero_keeps_subnormals_on_the_gpu():
    """float32 math without flush_to_zero compiles to PTX that keeps subnormals: no .ftz
    instruction. Triton links libdevice in flush-to-zero mode unless told otherwise
    (compile.GPU_MATH_OPTIONS): floor would be cvt.rmi.ftz (floor(-1e-40) -0.0), exp2
    ex2.approx.ftz (exp2(-130) 0.0), log, sin, cos, atan2 fma.rn.ftz and abs.ftz."""
    x = torch.empty(128, dtype=torch.float32)
    ptx = inspect_kernel(subnormal_math, (x, x, 128), capability=90).stage("ptx")
    for instruction in ("cvt.rmi.f32.f32", "cvt.rpi.f32.f32", "rsqrt.approx.f32", "ex2.approx.f32"):
        assert instruction in ptx
    assert _ftz_instructions(ptx) == set()


def test_libdevice_math_keeps_subnormals_on_the_gpu():
    """float32 tan, sinh, cosh, tanh and pow without flush_to_zero: libdevice's kernels in
    non-ftz mode (no abs.ftz, fma.rn.ftz, mul.rn.ftz, ...). What stays .ftz is libdevice's own
    choice on arguments it has reduced to normal numbers: ex2.approx.ftz of the reduced exponent
    (scaled by 2**k after, with a multiply that keeps subnormal results) and rcp.approx.ftz of
    values near 1 or above (tan's -1/tan(r), |r| <= pi/4 never subnormal)."""
    x = torch.empty(128, dtype=torch.float32)
    ptx = inspect_kernel(subnormal_libdevice_math, (x, x, 128), capability=90).stage("ptx")
    assert _ftz_instructions(ptx) == {"ex2.approx.ftz.f32", "rcp.approx.ftz.f32"}


@ct.kernel
def fp8_constant(o):
    ct.store(o, index=(0,), tile=ct.full((16,), ct.float8_e5m2(3.14), dtype=ct.float8_e5m2).astype(ct.float32))


def test_fp8_constants_compile_for_the_gpu():
    """Triton's GPU builder has no get_fp8e5 either (H200 run of 2026-12-01): the constant is
    made from its bits."""
    info = inspect_kernel(fp8_constant, (torch.empty(16, dtype=torch.float32),), capability=90)
    assert "bitcast=True" in info.stage("triton") and info.stage("ptx")


@ct.kernel
def normalized_rows(X, W, Y, TILE_N: ConstInt):
    """Rows normalized and scaled, their mean and spread 1-D tiles (row sums without keepdims)
    broadcast against the row's tiles, as in cuTile's LayerNorm sample."""
    row, zero = ct.bid(0), ct.PaddingMode.ZERO
    tiles, n = ct.num_tiles(X, axis=1, shape=(1, TILE_N)), X.shape[1]
    total = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(tiles):
        total += ct.load(X, index=(row, j), shape=(1, TILE_N), padding_mode=zero)
    mean = ct.sum(total, axis=1) / n
    squares = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(tiles):
        d = ct.load(X, index=(row, j), shape=(1, TILE_N), padding_mode=zero) - mean
        squares += d * d
    rstd = 1 / ct.sqrt(ct.sum(squares, axis=1) / n)
    for j in range(tiles):
        t = ct.load(X, index=(row, j), shape=(1, TILE_N), padding_mode=zero)
        w = ct.load(W, index=(j,), shape=(TILE_N,), padding_mode=zero)
        ct.store(Y, index=(row, j), tile=((t - mean) * rstd * w).astype(Y.dtype))


def test_a_resident_row_stays_spread_over_the_threads():
    """The kernel's resident-row variant for 4096 bf16 columns (passes/resident_rows.py), on 4
    warps: each row tile is 8 elements a thread, so the two subtractions of the mean are a few
    dozen PTX instructions. Reshaping the 1-D mean with `tl.reshape` made Triton lay the tiles
    out whole in every thread (sub.rn.f32 thousands of times, a 50 s compile; compute.py
    `_unit_dims_added`)."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.resident_rows import ResidentRowsKernel
    from tilecraft.tools.inspection import compiled_as_launched
    x, w = torch.empty(8, 4096, dtype=torch.bfloat16), torch.empty(4096, dtype=torch.bfloat16)
    _, compiled, _ = compiled_as_launched(normalized_rows, (x, w, x, 1024))
    variant = wrapped_as(compiled, ResidentRowsKernel).variant(4096)
    ptx = variant.compile_for(90).asm["ptx"]
    assert "[:, None]" in variant.source and ptx.count("sub.rn.f32") <= 128


def test_reshapes_adding_unit_dims_index_with_none():
    from tilecraft.backends.triton.compute import _unit_dims_added
    assert _unit_dims_added((1,), (1, 1)) == ":, None"
    assert _unit_dims_added((4,), (1, 4)) == "None, :"
    assert _unit_dims_added((2, 3), (2, 1, 3, 1)) == ":, None, :, None"
    assert _unit_dims_added((4,), (2, 2)) is None and _unit_dims_added((2, 3), (3, 2)) is None
