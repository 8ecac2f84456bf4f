"""Readable text form of Tile IR, e.g. `%12 = binary[fn=add] %10, %11 : tile<32x32xf32>  # k.py:7`."""

from __future__ import annotations

import dataclasses
import enum

from .core import Block, Function, Op, Value


def _attr(v) -> str:
    if isinstance(v, enum.Enum):
        return v.name.lower()
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr(x) for x in v) + ")"
    return repr(v) if isinstance(v, str) else str(v)


def _name(v: Value) -> str:
    return f"%{v.id}"


def _op(op: Op, indent: str, out: list[str]) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(op)}
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in op.attributes().items()
                      if v is not None and not (k in defaults and defaults[k] is v))
    head = op.name + (f"[{attrs}]" if attrs else "")
    lhs = ", ".join(_name(r) for r in op.results)
    rhs = ", ".join(_name(o) for o in op.operands)
    types = ", ".join(str(r.type) for r in op.results)
    line = f"{indent}{lhs + ' = ' if lhs else ''}{head} {rhs}".rstrip()
    if types:
        line += f" : {types}"
    if op.loc is not None:
        line += f"  # {op.loc.file.rsplit('/', 1)[-1]}:{op.loc.line}"
    out.append(line)
    for name, blk in zip(op._block_fields, op.blocks):
        args = ", ".join(f"{_name(a)}: {a.type}" for a in blk.args)
        out.append(f"{indent}  ^{name}({args}):")
        _block(blk, indent + "    ", out)


def _block(block: Block, indent: str, out: list[str]) -> None:
    for op in block.ops:
        _op(op, indent, out)


def format_function(fn: Function) -> str:
    params = ", ".join(f"{n} {_name(p)}: {p.type}" for n, p in zip(fn.param_names, fn.params))
    out = [f"kernel @{fn.name}({params}) {{"]
    _block(fn.body, "  ", out)
    out.append("}")
    return "\n".join(out)
