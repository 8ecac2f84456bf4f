"""tilecraft: tile programming for GPU kernels in Python, compatible with NVIDIA cuTile.

Write `import tilecraft as ct` where cuTile code says `import cuda.tile as ct`.
"""

from .errors import (TileArgumentError, TileCompilerExecutionError, TileCompilerTimeoutError, TileError, TileInternalError,
                     TileRecursionError, TileStaticAssertionError, TileStaticEvalError, TileSyntaxError,
                     TileTypeError, TileUnsupportedFeatureError, TileValueError)
from .language.annotations import (ArrayAnnotation, Constant, ConstantAnnotation, IndexedWithInt64,
                                   ScalarAnnotation, ScalarInt64)
from .language.dtypes import (DType, bfloat16, bool_, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float16,
                              float32, float64, int8, int16, int32, int64, tfloat32, uint8, uint16, uint32,
                              uint64)
from .language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode
from .language.ops import (abs, add, arange, argmax, argmin, assert_, assume_divisible_by, astile, astype,
                           atan2, atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or,
                           atomic_xchg, atomic_xor, bid, bitcast, bitwise_and, bitwise_lshift, bitwise_not,
                           bitwise_or, bitwise_rshift, bitwise_xor, broadcast_to, cat, cdiv, ceil, cos, cosh,
                           cumprod, cumsum, ensure_constant, equal, exp, exp2, expand_dims, extract, floor,
                           floordiv, full, function, gather, greater, greater_equal, isnan, less, less_equal,
                           load, log, log2, matmul, max, maximum, min, minimum, mma, mod, mul, negative,
                           not_equal, num_blocks, num_tiles, ones, permute, pow, printf, prod, reduce, reshape,
                           rsqrt, scan, scatter, sin, sinh, sqrt, static_assert, static_eval, static_iter, store, sub, sum,
                           tan, tanh, transpose, truediv, where, zeros)
from .runtime.kernel import ByTarget, Kernel, kernel
from .runtime.launch import launch
from .version import __version__


__all__ = [
    "TileArgumentError", "TileCompilerExecutionError", "TileCompilerTimeoutError", "TileError", "TileInternalError",
    "TileRecursionError", "TileStaticAssertionError", "TileStaticEvalError", "TileSyntaxError", "TileTypeError",
    "TileUnsupportedFeatureError", "TileValueError",
    "ArrayAnnotation", "Constant", "ConstantAnnotation", "IndexedWithInt64", "ScalarAnnotation", "ScalarInt64",
    "DType", "bfloat16", "bool_", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "tfloat32", "uint8", "uint16", "uint32", "uint64",
    "MemoryOrder", "MemoryScope", "PaddingMode", "RoundingMode",
    "abs", "add", "arange", "argmax", "argmin", "assert_", "assume_divisible_by", "astile", "astype", "atan2",
    "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg",
    "atomic_xor", "bid", "bitcast", "bitwise_and", "bitwise_lshift", "bitwise_not", "bitwise_or",
    "bitwise_rshift", "bitwise_xor", "broadcast_to", "cat", "cdiv", "ceil", "cos", "cosh", "cumprod", "cumsum",
    "ensure_constant", "equal", "exp", "exp2", "expand_dims", "extract", "floor", "floordiv", "full",
    "function", "gather", "greater", "greater_equal", "isnan", "less", "less_equal", "load", "log", "log2",
    "matmul", "max", "maximum", "min", "minimum", "mma", "mod", "mul", "negative", "not_equal", "num_blocks",
    "num_tiles", "ones", "permute", "pow", "printf", "prod", "reduce", "reshape", "rsqrt", "scan", "scatter", "sin", "sinh",
    "sqrt", "static_assert", "static_eval", "static_iter", "store", "sub", "sum", "tan", "tanh", "transpose",
    "truediv", "where", "zeros", "ByTarget", "Kernel", "kernel", "launch", "__version__",
]
