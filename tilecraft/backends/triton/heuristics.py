"""Launch configuration (num_warps, num_stages) chosen from the tile shapes in a kernel.

Matrix-multiply kernels are sized by their largest MMA: the accumulator decides the warps and
shared memory per pipeline stage (one A and one B tile) caps the stages. The H200 figures that
anchor these choices (Triton 3.6, fp16, tensor descriptors): 128x256x64 with 8 warps and 3
stages is the best plain config (0.92x cuBLAS); 128x128x64 runs best with 4 warps and 4 stages.
Other kernels get warps by their largest tile (about 8 elements per thread at most).

Pipelined loops (a K loop: tile loads and an MMA in one body) run as `tl.range(num_stages=)`
with the kernel's stages, unless their loads carry `latency` hints: then the largest latency
among the loads directly in the loop body is that loop's num_stages (a load expected to take
longer gets more iterations in flight), capped by the shared-memory budget for the tiles that
body loads per stage (`loop_stages`). Without hints the generated code is what it was before
hints existed. A loop without an MMA is pipelined only when its loads carry hints (`hinted_loops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import Function, Op, ops
from ...ir.types import TileType
from ...language import dtypes as D

SMEM_BUDGET = 200 * 1024  # bytes of shared memory pipelining may use (H100/H200: 227 KiB)
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # fn.options passed through


@dataclass(frozen=True)
class LaunchConfig:
    num_warps: int
    num_stages: int
    options: dict[str, Any]  # every Triton launch option (num_warps/num_stages included)
    ignored: dict[str, Any]  # kernel options with no Triton equivalent, kept for inspection
    mma_sync: bool = False  # compiled with Hopper's wgmma off (`mma_sync_only`)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


DEEP_STAGES = 6
"""Pipeline stages of an MMA's K loop in a launch that runs about one block per SM (tile-split
pieces, `choose_config(deep=True)`), where no other block hides the loads' latency, when its
tiles load 16 bytes at a time or through tensor descriptors: on the H200 the split sample's
pieces (64x128 and 64x64) ran 6-15% faster with 6 stages than with 4 at 512^3-1024^3 fp16
(benchmarks/results/split-probe-h200-2026-12-01-b.json); 3072^3, split in two, went from 0.82 to
0.87x torch (size-sweep-h200-2026-12-01-s.json)."""

DEEP_NARROW_STAGES = 3
"""At most this many stages for such a launch whose K loop loads from rows that are not 16-byte
aligned (narrower `cp.async`, more of them per stage): the split 1000x500x700 fp16 (rows of
1400 and 1000 bytes) ran at 1.62-1.64x torch with 3 stages, 1.33-1.40x with 4 and 1.25-1.33x
with 6 (benchmarks/results/split-probe-h200-2026-12-01-c.json)."""


def deep_schedule(deep_pipeline: bool, wide_loads: bool, max_stages: int | None) -> tuple[bool, int | None]:
    """(choose_config's `deep`, its `max_stages`) for a launch of about one block per SM
    (`deep_pipeline`) or not, whose pipelined loops' loads are all wide (16 bytes or TMA) or not."""
    if not deep_pipeline:
        return False, max_stages
    if wide_loads:
        return True, max_stages
    return False, min(max_stages or DEEP_NARROW_STAGES, DEEP_NARROW_STAGES)


SMALL_TF32_WARPS = 1
"""Warps of a kernel whose largest MMAs are small tf32 ones (`small_tf32`). Such a block's K loop
is a chain of shared-memory loads, tf32 roundings and MMAs that no other work hides; one warp
issues it once per iteration (180 instructions on sm_90), where four warps in 2x2 each load and
round half the fragments again (484 in all). H200, the sample's 32x32x32 kernel, one warp
against four in one run: fp32 1024^3 0.68 / 0.48x torch, 2048^3 0.26 / 0.22x, TC3 1000x500x700
0.61 / 0.56x, TC2 512x512x768 1.01 / 1.04x, 4096^3 0.19x both
(benchmarks/results/size-sweep-h200-2026-12-01-am.json against -an; 2048^3, 4096^3 and the
16-bit cases: -ao against -ap; two warps, in between: -al). 16-bit 32x32 tiles keep four warps:
one ran 1000x500x700 fp16 / bf16 8-10% slower (1.02 / 0.98x against 1.11 / 1.09x), though 1024^3
fp16 faster (0.50 / 0.42x)."""

SMALL_TF32_STAGES = 4
"""Pipeline stages of those kernels. H200, one warp, one call: 3, 6 and 8 stages were no faster
than 4 over 512^3 to 2048^3 and TC3 (3: 512^3 0.89 against 1.05x torch; 8: TC3 0.46 against
0.62x; benchmarks/results/size-sweep-h200-2026-12-01-aq.json against -ar, -as, -at)."""

WGMMA_ROWS = 64
"""MMAs of at least this many rows run on Hopper's wgmma with four warps or more (B read from
shared memory K-major only), which is what tf32 staging is for (operand_staging.py); narrower
tiles run mma.sync, which takes B from registers in any layout, so below
NARROW_STAGE_MIN_ELEMENTS the prologue is all cost (H200, 32x32x32 tiles: 1024^3 36.6 -> 43.3 us
staged, 1000x500x700 24.4 -> 32.8 us; size-sweep-h200-2026-12-01-ad.json against -ab)."""


def dot_mma(op: ops.Mma) -> bool:
    """Whether `op` runs as a tl.dot (else as broadcast multiplies and sums, compute.py
    `_mma_fma`): tl.dot needs K >= 16 (32 for 8-bit types) and one operand dtype; its float64
    fails to compile (PassManager) where an operand is converted."""
    adt = op.a.tile.dtype
    return op.a.tile.shape[-1] >= (32 if adt.bitwidth == 8 else 16) and adt is op.b.tile.dtype and adt is not D.float64


def small_tf32(op: ops.Mma) -> bool:
    """Whether `op` takes SMALL_TF32_WARPS: a tf32 MMA on tensor cores (not float32 operands,
    nor K < 16: those run as FMAs, whose products one warp holds alone: the sample's 32x32x8
    spilled on sm_80 and sm_90), of fewer than WGMMA_ROWS rows (64x16 keeps its wgmma), into an
    accumulator of at most 32x32 elements, batch included (one warp holds every batch's:
    2x32x32x32 and 8x16x16x16 spilled)."""
    acc = op.acc.tile
    return (op.a.tile.dtype is D.tfloat32 and dot_mma(op) and acc.shape[-2] < WGMMA_ROWS
            and _numel(acc.shape) <= 32 * 32)


def mma_sync_only(fn: Function) -> bool:
    """Whether `fn` compiles with Triton's wgmma off (its `DISABLE_MMA_V3`, set only while
    Triton builds this kernel: compile.py), every MMA on mma.sync: each of its tensor-core MMAs
    is tf32 on operands rounded in its own registers (a Cast to tfloat32; operand staging's
    copies, read through a Bitcast, keep wgmma). Hopper's tf32 wgmma reads B from shared memory
    K-major only, so Triton writes the rounded B back to shared memory every K step and waits for
    it; mma.sync takes both operands from registers. H200, the MatMul sample at larger tiles,
    wgmma against mma.sync in one call (tc3-probe-h200-2026-12-02-l.json against -m), TC3
    1000x500x700 / TC2 512x512x768: 64x64x32 0.66 -> 0.92x / 0.62 -> 0.77x torch, 128x64x32
    0.66 -> 0.87x / 0.62 -> 0.94x, 64x128x32 0.68 -> 0.92x / 0.60 -> 0.94x, 128x128x32 0.68 ->
    0.91x / 0.62 -> 0.82x, 128x64x64 0.74 -> 0.93x / 0.64 -> 1.04x. MMAs of fewer than 64 rows
    run mma.sync either way; a kernel with any other MMA keeps wgmma for all."""
    mmas = [op for op in fn.walk() if isinstance(op, ops.Mma) and dot_mma(op)]
    staged = any(isinstance(op, ops.Bitcast) and op.dtype is D.tfloat32 for op in fn.walk())
    return bool(mmas) and not staged and all(op.a.tile.dtype is D.tfloat32 for op in mmas)


def _mma_config(op: ops.Mma, live: int, deep: bool) -> tuple[int, int, int]:
    """(accumulator elements, warps, stages) for one MMA; `live`: the accumulator elements of
    the MMAs in its block together (attention keeps two accumulators in registers at once);
    `deep`: as many as DEEP_STAGES stages. Small tiles take 4 stages like 64x64 ones: the
    sample's 32x32x32 tf32 kernel ran 24% faster with 4 than with 3 at TC2 (512x512x768) and
    the same at TC3 (benchmarks/results/fp32-probe-h200-2026-12-01.json)."""
    a, acc = op.a.tile, op.acc.tile
    m, k = a.shape[-2], a.shape[-1]
    n = acc.shape[-1]
    per_stage = (m * k + k * n) * a.dtype.itemsize
    warps, cap = (8, 3) if live > 128 * 128 else (SMALL_TF32_WARPS, SMALL_TF32_STAGES) if small_tf32(op) else (4, 4)
    return m * n, warps, max(2, min(DEEP_STAGES if deep else cap, SMEM_BUDGET // max(per_stage, 1)))


def _live_accumulators(fn: Function) -> dict[ops.Mma, int]:
    """Each MMA -> the accumulator elements of all MMAs in its block (live at once)."""
    live: dict[ops.Mma, int] = {}
    blocks = [fn.body] + [blk for op in fn.walk() for blk in op.blocks]
    for blk in blocks:
        mmas = [o for o in blk.ops if isinstance(o, ops.Mma)]
        total = sum(_numel(o.acc.tile.shape[-2:]) for o in mmas)
        live.update({o: total for o in mmas})
    return live


def _elementwise_warps(numel: int) -> int:
    for limit, warps in ((128, 1), (512, 2), (2048, 4), (8192, 8)):
        if numel <= limit:
            return warps
    return 16


RESIDENT_BYTES_PER_THREAD = 256
"""Bytes of a resident row (passes/resident_rows.py) each thread holds at most where 16 warps
suffice (64 registers). H200, the LayerNorm sample on 4 / 8 / 16 warps: bf16 8192x16384 (32 KB a
row) 1.69 / 1.61 / 1.55x torch, bf16 4096x32768 (64 KB) 1.07 / 1.26 / 1.20x, fp32 8192x16384
(64 KB) 1.51 / 1.58 / 1.62x, fp32 4096x32768 (128 KB) 0.86 / 0.82 / 0.89x
(benchmarks/results/row-l2-probe-h200-2026-12-02-f.json): 256 bytes a thread chose the best or
within 3% of it in each."""


def resident_warps(held: int) -> int:
    """num_warps for a kernel holding `held` bytes of a row in registers: 4 to 16, as many as
    keep `RESIDENT_BYTES_PER_THREAD` a thread."""
    warps = 4
    while warps < 16 and warps * 32 * RESIDENT_BYTES_PER_THREAD < held:
        warps *= 2
    return warps


def _load_bytes(loop: Op) -> int:
    """Bytes of the tiles loaded directly in `loop`'s blocks per iteration (what pipelining
    buffers per stage)."""
    return sum(_numel(o.result.tile.shape) * o.result.tile.dtype.itemsize
               for blk in loop.blocks for o in blk.ops if isinstance(o, ops.Load))


def _loop_load_bytes(fn: Function) -> int:
    """Bytes of the tiles loaded in the busiest loop body."""
    return max((_load_bytes(op) for op in fn.walk() if isinstance(op, (ops.For, ops.While))), default=0)


def pipelined_loops(fn: Function) -> list[ops.For]:
    """FOR ops whose body loads tiles and runs an MMA: these get `tl.range(num_stages=)`."""
    return [op for op in fn.walk() if isinstance(op, ops.For)
            and any(isinstance(o, ops.Load) for o in op.body.ops) and any(isinstance(o, ops.Mma) for o in op.body.ops)]


def hinted_loops(fn: Function) -> list[ops.For]:
    """FOR ops without an MMA whose body loads tiles with `latency` hints (split-K's FINISH sums
    a tile per iteration): these get `tl.range(num_stages=)` too, the loads then in flight
    together (Triton pipelines loads feeding no dot only in loops given num_stages), but are
    never flattened into an enclosing loop."""
    return [op for op in fn.walk() if isinstance(op, ops.For) and not any(isinstance(o, ops.Mma) for o in op.body.ops)
            and any(isinstance(o, ops.Load) and o.latency is not None for o in op.body.ops)]


def staged_loops(fn: Function) -> list[ops.For]:
    """FOR ops that run as `tl.range(num_stages=)`: the pipelined loops, then the hinted ones
    (each buffers the tiles its body loads once per stage)."""
    return pipelined_loops(fn) + hinted_loops(fn)


def loop_stages(loop: ops.For, default: int, cap: int | None = None) -> int:
    """num_stages of pipelined `loop`: the largest `latency` hint among the loads directly in its
    body, at most what the shared-memory budget holds of the tiles it loads per iteration (at
    least 1); `default` (the kernel's stages) when no load there has a hint; at most `cap`."""
    hints = [o.latency for o in loop.body.ops if isinstance(o, ops.Load) and o.latency is not None]
    stages = max(1, min(max(hints), SMEM_BUDGET // max(_load_bytes(loop), 1))) if hints else default
    return stages if cap is None else min(stages, cap)


def _mma_loop_depth(fn: Function) -> int:
    """How many loops enclose the most deeply nested MMA (0: no MMA)."""
    def visit(block: list[Op], depth: int) -> int:
        best = 0
        for op in block:
            if isinstance(op, ops.Mma):
                best = max(best, depth + 1)
            inner = depth + isinstance(op, (ops.For, ops.While))
            for blk in op.blocks:
                best = max(best, visit(blk.ops, inner))
        return best
    return visit(fn.body.ops, 0)


def is_persistent(fn: Function) -> bool:
    """Whether an MMA runs in a loop nested inside another loop (a persistent tile loop)."""
    return _mma_loop_depth(fn) >= 3


# Ops after which blocks may wait on one another (spin on a flag another block sets): running
# several blocks one after another in one program could then deadlock.
_BLOCKS_MAY_WAIT = (ops.While, ops.AtomicRMW, ops.AtomicCAS)


GRID_LOOP_MIN_ACC = 128 * 128  # accumulator elements from which the grid loop pays off


def grid_loop_candidate(fn: Function) -> bool:
    """Whether to run `fn` as a persistent grid-stride loop (one program per SM slot, each
    running the kernel body for block ids p, p + P, p + 2P, ...): a kernel that computes one
    large MMA output tile per block. H200 sweep (benchmarks/results/schedule-sweep-*): with
    128x256 tiles the grid loop ran 3-6% faster than one program per tile (4000x3000x2000 bf16:
    0.82x torch instead of 0.80x), with 32x32 tiles 7-20% slower. Blocks that may wait on each
    other (while loops, atomics) keep one program per block."""
    if _mma_loop_depth(fn) != 2:
        return False
    if max(op.acc.tile.shape[-1] * op.acc.tile.shape[-2]
           for op in fn.walk() if isinstance(op, ops.Mma)) < GRID_LOOP_MIN_ACC:
        return False
    return not any(isinstance(op, _BLOCKS_MAY_WAIT) for op in fn.walk())


def flattenable(pipelined: list[ops.For]) -> bool:
    """Whether a loop around these pipelined loops may be flattened into them: not when one runs
    several MMAs (an attention loop), where Triton 3.6's pass pipeline fails on the flattened
    form ("PassManager::run failed" in TMA lowering; 128x128 attention tiles, sm_90)."""
    return all(sum(isinstance(o, ops.Mma) for o in loop.body.ops) <= 1 for loop in pipelined)


def tile_loops(fn: Function, pipelined: list[ops.For]) -> list[ops.For]:
    """FOR ops that directly contain a pipelined loop: a kernel's own persistent loop over
    output tiles."""
    inner = set(pipelined)
    return [op for op in fn.walk() if isinstance(op, ops.For) and any(o in inner for o in op.body.ops)]


def choose_config(fn: Function, max_stages: int | None = None, one_cta: bool = False,
                  deep: bool = False) -> LaunchConfig:
    """num_warps / num_stages for `fn`, overridden by its `options` where they name them; at
    most `max_stages` stages; `one_cta`: without its `num_ctas` option; `deep`: a launch of
    about one block per SM (DEEP_STAGES)."""
    mmas = [_mma_config(op, live, deep) for op, live in _live_accumulators(fn).items()]
    if mmas:
        _, warps, stages = max(mmas)
    else:
        largest = max((_numel(r.type.shape) for op in fn.walk() for r in op.results
                       if isinstance(r.type, TileType)), default=1)
        warps = _elementwise_warps(largest)
        loop_bytes = _loop_load_bytes(fn)
        stages = max(1, min(3, SMEM_BUDGET // loop_bytes)) if loop_bytes else 3
    options: dict[str, Any] = {"num_warps": warps, "num_stages": stages}
    ignored: dict[str, Any] = {}
    for key, value in fn.options.items():
        if key == "num_ctas" and one_cta:
            ignored[key] = value
        elif key in TRITON_OPTIONS and isinstance(value, int):
            options[key] = value
        else:
            ignored[key] = value
    if max_stages is not None:
        options["num_stages"] = min(options["num_stages"], max_stages)
    return LaunchConfig(options["num_warps"], options["num_stages"], options, ignored, mma_sync_only(fn))
