"""Launch configuration (num_warps, num_stages) chosen from the tile shapes in a kernel.

Matrix-multiply kernels are sized by their largest MMA: the accumulator decides the warps and
shared memory per pipeline stage (one A and one B tile) caps the stages. The H200 figures that
anchor these choices (Triton 3.6, fp16, tensor descriptors): 128x256x64 with 8 warps and 3
stages is the best plain config (0.92x cuBLAS); 128x128x64 runs best with 4 warps and 4 stages.
Other kernels get warps by their largest tile (about 8 elements per thread at most).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import Function, Opcode, Operation
from ...ir.types import TileType

SMEM_BUDGET = 200 * 1024  # bytes of shared memory pipelining may use (H100/H200: 227 KiB)
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # fn.options passed through


@dataclass(frozen=True)
class LaunchConfig:
    num_warps: int
    num_stages: int
    options: dict[str, Any]  # every Triton launch option (num_warps/num_stages included)
    ignored: dict[str, Any]  # kernel options with no Triton equivalent, kept for inspection


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _mma_config(op: Operation) -> tuple[int, int, int]:
    """(accumulator elements, warps, stages) for one MMA."""
    a, acc = op.operands[0].tile, op.operands[2].tile
    m, k = a.shape[-2], a.shape[-1]
    n = acc.shape[-1]
    per_stage = (m * k + k * n) * a.dtype.itemsize
    if m * n >= 128 * 256:
        warps, cap = 8, 3
    elif m * n >= 64 * 64:
        warps, cap = 4, 4
    else:
        warps, cap = 4, 3
    return m * n, warps, max(2, min(cap, SMEM_BUDGET // max(per_stage, 1)))


def _elementwise_warps(numel: int) -> int:
    for limit, warps in ((128, 1), (512, 2), (2048, 4), (8192, 8)):
        if numel <= limit:
            return warps
    return 16


def _loop_load_bytes(fn: Function) -> int:
    """Bytes of the tiles loaded in the busiest loop body (what pipelining buffers)."""
    best = 0
    for op in fn.walk():
        if op.opcode in (Opcode.FOR, Opcode.WHILE):
            total = sum(_numel(o.result.tile.shape) * o.result.tile.dtype.itemsize
                        for blk in op.blocks for o in blk.ops if o.opcode == Opcode.LOAD)
            best = max(best, total)
    return best


def pipelined_loops(fn: Function) -> set[int]:
    """ids of FOR ops whose body loads tiles and runs an MMA: these get `tl.range(num_stages=)`."""
    found = set()
    for op in fn.walk():
        if op.opcode == Opcode.FOR:
            codes = {o.opcode for o in op.blocks[0].ops}
            if Opcode.LOAD in codes and Opcode.MMA in codes:
                found.add(id(op))
    return found


def _mma_loop_depth(fn: Function) -> int:
    """How many loops enclose the most deeply nested MMA (0: no MMA)."""
    def visit(ops: list[Operation], depth: int) -> int:
        best = 0
        for op in ops:
            if op.opcode == Opcode.MMA:
                best = max(best, depth + 1)
            inner = depth + (op.opcode in (Opcode.FOR, Opcode.WHILE))
            for blk in op.blocks:
                best = max(best, visit(blk.ops, inner))
        return best
    return visit(fn.body.ops, 0)


def is_persistent(fn: Function) -> bool:
    """Whether an MMA runs in a loop nested inside another loop (a persistent tile loop)."""
    return _mma_loop_depth(fn) >= 3


# Ops after which blocks may wait on one another (spin on a flag another block sets): running
# several blocks one after another in one program could then deadlock.
_BLOCKS_MAY_WAIT = {Opcode.WHILE, Opcode.ATOMIC}


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
    if max(op.operands[2].tile.shape[-1] * op.operands[2].tile.shape[-2]
           for op in fn.walk() if op.opcode == Opcode.MMA) < GRID_LOOP_MIN_ACC:
        return False
    return not any(op.opcode in _BLOCKS_MAY_WAIT for op in fn.walk())


def tile_loops(fn: Function, pipelined: set[int]) -> set[int]:
    """ids of FOR ops that directly contain a pipelined loop: a kernel's own persistent loop
    over output tiles."""
    return {id(op) for op in fn.walk() if op.opcode == Opcode.FOR
            and any(id(inner) in pipelined for inner in op.blocks[0].ops)}


def choose_config(fn: Function) -> LaunchConfig:
    """num_warps / num_stages for `fn`, overridden by its `options` where they name them."""
    mmas = [_mma_config(op) for op in fn.walk() if op.opcode == Opcode.MMA]
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
        if key in TRITON_OPTIONS and isinstance(value, int):
            options[key] = value
        else:
            ignored[key] = value
    return LaunchConfig(options["num_warps"], options["num_stages"], options, ignored)
