"""Kernel parameters as the front end sees them: what each argument is, for specialization.

The runtime describes every launch argument with an `ArgSpec`; equal specs mean one compiled
variant. Constant arguments are folded into the IR and do not become IR parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..language.dtypes import DType


@dataclass(frozen=True)
class ArraySpec:
    """An array argument; `static_shape` / `static_strides` hold (axis, value) pairs that
    ArrayAnnotation compiles in (`A.shape[axis]` is then a constant)."""

    dtype: DType
    ndim: int
    index64: bool = False
    static_shape: tuple[tuple[int, int], ...] = ()
    static_strides: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ListSpec:
    """A list of `length` arrays of one dtype and rank (the length is a compile-time constant)."""

    dtype: DType
    ndim: int
    length: int
    index64: bool = False


@dataclass(frozen=True)
class ScalarSpec:
    dtype: DType


@dataclass(frozen=True)
class ConstSpec:
    """A Constant argument; `key` distinguishes 1, 1.0 and True and compares floats bitwise."""

    value: Any
    key: tuple[str, str]

    @staticmethod
    def of(value: Any) -> "ConstSpec":
        return ConstSpec(value, (type(value).__name__, repr(value)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstSpec) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class TupleSpec:
    items: tuple["ArgSpec", ...]


ArgSpec = ArraySpec | ListSpec | ScalarSpec | ConstSpec | TupleSpec
