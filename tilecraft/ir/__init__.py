"""Tile IR: typed SSA with structured control flow; the contract between front end and backends."""

from .builder import Builder
from .ops import (AtomicFn, BinaryFn, Block, CompareFn, Function, Opcode, Operation, ReduceFn,
                  ScanFn, UnaryFn, Value)
from .printer import format_function
from .types import ArrayType, ListType, TileType, scalar
from .verifier import verify

__all__ = ["Builder", "AtomicFn", "BinaryFn", "Block", "CompareFn", "Function", "Opcode",
           "Operation", "ReduceFn", "ScanFn", "UnaryFn", "Value", "format_function",
           "ArrayType", "ListType", "TileType", "scalar", "verify"]
