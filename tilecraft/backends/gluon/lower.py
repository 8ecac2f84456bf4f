"""Tile IR of a streamed loop (passes/warp_specialize.py) -> a warp-specialized Gluon module.

The kernel allocates shared memory and mbarriers, then forks (`gl.warp_specialize`) into a
*load* partition (one warp: schedule.py's `load_body`) that keeps a ring of shared-memory slots
per streamed load filled through TMA, and *compute* partitions (compute.py) that run everything
else: one of the kernel's rows / 16 warps, or two of one warpgroup each, on the two row halves of
128-row tiles or on two of the user's 64-row blocks. With two, the kernel is persistent (one
program per SM looping over the blocks; schedule.py). A matmul's K loop gets the variant only
where it measured level or better (`worth_building`, `deals_evenly`).

Every op but the schedule's own (loads, stores, MMAs, the loop) is lowered by the Triton
backend's own rules (one semantics: same dtype policy, same rounding, NaN and flush-to-zero
handling); writer.py says how Gluon takes their text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

from ...ir import Function, Op
from ...passes.tile_split import row_split
from ...passes.warp_specialize import StreamedLoop, pair_blocks, streamed_loop
from ..base import ArrayFacts
from ..triton.emitter import Target
from ..triton.helpers import HELPERS
from ..triton.lower import flatten_lambda, param_kernel_args
from ..triton.plan import build_plan
from .compute import ComputePartition
from .layouts import NotLowerable, classes
from .schedule import TURNS, Descriptor, Schedule, depends
from .writer import GluonWriter, as_gluon, new_writer

_HEADER = """import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
"""

LOAD_REGS = 40
"""Registers per thread of the load partition (setmaxnreg): scalar index math only."""

COMPUTE_REGS = 240
MAX_REGS = 168
"""With two compute partitions: the registers per thread of the second (setmaxnreg) and the
kernel's launch bound, as the FA3-style Gluon probe ran them at 1.01x cuDNN
(benchmarks/gluon_attention_probe.py, results/gluon-attention-probe-h200-2026-12-01-b.json)."""

CHAINED_MIN_BLOCKS = 256
"""A chained kernel (a matmul) runs as the Gluon variant on grids of at least this many blocks
(about two waves on the H200) whose last round of programs is at least CHAINED_MIN_LAST_ROUND
full; other grids are the Triton kernel's, whose tile splitting deals them out better
(backends/tile_splitting.py). Measured on the H200: a first version that dealt blocks two by
two lost badly wherever the programs' shares came out unequal (benchmarks/results/
size-sweep-h200-2026-12-01-x.json against the Triton kernel in -y: 3072^3 0.60x against 0.87x,
4000x3000x2000 0.69x against 0.86x, 2048^3 on 64 programs 0.61x against 0.98x); dealt one by
one under this rule (-z against -aa, one call): fp16 / bf16 4096^3 1.00 / 0.94x against
0.98 / 0.97x, 8192^3 1.04 / 1.03x against 1.00 / 1.02x, 4000x3000x2000 0.88 / 0.87x against
0.89 / 0.86x."""

CHAINED_MIN_LAST_ROUND = 0.85
"""The share of the programs' block slots a chained kernel's grid must fill (blocks over rounds
times programs)."""


CHAINED_MIN_N = 256
"""A chained kernel (a matmul) gets the Gluon variant only with MMAs this wide: each compute
partition then multiplies 64 x 256 per instruction. The hand-written probe of the same schedule
(benchmarks/results/gluon-matmul-probe-h200-2026-12-01.json) ran 128x128 tiles slower than
Triton's kernel at fp16 4096^3 (0.86x against 0.91x and more) and 128x256 ones level or faster;
the compiler's variant on 128x128 tiles, fp16, bf16 and tf32, lost by 20-30%
(benchmarks/results/gluon-min-n-ab-h200-2026-12-01.txt)."""


def worth_building(found: StreamedLoop) -> bool:
    """Whether the Triton backend should give a streamed-loop kernel the Gluon variant: every
    one but a matmul (a chained loop streaming both operands) of MMAs narrower than
    CHAINED_MIN_N."""
    matmul = found.chained and not found.resident
    return not matmul or found.mmas[0].b.tile.shape[-1] >= CHAINED_MIN_N


def deals_evenly(blocks: int, sms: int) -> bool:
    """Whether a chained kernel runs a grid of `blocks` blocks on `sms` SMs as the Gluon variant
    (`CHAINED_MIN_BLOCKS`, `CHAINED_MIN_LAST_ROUND`)."""
    rounds = -(-blocks // sms)
    return blocks >= CHAINED_MIN_BLOCKS and blocks >= CHAINED_MIN_LAST_ROUND * sms * rounds

GRID_SIZES = ("grid_x", "grid_y", "grid_z")
"""A persistent kernel's last parameters: the grid of programs a launch of the user's grid asks
for (its axis 0 divided by `grid_divisor`), which its programs loop over (named apart from the
kernel's own parameters: `GluonLowered.grid_names`)."""


@dataclass(frozen=True)
class GluonLowered:
    """The generated module and what launching it needs."""

    name: str
    source: str
    signature: dict[str, str]  # the Triton backend's parameters (pointers, sizes, scalars)
    flatten: str  # as LoweredKernel.flatten
    aligned: tuple[int, ...]
    descriptors: tuple[Descriptor, ...]  # after the signature's parameters
    num_warps: int
    stages: int
    maxnreg: int | None = None
    grid_divisor: int = 1  # paired blocks: the launch grid's axis 0 divided by this (it must divide it)
    persistent: bool = False  # one program per SM looping over the blocks; takes the grid (grid_names) last
    grid_names: tuple[str, ...] = ()  # a persistent kernel's grid parameters (GRID_SIZES, made unique)
    units_paired: bool = False  # a persistent kernel's programs run units of two blocks (Schedule.tile_loop)
    chained: bool = False  # a matmul's loop (passes/warp_specialize.py): runs only grids `GluonKernel.takes`
    launch: tuple[str, ...] = ()  # as LoweredKernel.launch: `flatten`'s expressions


def lower(fn: Function, facts: Sequence[ArrayFacts | None], found: StreamedLoop) -> GluonLowered:
    """The Gluon module running `fn` with the schedule of the module docstring: 128-row tiles
    as two compute partitions of one warpgroup, each on its 64 rows (`tile_split.row_split`;
    both read the same ring slots); 64-row tiles as two partitions running two of the user's
    blocks (`warp_specialize.pair_blocks`: launched on half the grid); either only where the
    partitions' loops start alike (their upper bounds may differ: `Schedule.uneven`, paired
    causal blocks); streamed tiles that depend on the partition are loaded for each
    (`Schedule.per_piece`: a matmul's A rows). Else one partition of rows / 16 warps."""
    two = row_split(fn, 2) if found.rows == 128 else pair_blocks(fn) if found.rows == 64 else None
    split = None if two is None else streamed_loop(two)
    uneven = False
    if split is not None and split.rows == 64 and not depends(split, "start", two.params[-1]):
        fn_c, found_c, facts_c, consumers = two, split, [*facts, None], 2
        pairs = found.rows == 64
        uneven = depends(split, "upper", two.params[-1])
    else:
        fn_c, found_c, facts_c, consumers, pairs = fn, found, list(facts), 1, False
    target = Target(interpret=False, descriptors=False)
    plan = build_plan(fn_c, facts_c, target)
    if found_c.loop.step.id not in plan.positive:  # the partitions count slots by iteration
        raise NotLowerable("the streamed loop's step is not known to be positive")
    users: dict[int, list[Op]] = {vid: list(us) for vid, us in plan.users.items()}
    layouts = classes([found_c.prologue, found_c.loop.body.ops, found_c.epilogue], found_c.loop, users)
    lowered = _module(Schedule(fn, facts, fn_c, facts_c, found_c, plan, layouts, consumers, uneven))
    return dataclasses.replace(lowered, grid_divisor=2 if pairs else 1, chained=found_c.chained)


def _module(s: Schedule) -> GluonLowered:
    """The module: helpers, the partition functions, the kernel that allocates and forks."""
    f = s.found
    for st in (*f.resident, *f.streamed):
        s.desc(st.load.array, s.block(st))
    for op in s.stores:
        s.desc(op.array, op.tile.tile.shape)
    shared = s.shared_names()
    top = new_writer(s.plan, s.layouts)
    aligned: list[int] = []
    params, signature, launch = param_kernel_args(top, s.kernel_fn, s.kernel_facts, aligned)
    names = [p.split(":")[0] for p in params]
    descs = [d.name for d in s.descs.values()]
    kname = top.fresh(s.kernel_fn.name)
    part = ComputePartition(s)
    compute, helpers_c, functions_c = _partition(s, f"{kname}_compute", part.body, part.head, part.tail)
    load, helpers_l, functions_l = _partition(s, f"{kname}_load", s.load_body)
    sizes = [top.fresh(n) for n in GRID_SIZES] if s.persistent else []
    lines = [f"@gluon.jit\ndef {kname}({', '.join(params + descs + [f'{n}: tl.int32' for n in sizes])}):"]
    lines += ["    " + text for text in s.allocations(shared)]
    args = [", ".join(names + ([str(c)] if s.consumers > 1 else []) + descs + sizes + _passed(shared, c))
            for c in range(s.consumers)]
    partitions = [f"({kname}_compute, ({a}, ))" for a in args] + [f"({kname}_load, ({args[0]}, ))"]
    warps = [s.warps] * (s.consumers - 1) + [1]
    regs = [COMPUTE_REGS] * (s.consumers - 1) + [LOAD_REGS]
    lines.append(f"    gl.warp_specialize([{', '.join(partitions)}], {warps}, {regs})")
    helpers = list(dict.fromkeys(helpers_c + helpers_l))
    parts = [f"# Gluon code generated by tilecraft from kernel `{s.kernel_fn.name}` (warp-specialized)."
             f"\n{_HEADER}"]
    parts += [HELPERS[h] for h in helpers] + functions_c + functions_l + [compute, load, "\n".join(lines) + "\n"]
    return GluonLowered(kname, as_gluon("\n\n".join(parts)), signature, flatten_lambda(len(s.kernel_fn.params), launch),
                        tuple(aligned), tuple(s.descs.values()), s.warps, s.stages,
                        MAX_REGS if s.consumers > 1 else None, persistent=s.persistent, grid_names=tuple(sizes),
                        units_paired=s.persistent and s.units_paired, launch=tuple(launch))


def _passed(shared: list[tuple[str, str]], c: int) -> list[str]:
    """The shared buffers as compute partition `c` takes them: the ping-pong turns (`TURNS`,
    allocated under those names for partition 0) swapped for partition 1."""
    names = [n for n, _ in shared]
    return [TURNS[1 - TURNS.index(n)] if c == 1 and n in TURNS else n for n in names]


def _partition(s: Schedule, name: str, body: Callable[[GluonWriter], None],
               head: Callable[[GluonWriter], None] | None = None,
               tail: Callable[[GluonWriter], None] | None = None) -> tuple[str, list[str], list[str]]:
    """(source, helpers, generated functions) of one partition function: the parameters of
    `s.fn` (the kernel, or its pieces with `piece` last), the descriptors, the grid of programs
    (persistent kernels) and the shared buffers, then `head`'s statements, `body`'s in the loop
    over blocks (`Schedule.tile_loop`) and `tail`'s."""
    w = new_writer(s.plan, s.layouts)
    aligned: list[int] = []
    params, _, _ = param_kernel_args(w, s.fn, s.facts, aligned)
    names = [p.split(":")[0] for p in params]
    if s.consumers > 1:
        s.piece = names[-1]  # row_split's / pair_blocks's parameter, last
    sizes = [w.fresh(n) for n in GRID_SIZES] if s.persistent else []
    names += [d.name for d in s.descs.values()] + sizes + [n for n, _ in s.shared_names()]
    if head is not None:
        head(w)
    with s.tile_loop(w, sizes):
        body(w)
    if tail is not None:
        tail(w)
    if not w.lines:
        w.emit("pass")
    src = f"@gluon.jit\ndef {name}({', '.join(names)}):\n" + "\n".join(w.lines) + "\n"
    return src, list(w.helpers), [fn_src for _, fn_src in w.functions]
