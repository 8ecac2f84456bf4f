"""The kinds within op families (which unary, binary, compare, reduce, scan or atomic function)
and which of them take rounding options."""

from __future__ import annotations

import enum

from ..language.enums import RoundingMode
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
    """Read-modify-write functions of `AtomicRMW` (compare-and-swap is `AtomicCAS`)."""

    XCHG = "xchg"
    ADD = "add"
    MAX = "max"
    MIN = "min"
    AND = "and"
    OR = "or"
    XOR = "xor"


DIRECTED = (RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP)
"""The IEEE rounding modes an arithmetic op may carry (RN is the default)."""

ROUNDED_BINARY = {BinaryFn.ADD, BinaryFn.SUB, BinaryFn.MUL, BinaryFn.TRUEDIV}
"""Binary functions that take a rounding mode (and flush_to_zero)."""

ROUNDED_UNARY = {UnaryFn.SQRT}
"""Unary functions that take a directed rounding mode (APPROX/FULL: see `check` of Unary)."""
