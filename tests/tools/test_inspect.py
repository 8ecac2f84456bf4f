"""The inspection tool: every stage of a kernel compiled for a GPU that is not here."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import tilecraft  # noqa: E402
from tilecraft.__main__ import main as cli  # noqa: E402
from tilecraft.library import matmul_kernel  # noqa: E402
from tilecraft.tools import STAGES, inspect_kernel  # noqa: E402

LIBRARY = Path(tilecraft.__file__).parent / "library" / "matmul.py"


@pytest.mark.parametrize("capability, mma", [(90, "HGMMA"), (80, "HMMA")])
def test_every_stage_for_a_gpu_that_is_not_here(capability, mma):
    a = torch.empty(1000, 520, dtype=torch.float16)  # 1000 rows: not 16-aligned -> descriptors on sm_90
    b, c = torch.empty(520, 384, dtype=torch.float16), torch.empty(1000, 384, dtype=torch.float16)
    info = inspect_kernel(matmul_kernel, (a, b, c, 64, 64, 32), capability=capability)
    assert "mma" in info.stage("ir") and "tl.dot(" in info.stage("triton")
    # on sm_90 what every launch of these arrays runs: descriptors taken from the host, not made by the programs
    assert ("A_desc.load(" in info.stage("triton")) == info.host_descriptors == (capability >= 90)
    assert "make_tensor_descriptor" not in info.stage("triton")
    assert ("host descriptors: every launch" in info.summary()) == (capability >= 90)
    assert "tt.dot" in info.stage("ttir") and "ttg." in info.stage("ttgir") and ".version" in info.stage("ptx")
    assert mma in info.stage("sass") and info.stage("llir")
    assert info.registers and info.registers > 0 and info.spill_bytes == 0 and info.shared_bytes > 0
    assert info.summary().startswith(f"sm_{capability}: 4 warps")
    with pytest.raises(ValueError, match="unknown stage"):
        info.stage("cubin-text")
    assert set(STAGES) == {"ir", "triton", "ttir", "ttgir", "llir", "ptx", "sass"}


def test_command_line(capsys):
    assert cli(["inspect", f"{LIBRARY}:matmul_kernel", "float32[64,96]", "float32[96,64]", "float32[64,64]",
                "32", "32", "32", "--stage", "triton"]) == 0
    out = capsys.readouterr().out
    assert "==== triton ====" in out and 'input_precision="tf32"' in out and "registers/thread" in out
    assert cli([]) == 2 and "inspect" in capsys.readouterr().out


@tilecraft.kernel
def batched_tf32_kernel(A, B, C, tb: tilecraft.Constant[int], tm: tilecraft.Constant[int],
                        tn: tilecraft.Constant[int], tk: tilecraft.Constant[int]):
    """C[b] = A[b] @ B[b] in tf32, (tb, tm, tn) output tiles."""
    zero = tilecraft.PaddingMode.ZERO
    acc = tilecraft.full((tb, tm, tn), 0, dtype=tilecraft.float32)
    for k in range(tilecraft.num_tiles(A, axis=2, shape=(tb, tm, tk))):
        a = tilecraft.load(A, (tilecraft.bid(2), tilecraft.bid(0), k), (tb, tm, tk), padding_mode=zero)
        b = tilecraft.load(B, (tilecraft.bid(2), k, tilecraft.bid(1)), (tb, tk, tn), padding_mode=zero)
        acc = tilecraft.mma(a.astype(tilecraft.tfloat32), b.astype(tilecraft.tfloat32), acc)
    tilecraft.store(C, (tilecraft.bid(2), tilecraft.bid(0), tilecraft.bid(1)), acc)


@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("tiles, warps", [
    ((32, 32, 32), 1), ((16, 16, 64), 1),
    ((32, 32, 8), 4),         # K < 16: FMAs, which spilled on one warp
    ((64, 16, 32), 4),        # mma.sync on sm_90 too: operands rounded in registers (heuristics.mma_sync_only)
    ((1, 32, 32, 32), 1),
    ((2, 32, 32, 32), 4),     # every batch's accumulator on one warp spilled
])
def test_small_tf32_kernels_compile_without_spills(capability, tiles, warps):
    """float32 matmuls on small tiles (tf32 MMAs) compile for sm_80 and sm_90 on the warps
    heuristics.small_tf32 gives them, without spilling registers (odd sizes: masked edges), to
    mma.sync (HMMA), never wgmma (HGMMA): their operands are rounded in registers."""
    f32 = torch.float32
    if len(tiles) == 3:
        m, n, k = 1000, 500, 700
        args = (torch.empty(m, k, dtype=f32), torch.empty(k, n, dtype=f32), torch.empty(m, n, dtype=f32), *tiles)
        info = inspect_kernel(matmul_kernel, args, capability=capability)
    else:
        b, m, n, k = 5, 100, 90, 70
        args = (torch.empty(b, m, k, dtype=f32), torch.empty(b, k, n, dtype=f32), torch.empty(b, m, n, dtype=f32),
                *tiles)
        info = inspect_kernel(batched_tf32_kernel, args, capability=capability)
    assert info.spill_bytes == 0, info.summary()
    assert info.num_warps == warps
    if tiles[-1] >= 16:
        sass = info.stage("sass")
        assert "HMMA" in sass and "HGMMA" not in sass
    assert ("mma.sync:" in info.summary()) == (capability >= 90 and tiles[-1] >= 16), info.summary()


def test_what_a_grid_runs(capsys):
    """With a grid, inspection shows what a launch on it runs on a GPU of so many SMs: TC3's 512
    blocks of 32x32 tf32 tiles merged 2 x 2 on 132 SMs (128 programs of 64x64 tiles on 4 warps,
    not 1), 4 x 2 on 64 SMs; 4000x1000's grid, whose last group of row tiles does not line up,
    merged 4 x 8 with spans restarting at every group (one wave of 128 programs), or, where C
    has rows below the product's, 4 x 2 but for its last 160 blocks; TC2's 256 blocks, too few to merge, the kernel as
    compiled; 2048x2048x1024, whose 2M-element operands stage where the launch merges wide,
    the staged kernel merged 4 x 8 (one wave: its 128 programs fit the GPU at once, so they run
    the variant without the grid loop, on 3 stages where the loop's kernel fits 2), 3000x3000x1000
    merged 4 x 4 on 752 programs (the grid loop's); fp16 256x256x16384's 2 blocks split-K 16 ways.
    Without one, the summary says launches may run a variant."""
    f32 = torch.float32

    def args(m, n, k):
        return torch.empty(m, k, dtype=f32), torch.empty(k, n, dtype=f32), torch.empty(m, n, dtype=f32), 32, 32, 32

    plain = inspect_kernel(matmul_kernel, args(1000, 500, 700))
    assert "grid variants: launches on some grids" in plain.summary() and plain.num_warps == 1
    merged = inspect_kernel(matmul_kernel, args(1000, 500, 700), grid=(512,))
    assert "merged 2 x 2 to a program (stride 8, programs in groups of 8 merged row tiles, unchecked), on grid " \
           "(128, 1, 1)" in merged.summary()
    assert "matmul_kernel_merged2x2_unchecked" in merged.stage("ir") and "(64, 32)" in merged.stage("ir")
    assert merged.num_warps == 4 and merged.spill_bytes == 0
    assert "merged 4 x 2" in inspect_kernel(matmul_kernel, args(1000, 500, 700), grid=(512, 1), sms=64).summary()
    tail = inspect_kernel(matmul_kernel, args(4000, 1000, 64), grid=(4000,)).summary()
    assert "merged 4 x 8 to a program (stride 8, spans restarting at every group of 256 blocks, the last group " \
           "5 row tiles tall, unchecked), on grid (128, 1, 1)" in tail
    taller = (*args(4000, 1000, 64)[:2], torch.empty(4100, 1000, dtype=f32), 32, 32, 32)
    assert "merged 4 x 2 to a program (stride 8, programs in groups of 6 merged row tiles, unchecked, the first " \
           "480 programs; the 160 blocks after them one each), on grid (640, 1, 1)" in \
           inspect_kernel(matmul_kernel, taller, grid=(4000,)).summary()
    assert "launches run the kernel as compiled" in inspect_kernel(matmul_kernel, args(512, 512, 64),
                                                                   grid=(256,)).summary()
    staged_info = inspect_kernel(matmul_kernel, args(2048, 2048, 1024), grid=(4096,))  # 2M-element operands
    staged = staged_info.summary()
    assert "merged 4 x 8" in staged and "the stages shown are the staged kernel's" in staged
    # its 128 programs fit the GPU at once: the variant without the grid loop, whose 3 stages fit
    assert "its 128 programs fit the GPU at once" in staged and staged_info.num_stages == 3
    assert "fitted to the GPU" not in staged
    several = inspect_kernel(matmul_kernel, args(3000, 3000, 1000), grid=(8836,)).summary()  # 4 x 4: 752 programs
    assert "merged 4 x 4" in several and "fit the GPU at once" not in several
    assert "the stages shown are the staged" not in merged.summary()  # TC3's operands: too small to stage
    with pytest.raises(ValueError, match="a grid is"):
        inspect_kernel(matmul_kernel, args(64, 64, 64), grid=(0,))
    with pytest.raises(ValueError, match="at least one SM"):
        inspect_kernel(matmul_kernel, args(64, 64, 64), grid=(4,), sms=0)
    half = torch.float16
    long_k = (torch.empty(256, 16384, dtype=half), torch.empty(16384, 256, dtype=half),
              torch.empty(256, 256, dtype=half), 128, 256, 64)
    # 2 blocks, K of 16 times 1024: tiles cut in 4 (64x128 pieces) fill 128 of the 132 SMs
    assert "split the K loop 16 ways, each output tile cut into 4 pieces, PARTIAL on (8, 16, 1)" in inspect_kernel(
        matmul_kernel, long_k, grid=(2,)).summary()
    assert "split the K loop 8 ways, each output tile cut into 2 pieces, PARTIAL on (16, 8, 1)" in inspect_kernel(
        matmul_kernel, long_k, grid=(8,)).summary()  # 8 blocks: half the splits of whole tiles, half the workspace
    assert cli(["inspect", f"{LIBRARY}:matmul_kernel", "float32[1000,700]", "float32[700,500]", "float32[1000,500]",
                "32", "32", "32", "--grid", "512,1,1"]) == 0
    assert "merged 2 x 2" in capsys.readouterr().out
    assert cli(["inspect", f"{LIBRARY}:matmul_kernel", "float32[64,64]", "--grid", "1,2,3,4"]) == 2
    assert "a grid is 1 to 3 positive ints" in capsys.readouterr().err


def test_resident_rows_show_the_variant_for_their_length():
    """The three-pass LayerNorm example at 16384 fp32 columns: what its launches run, the variant
    for that length (unrolled, on 8 warps); at 33 tiles a row, more than a variant unrolls, the
    kernel as compiled."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from layernorm import layernorm

    def args(cols):
        x, w = torch.empty(4, cols), torch.empty(cols)
        return x, w, w, x, 1e-5, 1024
    wide = inspect_kernel(layernorm, args(16384))
    assert "launches with rows of 16384 run the kernel's variant" in wide.summary()
    assert "layernorm_resident16384" in wide.stage("ir") and wide.num_warps == 8
    too_long = inspect_kernel(layernorm, args(1024 * 33))
    assert "launches run the kernel as compiled" in too_long.summary() and "resident" not in too_long.stage("ir")
