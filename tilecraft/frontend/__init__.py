"""Front end: Python kernel source → verified Tile IR. Knows no backend."""

from .entry import compile_kernel, param_location
from .signature import ArgSpec, ArraySpec, ConstSpec, ListSpec, ScalarSpec, TupleSpec

__all__ = ["compile_kernel", "param_location", "ArgSpec", "ArraySpec", "ConstSpec", "ListSpec", "ScalarSpec",
           "TupleSpec"]
