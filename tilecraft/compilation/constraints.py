"""What a kernel signature says about each parameter (cuTile's `cuda.tile.compilation`
constraint classes): plain, validated, immutable data.

A constraint states assumptions a compiled kernel may rely on: a scalar's dtype, an array's
dtype, rank, index width, known or divisible sizes and strides, base-address alignment and
aliasing; a list's element; a tuple's items; a Constant parameter's value. Per-dimension
assumptions may be given as one value for every dim. An assumption made redundant by a known
value (a lower bound or a divisor of a constant stride) is dropped after checking it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeAlias

import numpy as np

from ..frontend.signature import constant_key
from ..language import dtypes as dt
from ..language.dtypes import DType

ConstantValue: TypeAlias = bool | int | float


def _set(obj: Any, **fields: Any) -> None:
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


def _check_dtype(dtype: Any) -> None:
    if not isinstance(dtype, DType):
        raise TypeError(f"Expected a DType for the `dtype` parameter, got '{dtype}'")


def _alias_groups(groups: Any) -> tuple[str, ...]:
    if isinstance(groups, str):
        raise TypeError("`alias_groups` cannot be a string")
    groups = tuple(groups)
    for i, g in enumerate(groups):
        if not isinstance(g, str):
            raise TypeError(f"Element #{i} of `alias_groups` has non-string type {type(g)}")
    return groups


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _per_dim(value: Any, ndim: int, name: str, default: Any, check: Callable[[int, Any, str], None]) -> tuple:
    """`value` as one entry per dim: None means `default` everywhere, an int that int everywhere."""
    if value is None:
        return (default,) * ndim
    if _is_int(value):
        values = (value,) * ndim
    else:
        values = tuple(value)
        if len(values) != ndim:
            raise ValueError(f"Length of `{name}` {values} doesn't match ndim={ndim}")
    for i, v in enumerate(values):
        check(i, v, name)
    return values


def _optional_int(i: int, v: Any, name: str) -> None:
    if v is not None and not _is_int(v):
        raise TypeError(f"Element #{i} of `{name}` must be None or int, got {v}")


def _optional_size(i: int, v: Any, name: str) -> None:
    _optional_int(i, v, name)
    if v is not None and v < 0:
        raise ValueError(f"Element #{i} of `{name}` must be non-negative, got {v}")


def _divisor(i: int, v: Any, name: str) -> None:
    if not _is_int(v):
        raise TypeError(f"Element #{i} of `{name}` must be int, got {v}")
    if v <= 0:
        raise TypeError(f"Element #{i} of `{name}` must be strictly positive, got {v}")


def _drop_implied(known: tuple, assumed: tuple, name: str, *, bound: bool, neutral: Any) -> tuple:
    """`assumed` with each entry whose dim has a `known` value replaced by `neutral`, after
    checking the value satisfies it (a lower bound when `bound`, else a divisor)."""
    out = list(assumed)
    for i, value in enumerate(known):
        if value is None or assumed[i] in (None, neutral):
            continue
        if bound and value < assumed[i]:
            raise ValueError(f"{name}[{i}] is set to {value}, which is less than the lower bound {assumed[i]}")
        if not bound and value % assumed[i]:
            raise ValueError(f"{name}[{i}] is set to {value}, which is not divisible by {assumed[i]}")
        out[i] = neutral
    return tuple(out)


@dataclass(frozen=True, init=False)
class ScalarConstraint:
    """A scalar parameter of `dtype`."""

    dtype: DType

    def __init__(self, dtype: DType) -> None:
        _check_dtype(dtype)
        _set(self, dtype=dtype)


@dataclass(frozen=True, init=False)
class ArrayConstraint:
    """An array parameter: `dtype`, `ndim` and `index_dtype` (int32, or int64 for arrays whose
    offsets need 64 bits), with per-dim assumptions in elements: `stride_lower_bound_incl`,
    `stride_constant` / `shape_constant` (None: unknown), `stride_divisible_by` /
    `shape_divisible_by` (1: nothing assumed); `base_addr_divisible_by` in bytes; aliasing:
    `alias_groups` (empty: aliases no other parameter; two parameters may alias only if they
    share a group) and `may_alias_internally` (two in-bounds indices may address one element)."""

    dtype: DType
    ndim: int
    index_dtype: DType
    stride_lower_bound_incl: tuple[int | None, ...]
    alias_groups: tuple[str, ...]
    may_alias_internally: bool
    stride_constant: tuple[int | None, ...]
    shape_constant: tuple[int | None, ...]
    stride_divisible_by: tuple[int, ...]
    shape_divisible_by: tuple[int, ...]
    base_addr_divisible_by: int

    def __init__(self, dtype: DType, ndim: int, *, index_dtype: DType,
                 stride_lower_bound_incl: Sequence[int | None] | int | None, alias_groups: Sequence[str],
                 may_alias_internally: bool, stride_constant: Sequence[int | None] | None = None,
                 shape_constant: Sequence[int | None] | None = None,
                 stride_divisible_by: Sequence[int] | int = 1, shape_divisible_by: Sequence[int] | int = 1,
                 base_addr_divisible_by: int = 1) -> None:
        _check_dtype(dtype)
        if not _is_int(ndim):
            raise TypeError(f"Expected an integer for `ndim`, got '{ndim}'")
        if ndim < 0:
            raise ValueError("`ndim` cannot be negative")
        if index_dtype not in (dt.int32, dt.int64):
            raise ValueError(f"`index_dtype` must be int32 or int64, got {index_dtype}")
        strides = _per_dim(stride_constant, ndim, "stride_constant", None, _optional_int)
        shape = _per_dim(shape_constant, ndim, "shape_constant", None, _optional_size)
        lower = _per_dim(stride_lower_bound_incl, ndim, "stride_lower_bound_incl", None, _optional_int)
        stride_div = _per_dim(stride_divisible_by, ndim, "stride_divisible_by", 1, _divisor)
        shape_div = _per_dim(shape_divisible_by, ndim, "shape_divisible_by", 1, _divisor)
        if not _is_int(base_addr_divisible_by):
            raise TypeError(f"Expected an integer for the `base_addr_divisible_by` parameter, "
                            f"got {base_addr_divisible_by}")
        if base_addr_divisible_by <= 0:
            raise ValueError(f"`base_addr_divisible_by` must be strictly positive, got {base_addr_divisible_by}")
        _set(self, dtype=dtype, ndim=ndim, index_dtype=index_dtype,
             stride_lower_bound_incl=_drop_implied(strides, lower, "stride_lower_bound_incl", bound=True,
                                                   neutral=None),
             alias_groups=_alias_groups(alias_groups), may_alias_internally=bool(may_alias_internally),
             stride_constant=strides, shape_constant=shape,
             stride_divisible_by=_drop_implied(strides, stride_div, "stride_constant", bound=False, neutral=1),
             shape_divisible_by=_drop_implied(shape, shape_div, "shape_constant", bound=False, neutral=1),
             base_addr_divisible_by=base_addr_divisible_by)


@dataclass(frozen=True, init=False)
class ListConstraint:
    """A list-of-arrays parameter: its `element` (an ArrayConstraint), the `alias_groups` of
    the list's own storage and whether two of its elements may alias each other."""

    element: ArrayConstraint
    alias_groups: tuple[str, ...]
    elements_may_alias: bool

    def __init__(self, element: ArrayConstraint, *, alias_groups: Sequence[str], elements_may_alias: bool) -> None:
        if not isinstance(element, ArrayConstraint):
            raise TypeError(f"ListConstraint only supports an ArrayConstraint as the `element` constraint, "
                            f"got '{element}'")
        _set(self, element=element, alias_groups=_alias_groups(alias_groups),
             elements_may_alias=bool(elements_may_alias))


@dataclass(frozen=True, init=False)
class TupleConstraint:
    """A tuple parameter: one constraint per item (plain values and tuples are shorthand)."""

    items: tuple["ParameterConstraint", ...]

    def __init__(self, items: Sequence[Any]) -> None:
        _set(self, items=tuple(to_constraint(x) for x in items))


@dataclass(frozen=True, eq=False)
class ConstantConstraint:
    """The value of a Constant parameter. Equal only to the same type and value (1, 1.0 and
    True differ; floats compare by bits, so a NaN equals itself)."""

    value: ConstantValue

    def __post_init__(self) -> None:
        if not is_constant_value(self.value):
            raise TypeError(f"Unexpected constant value type {type(self.value)}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not ConstantConstraint:
            return NotImplemented
        return constant_key(self.value) == constant_key(other.value)

    def __hash__(self) -> int:
        return hash(constant_key(self.value))


ParameterConstraint: TypeAlias = (ScalarConstraint | ArrayConstraint | ListConstraint | TupleConstraint
                                  | ConstantConstraint)


def is_constant_value(value: Any) -> bool:
    """A bool, int or float (Python or NumPy): what a Constant parameter may be."""
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def to_constraint(c: Any) -> ParameterConstraint:
    """`c` as a constraint: constraints as they are, a plain value as its ConstantConstraint,
    a tuple as a TupleConstraint of its items."""
    if isinstance(c, (ScalarConstraint, ArrayConstraint, ListConstraint, TupleConstraint, ConstantConstraint)):
        return c
    if is_constant_value(c):
        return ConstantConstraint(c)
    if isinstance(c, tuple):
        return TupleConstraint(c)
    raise TypeError(f"Can't interpret {c!r} as a parameter constraint")
