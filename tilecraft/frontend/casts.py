"""The rounding modes `astype` takes for each float-to-float conversion, as cuTile has them.

cuTile accepts a mode per (source, destination) pair, RN included: a conversion to
float8_e8m0fnu must say RZ or RP, RM/RP/RA into float16 only come from the 16- and 8-bit
formats, RA never from float64. Other conversions (from or to integers and bool) take no mode.
"""

from __future__ import annotations

from ..language import dtypes as dt
from ..language.dtypes import DType
from ..language.enums import RoundingMode

FLOATS = frozenset(d for d in dt.ALL_DTYPES + dt.PACKED_DTYPES if d.is_float or d.is_restricted)
"""Every float format, restricted ones (tfloat32, float8, float4) included."""

_E8M0 = dt.float8_e8m0fnu
_INTO_F16 = FLOATS - {dt.float64, dt.float32, dt.tfloat32, _E8M0}  # directed modes into float16

_SOURCES: dict[RoundingMode, dict[DType, frozenset[DType]]] = {
    RoundingMode.RN: dict.fromkeys((dt.float64, dt.float32, dt.tfloat32, dt.bfloat16, dt.float16,
                                    dt.float8_e4m3fn, dt.float8_e5m2, dt.float4_e2m1fn), FLOATS),
    RoundingMode.RZ: dict.fromkeys((dt.float64, dt.float32, dt.tfloat32, dt.float16, dt.bfloat16, _E8M0), FLOATS),
    RoundingMode.RM: {dt.float64: FLOATS, dt.float32: FLOATS - {_E8M0}, dt.float16: _INTO_F16},
    RoundingMode.RP: {dt.float64: FLOATS, dt.float32: FLOATS - {_E8M0}, dt.float16: _INTO_F16, _E8M0: FLOATS},
    RoundingMode.RA: {dt.float64: FLOATS, dt.float32: FLOATS - {dt.float64, _E8M0},
                      dt.tfloat32: FLOATS - {dt.float64, _E8M0}, dt.float16: _INTO_F16},
}
"""mode -> destination -> the sources that convert to it in that mode."""


def cast_rounding_modes(src: DType, dst: DType) -> tuple[RoundingMode, ...]:
    """The rounding modes a conversion between two float formats accepts (RN, RZ, RM, RP, RA
    order); `astype` without a mode asks for RN."""
    return tuple(mode for mode, into in _SOURCES.items() if src in into.get(dst, ()))
