"""Fitting a kernel's schedule to the GPU: what to give up when Triton cannot build it.

The schedule the heuristics pick (pipeline depth, a flattened persistent grid loop, tensor
descriptors) can ask for more shared memory than the GPU has (Triton: "out of resource: shared
memory") or hit a Triton compiler failure ("PassManager::run failed", seen with a flattened
grid loop around a loop of descriptor loads feeding two MMAs, 128x128 attention tiles). cuTile
compiles such kernels, so tilecraft must too: `next_schedule` names the next, more modest
target to lower the kernel for. Out of shared memory, it first gives up a grid loop that is not
flattened, then lowers the pipeline depth, then gives up the flattened grid loop, the grid loop
and the descriptors (their staging buffers); a
compiler failure tries the schedule features first, then the depth. A kernel that fits nowhere
gets `unfit_error`, located, naming the tiles that take the memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from triton.runtime.errors import OutOfResources

from ...errors import Location, TileCompilerExecutionError
from ...ir import Function, ops
from ...language.dtypes import DType
from .emitter import Target, shape_of
from .heuristics import staged_loops

# Bytes of shared memory one block may use, by compute capability (CUDA programming guide,
# "maximum shared memory per thread block", opt-in), for compiling without the GPU at hand.
SHARED_MEMORY = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448, 103: 232448,
                 120: 101376, 121: 101376}


def shared_memory_limit(capability: int) -> int:
    """The shared memory a block may use on an NVIDIA GPU of `capability` (e.g. 90)."""
    return SHARED_MEMORY.get(capability, min(SHARED_MEMORY.values()))


def is_unfit(exc: BaseException) -> bool:
    """Whether `exc` says Triton could not build this schedule (rather than that the code is
    wrong): out of a resource, or its pass pipeline failed."""
    return isinstance(exc, OutOfResources) or (type(exc) is RuntimeError and "PassManager::run failed" in str(exc))


def describe_failure(exc: BaseException) -> str:
    """What went wrong, as the end of a sentence about the schedule or kernel ("it ...")."""
    if isinstance(exc, OutOfResources):
        return f"needs more {exc.name} than the GPU has ({exc.required} bytes, limit {exc.limit})"
    return "makes Triton's compiler fail (PassManager::run failed)"


@dataclass(frozen=True)
class Used:
    """What a lowering used: its deepest pipeline, whether it runs a grid loop (`flattened`:
    into its pipelined loop), tensor descriptors, and how many CTAs per block."""

    depth: int
    grid_loop: bool
    descriptors: bool
    ctas: int
    flattened: bool = False


Step = Callable[[Target, Used], "tuple[str, Target] | None"]


def _one_cta(target: Target, used: Used) -> tuple[str, Target] | None:
    if used.ctas <= 1:
        return None
    return "one CTA per block (the num_ctas hint not followed)", replace(target, one_cta=True)


def _no_unflattened_grid_loop(target: Target, used: Used) -> tuple[str, Target] | None:
    """A grid loop that is not flattened into the pipelined loop (attention: several MMAs) goes
    before pipeline depth: its buffers cost a stage, and without flattening it gains little
    (H200, attention 128x128: one program per block fits 3 stages and ran at 0.72x cuDNN, the
    grid loop with 2 at 0.68x; benchmarks/results/attention-probe-h200-2026-12-01-b.json)."""
    if not used.grid_loop or used.flattened:
        return None
    return _no_grid_loop(target, used)


def _shallower(target: Target, used: Used) -> tuple[str, Target] | None:
    if used.depth <= 1:
        return None
    return f"pipeline depth {used.depth - 1}", replace(target, max_stages=used.depth - 1)


def _unflattened(target: Target, used: Used) -> tuple[str, Target] | None:
    if not (used.grid_loop and target.flatten):
        return None
    return "the grid loop not flattened", replace(target, flatten=False)


def _no_grid_loop(target: Target, used: Used) -> tuple[str, Target] | None:
    if not used.grid_loop:
        return None
    return "one program per block (no grid loop)", replace(target, grid_loop=False)


def _no_descriptors(target: Target, used: Used) -> tuple[str, Target] | None:
    if not used.descriptors:
        return None
    return "no tensor descriptors (TMA)", replace(target, descriptors=False, force_descriptors=False)


_OUT_OF_MEMORY: tuple[Step, ...] = (_no_unflattened_grid_loop, _shallower, _unflattened, _no_grid_loop,
                                    _no_descriptors, _one_cta)
_COMPILER_FAILED: tuple[Step, ...] = (_one_cta, _unflattened, _no_grid_loop, _no_descriptors, _shallower)


def next_schedule(target: Target, exc: BaseException, used: Used) -> tuple[str, Target] | None:
    """(what changes, the target to lower for next) after the kernel lowered for `target`, using
    `used`, failed with `exc`; None when nothing is left to give up."""
    steps = _OUT_OF_MEMORY if isinstance(exc, OutOfResources) else _COMPILER_FAILED
    for step in steps:
        found = step(target, used)
        if found is not None:
            return found
    return None


Staged = tuple[str, int, Location | None]  # (what the tile is, its bytes, where it is made)


def staged_tiles(fn: Function) -> tuple[Staged, ...]:
    """The tiles a kernel keeps in shared memory: the operands of its MMAs and the tiles its
    pipelined or hinted loops load (buffered once per stage)."""
    found: list[Staged] = []
    for op in fn.walk():
        if isinstance(op, ops.Mma):
            for name, v in (("A", op.a), ("B", op.b)):
                found.append(_staged(f"MMA operand {name}", shape_of(v), v.tile.dtype, op.loc))
    for loop in staged_loops(fn):
        for o in loop.body.ops:
            if isinstance(o, ops.Load):
                found.append(_staged("tile loaded in a pipelined loop", o.shape, o.result.tile.dtype, o.loc))
    return tuple(found)


def _staged(what: str, shape: tuple[int, ...], dtype: DType, loc: Location | None) -> Staged:
    size = dtype.itemsize
    for d in shape:
        size *= d
    return f"{what}: {'x'.join(map(str, shape))} {dtype.name} ({size // 1024} KiB)", size, loc


def unfit_error(name: str, exc: BaseException, tried: list[str], staged: tuple[Staged, ...],
                loc: Location | None) -> TileCompilerExecutionError:
    """The error of a kernel that fits no schedule: what it needs, what was tried, and the tiles
    taking shared memory (the error points at the largest)."""
    lines = [f"Kernel `{name}` does not fit the GPU with any schedule tilecraft can pick: it "
             f"{describe_failure(exc)}."]
    if tried:
        lines.append("Tried, in order: the planned schedule, " + ", ".join(tried) + ".")
    if staged:
        lines.append("Tiles it keeps in shared memory (smaller tiles need less):")
        lines += [f"  {text}" + (f" at line {at.line}" if at else "") for text, _, at in staged]
    largest = max(staged, key=lambda s: s[1])[2] if staged else None
    return TileCompilerExecutionError("\n".join(lines), largest or loc)
