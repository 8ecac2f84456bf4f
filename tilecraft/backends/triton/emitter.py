"""The writer that lowering rules append Triton statements to, and the table of those rules.

A `KernelWriter` owns the text of one kernel body: it names IR values, emits statements each
tagged with the kernel source line (`# file.py:LINE`) of the op that produced them, remembers
which generated line came from which op (for error messages), and collects the helper functions
the body calls. Rules are registered per `Opcode` with `@rule`; an opcode Triton cannot express
goes into `UNSUPPORTED` with the reason, so every opcode is accounted for.
"""

from __future__ import annotations

import keyword
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from ...errors import Location, TileUnsupportedFeatureError
from ...ir import Opcode, Operation, Value
from ...ir.types import TileType
from ...language import dtypes as D
from ...language.dtypes import DType
from ..base import ArrayFacts
from .helpers import HELPERS, NEEDS


@dataclass(frozen=True)
class Target:
    """What the generated code may rely on.

    interpret: runs under Triton's CPU interpreter (no libdevice, bf16 kept as raw bits).
    descriptors: tensor descriptors (TMA) may be used for tile loads and stores.
    force_descriptors: use them wherever eligible, not only where they are expected to be faster
      (tests of the descriptor lowering).
    grid_loop: kernels that compute one MMA tile per block may run as a persistent grid-stride
      loop (`heuristics.grid_loop_candidate`).
    flatten: persistent tile loops (the grid loop, or a kernel's own loop around a pipelined K
      loop) get `flatten=True`, so Triton pipelines across output tiles.
    """

    interpret: bool
    descriptors: bool
    force_descriptors: bool = False
    grid_loop: bool = False
    flatten: bool = False


@dataclass(frozen=True)
class GridLoop:
    """Names in a kernel lowered as a grid-stride loop: the loop's block id variable and the
    launch grid's three sizes (kernel parameters)."""

    tile: str
    sizes: tuple[str, str, str]


@dataclass
class ArrayParam:
    """How one array parameter appears in the kernel: its pointer, shape and stride names."""

    pointer: str
    shapes: list[str]
    strides: list[str | None]  # None: a unit stride known from the facts (not passed)
    index64: bool
    facts: ArrayFacts | None

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


Rule = Callable[["KernelWriter", Operation], None]
RULES: dict[Opcode, Rule] = {}
UNSUPPORTED: dict[Opcode, str] = {}


def rule(*opcodes: Opcode) -> Callable[[Rule], Rule]:
    """Register the decorated function as the lowering of `opcodes`."""
    def register(fn: Rule) -> Rule:
        for opcode in opcodes:
            assert opcode not in RULES, f"two rules for {opcode}"
            RULES[opcode] = fn
        return fn
    return register


_TL_NAMES = {
    D.bool_: "int1", D.int8: "int8", D.int16: "int16", D.int32: "int32", D.int64: "int64",
    D.uint8: "uint8", D.uint16: "uint16", D.uint32: "uint32", D.uint64: "uint64",
    D.float16: "float16", D.bfloat16: "bfloat16", D.float32: "float32", D.float64: "float64",
    D.tfloat32: "float32",  # tf32 is fp32 data; only tl.dot's input_precision differs
    D.float8_e4m3fn: "float8e4nv", D.float8_e5m2: "float8e5",
    D.float8_e8m0fnu: "uint8",  # no Triton type: moved as raw bytes (load/store/bitcast only)
}


SIGNATURE_TYPES = {
    D.bool_: "u1", D.int8: "i8", D.int16: "i16", D.int32: "i32", D.int64: "i64",
    D.uint8: "u8", D.uint16: "u16", D.uint32: "u32", D.uint64: "u64",
    D.float16: "fp16", D.bfloat16: "bf16", D.float32: "fp32", D.float64: "fp64",
    D.tfloat32: "fp32", D.float8_e4m3fn: "fp8e4nv", D.float8_e5m2: "fp8e5", D.float8_e8m0fnu: "u8",
}
"""Triton's signature spelling of each dtype (as in `triton.compile` signatures)."""


# 8-bit float formats for the interpreter's conversion: mantissa bits, exponent bias, largest
# finite code, code on overflow, NaN code
_FP8_FORMAT = {D.float8_e4m3fn: (3, 7, 0x7E, 0x7F, 0x7F), D.float8_e5m2: (2, 15, 0x7B, 0x7C, 0x7E)}


def tl_dtype(dtype: DType) -> str:
    """The `tl.<dtype>` spelling of a tile dtype."""
    return "tl." + _TL_NAMES[dtype]


def is_float(dtype: DType) -> bool:
    """Arithmetic floats (tfloat32 counts: it is fp32 data)."""
    return dtype.is_float or dtype is D.tfloat32


def py_literal(value, dtype: DType) -> str:
    """Python source for a constant of `dtype` (a plain literal; the caller types it)."""
    if dtype is D.bool_:
        return "True" if value else "False"
    if is_float(dtype) or dtype.is_restricted:
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        text = repr(value)
    else:
        text = str(int(value))
    return f"({text})" if text.startswith("-") else text


def negative_zero(dtype: DType) -> str:
    """-0.0 of `dtype`: Triton turns every constant equal to 0 into +0.0, so it is computed."""
    text = "tl.full([], 0.0, tl.float32) * -1.0"
    return text if tl_dtype(dtype) == "tl.float32" else f"tl.cast({text}, {tl_dtype(dtype)})"


def _plain_literal_ok(value, dtype: DType) -> bool:
    """Whether Triton types a bare Python literal of this value as exactly `dtype`."""
    if dtype in (D.bool_, D.int32):
        return True
    if dtype is D.float32:
        a = abs(float(value))
        return a == 0.0 or math.isinf(a) or math.isnan(a) or 2.0 ** -126 <= a <= 3.4e38
    return False


def _identifier(hint: str) -> str:
    name = re.sub(r"\W", "_", hint).strip("_") or "t"
    if name[0].isdigit():
        name = "t" + name
    return name


class KernelWriter:
    """Accumulates one kernel's body; rules call `emit`, `define`, `expr`, `tensor`."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.lines: list[str] = []
        self.line_locs: dict[int, Location | None] = {}  # index in `lines` -> op location
        self.helpers: list[str] = []
        self.uses_libdevice = False
        self._indent = 1
        self._exprs: dict[int, str] = {}
        self._literals: set[int] = set()
        self._taken = set(keyword.kwlist) | set(HELPERS) | {"tl", "triton", "libdevice", "float", "range"}
        self.loc: Location | None = None
        self.arrays: dict[int, ArrayParam] = {}  # array value id -> its kernel parameters
        self.lists: dict[int, ListParam] = {}  # list value id -> its tables
        self.plans: dict[int, str] = {}  # id(LOAD op) -> the tensor descriptor it uses
        self.pipelined: dict[int, int] = {}  # id(FOR op) -> num_stages of its tl.range
        self.users: dict[int, list[Operation]] = {}  # value id -> the ops that use it
        self.grid_loop: GridLoop | None = None
        self.nonneg: set[int] = set()  # ids of integer values known never to be negative
        self.increments: dict[int, str] = {}  # id(LOAD op) -> its loop-carried pointer tile
        self.functions: list[tuple[str, str]] = []  # (name, source) of generated @triton.jit functions
        self.flattened: set[int] = set()  # id(FOR op) of user tile loops that get flatten=True

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

    def const(self, value, dtype: DType) -> tuple[str, bool]:
        """(expression, is_bare_literal) for a constant of `dtype`."""
        if (is_float(dtype) or dtype.is_restricted) and value == 0 and math.copysign(1.0, value) < 0:
            return negative_zero(dtype), False
        lit = py_literal(value, dtype)
        if _plain_literal_ok(value, dtype):
            return lit, True
        if dtype is D.bfloat16:  # the interpreter cannot make bf16 constants: convert from fp32
            return f"tl.cast(tl.full([], {lit}, tl.float32), tl.bfloat16)", False
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
        """`text` (of dtype `src`) converted to `dst`; `extra`: more tl.cast arguments."""
        if self.target.interpret and not extra and src is not dst:
            special = self._interpreter_cast(text, src, dst)
            if special is not None:
                return special
        return f"tl.cast({text}, {tl_dtype(dst)}{extra})"

    def _interpreter_cast(self, text: str, src: DType, dst: DType) -> str | None:
        """Conversions Triton's interpreter gets wrong, spelled out: to bfloat16 it truncates
        (and converts integers as if bfloat16 were uint16), to 8-bit floats it rounds without
        carrying into the exponent, and from e5m2 to float16 it loses values."""
        if src is D.float8_e5m2 and dst is D.float16:  # e5m2 is the top byte of float16
            return (f"tl.cast(tl.cast(tl.cast({text}, tl.uint8, bitcast=True), tl.uint16) << 8, "
                    f"tl.float16, bitcast=True)")
        if dst in _FP8_FORMAT:
            if src is not D.float32:
                text = f"tl.cast({text}, tl.float32)"
            args = ", ".join(map(str, _FP8_FORMAT[dst]))
            return f"tl.cast({self.need_helper('_tc_to_fp8_interp')}({text}, {args}), {tl_dtype(dst)}, bitcast=True)"
        if dst is not D.bfloat16:
            return None
        if src is D.float32:
            return f"{self.need_helper('_tc_to_bf16_interp')}({text})"
        if src.bitwidth <= 16:  # exact in float32
            return f"{self.need_helper('_tc_to_bf16_interp')}(tl.cast({text}, tl.float32))"
        if src is not D.float64:
            text = f"tl.cast({text}, tl.float64)"
        return f"{self.need_helper('_tc_f64_to_bf16_interp')}({text})"

    def need_helper(self, name: str) -> str:
        """Include helper `name` (helpers.py) and those it calls; returns the name to call."""
        for dep in NEEDS[name]:
            self.need_helper(dep)
        if name not in self.helpers:
            self.helpers.append(name)
        return name

    def function(self, hint: str, params: list[Value], body: list[Operation], returns: list[Value]) -> str:
        """Define a module-level `@triton.jit` function computing `returns` from `params` with the
        ops of `body` (e.g. the combine function of a custom reduction); returns its name."""
        sub = KernelWriter(self.target)
        names = [sub.define(p, f"a{i}") for i, p in enumerate(params)]
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
        return TileUnsupportedFeatureError(f"The Triton backend does not support {what}", self.loc)

    # ---- blocks ----------------------------------------------------------------------------
    def lower_ops(self, ops: list[Operation]) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_op(self, op: Operation) -> None:
        outer, self.loc = self.loc, op.loc or self.loc
        try:
            fn = RULES.get(op.opcode)
            if fn is None:
                raise self.unsupported(f"{op.opcode.value}: {UNSUPPORTED.get(op.opcode, 'no rule')}")
            fn(self, op)
        finally:
            self.loc = outer


def broadcast_index(name: str, axis: int, rank: int) -> str:
    """`name` (a 1-D tile) indexed to broadcast along `axis` of a rank-`rank` tile."""
    if rank <= 1:
        return name
    return f"{name}[{', '.join(':' if k == axis else 'None' for k in range(rank))}]"


def shape_of(value: Value) -> tuple[int, ...]:
    t = value.type
    return t.shape if isinstance(t, TileType) else ()
