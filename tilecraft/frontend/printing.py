"""`print`/`ct.print`, `ct.printf`, f-strings, `str()` and `repr()` in tile code → Print ops.

Text holding runtime tiles is a `FormatString`: literal pieces and `Field`s (a tile and the Python
format spec written after it, if any). f-strings, `str()`, `repr()` and `+` build them as cuTile
does (tuples and dataclasses as Python writes them, tiles as nested lists); `print` joins its
arguments' `str()` and turns the result into one Print op whose format is C printf text: each
field's Python spec becomes the C conversion printing that tile's dtype. `ct.printf` takes the
user's C format as is, after cuTile's checks.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Union

from ..ir import Value, ops
from ..language import dtypes as dt
from ..language import formatting
from ..language import ops as L
from ..language.dtypes import DType
from . import records
from .registry import handles
from .semantics import is_tile, type_name


@dataclass(frozen=True)
class Field:
    """A runtime tile inside text; `spec`: the Python format spec after it (None: the default)."""

    value: Value
    spec: str | None = None


@dataclass(frozen=True)
class FormatString:
    """Text holding runtime tiles: literal pieces and fields, in order (never two strings in a
    row); `+` with strings and other FormatStrings concatenates, as in cuTile."""

    parts: tuple[str | Field, ...]

    def __add__(self, other: Any) -> Any:
        if isinstance(other, (str, FormatString)):
            return concat(self, other)
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, str):
            return concat(other, self)
        return NotImplemented


Text = Union[str, FormatString]


def concat(*chunks: Text | Field) -> Text:
    """The chunks joined; a plain str when no tile is left in them."""
    parts: list[str | Field] = []
    for chunk in chunks:
        for part in chunk.parts if isinstance(chunk, FormatString) else (chunk,):
            if isinstance(part, str) and parts and isinstance(parts[-1], str):
                parts[-1] += part
            elif part != "":
                parts.append(part)
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)  # type: ignore[arg-type]
    return FormatString(tuple(parts))


# ---- str() and repr() -----------------------------------------------------------------------------------
def _method(cls: type, name: str) -> Any:
    """The function `cls` (or a base) defines as `name`."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name]
    return None


def _generated_repr(cls: type) -> bool:
    """Whether `cls.__repr__` is the one @dataclass wrote (it wraps a function compiled from a
    string), not one the class defines itself."""
    wrapped = getattr(_method(cls, "__repr__"), "__wrapped__", None)
    return (cls.__dataclass_params__.repr  # type: ignore[attr-defined]
            and wrapped is not None and "__create_fn__" in getattr(wrapped, "__qualname__", ""))


def _call_dunder(fc: Any, method: Any, obj: Any, name: str) -> Text:
    out = fc.inline(method, [obj], {}, None)
    if not isinstance(out, (str, FormatString)):
        raise fc.sema.type_error(f"Expected {type(obj).__name__}.{name}() to return a string, got {type_name(out)}")
    return out


def _runtime(x: Any) -> bool:
    return isinstance(x, FormatString) or records.has_runtime(x) or (
        isinstance(x, tuple) and any(_runtime(e) for e in x))


def to_str(fc: Any, x: Any) -> Text:
    """`str(x)` in tile code."""
    if isinstance(x, (str, FormatString)):
        return x
    if records.is_record(x) and _runtime(x):
        method = _method(type(x), "__str__")
        if method is object.__str__:
            return to_repr(fc, x)
        return _call_dunder(fc, method, x, "__str__")
    if isinstance(x, tuple) and _runtime(x):
        return to_repr(fc, x)
    if is_tile(x):
        return FormatString((Field(x),))
    if isinstance(x, Value):
        raise fc.sema.type_error(f"Object of type {type_name(x)} has no str()")
    return fc.host(str, (x,), None)


def to_repr(fc: Any, x: Any) -> Text:
    """`repr(x)` in tile code."""
    if isinstance(x, FormatString):
        return _quoted(x)
    if isinstance(x, tuple) and _runtime(x):
        items = [to_repr(fc, e) for e in x]
        chunks: list[Text] = ["("]
        for i, item in enumerate(items):
            chunks += [", "] * bool(i) + [item]
        chunks.append(",)" if len(items) == 1 else ")")
        return concat(*chunks)
    if records.is_record(x) and _runtime(x):
        cls = type(x)
        if _generated_repr(cls):
            chunks = [f"{cls.__qualname__}("]
            shown = [f for f in dataclasses.fields(x) if f.repr]
            for i, f in enumerate(shown):
                chunks += [", " * bool(i) + f"{f.name}=", to_repr(fc, getattr(x, f.name))]
            return concat(*chunks, ")")
        method = _method(cls, "__repr__")
        if method is object.__repr__:
            return f"<{cls.__qualname__} object>"
        return _call_dunder(fc, method, x, "__repr__")
    if is_tile(x):
        return FormatString((Field(x),))
    if isinstance(x, Value):
        raise fc.sema.type_error(f"Object of type {type_name(x)} has no repr()")
    return fc.host(repr, (x,), None)


def _quoted(s: FormatString) -> FormatString:
    """repr() of text with tiles: quoted and escaped as Python quotes its literal pieces."""
    text = "".join(p for p in s.parts if isinstance(p, str))
    quote = '"' if "'" in text and '"' not in text else "'"

    def escape(piece: str) -> str:  # repr() of the piece behind the other quote uses `quote`
        return repr(('"' if quote == "'" else "'") + piece)[2:-1]
    return concat(quote, *(escape(p) if isinstance(p, str) else p for p in s.parts), quote)  # type: ignore[return-value]


@handles(str)
def str_(fc: Any, x: Any = "", /) -> Text:
    return to_str(fc, x)


@handles(repr)
def repr_(fc: Any, x: Any, /) -> Text:
    return to_repr(fc, x)


# ---- f-strings --------------------------------------------------------------------------------------------
def _spec_of(fc: Any, v: ast.FormattedValue) -> str | None:
    spec = v.format_spec
    if spec is None or not spec.values:
        return None
    if isinstance(spec, ast.JoinedStr) and len(spec.values) == 1 and isinstance(spec.values[0], ast.Constant):
        return str(spec.values[0].value)
    raise fc.syntax_error("f-string: format spec must be a literal string", v)


def joined_str(fc: Any, node: ast.JoinedStr) -> Text:
    """An f-string: a str when every value is a compile-time constant, else a FormatString."""
    chunks: list[Text | Field] = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            chunks.append(str(v.value))
            continue
        assert isinstance(v, ast.FormattedValue)
        if v.conversion != -1:
            raise fc.syntax_error("f-string: !r, !s, !a conversions are not supported", v)
        spec = _spec_of(fc, v)
        value = fc.expr(v.value)
        if is_tile(value):
            chunks.append(Field(value, spec))
            continue
        if records.is_record(value) and _method(type(value), "__format__") not in (None, object.__format__):
            raise fc.type_error("Formatting dataclass values with custom __format__() is not supported", v.value)
        if spec is None:
            chunks.append(to_str(fc, value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            chunks.append(fc.host(format, (value, spec), v))
        else:
            raise fc.type_error(f"f-string: cannot apply format spec to a value of type {type_name(value)}", v.value)
    return concat(*chunks)


# ---- print and printf ---------------------------------------------------------------------------------------
_PY_SPEC = re.compile(r"(?P<align>[<>^])?(?P<sign>[-+ ])?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?"
                      r"(?:\.(?P<precision>\d+))?(?P<type>[diouxXeEfFgGaA])?")


def default_conversion(dtype: DType) -> str:
    """The C conversion printing `dtype` when no spec is given (cuTile's choice)."""
    if dtype.is_integral:
        return ("%ll" if dtype.bitwidth == 64 else "%") + ("d" if dtype.signed or dtype is dt.bool_ else "u")
    return "%lf" if dtype.bitwidth == 64 else "%f"


def c_conversion(fc: Any, spec: str | None, dtype: DType) -> str:
    """The C conversion for a Python format spec applied to a tile of `dtype`: `<` left-justifies,
    a sign, `#` and `0` carry over, `>` and `^` are ignored; no type means the dtype's default."""
    if spec is None:
        return default_conversion(dtype)
    m = _PY_SPEC.fullmatch(spec)
    if m is None:
        raise fc.sema.type_error(f"print(): unsupported format spec '{spec}'")
    flags = "-" * (m["align"] == "<") + (m["sign"] if m["sign"] in ("+", " ") else "") + (m["alt"] or "")
    flags += "0" if m["zero"] and m["align"] != "<" else ""
    width = m["width"] or ""
    precision = "" if m["precision"] is None else "." + m["precision"]
    kind = m["type"]
    if kind is None:
        kind = default_conversion(dtype)[1:]
    elif not formatting.accepts(kind, dtype):
        raise fc.sema.type_error(f"print(): format spec '{spec}' is incompatible with dtype {dtype}")
    return f"%{flags}{width}{precision}{kind}"


def emit_print(fc: Any, text: Text) -> None:
    """One Print op writing `text`."""
    fmt, tiles = [], []
    for part in text.parts if isinstance(text, FormatString) else (text,):
        if isinstance(part, str):
            fmt.append(part.replace("%", "%%"))
        else:
            fmt.append(c_conversion(fc, part.spec, part.value.tile.dtype))
            tiles.append(part.value)
    fc.b.emit(ops.Print, format="".join(fmt), tiles=tuple(tiles))


@handles(builtins.print, L.print)
def print_(fc: Any, *args: Any, sep: Any = " ", end: Any = "\n") -> None:
    for name, v in (("sep", sep), ("end", end)):
        if not isinstance(v, (str, FormatString)):
            raise fc.sema.type_error(f"print(): `{name}` must be a string, got {type_name(v)}")
    chunks: list[Text] = []
    for i, a in enumerate(args):
        if i:
            chunks.append(sep)
        chunks.append(to_str(fc, a))
    emit_print(fc, concat(*chunks, end))


@handles(L.printf)
def printf(fc: Any, format: Any, *args: Any) -> None:  # noqa: A002
    if not isinstance(format, str):
        what = "is not constant" if _runtime(format) else f"has type {type_name(format)}"
        raise fc.sema.arg_error(f"Expected a string constant, but given value {what}", param="format")
    tiles = tuple(fc.sema.to_tile(a) for a in args)
    try:
        formatting.check_printf(format, [t.tile.dtype for t in tiles], [type_name(t) for t in tiles])
    except formatting.FormatError as exc:
        raise fc.sema.type_error(str(exc)) from None
    fc.b.emit(ops.Print, format=format, tiles=tiles)
