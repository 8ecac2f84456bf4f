"""Tile IR -> Triton source: one `@triton.jit` function per kernel, one rule per op class.

The rules live in `compute.py` (values, math, shapes, reductions, MMA), `control.py` (FOR, IF,
WHILE) and `memory.py` (loads, stores, gather/scatter, atomics). `lower()` first builds the
frozen `LoweringPlan` (plan.py), then lays out the module from it: imports, the helpers the
body calls, the kernel signature (each array becomes a pointer plus its shape and stride
scalars), the tensor descriptors and the body. `missing_rules()` lists op classes with neither
a rule nor an `UNSUPPORTED` reason (a test keeps it empty).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...errors import Location
from ...ir import Function, Op, ops
from ...ir.types import ArrayType, ListType
from ...language import dtypes as D
from ..base import ArrayFacts
from . import compute, control, memory, printing  # noqa: F401  (each registers its rules)
from . import interpret_workarounds as workarounds
from .emitter import RULES, UNSUPPORTED, ArrayParam, GridLoop, KernelWriter, ListParam, Target
from .fitting import Staged, staged_tiles
from .heuristics import LaunchConfig
from .helpers import HELPERS
from ...passes.resident_rows import Reread, reread
from .plan import LoweringPlan, build_plan
from .printing import PrintPlan
from .spelling import SIGNATURE_TYPES, tl_dtype

_HEADER = "import triton\nimport triton.language as tl\n"


@dataclass(frozen=True)
class LoweredKernel:
    """Generated source plus what compiling and launching it needs."""

    name: str
    source: str
    line_locs: dict[int, Location | None]  # 1-based line of `source` -> kernel location
    signature: dict[str, str]  # Triton parameter name -> Triton type ("*fp32", "i32", ...)
    aligned: tuple[int, ...]  # positions of pointer parameters known to be 16-byte aligned
    flatten: str  # `lambda <params>: (<Triton args>)`: kernel args -> Triton launch args
    helpers: tuple[str, ...]  # names of the helper functions defined before the kernel
    config: LaunchConfig
    def_line: int  # 1-based line of the kernel's `def` in `source`
    descriptor_arrays: tuple[int, ...]  # positions of the array arguments read through descriptors
    has_assert: bool
    loc: Location | None
    grid_params: tuple[str, ...] = ()  # grid-loop kernels: the parameters taking the grid's sizes
    asserts: tuple[tuple[str, Location | None], ...] = ()  # (message, location) of each ct.assert_
    depth: int = 1  # the deepest pipeline: the kernel's num_stages or a pipelined loop's
    staged: tuple[Staged, ...] = ()  # the tiles it keeps in shared memory (fitting.staged_tiles)
    prints: PrintPlan | None = None  # kernels with Print ops: their records (printing.py)
    launch: tuple[str, ...] = ()  # the expressions `flatten` returns, one per Triton argument
    flattened: bool = False  # grid-loop kernels: the grid loop is flattened into the pipelined loop
    host_descriptors: tuple[tuple[int, int, str], ...] = ()  # per host descriptor: see memory.descriptor_params
    reread: Reread | None = None  # the array its blocks pass over again and again (occupancy.py)

    @property
    def uses_descriptors(self) -> bool:
        return bool(self.descriptor_arrays)

    @property
    def grid_loop(self) -> bool:
        """Launch min(blocks, SM slots) programs; the grid's sizes are the last arguments."""
        return bool(self.grid_params)


def missing_rules() -> list[type[Op]]:
    """Op classes with neither a lowering rule nor a reasoned UNSUPPORTED entry."""
    return [cls for cls in ops.OP_CLASSES if cls not in RULES and not UNSUPPORTED.get(cls)]


_SIGNED_NARROW = (D.int8, D.int16)
"""Scalar parameters passed as int32 and narrowed in the kernel: Triton 3.6's GPU launcher packs
i8/i16 arguments as unsigned and rejects negative values ("unsigned byte integer is less than
minimum", H200 run of 2026-12-01)."""


def param_kernel_args(w: KernelWriter, fn: Function, facts: Sequence[ArrayFacts | None], aligned: list[int]
                       ) -> tuple[list[str], dict[str, str], list[str]]:
    """Triton parameters (annotated), their Triton types, and the launch-side expressions;
    appends the positions of 16-byte aligned pointers to `aligned`."""
    params, signature, launch = [], {}, []

    def add(name: str, dtype, arg: str) -> None:
        params.append(f"{name}: {tl_dtype(dtype)}")
        signature[name] = SIGNATURE_TYPES[dtype]
        launch.append(arg)

    for i, (p, pname) in enumerate(zip(fn.params, fn.param_names)):
        name = w.fresh(pname)
        if isinstance(p.type, ListType):  # device tables of the arrays' addresses, shapes and strides
            tables = [w.fresh(f"{name}_{part}") for part in ("ptrs", "shapes", "strides")]
            index = p.type.elem.index_dtype
            for table, dtype in zip(tables, (D.int64, index, index)):
                params.append(table)
                signature[table] = "*" + SIGNATURE_TYPES[dtype]
            launch.append(f"*list_tables(a{i}, {p.type.elem.index64})")
            w.lists[p.id] = ListParam(*tables, p.type.elem.ndim, p.type.elem.index64)
            continue
        if not isinstance(p.type, ArrayType):
            dtype = p.tile.dtype
            as_int = dtype in _SIGNED_NARROW or (dtype is D.bool_ and workarounds.bools_as_ints(w))
            add(name, D.int32 if as_int else dtype, f"int(a{i})" if dtype is D.bool_ and as_int else f"a{i}")
            w.alias(p, name)
            if as_int or workarounds.python_numbers(w):
                w.loc = fn.loc
                w.emit(f"{name} = tl.cast({name}, {tl_dtype(dtype)})")
                w.loc = None
            continue
        f: ArrayFacts | None = facts[i] if i < len(facts) else None
        index64 = p.type.index64 or bool(f and f.index64)
        unit_last = bool(f and f.unit_last) and p.type.ndim > 0
        shapes = [w.fresh(f"{name}_shape{k}") for k in range(p.type.ndim)]
        strides = [None if unit_last and k == p.type.ndim - 1 else w.fresh(f"{name}_stride{k}")
                   for k in range(p.type.ndim)]
        w.arrays[p.id] = ArrayParam(name, shapes, strides, index64)
        if f is not None and f.aligned16:
            aligned.append(len(params))
        params.append(name)
        signature[name] = "*" + SIGNATURE_TYPES[p.type.dtype]
        # Triton has no float8_e8m0fnu tensors (its launcher raises KeyError): such arrays travel
        # as their bytes, which is how the kernel reads them (spelling.TL_DTYPES)
        launch.append(f"a{i}.view(torch.uint8)" if p.type.dtype is D.float8_e8m0fnu else f"a{i}")
        index_dtype = D.int64 if index64 else D.int32
        for k, s in enumerate(shapes):
            add(s, index_dtype, f"a{i}.shape[{k}]")
        for k, s in enumerate(strides):
            if s is not None:
                add(s, index_dtype, f"a{i}.stride({k})")
        if f is not None:
            _divisibility_hints(w, fn, [*zip(shapes, f.dim_pow2), *zip(strides, f.stride_pow2)])
    return params, signature, launch


def _divisibility_hints(w: KernelWriter, fn: Function, sizes: Sequence[tuple[str | None, int]]) -> None:
    """Tell Triton what the specialization knows of each (size or stride parameter, power of
    two dividing it) below 16, which Triton's own specialization does not track (it marks
    multiples of 16 only): `x = x // d * d` gives x divisibility d, so loads along a dim whose
    size and row stride are multiples of 4 halves become 8-byte vectors (an sm_90 compile of
    the MatMul sample at 1000x500x700 fp16, 128x256x64 tiles: 16-bit loads with 2400 bytes of
    spills per thread become 8-byte cp.async with 176, as `tilecraft inspect` reports)."""
    w.loc = fn.loc
    for name, d in sizes:
        if name is not None and 1 < d < 16:
            w.emit(f"{name} = {name} // {d} * {d}")
    w.loc = None


def lower(fn: Function, facts: Sequence[ArrayFacts | None], target: Target,
          plan: LoweringPlan | None = None) -> LoweredKernel:
    """Generate the Triton module for `fn`; `facts[i]` describes array param i (or is None).
    `plan`: the plan to follow (by default `build_plan(fn, facts, target)`); emission only
    reads it."""
    if plan is None:
        plan = build_plan(fn, facts, target)
    w = KernelWriter(target, plan)
    kname = w.fresh(fn.name)
    aligned: list[int] = []
    params, signature, launch = param_kernel_args(w, fn, facts, aligned)
    host_descriptors = memory.descriptor_params(w, fn, params, signature, launch) if target.host_descriptors else ()
    printing.add_params(w, fn, params, signature)
    if plan.grid_loop:
        sizes = (w.fresh("grid_x"), w.fresh("grid_y"), w.fresh("grid_z"))
        for name in sizes:
            params.append(f"{name}: tl.int32")
            signature[name] = "i32"
        w.grid_loop = GridLoop(w.fresh("block"), sizes)
    memory.emit_descriptors(w)
    if w.grid_loop is not None:
        _lower_grid_loop(w, fn, plan.flatten_grid)
    else:
        w.lower_ops(fn.body.ops)
    if not w.lines:
        w.emit("pass")

    header = _HEADER
    if w.uses_libdevice:
        header += "from triton.language.extra import libdevice\n"
    where = f" ({fn.loc.file.rsplit('/', 1)[-1]}:{fn.loc.line})" if fn.loc else ""
    parts = [f"# Triton code generated by tilecraft from kernel `{fn.name}`{where}.\n{header}"]
    parts += [HELPERS[h] for h in w.helpers] + [source for _, source in w.functions]
    head = "\n\n".join(parts) + "\n\n"
    kernel_head = f"@triton.jit\ndef {kname}({', '.join(params)}):\n"
    first = head.count("\n") + kernel_head.count("\n") + 1
    source = head + kernel_head + "\n".join(w.lines) + "\n"
    line_locs = {first + i: loc for i, loc in w.line_locs.items()}
    flatten = flatten_lambda(len(fn.params), launch)
    asserts = tuple((op.message or "", op.loc) for op in fn.walk() if isinstance(op, ops.Assert))
    return LoweredKernel(kname, source, line_locs, signature, tuple(aligned), flatten,
                         (*w.helpers, *(name for name, _ in w.functions)), plan.config, first - 1,
                         _descriptor_arrays(fn, plan), bool(asserts), fn.loc, w.grid_loop.sizes if w.grid_loop else (),
                         asserts, max((plan.config.num_stages, *plan.stages.values())), staged_tiles(fn),
                         printing.plan_prints(fn), tuple(launch), plan.flatten_grid, host_descriptors, reread(fn))


def flatten_lambda(nargs: int, launch: Sequence[str]) -> str:
    """`lambda a0, ...: (<launch>, )`: a kernel's arguments -> the generated kernel's (the
    expressions `param_kernel_args` gives)."""
    return f"lambda {', '.join(f'a{i}' for i in range(nargs))}: ({''.join(e + ', ' for e in launch)})"


def _descriptor_arrays(fn: Function, plan: LoweringPlan) -> tuple[int, ...]:
    """Positions of the array parameters the plan reads or writes through tensor descriptors."""
    arrays = {desc.array.id for desc in plan.descriptors}
    return tuple(i for i, p in enumerate(fn.params) if p.id in arrays)


def _lower_grid_loop(w: KernelWriter, fn: Function, flatten: bool) -> None:
    """The body inside `for block in range(program_id, blocks, num_programs)`: each program runs
    the kernel for every P-th block id, where P programs are launched (see TritonKernel)."""
    loop = w.grid_loop
    x, y, z = loop.sizes
    w.loc = fn.loc
    w.emit(f"for {loop.tile} in tl.range(tl.program_id(0), {x} * {y} * {z}, tl.num_programs(0)"
           f"{', flatten=True' if flatten else ''}):")
    w.loc = None
    control.lower_block(w, fn.body.ops, [])
