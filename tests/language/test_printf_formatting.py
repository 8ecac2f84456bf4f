"""The shared printf formatter (tilecraft/language/formatting.py) against the C library's own
snprintf, and cuTile's format checks for ct.printf."""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import math

import ml_dtypes
import numpy as np
import pytest

from tilecraft.language import dtypes as D
from tilecraft.language import formatting as F

_LIBC_NAME = ctypes.util.find_library("c")
libc = ctypes.CDLL(_LIBC_NAME) if _LIBC_NAME else None
needs_libc = pytest.mark.skipif(libc is None or not hasattr(libc, "snprintf"), reason="no C library snprintf")


def c_printf(fmt: str, arg: ctypes._SimpleCData) -> str:
    """What the C library prints for one argument."""
    buf = ctypes.create_string_buffer(1024)
    libc.snprintf(buf, len(buf), fmt.encode(), arg)
    return buf.value.decode()


def one(fmt: str, value, dtype) -> str:
    """The formatter's text for a 0-d tile."""
    return F.format_tile(F.parse(fmt).conversions[0], np.array(value, dtype.np_dtype), dtype)


_FLAGS = ["", "-", "+", " ", "#", "0", "-+", "+0", "#0", " 0"]
_WIDTHS = ["", "1", "9"]
_PRECISIONS = ["", ".0", ".1", ".4", ".15"]


@needs_libc
@pytest.mark.parametrize("spec", list("diuoxX"))
def test_integer_conversions_match_c(spec: str) -> None:
    values32 = [0, 1, -1, 7, -255, 255, 1977, 2**31 - 1, -2**31]
    values64 = [0, -1, 2**40 + 3, -(2**63), 2**63 - 1]
    for flags, width, precision, length in itertools.product(_FLAGS, _WIDTHS, _PRECISIONS, ["", "hh", "h", "ll"]):
        fmt = f"%{flags}{width}{precision}{length}{spec}"
        wide = length == "ll"
        for v in values64 if wide else values32:
            arg = ctypes.c_longlong(v) if wide else ctypes.c_int(v)
            assert one(fmt, v, D.int64 if wide else D.int32) == c_printf(fmt, arg), (fmt, v)


_FLOATS = [0.0, -0.0, 1.0, 3.14, -2.5, 0.1, 0.5, 1.5, 2.5, 1e-5, 0.9999999, 123456789.125, 1e300, 5e-324,
           2.2250738585072014e-308, math.inf, -math.inf, math.nan, -math.nan]


@needs_libc
@pytest.mark.parametrize("spec", list("eEfFgGaA"))
def test_float_conversions_match_c(spec: str) -> None:
    for flags, width, precision in itertools.product(_FLAGS, _WIDTHS + ["24"], _PRECISIONS):
        fmt = f"%{flags}{width}{precision}{spec}"
        for v in _FLOATS:
            assert one(fmt, v, D.float64) == c_printf(fmt, ctypes.c_double(v)), (fmt, v)


@needs_libc
@pytest.mark.parametrize("dtype", [D.float16, D.bfloat16, D.float32, D.float8_e4m3fn, D.float8_e5m2,
                                   D.float8_e8m0fnu])
def test_narrow_floats_print_their_exact_value_as_a_double(dtype) -> None:
    values = np.array([0.1, -3.14, 448.0, 2.0 ** -9, 1000.0], np.float64)
    if dtype is D.float8_e8m0fnu:
        values = np.abs(values)
    stored = values.astype(dtype.np_dtype)
    for fmt in ("%f", "%.10e", "%g", "%a"):
        want = [c_printf(fmt, ctypes.c_double(float(s))) for s in stored]
        assert one(fmt, stored[0], dtype) == want[0]
        conv = F.parse(fmt).conversions[0]
        assert F.format_tile(conv, stored, dtype) == "[" + ", ".join(want) + "]"


def test_integers_are_read_at_the_promoted_width() -> None:
    # as C's printf reads an int / unsigned int (64-bit dtypes: long long) argument
    assert one("%u", -1, D.int32) == "4294967295"
    assert one("%d", 4294967295, D.uint32) == "-1"
    assert one("%lu", 4294967295, D.uint32) == "4294967295"
    assert one("%llu", 2**64 - 1, D.uint64) == "18446744073709551615"
    assert one("%lld", 2**64 - 1, D.uint64) == "-1"
    assert one("%x", -2, D.int8) == "fffffffe"      # int8 -2 promoted to int
    assert one("%u", 200, D.uint8) == "200"
    assert one("%hhd", 200, D.uint8) == "-56"
    assert one("%hx", -1, D.int32) == "ffff"
    assert one("%d", True, D.bool_) == "1"


def test_tiles_print_as_nested_lists() -> None:
    conv = F.parse("%d").conversions[0]
    assert F.format_tile(conv, np.arange(6, dtype=np.int32).reshape(2, 3), D.int32) == "[[0, 1, 2], [3, 4, 5]]"
    assert F.format_tile(conv, np.zeros((2, 1, 1), np.int16), D.int16) == "[[[0]], [[0]]]"
    assert F.format_tile(conv, np.array([True, False]), D.bool_) == "[1, 0]"
    width = F.parse("%5.1f").conversions[0]
    assert F.format_tile(width, np.array([1.25, -3.0], np.float32), D.float32) == "[  1.2,  -3.0]"
    assert F.format_tile(F.parse("%f").conversions[0], np.array(ml_dtypes.bfloat16(1.5)), D.bfloat16) == "1.500000"


def test_render_puts_texts_around_the_tiles_and_unescapes_percent() -> None:
    text = F.render("100%% of [%d]: %.2f\n", [np.int32(3), np.array([0.5, 2.0], np.float32)], [D.int32, D.float32])
    assert text == "100% of [3]: [0.50, 2.00]\n"
    assert F.render("no tiles %%d", [], []) == "no tiles %d"
    with pytest.raises(ValueError, match="invalid conversion"):
        F.parse("5%!")


@pytest.mark.parametrize("fmt, dtypes", [
    ("%d", (D.int32,)), ("%i %u %o %x %X", (D.int64, D.uint8, D.int16, D.bool_, D.uint64)),
    ("%f %e %E %F %g %G %a %A", (D.float32,) * 4 + (D.float16, D.bfloat16, D.tfloat32, D.float8_e4m3fn)),
    ("escape %% %%%% %ld %lld %lu %llu %hd %hhu", (D.int32, D.int64, D.uint32, D.uint64, D.int16, D.uint8)),
    ("%+3.5f%% %010d %#x %-4d % d %.3lf", (D.float32, D.int32, D.int32, D.int32, D.int32, D.float64)),
    ("no conversion", ()),
])
def test_check_printf_accepts_cutile_formats(fmt, dtypes) -> None:
    F.check_printf(fmt, dtypes, [f"tile<{d}>" for d in dtypes])


@pytest.mark.parametrize("fmt, dtypes, message", [
    ("%d", (D.float32,), "Format %d for arg #0 got unexpected type of tile<float32>"),
    ("%d %f", (D.int32, D.int8), "Format %f for arg #1 got unexpected type of tile<int8>"),
    ("%x", (D.float64,), "Format %x for arg #0 got unexpected type of"),
    ("%%%+3", (D.int32,), "Invalid format string"),
    ("%!", (), "Invalid format string"),
    ("%-+5d", (D.int32,), "Invalid format string"),      # cuTile allows one flag
    ("%.f", (D.float32,), "Invalid format string"),       # and a precision with digits
    ("%s", (D.int32,), "Specifier s in %s is not supported"),
    ("%c", (D.int32,), "Specifier c in %c is not supported"),
    ("%d %d", (D.int32,), "Not enough arguments for format string"),
    ("%d", (D.int32, D.int32), "Too many arguments for format string"),
    ("text", (D.int32,), "Too many arguments for format string"),
])
def test_check_printf_rejects_with_cutile_messages(fmt, dtypes, message) -> None:
    with pytest.raises(F.FormatError) as info:
        F.check_printf(fmt, dtypes, [f"tile<{d}>" for d in dtypes])
    assert str(info.value).startswith(message)
