"""Tile IR: typed SSA with structured control flow; the contract between front end and backends.

Ops are declared in `ops` (one frozen dataclass each, with its typing rule and invariants),
built with `Builder`, checked by `verify`, printed by `format_function`.
"""

from . import ops
from .builder import Builder
from .core import Block, Function, IRError, Op, Value
from .kinds import AtomicFn, BinaryFn, CompareFn, ReduceFn, ScanFn, UnaryFn
from .ops import OP_CLASSES
from .printer import format_function
from .types import ArrayType, ListType, TileType, scalar
from .verifier import verify

__all__ = ["ops", "Builder", "Block", "Function", "IRError", "Op", "Value", "AtomicFn", "BinaryFn",
           "CompareFn", "ReduceFn", "ScanFn", "UnaryFn", "OP_CLASSES", "format_function",
           "ArrayType", "ListType", "TileType", "scalar", "verify"]
