"""Tile data types (`ct.float16`, `ct.int32`, ...) and the spec's promotion table.

A `DType` is a singleton per type. It knows its NumPy storage type (ml_dtypes for bfloat16 and
float8), its category, and can be called on a constant inside a kernel to make a strictly typed
constant (`ct.int16(5)`).
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class Category(enum.IntEnum):
    """Ordered so that promotion across categories picks the higher one."""

    BOOL = 0
    INT = 1
    FLOAT = 2
    RESTRICTED = 3  # tfloat32 and float8: load/store/astype/bitcast/mma only


class DType:
    """A tile element type. Not constructible by users; compare by identity."""

    __slots__ = ("name", "bitwidth", "category", "signed", "np_dtype", "short")

    def __init__(self, name: str, bitwidth: int, category: Category, signed: bool,
                 np_dtype: np.dtype, short: str) -> None:
        self.name = name
        self.bitwidth = bitwidth
        self.category = category
        self.signed = signed
        self.np_dtype = np.dtype(np_dtype)
        self.short = short

    def __repr__(self) -> str:
        return f"tilecraft.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (dtype_by_name, (self.name,))

    @property
    def __name__(self) -> str:  # noqa: A003  (cuTile's dtypes have one: tests and ids use it)
        return self.name

    @property
    def is_float(self) -> bool:
        return self.category == Category.FLOAT

    @property
    def is_int(self) -> bool:
        return self.category == Category.INT

    @property
    def is_integral(self) -> bool:
        """Integers and bool: the types bitwise ops and gather indices accept."""
        return self.category in (Category.INT, Category.BOOL)

    @property
    def is_restricted(self) -> bool:
        return self.category == Category.RESTRICTED

    @property
    def itemsize(self) -> int:
        return max(1, self.bitwidth // 8)

    @property
    def max_finite(self) -> float:
        """The largest finite value of a float type (what casts to an 8-bit float saturate to)."""
        return float(ml_dtypes.finfo(self.np_dtype).max)

    def __call__(self, value=None):
        raise RuntimeError(f"{self.name}(...) can only be called inside a tile kernel")


def _make(name, bits, cat, signed, npd, short):
    return DType(name, bits, cat, signed, npd, short)


bool_ = _make("bool_", 8, Category.BOOL, False, np.bool_, "b1")
int8 = _make("int8", 8, Category.INT, True, np.int8, "i8")
int16 = _make("int16", 16, Category.INT, True, np.int16, "i16")
int32 = _make("int32", 32, Category.INT, True, np.int32, "i32")
int64 = _make("int64", 64, Category.INT, True, np.int64, "i64")
uint8 = _make("uint8", 8, Category.INT, False, np.uint8, "u8")
uint16 = _make("uint16", 16, Category.INT, False, np.uint16, "u16")
uint32 = _make("uint32", 32, Category.INT, False, np.uint32, "u32")
uint64 = _make("uint64", 64, Category.INT, False, np.uint64, "u64")
float16 = _make("float16", 16, Category.FLOAT, True, np.float16, "f16")
float32 = _make("float32", 32, Category.FLOAT, True, np.float32, "f32")
float64 = _make("float64", 64, Category.FLOAT, True, np.float64, "f64")
bfloat16 = _make("bfloat16", 16, Category.FLOAT, True, ml_dtypes.bfloat16, "bf16")
tfloat32 = _make("tfloat32", 32, Category.RESTRICTED, True, np.float32, "tf32")
float8_e4m3fn = _make("float8_e4m3fn", 8, Category.RESTRICTED, True, ml_dtypes.float8_e4m3fn, "f8e4m3fn")
float8_e5m2 = _make("float8_e5m2", 8, Category.RESTRICTED, True, ml_dtypes.float8_e5m2, "f8e5m2")
float8_e8m0fnu = _make("float8_e8m0fnu", 8, Category.RESTRICTED, False, ml_dtypes.float8_e8m0fnu, "f8e8m0fnu")
float4_e2m1fn = _make("float4_e2m1fn", 4, Category.RESTRICTED, True, ml_dtypes.float4_e2m1fn, "f4e2m1fn")

FLOAT8_VALUE_DTYPES: tuple[DType, ...] = (float8_e4m3fn, float8_e5m2)
"""The 8-bit floats that hold values (float8_e8m0fnu holds only scales): MMA operands, and
converted through float32 where a backend converts them only to and from wider floats."""

ALL_DTYPES: tuple[DType, ...] = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, float32, float64, bfloat16, tfloat32, float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
)
"""Every dtype that arrays and tiles take in every operation."""
PACKED_DTYPES: tuple[DType, ...] = (float4_e2m1fn,)
"""Sub-byte dtypes: tile elements only (no array holds them; the interpreter stores one per byte),
made and consumed by unpack_from_bytes / pack_to_bytes and moved by the shape ops; no casts."""
_BY_NAME = {d.name: d for d in ALL_DTYPES + PACKED_DTYPES}
_BY_NAME["bool"] = bool_
# Storage dtypes that identify a tile dtype (tfloat32 is never a storage type).
_BY_NP = {d.np_dtype: d for d in ALL_DTYPES if d is not tfloat32}


def dtype_by_name(name: str) -> DType:
    return _BY_NAME[name]


def to_dtype(obj) -> DType | None:
    """Map a tilecraft, NumPy, ml_dtypes or torch dtype object to a DType (None if not one).
    None is not a dtype here, though np.dtype(None) is float64."""
    if isinstance(obj, DType):
        return obj
    if obj is None:
        return None
    if type(obj).__module__ == "torch" and type(obj).__name__ == "dtype":
        return _BY_NAME.get(str(obj).removeprefix("torch.").replace("bool", "bool_"))
    try:
        return _BY_NP.get(np.dtype(obj))
    except TypeError:
        return None


# ---------------------------------------------------------------------------------------------
# Promotion (spec section 2.5)

_INT_ORDER = (int8, int16, int32, int64)
_UINT_ORDER = (uint8, uint16, uint32, uint64)


def promote_pair(a: DType, b: DType) -> DType | None:
    """The spec's promotion table for two strict dtypes; None where the table says ERR."""
    if a is b:
        return a
    if a.is_restricted or b.is_restricted:
        return None
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        return hi
    if a.is_float:
        if {a, b} == {float16, bfloat16}:
            return None
        if float64 in (a, b):
            return float64
        return float32  # f16/bf16 with f32, or f16 with bf16 handled above
    if a.is_int:
        if a.signed != b.signed:
            return None
        return a if a.bitwidth >= b.bitwidth else b
    return a  # both bool


def loose_dtype(value) -> DType:
    """The dtype a loosely typed Python constant takes when it must become concrete."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return int32
        if -2**63 <= value < 2**63:
            return int64
        if 0 <= value < 2**64:
            return uint64
        raise OverflowError(f"Integer constant {value} is out of range of uint64")
    return float32


def fits(value, dtype: DType) -> bool:
    """Whether a loose Python constant is representable in dtype's category and range."""
    if dtype.is_float or dtype.is_restricted:
        return True
    if isinstance(value, float):
        return False
    if dtype is bool_:
        return value in (0, 1)
    info = np.iinfo(dtype.np_dtype)
    return info.min <= value <= info.max


def can_cast_implicitly(src: DType, dst: DType) -> bool:
    """Implicit casts only widen: allowed iff promote(src, dst) == dst."""
    return src is dst or promote_pair(src, dst) is dst
