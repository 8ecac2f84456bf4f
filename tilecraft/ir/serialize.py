"""Tile IR functions as JSON-ready data and back, driven by the op declarations.

Loading builds only declared op classes, enums, dtypes and plain numbers: it runs no code from the
data (unlike a pickle), and anything malformed raises `ValueError`. The result is verified, so a
decoded function is well-formed IR or an error. Values keep their ids (unique per function).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from ..errors import Location
from ..language.dtypes import DType, dtype_by_name
from .core import Block, Function, Op, Value, attribute_hints
from .ops import OP_CLASSES
from .types import ArrayType, IRType, ListType, TileType
from .verifier import verify

FORMAT = 1
_CLASSES = {cls.__name__: cls for cls in OP_CLASSES}


# ---- encoding ---------------------------------------------------------------------------------------
def _type(t: IRType) -> Any:
    if isinstance(t, TileType):
        return ["tile", t.dtype.name, list(t.shape)]
    if isinstance(t, ArrayType):
        return ["array", t.dtype.name, t.ndim, t.index64]
    return ["list", _type(t.elem), t.length]


def _loc(loc: Location | None) -> Any:
    if loc is None:
        return None
    return [loc.file, loc.line, loc.col, loc.function, _loc(loc.caller)]


def _value(v: Value) -> Any:
    return [v.id, _type(v.type), v.hint]


def _attr(x: Any) -> Any:
    if isinstance(x, enum.Enum):
        return x.name
    if isinstance(x, DType):
        return x.name
    if isinstance(x, tuple):
        return [_attr(e) for e in x]
    return x


def _block(block: Block) -> Any:
    return {"args": [_value(a) for a in block.args], "ops": [_op(op) for op in block.ops]}


def _op(op: Op) -> Any:
    fields: dict[str, Any] = {}
    for name in op._operand_fields:
        v = getattr(op, name)
        fields[name] = [x.id for x in v] if isinstance(v, tuple) else (None if v is None else v.id)
    for name in op._block_fields:
        fields[name] = _block(getattr(op, name))
    for name in op._attr_fields:
        fields[name] = _attr(getattr(op, name))
    return {"op": type(op).__name__, "results": [_value(r) for r in op.results], "loc": _loc(op.loc),
            "fields": fields}


def to_data(fn: Function) -> dict[str, Any]:
    """`fn` as nested lists, dicts, strings and numbers (JSON-serializable)."""
    return {"format": FORMAT, "name": fn.name, "params": [_value(p) for p in fn.params],
            "param_names": list(fn.param_names), "loc": _loc(fn.loc), "options": dict(fn.options),
            "body": _block(fn.body)}


# ---- decoding ----------------------------------------------------------------------------------------
def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(f"malformed IR data: {what}")


def _dtype(name: Any) -> DType:
    _need(isinstance(name, str), "dtype name")
    try:
        return dtype_by_name(name)
    except (KeyError, AttributeError):
        raise ValueError(f"malformed IR data: unknown dtype {name!r}") from None


def _list(x: Any, what: str) -> list:
    _need(isinstance(x, list), what)
    return x


def _int(x: Any) -> int:
    _need(isinstance(x, int) and not isinstance(x, bool), "integer")
    return x


def _read_type(d: Any) -> IRType:
    _need(isinstance(d, list) and d and d[0] in ("tile", "array", "list"), "type")
    if d[0] == "tile":
        _need(len(d) == 3 and isinstance(d[2], list), "tile type")
        return TileType(_dtype(d[1]), tuple(_int(x) for x in d[2]))
    if d[0] == "array":
        _need(len(d) == 4 and isinstance(d[3], bool), "array type")
        return ArrayType(_dtype(d[1]), _int(d[2]), d[3])
    _need(len(d) == 3, "list type")
    elem = _read_type(d[1])
    _need(isinstance(elem, ArrayType), "list element type")
    return ListType(elem, _int(d[2]))


def _read_loc(d: Any) -> Location | None:
    if d is None:
        return None
    _need(isinstance(d, list) and len(d) == 5 and isinstance(d[0], str) and isinstance(d[3], str), "location")
    return Location(d[0], _int(d[1]), _int(d[2]), d[3], _read_loc(d[4]))


def _read_attr(x: Any, hint: Any) -> Any:
    """`x` decoded as a value of the annotation `hint`."""
    if hint is type(None):
        _need(x is None, "None attribute")
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if x is None and type(None) in args:
            return None
        for h in args:
            if h is type(None):
                continue
            try:
                return _read_attr(x, h)
            except ValueError:
                continue
        raise ValueError(f"malformed IR data: {x!r} is not a {hint}")
    if origin is tuple:
        (elem, _) = typing.get_args(hint)
        _need(isinstance(x, list), f"tuple attribute {hint}")
        return tuple(_read_attr(e, elem) for e in x)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        _need(isinstance(x, str) and x in hint.__members__, f"{hint.__name__} member")
        return hint[x]
    if hint is DType:
        return _dtype(x)
    if hint is int:
        return _int(x)
    if hint is bool:
        _need(isinstance(x, bool), "bool attribute")
        return x
    if hint is float:
        _need(isinstance(x, float), "float attribute")
        return x
    if hint is str:
        _need(isinstance(x, str), "str attribute")
        return x
    raise ValueError(f"malformed IR data: no decoder for {hint}")


class _Reader:
    def __init__(self) -> None:
        self.values: dict[int, Value] = {}

    def new(self, d: Any) -> Value:
        _need(isinstance(d, list) and len(d) == 3 and isinstance(d[2], str), "value")
        vid = _int(d[0])
        _need(vid not in self.values, f"value id {vid} defined twice")
        v = self.values[vid] = Value(_read_type(d[1]), vid, d[2])
        return v

    def use(self, vid: Any) -> Value:
        _need(isinstance(vid, int) and vid in self.values, f"unknown value id {vid!r}")
        return self.values[vid]

    def block(self, d: Any) -> Block:
        _need(isinstance(d, dict) and set(d) == {"args", "ops"}, "block")
        args = [self.new(a) for a in _list(d["args"], "block arguments")]
        return Block(args, [self.op(o) for o in _list(d["ops"], "block ops")])

    def op(self, d: Any) -> Op:
        _need(isinstance(d, dict) and set(d) == {"op", "results", "loc", "fields"}, "op")
        cls = _CLASSES.get(d["op"])
        _need(cls is not None, f"unknown op {d['op']!r}")
        fields = d["fields"]
        _need(isinstance(fields, dict) and set(fields) == set(cls._operand_fields + cls._block_fields
                                                               + cls._attr_fields), f"{d['op']} fields")
        kw: dict[str, Any] = {}
        for name in cls._block_fields:  # regions first: their values are defined inside
            kw[name] = self.block(fields[name])
        for f in dataclasses.fields(cls):
            if f.name not in cls._operand_fields:
                continue
            x = fields[f.name]
            if f.type == "tuple[Value, ...]":
                kw[f.name] = tuple(self.use(i) for i in _list(x, f"{cls.__name__}.{f.name}"))
            else:
                _need(x is not None or f.type == "Value | None", f"{cls.__name__}.{f.name}")
                kw[f.name] = None if x is None else self.use(x)
        for name, hint in attribute_hints(cls).items():
            kw[name] = _read_attr(fields[name], hint)
        results = tuple(self.new(r) for r in _list(d["results"], "results"))
        return cls(**kw, results=results, loc=_read_loc(d["loc"]))


def from_data(d: Any) -> Function:
    """The function `to_data` encoded; ValueError (or TileInternalError from the verifier) if
    `d` is malformed."""
    _need(isinstance(d, dict) and d.get("format") == FORMAT, "format")
    _need(set(d) == {"format", "name", "params", "param_names", "loc", "options", "body"}, "function keys")
    _need(isinstance(d["name"], str) and isinstance(d["options"], dict), "function header")
    r = _Reader()
    params = [r.new(p) for p in _list(d["params"], "parameters")]
    names = d["param_names"]
    _need(isinstance(names, list) and len(names) == len(params) and all(isinstance(n, str) for n in names),
          "parameter names")
    fn = Function(d["name"], params, names, r.block(d["body"]), _read_loc(d["loc"]), dict(d["options"]))
    return verify(fn)
