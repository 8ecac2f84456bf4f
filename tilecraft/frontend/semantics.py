"""Typed construction of IR values: promotion, broadcasting, implicit casts and their errors.

Front-end values are either IR `Value`s (runtime tiles, scalars, arrays) or plain Python
objects (loosely typed constants, tuples, dtypes, enums). `Sema` turns operations on them into
IR ops that follow the operand conventions of `ir.ops`, raising TileTypeError/TileValueError at
the builder's current location when a language rule is broken.
"""

from __future__ import annotations

import enum
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TileTypeError, TileUnsupportedFeatureError, TileValueError
from ..ir import ArrayType, BinaryFn, Block, Builder, CompareFn, ListType, TileType, UnaryFn, Value, ops
from ..ir.kinds import UNARY_RULES, Operand
from ..language import dtypes as dt
from ..language import ops as L
from ..language.dtypes import DType
from ..language.enums import RoundingMode

LOOSE = (bool, int, float)


def is_loose(x: Any) -> bool:
    return isinstance(x, LOOSE)


def tf32_value(value: float) -> float:
    """`value` rounded to tfloat32 (11 significant bits, float32's exponent range), nearest
    even, in one rounding: so a tfloat32 constant holds a tfloat32 value on every backend."""
    if not math.isfinite(value) or value == 0:
        return value
    quantum = 2.0 ** (max(math.frexp(value)[1] - 1, -126) - 10)
    r = round(value / quantum) * quantum  # Python rounds half to even
    return math.copysign(math.inf, r) if abs(r) >= 2.0 ** 128 else r


def fp8_value(value: float, dtype: DType) -> float:
    """`value` converted to an 8-bit float dtype as a cast does (cvt.rn.satfinite): a magnitude
    past the largest finite one, an infinity too, gives that one with its sign, NaN stays NaN,
    the rest rounds to nearest even once (ml_dtypes alone gives NaN or inf past the range)."""
    limit = dtype.max_finite
    return float(np.array(np.clip(value, -limit, limit), dtype.np_dtype))


def hashable(x: Any) -> bool:
    """Whether `x` can be a dict key or set member (a constant compared by lookup)."""
    try:
        hash(x)
        return True
    except TypeError:
        return False


def is_tile(x: Any) -> bool:
    return isinstance(x, Value) and isinstance(x.type, TileType)


def is_array(x: Any) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ArrayType)


def is_list(x: Any) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ListType)


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes; None when they are incompatible."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


@dataclass(frozen=True)
class FloatOptions:
    """The `rounding_mode` / `flush_to_zero` of one arithmetic call, already checked against
    the op (`Sema.float_options`); its dtype is checked where the op is built."""

    rounding: RoundingMode | None = None
    flush_to_zero: bool = False

    @property
    def given(self) -> bool:
        return self.rounding is not None or self.flush_to_zero


PLAIN = FloatOptions()
"""No rounding mode, no flush to zero: the default of every arithmetic op."""

FULL_APPROX = (RoundingMode.FULL, RoundingMode.APPROX)
"""The precision modes (not IEEE roundings) of truediv, exp, tanh and sqrt (APPROX only)."""


_UNSET: Any = object()


@dataclass(frozen=True)
class CallSite:
    """A public tile function being compiled: its name, front-end handler (`fn(fc, ...)`) and
    arguments, so that an error about one argument can name it as cuTile does."""

    name: str
    handler: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def label(self, value: Any = _UNSET, param: str | None = None) -> str | None:
        """`"shape"` for a parameter by name, `#1` for a positional-only one; the parameter
        is `param`, else the one whose argument is `value` (by identity); None if unknown."""
        try:
            sig = inspect.signature(self.handler)
        except (TypeError, ValueError):
            return None
        params = list(sig.parameters.values())[1:]
        try:
            bound = sig.replace(parameters=params).bind(*self.args, **self.kwargs)
        except TypeError:
            return None
        if param is None:
            param = next((n for n, v in bound.arguments.items() if v is value), None)
        p = next((q for q in params if q.name == param), None)
        if p is None:
            return None
        return f"#{params.index(p) + 1}" if p.kind is inspect.Parameter.POSITIONAL_ONLY else f'"{p.name}"'


class Sema:
    """IR construction with the language's typing rules; errors point at `builder.loc`."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.call: CallSite | None = None  # the public function whose handler is running

    # ---- errors -------------------------------------------------------------------------------
    def type_error(self, msg: str) -> TileTypeError:
        return TileTypeError(msg, self.b.loc)

    def arg_error(self, what: str, *, value: Any = _UNSET, param: str | None = None) -> TileTypeError:
        """A TileTypeError about one argument of the public function being compiled, named as
        cuTile does: 'Invalid argument "shape" of load(): <what>' (the argument is `param`, or
        the one that is `value`; unnamed when neither is found)."""
        label = self.call.label(value, param) if self.call is not None else None
        prefix = f"Invalid argument {label} of {self.call.name}(): " if label is not None and self.call else ""
        return self.type_error(prefix + what)

    def value_error(self, msg: str) -> TileValueError:
        return TileValueError(msg, self.b.loc)

    # ---- constants and dtypes -----------------------------------------------------------------
    def const(self, value: Any, dtype: DType) -> Value:
        """A scalar constant of `dtype`; the value is converted (wrapped/rounded) like a cast."""
        if dtype is dt.tfloat32:
            value = tf32_value(float(value))
        elif dtype in dt.FLOAT8_VALUE_DTYPES:
            value = fp8_value(float(value), dtype)
        elif dtype.is_float or dtype.is_restricted:
            value = float(value)
        elif dtype is dt.bool_:
            value = bool(value)
        else:
            value = int(value)
            bits = dtype.bitwidth
            value &= (1 << bits) - 1
            if dtype.signed and value >= 1 << (bits - 1):
                value -= 1 << bits
        return self.b.value(ops.Const, value=value, dtype=dtype)

    def const_bool(self, value: Any, name: str) -> bool:
        """Argument `name`, a flag that must be a compile-time bool (flush_to_zero, keepdims, ...)."""
        if isinstance(value, Value):
            raise self.arg_error("Expected a boolean constant, but given value is not constant", param=name)
        if not isinstance(value, (bool, np.bool_)):
            raise self.arg_error(f"Expected a boolean constant, but given value has type {type_name(value)}",
                                 param=name)
        return bool(value)

    def loose_dtype(self, x: Any) -> DType:
        """The dtype a Python number takes (dtypes.loose_dtype); an int beyond uint64 is an error."""
        try:
            return dt.loose_dtype(x)
        except OverflowError:
            raise self.value_error(f"Constant {x} is out of range of any supported integer type") from None

    def dtype_of(self, x: Any) -> DType:
        if is_tile(x):
            return x.tile.dtype
        if is_loose(x):
            return self.loose_dtype(x)
        own = _numpy_scalar_dtype(x)
        if own is not None:
            return own
        raise self.type_error(f"Expected a tile or a number, got {describe(x)}")

    @staticmethod
    def is_number(x: Any) -> bool:
        """A Python or NumPy scalar constant."""
        return is_loose(x) or _numpy_scalar_dtype(x) is not None

    def shape_of(self, x: Any) -> tuple[int, ...]:
        return x.tile.shape if is_tile(x) else ()

    def to_tile(self, x: Any, dtype: DType | None = None) -> Value:
        """Make x an IR tile; a loose constant takes `dtype` (checked to fit) or its own dtype."""
        if is_tile(x):
            return x if dtype is None else self.cast_implicit(x, dtype)
        if is_loose(x):
            if dtype is None:
                dtype = self.loose_dtype(x)
            elif not self._loose_fits(x, dtype):
                if type(x) is int and dtype.is_int:  # cuTile's wording for an integer out of range
                    raise self.value_error(f"Integer constant {x} is out of range of {dtype}")
                raise self.value_error(f"Constant {x!r} cannot be represented as {dtype}")
            return self.const(x, dtype)
        own = _numpy_scalar_dtype(x)
        if own is not None:  # a NumPy scalar: a constant of its own dtype
            t = self.const(x.item(), own)
            return t if dtype is None else self.cast_implicit(t, dtype)
        raise self.arg_error(f"Expected a tile, but given value has type {type_name(x)}", value=x)

    @staticmethod
    def _loose_fits(x: Any, dtype: DType) -> bool:
        if dtype is dt.bool_ and isinstance(x, int) and x in (0, 1):
            return True  # as cuTile: the integer constants 0 and 1 are False and True
        cat = dt.Category.BOOL if isinstance(x, bool) else dt.Category.INT if isinstance(x, int) else dt.Category.FLOAT
        if cat > dtype.category and not dtype.is_restricted:
            return False
        if isinstance(x, float) and not math.isfinite(x) and not (dtype.is_float or dtype.is_restricted):
            return False
        return dt.fits(x, dtype)

    # ---- promotion -----------------------------------------------------------------------------
    def common_dtype(self, *xs: Any) -> DType:
        """The spec's promotion of operands; loose constants defer to strict operands."""
        strict = [x for x in xs if not is_loose(x)]
        loose = [x for x in xs if is_loose(x)]
        if not strict:
            return self._loose_common(loose)
        result = self.dtype_of(strict[0])
        for x in strict[1:]:
            d = self.dtype_of(x)
            p = dt.promote_pair(result, d)
            if p is None:
                raise self.type_error(f"Implicit promotion of {result} and {d} is not supported")
            result = p
        for x in loose:
            ld = self.loose_dtype(x)
            if ld.category > result.category:
                if result.is_restricted:
                    raise self.type_error(f"Implicit promotion of {result} and {ld} is not supported")
                result = ld
            elif not dt.fits(x, result):
                raise self.value_error(f"Integer constant {x} is out of range of {result}")
        return result

    def _loose_common(self, loose: Sequence[Any]) -> DType:
        result = self.loose_dtype(loose[0])
        for x in loose[1:]:
            d = self.loose_dtype(x)
            result = d if d.category > result.category else result
        return result

    # ---- casts --------------------------------------------------------------------------------
    def cast(self, x: Value, dtype: DType, rounding: RoundingMode | None = None) -> Value:
        if x.tile.dtype is dtype and rounding is None:
            return x
        packed = next((d for d in (x.tile.dtype, dtype) if d in dt.PACKED_DTYPES), None)
        if packed is not None:
            raise TileUnsupportedFeatureError(f"Casts to or from {packed} are not supported yet", self.b.loc)
        return self.b.value(ops.Cast, x=x, dtype=dtype, rounding=rounding)

    def cast_implicit(self, x: Any, dtype: DType, what: str = "value") -> Value:
        """Implicit casts only widen (store/scatter values, paddings, atomic updates)."""
        if is_loose(x):
            return self.to_tile(x, dtype)
        src = self.dtype_of(x)
        if not dt.can_cast_implicitly(src, dtype):
            raise self.type_error(f"Type mismatch: cannot implicitly cast {what} of dtype {src} to {dtype}; "
                                  f"use astype() to convert explicitly")
        return self.cast(x, dtype)

    # ---- shapes -------------------------------------------------------------------------------
    def check_shape(self, shape: Any, param: str = "shape", rank: int | None = None) -> tuple[int, ...]:
        """A constant tile shape given as argument `param` (an int is a 1-d shape; `rank`, when
        given, is the length it must have), with cuTile's checks and wording (which calls it a
        shape whatever the parameter's name)."""
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        if isinstance(shape, Value) or (isinstance(shape, tuple) and any(isinstance(d, Value) for d in shape)):
            raise self.arg_error("Expected a constant integer tuple, but given value is not constant"
                                 f"{_constant_hint(shape)}", param=param)
        if not isinstance(shape, tuple):
            raise self.arg_error(f"Expected a tuple, but given value has type {type_name(shape)}", param=param)
        for i, d in enumerate(shape):
            if not isinstance(d, int) or isinstance(d, bool):
                raise self.arg_error(f"Expected a tuple of integers, but element #{i} has type {type_name(d)}",
                                     param=param)
        if rank is not None and len(shape) != rank:
            raise self.arg_error(f"Expected shape length to be {rank}, got {len(shape)}", param=param)
        for i, d in enumerate(shape):
            if d <= 0:
                raise self.arg_error(f"Dimension #{i} of shape {shape} is not positive", param=param)
            if not is_pow2(d):
                raise self.arg_error(f"Dimension #{i} of shape {shape} is not a power of two", param=param)
        return shape

    def check_result_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A tile shape an operation computes (cat, arange): every dim a power of two."""
        for d in shape:
            if not is_pow2(d):
                raise self.type_error(f"Result tile shape must be power of 2: {shape} has dimension {d}")
        return shape

    def reshape(self, x: Value, shape: tuple[int, ...]) -> Value:
        if x.tile.shape == shape:
            return x
        return self.b.value(ops.Reshape, x=x, shape=shape)

    def broadcast_to(self, x: Value, shape: tuple[int, ...]) -> Value:
        src = x.tile.shape
        if src == shape:
            return x
        if broadcast_shapes(src, shape) != shape:
            raise self.type_error(f"Cannot broadcast a tile of shape {src} to {shape}")
        if len(src) < len(shape):
            x = self.reshape(x, (1,) * (len(shape) - len(src)) + src)
            if x.tile.shape == shape:
                return x
        return self.b.value(ops.Broadcast, x=x, shape=shape)

    def unify(self, xs: Sequence[Any], dtype: DType) -> list[Value]:
        """Cast every operand to `dtype` and broadcast them to their common shape."""
        shape: tuple[int, ...] = ()
        for x in xs:
            s = broadcast_shapes(shape, self.shape_of(x))
            if s is None:
                shapes = ", ".join(str(self.shape_of(y)) for y in xs)
                raise self.type_error(f"Shapes {shapes} are not broadcastable")
            shape = s
        out = []
        for x in xs:
            t = self.to_tile(x, dtype) if is_loose(x) else self.cast(self.to_tile(x), dtype)
            out.append(self.broadcast_to(t, shape))
        return out

    # ---- floating-point options (spec 3.5) -------------------------------------------------------
    def float_options(self, op: str, allowed: tuple[RoundingMode, ...], rounding_mode: Any = None,
                      flush_to_zero: Any = False) -> FloatOptions:
        """Check a call's options against what `op` accepts (`allowed` rounding modes; the
        signature already rejects options the op does not take)."""
        if rounding_mode is not None:
            if not isinstance(rounding_mode, RoundingMode):
                raise self.type_error(f"rounding_mode must be a ct.RoundingMode, got {describe(rounding_mode)}")
            if rounding_mode not in allowed:
                raise self.type_error(f"Rounding mode {rounding_mode.value} is not supported for {op}")
        return FloatOptions(rounding_mode, self.const_bool(flush_to_zero, "flush_to_zero"))

    def check_float_options(self, fp: FloatOptions, dtype: DType) -> None:
        """The dtype rules of the options: rounding on unrestricted floats, FULL/APPROX and
        flush_to_zero on float32 only."""
        if fp.rounding is not None:
            if not dtype.is_float:
                raise self.type_error(f"Rounding mode can only be used for unrestricted float types, but got {dtype}")
            if fp.rounding in FULL_APPROX and dtype is not dt.float32:
                raise self.type_error(f"Rounding mode {fp.rounding.value} can only be used for float32 type, "
                                      f"but got {dtype}")
        if fp.flush_to_zero and dtype is not dt.float32:
            raise self.type_error(f"Flush to zero can only be used for float32 type, but got {dtype}")

    # ---- arithmetic -----------------------------------------------------------------------------
    def binary(self, fn: BinaryFn, x: Any, y: Any, fp: FloatOptions = PLAIN) -> Value:
        """fn(x, y) after promotion and broadcasting; `fp` as checked by `float_options`."""
        dtype = self._binary_dtype(fn, x, y)
        self.check_float_options(fp, dtype)
        a, b = self.unify([x, y], dtype)
        return self.b.value(ops.Binary, fn=fn, lhs=a, rhs=b, rounding=fp.rounding, flush_to_zero=fp.flush_to_zero)

    def _binary_dtype(self, fn: BinaryFn, x: Any, y: Any) -> DType:
        """The dtype `fn` computes in, raising the language's errors for bad operands."""
        if fn in (BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR) and is_tile(x) and is_tile(y) \
                and x.tile.dtype is not y.tile.dtype and x.tile.dtype.is_integral and y.tile.dtype.is_integral:
            raise self.type_error(f"Bitwise operands must have same data type, got {x.tile.dtype} and "
                                  f"{y.tile.dtype} for {fn.value}")
        dtype = self.common_dtype(x, y)
        if dtype.is_restricted:
            raise self.type_error(f"{dtype} is a restricted type: no arithmetic (use astype first)")
        if fn in _BITWISE:
            for v in (x, y):
                if not is_loose(v) and not self.dtype_of(v).is_integral:
                    kind = "Bitwise shift requires an integer" if fn in (BinaryFn.SHL, BinaryFn.SHR) \
                        else "Bitwise operations require integers"
                    raise self.type_error(f"{kind} or bool operands, got {self.dtype_of(v)} for {fn.value}; "
                                          f"use bitcast() to operate on float bits")
            if not is_loose(x) and not is_loose(y) and self.dtype_of(x) is not self.dtype_of(y) \
                    and fn in (BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR):
                raise self.type_error(f"Bitwise operands must have same data type, got "
                                      f"{self.dtype_of(x)} and {self.dtype_of(y)} for {fn.value}")
        elif dtype is dt.bool_ and fn not in (BinaryFn.MIN, BinaryFn.MAX):
            raise self.type_error(f"Binary arithmetic op `{fn.value}` does not support bool, please cast bool to int")
        if fn == BinaryFn.TRUEDIV and not dtype.is_float:
            return dt.float32
        if fn in (BinaryFn.POW, BinaryFn.ATAN2) and not dtype.is_float:
            if fn == BinaryFn.POW:
                raise self.type_error("Integer pow is not supported; use a float base")
            return dt.float32
        return dtype

    def cdiv(self, x: Any, y: Any) -> Any:
        """ceil(x / y): floor(x / y), plus 1 where the division leaves a remainder (right for
        either sign, and nothing in between can overflow, as x + y - 1 could); a Python int
        when both are."""
        if not isinstance(x, Value) and not isinstance(y, Value):
            if y == 0:
                raise self.type_error(f"ZeroDivisionError: cdiv({x}, {y}) divides by zero")
            return L.cdiv(x, y)
        q = self.binary(BinaryFn.FLOORDIV, x, y)
        inexact = self.compare(CompareFn.NE, self.binary(BinaryFn.SUB, x, self.binary(BinaryFn.MUL, q, y)), 0)
        return self.where(inexact, self.binary(BinaryFn.ADD, q, 1), q)

    def compare(self, fn: CompareFn, x: Any, y: Any) -> Value:
        dtype = self.common_dtype(x, y)
        if dtype.is_restricted:
            raise self.type_error(f"{dtype} is a restricted type: no comparisons")
        a, b = self.unify([x, y], dtype)
        return self.b.value(ops.Compare, fn=fn, lhs=a, rhs=b)

    def unary(self, fn: UnaryFn, x: Any, fp: FloatOptions = PLAIN) -> Value:
        """fn(x) by its rule (`kinds.UNARY_RULES`): math functions of integers compute in
        float32 (and `fp` is checked there)."""
        rule = UNARY_RULES[fn]
        t = self.to_tile(x)
        d = t.tile.dtype
        if d.is_restricted:
            raise self.type_error(f"{d} is a restricted type: no arithmetic")
        if rule.operand is Operand.FLOAT and not d.is_float:
            raise self.type_error(f"{fn.value} needs a float operand, got {d}")
        if rule.operand is Operand.INTEGRAL and not d.is_integral:
            raise self.type_error(f"Bitwise operations require integers or bool operands, got {d} for {fn.value}; "
                                  f"use bitcast() to operate on float bits")
        if rule.operand is Operand.MATH and not d.is_float:
            t = self.cast(t, dt.float32)
        if rule.operand is Operand.SIGNED and d is dt.bool_:
            t = self.cast(t, dt.int32)
        self.check_float_options(fp, t.tile.dtype)
        return self.b.value(ops.Unary, fn=fn, x=t, rounding=fp.rounding, flush_to_zero=fp.flush_to_zero)

    def combine_block(self, fn: BinaryFn, dtype: DType, fp: FloatOptions) -> Block:
        """The combine block of a reduction or scan that applies `fn` (with `fp`) to two
        scalars of `dtype`: (a, b) -> fn(a, b)."""
        a, b = (self.b.new_value(TileType(dtype), hint) for hint in ("a", "b"))
        block = Block([a, b])
        with self.b.inside(block):
            r = self.b.value(ops.Binary, fn=fn, lhs=a, rhs=b, rounding=fp.rounding, flush_to_zero=fp.flush_to_zero)
            self.b.emit(ops.Yield, values=(r,))
        return block

    def where(self, cond: Any, x: Any, y: Any) -> Value:
        c = self.to_bool(cond, scalar=False)
        dtype = self.common_dtype(x, y)
        shape = broadcast_shapes(self.shape_of(c), broadcast_shapes(self.shape_of(x), self.shape_of(y)) or ())
        if shape is None:
            raise self.type_error("where(): shapes are not broadcastable")
        a, b = self.unify([x, y], dtype)
        return self.b.value(ops.Where, cond=self.broadcast_to(c, shape), x=self.broadcast_to(a, shape),
                            y=self.broadcast_to(b, shape))

    def to_bool(self, x: Any, scalar: bool = True) -> Value:
        """Condition conversion: a bool tile as is, numbers compared with 0."""
        t = self.to_tile(x)
        if scalar and t.tile.shape != ():
            if math.prod(t.tile.shape) != 1:
                raise self.type_error(f"A condition must be a scalar, got a tile of shape {t.tile.shape}")
            t = self.reshape(t, ())
        if t.tile.dtype is dt.bool_:
            return t
        return self.compare(CompareFn.NE, t, 0)

    def index_scalar(self, x: Any, what: str = "Index") -> Value:
        """A signed integer scalar (int32/int64) for tile coordinates and loop bounds."""
        t = self.to_tile(x)
        d = t.tile.dtype
        if t.tile.shape != () and math.prod(t.tile.shape) == 1:
            t = self.reshape(t, ())
        if t.tile.shape != () or not d.is_int or not d.signed:
            raise self.type_error(f"{what} must be a signed integer scalar, got {describe(x)}")
        return t if d in (dt.int32, dt.int64) else self.cast(t, dt.int32)


_BITWISE = {BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR, BinaryFn.SHL, BinaryFn.SHR}


def _constant_hint(shape: Any) -> str:
    """For a shape holding run-time scalars (a parameter not annotated ct.Constant): how to fix it."""
    dims = shape if isinstance(shape, tuple) else (shape,)
    runtime = [d for d in dims if isinstance(d, Value) and isinstance(d.type, TileType) and not d.type.shape]
    if not runtime:
        return ""
    names = list(dict.fromkeys(d.hint.partition(".")[0] for d in runtime if d.hint))
    which = " and ".join(f"`{n}`" for n in names) if names else "a dimension"
    example = names[0] if names else "TILE"
    verb = "are" if len(names) > 1 else "is"
    return (f"; {which} {verb} only known at run time: annotate the tile-size parameter as ct.Constant[int] "
            f"(e.g. `{example}: ct.Constant[int]`) so its value is known at compile time")


def _numpy_scalar_dtype(x: Any) -> DType | None:
    """The dtype of a NumPy scalar constant (np.float16(1.5), np.int8(3), np.bool_(True)), else None."""
    if isinstance(x, np.generic) and not isinstance(x, (np.complexfloating, np.datetime64, np.timedelta64)):
        return dt.to_dtype(x.dtype)
    return None


def dtype_name(d: DType) -> str:
    """A dtype as cuTile's messages name it (`bool`, not tilecraft's `bool_`)."""
    return "bool" if d is dt.bool_ else str(d)


def type_name(x: Any) -> str:
    """cuTile's name of a value's type in messages: Tile[float32,(4,8)] (a Python number is a 0-d
    tile of its default dtype), Array[float32,(?,?):(?,?)], None, or the Python type's name."""
    if is_tile(x) or is_loose(x) or _numpy_scalar_dtype(x) is not None:
        d = x.tile.dtype if is_tile(x) else dt.loose_dtype(x) if is_loose(x) else _numpy_scalar_dtype(x)
        shape = x.tile.shape if is_tile(x) else ()
        return f"Tile[{dtype_name(d)},({','.join(map(str, shape))})]"
    if is_array(x):
        dims = ",".join("?" * x.type.ndim)
        return f"Array[{dtype_name(x.type.dtype)},({dims}):({dims})]"
    if isinstance(x, tuple):
        return "Tuple[" + ",".join(map(type_name, x)) + "]"
    if isinstance(x, enum.Enum):
        return f"<enum constant {type(x).__name__}.{x.name}>"
    if x is None:
        return "None"
    if isinstance(x, Value):
        return str(x.type)
    own = getattr(type(x), "_type_name", None)  # front-end objects that say more (views.TiledView)
    return own(x) if own is not None else type(x).__name__


def describe(x: Any) -> str:
    """Short description of a front-end value for error messages."""
    if isinstance(x, Value):
        return str(x.type)
    if isinstance(x, tuple):
        return "tuple(" + ", ".join(describe(v) for v in x) + ")"
    if is_loose(x):
        return f"constant {x!r}"
    return type(x).__name__
