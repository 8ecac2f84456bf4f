"""`cutile_call` on the host: the kernel runs on a CPU backend (the NumPy interpreter by default)
inside `jax.pure_callback`, eagerly or under `jax.jit`, on any JAX platform.

The callback gets the inputs as NumPy arrays, makes each new output (uninitialized, as XLA's
buffers are) and a copy of each InputOutput array, and launches the kernel on them with
`ct.launch`; it returns the outputs.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..backends.registry import BackendSpec
from ..runtime.args import AbstractArray
from ..runtime.kernel import Kernel, VariantKey
from ..runtime.launch import launch
from .call import Call, check_inputs_unwritten, prepare


def call_on_host(kernel: Kernel, grid: tuple[int, int, int], call: Call, spec: BackendSpec) -> list[Any]:
    """The outputs of `kernel` run on `spec`'s backend (a CPU one) through `jax.pure_callback`."""
    def compile_(key: VariantKey, flat: list[Any]) -> None:
        variant = kernel.variant(key, spec)  # compile errors surface here, while JAX traces
        check_inputs_unwritten(kernel, call, flat, variant.ir)

    prepare(kernel, call, spec.name, None, compile_)

    def run(*inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        outputs: list[np.ndarray] = [np.empty(o.shape, o.dtype) for o in call.outputs]
        arrays: dict[int, np.ndarray] = {}
        for key, role in call.roles.items():
            if role[0] == "i":
                arrays[key] = np.asarray(inputs[role[1]])
            elif role[0] == "o":
                arrays[key] = outputs[role[1]]
            else:
                arrays[key] = outputs[role[2]] = np.array(inputs[role[1]], copy=True)
        launch(None, grid, kernel, _substitute(call.args, arrays), backend=spec.name)
        return tuple(outputs)

    return list(jax.pure_callback(run, tuple(call.outputs), *call.inputs))


def _substitute(value: Any, arrays: dict[int, np.ndarray]) -> Any:
    """`value` (kernel arguments) with each stand-in replaced by its array."""
    if isinstance(value, tuple):
        return tuple(_substitute(v, arrays) for v in value)
    return arrays[id(value)] if isinstance(value, AbstractArray) else value
