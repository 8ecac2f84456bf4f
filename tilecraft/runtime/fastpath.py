"""The repeat-launch fast path: a cheap key per argument list that maps straight to a compiled
variant, skipping classification, spec construction and hashing of frozen specs.

The key holds what decides the variant and the launch checks: each tensor's type, dtype,
device (`.device`: `get_device()` is -1 on CPU and meta alike), strides, shape and 16-byte base
alignment (shape and strides also decide 64-bit indexing); for NumPy arrays also whether they
are writable (a read-only array the kernel writes is refused on the full path, so it must
never find a fast entry); each Constant's
`constant_key` (floats by their bits: 0.0 and -0.0 differ); each scalar's type. Anything the
fast key cannot describe returns None and takes the full path, which also produces every error
message.

The key is one flat tuple (an array's five items inline, not a tuple per argument: less to build,
hash and compare on each launch). It still reads back one way only: a Constant is one item, and
at any other parameter the first item says how many follow (a torch dtype or a NumPy dtype: the
array's five; a type: a scalar's one), so argument lists of different types never share a key.

`typed_keyer` writes `fast_key` out for one list of argument types: the same key, without the
per-argument loop and type dispatch (the runtime keeps one per kernel, for the types it saw last).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..frontend.signature import constant_key
from .args import ParamInfo

_BIG = 2**31


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
        elif t.__module__ == "torch":
            if t.__name__ not in ("Tensor", "Parameter"):
                return None
            flat.append(v)
            key += (v.dtype, v.device, v.stride(), v.shape, v.data_ptr() & 15)
        elif t is int:
            if not -_BIG <= v < _BIG:
                return None
            flat.append(v)
            key.append(int)
        elif t is float or t is bool:
            flat.append(v)
            key.append(t)
        elif t is np.ndarray:
            flat.append(v)
            key += (v.dtype, v.strides, v.shape, v.ctypes.data & 15, v.flags.writeable)
        else:
            return None  # tuples, NumPy scalars and everything else take the full path
    k = tuple(key)
    try:
        hash(k)
    except TypeError:
        return None
    return k, flat


Keyer = Callable[[Any], "tuple[tuple[Any, ...], list[Any]] | None"]


def typed_keyer(plan: tuple[bool, ...], args: tuple) -> Keyer | None:
    """`fast_key(plan, a)` as generated code for every `a` whose items have the types of `args`
    (None for any other `a`); None when `args` itself takes the full path."""
    if not args or fast_key(plan, args) is None:
        return None
    guards, parts, flat = [], [], []
    env: dict[str, Any] = {"constant_key": constant_key, "BIG": _BIG}
    for i, (v, constant) in enumerate(zip(args, plan)):
        t, a = type(v), f"a{i}"
        env[f"T{i}"] = t
        guards.append(f"type({a}) is not T{i}")
        if constant:
            parts.append(f"(T{i}, {a})" if t is int or t is bool else f"constant_key({a})")
            continue
        flat.append(a)
        if t.__module__ == "torch":
            parts.append(f"{a}.dtype, {a}.device, {a}.stride(), {a}.shape, {a}.data_ptr() & 15")
            continue
        if t is np.ndarray:
            parts.append(f"{a}.dtype, {a}.strides, {a}.shape, {a}.ctypes.data & 15, {a}.flags.writeable")
            continue
        if t is int:
            guards.append(f"not -BIG <= {a} < BIG")
        parts.append(f"T{i}")
    names = ", ".join(f"a{i}" for i in range(len(args)))
    source = (f"def keyer(args):\n"
              f"    if type(args) is not tuple or len(args) != {len(args)}:\n        return None\n"
              f"    {names}{',' if len(args) == 1 else ''} = args\n"
              f"    if {' or '.join(guards)}:\n        return None\n"
              f"    return ({''.join(x + ', ' for x in parts)}), [{', '.join(flat)}]\n")
    exec(source, env)  # noqa: S102 - our own generated code
    return env["keyer"]
