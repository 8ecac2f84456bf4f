"""An entry point for launchers that pass a kernel's Triton arguments in their own order.

A launcher such as jax_triton (used by tilecraft.jax) passes a kernel's inputs and scalars first
and the output buffers last, and types each scalar by its value (i32 for a small int, fp64 for
a float, a constant for 1). `external_entry` appends to the kernel's generated module a
`@triton.jit` entry that takes the kernel's parameters in the order asked for, with extra
pointer parameters the kernel does not use where asked, casts each scalar to the type the kernel
declares, and calls the kernel, which Triton inlines: the compiled code is the kernel's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from .compile import TritonKernel, _load, write_source
from .lower import LoweredKernel
from .spelling import SIGNATURE_TYPES, tl_dtype

_TL_TYPES = {SIGNATURE_TYPES[d]: tl_dtype(d) for d in SIGNATURE_TYPES}
"""Triton signature type -> `tl.` type (the dtypes that share a spelling share the `tl` type)."""


@dataclass(frozen=True)
class ExternalEntry:
    """The entry of `external_entry`: `fn` (a JITFunction, or an InterpretedFunction when the
    kernel runs under Triton's interpreter) takes the arguments in the entry's order; `lowered`
    is the kernel's module with the entry as its kernel (`lowered.signature`: the entry's
    parameters and their Triton types; `lowered.config.options`: the kernel's launch options)."""

    fn: Any
    lowered: LoweredKernel


def external_entry(kernel: TritonKernel, order: Sequence[int | str]) -> ExternalEntry:
    """An entry for `kernel` whose j-th parameter is the kernel's Triton parameter `order[j]` (a
    position in `kernel.lowered.signature`), or, where `order[j]` is a pointer type such as
    "*fp32", a pointer the kernel does not use (a launcher's extra buffer). Every parameter of
    the kernel appears exactly once."""
    lowered = kernel.lowered
    names, types = list(lowered.signature), list(lowered.signature.values())
    positions = sorted(i for i in order if isinstance(i, int))
    if positions != list(range(len(names))):
        raise ValueError(f"order {list(order)} must name each of the {len(names)} parameters of "
                         f"`{lowered.name}` exactly once")
    taken = {*names, lowered.name, *lowered.helpers, *re.findall(r"\b\w+\b", lowered.source)}
    params: list[str] = []
    signature: dict[str, str] = {}
    call: list[str] = [""] * len(names)
    aligned = []
    for j, item in enumerate(order):
        if isinstance(item, str):
            if not item.startswith("*"):
                raise ValueError(f"order[{j}] = {item!r}: an unused parameter must be a pointer type such as '*fp32'")
            name = _fresh(f"unused{j}", taken)
            signature[name] = item
        else:
            name, kind = names[item], types[item]
            signature[name] = kind
            call[item] = name if kind.startswith("*") else f"tl.cast({name}, {_TL_TYPES[kind]})"
            if item in lowered.aligned:
                aligned.append(j)
        params.append(name)
    entry = _fresh(f"{lowered.name}_entry", taken)
    head = lowered.source.rstrip("\n") + "\n\n\n"
    text = f"@triton.jit\ndef {entry}({', '.join(params)}):\n    {lowered.name}({', '.join(call)})\n"
    entry_lowered = replace(lowered, name=entry, source=head + text, signature=signature, aligned=tuple(aligned),
                            flatten="lambda *args: args", helpers=(*lowered.helpers, lowered.name),
                            def_line=head.count("\n") + 2, grid_params=())
    path = write_source(entry, entry_lowered.source)
    return ExternalEntry(_load(path, entry_lowered, kernel.interpret), entry_lowered)


def triton_arguments(kernel: TritonKernel, args: Sequence[Any]) -> tuple:
    """The Triton arguments of a launch of `kernel` with `args` (one per IR parameter, as for
    `TritonKernel.launch`), in the order of `kernel.lowered.signature`."""
    return kernel._flatten(*args)


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name
