"""C printf formatting of tiles, shared by every backend: the text `ct.printf` and `ct.print` output.

A Print op carries a C format whose conversions each take one tile. As in cuTile, a tile prints
as nested lists `[a, b, ...]` (`, ` between items at every level) with the conversion applied to
each element, a 0-d tile as one element. Elements are formatted as C's printf formats the
promoted argument: integers narrower than 64 bits as `int`/`unsigned int` (so `%u` of an int32
-1 is 4294967295 and `%d` of a uint32 4294967295 is -1; `hh`/`h` narrow further, `l`/`ll` change
nothing), bools as 0/1, every float dtype as the double holding its exact value; inf and nan as
glibc spells them (`-nan` when the sign bit is set).

`check_printf` validates a user's `ct.printf` format against its arguments' dtypes with cuTile's
rules and wording (one flag at most, `[diuoxX]` for integers and bools, `[eEfFgGaA]` for floats);
`render` produces the text of one execution of a Print op; `emit` writes it to the process's
standard output (through `sys.stdout`, flushed, so pytest's capsys and capfd both see it).
"""

from __future__ import annotations

import functools
import math
import re
import struct
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .dtypes import DType

INT_SPECIFIERS = "diuoxX"
FLOAT_SPECIFIERS = "eEfFgGaA"

# cuTile's subset of %[flags][width][.precision][length]specifier: at most one flag; the
# specifiers c, s, p and n parse but are refused.
_USER_CONVERSION = re.compile(r"%([-+ #0])?(\d+)?(\.\d+)?(hh|h|ll|l)?([diuoxXeEfFgGaAcspn])")
# What a Print op may hold (the front end turns Python format specs into several flags).
_CONVERSION = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<precision>\d+))?"
                         r"(?P<length>hh|h|ll|l)?(?P<spec>[diuoxXeEfFgGaA])")


class FormatError(ValueError):
    """A printf format that does not fit its arguments (the message is cuTile's)."""


@dataclass(frozen=True)
class Conversion:
    """One parsed `%...` conversion."""

    flags: str
    width: int
    precision: int | None
    length: str
    spec: str


@dataclass(frozen=True)
class ParsedFormat:
    """A Print op's format: `texts[0]`, conversion 0, `texts[1]`, ... (`%%` already unescaped)."""

    texts: tuple[str, ...]
    conversions: tuple[Conversion, ...]


def accepts(spec: str, dtype: DType) -> bool:
    """Whether conversion `spec` may print a tile of `dtype` (integers and bools take integer
    conversions, float dtypes, including tfloat32 and float8, take float conversions)."""
    if dtype.is_integral:
        return spec in INT_SPECIFIERS
    return spec in FLOAT_SPECIFIERS


def check_printf(fmt: str, dtypes: Sequence[DType], names: Sequence[str]) -> None:
    """Raise FormatError (cuTile's messages) unless the user's `ct.printf` format `fmt` has one
    valid conversion per argument, each fitting its argument's dtype (`names`: the arguments'
    types as messages name them)."""
    pos, arg = 0, 0
    while pos < len(fmt):
        if fmt[pos] != "%":
            pos += 1
            continue
        if fmt.startswith("%%", pos):
            pos += 2
            continue
        m = _USER_CONVERSION.match(fmt, pos)
        if m is None:
            raise FormatError("Invalid format string")
        spec = m.group(5)
        if spec not in INT_SPECIFIERS + FLOAT_SPECIFIERS:
            raise FormatError(f"Specifier {spec} in {m.group(0)} is not supported")
        if arg >= len(dtypes):
            raise FormatError("Not enough arguments for format string")
        if not accepts(spec, dtypes[arg]):
            raise FormatError(f"Format {m.group(0)} for arg #{arg} got unexpected type of {names[arg]}")
        arg += 1
        pos = m.end()
    if arg < len(dtypes):
        raise FormatError("Too many arguments for format string")


@functools.lru_cache(maxsize=256)
def parse(fmt: str) -> ParsedFormat:
    """Split a Print op's format into texts and conversions; ValueError for a stray `%`."""
    texts, convs, text, pos = [], [], [], 0
    while pos < len(fmt):
        ch = fmt[pos]
        if ch != "%":
            text.append(ch)
            pos += 1
        elif fmt.startswith("%%", pos):
            text.append("%")
            pos += 2
        else:
            m = _CONVERSION.match(fmt, pos)
            if m is None:
                raise ValueError(f"invalid conversion at offset {pos} of print format {fmt!r}")
            texts.append("".join(text))
            text = []
            p = m.group("precision")
            convs.append(Conversion(m.group("flags"), int(m.group("width") or 0), None if p is None else int(p),
                                    m.group("length") or "", m.group("spec")))
            pos = m.end()
    texts.append("".join(text))
    return ParsedFormat(tuple(texts), tuple(convs))


def conversions(fmt: str) -> tuple[Conversion, ...] | None:
    """The conversions of a Print op's format; None when it is malformed."""
    try:
        return parse(fmt).conversions
    except ValueError:
        return None


def render(fmt: str, values: Sequence[Any], dtypes: Sequence[DType]) -> str:
    """The text one execution of a Print op with format `fmt` prints for these tiles (NumPy
    arrays or scalars of the dtypes' storage types)."""
    parsed = parse(fmt)
    out = [parsed.texts[0]]
    for conv, value, dtype, text in zip(parsed.conversions, values, dtypes, parsed.texts[1:]):
        out.append(format_tile(conv, value, dtype))
        out.append(text)
    return "".join(out)


def emit(text: str) -> None:
    """Write printed text to standard output now."""
    sys.stdout.write(text)
    sys.stdout.flush()


def format_tile(conv: Conversion, value: Any, dtype: DType) -> str:
    """A tile as nested lists of its elements formatted by `conv` (a 0-d tile: the element)."""
    arr = np.asarray(value)
    if dtype.is_integral:
        bits = _int_bits(conv, dtype)
        signed = conv.spec in "di"
        items = arr.astype(np.uint64 if dtype.bitwidth == 64 and not dtype.signed else np.int64).tolist()

        def item(x: Any) -> str:
            return _format_int(conv, _wrap(int(x), bits, signed))
    else:
        items = arr.astype(np.float64).tolist()

        def item(x: Any) -> str:
            return _format_float(conv, x)

    def nest(x: Any) -> str:
        if isinstance(x, list):
            return "[" + ", ".join(nest(e) for e in x) + "]"
        return item(x)
    return nest(items)


def _int_bits(conv: Conversion, dtype: DType) -> int:
    """The width C's printf reads the promoted integer argument at."""
    if conv.length == "hh":
        return 8
    if conv.length == "h":
        return 16
    return 64 if dtype.bitwidth == 64 else 32


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def _pad(conv: Conversion, prefix: str, body: str, zero_ok: bool) -> str:
    """`prefix` (sign, 0x) + `body` padded to the field width: left-justified with `-`, zeros
    after the prefix with `0` (where C applies it), else spaces before."""
    room = conv.width - len(prefix) - len(body)
    if room <= 0:
        return prefix + body
    if "-" in conv.flags:
        return prefix + body + " " * room
    if "0" in conv.flags and zero_ok:
        return prefix + "0" * room + body
    return " " * room + prefix + body


def _sign(conv: Conversion, negative: bool) -> str:
    if negative:
        return "-"
    return "+" if "+" in conv.flags else " " if " " in conv.flags else ""


def _format_int(conv: Conversion, v: int) -> str:
    """C's %d %i %u %o %x %X of `v` (already wrapped to the width read)."""
    spec, mag = conv.spec, abs(v)
    digits = {"o": f"{mag:o}", "x": f"{mag:x}", "X": f"{mag:X}"}.get(spec, str(mag))
    if conv.precision is not None:
        digits = "" if conv.precision == 0 and mag == 0 else digits.zfill(conv.precision)
    prefix = _sign(conv, v < 0) if spec in "di" else ""
    if "#" in conv.flags:
        if spec == "o" and not digits.startswith("0"):
            digits = "0" + digits
        elif spec in "xX" and mag:
            prefix += "0" + spec
    return _pad(conv, prefix, digits, conv.precision is None)


def _format_float(conv: Conversion, v: float) -> str:
    """C's (glibc's) %e %E %f %F %g %G %a %A of the double `v`."""
    spec = conv.spec
    negative = math.copysign(1.0, v) < 0
    prefix = _sign(conv, negative)
    if not math.isfinite(v):
        body = "nan" if math.isnan(v) else "inf"
        return _pad(conv, prefix, body.upper() if spec.isupper() else body, False)
    if spec in "aA":
        return _hex_float(conv, abs(v), prefix)
    flags = "".join(f for f in conv.flags if f in "#")
    precision = "" if conv.precision is None else f".{conv.precision}"
    body = f"%{flags}{precision}{spec}" % abs(v)
    return _pad(conv, prefix, body, True)


def _hex_float(conv: Conversion, v: float, prefix: str) -> str:
    """glibc's %a: 0x<lead>.<hex fraction>p<binary exponent>, the fraction exact without a
    precision (trailing zeros dropped), else rounded to nearest-even at `precision` digits."""
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    field, frac = (bits >> 52) & 0x7FF, bits & ((1 << 52) - 1)
    if v == 0:
        lead, exp = 0, 0
    elif field == 0:
        lead, exp = 0, -1022
    else:
        lead, exp = 1, field - 1023
    mant = (lead << 52) | frac
    p = conv.precision
    if p is None:
        digits = f"{frac:013x}".rstrip("0")
    elif p >= 13:
        digits = f"{frac:013x}" + "0" * (p - 13)
    else:
        shift = 4 * (13 - p)
        q, r = divmod(mant, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        lead, rest = q >> (4 * p), q & ((1 << (4 * p)) - 1)
        digits = f"{rest:0{p}x}" if p else ""
    point = "." if digits or "#" in conv.flags else ""
    body = f"{lead}{point}{digits}p{exp:+d}"
    prefix += "0x"
    if conv.spec == "A":
        body, prefix = body.upper(), prefix.upper()
    return _pad(conv, prefix, body, True)
