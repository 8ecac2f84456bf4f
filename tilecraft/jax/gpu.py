"""`cutile_call` on the GPU: the kernel's generated Triton code launched by jax_triton as an XLA
custom call named `cutile_launch` (cuTile's name: the launch shows in `jax.jit(f).lower(x)` and
exports under it), jaxlib's Triton kernel-call handler registered under that name.

jax_triton passes the array operands and scalars in the order given and every output buffer last,
so the kernel is called through an entry (backends/triton/external.py) that takes its parameters
in that order: each output's pointer moves to the end; an InputOutput array's pointer stays in
place (XLA aliases the input with its output) and the trailing pointer of that output is unused.
Shapes and strides are plain numbers (JAX arrays are dense row-major with known sizes).

Compiled without tensor descriptors (jaxlib's Triton launcher knows no size for Triton's global
scratch memory, which descriptors made in a kernel need) and without the persistent grid loop (its
launch grid depends on the GPU's occupancy);
fitted to the GPU's shared memory as a launch would be, before jax_triton compiles it again.
Kernels that print are refused (their record buffers have no operand), device-side asserts are
not compiled in, and the `maxnreg` option is dropped (jax_triton cannot pass it), as is
`enable_reflect_ftz` of `GPU_MATH_OPTIONS` (backends/triton/compile.py): jax_triton 0.3 compiles
with Triton's default flush-to-zero libdevice, so float32 math there may flush subnormal operands
and results (floor, log, sin, rsqrt, exp2... of values below 2**-126), which tilecraft's own
launches keep. Its `enable_fp_fusion` (off: LLVM fuses no multiply-add the IR leaves apart) is
passed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from ..backends import registry
from ..backends.base import BackendKind
from ..environment import require
from ..errors import TileUnsupportedFeatureError
from ..runtime.args import AbstractArray, ArrayArg
from ..runtime.kernel import Kernel, VariantKey, _param_facts
from .call import Call, check_inputs_unwritten, prepare

if TYPE_CHECKING:  # the Triton backend (Triton, torch) is imported by the first GPU call only
    from ..backends.triton.external import ExternalEntry

TARGET = "cutile_launch"
_registered: list[bool] = []
_lock = threading.Lock()

_AS_BYTES = {np.dtype(ml_dtypes.float8_e8m0fnu): jnp.uint8}
"""Dtypes that jax_triton has no Triton name for, passed as unsigned integers of their width
(tilecraft's Triton code moves these as raw bits anyway)."""


def register_target() -> bool:
    """Register jaxlib's Triton kernel-call handler as the CUDA custom-call target `cutile_launch`
    (once per process); False when this JAX has no CUDA plugin. A module exported with such
    calls runs in a process that has imported tilecraft.jax."""
    with _lock:
        if _registered:
            return _registered[0]
        try:
            from jax._src.lib import gpu_triton
            handler = gpu_triton.get_custom_call()
        except (ImportError, AttributeError):
            _registered.append(False)
            return False
        jax.ffi.register_ffi_target(TARGET, handler, platform="CUDA", api_version=0)
        _registered.append(True)
        return True


def _import_jax_triton() -> Any:
    """jax_triton, imported without breaking Triton: its import sets TRITON_CACHE_DIR to "" (it
    compiles without Triton's cache), after which every other Triton compile in the process, the
    triton backend's launches included, fails ("Could not create or locate cache dir"). An empty
    value only ever breaks Triton, so it is removed (or the value from before restored)."""
    before = os.environ.get("TRITON_CACHE_DIR")
    try:
        return require("jax_triton", "tilecraft.jax's cutile_call on a GPU")
    finally:
        if os.environ.get("TRITON_CACHE_DIR") == "":
            if before:
                os.environ["TRITON_CACHE_DIR"] = before
            else:
                del os.environ["TRITON_CACHE_DIR"]


def _arch() -> tuple[str, int]:
    """(`sm_XY`, XY) of JAX's first GPU."""
    major, minor = str(jax.devices()[0].compute_capability).split(".")
    return f"sm_{major}{minor}", int(major) * 10 + int(minor)


@dataclass(frozen=True)
class LaunchPlan:
    """A cutile_call as jax_triton takes it: the kernel's entry, its operands (JAX arrays and
    numbers, outputs left out), which operand each aliased output updates, the launch options."""

    entry: ExternalEntry
    operands: list[Any]
    aliases: dict[int, int]
    options: dict[str, Any]


def launch_plan(kernel: Kernel, call: Call, arch: str, capability: int, interpret: bool = False) -> LaunchPlan:
    """Compile `kernel` for `call` on NVIDIA sm_<capability> (once per specialization: see
    call.prepare) and arrange its arguments; `interpret`: an entry for Triton's interpreter
    instead (tests of the arrangement without a GPU)."""
    kind = BackendKind.TRITON_INTERPRET if interpret else BackendKind.TRITON

    def compile_(key: VariantKey, flat: list[Any]) -> tuple[Any, ExternalEntry]:
        from ..backends.triton import TritonBackend
        from ..backends.triton.external import external_entry
        ir = kernel.cached_lower(key, registry.get("triton").version)
        check_inputs_unwritten(kernel, call, flat, ir)
        compiled = TritonBackend(kind, descriptors=False, grid_loop=False, capability=capability, split_k=False,
                                 tile_split=False, stage_operands=False,
                                 resident_rows=False).compile(ir, _param_facts(ir, key))  # one kernel
        compiled.compile_for(capability)
        return compiled, external_entry(compiled, _arrange(call, compiled, flat)[1])

    (compiled, entry), flat = prepare(kernel, call, kind.value, arch, compile_)
    operands, _, aliases = _arrange(call, compiled, flat)
    return LaunchPlan(entry, operands, aliases, compiled.lowered.config.options)


def call_on_gpu(kernel: Kernel, grid: tuple[int, int, int], call: Call) -> list[Any]:
    """The outputs of `kernel` launched by jax_triton on JAX's GPU."""
    jax_triton = _import_jax_triton()
    if not register_target():
        raise RuntimeError('cutile_call on the GPU needs JAX\'s CUDA plugin (pip install "jax[cuda12]")')
    from ..backends.triton.compile import GPU_MATH_OPTIONS
    plan = launch_plan(kernel, call, *_arch())
    outputs = jax_triton.triton_call(
        *plan.operands, kernel=plan.entry.fn, out_shape=[_as_bytes(o) for o in call.outputs], grid=grid,
        name=kernel.__name__, custom_call_target_name=TARGET, num_warps=plan.options["num_warps"],
        num_stages=plan.options["num_stages"], num_ctas=plan.options.get("num_ctas", 1),
        enable_fp_fusion=GPU_MATH_OPTIONS["enable_fp_fusion"], input_output_aliases=plan.aliases)
    return [_from_bytes(y, o.dtype) for y, o in zip(outputs, call.outputs)]


def _arrange(call: Call, compiled: Any, flat: list[Any]) -> tuple[list[Any], list[int | str], dict[int, int]]:
    """(jax_triton's arguments, the entry's parameter order, input_output_aliases) for a launch of
    `compiled` with the kernel arguments `flat` (ArrayArgs holding stand-ins, and numbers)."""
    lowered = compiled.lowered
    from ..backends.triton.external import triton_arguments
    triton_args = triton_arguments(compiled, [x.data if isinstance(x, ArrayArg) else x for x in flat])
    if len(triton_args) != len(lowered.signature):
        raise TileUnsupportedFeatureError(f"Kernel `{lowered.name}` prints, which cutile_call cannot do on the GPU "
                                          f"(the records need a buffer of their own); pass backend='interpreter' "
                                          f"to see its output", lowered.loc)
    types = list(lowered.signature.values())
    operands: list[Any] = []
    order: list[int | str] = []
    trailing: dict[int, int | str] = {}  # output -> the kernel parameter (or unused pointer's type) it fills
    aliases: dict[int, int] = {}
    arrays = 0  # jax_triton numbers its array operands apart from the scalars
    for pos, value in enumerate(triton_args):
        if not isinstance(value, AbstractArray):  # a bool as an int: jax_triton types bools "B", which
            operands.append(int(value) if isinstance(value, bool) else value)  # Triton 3.6 cannot specialize
            order.append(pos)
            continue
        role = call.roles[id(value)]
        if role[0] == "o":
            trailing[role[1]] = pos
            continue
        if role[0] == "io":
            aliases[arrays] = role[2]
            trailing[role[2]] = types[pos]
        operands.append(_as_bytes(call.inputs[role[1]]))
        order.append(pos)
        arrays += 1
    return operands, order + [trailing[k] for k in range(len(call.outputs))], aliases


def _as_bytes(x: Any) -> Any:
    """`x` (an array or a ShapeDtypeStruct) as jax_triton can pass it (see _AS_BYTES)."""
    carrier = _AS_BYTES.get(np.dtype(x.dtype))
    if carrier is None:
        return x
    if isinstance(x, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(x.shape, carrier)
    return jax.lax.bitcast_convert_type(x, carrier)


def _from_bytes(y: Any, dtype: Any) -> Any:
    return y if y.dtype == dtype else jax.lax.bitcast_convert_type(y, dtype)

