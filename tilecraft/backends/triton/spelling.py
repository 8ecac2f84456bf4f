"""How tile dtypes and constants are spelled in Triton source.

Kept apart from the writer so that every lowering module (and the interpreter workarounds,
which the writer itself calls) can use them without an import cycle.
"""

from __future__ import annotations

import math

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType

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


def tl_dtype(dtype: DType) -> str:
    """The `tl.<dtype>` spelling of a tile dtype."""
    return "tl." + _TL_NAMES[dtype]


def is_float(dtype: DType) -> bool:
    """Arithmetic floats (tfloat32 counts: it is fp32 data)."""
    return dtype.is_float or dtype is D.tfloat32


def py_literal(value: bool | int | float, dtype: DType) -> str:
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


def fp8_bits(value: float, dtype: DType) -> str:
    """An 8-bit float constant of `value` (rounded to `dtype`) made from its bit pattern:
    Triton's builders cannot make 8-bit float constants (no get_fp8e5 / get_fp8e4nv, on the GPU
    and in the CPU interpreter alike), and its interpreter converts NaN, -0.0 and infinities to
    8-bit floats wrongly."""
    bits = int(np.array(value, dtype=dtype.np_dtype).view(np.uint8))
    return f"tl.cast(tl.full([], {bits}, tl.uint8), {tl_dtype(dtype)}, bitcast=True)"


def negative_zero(dtype: DType) -> str:
    """-0.0 of `dtype`: Triton turns every constant equal to 0 into +0.0, so it is computed."""
    text = "tl.full([], 0.0, tl.float32) * -1.0"
    return text if tl_dtype(dtype) == "tl.float32" else f"tl.cast({text}, {tl_dtype(dtype)})"


def plain_literal_ok(value: bool | int | float, dtype: DType) -> bool:
    """Whether Triton types a bare Python literal of this value as exactly `dtype`."""
    if dtype in (D.bool_, D.int32):
        return True
    if dtype is D.float32:
        a = abs(float(value))
        return a == 0.0 or math.isinf(a) or math.isnan(a) or 2.0 ** -126 <= a <= 3.4e38
    return False
