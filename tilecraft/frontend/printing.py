"""`print`, `ct.printf` and f-strings in tile code → Print ops (one line per block)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from ..ir import Value, ops
from ..language import ops as L
from .registry import handles
from .semantics import is_tile


@dataclass(frozen=True)
class FormatString:
    """An f-string with runtime tiles: text pieces around the tiles, and per tile its format
    ('{:<python spec>}' or a C '%...' specifier; None: the default format)."""

    pieces: tuple[str, ...]
    values: tuple[Value, ...]
    formats: tuple[str | None, ...] = ()


def _pieces(parts: list[Any]) -> FormatString:
    pieces, values, formats, text = [], [], [], ""
    for p in parts:
        if isinstance(p, FormatString):
            text += p.pieces[0]
            for v, f, nxt in zip(p.values, p.formats or (None,) * len(p.values), p.pieces[1:]):
                pieces.append(text)
                values.append(v)
                formats.append(f)
                text = nxt
        elif is_tile(p):
            pieces.append(text)
            values.append(p)
            formats.append(None)
            text = ""
        else:
            text += str(p)
    pieces.append(text)
    return FormatString(tuple(pieces), tuple(values), tuple(formats))


_PY_SPEC = re.compile(r"[<>^]?[+ -]?#?0?\d*(?:\.\d+)?[dfFeEgGxXo%]?")


def joined_str(fc: Any, node: ast.JoinedStr) -> Any:
    parts: list[Any] = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(v.value)
            continue
        assert isinstance(v, ast.FormattedValue)
        if v.conversion != -1:
            raise fc.syntax_error("!r/!s/!a conversions are not supported in tile f-strings", v)
        value = fc.expr(v.value)
        spec = fc.expr(v.format_spec) if v.format_spec is not None else ""
        if not isinstance(value, Value):
            parts.append(format(value, spec))
        elif spec:
            if not isinstance(spec, str) or not _PY_SPEC.fullmatch(spec):
                raise fc.syntax_error(f"Unsupported format spec {spec!r} for a tile in an f-string", v)
            parts.append(FormatString(("", ""), (value,), ("{:" + spec + "}",)))
        else:
            parts.append(value)
    fs = _pieces(parts)
    return fs.pieces[0] if not fs.values else fs


@handles(print)
def print_(fc: Any, *args: Any, sep: str = " ", end: str = "\n") -> None:
    parts: list[Any] = []
    for i, a in enumerate(args):
        if i:
            parts.append(sep)
        parts.append(a)
    parts.append(end)
    fs = _pieces(parts)
    fc.b.emit(ops.Print, tiles=fs.values, pieces=fs.pieces, formats=fs.formats)


_SPEC = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z)?[diouxXeEfFgGaA]")


@handles(L.printf)
def printf(fc: Any, format: Any, *args: Any) -> None:
    if not isinstance(format, str):
        raise fc.sema.type_error("printf() needs a constant format string")
    specs = _SPEC.findall(format)
    if len(specs) != len(args):
        raise fc.sema.type_error(f"printf() format has {len(specs)} specifiers but {len(args)} arguments were given")
    pieces = _SPEC.split(format)
    tiles = tuple(fc.sema.to_tile(a) for a in args)
    formats = tuple(None if s[-1] in "aA" else re.sub(r"(hh|h|ll|l|z)(?=.$)", "", s).replace("u", "d").replace("i", "d")
                    for s in specs)   # as Python %-formats (hex floats keep the default format)
    fc.b.emit(ops.Print, tiles=tiles, pieces=tuple(pieces), formats=formats)
