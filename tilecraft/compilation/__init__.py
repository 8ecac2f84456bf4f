"""`tilecraft.compilation` (cuTile's `cuda.tile.compilation`): kernel signatures and export.

`KernelSignature.from_kernel_args` says, in cuTile's constraint vocabulary, what tilecraft
assumes when it compiles a kernel for given arguments; `export_kernel` compiles a kernel for
signatures but cannot write cuTile's binaries (export.py says why), and tilecraft writes no
binaries whose symbol names could be mangled.
"""

from typing import Any, NoReturn

from ..errors import TileUnsupportedFeatureError
from .constraints import (ArrayConstraint, ConstantConstraint, ConstantValue, ListConstraint, ParameterConstraint,
                          ScalarConstraint, TupleConstraint)
from .export import export_kernel
from .signature import CallingConvention, KernelSignature


def _no_symbols(name: str) -> NoReturn:
    raise TileUnsupportedFeatureError(
        f"{name}(): tilecraft exports no kernel binaries, so it has no symbol names to mangle (cuTile's mangled "
        f"names encode a signature in an exported cubin's symbol)")


def mangle_kernel_name(function_name: str, kernel_signature: KernelSignature) -> str:
    """Not supported: see `_no_symbols`."""
    _no_symbols("mangle_kernel_name")


def demangle_kernel_name(symbol: str) -> Any:
    """Not supported: see `_no_symbols`."""
    _no_symbols("demangle_kernel_name")


__all__ = ["ScalarConstraint", "ArrayConstraint", "ListConstraint", "TupleConstraint", "ConstantConstraint",
           "ParameterConstraint", "ConstantValue", "KernelSignature", "CallingConvention", "export_kernel",
           "mangle_kernel_name", "demangle_kernel_name"]
