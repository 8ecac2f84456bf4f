"""The repeat-launch fast path: a cheap key per argument list that maps straight to a compiled
variant, skipping classification, spec construction and hashing of frozen specs.

The key holds what decides the variant and the launch checks: each tensor's type, dtype,
device (`.device`: `get_device()` is -1 on CPU and meta alike), strides, shape and 16-byte base
alignment (shape and strides also decide 64-bit indexing); for NumPy arrays also whether they
are writable (a read-only array the kernel writes is refused on the full path, so it must
never find a fast entry); each Constant's `constant_key` (floats by their bits: 0.0 and -0.0
differ); each scalar's type. Anything the fast key cannot describe returns None and takes the
full path, which also produces every error message.

The key is one flat tuple (an array's five items inline, not a tuple per argument: less to build,
hash and compare on each launch). It still reads back one way only: a Constant is one item, and
at any other parameter the first item says how many follow (a torch dtype or a NumPy dtype: the
array's five; a type: a scalar's one), so argument lists of different types never share a key.

`typed_keyer` writes `fast_key` out for one list of argument types: the same key, without the
per-argument loop and type dispatch (the runtime keeps one per kernel, for the types it saw last).
`quick_launcher` goes further for one key: it checks a launch's arguments item by item against
that key and calls the backend's fused launch (`FusedLaunch`) itself, with no key, dictionary
or launcher object in between (`ct.launch` tries the last variant's first). All three are made
from one description of the items (`_ARRAYS` for arrays, `_Code` for the generated code).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..backends.base import FusedLaunch
from ..frontend.signature import constant_key
from ..knobs import Knob
from .args import ParamInfo

_BIG = 2**31

_ALIGN = "{p} & 15"  # the 16-byte alignment item

_ARRAYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch": ("{a}.data_ptr()", ("{a}.dtype", "{a}.device", "{a}.stride()", "{a}.shape", _ALIGN)),
    "numpy": ("{a}.ctypes.data", ("{a}.dtype", "{a}.strides", "{a}.shape", _ALIGN, "{a}.flags.writeable")),
}
"""The one description of an array's key items, per kind: (its address, its items), written
over `{a}` (the array) and `{p}` (its address). `fast_key`, `typed_keyer` and `quick_launcher`
are all made from it."""


def _array_kind(t: type) -> str | None:
    """The `_ARRAYS` kind of arrays of type `t`; None for anything else."""
    if t is np.ndarray:
        return "numpy"
    if t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
        return "torch"
    return None


def _array_items(kind: str, a: str, address: str | None = None) -> list[str]:
    """The key items of array `a` of `kind`, its address written `address` (default: read inline)."""
    read, items = _ARRAYS[kind]
    p = address if address is not None else read.format(a=a)
    return [item.format(a=a, p=p) for item in items]


_ARRAY_KEYS = {kind: eval(f"lambda a: ({', '.join(_array_items(kind, 'a'))},)")  # noqa: S307 - our own text
               for kind in _ARRAYS}


def fast_plan(params: list[ParamInfo]) -> tuple[bool, ...] | None:
    """Per parameter: is it a Constant. None when a parameter needs the full path every time
    (ScalarInt64 or IndexedWithInt64 annotations)."""
    if any(p.scalar_dtype is not None or p.index64 for p in params):
        return None
    return tuple(p.constant for p in params)


def fast_key(plan: tuple[bool, ...] | None, args: Any) -> tuple[tuple[Any, ...], list[Any]] | None:
    """(key, flat runtime args) for a plain argument tuple, or None to take the full path."""
    if plan is None or type(args) is not tuple or len(args) != len(plan):
        return None
    flat: list[Any] = []
    key: list[Any] = []
    for v, constant in zip(args, plan):
        t = type(v)
        if constant:
            key.append((t, v) if t is int or t is bool else constant_key(v))
            continue
        kind = _array_kind(t)
        if kind is not None:
            key += _ARRAY_KEYS[kind](v)
        elif t is int:
            if not -_BIG <= v < _BIG:
                return None
            key.append(int)
        elif t is float or t is bool:
            key.append(t)
        else:
            return None  # tuples, NumPy scalars, other tensor types and everything else take the full path
        flat.append(v)
    k = tuple(key)
    try:
        hash(k)
    except TypeError:
        return None
    return k, flat


Keyer = Callable[[Any], "tuple[tuple[Any, ...], list[Any]] | None"]


class _Code:
    """Generated code over one list of argument types, shared by `typed_keyer` and
    `quick_launcher`: argument i is named `c<i>` when it is a Constant, else `a<j>` (its place j
    among the runtime arguments), and an array's address `p<j>`."""

    def __init__(self, plan: tuple[bool, ...], args: tuple, address: bool) -> None:
        self.env: dict[str, Any] = {"constant_key": constant_key, "BIG": _BIG}
        self.names: list[str] = []
        self.guards: list[str] = []  # each true when a call's arguments do not have these types
        self.addresses: list[str] = []  # `p<j> = <address>` statements (with `address`)
        self.items: list[str] = []  # the key's items, in order
        self.values: dict[int, str] = {}  # items (T, c) of int or bool Constants: c, to check alone
        self.aligned: dict[int, str] = {}  # alignment items (with `address`): the address's name
        self.flat: list[str] = []
        for i, (v, constant) in enumerate(zip(args, plan)):
            t = type(v)
            self.env[f"T{i}"] = t
            name = f"c{i}" if constant else f"a{len(self.flat)}"
            self.names.append(name)
            self.guards.append(f"type({name}) is not T{i}")
            if constant:
                if t is int or t is bool:
                    self.values[len(self.items)] = name
                self.items.append(f"(T{i}, {name})" if t is int or t is bool else f"constant_key({name})")
                continue
            kind = _array_kind(t)
            p = f"p{len(self.flat)}" if address and kind is not None else None
            self.flat.append(name)
            if kind is not None:
                if p is not None:
                    self.addresses.append(f"{p} = {_ARRAYS[kind][0].format(a=name)}")
                    self.aligned[len(self.items) + _ARRAYS[kind][1].index(_ALIGN)] = p
                self.items += _array_items(kind, name, p)
                continue
            if t is int:
                self.guards.append(f"not -BIG <= {name} < BIG")
            self.items.append(f"T{i}")

    def unpack(self) -> str:
        """Statements binding the argument names, returning `REFUSE` (a name the caller's
        environment defines) for an argument list of another length or other types."""
        n = len(self.names)
        return (f"    if type(args) is not tuple or len(args) != {n}:\n        return REFUSE\n"
                f"    {', '.join(self.names)}{',' if n == 1 else ''} = args\n"
                f"    if {' or '.join(self.guards)}:\n        return REFUSE\n")


def typed_keyer(plan: tuple[bool, ...], args: tuple) -> Keyer | None:
    """`fast_key(plan, a)` as generated code for every `a` whose items have the types of `args`
    (None for any other `a`); None when `args` itself takes the full path."""
    if not args or fast_key(plan, args) is None:
        return None
    code = _Code(plan, args, address=False)
    source = (f"def keyer(args):\n{code.unpack()}"
              f"    return ({''.join(x + ', ' for x in code.items)}), [{', '.join(code.flat)}]\n")
    env = {**code.env, "REFUSE": None}
    exec(source, env)  # noqa: S102 - our own generated code
    return env["keyer"]


Quick = Callable[[Any, Any, Any], Any]
"""`quick(stream, grid, args)` -> true when it launched (`quick_launcher`)."""


def _grid_source() -> str:
    """Statements binding `gx, gy, gz` from `grid`, a tuple of 1 to 3 ints in 1..LIMIT (missing
    counts 1), else returning False."""
    lines = []
    for n in (1, 2, 3):
        given, rest = ("gx", "gy", "gz")[:n], ("gx", "gy", "gz")[n:]
        lines += [f"{'if' if n == 1 else 'elif'} len(grid) == {n}:", f"    {', '.join(given)}, = grid"]
        lines += [f"    {' = '.join(rest)} = 1"] if rest else []
        lines += [f"    if {' or '.join(f'type({g}) is not int' for g in given)} or not "
                  f"({' and '.join(f'0 < {g} <= LIMIT' for g in given)}):", "        return False"]
    lines += ["else:", "    return False"]
    return "".join(f"    {line}\n" for line in lines)


def quick_launcher(plan: tuple[bool, ...], args: tuple, knob: Knob, raw: Any, launch: FusedLaunch,
                   grid_limit: int) -> Quick | None:
    """`quick(stream, grid, call_args)`: launches `launch` and returns true when `call_args`
    has the fast key of `args` exactly (checked item by item, each address read once),
    `knob.raw()` is `raw` (the backend knob as it was), `stream` is not None and `grid` is a
    tuple of 1 to 3 ints in 1..`grid_limit`; False, having done nothing, for anything else
    (also when `launch` declines). None when `args` takes the full path."""
    found = fast_key(plan, args) if args else None
    if found is None:
        return None
    code = _Code(plan, args, address=True)
    assert not set(launch.env) & set(code.env) and all(n.startswith("_") for n in launch.env)
    env = {**code.env, **launch.env, "REFUSE": False, "LIMIT": grid_limit}
    env["ENV"], env["KNOB"] = knob.raw_lookup()
    env["RAW"] = raw
    key = found[0]
    env.update((f"K{k}", v[1] if k in code.values else v) for k, v in enumerate(key))
    aligned = [p for k, p in code.aligned.items() if key[k] == 0]  # checked at once
    checks = [f"{code.values.get(k, item)} != K{k}" for k, item in enumerate(code.items)
              if code.aligned.get(k) not in aligned]
    checks += [_ALIGN.format(p=f"({' | '.join(aligned)})")] if aligned else []
    source = (f"def quick(stream, grid, args):\n"
              f"    if ENV.get(KNOB) != RAW or stream is None or type(grid) is not tuple:\n        return False\n"
              f"{code.unpack()}"
              + "".join(f"    {a}\n" for a in code.addresses) +
              f"    if {' or '.join(checks)}:\n        return False\n"
              f"{_grid_source()}"
              f"    return {launch.expr}\n")
    exec(source, env)  # noqa: S102 - our own generated code
    return env["quick"]
