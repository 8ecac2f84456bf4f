"""The writer that lowering rules append Triton statements to, and the table of those rules.

A `KernelWriter` owns the text of one kernel body: it names IR values, emits statements each
tagged with the kernel source line (`# file.py:LINE`) of the op that produced them, remembers
which generated line came from which op (for error messages), and collects the helper functions
the body calls. Every analysis the rules consult (descriptors, carried pointers, elided masks,
value ranges, pipelining) is read from the writer's frozen `LoweringPlan` (plan.py), computed
before the first statement; the writer itself only holds names.

Rules are registered per op class with `@rule(ops.X)`; an op class Triton cannot express goes
into `UNSUPPORTED` with the reason, so every class is accounted for (`lower.missing_rules`).
Each lowering table of a sub-kind (UnaryFn, BinaryFn, ...) is checked complete when its module
is imported (`covers`), so a new member cannot reach code generation unhandled.
"""

from __future__ import annotations

import keyword
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ...errors import Location, TileUnsupportedFeatureError
from ...ir import Op, Value
from ...ir.types import TileType
from ...language import dtypes as D
from ...language.dtypes import DType
from . import interpret_workarounds as workarounds
from ..tables import KindTables
from .helpers import HELPERS, NEEDS
from .spelling import fp8_bits, is_float, negative_zero, plain_literal_ok, py_literal, tl_dtype

if TYPE_CHECKING:
    from .plan import Descriptor, LoweringPlan


@dataclass(frozen=True)
class Target:
    """What the generated code may rely on.

    interpret: runs under Triton's CPU interpreter (no libdevice, bf16 kept as raw bits; see
      interpret_workarounds).
    descriptors: tensor descriptors (TMA) may be used for tile loads and stores.
    force_descriptors: use them wherever eligible, not only where they are expected to be faster
      (tests of the descriptor lowering).
    grid_loop: kernels that compute one MMA tile per block may run as a persistent grid-stride
      loop (`heuristics.grid_loop_candidate`).
    flatten: persistent tile loops (the grid loop, or a kernel's own loop around a pipelined K
      loop) get `flatten=True`, so Triton pipelines across output tiles.
    max_stages: at most this many pipeline stages anywhere (None: as the heuristics choose);
    one_cta: ignore a `num_ctas` hint (one CTA per block). Both are set when the chosen schedule
      does not fit the GPU (see fitting.py).
    cvt_tf32: the GPU rounds float32 to tfloat32 to nearest even in one instruction (PTX
      `cvt.rn.tf32.f32`, sm_90+): MMA operands are rounded with it (compute.py `_cast_tf32`).
    host_descriptors: the kernel takes its tensor descriptors as parameters, made on the host
      at each launch (`memory.descriptor_params`), instead of making them in every program.
    deep_pipeline: the kernel runs about one block per SM (a tile-split variant): its MMA
      loops get deeper pipelines where their loads are wide, shallower ones where not
      (`heuristics.deep_schedule`).
    grid_dependency: the GPU has programmatic dependent launches (PTX `griddepcontrol`, sm_90+):
      grid-dependency controls are emitted (else dropped: every launch then waits for the work
      before it anyway), and a kernel may be launched as a dependent launch.
    """

    interpret: bool
    descriptors: bool
    force_descriptors: bool = False
    grid_loop: bool = False
    flatten: bool = False
    max_stages: int | None = None
    one_cta: bool = False
    cvt_tf32: bool = False
    host_descriptors: bool = False
    deep_pipeline: bool = False
    grid_dependency: bool = False


@dataclass(frozen=True)
class GridLoop:
    """Names in a kernel lowered as a grid-stride loop: the loop's block id variable and the
    launch grid's three sizes (kernel parameters)."""

    tile: str
    sizes: tuple[str, str, str]


@dataclass
class ArrayParam:
    """How one array appears in the kernel: its pointer, shape and stride names."""

    pointer: str
    shapes: list[str]
    strides: list[str | None]  # None: a unit stride known from the facts (not passed)
    index64: bool

    @property
    def index_dtype(self) -> str:
        return "tl.int64" if self.index64 else "tl.int32"


@dataclass(frozen=True)
class ListParam:
    """A list argument in the kernel: device tables of its arrays' addresses (int64), shapes
    and strides (`ndim` per array, row-major), made at launch (`compile.list_tables`)."""

    ptrs: str
    shapes: str
    strides: str
    ndim: int
    index64: bool


Rule = Callable[["KernelWriter", Any], None]
RULES: dict[type[Op], Rule] = {}
UNSUPPORTED: dict[type[Op], str] = {}  # op class -> why Triton cannot express it


def rule(*classes: type[Op]) -> Callable[[Rule], Rule]:
    """Register the decorated function as the lowering of the op `classes`."""
    def register(fn: Rule) -> Rule:
        for cls in classes:
            assert cls not in RULES, f"two rules for {cls.__name__}"
            RULES[cls] = fn
        return fn
    return register


covers = KindTables("Triton backend")
KIND_TABLES = covers.tables
"""Sub-kind enum -> the lowering table that handles each of its members (checked by `covers`)."""


def _identifier(hint: str) -> str:
    name = re.sub(r"\W", "_", hint).strip("_") or "t"
    if name[0].isdigit():
        name = "t" + name
    return name


class KernelWriter:
    """Accumulates one kernel's body; rules call `emit`, `define`, `expr`, `tensor`."""

    index_expands = True
    """Whether `x[:, None]` may add unit dims to any tensor (Triton; Gluon's takes only tensors
    in a slice layout)."""

    def __init__(self, target: Target, plan: "LoweringPlan") -> None:
        self.target = target
        self.plan = plan  # every analysis the rules read: frozen, computed before emission
        self.lines: list[str] = []
        self.line_locs: dict[int, Location | None] = {}  # index in `lines` -> op location
        self.helpers: list[str] = []
        self.uses_libdevice = False
        self._indent = 1
        self._exprs: dict[int, str] = {}
        self._literals: set[int] = set()
        self._taken = set(keyword.kwlist) | set(HELPERS) | {"tl", "triton", "libdevice", "float", "range"}
        self.loc: Location | None = None
        self.arrays: dict[int, ArrayParam] = {}  # array value id -> its kernel names
        self.lists: dict[int, ListParam] = {}  # list value id -> its tables
        self.grid_loop: GridLoop | None = None  # names of the grid loop (when plan.grid_loop)
        self.descriptors: dict["Descriptor", str] = {}  # plan descriptor -> the variable holding it
        self.pointer_tiles: dict[Op, str] = {}  # load with a carried pointer tile -> its variable
        self.functions: list[tuple[str, str]] = []  # (name, source) of generated @triton.jit functions
        self.printing: Any = None  # kernels that print: the hidden parameters (printing.PrintParams)

    # ---- names -----------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A new identifier not used anywhere in the kernel, derived from `hint`."""
        base = _identifier(hint)
        name, n = base, 0
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        return name

    def define(self, value: Value, hint: str = "t") -> str:
        """Give `value` a new variable name and return it."""
        name = self.fresh(value.hint or hint)
        self._exprs[value.id] = name
        return name

    def alias(self, value: Value, expr: str, literal: bool = False) -> None:
        """Make `value` stand for `expr` (no statement); `literal`: a bare Python constant."""
        self._exprs[value.id] = expr
        if literal:
            self._literals.add(value.id)
        else:
            self._literals.discard(value.id)

    def expr(self, value: Value) -> str:
        """The value's expression; may be a bare literal (fine as an operand of + - * ...)."""
        return self._exprs[value.id]

    def is_literal(self, value: Value) -> bool:
        return value.id in self._literals

    def tensor(self, value: Value) -> str:
        """The value as a typed Triton tensor (literals become `tl.full([], v, dtype)`)."""
        text = self._exprs[value.id]
        if value.id in self._literals:
            return f"tl.full([], {text}, {tl_dtype(value.tile.dtype)})"
        return text

    def const(self, value: bool | int | float, dtype: DType) -> tuple[str, bool]:
        """(expression, is_bare_literal) for a constant of `dtype`."""
        if (is_float(dtype) or dtype.is_restricted) and value == 0 and math.copysign(1.0, value) < 0:
            return negative_zero(dtype), False
        lit = py_literal(value, dtype)
        if plain_literal_ok(value, dtype):
            return lit, True
        if dtype is D.bfloat16:
            return workarounds.bf16_constant(self, value), False
        if dtype.is_restricted and dtype.bitwidth == 8:
            return fp8_bits(value, dtype), False
        return f"tl.full([], {lit}, {tl_dtype(dtype)})", False

    # ---- statements ------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        """Append one statement, commented with the current op's kernel source line."""
        line = "    " * self._indent + text
        if self.loc is not None:
            line += f"  # {self.loc.file.rsplit('/', 1)[-1]}:{self.loc.line}"
        self.line_locs[len(self.lines)] = self.loc
        self.lines.append(line)

    def assign(self, value: Value, text: str, hint: str = "t") -> str:
        """`name = text` for a new name of `value`; returns the name."""
        name = self.define(value, hint)
        self.emit(f"{name} = {text}")
        return name

    @contextmanager
    def indented(self) -> Iterator[None]:
        """Emit the statements of the `with` body one level deeper."""
        self._indent += 1
        try:
            yield
        finally:
            self._indent -= 1

    def cast(self, text: str, src: DType, dst: DType, extra: str = "") -> str:
        """`text` (of dtype `src`) converted to `dst`; `extra`: more tl.cast arguments. Triton
        converts an 8-bit float only to and from 16- and 32-bit floats (the others, the other
        8-bit float too, do not compile for the GPU, and float64 <-> fp8 fails or rounds twice
        under its CPU interpreter), so the others go through float32: exact from fp8, exact
        or out of fp8's range anyway from integers, and rounded to odd from float64, so that
        the cast rounds once. float8_e5m2 to bfloat16 goes through float32 too: Triton converts
        it by moving the bits and multiplying by 2**112 (sm_90 PTX: `mul.rn.bf16x2`), which makes
        its infinities and NaNs finite (found on the H200 by test_astype_from_fp8_every_code)."""
        fp8 = D.FLOAT8_VALUE_DTYPES
        others = {src, dst} - set(fp8)
        direct = (len(others) == 1 and others <= {D.float16, D.bfloat16, D.float32}
                  and (src, dst) != (D.float8_e5m2, D.bfloat16))
        if not extra and src is not dst and (src in fp8 or dst in fp8) and not direct:
            if src is D.float64:
                wide = f"tl.cast({self.need_helper('_tcr_to_odd32')}({text}), tl.float32, bitcast=True)"
            else:
                wide = self.cast(text, src, D.float32)
            return self.cast(wide, D.float32, dst)
        if not extra:
            special = workarounds.cast(self, text, src, dst)
            if special is not None:
                return special
        return f"tl.cast({text}, {tl_dtype(dst)}{extra})"

    def need_helper(self, name: str) -> str:
        """Include helper `name` (helpers.py, interpret_workarounds.py, rounding.py) and those it
        calls; returns the name to call."""
        for dep in NEEDS[name]:
            self.need_helper(dep)
        if name not in self.helpers:
            self.helpers.append(name)
        return name

    def function(self, hint: str, params: Sequence[Value | None], body: list[Op], returns: Sequence[Value]) -> str:
        """Define a module-level `@triton.jit` function computing `returns` from `params` (None: a
        parameter the body does not use) with the ops of `body` (e.g. the combine function of a
        custom reduction); returns its name."""
        sub = KernelWriter(self.target, self.plan)
        names = [sub.define(p, f"a{i}") if p is not None else sub.fresh(f"unused{i}") for i, p in enumerate(params)]
        sub.lower_ops(body)
        sub.emit(f"return {', '.join(sub.tensor(v) for v in returns)}")
        for helper in sub.helpers:
            self.need_helper(helper)
        self.uses_libdevice |= sub.uses_libdevice
        name = self.fresh(hint)
        self.functions.append((name, f"@triton.jit\ndef {name}({', '.join(names)}):\n" + "\n".join(sub.lines)))
        return name

    def libdevice(self, fn: str) -> str:
        self.uses_libdevice = True
        return f"libdevice.{fn}"

    def unsupported(self, what: str) -> TileUnsupportedFeatureError:
        """The error to raise for something Triton cannot express, at the current op."""
        return TileUnsupportedFeatureError(f"The Triton backend does not support {what}", self.loc)

    # ---- blocks ----------------------------------------------------------------------------
    def lower_ops(self, ops: list[Op]) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_op(self, op: Op) -> None:
        outer, self.loc = self.loc, op.loc or self.loc
        try:
            packed = _packed_dtype(op)
            if packed is not None:
                raise self.unsupported(f"{packed} tiles (Triton has no {packed.bitwidth}-bit type)")
            fn = RULES.get(type(op))
            if fn is None:
                raise self.unsupported(f"{op.name}: {UNSUPPORTED.get(type(op), 'no rule')}")
            if op in self.plan.barriers:
                self.emit("tl.debug_barrier()")
            fn(self, op)
        finally:
            self.loc = outer


def _packed_dtype(op: Op) -> DType | None:
    """A sub-byte dtype (float4_e2m1fn) among the op's tile operands and results, if any."""
    for v in (*op.operands, *op.results):
        if isinstance(v.type, TileType) and v.type.dtype in D.PACKED_DTYPES:
            return v.type.dtype
    return None


def broadcast_index(name: str, axis: int, rank: int) -> str:
    """`name` (a 1-D tile) indexed to broadcast along `axis` of a rank-`rank` tile."""
    if rank <= 1:
        return name
    return f"{name}[{', '.join(':' if k == axis else 'None' for k in range(rank))}]"


def shape_of(value: Value) -> tuple[int, ...]:
    t = value.type
    return t.shape if isinstance(t, TileType) else ()
