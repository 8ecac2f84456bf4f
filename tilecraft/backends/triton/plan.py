"""The lowering plan: every analysis the Triton lowering consults, computed before emission.

`build_plan(fn, facts, target)` decides, from the IR, the array facts and the target alone,
what the rules would otherwise work out while writing statements: which tile loads and stores
go through which tensor descriptor (and its block shape and padding), which loop loads walk a
pointer tile carried by the loop, which array dims of each pointer access need a bounds mask,
which integer values are never negative, which loops are pipelined (with how many stages) or
flattened, whether the kernel runs as a grid-stride loop, and who uses each value. The plan is
frozen (read-only mappings keyed by the ops themselves, which hash by identity, or by value
ids) and emission only reads it, so lowering one plan twice writes the same source, and each
decision can be tested without generating code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

from ...errors import Location
from ...ir import Function, Op, Value, ops
from ...ir.types import ArrayType
from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import MemoryOrder, PaddingMode
from ...passes.ranges import at_least, value_ranges
from ..base import ArrayFacts
from . import ordering
from .emitter import Target, shape_of
from .heuristics import (LaunchConfig, choose_config, deep_schedule, flattenable, grid_loop_candidate, is_persistent,
                         loop_stages, pipelined_loops, staged_loops, tile_loops)
from .spelling import is_float

TileAccess = ops.Load | ops.Store


@dataclass(frozen=True)
class Descriptor:
    """A tensor descriptor of kernel parameter `array`, made once at the top of the kernel
    (creating one inside a loop would rebuild it every iteration): `block` is its block shape
    in array axis order, `padding` its padding option; `loc` is that of its first access."""

    array: Value
    block: tuple[int, ...]
    padding: str
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LoweringPlan:
    """What the rules read instead of deciding while they write (see the module docstring).

    config: launch options (num_warps, num_stages, ...).
    grid_loop: the kernel body runs inside a persistent grid-stride loop.
    descriptors: the descriptors to make, in order; descriptor_of: the tile load/store -> its one.
    pointer_tiles: FOR -> the loads directly in its body that walk a loop-carried pointer tile.
    masked_axes: pointer-path tile load/store -> the array axes whose bounds it must mask (the
      others are elided: `check_bounds=False`, or tiles never straddle the array's end there).
    nonneg: ids of integer values never negative (`passes.ranges`); positive: those at least 1
      (a loop step known positive needs no guard: control.py `loop_bounds`).
    stages: pipelined or hinted FOR -> its `tl.range(num_stages=)`; flattened: FORs with
      `flatten=True`; flatten_grid: the grid loop too.
    barriers: memory ops the block synchronizes before, keeping program order on an array
      (ordering.py).
    users: value id -> the ops that use it.
    """

    config: LaunchConfig
    grid_loop: bool
    descriptors: tuple[Descriptor, ...]
    descriptor_of: Mapping[Op, Descriptor]
    pointer_tiles: Mapping[ops.For, tuple[ops.Load, ...]]
    masked_axes: Mapping[Op, frozenset[int]]
    nonneg: frozenset[int]
    positive: frozenset[int]
    stages: Mapping[ops.For, int]
    flattened: frozenset[ops.For]
    flatten_grid: bool
    barriers: frozenset[Op]
    users: Mapping[int, tuple[Op, ...]]


def build_plan(fn: Function, facts: Sequence[ArrayFacts | None], target: Target) -> LoweringPlan:
    """The plan for lowering `fn` for `target`; `facts[i]` describes array param i (or None)."""
    grid_loop = target.grid_loop and grid_loop_candidate(fn)
    arrays = _array_facts(fn, facts)
    descriptor_of = _plan_descriptors(fn, arrays, target, grid_loop) if target.descriptors else {}
    pipelined = pipelined_loops(fn)
    wide = all(o in descriptor_of or _rows16(arrays.get(o.array.id))
               for loop in pipelined for o in loop.body.ops if isinstance(o, ops.Load))
    user_stages = isinstance(fn.options.get("num_stages"), int)  # the kernel's own choice stands
    deep, max_stages = deep_schedule(target.deep_pipeline and not user_stages, wide, target.max_stages)
    config = choose_config(fn, max_stages, target.one_cta, deep)
    flatten = target.flatten and flattenable(pipelined)
    users: dict[int, list[Op]] = {}
    for op in fn.walk():
        for v in op.operands:
            users.setdefault(v.id, []).append(op)
    ranges = value_ranges(fn)
    return LoweringPlan(
        config=config,
        grid_loop=grid_loop,
        descriptors=tuple(dict.fromkeys(descriptor_of.values())),
        descriptor_of=MappingProxyType(descriptor_of),
        pointer_tiles=MappingProxyType(_plan_pointer_tiles(fn, descriptor_of)),
        masked_axes=MappingProxyType({op: _masked_axes(op, arrays.get(op.array.id)) for op in fn.walk()
                                      if isinstance(op, (ops.Load, ops.Store)) and op not in descriptor_of}),
        nonneg=at_least(ranges, 0),
        positive=at_least(ranges, 1),
        stages=MappingProxyType({loop: loop_stages(loop, config.num_stages, max_stages)
                                 for loop in staged_loops(fn)}),
        flattened=frozenset(tile_loops(fn, pipelined) if flatten else ()),
        flatten_grid=flatten and grid_loop,
        barriers=ordering.barriers(fn),
        users=MappingProxyType({vid: tuple(us) for vid, us in users.items()}),
    )


# ---- array facts -----------------------------------------------------------------------------

def _rows16(facts: ArrayFacts | None) -> bool:
    """Whether an array's rows start on 16-byte boundaries (tiles load 16 bytes at a time)."""
    return facts is not None and facts.aligned16 and facts.unit_last and facts.strides16


def _array_facts(fn: Function, facts: Sequence[ArrayFacts | None]) -> dict[int, ArrayFacts | None]:
    """Array value id -> its facts: parameters' from `facts`; a slice keeps its source's unit
    last stride, stride alignment and offset width but not the base alignment or the dims'
    divisibility; list elements have none."""
    known: dict[int, ArrayFacts | None] = {}
    for i, p in enumerate(fn.params):
        if isinstance(p.type, ArrayType):
            known[p.id] = facts[i] if i < len(facts) else None
    for op in fn.walk():
        if isinstance(op, ops.ArraySlice):
            f = known.get(op.array.id)
            known[op.result.id] = None if f is None else ArrayFacts(
                aligned16=False, unit_last=f.unit_last, strides16=f.strides16, index64=f.index64)
    return known


def tile_shape(op: TileAccess) -> tuple[int, ...]:
    """The lanes of tile load/store `op` in V's axis order; () for a single element (a 0-d tile
    of an n-d array)."""
    shape = op.shape if isinstance(op, ops.Load) else shape_of(op.tile)
    return shape if len(shape) == len(op.index) else ()


def _masked_axes(op: TileAccess, facts: ArrayFacts | None) -> frozenset[int]:
    """The array axes along which pointer access `op` must mask lanes outside the array: none
    with `check_bounds=False`, every one for a single element, else those along which its
    tiles may straddle the array's end (`ArrayFacts.tiles_evenly`)."""
    if not op.check_bounds:
        return frozenset()
    shape = tile_shape(op)
    if not shape:
        return frozenset(range(len(op.index)))
    return frozenset(axis for k, axis in enumerate(op.order)
                     if not (facts is not None and facts.tiles_evenly(axis, shape[k])))


# ---- tensor descriptors ----------------------------------------------------------------------

def _descriptor_padding(mode: PaddingMode, dtype: DType) -> str | None:
    if mode in (PaddingMode.ZERO, PaddingMode.UNDETERMINED):
        return "zero"
    if mode is PaddingMode.NAN and (is_float(dtype) or dtype.is_restricted):
        return "nan"
    return None


def descriptor_block(op: TileAccess) -> tuple[tuple[int, ...], str] | None:
    """(block shape in array axis order, padding option) if tile load/store `op` may use a
    descriptor: a plain (WEAK) access that allows TMA, of a 2-5-d non-bool array, a full-rank
    tile whose last block dim spans 16 bytes or more and no dim more than 256 (stores only in
    array axis order)."""
    arr = op.array.type
    assert isinstance(arr, ArrayType)
    if op.allow_tma is False or op.memory_order is not MemoryOrder.WEAK or not 2 <= arr.ndim <= 5 \
            or arr.dtype is D.bool_:
        return None
    if isinstance(op, ops.Store):
        shape = shape_of(op.tile)
        padding: str | None = "zero"
        if op.order != tuple(range(arr.ndim)):
            return None
    else:
        shape = op.shape
        padding = _descriptor_padding(op.padding, arr.dtype)
    if padding is None or len(shape) != arr.ndim:
        return None
    block = [0] * arr.ndim
    for k, axis in enumerate(op.order):
        block[axis] = shape[k]
    if block[-1] * arr.dtype.itemsize < 16 or max(block) > 256:
        return None
    return tuple(block), padding


def prefer_descriptor(facts: ArrayFacts, persistent: bool) -> bool:
    """Whether a descriptor beats masked pointers for this array (H200, Triton 3.6, 2026-11-29
    benchmarks/results): pointers vectorize fully and ran 2-10% faster when every size and stride
    is a multiple of 16 elements, but 2-14x slower otherwise (e.g. 4000x3000x2000 bf16: 35 vs 491
    TFLOP/s); persistent matmuls ran 2-5% faster with descriptors either way."""
    return persistent or not facts.divisible16


def _plan_descriptors(fn: Function, arrays: dict[int, ArrayFacts | None], target: Target,
                      grid_loop: bool) -> dict[Op, Descriptor]:
    """The tile loads and stores of parameter arrays that use tensor descriptors (one per array,
    block shape and padding).

    Stores use descriptors only into dense arrays (`ArrayFacts.tma_store_ok`): on the H200
    (Triton 3.6) a descriptor store into a view with a gap after its last dimension wrote its
    padding lanes into the gap, while descriptor loads padded correctly."""
    persistent = grid_loop or is_persistent(fn)
    params = {p.id for p in fn.params}
    made: dict[Descriptor, Descriptor] = {}
    chosen: dict[Op, Descriptor] = {}
    for op in fn.walk():
        if not isinstance(op, (ops.Load, ops.Store)) or op.array.id not in params:
            continue  # views made in the kernel: no descriptors (yet)
        facts = arrays.get(op.array.id)
        choice = descriptor_block(op)
        if choice is None or facts is None:
            continue
        if not (facts.tma_store_ok if isinstance(op, ops.Store) else facts.tma_ok):
            continue
        if not target.force_descriptors and not prefer_descriptor(facts, persistent):
            continue
        desc = Descriptor(op.array, *choice, loc=op.loc)
        chosen[op] = made.setdefault(desc, desc)
    return chosen


# ---- loop-carried pointer tiles --------------------------------------------------------------

def _plan_pointer_tiles(fn: Function, descriptor_of: Mapping[Op, Descriptor]) -> dict[ops.For, tuple[ops.Load, ...]]:
    """The pointer-path tile loads directly in each FOR body whose indices are the induction
    variable or loop-invariant: each walks a pointer tile the loop carries, made before the
    loop and advanced at the end of each iteration. Like a hand-written Triton K loop, this ran
    ~5% faster than addressing from a fresh base per iteration (TC2 on the H200:
    benchmarks/results/probe-tc2-*)."""
    plan: dict[ops.For, tuple[ops.Load, ...]] = {}
    for loop in fn.walk():
        if not isinstance(loop, ops.For):
            continue
        iv = loop.body.args[0]
        # values a direct child may use that change per iteration (nested blocks' values are not visible)
        inside = {a.id for a in loop.body.args} | {r.id for o in loop.body.ops for r in o.results}
        loads = tuple(op for op in loop.body.ops
                      if isinstance(op, ops.Load) and op not in descriptor_of and len(op.shape) == len(op.index)
                      and op.array.id not in inside and any(v is iv for v in op.index)
                      and not any(v.id in inside and v is not iv for v in op.index))
        if loads:
            plan[loop] = loads
    return plan
