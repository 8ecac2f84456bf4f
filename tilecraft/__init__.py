"""tilecraft: tile programming for GPU kernels in Python, compatible with NVIDIA cuTile.

Write `import tilecraft as ct` where cuTile code says `import cuda.tile as ct`.
"""

from .errors import (TileArgumentError, TileAssertionError, TileCompilerExecutionError, TileCompilerTimeoutError,
                     TileError, TileInternalError, TileRecursionError, TileStaticAssertionError, TileStaticEvalError,
                     TileSyntaxError, TileTypeError, TileUnsupportedFeatureError, TileValueError)
from .language.annotations import (Array, ArrayAnnotation, Constant, ConstantAnnotation, IndexedWithInt64,
                                   ListAnnotation, Scalar, ScalarAnnotation, ScalarInt64, Tile, TiledView)
from .language.dtypes import (DType, bfloat16, bool_, float4_e2m1fn, float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
                              float16, float32, float64, int8, int16, int32, int64, tfloat32, uint8, uint16, uint32,
                              uint64)
from .language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode
from .language import ops as _ops
from .language.ops import *  # noqa: F401,F403  (every public tile operation: _ops.__all__)
from .runtime.kernel import ByTarget, Kernel, kernel
from .runtime.launch import launch
from .runtime.timeout import compiler_timeout
from .version import __version__
from . import compilation, tune


__all__ = [
    "TileArgumentError", "TileAssertionError", "TileCompilerExecutionError", "TileCompilerTimeoutError", "TileError",
    "TileInternalError",
    "TileRecursionError", "TileStaticAssertionError", "TileStaticEvalError", "TileSyntaxError", "TileTypeError",
    "TileUnsupportedFeatureError", "TileValueError",
    "Array", "ArrayAnnotation", "Constant", "ConstantAnnotation", "IndexedWithInt64", "ListAnnotation",
    "Scalar", "ScalarAnnotation", "ScalarInt64", "Tile", "TiledView",
    "DType", "bfloat16", "bool_", "float4_e2m1fn", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float16",
    "float32", "float64", "int8", "int16", "int32", "int64", "tfloat32", "uint8", "uint16", "uint32", "uint64",
    "MemoryOrder", "MemoryScope", "PaddingMode", "RoundingMode",
    "ByTarget", "Kernel", "kernel", "launch", "__version__", "compilation", "compiler_timeout", "tune",
    *_ops.__all__,
]
