"""The kinds within op families (which unary, binary, compare, reduce, scan or atomic function)
and which of them take rounding options."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..language import dtypes
from ..language.dtypes import DType
from ..language.enums import RoundingMode
class UnaryFn(enum.Enum):
    """Elementwise functions of one tile. The value is the name of the public function
    (`tilecraft.language.ops`) that applies it; `UNARY_RULES` gives its typing rule."""

    NEG = "negative"
    ABS = "abs"
    NOT = "bitwise_not"  # logical not on bool
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
    ISNAN = "isnan"


class Operand(enum.Enum):
    """Which operand dtypes a unary function takes, and the dtype it computes in."""

    ANY = "any"            # every arithmetic dtype as is
    SIGNED = "signed"      # every arithmetic dtype; bool computes in int32
    INTEGRAL = "integral"  # integers and bool only
    FLOAT = "float"        # floats only: an integer operand is a type error
    MATH = "math"          # floats as is; integers and bool compute in float32


@dataclass(frozen=True)
class UnaryRule:
    """The typing rule of a unary function: its operands, whether it yields bool, and the
    options its public function accepts (rounding modes; flush_to_zero, float32 only)."""

    operand: Operand
    bool_result: bool = False
    rounding: tuple[RoundingMode, ...] = ()
    flush_to_zero: bool = False


_FULL_APPROX = (RoundingMode.FULL, RoundingMode.APPROX)
UNARY_RULES: dict[UnaryFn, UnaryRule] = {
    UnaryFn.NEG: UnaryRule(Operand.SIGNED),
    UnaryFn.ABS: UnaryRule(Operand.ANY),
    UnaryFn.NOT: UnaryRule(Operand.INTEGRAL),
    UnaryFn.EXP: UnaryRule(Operand.MATH, rounding=_FULL_APPROX),
    UnaryFn.EXP2: UnaryRule(Operand.MATH, flush_to_zero=True),
    UnaryFn.LOG: UnaryRule(Operand.MATH),
    UnaryFn.LOG2: UnaryRule(Operand.MATH),
    UnaryFn.SQRT: UnaryRule(Operand.MATH, rounding=(RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM,
                                                    RoundingMode.RP, RoundingMode.APPROX), flush_to_zero=True),
    UnaryFn.RSQRT: UnaryRule(Operand.MATH, flush_to_zero=True),
    UnaryFn.SIN: UnaryRule(Operand.MATH),
    UnaryFn.COS: UnaryRule(Operand.MATH),
    UnaryFn.TAN: UnaryRule(Operand.MATH),
    UnaryFn.SINH: UnaryRule(Operand.MATH),
    UnaryFn.COSH: UnaryRule(Operand.MATH),
    UnaryFn.TANH: UnaryRule(Operand.MATH, rounding=_FULL_APPROX),
    UnaryFn.FLOOR: UnaryRule(Operand.FLOAT),
    UnaryFn.CEIL: UnaryRule(Operand.FLOAT),
    UnaryFn.ISNAN: UnaryRule(Operand.FLOAT, bool_result=True),
}
if set(UNARY_RULES) != set(UnaryFn):
    raise ImportError(f"unary functions without a rule: {sorted(f.name for f in set(UnaryFn) - set(UNARY_RULES))}")


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

NON_NEAREST = (RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP)
"""The modes backends compute with their correctly rounded helpers; every other option (None,
RN, FULL, APPROX) is the ordinary round-to-nearest path at full precision, which also meets
APPROX's bound, except float32 division with APPROX (`divides_by_reciprocal`)."""


def divides_by_reciprocal(fn: BinaryFn, dtype: DType, mode: RoundingMode | None) -> bool:
    """Whether a Binary op divides through the reciprocal: float32 TRUEDIV with APPROX is
    RN(a * RN(1 / b)) on every backend, at most 1.5 ulp from the quotient for |b| <= 2**126
    (APPROX allows 2 there, as PTX div.approx.f32 does; beyond, the reciprocal is subnormal and
    loses bits, as div.approx's does). With flush_to_zero the reciprocal is flushed too, so a divisor
    above 2**126 gives 0 (NaN for an infinite dividend), as div.approx.ftz.f32 does. A divisor
    broadcast along an axis (attention's `acc / l`) then costs one division per row, not one
    per element."""
    return fn is BinaryFn.TRUEDIV and mode is RoundingMode.APPROX and dtype is dtypes.float32

ROUNDED_BINARY = {BinaryFn.ADD, BinaryFn.SUB, BinaryFn.MUL, BinaryFn.TRUEDIV}
"""Binary functions that take a rounding mode (and flush_to_zero)."""


class GridDependency(enum.Enum):
    """Programmatic dependent launch (PDL) controls: WAIT for the grid launched before this one
    on the stream to finish (its writes are visible after it); LAUNCH_DEPENDENTS lets the next
    grid start early (no visibility promised)."""

    WAIT = "wait"
    LAUNCH_DEPENDENTS = "launch_dependents"
