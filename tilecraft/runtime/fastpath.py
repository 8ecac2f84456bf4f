"""The repeat-launch fast path: a cheap key per argument list that maps straight to a compiled
variant, skipping classification, spec construction and hashing of frozen specs.

The key holds what decides the variant and the launch checks: each tensor's type, dtype,
device (`.device`: `get_device()` is -1 on CPU and meta alike), strides, shape and 16-byte base
alignment (shape and strides also decide 64-bit indexing); for torch tensors also whether their
negative bit is set, and for NumPy arrays whether they are writable (the full path refuses a
lazy negation, and a read-only array the kernel writes, so neither may find a fast entry of a
tensor or array of the same layout); each Constant's `constant_key` (floats by their bits: 0.0 and -0.0
differ); each scalar's type, and for an int whether it is a multiple of 16 (`int_item`).
Anything the fast key cannot describe returns None and takes the full path, which also
produces every error message.

The key is one flat tuple (an array's items inline, not a tuple per argument: less to build,
hash and compare on each launch). It still reads back one way only: a Constant is one item, and
at any other parameter the first item says how many follow (a torch dtype: a tensor's six; a
NumPy dtype: an array's five; a type or `int_item`: a scalar's one), so argument lists of
different types never share a key.

`typed_keyer` writes `fast_key` out for one list of argument types: the same key, without the
per-argument loop and type dispatch (the runtime keeps one per kernel, for the types it saw last).
`quick_launcher` goes further for one key: it checks a launch's arguments item by item against
that key and calls the backend's fused launch (`FusedLaunch`) itself, with no key, dictionary
or launcher object in between (`ct.launch` tries the last variant's first); where the backend
can, the same checks run in its native code instead (`QuickChecks`, the checks as data). All are
made from one description of the items (`_ARRAYS` for arrays, `_Code` for the generated code and
the checks).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..backends.base import (CHECK_ALIGN, CHECK_CALL, CHECK_PATH, CHECK_RANGE, CHECK_VALUE, FusedLaunch, Path,
                             QuickChecks)
from ..frontend.signature import constant_key
from ..knobs import Knob
from .args import ParamInfo

_BIG = 2**31

_ALIGN = "address & 15"  # the 16-byte alignment item
_ALIGN_MASK = 15

_ARRAYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch": ("data_ptr()", ("dtype", "device", "stride()", "shape", _ALIGN, "is_neg()")),
    "numpy": ("ctypes.data", ("dtype", "strides", "shape", _ALIGN, "flags.writeable")),
}
"""The one description of an array's key items, per kind: (how its address is read, its items),
each read along a path from the array (attribute names, `()` for a call without arguments)
except `_ALIGN`, its address's alignment. `fast_key`, `typed_keyer` and `quick_launcher` (its
Python code and its `QuickChecks`) are all made from it."""


_TORCH_ARRAYS = {("torch", "Tensor"), ("torch.nn.parameter", "Parameter")}
"""(module, name) of the torch types the fast path takes (a module's weights are Parameters)."""


def _array_kind(t: type) -> str | None:
    """The `_ARRAYS` kind of arrays of type `t`; None for anything else."""
    if t is np.ndarray:
        return "numpy"
    if (t.__module__, t.__name__) in _TORCH_ARRAYS:
        return "torch"
    return None


def _array_items(kind: str, a: str, address: str | None = None) -> list[str]:
    """The key items of array `a` of `kind`, its address written `address` (default: read inline)."""
    read, items = _ARRAYS[kind]
    p = address if address is not None else f"{a}.{read}"
    return [f"{p} & {_ALIGN_MASK}" if item == _ALIGN else f"{a}.{item}" for item in items]


def _steps(path: str) -> Path:
    """An `_ARRAYS` path as `QuickChecks` reads it (names interned: lookups compare them by identity)."""
    return tuple((sys.intern(step.removesuffix("()")), step.endswith("()")) for step in path.split("."))


def int_item(v: int) -> Any:
    """An int argument's key item: `int`, or `(int, 16)` for a multiple of 16. Triton specializes
    an int parameter on that (its divisibility attribute, which lets loads indexed by it
    vectorize), and the fast path's launchers reuse the kernel compiled for the first launch of
    a key: without it, a launch with n = 33 after one with n = 32 ran the kernel compiled for
    multiples of 16 (an 8-byte vector load of a float32 gather at offset n: misaligned)."""
    return _INT16 if v % 16 == 0 else int


_INT16 = (int, 16)


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
            key.append(int_item(v))
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
    among the runtime arguments), and an array's address `p<j>`. `checks` says how a launch is
    checked against a key, item by item (`QuickChecks`' checks, with the key item's index in
    place of its value): the quick launcher's Python code and its `QuickChecks` are both written
    from it."""

    def __init__(self, plan: tuple[bool, ...], args: tuple, address: bool) -> None:
        self.env: dict[str, Any] = {"constant_key": constant_key, "int_item": int_item, "BIG": _BIG}
        self.names: list[str] = []
        self.types: list[type] = []
        self.guards: list[str] = []  # each true when a call's arguments do not have these types
        self.items: list[str] = []  # the key's items, in order
        self.checks: list[tuple[int, int, Any, int | None]] = []  # those not implied by the types
        self.addresses: dict[int, str] = {}  # runtime place j -> how its address p<j> is read (with `address`)
        self.flat: list[str] = []
        self.runtime: list[int] = []  # the runtime arguments' positions
        for i, (v, constant) in enumerate(zip(args, plan)):
            t = type(v)
            self.env[f"T{i}"] = t
            self.types.append(t)
            name = f"c{i}" if constant else f"a{len(self.flat)}"
            self.names.append(name)
            self.guards.append(f"type({name}) is not T{i}")
            if constant:
                pair = t is int or t is bool
                self.checks.append((CHECK_VALUE, i, None, len(self.items)) if pair else
                                   (CHECK_CALL, i, constant_key, len(self.items)))
                self.items.append(f"(T{i}, {name})" if pair else f"constant_key({name})")
                continue
            kind = _array_kind(t)
            j = len(self.flat)
            self.flat.append(name)
            self.runtime.append(i)
            if kind is not None:
                if address:
                    self.addresses[j] = _ARRAYS[kind][0]
                for item, text in zip(_ARRAYS[kind][1], _array_items(kind, name, f"p{j}" if address else None)):
                    self.checks.append((CHECK_ALIGN, j, _ALIGN_MASK, len(self.items)) if item == _ALIGN else
                                       (CHECK_PATH, i, item, len(self.items)))
                    self.items.append(text)
                continue
            if t is int:
                self.guards.append(f"not -BIG <= {name} < BIG")
                self.checks.append((CHECK_RANGE, i, _BIG, None))
                self.checks.append((CHECK_CALL, i, int_item, len(self.items)))
                self.items.append(f"int_item({name})")
                continue
            self.items.append(f"T{i}")

    def python_check(self, x: int) -> str:
        """`checks[x]` (not CHECK_RANGE, which `unpack` guards) as a Python condition, true when
        a launch differs from the value `K<x>` it expects."""
        kind, i, detail, _ = self.checks[x]
        if kind == CHECK_ALIGN:
            return f"p{i} & {detail} != K{x}"
        name = self.names[i]
        if kind == CHECK_PATH:
            return f"{name}.{detail} != K{x}"
        return f"{detail.__name__}({name}) != K{x}" if kind == CHECK_CALL else f"{name} != K{x}"

    def quick_checks(self, key: tuple, knob: Knob, raw: Any, grid_limit: int) -> QuickChecks:
        """`checks` against `key` as data, for native code."""
        env, name = knob.raw_lookup()
        checks = tuple((kind, i, _steps(detail) if kind == CHECK_PATH else detail,
                        None if k is None else key[k][1] if kind == CHECK_VALUE else key[k])
                       for kind, i, detail, k in self.checks)
        addresses = tuple(_steps(self.addresses[j]) if j in self.addresses else None for j in range(len(self.flat)))
        return QuickChecks(env, name, raw, tuple(self.types), tuple(self.runtime), addresses, checks, grid_limit)

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
    (also when `launch` declines). Native code where `launch.native` makes it, else generated
    Python. None when `args` takes the full path."""
    found = fast_key(plan, args) if args else None
    if found is None:
        return None
    code = _Code(plan, args, address=True)
    checks = code.quick_checks(found[0], knob, raw, grid_limit)
    if launch.native is not None:
        native = launch.native(checks)
        if native is not None:
            return native
    assert not set(launch.env) & set(code.env) and all(n.startswith("_") for n in launch.env)
    env = {**code.env, **launch.env, "REFUSE": False, "LIMIT": grid_limit, "ENV": checks.env, "KNOB": checks.knob,
           "RAW": raw}
    expected = [(x, c[3]) for x, c in enumerate(checks.checks) if c[0] != CHECK_RANGE]
    env.update((f"K{x}", value) for x, value in expected)
    aligned = [x for x, value in expected if checks.checks[x][0] == CHECK_ALIGN and value == 0]  # checked at once
    conditions = [code.python_check(x) for x, _ in expected if x not in aligned]
    addresses = " | ".join(f"p{checks.checks[x][1]}" for x in aligned)
    conditions += [f"({addresses}) & {_ALIGN_MASK}"] if aligned else []
    source = (f"def quick(stream, grid, args):\n"
              f"    if ENV.get(KNOB) != RAW or stream is None or type(grid) is not tuple:\n        return False\n"
              f"{code.unpack()}"
              + "".join(f"    p{j} = {code.flat[j]}.{read}\n" for j, read in code.addresses.items())
              + (f"    if {' or '.join(conditions)}:\n        return False\n" if conditions else "") +
              f"{_grid_source()}"
              f"    return {launch.expr}\n")
    exec(source, env)  # noqa: S102 - our own generated code
    return env["quick"]
