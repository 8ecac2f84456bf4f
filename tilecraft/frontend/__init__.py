"""Front end: Python kernel source → verified Tile IR. Knows no backend."""

from .entry import compile_kernel
from .signature import ArgSpec, ArraySpec, ConstSpec, ScalarSpec, TupleSpec

__all__ = ["compile_kernel", "ArgSpec", "ArraySpec", "ConstSpec", "ScalarSpec", "TupleSpec"]
