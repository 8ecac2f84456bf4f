"""`cutile_call(grid, kernel, args)`: a tile kernel as one operation of a JAX computation.

The arguments are classified while JAX traces: JAX arrays are inputs, `OutputPlaceholder`s new
outputs, `InputOutput`s inputs updated in place, Python numbers and tuples what `ct.launch`
takes. The kernel is specialized and compiled then, by tilecraft's runtime, for arrays that stand
in for JAX's (`AbstractArray`: shape and dtype, dense row-major), so compile errors surface at
the call. On a GPU the launch is a custom call made by jax_triton (gpu.py); elsewhere, or when a
CPU backend is asked for, the kernel runs on the host through `jax.pure_callback` (host.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import knobs
from ..backends import registry
from ..backends.registry import CUDA
from ..runtime.args import AbstractArray, ArgumentError, ArrayArg, ParamInfo
from ..runtime.kernel import Kernel, VariantKey
from ..runtime.launch import check_grid
from ..runtime.writes import written_params


@dataclass
class OutputPlaceholder:
    """A new output array of `shape` and `dtype` for the kernel to write; `cutile_call` returns it."""

    shape: tuple[int, ...]
    dtype: Any


@dataclass
class InputOutput:
    """`array` as an input that the kernel updates in place; `cutile_call` returns the result
    (on the GPU the output's buffer is the input's: XLA copies the input first only when it is
    still needed elsewhere)."""

    array: Any


@dataclass
class Call:
    """One `cutile_call`'s arguments as the runtime sees them.

    args: the kernel arguments with an AbstractArray standing for each array.
    inputs: the JAX arrays the kernel reads, in argument order (the custom call's operands).
    outputs: the arrays it returns, in argument order.
    roles: per stand-in (by id): ("i", input), ("o", output) or ("io", input, output).
    """

    args: tuple[Any, ...]
    inputs: list[Any]
    outputs: list[jax.ShapeDtypeStruct]
    roles: dict[int, tuple[int | str, ...]]


_COMPILE_CACHE: dict[Any, Any] = {}
"""What each (kernel, specialization, roles of its arrays, backend) was compiled to: built while
tracing, reused by every later call with the same key (a runtime scalar's value is not in the key,
a Constant's is)."""
_lock = threading.Lock()


def cutile_call(grid: tuple[int, ...], kernel: Kernel, args: tuple[Any, ...], *, backend: str | None = None) -> Any:
    """Launch `kernel` on `grid` blocks (1 to 3 counts) from JAX, eagerly or inside `jax.jit`.

    `args` has one entry per kernel parameter: a JAX array (read only), `OutputPlaceholder`
    (a new output), `InputOutput(x)` (x updated in place), a Python number (a `ct.Constant`
    value, or a runtime scalar: under `jax.jit` it must be a static argument), or a tuple of
    these. Returns the outputs in argument order: the array itself when there is one, else a
    tuple. `backend` (a tilecraft extension) picks 'triton' (a custom call on JAX's GPU) or a
    CPU backend such as 'interpreter' (run on the host through `jax.pure_callback`); by default
    TILECRAFT_BACKEND, else 'triton' when JAX computes on a GPU and 'interpreter' otherwise."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"cutile_call() expects a kernel made by @tilecraft.kernel, got {type(kernel).__name__}")
    grid3 = check_grid(tuple(grid) if isinstance(grid, list) else grid)
    call = classify(kernel, args)
    spec = _backend(backend)
    if 0 in grid3:  # no block runs: new outputs are left as allocated, updated inputs unchanged
        return _result([jnp.zeros(o.shape, o.dtype) if r[0] == "o" else call.inputs[r[1]]
                        for o, r in zip(call.outputs, _output_roles(call))])
    if spec.device == CUDA:
        from .gpu import call_on_gpu
        outputs = call_on_gpu(kernel, grid3, call)
    else:
        from .host import call_on_host
        outputs = call_on_host(kernel, grid3, call, spec)
    return _result(list(outputs))


def _result(outputs: list[Any]) -> Any:
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _output_roles(call: Call) -> list[tuple[int | str, ...]]:
    """The role of each output, in output order."""
    return sorted((r for r in call.roles.values() if r[0] != "i"), key=lambda r: r[-1])


def _backend(name: str | None) -> registry.BackendSpec:
    """The backend a call runs on (see `cutile_call`)."""
    name = name or knobs.BACKEND.get() or None
    if name is None:
        name = "triton" if jax.default_backend() == "gpu" else "interpreter"
    spec = registry.get(name)
    if spec is None:
        choices = ", ".join(s.name for s in registry.all())
        raise ValueError(f"backend = {name!r} is not a backend; choose one of {choices}")
    if spec.device == CUDA and jax.default_backend() != "gpu":
        raise ValueError(f"The {name} backend runs kernels on JAX's GPU, but JAX computes on "
                         f"{jax.default_backend()}; pass backend='interpreter' to run on the host")
    return spec


def classify(kernel: Kernel, args: Any) -> Call:
    """`args` with stand-ins for the arrays, and the roles of those (see `Call`)."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"cutile_call() takes the kernel arguments as a tuple, got {type(args).__name__}")
    if len(args) != len(kernel.params):
        raise TypeError(f"{kernel.__name__} expects {len(kernel.params)} arguments, got {len(args)}")
    call = Call((), [], [], {})
    call.args = tuple(_leaf_or_tuple(kernel, call, value, info.name, info) for value, info in zip(args, kernel.params))
    return call


def _leaf_or_tuple(kernel: Kernel, call: Call, value: Any, path: str, info: ParamInfo) -> Any:
    """`value` with stand-ins for its arrays (`info`: what its annotation says)."""
    if isinstance(value, tuple):
        if info.items is not None and len(info.items) != len(value):
            raise TypeError(f"{kernel.__name__}: argument `{path}` expects a tuple of length {len(info.items)}, "
                            f"got {len(value)}")
        items = info.items or (info.variadic or ParamInfo(info.name, info.constant),) * len(value)
        return tuple(_leaf_or_tuple(kernel, call, v, f"{path}[{i}]", item)
                     for i, (v, item) in enumerate(zip(value, items)))
    if isinstance(value, (bool, int, float, np.generic)):
        return value
    if not isinstance(value, (OutputPlaceholder, InputOutput, jax.Array, np.ndarray)):
        raise TypeError(f"{kernel.__name__}: unexpected type for argument `{path}`: {type(value).__name__} (expected "
                        f"a JAX array, OutputPlaceholder, InputOutput, a Python number or a tuple)")
    if info.constant:
        raise TypeError(f"{kernel.__name__}: argument `{path}` is annotated ct.Constant; expected a static scalar "
                        f"argument (under jax.jit, make it static: static_argnums / static_argnames)")
    if isinstance(value, OutputPlaceholder):
        shape = tuple(int(d) for d in value.shape)
        stand_in = AbstractArray(shape, jnp.dtype(value.dtype))
        call.roles[id(stand_in)] = ("o", len(call.outputs))
        call.outputs.append(jax.ShapeDtypeStruct(shape, stand_in.dtype))
        return stand_in
    array = value.array if isinstance(value, InputOutput) else value
    if isinstance(array, np.ndarray):
        array = jnp.asarray(array)
    if not isinstance(array, jax.Array):
        raise TypeError(f"{kernel.__name__}: InputOutput of argument `{path}` holds a {type(array).__name__}; "
                        f"expected a JAX array")
    if not all(isinstance(d, int) for d in array.shape):
        raise NotImplementedError(f"{kernel.__name__}: argument `{path}` has shape {array.shape}; cutile_call needs "
                                  f"concrete sizes (no shape polymorphism)")
    stand_in = AbstractArray(tuple(array.shape), jnp.dtype(array.dtype))
    role: tuple[int | str, ...] = ("i", len(call.inputs))
    if isinstance(value, InputOutput):
        role = ("io", len(call.inputs), len(call.outputs))
        call.outputs.append(jax.ShapeDtypeStruct(array.shape, array.dtype))
    call.roles[id(stand_in)] = role
    call.inputs.append(array)
    return stand_in


def prepare(kernel: Kernel, call: Call, backend: str, arch: str | None,
            compile_: Callable[[VariantKey, list[Any]], Any]) -> tuple[Any, list[Any]]:
    """(what `compile_(key, flat)` makes of this call's kernel, `flat`): `key` is the runtime's
    VariantKey for the stand-ins, `flat` the argument list `Kernel.describe` gives for them (one
    entry per IR parameter: ArrayArgs holding the stand-ins, scalars as numbers). Compiled once
    per key and roles of the arrays (_COMPILE_CACHE)."""
    specs, arrays, flat = kernel.describe(call.args)
    key = VariantKey(specs, tuple(a.facts for a in arrays), backend, arch)
    roles = tuple(call.roles[id(x.data)][0] if isinstance(x, ArrayArg) else "" for x in flat)
    with _lock:  # keyed by the kernel's id, which the entry keeps alive (kernels do not hash)
        hit = _COMPILE_CACHE.get((id(kernel), key, roles))
        if hit is None:
            hit = _COMPILE_CACHE[(id(kernel), key, roles)] = (kernel, compile_(key, flat))
    return hit[1], flat


def check_inputs_unwritten(kernel: Kernel, call: Call, flat: list[Any], ir: Any) -> None:
    """A located TileArgumentError when the kernel may store into an array passed as a plain
    input: JAX arrays are immutable (on the GPU the store would corrupt a buffer XLA still uses)."""
    for i, _ in sorted(written_params(ir)):
        arg = flat[i] if i < len(flat) else None
        if isinstance(arg, ArrayArg) and call.roles[id(arg.data)][0] == "i":
            raise kernel.located(ArgumentError(arg.name.split("[", 1)[0], (
                f"Argument `{arg.name}` is a JAX array that the kernel writes to (a store, scatter or atomic); "
                f"JAX arrays are immutable: pass InputOutput({arg.name}) to update it, or an OutputPlaceholder "
                f"for a new array")))
