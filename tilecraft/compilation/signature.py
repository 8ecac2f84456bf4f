"""Kernel signatures (cuTile's `KernelSignature` and `CallingConvention`): one constraint per
kernel parameter, checked against what the calling convention can pass, and the signature
tilecraft compiles a kernel under for given launch arguments (`from_kernel_args`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from ..frontend import ArraySpec, ConstSpec, ListSpec, ScalarSpec, TupleSpec
from ..language import dtypes as dt
from ..runtime.args import ArrayArg, ListArg
from ..runtime.kernel import Kernel
from .constraints import (ArrayConstraint, ListConstraint, ParameterConstraint, ScalarConstraint,
                          TupleConstraint, to_constraint)


@dataclass(frozen=True)
class CallingConvention:
    """How a compiled kernel receives its parameters: cuTile's `cutile_python_v1()` (scalars
    and arrays) or `cutile_python_v2()` (also tuples and compiled-in array shapes)."""

    name: str
    code: str
    version: int

    @staticmethod
    def cutile_python_v1() -> "CallingConvention":
        return _CONVENTIONS["t1"]

    @staticmethod
    def cutile_python_v2() -> "CallingConvention":
        return _CONVENTIONS["t2"]

    @staticmethod
    def from_code(code: str) -> "CallingConvention":
        """The convention a mangled kernel name spells `code` ('t1', 't2')."""
        if code not in _CONVENTIONS:
            raise ValueError(f"Unknown calling convention code '{code}'")
        return _CONVENTIONS[code]


_CONVENTIONS = {c.code: c for c in (CallingConvention("cutile_python_v1", "t1", 1),
                                    CallingConvention("cutile_python_v2", "t2", 2))}


@dataclass(frozen=True, init=False)
class KernelSignature:
    """The constraints of a kernel's parameters (one per parameter of its Python function; plain
    values stand for ConstantConstraint, tuples for TupleConstraint), the calling convention,
    and the exported symbol's name (None: derived from the function's name)."""

    parameters: tuple[ParameterConstraint, ...]
    calling_convention: CallingConvention
    symbol: str | None
    # from_kernel_args: the launch's own specs (exact where constraints are not, e.g. list
    # lengths), used by export_kernel for the kernel they were made for
    _launch_specs: tuple[Kernel, tuple] | None = field(default=None, compare=False, repr=False)

    def __init__(self, parameters: Sequence[Any], calling_convention: CallingConvention,
                 symbol: str | None = None) -> None:
        if symbol is not None and not isinstance(symbol, str):
            raise TypeError(f"`symbol` must be a string, got {type(symbol)}")
        if not isinstance(calling_convention, CallingConvention):
            raise TypeError(f"Unsupported calling convention {calling_convention}")
        params = tuple(to_constraint(c) for c in parameters)
        _check_alias_groups(params)
        for p in params:
            _check_supported(p, calling_convention)
        object.__setattr__(self, "parameters", params)
        object.__setattr__(self, "calling_convention", calling_convention)
        object.__setattr__(self, "symbol", symbol)
        object.__setattr__(self, "_launch_specs", None)

    def with_symbol(self, symbol: str | None) -> "KernelSignature":
        """This signature with `symbol` as its symbol name."""
        out = KernelSignature(self.parameters, self.calling_convention, symbol)
        object.__setattr__(out, "_launch_specs", self._launch_specs)
        return out

    @staticmethod
    def from_kernel_args(kernel: Kernel, kernel_args: Sequence[Any], calling_convention: CallingConvention, *,
                         symbol: str | None = None) -> "KernelSignature":
        """The signature tilecraft compiles `kernel` under when launched with `kernel_args`: the
        dtypes, ranks and Constant values, and for arrays the facts it specializes on (16-byte
        base alignment, unit last stride, 16-byte strides, the power of two dividing each dim,
        64-bit indexing, ArrayAnnotation's compiled-in sizes and strides).

        Derived from example arguments: another array may not satisfy the same facts."""
        specs, arrays, _ = kernel.describe(tuple(kernel_args))
        found = iter(arrays)
        params = [_constraint_of(spec, found) for spec in specs]
        signature = KernelSignature(params, calling_convention, symbol)
        object.__setattr__(signature, "_launch_specs", (kernel, specs))
        return signature


def _constraint_of(spec: Any, arrays: Iterator[ArrayArg | ListArg]) -> Any:
    """The constraint for one launch argument's spec (arrays take their facts from `arrays`,
    which yields them in the order the specs name them)."""
    if isinstance(spec, ConstSpec):
        return to_constraint(spec.value)
    if isinstance(spec, ScalarSpec):
        return ScalarConstraint(spec.dtype)
    if isinstance(spec, TupleSpec):
        return TupleConstraint([_constraint_of(s, arrays) for s in spec.items])
    if isinstance(spec, ListSpec):
        next(arrays)  # list elements get no facts: nothing is assumed about them but their static dims
        element = ArrayConstraint(spec.dtype, spec.ndim, index_dtype=dt.int64 if spec.index64 else dt.int32,
                                  stride_lower_bound_incl=None, alias_groups=(), may_alias_internally=True,
                                  stride_constant=_per_axis(spec.static_strides, spec.ndim),
                                  shape_constant=_per_axis(spec.static_shape, spec.ndim))
        return ListConstraint(element, alias_groups=(), elements_may_alias=True)
    assert isinstance(spec, ArraySpec), spec
    arg = next(arrays)
    assert isinstance(arg, ArrayArg)
    return _array_constraint(arg)


def _per_axis(pairs: tuple[tuple[int, int], ...], ndim: int) -> tuple[int | None, ...]:
    """(axis, value) pairs as one entry per axis (None: not compiled in)."""
    known = dict(pairs)
    return tuple(known.get(axis) for axis in range(ndim))


def _array_constraint(arg: ArrayArg) -> ArrayConstraint:
    spec, facts, data = arg.spec, arg.facts, arg.data
    shape = tuple(data.shape)
    item = spec.dtype.itemsize
    strides = tuple(s // data.itemsize for s in data.strides) if isinstance(data, np.ndarray) else tuple(data.stride())
    ndim = spec.ndim
    known_strides = list(_per_axis(spec.static_strides, ndim))
    if ndim and facts.unit_last:
        known_strides[-1] = 1
    known_shape = _per_axis(spec.static_shape, ndim)
    wide = 16 // item if facts.strides16 and 16 % item == 0 else 1
    return ArrayConstraint(
        spec.dtype, ndim, index_dtype=dt.int64 if spec.index64 or facts.index64 else dt.int32,
        stride_lower_bound_incl=tuple(0 if s >= 0 else None for s in strides),
        alias_groups=(), may_alias_internally=any(s == 0 and n > 1 for s, n in zip(strides, shape)),
        stride_constant=tuple(known_strides), shape_constant=tuple(known_shape),
        stride_divisible_by=tuple(wide if axis < ndim - 1 else 1 for axis in range(ndim)),
        shape_divisible_by=tuple(max(p, 1) for p in facts.dim_pow2) if facts.dim_pow2 else 1,
        base_addr_divisible_by=16 if facts.aligned16 else 1)


def _alias_uses(params: Sequence[Any]) -> Iterator[tuple[type, tuple[str, ...]]]:
    """(constraint type, its alias groups) for every array and list, nested ones too."""
    for p in params:
        if isinstance(p, ArrayConstraint):
            yield ArrayConstraint, p.alias_groups
        elif isinstance(p, ListConstraint):
            yield ListConstraint, p.alias_groups
            yield ArrayConstraint, p.element.alias_groups
        elif isinstance(p, TupleConstraint):
            yield from _alias_uses(p.items)


def _check_alias_groups(params: Sequence[Any]) -> None:
    """Each group is listed once per parameter, joins parameters of one kind (arrays, or list
    storage) and is named at least twice (a group of one says nothing)."""
    uses: Counter[str] = Counter()
    kinds: dict[str, type] = {}
    for kind, groups in _alias_uses(params):
        for g in groups:
            if groups.count(g) > 1:
                raise ValueError(f"Alias group `{g}` occurs more than once in the group list {list(groups)}")
            if kinds.setdefault(g, kind) is not kind:
                raise ValueError(f"Alias group `{g}` is used in two constraints of different types "
                                 f"{kinds[g].__name__} and {kind.__name__}. This is currently unsupported "
                                 f"(e.g., list storage is not allowed to alias an array).")
            uses[g] += 1
    for g, n in uses.items():
        if n == 1:
            raise ValueError(f"Alias group `{g}` is mentioned only once, and is therefore redundant. To specify "
                             f"that an array or a list may not alias any other object, use an empty tuple of "
                             f"alias groups.")


def _check_supported(c: Any, cconv: CallingConvention) -> None:
    """Calling convention v1 passes no tuples and no compiled-in array shapes."""
    if isinstance(c, ArrayConstraint) and any(s is not None for s in c.shape_constant) and cconv.version < 2:
        raise ValueError(f"Static array shapes are not supported by calling convention {cconv.name}; "
                         f"version >= 2 is required")
    if isinstance(c, ListConstraint):
        _check_supported(c.element, cconv)
    if isinstance(c, TupleConstraint):
        if cconv.version < 2:
            raise ValueError(f"Tuple parameters are not supported by calling convention {cconv.name}; "
                             f"version >= 2 is required")
        for item in c.items:
            _check_supported(item, cconv)
