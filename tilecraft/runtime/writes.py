"""Which array arguments a kernel writes, and the launch check that refuses read-only NumPy
arrays there: a kernel storing into one would fail (interpreter) or write memory NumPy promised
not to change (Triton), part way through the grid; refusing it before the launch writes nothing.
"""

from __future__ import annotations

from typing import Any

from ..ir import Function, ops
from .args import ArgumentError, ArrayArg, ListArg

_WRITES = (ops.Store, ops.Scatter, ops.AtomicRMW, ops.AtomicCAS)

Written = frozenset[tuple[int, int | None]]
"""(parameter position in `Function.params`, list element or None for the whole parameter)."""


def written_params(fn: Function) -> Written:
    """The parameters that a store, scatter or atomic of `fn` may write, through views too:
    slices write their array, and list elements their list (the element alone when its index is
    a constant). An array whose origin is not traced counts as every parameter (conservative:
    a write is never missed)."""
    root: dict[int, tuple[int, int | None]] = {p.id: (i, None) for i, p in enumerate(fn.params)}
    consts = {op.result.id: op.value for op in fn.walk() if isinstance(op, ops.Const)}
    written: set[tuple[int, int | None]] = set()
    for op in fn.walk():
        if isinstance(op, ops.ArraySlice) and op.array.id in root:
            root[op.result.id] = root[op.array.id]
        elif isinstance(op, ops.ListGet) and op.list.id in root:
            item = consts.get(op.index.id)
            root[op.result.id] = (root[op.list.id][0], item if isinstance(item, int) else None)
        elif isinstance(op, _WRITES):
            if op.array.id not in root:
                return frozenset((i, None) for i in range(len(fn.params)))
            written.add(root[op.array.id])
    return frozenset(written)


def check_writable(flat: list[Any], written: Written) -> None:
    """ArgumentError naming the first read-only NumPy array the kernel may write (`flat` in
    parameter order, as `describe_args` makes it)."""
    for i, item in sorted(written, key=lambda w: (w[0], -1 if w[1] is None else w[1])):
        arg = flat[i] if i < len(flat) else None
        if isinstance(arg, ListArg):
            arrays = arg.items if item is None else arg.items[item:item + 1] if 0 <= item < len(arg.items) else []
        else:
            arrays = [arg]
        for a in arrays:
            if isinstance(a, ArrayArg) and a.read_only:
                raise ArgumentError(a.name.split("[", 1)[0],
                                    f"Argument `{a.name}` is a read-only NumPy array (flags.writeable is False) "
                                    f"but the kernel writes to it (a store, scatter or atomic); pass a writable "
                                    f"array, e.g. a copy")
