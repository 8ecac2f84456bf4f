"""The Tile IR: values, operations, blocks and kernel functions.

Every op is an `Operation` with an `Opcode`, operand values, result values, attributes and
(for control flow) nested blocks. The front end builds it; passes rewrite it; backends register
one rule per opcode. Operand conventions the front end guarantees (and the verifier checks):

- elementwise ops (UNARY, BINARY, COMPARE, WHERE) take operands of one shape; BINARY operands and
  the two WHERE values share one dtype; broadcasting and promotion are explicit ops before them;
- BROADCAST keeps the rank (dims of 1 grow); RESHAPE adds or removes dims;
- LOAD/STORE indices are int32/int64 scalars, one per array dim; STORE's tile has the array dtype;
- GATHER/SCATTER/ATOMIC index tiles, masks and values all have one shape.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any

from ..errors import Location
from .types import IRType, TileType


class Opcode(enum.Enum):
    CONST = "const"              # attrs: value            -> scalar
    BID = "bid"                  # attrs: axis             -> i32
    NUM_BLOCKS = "num_blocks"    # attrs: axis             -> i32
    ARRAY_SHAPE = "array_shape"  # (array) attrs: axis     -> i32 / i64
    ARRAY_STRIDE = "array_stride"  # (array) attrs: axis   -> i32 / i64
    ARRAY_SLICE = "array_slice"  # (array, start, stop) attrs: axis -> array (a view)
    LIST_GET = "list_get"        # (list, index)            -> array (element `index`; out of range: UB)
    LOAD = "load"                # (array, *index) attrs: shape, order, padding, latency, allow_tma
    STORE = "store"              # (array, *index, tile) attrs: order, latency, allow_tma
    GATHER = "gather"            # (array, *idx, pad[, mask]) attrs: has_mask, check_bounds
    SCATTER = "scatter"          # (array, *idx, value[, mask]) attrs: has_mask, check_bounds
    ATOMIC = "atomic"            # (array, *idx, *vals[, mask]) attrs: fn, order, scope, has_mask
    ARANGE = "arange"            # attrs: size             -> i32 tile (0..size-1)
    CAST = "cast"                # (x) attrs: dtype, rounding
    BITCAST = "bitcast"          # (x) attrs: dtype
    BROADCAST = "broadcast"      # (x) attrs: shape
    RESHAPE = "reshape"          # (x) attrs: shape
    PERMUTE = "permute"          # (x) attrs: axes
    CAT = "cat"                  # (a, b) attrs: axis
    EXTRACT = "extract"          # (x, *index) attrs: shape
    UNARY = "unary"              # (x) attrs: fn: UnaryFn
    BINARY = "binary"            # (x, y) attrs: fn: BinaryFn
    COMPARE = "compare"          # (x, y) attrs: fn: CompareFn -> bool
    WHERE = "where"              # (cond, x, y)
    REDUCE = "reduce"            # (x) attrs: fn: ReduceFn, axis, keepdims
    SCAN = "scan"                # (x) attrs: fn: ScanFn, axis, reverse
    REDUCE_WITH = "reduce_with"  # (*xs) attrs: axis, keepdims, identities; blocks: [combine(*a, *b)
                                 #   -> YIELD of one 0-d value per x]      -> one tile per x
    SCAN_WITH = "scan_with"      # (*xs) attrs: axis, reverse, identities; blocks: as REDUCE_WITH
    MMA = "mma"                  # (a, b, acc)
    PRINT = "print"              # (*tiles) attrs: pieces (str segments between tiles), formats
                                 #   (per tile: '{:<py spec>}', C '%..' specifier or None)
    ASSERT = "assert"            # (cond) attrs: message
    FOR = "for"                  # (lb, ub, step, *init) blocks: [body(iv, *carried)]
    IF = "if"                    # (cond) blocks: [then, else]
    WHILE = "while"              # (*init) blocks: [before(*carried) -> CONDITION, after(*carried)]
    YIELD = "yield"              # (*values): ends FOR body, IF branches, WHILE after
    CONDITION = "condition"      # (cond, *values): ends WHILE before


class UnaryFn(enum.Enum):
    NEG = "neg"
    ABS = "abs"
    NOT = "not"          # bitwise not (logical on bool)
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    FLOOR = "floor"
    CEIL = "ceil"
    ISNAN = "isnan"      # -> bool


class BinaryFn(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    TRUEDIV = "truediv"  # float operands only
    FLOORDIV = "floordiv"  # Python semantics: ints round toward -inf
    MOD = "mod"          # Python semantics: sign of the divisor
    POW = "pow"
    MIN = "min"          # NaN ignored
    MAX = "max"
    MIN_NAN = "min_nan"  # NaN propagated
    MAX_NAN = "max_nan"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"          # arithmetic for signed, logical for unsigned
    ATAN2 = "atan2"


class CompareFn(enum.Enum):
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


class ReduceFn(enum.Enum):
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ARGMAX = "argmax"    # -> int32, first index, NaN ignored
    ARGMIN = "argmin"


class ScanFn(enum.Enum):
    CUMSUM = "cumsum"
    CUMPROD = "cumprod"


class AtomicFn(enum.Enum):
    CAS = "cas"          # vals: expected, desired
    XCHG = "xchg"
    ADD = "add"
    MAX = "max"
    MIN = "min"
    AND = "and"
    OR = "or"
    XOR = "xor"


_ids = itertools.count()


class Value:
    """An SSA value: the result of one op or an argument of a block or function."""

    __slots__ = ("type", "id", "hint")

    def __init__(self, type: IRType, hint: str = "") -> None:
        self.type = type
        self.id = next(_ids)
        self.hint = hint

    @property
    def tile(self) -> TileType:
        assert isinstance(self.type, TileType), self.type
        return self.type

    def __repr__(self) -> str:
        return f"%{self.hint or 'v'}{self.id}: {self.type}"


@dataclass(eq=False)
class Block:
    """A straight-line list of ops with arguments (loop-carried values, induction variable)."""

    args: list[Value] = field(default_factory=list)
    ops: list["Operation"] = field(default_factory=list)

    @property
    def terminator(self) -> "Operation | None":
        return self.ops[-1] if self.ops else None


@dataclass(eq=False)
class Operation:
    opcode: Opcode
    operands: list[Value]
    results: list[Value]
    attrs: dict[str, Any]
    loc: Location | None
    blocks: list[Block] = field(default_factory=list)

    @property
    def result(self) -> Value:
        assert len(self.results) == 1
        return self.results[0]


@dataclass(eq=False)
class Function:
    """One specialized kernel: its runtime parameters (flattened) and body."""

    name: str
    params: list[Value]
    param_names: list[str]
    body: Block
    loc: Location | None
    options: dict[str, Any] = field(default_factory=dict)

    def walk(self):
        """Every op, depth first, in program order."""
        stack = [iter(self.body.ops)]
        while stack:
            op = next(stack[-1], None)
            if op is None:
                stack.pop()
                continue
            yield op
            for blk in reversed(op.blocks):
                stack.append(iter(blk.ops))
