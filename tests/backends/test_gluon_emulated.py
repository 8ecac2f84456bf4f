"""The warp-specialized Gluon variants (backends/gluon) run on the CPU under gluon_emulation.py.

Gluon has no interpreter, so elsewhere the variants only compile here and run on the H200
(test_warp_specialized.py). Here flash attention's and the sample matmul's variants run their
generated source with every partition a thread, interleaved by seeded schedulers (several
interleavings per case); each run must finish without a race, a deadlock or async work left in
flight, and match float64 on NaN-poisoned outputs. A few programs stand in for the SMs, so the
persistent programs each run several blocks.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("ml_dtypes")

from gluon_emulation import EmulationError, emulate, gluon_variant  # noqa: E402
from test_warp_specialized import _reference, flash_attention  # noqa: E402

from tilecraft.library import matmul_kernel  # noqa: E402

SEEDS = range(4)
"""The scheduler's seeds each case runs under: one interleaving each."""

PROGRAMS = 3
"""Programs of a persistent kernel (SMs): fewer than its blocks."""

HEADS, GROUP = 4, 2


def _matmul(m: int, n: int, k: int, dtype: str) -> tuple[tuple, np.ndarray]:
    """matmul_kernel's arguments (128x256x64 tiles, C poisoned) and C in float64."""
    g = torch.Generator().manual_seed(m + n + k)
    a = torch.randn(m, k, generator=g).to(getattr(torch, dtype))
    b = torch.randn(k, n, generator=g).to(a.dtype)
    c = torch.full((m, n), float("nan"), dtype=a.dtype)
    return (a, b, c, 128, 256, 64), a.double().numpy() @ b.double().numpy()


def _run(kernel_fn: Any, args: tuple, out: Any, grid: tuple[int, int, int]) -> Iterator[tuple[int, np.ndarray]]:
    """Run `kernel_fn`'s Gluon variant for `args` over `grid` under each seed, `out` poisoned
    first; yields (the seed, `out` after the run, float64)."""
    kernel, launch_args = gluon_variant(kernel_fn, args)
    assert kernel.lowered.persistent and grid[0] % kernel.lowered.grid_divisor == 0
    for seed in SEEDS:
        out.fill_(float("nan"))
        emulate(kernel, grid, launch_args, PROGRAMS, seed)
        yield seed, out.double().numpy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tm,tn,d,seq", [(128, 128, 128, 300), (64, 128, 64, 380), (128, 64, 64, 200)])
def test_attention_variant_emulated(tm, tn, d, seq, causal, dtype):
    """flash_attention's variant: 128-row tiles as two compute partitions of 64 rows, or pairs
    of 64-row blocks; sequences of 300, 380 or 200 (partial last query and key tiles; 3, 3 or 2
    blocks or pairs along it, which causal programs run as units of 0 and 2, then 1 alone, or
    of 0 and 1), 4 query heads on 2 key/value heads; 3 programs, each running several blocks,
    so rings, phases, ping-pong turns and the double-buffered queries run on across blocks."""
    g = torch.Generator().manual_seed(seq + tm + d + causal)
    q = torch.randn(1, HEADS, seq, d, generator=g).to(getattr(torch, dtype))
    k, v = (torch.randn(1, HEADS // GROUP, seq, d, generator=g).to(q.dtype) for _ in range(2))
    out = torch.full_like(q, float("nan"))
    scale = 1 / math.sqrt(d)
    want = _reference(q.double().numpy(), k.double().numpy(), v.double().numpy(), scale, GROUP, causal)
    args = (q, k, v, out, scale, tm, tn, d, HEADS, GROUP, causal)
    for seed, got in _run(flash_attention, args, out, (math.ceil(seq / tm), HEADS, 1)):
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, err_msg=f"scheduler seed {seed}")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m,n,k", [(300, 600, 200), (200, 520, 40)])
def test_matmul_variant_emulated(m, n, k, dtype):
    """matmul_kernel (128x256x64 tiles) as its Gluon variant: partial tiles at the M, N and K
    ends (TMA fills zeros and clips the stores), 4 K tiles (more than the ring's 3 slots) or 1,
    9 or 6 blocks on 3 programs, each block's store left in flight into the next."""
    args, want = _matmul(m, n, k, dtype)
    grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)
    for seed, got in _run(matmul_kernel, args, args[2], grid):
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * math.sqrt(k), err_msg=f"scheduler seed {seed}")


def _rn_tf32(x: torch.Tensor) -> np.ndarray:
    """float32 rounded to nearest even tfloat32 (finite values), as float64."""
    bits = x.numpy().view(np.uint32).astype(np.uint64)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("m,n,k", [(300, 600, 100), (130, 260, 24)])
def test_tf32_matmul_variant_emulated(m, n, k):
    """float32 matmul_kernel with 128x256x32 tiles: its operands staged (rounded to tfloat32, B
    transposed) and the staged kernel as its Gluon variant, whose 64x256 float32 tiles are stored
    in two column halves through one buffer (whole ones leave no room for three ring slots);
    partial tiles at every end, 4 K tiles or 1 (K 24 < 32), 9 or 4 blocks on 3 programs."""
    g = torch.Generator().manual_seed(m + n + k)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    c = torch.full((m, n), float("nan"))
    args = (a, b, c, 128, 256, 32)
    kernel, _ = gluon_variant(matmul_kernel, args)
    assert "gl.split(" in kernel.source and kernel.lowered.stages == 3
    want = _rn_tf32(a) @ _rn_tf32(b)
    grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)
    for seed, got in _run(matmul_kernel, args, c, grid):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * math.sqrt(k), err_msg=f"scheduler seed {seed}")


def test_emulation_finds_a_half_stored_over_the_other():
    """The tf32 variant's second store half must wait for the first half's TMA store to have
    read the buffer: without that wait the emulator reports the race."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(300, 100, generator=g), torch.randn(100, 600, generator=g)
    kernel, launch_args = gluon_variant(matmul_kernel, (a, b, torch.full((300, 600), float("nan")), 128, 256, 32))
    lines = kernel.source.splitlines()
    second = next(i for i, line in enumerate(lines) if ".store(hi" in line)
    assert lines[second - 1].strip() == "tma.store_wait(0)"
    lines[second - 1] = lines[second - 1].replace("tma.store_wait(0)", "pass")
    broken = copy.copy(kernel)
    broken.source = "\n".join(lines) + "\n"
    with pytest.raises(EmulationError, match="registers write out0.* while an async op reads it"):
        emulate(broken, (9, 1, 1), launch_args, PROGRAMS, seed=0)


@pytest.mark.parametrize("pattern,error", [
    (r"tma\.store_wait\(0\)", "registers write out0.* while an async op reads it"),
    (r"fence_async_shared\(\)", "written from registers with no fence_async_shared"),
    (r"async_copy\.mbarrier_arrive\(empty0\.index\(\w+\), increment_count=False\)",
     "(?s)deadlock:.*_load.* waits on empty0"),
], ids=["no store_wait", "no fence", "no release"])
def test_emulation_finds_broken_schedules(pattern, error):
    """The emulator reports the matmul variant with its stores' waits, its fences or its
    releases of A's slots taken out (each replaced by `pass`): a race, a missing fence, a
    deadlock (found from the barriers' state, not by a timeout)."""
    args, _ = _matmul(300, 600, 200, "bfloat16")
    kernel, launch_args = gluon_variant(matmul_kernel, args)
    broken = copy.copy(kernel)
    broken.source, count = re.subn(pattern, "pass", kernel.source)
    assert count
    with pytest.raises(EmulationError, match=error):
        emulate(broken, (9, 1, 1), launch_args, PROGRAMS, seed=0)
