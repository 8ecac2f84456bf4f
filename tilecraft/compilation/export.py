"""`export_kernel` (cuTile's ahead-of-time export): compile a kernel for each signature.

tilecraft compiles the kernel for every signature as it would for arguments that satisfy it
(the front end and the passes), so a kernel's errors show up, located, at export time. It cannot
write what cuTile writes: a cubin or TileIR bytecode whose kernels take their parameters by
cuTile's calling convention. tilecraft's GPU code is Triton's, which takes other parameters
and other launch dimensions, so after compiling it raises TileUnsupportedFeatureError instead
of writing a file that would not run.
"""

from __future__ import annotations

import os
from typing import IO, Any, Sequence

from ..errors import TileUnsupportedFeatureError
from ..frontend import ArgSpec, ArraySpec, ConstSpec, ScalarSpec, TupleSpec
from ..language import dtypes as dt
from ..runtime.kernel import Kernel
from .constraints import ConstantConstraint, ListConstraint, ScalarConstraint, TupleConstraint
from .signature import KernelSignature

_FORMATS = ("cubin", "tileir_bytecode")


def export_kernel(kernel: Kernel, signatures: Sequence[KernelSignature],
                  output_file: IO[bytes] | str | bytes | os.PathLike, *, gpu_code: str | None = None,
                  output_format: str, bytecode_version: str | None = None) -> None:
    """Compile `kernel` for every signature, then raise TileUnsupportedFeatureError: tilecraft
    cannot write a cubin or TileIR bytecode with cuTile's calling convention (see the module
    docstring). Compile errors of the kernel are raised as a launch would raise them; nothing
    is written to `output_file`.

    gpu_code: the target ('sm_90'), required for output_format='cubin' as in cuTile."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"export_kernel() expects a kernel made by @tilecraft.kernel, got {type(kernel).__name__}")
    if output_format not in _FORMATS:
        raise ValueError(f"Unknown output format '{output_format}'")
    if gpu_code is None and output_format == "cubin":
        raise ValueError(f"gpu_code is required when output_format is '{output_format}'.")
    signatures = list(signatures)
    if not signatures:
        raise ValueError("export_kernel() needs at least one signature")
    for signature in signatures:
        if not isinstance(signature, KernelSignature):
            raise TypeError(f"Expected a KernelSignature, got {type(signature).__name__}")
        kernel.lower(specs_of(kernel, signature), gpu_code)
    raise TileUnsupportedFeatureError(
        f"export_kernel(): `{kernel.__name__}` compiled for all {len(signatures)} signature(s), but tilecraft cannot "
        f"write {output_format} output: its GPU code is Triton's, whose kernels do not take their parameters by "
        f"cuTile's calling convention ({signatures[0].calling_convention.name}); launch the kernel with "
        f"tilecraft.launch instead")


def specs_of(kernel: Kernel, signature: KernelSignature) -> tuple[ArgSpec, ...]:
    """The specs tilecraft compiles `kernel` for under `signature`: the launch's own for a
    signature `from_kernel_args` made for this kernel, else built from the constraints
    (TypeError when one does not fit its parameter, TileUnsupportedFeatureError for what
    tilecraft cannot compile)."""
    if signature._launch_specs is not None and signature._launch_specs[0] is kernel:
        return signature._launch_specs[1]
    params = kernel.params
    if len(signature.parameters) != len(params):
        raise TypeError(f"Kernel `{kernel.__name__}` has {len(params)} parameters but the signature gives "
                        f"{len(signature.parameters)} constraints")
    return tuple(_spec(c, p.name, p.constant) for c, p in zip(signature.parameters, params))


def _spec(c: Any, name: str, constant: bool) -> ArgSpec:
    if constant and isinstance(c, TupleConstraint):  # a Constant tuple is one compile-time value
        return ConstSpec.of(_constant_value(c, name))
    if isinstance(c, TupleConstraint):
        return TupleSpec(tuple(_spec(x, f"{name}[{i}]", constant) for i, x in enumerate(c.items)))
    if constant != isinstance(c, ConstantConstraint):
        raise TypeError(f"Invalid constraint for kernel parameter '{name}': " + (
            f"a Constant parameter needs a ConstantConstraint, got {type(c).__name__}." if constant else
            "ConstantConstraint is only valid for parameters annotated as Constant."))
    if isinstance(c, ConstantConstraint):
        return ConstSpec.of(c.value)
    if isinstance(c, ScalarConstraint):
        return ScalarSpec(c.dtype)
    if isinstance(c, ListConstraint):
        raise TileUnsupportedFeatureError(
            f"Kernel parameter '{name}': tilecraft compiles the length of a list argument into the kernel, and a "
            f"ListConstraint does not give one")
    shape = tuple((axis, v) for axis, v in enumerate(c.shape_constant) if v is not None)
    strides = tuple((axis, v) for axis, v in enumerate(c.stride_constant) if v is not None)
    return ArraySpec(c.dtype, c.ndim, c.index_dtype is dt.int64, shape, strides)


def _constant_value(c: Any, name: str) -> Any:
    """The value of a Constant parameter's (possibly nested) ConstantConstraint."""
    if isinstance(c, TupleConstraint):
        return tuple(_constant_value(x, name) for x in c.items)
    if not isinstance(c, ConstantConstraint):
        raise TypeError(f"Invalid constraint for kernel parameter '{name}': a Constant parameter needs a "
                        f"ConstantConstraint, got {type(c).__name__}.")
    return c.value
