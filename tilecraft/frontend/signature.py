"""Kernel parameters as the front end sees them: what each argument is, for specialization.

The runtime describes every launch argument with an `ArgSpec`; equal specs mean one compiled
variant. Constant arguments are folded into the IR and do not become IR parameters.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

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
    """A list of `length` arrays of one dtype and rank (the length is a compile-time constant);
    `static_shape` / `static_strides` as ArraySpec's, shared by every array of the list
    (ListAnnotation's element annotation)."""

    dtype: DType
    ndim: int
    length: int
    index64: bool = False
    static_shape: tuple[tuple[int, int], ...] = ()
    static_strides: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ScalarSpec:
    dtype: DType


def constant_key(value: Any) -> Any:
    """What identifies a Constant argument's compiled variant: its type and value, with floats
    (Python and NumPy) by their bit pattern and tuples item by item.

    Equal keys must mean the kernel cannot tell the values apart. `==` is not enough: 0.0 ==
    -0.0, yet 1 / C tells them apart (+inf vs -inf), and NaN != NaN. Rule: two floats share
    a variant only if their bits are equal. So -0.0 and 0.0 differ, and so do NaNs of different
    sign or payload (whether a kernel can observe a payload depends on how a backend spells
    the constant; keying by bits never has to ask, and costs at most one compile per distinct
    NaN); the same NaN bits always reuse one variant."""
    if isinstance(value, tuple):
        return (type(value).__name__, tuple(constant_key(v) for v in value))
    if isinstance(value, float):
        return (type(value).__name__, struct.pack("<d", value).hex())
    if isinstance(value, np.floating):
        return (type(value).__name__, value.tobytes().hex())
    return (type(value).__name__, repr(value))


@dataclass(frozen=True)
class ConstSpec:
    """A Constant argument; `key` (`constant_key`) distinguishes 1, 1.0 and True, 0.0 and
    -0.0, and NaN payloads."""

    value: Any
    key: Any

    @staticmethod
    def of(value: Any) -> "ConstSpec":
        return ConstSpec(value, constant_key(value))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstSpec) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class TupleSpec:
    items: tuple["ArgSpec", ...]


ArgSpec = ArraySpec | ListSpec | ScalarSpec | ConstSpec | TupleSpec
